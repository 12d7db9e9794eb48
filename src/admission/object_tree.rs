//! The object of a review as a [`Document`] that borrows the body, read in
//! the pass that parses the body, with only the fields some rule reads
//! (docs/performance.md, "An allowlist of what the rules read"). A subtree
//! a rule may copy into a patch or compare whole (`affinity`,
//! `tolerations`, `resources`, `devices`) is kept whole.
//!
//! Leaving fields out cannot change a patch: the document is never encoded
//! again, and a list keeps the place of every element it leaves out, so
//! indexes stay as written. The nodes, and what the policy builds for what
//! is kept ([`Place::cost`](Unread::cost)), are charged to a [`Budget`]
//! ([`budget`]).

use serde::de::Deserializer;

use crate::document::{self, Budget, Document, Json, Unread};
use crate::policy::container::{ClaimUse, EnvEntry};
use crate::policy::pod::{PodClaim, Volume};
use crate::policy::{Container, READ_ENV_NAMES};

/// Where in the object a value sits, as far as keeping goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Place {
    /// The object itself, a pod template (`template`), a CronJob's
    /// `jobTemplate`.
    Root,
    Metadata,
    /// Of a pod, a workload, a claim, a claim template (whose `spec.spec`
    /// is a claim's).
    Spec,
    /// `containers`, `initContainers` or `ephemeralContainers`.
    ContainerList,
    Container,
    ContainerSecurity,
    Resources,
    EnvList,
    EnvEntry,
    MountList,
    Mount,
    VolumeList,
    Volume,
    /// A pod's `resourceClaims`.
    PodClaimList,
    PodClaim,
    /// A container's `resources.claims`.
    ClaimUseList,
    ClaimUse,
    /// Kept with everything below it.
    Whole,
}

/// A container's share of a patch, held and then encoded.
const PATCH_BYTES_PER_CONTAINER: usize = 512;

/// What the documents of a body may take: a body and a quarter, plus 1
/// MiB for the smallest (whose few values weigh more than their bytes). A
/// real pod keeps far less. A dense object that spends a budget of twice
/// its body, and is denied, took its review 3.8 bodies above the server's
/// base (debug build; tests/attack/memory_shapes.rs).
pub fn budget(body_len: usize) -> usize {
    body_len.saturating_add(body_len / 4).saturating_add(BUDGET_FLOOR)
}

const BUDGET_FLOOR: usize = 1 << 20;

pub fn read<'de, D: Deserializer<'de>>(
    text: &'de str,
    deserializer: D,
    budget: &Budget,
) -> Result<Document<'de>, D::Error> {
    document::read(text, deserializer, Place::Root, budget)
}

impl Unread for Place {
    fn member(self, key: &str) -> Place {
        match (self, key) {
            (Place::Root, "metadata") | (Place::Spec, "metadata") => Place::Metadata,
            (Place::Root, "spec") | (Place::Spec, "spec") => Place::Spec,
            (Place::Root, "template") | (Place::Spec, "template" | "jobTemplate") => Place::Root,
            (Place::Spec, "containers" | "initContainers" | "ephemeralContainers") => {
                Place::ContainerList
            }
            (Place::Spec, "volumes") => Place::VolumeList,
            (Place::Spec, "resourceClaims") => Place::PodClaimList,
            (Place::Container, "env") => Place::EnvList,
            (Place::Container, "volumeMounts") => Place::MountList,
            (Place::Container, "securityContext") => Place::ContainerSecurity,
            (Place::Container, "resources") => Place::Resources,
            (Place::Resources, "claims") => Place::ClaimUseList,
            _ => Place::Whole,
        }
    }

    fn element(self) -> Place {
        match self {
            Place::ContainerList => Place::Container,
            Place::EnvList => Place::EnvEntry,
            Place::MountList => Place::Mount,
            Place::VolumeList => Place::Volume,
            Place::PodClaimList => Place::PodClaim,
            Place::ClaimUseList => Place::ClaimUse,
            _ => Place::Whole,
        }
    }

    /// An env entry is kept when it names a variable a rule reads
    /// ([`READ_ENV_NAMES`]), or is malformed (the rules report it): a
    /// container may carry hundreds of others.
    fn keeps(self, element: Json<'_>) -> bool {
        if self != Place::EnvEntry {
            return true;
        }
        if !element.is_object() {
            return true;
        }
        match element.get("name") {
            Some(name) if !name.is_null() => match name.as_str() {
                Some(name) => READ_ENV_NAMES.contains(&name),
                None => true,
            },
            _ => false,
        }
    }

    /// Whether member `key` is left out: the allowlist (the tests' `KEPT`
    /// table, which they hold this to). One match, asked for every member
    /// read: a search of the table cost the GPU-pod review about 0.4 µs.
    fn skips(self, key: &str) -> bool {
        match self {
            Place::Root => !matches!(key, "apiVersion" | "kind" | "metadata" | "spec" | "template"),
            Place::Metadata => !matches!(
                key,
                "annotations"
                    | "generateName"
                    | "labels"
                    | "name"
                    | "namespace"
                    | "ownerReferences"
                    | "uid"
            ),
            Place::Spec => !matches!(
                key,
                "affinity"
                    | "containers"
                    | "ephemeralContainers"
                    | "initContainers"
                    | "nodeName"
                    | "nodeSelector"
                    | "overhead"
                    | "resourceClaims"
                    | "runtimeClassName"
                    | "schedulerName"
                    | "schedulingGates"
                    | "tolerations"
                    | "volumes"
                    | "jobTemplate"
                    | "template"
                    | "devices"
                    | "metadata"
                    | "spec"
            ),
            Place::Container => !matches!(
                key,
                "env"
                    | "image"
                    | "name"
                    | "resources"
                    | "restartPolicy"
                    | "securityContext"
                    | "volumeMounts"
            ),
            Place::ContainerSecurity => key != "privileged",
            Place::Mount => !matches!(key, "mountPath" | "name"),
            Place::Volume => !matches!(key, "hostPath" | "name"),
            _ => false,
        }
    }

    /// Bytes the policy builds for a value read here, beyond its nodes.
    fn cost(self) -> usize {
        match self {
            // The container's view, and its share of a patch (the pin of
            // NVIDIA_VISIBLE_DEVICES in each container: one operation,
            // about 500 bytes held and encoded).
            Place::Container => size_of::<Container<'static>>() + PATCH_BYTES_PER_CONTAINER,
            Place::EnvEntry => size_of::<EnvEntry<'static>>(),
            Place::Mount => size_of::<&str>(),
            Place::Volume => size_of::<Volume<'static>>(),
            Place::PodClaim => size_of::<PodClaim<'static>>(),
            Place::ClaimUse => size_of::<ClaimUse<'static>>(),
            _ => 0,
        }
    }
}

#[cfg(test)]
mod tests;
