//! The text output of `gpu-policy test`: one row per case (file, test,
//! object, result, why), then every difference of each failing case on a
//! line of its own, then a summary line.

use super::run::{CaseOutcome, Difference, TestRun, cut};
use crate::cli::args::Engine;

/// How much of the first difference the WHY column shows (the lines below
/// the table have it whole).
const WHY_CHARS: usize = 100;

/// How many cases passed, failed and were skipped.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct Totals {
    pub passed: usize,
    pub failed: usize,
    pub skipped: usize,
}

impl Totals {
    pub fn of<'a>(outcomes: impl IntoIterator<Item = &'a CaseOutcome>) -> Self {
        let mut totals = Totals::default();
        for outcome in outcomes {
            match outcome {
                CaseOutcome::Passed(_) => totals.passed += 1,
                CaseOutcome::Failed(_) => totals.failed += 1,
                CaseOutcome::Skipped(_) => totals.skipped += 1,
            }
        }
        totals
    }

    pub fn cases(self) -> usize {
        self.passed + self.failed + self.skipped
    }
}

/// The table, the failures and the summary.
pub fn render(runs: &[TestRun<'_>], engine: Engine) -> String {
    let mut rows: Vec<[String; 5]> =
        vec![["FILE".into(), "TEST".into(), "OBJECT".into(), "RESULT".into(), "WHY".into()]];
    let mut failures = String::new();
    for run in runs {
        let test = run.test;
        for (case, outcome) in test.cases.iter().zip(&run.outcomes) {
            let (result, why) = match outcome {
                CaseOutcome::Passed(checked) => ("pass", checked.join(", ")),
                CaseOutcome::Skipped(engines) => ("skip", format!("engines: {engines}")),
                CaseOutcome::Failed(differences) => {
                    failures.push_str(&format!(
                        "FAIL {}: {}: cases[{}] {}\n",
                        test.file, test.name, case.index, case.object
                    ));
                    for difference in differences {
                        failures.push_str(&format!("  {}\n", cell(&difference.to_string())));
                    }
                    // The first difference, without the object the row names.
                    let first = differences.first().map(Difference::detail).unwrap_or_default();
                    let mut why = cut(&first, WHY_CHARS);
                    if differences.len() > 1 {
                        why.push_str(&format!(" (+{} more)", differences.len() - 1));
                    }
                    ("FAIL", why)
                }
            };
            rows.push([
                test.file.clone(),
                test.name.clone(),
                case.object.to_string(),
                result.to_owned(),
                why,
            ]);
        }
    }
    let mut widths = [0usize; 5];
    for row in &rows {
        for (width, text) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell(text).chars().count());
        }
    }
    let mut text = String::new();
    for row in &rows {
        let mut line = String::new();
        for (column, (width, value)) in widths.iter().zip(row).enumerate() {
            let value = cell(value);
            if column + 1 == row.len() {
                line.push_str(&value);
            } else {
                let pad = width - value.chars().count();
                line.push_str(&value);
                line.push_str(&" ".repeat(pad + 2));
            }
        }
        text.push_str(line.trim_end());
        text.push('\n');
    }
    if !failures.is_empty() {
        text.push('\n');
        text.push_str(&failures);
    }
    let totals = Totals::of(runs.iter().flat_map(|run| &run.outcomes));
    let mut files: Vec<&str> = runs.iter().map(|run| run.test.file.as_str()).collect();
    files.dedup();
    text.push_str(&format!(
        "\n{} in {} of {} ({} engine): {} passed, {} failed, {} skipped\n",
        counted(totals.cases(), "case"),
        counted(runs.len(), "test"),
        counted(files.len(), "file"),
        engine_name(engine),
        totals.passed,
        totals.failed,
        totals.skipped
    ));
    text
}

pub fn engine_name(engine: Engine) -> &'static str {
    match engine {
        Engine::Webhook => "webhook",
        Engine::Cel => "cel",
    }
}

/// `1 case`, `2 cases`.
fn counted(n: usize, noun: &str) -> String {
    if n == 1 { format!("{n} {noun}") } else { format!("{n} {noun}s") }
}

/// A cell on one line: control characters (a name with a line break)
/// shown as `?`.
fn cell(text: &str) -> String {
    text.chars().map(|c| if c.is_control() { '?' } else { c }).collect()
}
