//! The admission layer: which objects the policy looks at, and what a
//! namespace's mode makes of the rules' results.
//!
//! [`evaluate_object`] runs the rules on one [`Subject`]; [`decide`] is the one
//! pure function from (mode, evaluation) to (allowed, patch, warnings, audit
//! annotations). The offline `check` and the webhook both go through them.

pub mod namespace_guard;
pub mod object_tree;
pub mod review;

use std::collections::BTreeMap;
use std::fmt;
use std::str::FromStr;

use json_patch::PatchOperation;
use serde::Serialize;
use serde_json::Value;

use crate::policy::claims::{CLAIM_GROUP, ClaimKind};
use crate::policy::{
    self, ClusterFacts, Evaluation, Evaluator, Identity, Message, NoticeKind, ObjectError, Scope,
    Shape, Target, allowlist,
};
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

/// The workload kinds whose pod template is validated (never mutated: the
/// pods they create are, so GitOps tools see no drift).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Workload {
    Deployment,
    ReplicaSet,
    StatefulSet,
    DaemonSet,
    Job,
    CronJob,
    ReplicationController,
    PodTemplate,
}

impl Workload {
    pub const ALL: [Workload; 8] = [
        Workload::Deployment,
        Workload::ReplicaSet,
        Workload::StatefulSet,
        Workload::DaemonSet,
        Workload::Job,
        Workload::CronJob,
        Workload::ReplicationController,
        Workload::PodTemplate,
    ];

    pub fn kind(self) -> &'static str {
        match self {
            Workload::Deployment => "Deployment",
            Workload::ReplicaSet => "ReplicaSet",
            Workload::StatefulSet => "StatefulSet",
            Workload::DaemonSet => "DaemonSet",
            Workload::Job => "Job",
            Workload::CronJob => "CronJob",
            Workload::ReplicationController => "ReplicationController",
            Workload::PodTemplate => "PodTemplate",
        }
    }

    /// The API group (`""` is the core group).
    pub fn group(self) -> &'static str {
        match self {
            Workload::Deployment
            | Workload::ReplicaSet
            | Workload::StatefulSet
            | Workload::DaemonSet => "apps",
            Workload::Job | Workload::CronJob => "batch",
            Workload::ReplicationController | Workload::PodTemplate => "",
        }
    }

    /// The plural resource name, as webhook rules and RBAC name it.
    pub fn resource(self) -> &'static str {
        match self {
            Workload::Deployment => "deployments",
            Workload::ReplicaSet => "replicasets",
            Workload::StatefulSet => "statefulsets",
            Workload::DaemonSet => "daemonsets",
            Workload::Job => "jobs",
            Workload::CronJob => "cronjobs",
            Workload::ReplicationController => "replicationcontrollers",
            Workload::PodTemplate => "podtemplates",
        }
    }

    fn shape(self) -> Shape {
        match self {
            Workload::CronJob => Shape::CronJob,
            Workload::PodTemplate => Shape::PodTemplate,
            _ => Shape::Template,
        }
    }
}

/// What the policy makes of an object's kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ObjectKind {
    Pod,
    Workload(Workload),
    /// A resource.k8s.io ResourceClaim or ResourceClaimTemplate: its GPU
    /// requests are bounded (R2); never mutated.
    Claim(ClaimKind),
    /// Anything else: allowed untouched and reported as ignored.
    Ignored,
}

impl ObjectKind {
    /// Classifies by API group and kind (`apiVersion` `apps/v1` has group
    /// `apps`; `v1` the core group).
    pub fn of(group: &str, kind: &str) -> ObjectKind {
        if group.is_empty() && kind == "Pod" {
            return ObjectKind::Pod;
        }
        if group == CLAIM_GROUP
            && let Some(claim) = ClaimKind::of_kind(kind)
        {
            return ObjectKind::Claim(claim);
        }
        Workload::ALL
            .into_iter()
            .find(|w| w.group() == group && w.kind() == kind)
            .map_or(ObjectKind::Ignored, ObjectKind::Workload)
    }

    /// Classifies by `apiVersion` and `kind` as written in a manifest.
    pub fn of_manifest(api_version: &str, kind: &str) -> ObjectKind {
        let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
        Self::of(group, kind)
    }
}

