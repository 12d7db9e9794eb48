//! The answer to one object: [`decide`] maps (mode, kind, evaluation) to an
//! [`Answer`], for the webhook, `check` and `audit` alike;
//! [`Answer::encode`] writes it as an AdmissionReview.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::str::FromStr;

use serde::Serialize;

use super::kinds::ObjectKind;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::message::{and_more, prefix_within, thousands};
use crate::policy::patch::encoded_within;
use crate::policy::{Change, ClusterFacts, Evaluation, Message, NoticeKind, ObjectError, RuleSet};
use crate::settings::{NamespaceSettings, Settings};

/// A namespace's mode, from its `gpu-policy.io/mode` label.
#[derive(
    Debug,
    Clone,
    Copy,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    strum::IntoStaticStr,
    strum::Display,
)]
#[serde(rename_all = "lowercase")]
#[strum(serialize_all = "lowercase")]
pub enum Mode {
    /// Mutate, then deny violations.
    Enforce,
    /// Allowed unchanged, with a warning per change and violation.
    Warn,
    /// Allowed unchanged; audit annotations only.
    Audit,
}

impl Mode {
    pub const ALL: [Mode; 3] = [Mode::Enforce, Mode::Warn, Mode::Audit];

    pub fn as_str(self) -> &'static str {
        self.into()
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

/// The settings in force in a namespace: the configuration as its
/// annotations tighten it (none known without a cluster).
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

/// What the webhook answers for one request, or `check` reports.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Answer {
    pub allowed: bool,
    /// Why the object is denied, for the response's `status.message`.
    pub denial: Option<String>,
    /// Warnings for `kubectl`, each under 120 characters.
    pub warnings: Vec<String>,
    /// The same warnings, not cut (`check` prints these).
    pub warnings_in_full: Vec<String>,
    /// Keys are prefixed with the webhook's name by the API server.
    pub audit_annotations: BTreeMap<String, String>,
    /// Denied because the patch is over [`MAX_PATCH_BYTES`]: the mutating
    /// webhook denies it too (fail closed).
    pub over_patch_budget: bool,
    /// The evaluation's patch as JSON, encoded once while its size was
    /// measured; empty when the answer carries none (enforce mode, pods and
    /// claims only, within [`MAX_PATCH_BYTES`]).
    pub encoded_patch: Vec<u8>,
    /// Not something the policy looks at: allowed untouched.
    pub ignored: bool,
    pub changes: RuleSet,
    pub violations: RuleSet,
}

/// Names the images the table answered for because their registry did not.
pub const IMAGE_RESOLUTION_ANNOTATION: &str = "image-resolution";

/// Names the floors R4 did not write: no GPU node carries their labels.
pub const UNENFORCED_FLOOR_ANNOTATION: &str = "unenforced-floor";

/// Warnings longer than this are cut: kubectl prints them on one line, and
/// the API server truncates long ones anyway.
pub const MAX_WARNING_CHARS: usize = 119;

/// The most warnings one answer carries (the last saying how many more),
/// and their characters in all: half of the 4,096 k8s.io/apiserver passes
/// on per request from every webhook together leaves the others theirs.
pub const MAX_WARNINGS: usize = 16;
pub const MAX_WARNINGS_CHARS: usize = 2048;

/// The longest denial message, in bytes: kubectl prints it, and
/// controllers copy it into events.
pub const MAX_DENIAL_BYTES: usize = 4096;

/// The longest value of an audit annotation, in bytes. The API server's
/// audit backends drop an event over `--audit-log-truncate-max-event-size`
/// (100 KiB by default) when truncation is on, and a
/// ValidatingAdmissionPolicy's audit annotation is cut at 10 KiB.
pub const MAX_AUDIT_ANNOTATION_BYTES: usize = 4096;

/// The largest patch one answer carries, encoded as JSON: some 2,500
/// containers' pins. A pod needing more is denied in enforce mode rather
/// than answered megabytes the API server could not store.
pub const MAX_PATCH_BYTES: usize = 256 << 10;

