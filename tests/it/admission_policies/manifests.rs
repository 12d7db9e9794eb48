//! `check --engine cel` decides the fixtures (the golden files' inputs,
//! in every mode; the sharing schemes' fixtures too) and the examples as
//! `check` does.
//!
//! The violations are compared message for message (see
//! [`super::same_messages`]: a policy's message may be several of the
//! webhook's, joined).
//!
//! The one documented difference: a pod whose GPU count or GPU containers
//! depend on a DRA claim that `check` resolves from the input. The policies
//! cannot read other objects, so for such a pod the policies are compared
//! with the webhook's rules without the input's claims.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use gpu_policy::admission::Mode;
use gpu_policy::admission::checker::{Checker, ObjectReport};
use gpu_policy::manifest;
use gpu_policy::policy::RuleId;
use serde_json::Value;

use super::{ENGINE, Messages, SETTINGS, same_messages};
use crate::support::fixtures;

fn examples() -> Vec<PathBuf> {
    let mut files: Vec<PathBuf> = std::fs::read_dir("examples")
        .into_iter()
        .flatten()
        .flatten()
        .map(|entry| entry.path())
        .filter(|path| {
            path.extension().is_some_and(|e| e == "yaml")
                && path.file_name().is_some_and(|n| n != "config.yaml")
        })
        .collect();
    files.sort();
    files
}

fn rules(report: &ObjectReport) -> BTreeSet<RuleId> {
    report.violations.iter().map(|v| v.rule).collect()
}

/// The report's violation messages, by rule, as `check` prints them.
fn messages(report: &ObjectReport) -> Messages {
    let mut messages = Messages::new();
    for violation in &report.violations {
        messages.entry(violation.rule).or_default().push(violation.message.body().to_owned());
    }
    messages
}

/// Each object's webhook report with the input's claims, the same without
/// them (each object alone), and the policies' report.
fn compare(path: &PathBuf, mode: Mode) -> usize {
    let documents = match manifest::load(std::slice::from_ref(path), &mut std::io::empty()) {
        Ok(documents) => documents,
        Err(err) => panic!("{}: {err}", path.display()),
    };
    let objects: Vec<&Value> = documents.iter().map(|d| &d.object).collect();
    let annotations = BTreeMap::new();
    let with_claims = Checker::new(&SETTINGS, mode, "default")
        .with_annotations(&annotations)
        .with_input(&objects)
        .check_all(&objects);
    let mut compared = 0;
    for (object, webhook) in objects.iter().zip(&with_claims) {
        let alone = Checker::new(&SETTINGS, mode, "default")
            .with_annotations(&annotations)
            .with_input(&[*object])
            .check_all(&[*object]);
        let policies = ENGINE.report(object, None, "default", mode, &annotations);
        let expected = match alone.first() {
            // Claims from the input changed the webhook's answer: the
            // policies are held to the answer without them.
            Some(alone) if alone.allowed != webhook.allowed || rules(alone) != rules(webhook) => {
                alone
            }
            _ => webhook,
        };
        let name = format!("{} {} {}/{}", path.display(), mode, webhook.kind, webhook.name);
        assert_eq!(policies.ignored, expected.ignored, "{name}");
        assert_eq!(
            policies.allowed, expected.allowed,
            "{name}: policies {:?}, webhook {:?}",
            policies.violations, expected.violations
        );
        assert_eq!(rules(&policies), rules(expected), "{name}");
        if let Err(difference) = same_messages(&messages(expected), &messages(&policies)) {
            panic!("{name}: {difference}");
        }
        if mode == Mode::Warn {
            assert_eq!(
                policies.warnings.len(),
                policies.violations.len(),
                "{name}: every violation is a warning"
            );
        }
        compared += 1;
    }
    compared
}

#[test]
fn the_policies_decide_the_fixtures_as_check_does_in_every_mode() {
    let mut compared = 0;
    for path in fixtures::files() {
        for mode in [Mode::Enforce, Mode::Warn, Mode::Audit] {
            compared += compare(&path, mode);
        }
    }
    assert!(compared > 50, "only {compared} fixture objects were compared");
}

/// The fixtures of the GPU sharing schemes (`tests/fixtures/sharing/`),
/// in every mode.
#[test]
fn the_policies_decide_the_sharing_fixtures_as_check_does_in_every_mode() {
    let files = fixtures::sharing_files();
    let mut compared = 0;
    for path in &files {
        for mode in [Mode::Enforce, Mode::Warn, Mode::Audit] {
            compared += compare(path, mode);
        }
    }
    assert!(compared >= files.len() * 3, "only {compared} objects were compared");
}

#[test]
fn the_policies_decide_the_examples_as_check_does() {
    let files = examples();
    assert!(files.len() > 10, "{files:?}");
    let compared: usize = files.iter().map(|f| compare(f, Mode::Enforce)).sum();
    assert!(compared > 20, "only {compared} example objects were compared");
}

#[test]
fn an_enforce_check_with_the_policies_pins_and_sets_the_runtime_class() {
    let pod = fixtures::fixture("05-");
    let report = ENGINE.report(&pod, None, "default", Mode::Enforce, &BTreeMap::new());
    assert!(report.allowed, "{:?}", report.violations);
    let changed: BTreeSet<RuleId> = report.changes.iter().map(|(rule, _)| *rule).collect();
    assert!(changed.contains(&RuleId::RuntimeClass), "{:?}", report.changes);
    let audit = ENGINE.report(&pod, None, "default", Mode::Audit, &BTreeMap::new());
    assert!(audit.patch.is_empty() && audit.warnings.is_empty());
}