/// What is being admitted for a pod.
#[derive(Debug, Clone, Copy)]
pub enum PodOperation<'a> {
    Create,
    /// An update of the `pods/ephemeralcontainers` subresource.
    EphemeralContainers {
        old_object: &'a Value,
    },
}

/// An object the admission layer hands to the policy: what it is, where it
/// lives and what is being done to it.
#[derive(Debug, Clone, Copy)]
pub struct Subject<'a> {
    pub object: &'a Value,
    pub kind: ObjectKind,
    /// The namespace the object lives in.
    pub namespace: &'a str,
    pub operation: PodOperation<'a>,
}

impl<'a> Subject<'a> {
    /// An object being created.
    pub fn created(object: &'a Value, kind: ObjectKind, namespace: &'a str) -> Self {
        Subject {
            object,
            kind,
            namespace,
            operation: PodOperation::Create,
        }
    }

    /// What the policy evaluates; None for the kinds it ignores.
    pub fn target(&self) -> Option<Target<'a>> {
        let object = self.object;
        let (shape, identity, scope) = match self.kind {
            ObjectKind::Ignored | ObjectKind::Claim(_) => return None,
            ObjectKind::Pod => {
                let scope = match self.operation {
                    PodOperation::Create => Scope::Whole,
                    PodOperation::EphemeralContainers { old_object } => {
                        policy::scope_for_update(old_object)
                    }
                };
                let owner = allowlist::controller_owner(object);
                (Shape::Pod, Identity::Pod { owner }, scope)
            }
            ObjectKind::Workload(workload) => {
                let name = object
                    .get("metadata")
                    .and_then(|metadata| metadata.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("");
                let identity = Identity::Workload {
                    kind: workload.kind(),
                    name,
                };
                (workload.shape(), identity, Scope::Whole)
            }
        };
        Some(Target {
            object,
            shape,
            identity,
            namespace: self.namespace,
            scope,
        })
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

/// Runs the policy on one object. `Ok(None)` for the kinds it ignores.
pub fn evaluate_object(
    evaluator: &Evaluator<'_>,
    subject: &Subject<'_>,
) -> Result<Option<Evaluation>, ObjectError> {
    if let ObjectKind::Claim(kind) = subject.kind {
        return evaluator
            .evaluate_claim(subject.object, kind, subject.namespace)
            .map(Some);
    }
    subject
        .target()
        .map(|target| evaluator.evaluate(&target))
        .transpose()
}

/// What the webhook answers, or `check` reports, for one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Decision {
    pub allowed: bool,
    /// Why the object is denied, for the response's `status.message`.
    pub denial: Option<String>,
    /// Operations to apply (enforce mode, pods only).
    pub patch: Vec<PatchOperation>,
    /// Warnings for `kubectl`, each under 120 characters.
    pub warnings: Vec<String>,
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
    let fallbacks: Vec<&str> = evaluation
        .notices
        .iter()
        .filter(|n| n.kind == NoticeKind::ImageTableFallback)
        .map(|n| n.message.body())
        .collect();
    if !fallbacks.is_empty() {
        decision
            .audit_annotations
            .insert(IMAGE_RESOLUTION_ANNOTATION.to_owned(), fallbacks.join("; "));
    }
    match mode {
        Mode::Enforce => {
            decision
                .warnings
                .extend(evaluation.notices.iter().map(|n| warning(&n.message)));
            if !is_pod {
                decision
                    .warnings
                    .extend(template_override_warnings(evaluation));
            }
            if evaluation.violations.is_empty() {
                if is_pod {
                    decision.patch = evaluation.patch.clone();
                }
            } else {
                decision.allowed = false;
                decision.denial = Some(denial_message(evaluation));
            }
        }
        Mode::Warn => {
            decision
                .warnings
                .extend(evaluation.notices.iter().map(|n| warning(&n.message)));
            for violation in &evaluation.violations {
                decision.warnings.push(warning(&Message::new(format_args!(
                    "[{}] would deny: {}",
                    violation.rule,
                    violation.message.body()
                ))));
            }
            if is_pod {
                for change in &evaluation.changes {
                    decision.warnings.push(warning(&Message::new(format_args!(
                        "[{}] would {}",
                        change.rule, change.summary
                    ))));
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
            warning(&Message::new(format_args!(
                "[{}] pods will {}",
                change.rule, change.summary
            )))
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

#[cfg(test)]
mod tests;
