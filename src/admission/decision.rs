//! What a namespace's mode makes of the rules' results: [`decide`] is the
//! one pure function from (mode, kind, evaluation) to (allowed, patch,
//! warnings, audit annotations). The webhook and the offline `check` and
//! `audit` both go through it.

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use json_patch::PatchOperation;
use serde::Serialize;

use super::kinds::ObjectKind;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::{ClusterFacts, Evaluation, Message, NoticeKind, ObjectError, RuleSet};
use crate::settings::{NamespaceSettings, Settings};

/// A namespace's mode, from its `gpu-policy.io/mode` label.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// Mutate, then deny violations.
    Enforce,
    /// No change; allowed, with a warning per change and violation.
    Warn,
    /// No change, no warning; audit annotations only.
    Audit,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Enforce, Mode::Warn, Mode::Audit];

    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Enforce => "enforce",
            Mode::Warn => "warn",
            Mode::Audit => "audit",
        }
    }
}

impl fmt::Display for Mode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown mode {0:?} (expected enforce, warn or audit)")]
pub struct UnknownMode(String);

impl FromStr for Mode {
    type Err = UnknownMode;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Mode::ALL
            .into_iter()
            .find(|mode| mode.as_str() == s)
            .ok_or_else(|| UnknownMode(s.to_owned()))
    }
}

/// The settings in force in a namespace: the cluster configuration as its
/// annotations tighten it. Without a cluster connection the annotations are
/// unknown, and the cluster configuration applies as it is.
pub fn namespace_settings(
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
    namespace: Option<&str>,
) -> NamespaceSettings {
    let annotations = match (cluster, namespace) {
        (Some(cluster), Some(namespace)) => cluster.namespace_annotations(namespace),
        _ => BTreeMap::new(),
    };
    settings.for_namespace(&annotations)
}

/// What the webhook answers, or `check` reports, for one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    /// Why the object is denied, for the response's `status.message`.
    pub denial: Option<String>,
    /// Operations to apply (enforce mode, pods and claims only).
    pub patch: Vec<PatchOperation>,
    /// Warnings for `kubectl`, each under 120 characters.
    pub warnings: Vec<String>,
    /// The same warnings, not cut (`check` prints these).
    pub warnings_in_full: Vec<String>,
    /// Keys are prefixed with the webhook's name by the API server.
    pub audit_annotations: BTreeMap<String, String>,
}

/// The audit annotation naming the images the table answered for because
/// their registry did not.
pub const IMAGE_RESOLUTION_ANNOTATION: &str = "image-resolution";

/// Warnings longer than this are cut: kubectl prints them on one line, and
/// the API server truncates long ones anyway.
pub const MAX_WARNING_CHARS: usize = 119;

/// The mode's verdict on an evaluation.
pub fn decide(mode: Mode, kind: ObjectKind, evaluation: &Evaluation) -> Decision {
    let mut decision = decide_all_but_the_patch(mode, kind, evaluation);
    if carries_patch(mode, kind, evaluation) {
        decision.patch = evaluation.patch.clone();
    }
    decision
}

/// [`decide`], with the patch moved out of `evaluation` rather than
/// copied: for the webhook, which answers once and drops the evaluation.
pub fn decide_taking_patch(mode: Mode, kind: ObjectKind, evaluation: &mut Evaluation) -> Decision {
    let mut decision = decide_all_but_the_patch(mode, kind, evaluation);
    if carries_patch(mode, kind, evaluation) {
        decision.patch = std::mem::take(&mut evaluation.patch);
    }
    decision
}

/// Whether the decision carries the evaluation's patch: in enforce mode,
/// when nothing is denied, for pods and the claims made for them (R4's
/// selector).
fn carries_patch(mode: Mode, kind: ObjectKind, evaluation: &Evaluation) -> bool {
    let mutated = kind == ObjectKind::Pod || kind == ObjectKind::Claim(ClaimKind::Claim);
    mode == Mode::Enforce && mutated && evaluation.violations.is_empty()
}

