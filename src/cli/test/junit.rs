//! `gpu-policy test -o junit`: the outcomes as JUnit XML, the report CI
//! systems read. One `testsuite` per test (its file in `file`), one
//! `testcase` per case (named by its object), a `failure` with every
//! difference, or `skipped`. Written by hand: the format is small, and
//! every text is escaped here ([`escape`]).

use super::run::{Outcome, TestRun};
use super::table::{Totals, engine_name};
use crate::cli::args::Engine;

/// The report.
pub fn render(runs: &[TestRun<'_>], engine: Engine) -> String {
    let totals = Totals::of(runs.iter().flat_map(|run| &run.outcomes));
    let mut xml = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    xml.push_str(&format!(
        "<testsuites name=\"gpu-policy test ({} engine)\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
        engine_name(engine),
        totals.cases(),
        totals.failed,
        totals.skipped
    ));
    for run in runs {
        let test = run.test;
        let totals = Totals::of(&run.outcomes);
        xml.push_str(&format!(
            "  <testsuite name=\"{}\" file=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"0\" skipped=\"{}\">\n",
            escape(&test.name),
            escape(&test.file),
            totals.cases(),
            totals.failed,
            totals.skipped
        ));
        for (case, outcome) in test.cases.iter().zip(&run.outcomes) {
            let object = case.object.to_string();
            let repeated = test
                .cases
                .iter()
                .filter(|c| c.object == case.object)
                .count()
                > 1;
            let name = if repeated {
                format!("{object} (cases[{}])", case.index)
            } else {
                object
            };
            let open = format!(
                "    <testcase name=\"{}\" classname=\"{}\" file=\"{}\"",
                escape(&name),
                escape(&test.name),
                escape(&test.file)
            );
            match outcome {
                Outcome::Passed(_) => xml.push_str(&format!("{open}/>\n")),
                Outcome::Skipped(engines) => xml.push_str(&format!(
                    "{open}>\n      <skipped message=\"{}\"/>\n    </testcase>\n",
                    escape(&format!("engines: {engines}"))
                )),
                Outcome::Failed(differences) => {
                    let lines: Vec<String> = differences.iter().map(ToString::to_string).collect();
                    xml.push_str(&format!(
                        "{open}>\n      <failure message=\"{}\" type=\"expectation\">{}</failure>\n    </testcase>\n",
                        escape(lines.first().map_or("", String::as_str)),
                        escape(&lines.join("\n"))
                    ));
                }
            }
        }
        xml.push_str("  </testsuite>\n");
    }
    xml.push_str("</testsuites>\n");
    xml
}

/// Text as XML character data or an attribute value: the five markup
/// characters as entities, line breaks and tabs as character references
/// (kept in attributes, where a parser would fold them), and the
/// characters XML 1.0 forbids (most C0 controls, U+FFFE, U+FFFF) as
/// U+FFFD.
pub fn escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            '\n' => out.push_str("&#10;"),
            '\r' => out.push_str("&#13;"),
            '\t' => out.push_str("&#9;"),
            '\u{0}'..='\u{1f}' | '\u{fffe}' | '\u{ffff}' => out.push('\u{fffd}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests;
