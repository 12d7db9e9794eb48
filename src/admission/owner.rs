//! The pod a ResourceClaim is made for, read before the claim is evaluated:
//! the server reads ([`crate::server`]'s `claim_owner`), this says what is
//! read beside the pod ([`claims_to_read`]), keeps what was read
//! ([`OwnerRead`], [`read_claim`]) and hands it to the policy as documents
//! ([`OwnerRead::document`], [`OwnerDocument::owner_pod`]).
//!
//! The pod is read as the review's object is ([`object_tree`]: only the
//! fields some rule reads, within a budget of its size); its
//! `status.resourceClaimStatuses` beside it. A claim or template read
//! beside it is kept as its requests only (`ClaimSpec`), as the caches
//! keep one.

use std::collections::BTreeSet;

use serde::Deserialize;

use super::images::Wanted;
use super::object_tree;
use crate::document::{Budget, Document};
use crate::policy::dra::ClaimFacts;
use crate::policy::dra::Resolved;
use crate::policy::dra::allocation::MadeFor;
use crate::policy::dra::claims::{ClaimKind, read_object};
use crate::policy::dra::owner::{
    Fetched, GeneratedClaim, OwnerPod, ReadClaim, ReadPod, pod_claim_origins, to_read,
};
use crate::policy::{ContainerKind, PodView, Shape};
use crate::registry::Platform;
use crate::settings::Settings;

/// What the server read of the pod a claim is made for.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnerRead {
    Read {
        /// The pod as the API server sent it.
        text: String,
        /// What its `status.resourceClaimStatuses` names.
        generated: Vec<GeneratedClaim>,
        /// Its claims and templates read beside it.
        claims: Vec<ReadClaim>,
    },
    /// See [`OwnerPod::NotFound`].
    NotFound,
    /// Why it could not be read, on one line.
    Unreadable(String),
}

/// An [`OwnerRead`] whose pod is a document.
pub struct OwnerDocument<'r> {
    read: &'r OwnerRead,
    /// The pod, or why it cannot be read; None when no pod was read.
    pod: Option<Result<Document<'r>, UnreadPod>>,
}

/// Why the API server's answer for a pod is not read as one.
#[derive(Debug, thiserror::Error)]
pub enum UnreadPod {
    #[error("the API server's answer is not a pod: {0}")]
    NotAPod(#[from] sonic_rs::Error),
    #[error("it holds more values than the webhook holds in memory for its size")]
    OverBudget,
}

impl OwnerRead {
    /// The pod read as a document.
    pub fn document(&self) -> OwnerDocument<'_> {
        let pod = match self {
            OwnerRead::Read { text, .. } => Some(pod_document(text)),
            _ => None,
        };
        OwnerDocument { read: self, pod }
    }
}

impl OwnerDocument<'_> {
    /// The owner as the policy takes it.
    pub fn owner_pod(&self) -> OwnerPod<'_> {
        match (self.read, &self.pod) {
            (OwnerRead::NotFound, _) => OwnerPod::NotFound,
            (OwnerRead::Unreadable(why), _) => OwnerPod::Unreadable(why.clone()),
            (OwnerRead::Read { .. }, Some(Err(why))) => OwnerPod::Unreadable(why.to_string()),
            (OwnerRead::Read { .. }, None) => OwnerPod::NotFound,
            (
                OwnerRead::Read {
                    generated, claims, ..
                },
                Some(Ok(pod)),
            ) => OwnerPod::Read(ReadPod {
                pod: pod.root(),
                generated,
                claims,
            }),
        }
    }
}

/// The pod of `text`, with the fields some rule reads.
fn pod_document(text: &str) -> Result<Document<'_>, UnreadPod> {
    let budget = Budget::new(object_tree::budget(text.len()));
    let mut deserializer = sonic_rs::Deserializer::from_str(text);
    let document = object_tree::read(text, &mut deserializer, &budget)?;
    deserializer.end()?;
    if document.exceeded_budget() {
        return Err(UnreadPod::OverBudget);
    }
    Ok(document)
}

/// The UID of the pod of `text`, when it has one.
pub fn pod_uid(text: &str) -> Option<String> {
    let uid = sonic_rs::get(text, ["metadata", "uid"]).ok()?;
    sonic_rs::JsonValueTrait::as_str(&uid).map(str::to_owned)
}

