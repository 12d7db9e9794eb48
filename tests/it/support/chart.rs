//! The Helm chart `charts/gpu-policy` rendered by Helm's own library, as
//! `tests/chart/run.sh --render` does it (the tests' virtualenv).

use std::process::Command;

use serde_json::Value;

use super::script::run_ok;

/// The objects the chart renders for `values` (merged over values.yaml),
/// NOTES.txt aside.
pub fn render(values: &Value) -> Vec<Value> {
    let (stdout, _) = run_ok(
        Command::new("bash")
            .args(["tests/chart/run.sh", "--render", &values.to_string()])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("GPU_POLICY_BIN", env!("CARGO_BIN_EXE_gpu-policy")),
        "rendering the chart",
    );
    serde_json::from_str(&stdout)
        .unwrap_or_else(|err| panic!("the rendered chart is not a JSON list ({err}): {stdout}"))
}
