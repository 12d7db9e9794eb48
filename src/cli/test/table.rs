//! The text output of `gpu-policy test`: one row per case (file, test,
//! object, result, why), then every difference of each failing case on a
//! line of its own, then a summary line.

use super::run::{CaseOutcome, Difference, TestRun};
use crate::admission::answer::cut;
use crate::cli::args::Engine;

/// How much of the first difference the WHY column shows (the lines below
/// the table have it whole).
const WHY_CHARS: usize = 100;

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
                    let first = differences.first().map(Difference::detail).unwrap_or_default();
                    let mut why = cut(&first, WHY_CHARS);
                    if differences.len() > 1 {
                        why.push_str(&format!(" (+{} more)", differences.len() - 1));
                    }
                    ("FAIL", why)
                }
            };
            let row: [&str; 5] = [&test.file, &test.name, &case.object.to_string(), result, &why];
            rows.push(row.map(cell));
        }
    }
    let mut widths = [0usize; 5];
    for row in &rows {
        for (width, text) in widths.iter_mut().zip(row) {
            *width = (*width).max(text.chars().count());
        }
    }
    let mut text = String::new();
    for row in &rows {
        let line: String =
            row.iter().zip(widths).map(|(value, width)| format!("{value:<width$}  ")).collect();
        text.push_str(line.trim_end());
        text.push('\n');
    }
    if !failures.is_empty() {
        text.push('\n');
        text.push_str(&failures);
    }
    let count = |result: &str| rows.iter().filter(|row| row[3] == result).count();
    let (passed, failed, skipped) = (count("pass"), count("FAIL"), count("skip"));
    let mut files: Vec<&str> = runs.iter().map(|run| run.test.file.as_str()).collect();
    files.dedup();
    text.push_str(&format!(
        "\n{} in {} of {} ({engine} engine): {passed} passed, {failed} failed, {skipped} skipped\n",
        counted(passed + failed + skipped, "case"),
        counted(runs.len(), "test"),
        counted(files.len(), "file"),
    ));
    text
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
