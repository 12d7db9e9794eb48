//! Strict schema validation of YAML document streams with the Python tool
//! `kubernetes-validate` (the OpenAPI schemas of each Kubernetes release as
//! JSON Schema; strict: a field the release does not know is an error).
//!
//! The tool is the one pinned in `tests/python/requirements.txt`, installed
//! in the tests' virtualenv `target/test-venv` by `tests/python/venv.sh`,
//! which `.ci/run` runs before the tests. A test that needs it and does not
//! find it fails, saying so: a schema check that is skipped would pass
//! anything.

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

fn venv_bin(program: &str) -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/test-venv/bin").join(program);
    assert!(
        path.is_file(),
        "{} is not installed: `.ci/run` installs kubernetes-validate \
         (tests/python/requirements.txt) in target/test-venv before the tests; \
         `bash tests/python/venv.sh` does only that",
        path.display()
    );
    path
}

/// The newest Kubernetes release the installed `kubernetes-validate` has
/// schemas for (the version it validates against when given none).
/// The newest release whose schemas the installed tool ships.
pub fn newest_version() -> String {
    let output = Command::new(venv_bin("python"))
        .args([
            "-c",
            "from kubernetes_validate.utils import latest_version; print(latest_version())",
        ])
        .output()
        .expect("the virtualenv's python runs");
    assert!(
        output.status.success(),
        "kubernetes-validate has no latest_version: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let version = String::from_utf8(output.stdout).expect("UTF-8");
    version.trim().to_owned()
}

/// Validates every document of the YAML stream `yaml` against the schemas
/// of Kubernetes `version` (such as "1.30"), strictly.
///
/// `Err` holds the tool's report, one line per problem: a document that
/// does not validate (`ERROR ...: path: message`), and also a kind the
/// release has no schema for (`WARN ... Couldn't find schema ...`), which
/// the tool itself lets pass with exit status 0 — a kind the release does
/// not serve is a failure here.
pub fn validate_strict(yaml: &str, version: &str) -> Result<(), Vec<String>> {
    let mut child = Command::new(venv_bin("kubernetes-validate"))
        // `-` reads stdin, once: so one process per release.
        .args(["--strict", "--quiet", "-k", version, "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kubernetes-validate starts");
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(yaml.as_bytes())
        .expect("kubernetes-validate reads its input");
    let output = child.wait_with_output().expect("kubernetes-validate ends");
    // --quiet prints nothing for a document that passes.
    let problems: Vec<String> = String::from_utf8_lossy(&output.stdout)
        .lines()
        .chain(String::from_utf8_lossy(&output.stderr).lines())
        .filter(|l| !l.trim().is_empty())
        .map(str::to_owned)
        .collect();
    if output.status.success() && problems.is_empty() {
        Ok(())
    } else if problems.is_empty() {
        Err(vec![format!("kubernetes-validate failed ({}) without a message", output.status)])
    } else {
        Err(problems)
    }
}
