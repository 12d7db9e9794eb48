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

use std::path::Path;

use crate::support::process::gpu_policy;

const BEGIN: &str = "<!-- cost-table:begin: gpu-policy manifests --admission-policies --mutating-policies --cost -->\n";
const END: &str = "<!-- cost-table:end -->\n";

fn update() -> bool {
    std::env::var_os("UPDATE_GOLDEN").is_some_and(|v| v == "1")
}

#[test]
fn the_docs_cost_tables_are_the_commands_output() {
    let run = gpu_policy(
        &[
            "manifests",
            "--admission-policies",
            "--mutating-policies",
            "--cost",
        ],
        None,
    )
    .success();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/policy.md");
    let docs = std::fs::read_to_string(&path).expect("docs/policy.md reads");
    let start = docs
        .find(BEGIN)
        .expect("docs/policy.md has the begin marker")
        + BEGIN.len();
    let end = start
        + docs[start..]
            .find(END)
            .expect("docs/policy.md has the end marker");
    let expected = format!("\n{}\n", run.stdout);
    if update() {
        let updated = format!("{}{expected}{}", &docs[..start], &docs[end..]);
        std::fs::write(&path, updated).expect("docs/policy.md writes");
        return;
    }
    assert!(
        docs[start..end] == expected,
        "docs/policy.md's cost tables differ from the command's output; run \
         `UPDATE_GOLDEN=1 cargo test --test it admission_policies::cost` and review \
         `git diff docs/policy.md`\n\n{}",
        run.stdout
    );
}

#[test]
fn a_policy_over_a_limit_fails_the_command() {
    // 2,000 GPU resource patterns: each container's resources are matched
    // against every one, past the per-call limit on the reference pod.
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.yaml");
    let patterns: String = (0..2000)
        .map(|i| format!("- example.com/gpu-{i}*\n"))
        .collect();
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
        [
            "gpu-policy: over the API server's cost limits on the reference object: \
          gpu-policy-bounded-requests (ValidatingAdmissionPolicy), \
          gpu-policy-runtime-class (ValidatingAdmissionPolicy), \
          gpu-policy-device-paths (ValidatingAdmissionPolicy)"
        ]
    );
}

#[test]
fn cost_needs_admission_policies_and_a_readable_config() {
    assert_eq!(gpu_policy(&["manifests", "--cost"], None).code, 2);
    let run = gpu_policy(
        &[
            "manifests",
            "--admission-policies",
            "--cost",
            "--config",
            "/nonexistent/config.yaml",
        ],
        None,
    );
    assert_eq!(run.code, 2);
    assert!(run.stdout.is_empty());
    assert_eq!(run.stderr.lines().count(), 1, "{}", run.stderr);
}
