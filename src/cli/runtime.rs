//! The runtime a command that talks to the cluster runs on.

use std::io::Write;
use std::process::ExitCode;

use anyhow::Context;

/// Runs a command that talks to the cluster (`audit`, `doctor`) on a
/// runtime of its own, with rustls' ring provider installed (kube's client
/// cannot choose one itself).
pub(super) fn run_in_runtime(
    command: impl std::future::Future<Output = anyhow::Result<ExitCode>>,
) -> anyhow::Result<ExitCode> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the runtime")?
        .block_on(command)
}

/// The lines of the reports written: on stdout, or on stderr when `-o` took it.
pub(super) fn print_written(
    lines: &[impl std::fmt::Display],
    output_on_stdout: bool,
) -> std::io::Result<()> {
    for line in lines {
        match output_on_stdout {
            false => writeln!(std::io::stdout(), "{line}")?,
            true => writeln!(std::io::stderr(), "{line}")?,
        }
    }
    Ok(())
}
