//! The policy report CRDs of `tests/crds/` (wgpolicyk8s.io and
//! openreports.io, copied from upstream), strict validation of objects
//! against their `openAPIV3Schema` (`tests/python/validate_crd.py`, in the
//! tests' virtualenv: Python's jsonschema, which kubernetes-validate
//! brings), and the results of a stored report read back.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

/// `tests/crds/*.yaml`, sorted: the four report CRDs.
pub fn files() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/crds");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|err| panic!("{}: {err}", dir.display()))
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 4, "the four report CRDs: {files:?}");
    files
}

/// Validates every object against the schema its CRD gives its apiVersion
/// and kind, strictly (a field the schema does not list is an error: the
/// API server would prune it). Ok: the summary line; Err: the problems and
/// the summary, one a line.
pub fn validate(objects: &[Value]) -> Result<String, String> {
    let mut child = Command::new("bash")
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .arg("tests/python/venv.sh")
        .arg("tests/python/validate_crd.py")
        .args(files())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the CRD validator starts");
    let input = serde_json::to_vec(objects).expect("JSON");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(&input)
        .expect("the validator reads its input");
    let output = child.wait_with_output().expect("the validator ends");
    let stdout = String::from_utf8_lossy(&output.stdout).trim().to_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).trim().to_owned();
    if output.status.success() { Ok(stdout) } else { Err(format!("{stdout}\n{stderr}")) }
}

/// One result of a report as the tests compare them: (`result`, `rule`,
/// the name of the object); `""` for what it lacks.
pub type Row = (String, String, String);

/// A [`Row`].
pub fn row(result: &str, rule: &str, name: &str) -> Row {
    (result.to_owned(), rule.to_owned(), name.to_owned())
}

/// The rows of a report's results (a report object as JSON), in order.
pub fn rows(report: &Value) -> Vec<Row> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (text(&r["result"]), text(&r["rule"]), text(&r["resources"][0]["name"])))
        .collect()
}
