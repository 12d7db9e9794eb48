//! The policy: six rules over the raw JSON of a pod or pod template.
//!
//! Every rule is one file and one pure function from a [`RuleInput`] to
//! [`Findings`]: changes (JSON Patch operations on the raw object),
//! violations and notices. [`registry::RULES`] lists the rules once;
//! [`Evaluator::evaluate`] runs them and tags what each finds with its stable
//! [`RuleId`]. Nothing here logs, reads a clock or touches the network, so
//! the offline `check`, the webhook and the audit give the same answers.

pub mod cluster;
pub mod dra;
pub mod evaluator;
pub mod images;
pub mod message;
pub mod pod;
pub mod quantity;
pub mod rules;
#[cfg(test)]
pub mod testing;

use std::collections::BTreeSet;
use std::fmt;

use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation};
use serde::{Serialize, Serializer};
use serde_json::Value;

pub use crate::cuda::ImageNeeds;
use crate::settings::AllowlistEntry;
pub use cluster::ClusterFacts;
pub use dra::ClaimFacts;
pub use evaluator::{Evaluator, Form, Subject};
pub use images::ImageFacts;
pub use message::{Message, Notice, NoticeKind};
pub use pod::{Container, ContainerKind, ObjectError, PodView, Shape};
pub use rules::{Findings, Mutation, RULES, Rule, RuleInput};

/// Declares [`RuleId`]: each variant with the name output, metrics, logs and
/// the `gpu-policy.io/mutations` annotation show.
macro_rules! rule_ids {
    ($($variant:ident => $name:literal,)+) => {
        /// Stable rule identifiers. Their order is the order in which the
        /// `gpu-policy.io/mutations` annotation lists them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum RuleId {
            $($variant,)+
        }

        impl RuleId {
            pub const ALL: &[RuleId] = &[$(RuleId::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(RuleId::$variant => $name,)+
                }
            }
        }
    };
}

rule_ids! {
    VisibleDevices => "visible-devices",
    BoundedRequests => "bounded-requests",
    RuntimeClass => "runtime-class",
    ComputeAffinity => "compute-affinity",
    Allowlist => "allowlist",
    DevicePaths => "device-paths",
}

impl RuleId {
    pub fn parse(text: &str) -> Option<RuleId> {
        Self::ALL.iter().copied().find(|rule| rule.as_str() == text)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RuleId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

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
    fn new(rule: RuleId, mutation: Mutation) -> Self {
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
    pub notices: Vec<Notice>,
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
