//! Running the cases of one test on one engine: its resources evaluated
//! together as `check` evaluates them ([`Checker`] or [`PolicyEngine`]),
//! then each case's expectations held to its object's report.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;

use super::file::{Case, Engines, Expectations, Pattern, Test};
use crate::admission::answer::cut;
use crate::admission::checker::{Checker, ObjectReport, mutated};
use crate::admission_policy::engine::{PolicyEngine, as_admitted};
use crate::cli::args::Engine;
use crate::cli::nodes::KnownNodes;
use crate::policy::RuleId;
use crate::settings::MUTATIONS_ANNOTATION;
use kubernetes_cel::PolicyError;

/// The most differences of a patched object listed, after which they are
/// counted.
const PATCH_DIFFERENCES: usize = 5;
/// How much of a JSON value a difference quotes.
const VALUE_CHARS: usize = 100;

/// The generated policies did not compile: a bug of the program, not of
/// the test.
#[derive(Debug, thiserror::Error)]
#[error("internal error: a generated policy: {0}")]
pub struct RunError(#[from] PolicyError);

/// What came of one case.
#[derive(Debug)]
pub enum CaseOutcome {
    /// Every expectation held; these were checked.
    Passed(Vec<&'static str>),
    /// What differs, at least one line.
    Failed(Vec<Difference>),
    /// The case is not run on this engine (its `engines`).
    Skipped(Engines),
}

/// One expectation that did not hold.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Difference {
    /// The object, `Kind/namespace/name`.
    pub object: String,
    /// The rules involved (a violation's, a change's, the denial's).
    pub rules: Vec<RuleId>,
    /// The expectation: `allowed`, `violations`, `patched /spec/...`.
    pub field: String,
    pub expected: String,
    pub got: String,
}

impl Difference {
    /// What differs, without the object: `[rules] field: expected …, got …`.
    pub fn detail(&self) -> String {
        let mut detail = String::new();
        if !self.rules.is_empty() {
            let rules: Vec<&str> = self.rules.iter().map(|rule| rule.as_str()).collect();
            detail.push_str(&format!("[{}] ", rules.join(", ")));
        }
        detail.push_str(&format!("{}: expected {}, got {}", self.field, self.expected, self.got));
        detail
    }
}

impl fmt::Display for Difference {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.object, self.detail())
    }
}

/// The outcomes of a test's cases, `outcomes[i]` for `test.cases[i]`.
pub struct TestRun<'t> {
    pub test: &'t Test,
    pub outcomes: Vec<CaseOutcome>,
}

/// Runs every case of `test` that `engine` is among the engines of.
pub fn run(test: &Test, engine: Engine) -> Result<TestRun<'_>, RunError> {
    let objects: Vec<&Value> = test.resources.iter().map(|doc| &doc.object).collect();
    let wanted = test.cases.iter().any(|case| case.engines.includes(engine));
    let reports: Vec<ObjectReport> = match engine {
        _ if !wanted => Vec::new(),
        Engine::Webhook => {
            let nodes = KnownNodes::of(None, test.node_products.clone());
            let mut checker = Checker::new(&test.settings, test.mode, &test.namespace)
                .with_annotations(&test.annotations)
                .with_input(&objects);
            if let Some(nodes) = &nodes {
                checker = checker.with_nodes(nodes);
            }
            checker.check_all(&objects)
        }
        Engine::Cel => {
            let policies = PolicyEngine::new(&test.settings)?;
            objects
                .iter()
                .map(|object| {
                    policies.report(object, None, &test.namespace, test.mode, &test.annotations)
                })
                .collect()
        }
    };
    let outcomes = test
        .cases
        .iter()
        .map(|case| {
            if case.engines.includes(engine) {
                judge(case, &objects, &reports, engine)
            } else {
                CaseOutcome::Skipped(case.engines)
            }
        })
        .collect();
    Ok(TestRun { test, outcomes })
}

