//! The policy: six rules over the raw JSON of a pod or pod template.
//!
//! Every rule is one file and one pure function from a [`RuleInput`] to an
//! [`Outcome`]: changes (JSON Patch operations on the raw object) and
//! violations, each tagged with a stable [`RuleId`]. Nothing here logs, reads
//! a clock or touches the network, so the offline `check`, the webhook and
//! the audit give the same answers.

pub mod allowlist;
pub mod bounded_requests;
pub mod cluster;
pub mod compute_affinity;
pub mod device_paths;
pub mod pod;
pub mod quantity;
pub mod runtime_class;
#[cfg(test)]
pub mod testing;
pub mod visible_devices;

use std::collections::BTreeSet;
use std::fmt;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde::Serialize;
use serde_json::{Map, Value};

use crate::settings::{AllowlistEntry, MUTATIONS_ANNOTATION, NamespaceSettings, Settings};
pub use cluster::ClusterFacts;
pub use pod::{Container, ContainerKind, ObjectError, PodView, Shape};

/// Stable rule identifiers: they appear in output, metrics, logs and the
/// `gpu-policy.io/mutations` annotation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum RuleId {
    VisibleDevices,
    BoundedRequests,
    RuntimeClass,
    ComputeAffinity,
    Allowlist,
    DevicePaths,
}

impl RuleId {
    pub const ALL: [RuleId; 6] = [
        RuleId::VisibleDevices,
        RuleId::BoundedRequests,
        RuleId::RuntimeClass,
        RuleId::ComputeAffinity,
        RuleId::Allowlist,
        RuleId::DevicePaths,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RuleId::VisibleDevices => "visible-devices",
            RuleId::BoundedRequests => "bounded-requests",
            RuleId::RuntimeClass => "runtime-class",
            RuleId::ComputeAffinity => "compute-affinity",
            RuleId::Allowlist => "allowlist",
            RuleId::DevicePaths => "device-paths",
        }
    }

    pub fn parse(text: &str) -> Option<RuleId> {
        Self::ALL.into_iter().find(|rule| rule.as_str() == text)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Something the policy does not accept. The message starts with
/// `gpu-policy:`, names the containers or fields, and says how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub rule: RuleId,
    pub message: String,
}

/// A change the policy makes to a pod.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    pub rule: RuleId,
    /// What the change does, for people (`pins NVIDIA_VISIBLE_DEVICES=void in
    /// container "app"`).
    pub summary: String,
    pub operations: Vec<PatchOperation>,
    /// The change removes or replaces something the author wrote (as opposed
    /// to adding what they did not write). Templates are warned about these.
    pub overrides_author: bool,
}

/// Which containers a rule looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The whole pod: a pod being created, or a workload template.
    Whole,
    /// An update of the `pods/ephemeralcontainers` subresource: only the
    /// ephemeral containers whose names are not in the old object. The rest
    /// of the pod is immutable and was admitted when it was created.
    NewEphemeralContainers(BTreeSet<String>),
}

impl Scope {
    /// Whether a rule should look at this container.
    pub fn includes(&self, container: &Container<'_>) -> bool {
        match self {
            Scope::Whole => true,
            Scope::NewEphemeralContainers(old_names) => {
                container.kind == ContainerKind::Ephemeral && !old_names.contains(container.name)
            }
        }
    }

    /// Whether pod-level rules (requests, runtime class, affinity, volumes,
    /// annotations) apply.
    pub fn is_whole(&self) -> bool {
        matches!(self, Scope::Whole)
    }
}

/// The scope of an update of the `pods/ephemeralcontainers` subresource:
/// the ephemeral containers that the old object does not have yet.
pub fn scope_for_update(old_object: &Value) -> Scope {
    let names = old_object
        .pointer("/spec/ephemeralContainers")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|container| container.get("name")?.as_str())
        .map(str::to_owned)
        .collect();
    Scope::NewEphemeralContainers(names)
}

/// What every rule gets.
#[derive(Clone, Copy)]
pub struct RuleInput<'a, 'v> {
    pub view: &'a PodView<'v>,
    pub settings: &'a Settings,
    pub namespace: &'a NamespaceSettings,
    pub scope: &'a Scope,
    /// Set when rule 5 matched: the entry that exempts the pod.
    pub allowlisted: Option<&'a AllowlistEntry>,
    /// What the cluster knows, when the webhook can read it.
    pub cluster: Option<&'a dyn ClusterFacts>,
}

/// What a rule returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Outcome {
    pub changes: Vec<Change>,
    pub violations: Vec<Violation>,
    /// Inputs the rule ignored, and why (an unreadable annotation, say).
    pub notices: Vec<String>,
}

type Check = fn(&RuleInput<'_, '_>) -> Outcome;

/// The rules that look at a pod view, in the order they run. Rule 5
/// (allowlist) runs first and separately: it decides who the others exempt.
const RULES: [(RuleId, Check); 5] = [
    (RuleId::VisibleDevices, visible_devices::check),
    (RuleId::BoundedRequests, bounded_requests::check),
    (RuleId::RuntimeClass, runtime_class::check),
    (RuleId::ComputeAffinity, compute_affinity::check),
    (RuleId::DevicePaths, device_paths::check),
];

