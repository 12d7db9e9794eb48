//! What evaluating one object gives: the [`Change`]s and [`Violation`]s of
//! each rule, tagged with its [`RuleId`], and the whole [`Evaluation`].

use std::ops::Range;

use json_patch::PatchOperation;
use serde::Serialize;

use super::message::{Message, Notice, NoticeKind};
use super::patch::composed;
use super::rule_id::RuleSet;
use super::rules::RuleId;
use super::rules::rule::{Findings, Mutation};
use crate::settings::AllowlistEntry;

/// Something the policy does not accept; the message names the containers or fields and the fix.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: RuleId,
    pub message: Message,
}

/// A change the policy makes to a pod, with the rule that makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub rule: RuleId,
    /// As [`Mutation::summary`].
    pub summary: String,
    /// Where its operations are in [`Evaluation::patch`] ([`Evaluation::operations`]).
    pub operations: Range<usize>,
    /// As [`Mutation::overrides_author`].
    pub overrides_author: bool,
}

/// The result of running every rule on one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    pub changes: Vec<Change>,
    pub violations: Vec<Violation>,
    pub notices: Vec<Notice>,
    pub allowlisted: Option<AllowlistEntry>,
    /// The whole JSON Patch for the object: every change's operations plus
    /// the `gpu-policy.io/mutations` record. Empty when nothing changes.
    pub patch: Vec<PatchOperation>,
}

impl Evaluation {
    /// The operations of one of this evaluation's changes.
    pub fn operations(&self, change: &Change) -> &[PatchOperation] {
        self.patch.get(change.operations.clone()).unwrap_or_default()
    }

    /// The bodies of the notices of one kind, in order.
    pub fn notice_bodies(&self, kind: NoticeKind) -> Vec<&str> {
        self.notices
            .iter()
            .filter(|notice| notice.kind == kind)
            .map(|notice| notice.message.body())
            .collect()
    }

    /// Adds what one rule found, stamped with its id and each message with
    /// the `gpu-policy:` prefix. A change's operations go to the end of the
    /// patch, before anything the evaluator adds of its own, made to compose with the operations
    /// before them ([`composed`]): an array two rules each create holds what both add, once.
    pub(super) fn record(&mut self, rule: RuleId, findings: Findings) {
        let Findings { changes, violations, notices } = findings;
        for Mutation { summary, operations, overrides_author } in changes {
            let start = self.patch.len();
            let operations = composed(&self.patch, operations);
            self.patch.extend(operations);
            self.changes.push(Change {
                rule,
                summary,
                operations: start..self.patch.len(),
                overrides_author,
            });
        }
        self.violations.extend(
            violations.into_iter().map(|body| Violation { rule, message: Message::new(body) }),
        );
        self.notices.extend(notices);
    }

    /// The changes of this evaluation that `before`, of the same object's older version, did not
    /// make (by rule and summary): what an update of a workload's template brings its new pods.
    pub fn changes_new_since<'e>(&'e self, before: &Evaluation) -> Vec<&'e Change> {
        let had: std::collections::BTreeSet<(RuleId, &str)> =
            before.changes.iter().map(|change| (change.rule, change.summary.as_str())).collect();
        self.changes
            .iter()
            .filter(|change| !had.contains(&(change.rule, change.summary.as_str())))
            .collect()
    }

    pub fn changed_rules(&self) -> RuleSet {
        self.changes.iter().map(|c| c.rule).collect()
    }
}
