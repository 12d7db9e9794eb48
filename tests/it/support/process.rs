//! Running a program to completion: the built binary (`gpu-policy check`,
//! `manifests`, `audit`) or a tool such as `kubectl`, with its exit status,
//! stdout and stderr.

use std::ffi::OsStr;
use std::io::Write;
use std::process::{Command, Stdio};

use serde_json::Value;

/// What one run of a program gave.
#[derive(Debug)]
pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// stdout as one JSON array.
    pub fn json(&self) -> Vec<Value> {
        match self.value() {
            Value::Array(items) => items,
            other => panic!("expected one JSON array, got {other}"),
        }
    }

    /// stdout as one JSON value.
    pub fn value(&self) -> Value {
        serde_json::from_str(&self.stdout)
            .unwrap_or_else(|err| panic!("stdout is not JSON ({err}):\n{}", self.stdout))
    }

    pub fn lines(&self) -> Vec<&str> {
        self.stdout.lines().collect()
    }

    pub fn last_line(&self) -> &str {
        self.stdout.lines().last().unwrap_or("")
    }

    /// Panics with both streams unless the program exited 0.
    #[track_caller]
    pub fn success(self) -> Self {
        assert_eq!(
            self.code, 0,
            "exit code {}\nstdout:\n{}\nstderr:\n{}",
            self.code, self.stdout, self.stderr
        );
        self
    }
}

/// Runs `command` to completion, feeding `stdin` (empty when `None`).
pub fn run_command(mut command: Command, stdin: Option<&str>) -> Run {
    let mut child = command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|err| panic!("{command:?} starts: {err}"));
    {
        let mut input = child.stdin.take().expect("stdin is piped");
        if let Some(text) = stdin {
            input.write_all(text.as_bytes()).expect("write stdin");
        }
    }
    let output = child.wait_with_output().expect("the program finishes");
    Run {
        code: output.status.code().expect("exited, not killed"),
        stdout: String::from_utf8(output.stdout).expect("stdout is UTF-8"),
        stderr: String::from_utf8(output.stderr).expect("stderr is UTF-8"),
    }
}

/// Runs the built `gpu-policy` with `args`.
pub fn gpu_policy<S: AsRef<OsStr>>(args: &[S], stdin: Option<&str>) -> Run {
    let mut command = Command::new(env!("CARGO_BIN_EXE_gpu-policy"));
    command.args(args).env_remove("NO_COLOR");
    run_command(command, stdin)
}

/// [`gpu_policy`] from a test whose servers (the fake API server) run in
/// its own runtime: on a blocking thread, so that they keep answering.
pub async fn gpu_policy_beside(args: Vec<String>) -> Run {
    tokio::task::spawn_blocking(move || gpu_policy(&args, None)).await.expect("the run ends")
}