fn judge(case: &Case, objects: &[&Value], reports: &[ObjectReport], engine: Engine) -> CaseOutcome {
    let id = &case.object;
    let object = id.to_string();
    let found: Vec<usize> = reports
        .iter()
        .enumerate()
        .filter(|(_, r)| r.kind == id.kind && r.namespace == id.namespace && r.name == id.name)
        .map(|(index, _)| index)
        .collect();
    let index = match found.as_slice() {
        [index] => *index,
        _ => {
            let got = if found.is_empty() {
                format!("none among the {} objects", reports.len())
            } else {
                format!("{} objects of that kind, namespace and name", found.len())
            };
            return CaseOutcome::Failed(vec![Difference {
                object,
                rules: Vec::new(),
                field: "object".into(),
                expected: "one object of the resources".into(),
                got,
            }]);
        }
    };
    let (report, original) = (&reports[index], objects[index]);
    let differences = compare(&case.expect, report, original, engine, &object);
    if differences.is_empty() {
        CaseOutcome::Passed(case.expect.given())
    } else {
        CaseOutcome::Failed(differences)
    }
}

fn compare(
    expect: &Expectations,
    report: &ObjectReport,
    original: &Value,
    engine: Engine,
    object: &str,
) -> Vec<Difference> {
    let mut out = Vec::new();
    let difference = |rules: Vec<RuleId>, field: &str, expected: String, got: String| Difference {
        object: object.to_owned(),
        rules,
        field: field.to_owned(),
        expected,
        got,
    };
    let violations: Vec<(RuleId, String)> =
        report.violations.iter().map(|v| (v.rule, format!("{:?}", v.message.as_str()))).collect();
    let changes: Vec<(RuleId, String)> =
        report.changes.iter().map(|(rule, summary)| (*rule, format!("{summary:?}"))).collect();
    let violated = unique(violations.iter().map(|(rule, _)| *rule));
    let changed = unique(changes.iter().map(|(rule, _)| *rule));

    if let Some(allowed) = expect.allowed
        && allowed != report.allowed
    {
        let got = match &report.denial {
            Some(denial) if !report.allowed => format!("false ({denial:?})"),
            _ => report.allowed.to_string(),
        };
        out.push(difference(violated.clone(), "allowed", allowed.to_string(), got));
    }
    if let Some(ignored) = expect.ignored
        && ignored != report.ignored
    {
        out.push(difference(
            Vec::new(),
            "ignored",
            ignored.to_string(),
            report.ignored.to_string(),
        ));
    }
    if let Some(mutated) = expect.mutated {
        let got = !report.patch.is_empty();
        if mutated != got {
            let detail = if got {
                format!("true ({} operations)", report.patch.len())
            } else {
                "false (no patch)".to_owned()
            };
            out.push(difference(changed.clone(), "mutated", mutated.to_string(), detail));
        }
    }
    for (field, one, expected, found, texts) in [
        ("violations", "a violation", &expect.violations, &violated, &violations),
        ("changes", "a change", &expect.changes, &changed, &changes),
    ] {
        let Some(expected) = expected else {
            continue;
        };
        for rule in expected.iter().filter(|rule| !found.contains(rule)) {
            out.push(difference(vec![*rule], field, one.into(), "none".into()));
        }
        for rule in found.iter().filter(|rule| !expected.contains(rule)) {
            let got: Vec<&str> =
                texts.iter().filter(|(r, _)| r == rule).map(|(_, text)| text.as_str()).collect();
            out.push(difference(vec![*rule], field, "none".into(), got.join(" and ")));
        }
    }
    if let Some(patterns) = &expect.messages {
        let messages: Vec<(Vec<RuleId>, &str)> = if report.violations.is_empty() {
            report.denial.iter().map(|denial| (Vec::new(), denial.as_str())).collect()
        } else {
            report.violations.iter().map(|v| (vec![v.rule], v.message.as_str())).collect()
        };
        matched(&mut out, object, ("messages", "message"), patterns, &messages);
    }
    if let Some(patterns) = &expect.warnings {
        let warnings = if report.warnings_in_full.is_empty() {
            &report.warnings
        } else {
            &report.warnings_in_full
        };
        let warnings: Vec<(Vec<RuleId>, &str)> =
            warnings.iter().map(|warning| (Vec::new(), warning.as_str())).collect();
        matched(&mut out, object, ("warnings", "warning"), patterns, &warnings);
    }
    if let Some(expected) = &expect.patched {
        // The policies patch the object as the API server hands it to
        // them; both sides are read that way.
        let (original, expected) = match engine {
            Engine::Webhook => (original.clone(), expected.clone()),
            Engine::Cel => (as_admitted(original), as_admitted(expected)),
        };
        // The rules of a patch: those that changed the object, and those
        // the expected object's mutations record names.
        let recorded = expected
            .pointer(&format!("/metadata/annotations/{}", MUTATIONS_ANNOTATION.replace('/', "~1")))
            .and_then(Value::as_str)
            .unwrap_or("")
            .split(',')
            .filter_map(|name| RuleId::parse(name.trim()));
        let changed = unique(changed.iter().copied().chain(recorded));
        match mutated(&original, report) {
            Ok(got) => {
                let mut found = Vec::new();
                json_differences(&expected, &got, "", &mut found);
                let more = found.len().saturating_sub(PATCH_DIFFERENCES);
                for (pointer, want, have) in found.into_iter().take(PATCH_DIFFERENCES) {
                    let field =
                        format!("patched {}", if pointer.is_empty() { "/" } else { &pointer });
                    out.push(difference(changed.clone(), &field, want, have));
                }
                if more > 0 {
                    out.push(difference(
                        changed.clone(),
                        "patched",
                        "no more differences".into(),
                        format!("{more} more"),
                    ));
                }
            }
            Err(err) => out.push(difference(
                changed.clone(),
                "patched",
                "a patch that applies".into(),
                format!("{err}"),
            )),
        }
    }
    out
}