fn decide_all_but_the_patch(mode: Mode, kind: ObjectKind, evaluation: &Evaluation) -> Decision {
    let is_pod = kind == ObjectKind::Pod;
    let mut decision = Decision {
        allowed: true,
        ..Decision::default()
    };
    if let Some(entry) = &evaluation.allowlisted {
        decision
            .audit_annotations
            .insert("allowlisted".to_owned(), entry.to_string());
    }
    // In every mode: the audit log says where the table stood in for a
    // registry.
    let fallbacks = evaluation.notice_bodies(NoticeKind::ImageTableFallback);
    if !fallbacks.is_empty() {
        decision
            .audit_annotations
            .insert(IMAGE_RESOLUTION_ANNOTATION.to_owned(), fallbacks.join("; "));
    }
    match mode {
        Mode::Enforce => {
            decision
                .warnings
                .extend(evaluation.notices.iter().map(|n| n.message.to_string()));
            if !is_pod {
                decision
                    .warnings
                    .extend(template_override_warnings(evaluation));
            }
            if !evaluation.violations.is_empty() {
                decision.allowed = false;
                decision.denial = Some(denial_message(evaluation));
            }
        }
        Mode::Warn => {
            decision
                .warnings
                .extend(evaluation.notices.iter().map(|n| n.message.to_string()));
            for violation in &evaluation.violations {
                decision.warnings.push(
                    Message::new(format_args!(
                        "[{}] would deny: {}",
                        violation.rule,
                        violation.message.body()
                    ))
                    .into_string(),
                );
            }
            if is_pod {
                for change in &evaluation.changes {
                    decision.warnings.push(
                        Message::new(format_args!("[{}] would {}", change.rule, change.summary))
                            .into_string(),
                    );
                }
            } else {
                decision
                    .warnings
                    .extend(template_override_warnings(evaluation));
            }
        }
        Mode::Audit => {
            let join = |items: Vec<String>| items.join("; ");
            if !evaluation.violations.is_empty() {
                let items = evaluation
                    .violations
                    .iter()
                    .map(|v| format!("[{}] {}", v.rule, v.message.body()))
                    .collect();
                decision
                    .audit_annotations
                    .insert("violations".to_owned(), join(items));
            }
            if is_pod && !evaluation.changes.is_empty() {
                let items = evaluation
                    .changes
                    .iter()
                    .map(|c| format!("[{}] {}", c.rule, c.summary))
                    .collect();
                decision
                    .audit_annotations
                    .insert("mutations".to_owned(), join(items));
            }
        }
    }
    // kubectl prints each warning on one line: cut them, keeping the whole
    // text for `check`.
    decision.warnings_in_full = std::mem::take(&mut decision.warnings);
    decision.warnings = decision
        .warnings_in_full
        .iter()
        .map(|text| warning(text))
        .collect();
    decision
}

/// The denial for an object whose fields have the wrong shape.
pub fn unreadable(kind: &str, error: &ObjectError) -> Decision {
    Decision {
        allowed: false,
        denial: Some(Message::new(format_args!("cannot read this {kind}: {error}")).into_string()),
        ..Decision::default()
    }
}

/// A template gets a warning for each change its pods will get that
/// overrides something the author wrote; plain additions stay quiet so that
/// ordinary applies do.
fn template_override_warnings(evaluation: &Evaluation) -> impl Iterator<Item = String> + '_ {
    evaluation
        .changes
        .iter()
        .filter(|change| change.overrides_author)
        .map(|change| {
            Message::new(format_args!(
                "[{}] pods will {}",
                change.rule, change.summary
            ))
            .into_string()
        })
}

fn denial_message(evaluation: &Evaluation) -> String {
    let parts: Vec<String> = evaluation
        .violations
        .iter()
        .map(|v| format!("[{}] {}", v.rule, v.message.body()))
        .collect();
    Message::new(parts.join("; ")).into_string()
}

/// Cuts a warning to [`MAX_WARNING_CHARS`] characters.
pub fn warning(text: &str) -> String {
    if text.chars().count() <= MAX_WARNING_CHARS {
        return text.to_owned();
    }
    let mut cut: String = text.chars().take(MAX_WARNING_CHARS - 1).collect();
    cut.push('…');
    cut
}

/// What became of one request, as metrics and the decision log name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// Allowed as it is.
    Allowed,
    /// Allowed with a patch.
    Mutated,
    Denied,
    /// Allowed with warnings.
    Warned,
    /// Not something the policy looks at.
    Ignored,
    /// The body was not a review the server could read (HTTP 400).
    BadRequest,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allowed => "allowed",
            DecisionKind::Mutated => "mutated",
            DecisionKind::Denied => "denied",
            DecisionKind::Warned => "warned",
            DecisionKind::Ignored => "ignored",
            DecisionKind::BadRequest => "bad_request",
        }
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was decided, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: DecisionKind,
    /// Rules that changed (or would change) the object.
    pub changes: RuleSet,
    /// Rules the object violates.
    pub violations: RuleSet,
}

impl Verdict {
    pub fn new(decision: DecisionKind) -> Self {
        Self {
            decision,
            changes: RuleSet::new(),
            violations: RuleSet::new(),
        }
    }
}