/// Says the changes are over [`MAX_PATCH_BYTES`].
pub const PATCH_ANNOTATION: &str = "patch";

/// The evaluation's patch encoded, empty when there is nothing to carry
/// (no change, a kind never patched, or a denial); or why it is over
/// [`MAX_PATCH_BYTES`], in one line.
fn encoded_patch(kind: ObjectKind, evaluation: &Evaluation) -> Result<Vec<u8>, String> {
    // The kinds the mutating webhook patches (pods, and claims for R4).
    let patched = kind == ObjectKind::Pod || kind == ObjectKind::Claim(ClaimKind::Claim);
    if !patched || evaluation.patch.is_empty() || !evaluation.violations.is_empty() {
        return Ok(Vec::new());
    }
    if let Some(encoded) = encoded_within(&evaluation.patch, MAX_PATCH_BYTES) {
        return Ok(encoded);
    }
    let object = if kind == ObjectKind::Pod { "pod" } else { "claim" };
    Err(format!(
        "the changes this {object} needs are a patch of {} operations, more than the {} KiB \
         one answer carries: make them in the manifest (gpu-policy check -o yaml prints it \
         changed), or split the {object}",
        thousands(evaluation.patch.len()),
        MAX_PATCH_BYTES >> 10,
    ))
}

/// The answer to `evaluation` in `mode`. It carries the evaluation's patch
/// encoded ([`Answer::carries_patch`]) or not at all.
pub fn decide(mode: Mode, kind: ObjectKind, evaluation: &Evaluation) -> Answer {
    let is_pod = kind == ObjectKind::Pod;
    let mut answer = Answer {
        allowed: true,
        changes: evaluation.changed_rules(),
        violations: evaluation.violations.iter().map(|v| v.rule).collect(),
        ..Answer::default()
    };
    let over_patch_budget = match encoded_patch(kind, evaluation) {
        // Carried in enforce mode only: then `decide` adds the patch.
        Ok(encoded) if mode == Mode::Enforce => {
            answer.encoded_patch = encoded;
            None
        }
        Ok(_) => None,
        Err(reason) => Some(reason),
    };
    if let Some(entry) = &evaluation.allowlisted {
        let entry = entry.to_string();
        answer.audit_annotations.insert(
            "allowlisted".to_owned(),
            prefix_within(&entry, MAX_AUDIT_ANNOTATION_BYTES).to_owned(),
        );
    }
    // In every mode.
    for (kind, annotation) in [
        (NoticeKind::ImageTableFallback, IMAGE_RESOLUTION_ANNOTATION),
        (NoticeKind::UnenforcedFloor, UNENFORCED_FLOOR_ANNOTATION),
    ] {
        let bodies = evaluation.notice_bodies(kind);
        if !bodies.is_empty() {
            let joined =
                joined_within(&bodies, |body, out| out.push_str(body), MAX_AUDIT_ANNOTATION_BYTES);
            answer.audit_annotations.insert(annotation.to_owned(), joined);
        }
    }
    if mode != Mode::Audit {
        answer.warnings.extend(evaluation.notices.iter().map(|n| n.message.to_string()));
    }
    match mode {
        Mode::Enforce => {
            if !is_pod {
                answer.warnings.extend(template_override_warnings(evaluation));
            }
            if !evaluation.violations.is_empty() {
                answer.allowed = false;
                answer.denial = Some(denial_message(evaluation));
            } else if let Some(reason) = &over_patch_budget {
                answer.allowed = false;
                answer.over_patch_budget = true;
                answer.denial = Some(Message::new(reason).into_string());
            }
        }
        Mode::Warn => {
            for violation in &evaluation.violations {
                answer.warnings.push(
                    Message::new(format_args!(
                        "[{}] would deny: {}",
                        violation.rule,
                        violation.message.body()
                    ))
                    .into_string(),
                );
            }
            if let Some(reason) = &over_patch_budget {
                answer
                    .warnings
                    .push(Message::new(format_args!("would deny: {reason}")).into_string());
            }
            if is_pod {
                for change in &evaluation.changes {
                    answer.warnings.push(
                        Message::new(format_args!("[{}] would {}", change.rule, change.summary))
                            .into_string(),
                    );
                }
            } else {
                answer.warnings.extend(template_override_warnings(evaluation));
            }
        }
        Mode::Audit => {
            if !evaluation.violations.is_empty() {
                let violations = joined_within(
                    &evaluation.violations,
                    tagged_violation,
                    MAX_AUDIT_ANNOTATION_BYTES,
                );
                answer.audit_annotations.insert("violations".to_owned(), violations);
            }
            if is_pod && !evaluation.changes.is_empty() {
                let changes = joined_within(
                    &evaluation.changes,
                    |c, out| {
                        let _ = write!(out, "[{}] {}", c.rule, c.summary);
                    },
                    MAX_AUDIT_ANNOTATION_BYTES,
                );
                answer.audit_annotations.insert("mutations".to_owned(), changes);
            }
            if let Some(reason) = over_patch_budget {
                let reason = prefix_within(&reason, MAX_AUDIT_ANNOTATION_BYTES).to_owned();
                answer.audit_annotations.insert(PATCH_ANNOTATION.to_owned(), reason);
            }
        }
    }
    // kubectl prints each warning on one line: cut them, and keep to the
    // API server's budget, keeping the whole text for `check`.
    answer.warnings_in_full = std::mem::take(&mut answer.warnings);
    answer.warnings = bounded_warnings(&answer.warnings_in_full);
    answer
}

