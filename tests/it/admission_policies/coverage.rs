//! `gpu-policy manifests --admission-policies --coverage`: what the
//! admission policies cover, rule by rule, printed from the rule registry
//! (each entry's generated policies and the reasons its `ApiServer`
//! gives). docs/policy.md's coverage table is its output on the default
//! settings.
//!
//! # Updating the docs
//!
//! After a change of the registry, rewrite the table between the markers
//! and review the diff:
//!
//! ```sh
//! UPDATE_GOLDEN=1 cargo test --test it admission_policies::coverage
//! git diff docs/policy.md
//! ```

use crate::support::generated_docs::assert_section;
use crate::support::process::gpu_policy;

const BEGIN: &str = "<!-- coverage-table:begin: printed from the rule registry (crates/policy-core/src/policy/rules/mod.rs) -->\n";
const END: &str = "<!-- coverage-table:end -->\n";

#[test]
fn the_docs_coverage_table_is_the_commands_output() {
    let run = gpu_policy(&["manifests", "--admission-policies", "--coverage"], None).success();
    assert_section(
        "docs/policy.md",
        BEGIN,
        END,
        &run.stdout,
        "--test it admission_policies::coverage",
    );
}

/// The table follows the configuration: without a runtime class to
/// inject, R3 has no mutating policy.
#[test]
fn the_table_follows_the_config() {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = dir.path().join("config.yaml");
    std::fs::write(&config, "runtimeClassName: ''\n").expect("config writes");
    let config = config.to_str().expect("a UTF-8 path");
    let run =
        gpu_policy(&["manifests", "--admission-policies", "--coverage", "--config", config], None)
            .success();
    let r3 = run.stdout.lines().find(|line| line.starts_with("| R3 ")).expect("a row for R3");
    assert!(r3.contains("`gpu-policy-runtime-class` (validating) |"), "{r3}");
    assert!(!r3.contains("(mutating)"), "{r3}");
}

/// docs/compatibility.md's table of what each release serves is the
/// program's (`UPDATE_GOLDEN=1 cargo test --test it admission_policies::coverage`
/// rewrites it).
#[test]
fn the_docs_compatibility_table_is_the_programs() {
    let table = gpu_policy::admission_policy::coverage::compatibility_table(
        &gpu_policy::settings::Settings::default(),
    );
    assert_section(
        "docs/compatibility.md",
        "<!-- features:begin: printed from crates/policy-core/src/kubernetes_version.rs and the policy generators -->\n",
        "<!-- features:end -->\n",
        table.trim_end(),
        "--test it admission_policies::coverage",
    );
}