/// What the identity of the object is, for the allowlist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Identity<'a> {
    /// A pod: allowlisted through its controller owner reference.
    Pod { owner: Option<pod::Owner<'a>> },
    /// A workload: allowlisted by its own kind and name.
    Workload { kind: &'a str, name: &'a str },
}

/// The result of running every rule on one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Evaluation {
    pub changes: Vec<Change>,
    pub violations: Vec<Violation>,
    pub notices: Vec<String>,
    /// The allowlist entry that exempts the object, if any.
    pub allowlisted: Option<AllowlistEntry>,
    /// The whole JSON Patch for the object: every change's operations plus
    /// the `gpu-policy.io/mutations` record. Empty when nothing changes.
    pub patch: Vec<PatchOperation>,
}

impl Evaluation {
    pub fn changed_rules(&self) -> BTreeSet<RuleId> {
        self.changes.iter().map(|c| c.rule).collect()
    }
}

/// Runs every rule over `object` (a Pod or a workload, as `shape` says).
#[allow(clippy::too_many_arguments)]
pub fn evaluate(
    object: &Value,
    shape: Shape,
    identity: Identity<'_>,
    namespace: &str,
    scope: &Scope,
    settings: &Settings,
    namespace_settings: &NamespaceSettings,
    cluster: Option<&dyn ClusterFacts>,
) -> Result<Evaluation, ObjectError> {
    let mut evaluation = Evaluation {
        notices: namespace_settings.notices.clone(),
        ..Evaluation::default()
    };
    let Some(view) = PodView::parse(object, shape, settings)? else {
        return Ok(evaluation);
    };
    let mut allowlisted =
        allowlist::matching_entry(identity, namespace, &settings.config().allowlist);
    if let (Some(entry), Identity::Pod { owner: Some(owner) }, Some(cluster)) =
        (allowlisted, identity, cluster)
        && let Err(notice) = allowlist::verify_owner(entry, owner, cluster)
    {
        evaluation.notices.push(notice);
        allowlisted = None;
    }
    let input = RuleInput {
        view: &view,
        settings,
        namespace: namespace_settings,
        scope,
        allowlisted,
        cluster,
    };
    for (_, check) in RULES {
        let outcome = check(&input);
        evaluation.changes.extend(outcome.changes);
        evaluation.violations.extend(outcome.violations);
        evaluation.notices.extend(outcome.notices);
    }
    evaluation.allowlisted = allowlisted.cloned();
    if !evaluation.changes.is_empty() {
        evaluation.patch = evaluation
            .changes
            .iter()
            .flat_map(|change| change.operations.iter().cloned())
            .collect();
        // The ephemeralcontainers subresource takes only the ephemeral
        // containers from the object; metadata is recorded at creation.
        if scope.is_whole() {
            evaluation
                .patch
                .extend(record_mutations(&view, &evaluation.changed_rules()));
        }
    }
    Ok(evaluation)
}

/// The operation that records the changing rules in the
/// `gpu-policy.io/mutations` annotation, merged with what an earlier
/// invocation recorded. None when the annotation already says it all.
fn record_mutations(view: &PodView<'_>, rules: &BTreeSet<RuleId>) -> Option<PatchOperation> {
    let existing = view.annotation(MUTATIONS_ANNOTATION);
    let mut all: BTreeSet<RuleId> = rules.clone();
    let mut unknown: Vec<&str> = Vec::new();
    for item in existing.unwrap_or("").split(',').map(str::trim) {
        match RuleId::parse(item) {
            Some(rule) => {
                all.insert(rule);
            }
            None if !item.is_empty() => unknown.push(item),
            None => {}
        }
    }
    let value = all
        .iter()
        .map(|rule| rule.as_str())
        .chain(unknown)
        .collect::<Vec<_>>()
        .join(",");
    if existing == Some(value.as_str()) {
        return None;
    }
    let mut path = view.metadata_pointer.clone();
    let operation = if view.annotations.is_some() {
        path.push_back("annotations");
        path.push_back(MUTATIONS_ANNOTATION);
        add(path, Value::String(value))
    } else {
        let mut annotations = Map::new();
        annotations.insert(MUTATIONS_ANNOTATION.to_owned(), Value::String(value));
        let mut annotations = Value::Object(annotations);
        if view.metadata.is_some() {
            path.push_back("annotations");
        } else {
            let mut metadata = Map::new();
            metadata.insert("annotations".to_owned(), annotations);
            annotations = Value::Object(metadata);
        }
        add(path, annotations)
    };
    Some(operation)
}

/// An `add` operation.
pub fn add(path: PointerBuf, value: Value) -> PatchOperation {
    PatchOperation::Add(AddOperation { path, value })
}

/// `container "a"` or `containers "a", "b"`: PSA-style aggregation.
pub fn containers_phrase<'s>(names: impl IntoIterator<Item = &'s str>) -> String {
    quoted_list("container", "containers", names)
}

/// `<singular> "a"` or `<plural> "a", "b"`.
pub fn quoted_list<'s>(
    singular: &str,
    plural: &str,
    names: impl IntoIterator<Item = &'s str>,
) -> String {
    let names: Vec<String> = names.into_iter().map(|n| format!("{n:?}")).collect();
    let noun = if names.len() == 1 { singular } else { plural };
    format!("{noun} {}", names.join(", "))
}
