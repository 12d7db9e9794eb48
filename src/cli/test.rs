//! `gpu-policy test PATH...` (its exit status: `cli::Command::Test`; its
//! files: docs/policy.md, "Testing a configuration"): [`file`](mod@file)
//! reads them, [`run`](fn@run) evaluates the cases, [`table`] and [`junit`]
//! write the outcomes.

mod file;
mod junit;
mod run;
mod table;

use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use clap::ValueEnum;

use super::Engine;
use run::CaseOutcome;

#[derive(Debug, clap::Args)]
pub struct TestArgs {
    /// Test files, or folders searched recursively for
    /// *.gpu-policy-test.yaml (and .yml).
    #[arg(value_name = "PATH", required = true)]
    pub paths: Vec<PathBuf>,
    /// What decides: the webhook's rules, or the generated admission
    /// policies in CEL (as `check --engine cel`); cases whose `engines`
    /// leave it out are skipped.
    #[arg(long, value_enum, default_value_t = Engine::Webhook)]
    pub engine: Engine,
    /// Output format on stdout.
    #[arg(short = 'o', long = "output", value_enum, default_value_t = TestOutput::Text)]
    pub output: TestOutput,
    /// Also write the JUnit XML report to FILE (whatever -o prints).
    #[arg(long, value_name = "FILE")]
    pub junit_file: Option<PathBuf>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum TestOutput {
    /// A table of the cases, each failure's differences, a summary.
    Text,
    /// JUnit XML: a testsuite per test, a testcase per case.
    Junit,
}

/// Reads every test file first (all their problems reported together, a
/// line each), then runs them.
pub fn run(args: &TestArgs) -> anyhow::Result<ExitCode> {
    let mut problems = Vec::new();
    let mut paths: Vec<PathBuf> = Vec::new();
    for path in &args.paths {
        match file::find(path) {
            Ok(found) => paths.extend(found),
            Err(err) => problems.push(err.to_string()),
        }
    }
    // A file named twice (itself, and in its folder) is run once.
    let mut seen = std::collections::BTreeSet::new();
    paths.retain(|path| seen.insert(path.clone()));
    let mut tests = Vec::new();
    for path in &paths {
        match file::load(path) {
            Ok(found) => tests.extend(found),
            Err(errors) => problems.extend(errors.iter().map(ToString::to_string)),
        }
    }
    if !problems.is_empty() {
        bail!(problems.join("\n"));
    }
    let runs =
        tests.iter().map(|test| run::run(test, args.engine)).collect::<Result<Vec<_>, _>>()?;

    if let Some(path) = &args.junit_file {
        std::fs::write(path, junit::render(&runs, args.engine)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    let text = match args.output {
        TestOutput::Text => table::render(&runs, args.engine),
        TestOutput::Junit => junit::render(&runs, args.engine)?,
    };
    super::args::print(&text).context("cannot write the output")?;
    let failed = runs
        .iter()
        .flat_map(|run| &run.outcomes)
        .any(|outcome| matches!(outcome, CaseOutcome::Failed(_)));
    Ok(super::args::exit_status(failed))
}

/// A document of a `gpu-policy test` file (`apiVersion:
/// gpu-policy.io/v1alpha1`, `kind: Test`), which `check` skips.
pub(super) fn is_test_file(object: &serde_json::Value) -> bool {
    object.get("apiVersion").and_then(serde_json::Value::as_str) == Some(file::TEST_API_VERSION)
        && object.get("kind").and_then(serde_json::Value::as_str) == Some(file::TEST_KIND)
}
