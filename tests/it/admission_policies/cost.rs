//! `gpu-policy manifests --admission-policies --cost`: the cost tables of
//! docs/policy.md are its output on the default settings, and its exit
//! status says whether a policy is over the API server's limits.
//!
//! # Updating the docs
//!
//! After a change of the policies or of the cost model, rewrite the tables
//! between the markers and review the diff:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test --test it admission_policies::cost
//! git diff docs/policy.md
//! ```

use crate::support::generated_docs::assert_section;
use crate::support::process::gpu_policy;

const BEGIN: &str = "<!-- cost-table:begin: gpu-policy manifests --admission-policies --mutating-policies --cost -->\n";
const END: &str = "<!-- cost-table:end -->\n";

#[test]
fn the_docs_cost_tables_are_the_commands_output() {
    let run =
        gpu_policy(&["manifests", "--admission-policies", "--mutating-policies", "--cost"], None)
            .success();
    assert_section("docs/policy.md", BEGIN, END, &run.stdout, "--test it admission_policies::cost");
}

#[test]
fn a_policy_over_a_limit_fails_the_command() {
    // 2,000 GPU resource patterns: each container's resources are matched
    // against every one, past the per-call limit on the reference pod.
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.yaml");
    let patterns: String = (0..2000).map(|i| format!("- example.com/gpu-{i}*\n")).collect();
    std::fs::write(&config, format!("gpuResources:\n{patterns}")).expect("config writes");
    let run = gpu_policy(
        &[
            "manifests",
            "--admission-policies",
            "--cost",
            "--config",
            config.to_str().expect("UTF-8 path"),
        ],
        None,
    );
    assert_eq!(run.code, 1, "{}\n{}", run.stdout, run.stderr);
    assert!(run.stdout.contains("| **over** |"), "{}", run.stdout);
    assert_eq!(
        run.stderr.lines().collect::<Vec<_>>(),
        ["gpu-policy: over the API server's cost limits on the reference object: \
          gpu-policy-bounded-requests (ValidatingAdmissionPolicy), \
          gpu-policy-runtime-class (ValidatingAdmissionPolicy), \
          gpu-policy-device-paths (ValidatingAdmissionPolicy)"]
    );
}

#[test]
fn cost_needs_admission_policies_and_a_readable_config() {
    assert_eq!(gpu_policy(&["manifests", "--cost"], None).code, 2);
    let run = gpu_policy(
        &["manifests", "--admission-policies", "--cost", "--config", "/nonexistent/config.yaml"],
        None,
    );
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}
