//! The object under evaluation: what it is read as ([`Form`]), who it is
//! for the allowlist ([`Identity`], its controller [`Owner`]) and which of
//! its containers the rules look at ([`Scope`]).

use std::collections::BTreeSet;

use crate::document::Json;

use super::container::{Container, ContainerKind};
use super::dra::claims::ClaimKind;
use super::pod::Shape;

/// The object under evaluation, built once by the admission layer and taken
/// by [`Evaluator::evaluate`](super::Evaluator::evaluate). Past the
/// constructors (who the object is, for the allowlist), `object` is read by
/// [`PodView`](super::PodView) or by the claim reader alone.
#[derive(Debug, Clone)]
pub struct Subject<'a> {
    pub object: Json<'a>,
    pub form: Form<'a>,
    pub namespace: &'a str,
    /// The pod before an update ([`Scope::Update`]): what the update is judged against.
    pub old: Option<Json<'a>>,
}

/// What the evaluator reads an object as.
#[derive(Debug, Clone)]
pub enum Form<'a> {
    /// A Pod, or the pod template of a workload, at `shape`.
    Pod { shape: Shape, identity: Identity<'a>, scope: Scope },
    /// A ResourceClaim or ResourceClaimTemplate: its GPU requests are bounded (R2).
    Claim(ClaimKind),
}

impl<'a> Subject<'a> {
    /// A Pod: being created (`Scope::Whole`), or an update of its
    /// ephemeral containers ([`scope_for_update`]).
    pub fn pod(object: Json<'a>, namespace: &'a str, scope: Scope) -> Self {
        let owner = controller_owner(object);
        Self {
            object,
            form: Form::Pod { shape: Shape::Pod, identity: Identity::Pod { owner }, scope },
            namespace,
            old: None,
        }
    }

    /// An update of a Pod (the main resource, no subresource): `object` as sent, `old` as stored.
    pub fn pod_update(object: Json<'a>, old: Json<'a>, namespace: &'a str) -> Self {
        Self { old: Some(old), ..Self::pod(object, namespace, Scope::Update) }
    }

    /// The pod template of a workload of `kind` (`Deployment`, ...), at `shape` in the object.
    pub fn template(object: Json<'a>, shape: Shape, kind: &'a str, namespace: &'a str) -> Self {
        let name = object
            .get("metadata")
            .and_then(|metadata| metadata.get("name"))
            .and_then(Json::as_str)
            .unwrap_or("");
        Self {
            object,
            form: Form::Pod {
                shape,
                identity: Identity::Workload { kind, name },
                scope: Scope::Whole,
            },
            namespace,
            old: None,
        }
    }

    pub fn claim(object: Json<'a>, kind: ClaimKind, namespace: &'a str) -> Self {
        Self { object, form: Form::Claim(kind), namespace, old: None }
    }
}

/// Which containers a rule looks at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// The whole pod: a pod being created, or a workload template.
    Whole,
    /// An update of `pods/ephemeralcontainers`: only the ephemeral containers not in the old
    /// object. The rest of the pod is immutable and was admitted when it was created.
    NewEphemeralContainers(BTreeSet<String>),
    /// An update of the Pod itself: only an image can change in place (the rest of the spec is
    /// immutable, or only tightened while the pod is scheduling-gated). The rules that read the old
    /// pod ([`RuleInput::old`](super::rules::RuleInput::old)) judge what the update changes; no
    /// container is in scope for the creation checks.
    Update,
}

impl Scope {
    /// Whether a rule should look at this container.
    pub fn includes(&self, container: &Container<'_>) -> bool {
        match self {
            Scope::Whole => true,
            Scope::NewEphemeralContainers(old_names) => {
                container.kind == ContainerKind::Ephemeral && !old_names.contains(container.name)
            }
            Scope::Update => false,
        }
    }

    /// Whether pod-level rules (requests, runtime class, affinity, volumes, annotations) apply.
    pub fn is_whole(&self) -> bool {
        matches!(self, Scope::Whole)
    }

    /// Whether this is an update of the Pod itself ([`Scope::Update`]).
    pub fn is_update(&self) -> bool {
        matches!(self, Scope::Update)
    }
}

/// The scope of an update of the `pods/ephemeralcontainers` subresource:
/// the ephemeral containers that the old object does not have yet.
pub fn scope_for_update(old_object: Json<'_>) -> Scope {
    let names = old_object
        .pointer("/spec/ephemeralContainers")
        .and_then(Json::as_array)
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
    Pod { owner: Option<Owner<'a>> },
    /// A workload: allowlisted by its own kind and name.
    Workload { kind: &'a str, name: &'a str },
}

/// The controller owner reference of an object (`controller: true`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Owner<'a> {
    pub kind: &'a str,
    pub name: &'a str,
    pub uid: Option<&'a str>,
}

/// The controller owner reference of an object. References of the wrong
/// shape are skipped: a malformed one must never exempt anything.
pub fn controller_owner(object: Json<'_>) -> Option<Owner<'_>> {
    // `get`, not `pointer`: a pointer is parsed on every call, and this runs for every pod.
    object
        .get("metadata")?
        .get("ownerReferences")?
        .as_array()?
        .iter()
        .find(|reference| reference.get("controller").and_then(Json::as_bool) == Some(true))
        .and_then(|reference| {
            Some(Owner {
                kind: reference.get("kind")?.as_str()?,
                name: reference.get("name")?.as_str()?,
                uid: reference.get("uid").and_then(Json::as_str),
            })
        })
}

#[cfg(test)]
mod tests;