/// One entry of `status.resourceClaimStatuses`, as the resource claim
/// controller writes it.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimStatus {
    name: String,
    #[serde(default)]
    resource_claim_name: Option<String>,
}

/// What the pod of `text` says the resource claim controller made for its
/// template entries; nothing when it says nothing readable.
fn generated_claims(text: &str) -> Vec<GeneratedClaim> {
    let Ok(statuses) = sonic_rs::get(text, ["status", "resourceClaimStatuses"]) else {
        return Vec::new();
    };
    let statuses: Vec<ClaimStatus> = sonic_rs::from_str(statuses.as_raw_str()).unwrap_or_default();
    statuses
        .into_iter()
        .map(|status| GeneratedClaim {
            pod_claim: status.name,
            claim: status.resource_claim_name,
        })
        .collect()
}

/// What to read beside the pod of `text`, made for by the claim under
/// review (`made_for`): what its `status` names, and the claims and
/// templates of its entries that `cache` cannot answer
/// ([`crate::policy::dra::owner::to_read`]). Nothing for a pod that lists
/// more than the policy judges, or that is not read as a pod (the policy
/// says so).
pub fn claims_to_read(
    text: &str,
    made_for: &MadeFor,
    namespace: &str,
    settings: &Settings,
    cache: Option<&dyn ClaimFacts>,
) -> (Vec<GeneratedClaim>, Vec<(ClaimKind, String)>) {
    let generated = generated_claims(text);
    let Ok(document) = pod_document(text) else {
        return (generated, Vec::new());
    };
    let Ok(Some(view)) = PodView::parse(document.root(), Shape::Pod, settings) else {
        return (generated, Vec::new());
    };
    let entries = pod_claim_origins(
        &view.resource_claims,
        &generated,
        made_for.pod_claim.as_deref(),
    );
    let Ok(entries) = entries else {
        return (generated, Vec::new());
    };
    let known = |kind: ClaimKind, name: &str| {
        let resolved = match (cache, kind) {
            (None, _) => Resolved::Unknown,
            (Some(cache), ClaimKind::Claim) => cache.resource_claim(namespace, name),
            (Some(cache), ClaimKind::Template) => cache.resource_claim_template(namespace, name),
        };
        resolved != Resolved::Unknown
    };
    let reads = to_read(&entries, known)
        .into_iter()
        .map(|(kind, name)| (kind, name.to_owned()))
        .collect();
    (generated, reads)
}

/// The claim or template `name` as read: its text (None: not found), or
/// why it was not read.
pub fn read_claim(
    kind: ClaimKind,
    name: String,
    text: Result<Option<String>, String>,
) -> ReadClaim {
    let read = match text {
        Ok(None) => Fetched::NotFound,
        Err(why) => Fetched::Unread(why),
        Ok(Some(text)) => match Document::parse(&text) {
            Err(error) => Fetched::Unread(format!("the API server's answer is not JSON: {error}")),
            Ok(document) => match read_object(document.root(), kind) {
                Ok(spec) => Fetched::Found(spec),
                Err(error) => Fetched::Unread(error.to_string()),
            },
        },
    };
    ReadClaim { kind, name, read }
}

/// The images of the pod read worth a registry lookup before its claim is
/// evaluated (registry mode), the platform it runs on and the claim's
/// namespace, whose share of the lookup queue they take: those of its
/// containers that use a claim or ask for a GPU resource, each once. Which
/// of them hold GPUs is known once its claims are resolved, with the
/// lookups' answers; a container whose claims hold none costs one lookup
/// more, from the resolver's caches when the pod's admission made it.
pub fn images_to_resolve(
    owner: &OwnerRead,
    settings: &Settings,
    namespace: &str,
) -> Option<Wanted> {
    let OwnerRead::Read { text, .. } = owner else {
        return None;
    };
    let document = pod_document(text).ok()?;
    let view = PodView::parse(document.root(), Shape::Pod, settings).ok()??;
    let mut images: Vec<String> = Vec::new();
    let mut seen = BTreeSet::new();
    let wanted = view.containers.iter().filter(|c| {
        c.kind != ContainerKind::Ephemeral && (!c.claims.is_empty() || c.is_device_plugin_gpu())
    });
    for image in wanted.filter_map(|c| c.image) {
        if seen.insert(image) {
            images.push(image.to_owned());
        }
    }
    (!images.is_empty()).then(|| Wanted {
        images,
        platform: Platform::of_spec_fields(view.spec),
        namespace: namespace.to_owned(),
    })
}
