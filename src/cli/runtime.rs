//! The runtime a command that talks to the cluster runs on.

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
