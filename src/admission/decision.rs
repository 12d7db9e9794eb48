//! What a namespace's mode makes of the rules' results: [`decide`] is the
//! one pure function from (mode, kind, evaluation) to (allowed, patch,
//! warnings, audit annotations). The webhook and the offline `check` and
//! `audit` both go through it.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::str::FromStr;

use json_patch::PatchOperation;
use serde::Serialize;

use super::kinds::ObjectKind;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::message::{and_more, prefix_within, thousands};
use crate::policy::patch::encoded_within;
use crate::policy::{Change, ClusterFacts, Evaluation, Message, NoticeKind, ObjectError, RuleSet};
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
    /// Denied because the changes the object needs are a patch over
    /// [`MAX_PATCH_BYTES`]: the mutating webhook denies it too (fail
    /// closed), rather than let it through unchanged.
    pub over_patch_budget: bool,
    /// [`Self::patch`] encoded as JSON, when it is carried: what the
    /// webhook answers with, encoded once, while its size was measured.
    pub encoded_patch: Vec<u8>,
}

/// The audit annotation naming the images the table answered for because
/// their registry did not.
pub const IMAGE_RESOLUTION_ANNOTATION: &str = "image-resolution";

/// The audit annotation naming the floors R4 did not write because no GPU
/// node carries the labels they would be on.
pub const UNENFORCED_FLOOR_ANNOTATION: &str = "unenforced-floor";

/// Warnings longer than this are cut: kubectl prints them on one line, and
/// the API server truncates long ones anyway.
pub const MAX_WARNING_CHARS: usize = 119;

/// The most warnings one answer carries, the last of them saying how many
/// more there are, and their characters in all. k8s.io/apiserver passes on
/// 4,096 characters of warnings per request from every webhook together
/// and drops the rest (cutting each to 256 once over): half of it leaves
/// the other webhooks theirs.
pub const MAX_WARNINGS: usize = 16;
pub const MAX_WARNINGS_CHARS: usize = 2048;

/// The longest denial message, in bytes: kubectl prints it, and a
/// controller that cannot create its pods copies it into an event.
pub const MAX_DENIAL_BYTES: usize = 4096;

/// The longest value of an audit annotation, in bytes. The API server's
/// audit backends drop an event over `--audit-log-truncate-max-event-size`
/// (100 KiB by default) when truncation is on, and a
/// ValidatingAdmissionPolicy's audit annotation is cut at 10 KiB.
pub const MAX_AUDIT_ANNOTATION_BYTES: usize = 4096;

/// The largest patch one answer carries, encoded as JSON. A pin is some
/// 100 bytes of patch, so this is room for some 2,500 containers' pins;
/// a pod needing more is denied in enforce mode (the server would
/// otherwise answer megabytes, base64-encoded, for the API server to apply
/// to an object it then cannot store).
pub const MAX_PATCH_BYTES: usize = 256 << 10;

/// The audit annotation saying the changes are over [`MAX_PATCH_BYTES`].
pub const PATCH_ANNOTATION: &str = "patch";

/// The mode's verdict on an evaluation.
pub fn decide(mode: Mode, kind: ObjectKind, evaluation: &Evaluation) -> Decision {
    let mut decision = decide_all_but_the_patch(mode, kind, evaluation);
    if carries_patch(mode, kind, evaluation, &decision) {
        decision.patch = evaluation.patch.clone();
    }
    decision
}

/// [`decide`], with the patch moved out of `evaluation` rather than
/// copied: for the webhook, which answers once and drops the evaluation.
pub fn decide_taking_patch(mode: Mode, kind: ObjectKind, evaluation: &mut Evaluation) -> Decision {
    let mut decision = decide_all_but_the_patch(mode, kind, evaluation);
    if carries_patch(mode, kind, evaluation, &decision) {
        decision.patch = std::mem::take(&mut evaluation.patch);
    }
    decision
}

/// Whether the decision carries the evaluation's patch: in enforce mode,
/// when nothing is denied and the patch is within its budget, for pods and
/// the claims made for them (R4's selector).
fn carries_patch(
    mode: Mode,
    kind: ObjectKind,
    evaluation: &Evaluation,
    decision: &Decision,
) -> bool {
    mode == Mode::Enforce
        && is_patched(kind)
        && evaluation.violations.is_empty()
        && !decision.over_patch_budget
}

