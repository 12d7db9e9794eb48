//! The runtime a command that talks to the cluster runs on.

use std::process::ExitCode;

use super::args::EXIT_BAD_INPUT;

/// Runs a command that talks to the cluster (`audit`, `doctor`) on a
/// runtime of its own, with rustls' ring provider installed (kube's client
/// cannot choose one itself); its error, and a runtime that cannot start,
/// are one line on stderr and exit 2.
pub(super) fn run_in_runtime(
    command: impl std::future::Future<Output = Result<ExitCode, String>>,
) -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(error) => {
            eprintln!("gpu-policy: cannot start the runtime: {error}");
            return ExitCode::from(EXIT_BAD_INPUT);
        }
    };
    match runtime.block_on(command) {
        Ok(code) => code,
        Err(message) => {
            eprintln!("gpu-policy: {message}");
            ExitCode::from(EXIT_BAD_INPUT)
        }
    }
}
