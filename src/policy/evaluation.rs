//! What evaluating one object gives: the [`Change`]s and [`Violation`]s of
//! each rule, tagged with its [`RuleId`], and the whole [`Evaluation`].

use std::collections::BTreeSet;

use json_patch::PatchOperation;
use serde::Serialize;

use super::message::{Message, Notice, NoticeKind};
use super::rule_id::RuleId;
use super::rules::rule::{Findings, Mutation};
use crate::settings::AllowlistEntry;

/// Something the policy does not accept. The message names the containers
/// or fields and says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: RuleId,
    pub message: Message,
}

/// A change the policy makes to a pod, with the rule that makes it.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub rule: RuleId,
    /// What the change does, for people (`pin NVIDIA_VISIBLE_DEVICES=void in
    /// container "app"`).
    pub summary: String,
    pub operations: Vec<PatchOperation>,
    /// The change removes or replaces something the author wrote (as opposed
    /// to adding what they did not write). Templates are warned about these.
    pub overrides_author: bool,
}

impl Change {
    pub(super) fn new(rule: RuleId, mutation: Mutation) -> Self {
        let Mutation {
            summary,
            operations,
            overrides_author,
        } = mutation;
        Change {
            rule,
            summary,
            operations,
            overrides_author,
        }
    }
}

/// The result of running every rule on one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    pub changes: Vec<Change>,
    pub violations: Vec<Violation>,
    pub notices: Vec<Notice>,
    /// The allowlist entry that exempts the object, if any.
    pub allowlisted: Option<AllowlistEntry>,
    /// The whole JSON Patch for the object: every change's operations plus
    /// the `gpu-policy.io/mutations` record. Empty when nothing changes.
    pub patch: Vec<PatchOperation>,
}

impl Evaluation {
    /// Every change's operations, in order: the patch before anything the
    /// evaluator adds of its own.
    pub(super) fn operations_of_changes(&self) -> Vec<PatchOperation> {
        self.changes
            .iter()
            .flat_map(|change| change.operations.iter().cloned())
            .collect()
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
    /// the `gpu-policy:` prefix.
    pub(super) fn record(&mut self, rule: RuleId, findings: Findings) {
        let Findings {
            changes,
            violations,
            notices,
        } = findings;
        self.changes.extend(
            changes
                .into_iter()
                .map(|mutation| Change::new(rule, mutation)),
        );
        self.violations
            .extend(violations.into_iter().map(|body| Violation {
                rule,
                message: Message::new(body),
            }));
        self.notices.extend(notices);
    }

    pub fn changed_rules(&self) -> BTreeSet<RuleId> {
        self.changes.iter().map(|c| c.rule).collect()
    }
}
