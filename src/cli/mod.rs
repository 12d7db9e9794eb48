//! The command line: `gpu-policy check` (offline) and the server commands.

mod args;
mod audit;
mod check;
mod doctor;
mod manifests;
mod nodes;
mod runtime;
mod serve;
mod test;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

pub use args::{CheckArgs, CheckOutput, EXIT_BAD_INPUT, Engine, ModeArg};

#[derive(Debug, Parser)]
#[command(
    name = "gpu-policy",
    version,
    about = "Kubernetes admission webhook that enforces NVIDIA GPU policy"
)]
pub struct Cli {
    #[command(subcommand)]
    pub command: Command,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Evaluate manifests offline, as the webhook would admit them.
    ///
    /// Exit status: 0 when every object is allowed, 1 when something is
    /// denied, 2 for bad input.
    Check(CheckArgs),
    /// Report what the policy would change or deny for what already runs
    /// in opted-in namespaces (read-only, unless --write-reports writes the
    /// findings as policy reports).
    ///
    /// Exit status: 0 when nothing violates, 1 when something does, 2 when
    /// the cluster cannot be read. With --write-reports: 0 once the reports
    /// are written.
    Audit(audit::AuditArgs),
    /// Find what keeps GPUs from showing up (capacity, GPU Feature
    /// Discovery's labels, the RuntimeClass, the device plugin, DRA) and
    /// what keeps gpu-policy from working, from one read of the cluster;
    /// print each finding with its evidence and fix.
    ///
    /// Exit status: 0 when nothing is found, 1 with findings, 2 when the
    /// cluster cannot be read. With --write-report: 0 once the report is
    /// written.
    Doctor(doctor::DoctorArgs),
    /// Print the complete install (namespace, RBAC, Deployment, Service,
    /// PodDisruptionBudget, ConfigMap, webhook configurations) as YAML; with
    /// --webhook-url, what a server outside the cluster needs; with
    /// --admission-policies, the policies the API server evaluates itself.
    ///
    /// With --admission-policies --cost, their CEL cost against the API
    /// server's limits instead; exit status 1 when one is over.
    Manifests(manifests::ManifestsArgs),
    /// Serve the admission webhook over HTTPS.
    ///
    /// Without --tls-cert, a CA and a serving certificate are generated into
    /// --certs-dir (and reused while valid).
    Serve(serve::ServeArgs),
    /// Run test files: what a policy configuration must decide for given
    /// objects (allowed, rules violated, messages, warnings, the patched
    /// object), as `check` decides it.
    ///
    /// Exit status: 0 when every case passes, 1 when one fails, 2 for bad
    /// input.
    Test(test::TestArgs),
}

pub fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            // clap prints help and version to stdout with success, usage
            // errors to stderr with status 2.
            let _ = err.print();
            return if err.use_stderr() {
                ExitCode::from(EXIT_BAD_INPUT)
            } else {
                ExitCode::SUCCESS
            };
        }
    };
    // The server's flags are checked by clap: once it runs, what stops it
    // is a failure (1), not bad input (2).
    let failed = match cli.command {
        Command::Serve(_) => ExitCode::FAILURE,
        _ => ExitCode::from(EXIT_BAD_INPUT),
    };
    let outcome = match cli.command {
        Command::Check(args) => check::run(&args),
        Command::Serve(args) => serve::run(&args),
        Command::Audit(args) => audit::run(&args),
        Command::Doctor(args) => doctor::run(&args),
        Command::Manifests(args) => manifests::run(&args),
        Command::Test(args) => test::run(&args),
    };
    outcome.unwrap_or_else(|error| {
        // `test` names every bad test file at once, a line each.
        for line in message(&error).lines() {
            eprintln!("gpu-policy: {line}");
        }
        failed
    })
}

/// The message of `error` and of each cause it does not already end with
/// (the libraries' errors end their own message with their source).
fn message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.is_empty() {
            message = text;
        } else if !message.ends_with(&text) {
            message = format!("{message}: {text}");
        }
    }
    message
}

#[cfg(test)]
mod tests;
