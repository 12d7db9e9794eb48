//! `gpu-policy test -o junit`: the outcomes as JUnit XML, the report CI
//! systems read. One `testsuite` per test (its file in `file`), one
//! `testcase` per case (named by its object), a `failure` with every
//! difference, or `skipped`.

use quick_junit::{NonSuccessKind, Report, TestCase, TestCaseStatus, TestSuite};

use super::run::{CaseOutcome, TestRun};
use crate::cli::args::Engine;

pub fn render(runs: &[TestRun<'_>], engine: Engine) -> anyhow::Result<String> {
    let mut report = Report::new(format!("gpu-policy test ({engine} engine)"));
    for run in runs {
        let test = run.test;
        let mut suite = TestSuite::new(&test.name);
        suite.extra.insert("file".into(), (&test.file).into());
        for (case, outcome) in test.cases.iter().zip(&run.outcomes) {
            let status = match outcome {
                CaseOutcome::Passed(_) => TestCaseStatus::success(),
                CaseOutcome::Skipped(engines) => {
                    let mut status = TestCaseStatus::skipped();
                    status.set_message(format!("engines: {engines}"));
                    status
                }
                CaseOutcome::Failed(differences) => {
                    let lines: Vec<String> = differences.iter().map(ToString::to_string).collect();
                    let mut status = TestCaseStatus::non_success(NonSuccessKind::Failure);
                    status
                        .set_message(lines.first().map_or("", String::as_str))
                        .set_type("expectation")
                        .set_description(lines.join("\n"));
                    status
                }
            };
            let repeated = test.cases.iter().filter(|c| c.object == case.object).count() > 1;
            let name = if repeated {
                format!("{} (cases[{}])", case.object, case.index)
            } else {
                case.object.to_string()
            };
            let mut testcase = TestCase::new(name, status);
            testcase.set_classname(&test.name);
            testcase.extra.insert("file".into(), (&test.file).into());
            suite.add_test_case(testcase);
        }
        report.add_test_suite(suite);
    }
    Ok(report.to_string()?)
}