/// The kinds the mutating webhook patches.
fn is_patched(kind: ObjectKind) -> bool {
    kind == ObjectKind::Pod || kind == ObjectKind::Claim(ClaimKind::Claim)
}

/// What becomes of the evaluation's patch, by its size.
enum PatchBudget {
    /// No patch would be carried: nothing to change, a kind never patched,
    /// or violations that deny the object.
    Nothing,
    /// The patch, encoded, within [`MAX_PATCH_BYTES`].
    Within(Vec<u8>),
    /// Over [`MAX_PATCH_BYTES`]: why it cannot be carried, in one line.
    Over(String),
}

fn patch_budget(kind: ObjectKind, evaluation: &Evaluation) -> PatchBudget {
    if !is_patched(kind) || evaluation.patch.is_empty() || !evaluation.violations.is_empty() {
        return PatchBudget::Nothing;
    }
    if let Some(encoded) = encoded_within(&evaluation.patch, MAX_PATCH_BYTES) {
        return PatchBudget::Within(encoded);
    }
    let object = if kind == ObjectKind::Pod {
        "pod"
    } else {
        "claim"
    };
    PatchBudget::Over(format!(
        "the changes this {object} needs are a patch of {} operations, more than the {} KiB \
         one answer carries: make them in the manifest (gpu-policy check -o yaml prints it \
         changed), or split the {object}",
        thousands(evaluation.patch.len()),
        MAX_PATCH_BYTES >> 10,
    ))
}

fn decide_all_but_the_patch(mode: Mode, kind: ObjectKind, evaluation: &Evaluation) -> Decision {
    let is_pod = kind == ObjectKind::Pod;
    let mut decision = Decision {
        allowed: true,
        ..Decision::default()
    };
    let over_patch_budget = match patch_budget(kind, evaluation) {
        PatchBudget::Nothing => None,
        PatchBudget::Within(encoded) => {
            // Carried in enforce mode only (`carries_patch`).
            if mode == Mode::Enforce {
                decision.encoded_patch = encoded;
            }
            None
        }
        PatchBudget::Over(reason) => Some(reason),
    };
    if let Some(entry) = &evaluation.allowlisted {
        let entry = entry.to_string();
        decision.audit_annotations.insert(
            "allowlisted".to_owned(),
            prefix_within(&entry, MAX_AUDIT_ANNOTATION_BYTES).to_owned(),
        );
    }
    // In every mode: the audit log says where the table stood in for a
    // registry.
    let fallbacks = evaluation.notice_bodies(NoticeKind::ImageTableFallback);
    if !fallbacks.is_empty() {
        decision.audit_annotations.insert(
            IMAGE_RESOLUTION_ANNOTATION.to_owned(),
            joined_within(&fallbacks, |body, out| out.push_str(body), ANNOTATION_ROOM),
        );
    }
    // In every mode: the audit log says which pods were admitted without a
    // floor they need.
    let unenforced = evaluation.notice_bodies(NoticeKind::UnenforcedFloor);
    if !unenforced.is_empty() {
        decision.audit_annotations.insert(
            UNENFORCED_FLOOR_ANNOTATION.to_owned(),
            joined_within(&unenforced, |body, out| out.push_str(body), ANNOTATION_ROOM),
        );
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
            } else if let Some(reason) = &over_patch_budget {
                decision.allowed = false;
                decision.over_patch_budget = true;
                decision.denial = Some(Message::new(reason).into_string());
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
            if let Some(reason) = &over_patch_budget {
                decision
                    .warnings
                    .push(Message::new(format_args!("would deny: {reason}")).into_string());
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
            if !evaluation.violations.is_empty() {
                let violations =
                    joined_within(&evaluation.violations, tagged_violation, ANNOTATION_ROOM);
                decision
                    .audit_annotations
                    .insert("violations".to_owned(), violations);
            }
            if is_pod && !evaluation.changes.is_empty() {
                let changes = joined_within(
                    &evaluation.changes,
                    |c, out| {
                        let _ = write!(out, "[{}] {}", c.rule, c.summary);
                    },
                    ANNOTATION_ROOM,
                );
                decision
                    .audit_annotations
                    .insert("mutations".to_owned(), changes);
            }
            if let Some(reason) = over_patch_budget {
                let reason = prefix_within(&reason, MAX_AUDIT_ANNOTATION_BYTES).to_owned();
                decision
                    .audit_annotations
                    .insert(PATCH_ANNOTATION.to_owned(), reason);
            }
        }
    }
    // kubectl prints each warning on one line: cut them, and keep to the
    // API server's budget, keeping the whole text for `check`.
    decision.warnings_in_full = std::mem::take(&mut decision.warnings);
    decision.warnings = bounded_warnings(&decision.warnings_in_full);
    decision
}