/// Each text must match one of the patterns, and each pattern one of the
/// texts; `field` is the expectation's name and what one text is called.
fn matched(
    out: &mut Vec<Difference>,
    object: &str,
    (field, noun): (&str, &str),
    patterns: &[Pattern],
    texts: &[(Vec<RuleId>, &str)],
) {
    let listed: Vec<String> = patterns.iter().map(Pattern::to_string).collect();
    for (rules, text) in texts {
        if !patterns.iter().any(|pattern| pattern.matches(text)) {
            out.push(Difference {
                object: object.to_owned(),
                rules: rules.clone(),
                field: field.to_owned(),
                expected: if listed.is_empty() {
                    "none".to_owned()
                } else {
                    format!("each {noun} matching {}", listed.join(" or "))
                },
                got: format!("{text:?}"),
            });
        }
    }
    for pattern in patterns {
        if !texts.iter().any(|(_, text)| pattern.matches(text)) {
            let got: Vec<String> = texts.iter().map(|(_, text)| format!("{text:?}")).collect();
            out.push(Difference {
                object: object.to_owned(),
                rules: Vec::new(),
                field: field.to_owned(),
                expected: format!("a {noun} matching {pattern}"),
                got: if got.is_empty() { "none".to_owned() } else { got.join(" and ") },
            });
        }
    }
}

/// The rules, each once, in rule order.
fn unique(rules: impl Iterator<Item = RuleId>) -> Vec<RuleId> {
    rules.collect::<BTreeSet<_>>().into_iter().collect()
}

/// Where two JSON values differ: (JSON pointer, expected, got), in
/// document order; a value that is not there is `absent`.
fn json_differences(
    expected: &Value,
    got: &Value,
    pointer: &str,
    out: &mut Vec<(String, String, String)>,
) {
    match (expected, got) {
        (Value::Object(want), Value::Object(have)) => {
            let keys: BTreeSet<&String> = want.keys().chain(have.keys()).collect();
            for key in keys {
                let below = format!("{pointer}/{}", key.replace('~', "~0").replace('/', "~1"));
                match (want.get(key), have.get(key)) {
                    (Some(w), Some(h)) => json_differences(w, h, &below, out),
                    (w, h) => out.push((below, shown(w), shown(h))),
                }
            }
        }
        (Value::Array(want), Value::Array(have)) => {
            for index in 0..want.len().max(have.len()) {
                let below = format!("{pointer}/{index}");
                match (want.get(index), have.get(index)) {
                    (Some(w), Some(h)) => json_differences(w, h, &below, out),
                    (w, h) => out.push((below, shown(w), shown(h))),
                }
            }
        }
        _ if expected != got => {
            out.push((pointer.to_owned(), shown(Some(expected)), shown(Some(got))));
        }
        _ => {}
    }
}

/// A JSON value on one line, cut to [`VALUE_CHARS`].
fn shown(value: Option<&Value>) -> String {
    value.map_or("absent".to_owned(), |value| cut(&value.to_string(), VALUE_CHARS))
}

#[cfg(test)]
mod tests;
