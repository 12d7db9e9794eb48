//! The Helm chart renders the same objects as `gpu-policy manifests`, lints
//! clean, and validates against the Kubernetes schemas; its bundled
//! admission policies are the output of `gpu-policy manifests
//! --admission-policies` for its default config, and refused for another. The checks are in
//! `tests/chart/test_chart.py` (Helm's own Go library through the Python
//! package helm-python-sdk, and kubernetes-validate); `tests/chart/run.sh`
//! runs them in the tests' virtualenv (`tests/python/venv.sh`).

use std::process::Command;

use crate::support::script::run_ok;

#[test]
fn chart_matches_the_program_and_the_schemas() {
    let (stdout, _) = run_ok(
        Command::new("bash")
            .arg("tests/chart/run.sh")
            .env("GPU_POLICY_BIN", env!("CARGO_BIN_EXE_gpu-policy")),
        "the chart checks",
    );
    assert!(
        stdout.lines().any(|l| l.ends_with(" 0 failed") || l.contains(" passed, 0 failed")),
        "no summary line:\n{stdout}"
    );
}