const ITEM_SEPARATOR: &str = "; ";

/// `[rule] message`.
fn tagged_violation(violation: &crate::policy::Violation, out: &mut String) {
    let _ = write!(out, "[{}] {}", violation.rule, violation.message.body());
}

/// `items` written by `show`, separated by `; `, in at most `room` bytes:
/// those that fit, then `; and 1,234 more`.
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
    let cut: Vec<String> = full.iter().take(MAX_WARNINGS).map(|text| warning(text)).collect();
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

pub fn unreadable(kind: &str, error: &ObjectError) -> Answer {
    Answer::denied(Message::new(format_args!("cannot read this {kind}: {error}")).into_string())
}

/// A template is warned of the changes that override what its author
/// wrote; plain additions stay quiet so that ordinary applies do.
fn template_override_warnings(evaluation: &Evaluation) -> impl Iterator<Item = String> + '_ {
    evaluation.changes.iter().filter(|change| change.overrides_author).map(template_warning)
}

/// `gpu-policy: [rule] pods will <summary>`.
pub fn template_warning(change: &Change) -> String {
    Message::new(format_args!("[{}] pods will {}", change.rule, change.summary)).into_string()
}

/// `gpu-policy: [rule] message; [rule] message; and 1,234 more`.
fn denial_message(evaluation: &Evaluation) -> String {
    let room = MAX_DENIAL_BYTES - Message::PREFIX.len();
    let violations = joined_within(&evaluation.violations, tagged_violation, room);
    [Message::PREFIX, &violations].concat()
}

pub fn warning(text: &str) -> String {
    cut(text, MAX_WARNING_CHARS)
}

/// `text` cut to `chars` characters, `…` in place of the rest.
pub fn cut(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        return text.to_owned();
    }
    let mut kept: String = text.chars().take(chars - 1).collect();
    kept.push('…');
    kept
}

/// The `decision` of the metrics and the log line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, strum::IntoStaticStr)]
#[strum(serialize_all = "snake_case")]
pub enum Decision {
    Allowed,
    Mutated,
    Denied,
    Warned,
    Ignored,
    /// A body that is no readable review.
    BadRequest,
}

impl Decision {
    /// Every decision, in the order of their discriminants.
    pub const ALL: [Decision; 6] = [
        Decision::Allowed,
        Decision::Mutated,
        Decision::Denied,
        Decision::Warned,
        Decision::Ignored,
        Decision::BadRequest,
    ];

