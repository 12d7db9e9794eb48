//! Running the tests' scripts.

use std::process::Command;

/// Runs `command`, asserts that it succeeds (`what` failed, with its
/// output, otherwise) and returns its stdout and stderr.
pub fn run_ok(command: &mut Command, what: &str) -> (String, String) {
    let output =
        command.output().unwrap_or_else(|err| panic!("{what}: cannot run {command:?}: {err}"));
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(output.status.success(), "{what} failed ({}):\n{stdout}\n{stderr}", output.status);
    (stdout, stderr)
}