/// An audit annotation's value is at most this, and so is what
/// [`joined_within`] makes for one.
const ANNOTATION_ROOM: usize = MAX_AUDIT_ANNOTATION_BYTES;

/// Between the items of a denial or an annotation.
const ITEM_SEPARATOR: &str = "; ";

/// `[rule] message`, as a denial and the audit annotation list violations.
fn tagged_violation(violation: &crate::policy::Violation, out: &mut String) {
    let _ = write!(out, "[{}] {}", violation.rule, violation.message.body());
}

/// `items` written by `show`, separated by `; `, in at most `room` bytes:
/// those that fit, then `; and 1,234 more` for the rest. Items past the
/// room are counted, not written.
fn joined_within<T>(items: &[T], show: impl Fn(&T, &mut String), room: usize) -> String {
    // The longest `; and N more` there is.
    const SUMMARY_ROOM: usize = 40;
    let mut out = String::new();
    let mut item = String::new();
    for (at, value) in items.iter().enumerate() {
        item.clear();
        show(value, &mut item);
        let separator = if at == 0 { "" } else { ITEM_SEPARATOR };
        let rest = items.len() - at - 1;
        let reserve = if rest == 0 { 0 } else { SUMMARY_ROOM };
        let fits = out.len() + separator.len() + item.len() + reserve <= room;
        if !fits {
            if at == 0 {
                // One item longer than the room: what fits of it.
                let kept = room.saturating_sub(SUMMARY_ROOM + '…'.len_utf8());
                out.push_str(prefix_within(&item, kept));
                out.push('…');
            }
            let rest = if at == 0 { rest } else { rest + 1 };
            if rest > 0 {
                out.push_str(if out.is_empty() { "" } else { ITEM_SEPARATOR });
                out.push_str(&and_more(rest));
            }
            return out;
        }
        out.push_str(separator);
        out.push_str(&item);
    }
    out
}

/// The warnings an answer carries: each cut to [`MAX_WARNING_CHARS`], at
/// most [`MAX_WARNINGS`] of them and [`MAX_WARNINGS_CHARS`] in all, the
/// last saying how many more `check` prints when some are left out.
pub fn bounded_warnings(full: &[String]) -> Vec<String> {
    let cut: Vec<String> = full
        .iter()
        .take(MAX_WARNINGS)
        .map(|text| warning(text))
        .collect();
    let chars = |warnings: &[String]| warnings.iter().map(|w| w.chars().count()).sum::<usize>();
    if full.len() <= MAX_WARNINGS && chars(&cut) <= MAX_WARNINGS_CHARS {
        return cut;
    }
    let mut kept = Vec::with_capacity(MAX_WARNINGS);
    let mut total = 0;
    for warning in cut.into_iter().take(MAX_WARNINGS - 1) {
        let length = warning.chars().count();
        if total + length > MAX_WARNINGS_CHARS - MAX_WARNING_CHARS {
            break;
        }
        total += length;
        kept.push(warning);
    }
    let more = full.len() - kept.len();
    kept.push(
        Message::new(format_args!(
            "{} warnings (gpu-policy check prints them all)",
            and_more(more)
        ))
        .into_string(),
    );
    kept
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
        .map(template_warning)
}

/// The warning of a change a workload's pods will get:
/// `gpu-policy: [rule] pods will <summary>`.
pub fn template_warning(change: &Change) -> String {
    Message::new(format_args!(
        "[{}] pods will {}",
        change.rule, change.summary
    ))
    .into_string()
}

/// `gpu-policy: [rule] message; [rule] message; and 1,234 more`, within
/// [`MAX_DENIAL_BYTES`].
fn denial_message(evaluation: &Evaluation) -> String {
    let room = MAX_DENIAL_BYTES - Message::PREFIX.len();
    let violations = joined_within(&evaluation.violations, tagged_violation, room);
    [Message::PREFIX, &violations].concat()
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

#[cfg(test)]
mod tests;