    pub fn as_str(self) -> &'static str {
        self.into()
    }
}

impl Answer {
    pub fn carries_patch(&self) -> bool {
        !self.encoded_patch.is_empty()
    }

    pub fn ignored() -> Self {
        Self { allowed: true, ignored: true, ..Self::default() }
    }

    pub fn allowed() -> Self {
        Self { allowed: true, ..Self::default() }
    }

    pub fn denied(message: impl Into<String>) -> Self {
        Self { denial: Some(message.into()), ..Self::default() }
    }

    pub fn decision(&self) -> Decision {
        if self.ignored {
            Decision::Ignored
        } else if !self.allowed {
            Decision::Denied
        } else if self.carries_patch() {
            Decision::Mutated
        } else if !self.warnings.is_empty() {
            Decision::Warned
        } else {
            Decision::Allowed
        }
    }

    /// Writes the answer as an AdmissionReview v1 response to `uid`: kube's
    /// `AdmissionResponse` fields in its order, but the patch base64 (Go's
    /// `[]byte`) after the warnings and the audit annotations last in key
    /// order (equal answers are equal bytes); a denial is 403 `Forbidden`,
    /// cut to [`MAX_DENIAL_BYTES`]. Written by hand: the GPU pod's encode
    /// phase took 6,788 instructions through kube's `AdmissionResponse`,
    /// 1,121 so (docs/performance.md). A property test holds the bytes to a
    /// serde struct's.
    pub fn encode(&self, uid: &str) -> Result<Vec<u8>, serde_json::Error> {
        let patch = &self.encoded_patch;
        let patch_len = patch.len().div_ceil(3) * 4;
        let mut body = Vec::with_capacity(ENVELOPE_BYTES + uid.len() + patch_len);
        body.extend_from_slice(ENVELOPE_START.as_bytes());
        serde_json::to_writer(&mut body, uid)?;
        if self.allowed {
            body.extend_from_slice(br#","allowed":true,"status":{}"#);
        } else {
            let fallback;
            let message = match &self.denial {
                Some(message) => message.as_str(),
                None => {
                    fallback = Message::new("denied").into_string();
                    &fallback
                }
            };
            let kept = prefix_within(message, MAX_DENIAL_BYTES);
            let message = if kept.len() < message.len() {
                std::borrow::Cow::Owned([kept, "…"].concat())
            } else {
                std::borrow::Cow::Borrowed(message)
            };
            body.extend_from_slice(
                br#","allowed":false,"status":{"status":"Failure","code":403,"message":"#,
            );
            serde_json::to_writer(&mut body, &message)?;
            body.extend_from_slice(br#","reason":"Forbidden"}"#);
        }
        if !patch.is_empty() {
            body.extend_from_slice(br#","patchType":"JSONPatch""#);
        }
        if !self.warnings.is_empty() {
            body.extend_from_slice(br#","warnings":"#);
            serde_json::to_writer(&mut body, &self.warnings)?;
        }
        if !patch.is_empty() {
            body.extend_from_slice(br#","patch":""#);
            // base64-simd, in vector steps: 337 instructions for the GPU
            // pod's 159-byte patch and 366 for the DRA pod's 411 bytes,
            // where the base64 crate's slice encoder took 1,166 and 1,531
            // (docs/performance.md).
            base64_simd::STANDARD.encode_append(patch, &mut body);
            body.push(b'"');
        }
        if !self.audit_annotations.is_empty() {
            body.extend_from_slice(br#","auditAnnotations":"#);
            serde_json::to_writer(&mut body, &self.audit_annotations)?;
        }
        body.extend_from_slice(b"}}");
        Ok(body)
    }
}

const ENVELOPE_START: &str =
    r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#;

/// An answer's bytes besides its uid and patch: the envelope, `allowed`,
/// a short status and a warning or two.
const ENVELOPE_BYTES: usize = 512;

#[cfg(test)]
mod tests;
