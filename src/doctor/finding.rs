//! What a check of `doctor` says: a [`Finding`] (something is wrong, with
//! its evidence and the fix) or a [`Note`] (something the doctor could not
//! look at). Findings have stable ids ([`FindingId`]), as the rules do:
//! scripts, alerts and policy reports key on them.

use std::fmt;

use serde::{Serialize, Serializer};

/// The most objects a finding names, and evidence lines it gives; the
/// rest are counted. Ten names are one line of a terminal, and a person
/// fixes the first ten before reading on.
pub const LISTED: usize = 10;

macro_rules! finding_ids {
    ($($(#[$doc:meta])* $variant:ident => $text:literal,)*) => {
        /// The stable id of a finding.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum FindingId {
            $($(#[$doc])* $variant,)*
        }

        impl FindingId {
            /// Every id, in the order the doctor reports them.
            pub const ALL: &'static [FindingId] = &[$(FindingId::$variant,)*];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(FindingId::$variant => $text,)*
                }
            }
        }
    };
}

// What each finding means: docs/operations.md, "The findings".
finding_ids! {
    NoGpuCapacity => "no-gpu-capacity",
    GfdMissing => "gfd-missing",
    GfdLabelsMissing => "gfd-labels-missing",
    RuntimeClassMissing => "runtime-class-missing",
    RuntimeHandlerUnknown => "runtime-handler-unknown",
    DaemonSetNotReady => "daemonset-not-ready",
    DraDriverMissing => "dra-driver-missing",
    DraSliceVersionsMissing => "dra-slice-versions-missing",
    AllowlistTargetMissing => "allowlist-target-missing",
    ModeLabelInvalid => "mode-label-invalid",
    NoNamespaceOptedIn => "no-namespace-opted-in",
    CaBundleMismatch => "ca-bundle-mismatch",
    WebhookNotReady => "webhook-not-ready",
}

impl fmt::Display for FindingId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for FindingId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum Severity {
    /// GPUs cannot be used, or the webhook cannot answer: pods fail or
    /// stay Pending.
    Error,
    /// GPUs work, but the policy is weaker than configured, or will fail
    /// on the next change.
    Warning,
}

impl Severity {
    pub fn as_str(self) -> &'static str {
        match self {
            Severity::Error => "error",
            Severity::Warning => "warning",
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Subject {
    pub api_version: &'static str,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub namespace: Option<String>,
    pub name: String,
}

impl Subject {
    pub fn node(name: &str) -> Self {
        Subject { api_version: "v1", kind: "Node", namespace: None, name: name.to_owned() }
    }

    pub fn namespaced(api_version: &'static str, kind: &'static str, key: (&str, &str)) -> Self {
        Subject { api_version, kind, namespace: Some(key.0.to_owned()), name: key.1.to_owned() }
    }

    pub fn cluster(api_version: &'static str, kind: &'static str, name: &str) -> Self {
        Subject { api_version, kind, namespace: None, name: name.to_owned() }
    }

    /// `namespace/name`, or `name`.
    pub fn key(&self) -> String {
        match &self.namespace {
            Some(namespace) => format!("{namespace}/{}", self.name),
            None => self.name.clone(),
        }
    }
}

/// One thing wrong, with what shows it and what fixes it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Finding {
    pub id: FindingId,
    pub severity: Severity,
    /// What is wrong, on one line.
    pub summary: String,
    /// Why, when the finding has several causes (`no-gpu-capacity`): a
    /// stable word.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<&'static str>,
    /// The objects it is about: at most [`LISTED`].
    pub subjects: Vec<Subject>,
    /// How many more objects it is about.
    pub more_subjects: usize,
    /// What was seen, one fact a line: at most [`LISTED`].
    pub evidence: Vec<String>,
    /// What to do, on one line.
    pub fix: String,
}

impl Finding {
    /// A finding about `subjects` (listed up to [`LISTED`], the rest
    /// counted), with `evidence` likewise cut.
    pub fn new(
        id: FindingId,
        severity: Severity,
        summary: String,
        subjects: Vec<Subject>,
        evidence: Vec<String>,
        fix: String,
    ) -> Self {
        let more_subjects = subjects.len().saturating_sub(LISTED);
        let mut subjects = subjects;
        subjects.truncate(LISTED);
        let more_evidence = evidence.len().saturating_sub(LISTED);
        let mut evidence = evidence;
        evidence.truncate(LISTED);
        if more_evidence > 0 {
            evidence.push(format!("and {more_evidence} more like these"));
        }
        Finding { id, severity, summary, cause: None, subjects, more_subjects, evidence, fix }
    }

    pub fn with_cause(mut self, cause: &'static str) -> Self {
        self.cause = Some(cause);
        self
    }
}

/// Something the doctor could not look at, and why.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Note {
    /// Stable: `forbidden`, `truncated`, `not-installed`, `config`.
    pub kind: &'static str,
    pub message: String,
}

/// `a` and `b`, or `a, b and 3 more`: a count of `noun`s with up to
/// [`LISTED`] of their names.
pub fn named(names: &[String]) -> String {
    let listed: Vec<&str> = names.iter().take(LISTED).map(String::as_str).collect();
    let more = names.len().saturating_sub(LISTED);
    let mut text = listed.join(", ");
    if more > 0 {
        text.push_str(&format!(" and {more} more"));
    }
    text
}

/// `1 node`, `2 nodes`.
pub fn count(n: usize, singular: &str, plural: &str) -> String {
    if n == 1 { format!("1 {singular}") } else { format!("{n} {plural}") }
}
