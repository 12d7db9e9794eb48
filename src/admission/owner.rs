//! The pod a ResourceClaim is made for, read by the server before the claim
//! is evaluated ([`claims_to_read`], [`OwnerRead`], [`OwnerDocument::owner_pod`])
//! as the review's object is ([`object_tree`], within a budget of its size);
//! a claim or template beside it as its requests only, as the caches keep one.

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
    Unreadable(String),
}

pub struct OwnerDocument<'r> {
    read: &'r OwnerRead,
    /// None when no pod was read.
    pod: Option<Result<Document<'r>, UnreadPod>>,
}

#[derive(Debug, thiserror::Error)]
pub enum UnreadPod {
    #[error("the API server's answer is not a pod: {0}")]
    NotAPod(#[from] sonic_rs::Error),
    #[error("it holds more values than the webhook holds in memory for its size")]
    OverBudget,
}

impl OwnerRead {
    pub fn document(&self) -> OwnerDocument<'_> {
        let pod = match self {
            OwnerRead::Read { text, .. } => Some(pod_document(text)),
            _ => None,
        };
        OwnerDocument { read: self, pod }
    }
}

impl OwnerDocument<'_> {
    pub fn owner_pod(&self) -> OwnerPod<'_> {
        match (self.read, &self.pod) {
            (OwnerRead::NotFound, _) => OwnerPod::NotFound,
            (OwnerRead::Unreadable(why), _) => OwnerPod::Unreadable(why.clone()),
            (OwnerRead::Read { .. }, Some(Err(why))) => OwnerPod::Unreadable(why.to_string()),
            (OwnerRead::Read { .. }, None) => OwnerPod::NotFound,
            (OwnerRead::Read { generated, claims, .. }, Some(Ok(pod))) => {
                OwnerPod::Read(ReadPod { pod: pod.root(), generated, claims })
            }
        }
    }
}

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

pub fn pod_uid(text: &str) -> Option<String> {
    let uid = sonic_rs::get(text, ["metadata", "uid"]).ok()?;
    sonic_rs::JsonValueTrait::as_str(&uid).map(str::to_owned)
}

/// One entry of `status.resourceClaimStatuses`.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ClaimStatus {
    name: String,
    #[serde(default)]
    resource_claim_name: Option<String>,
}

/// What the resource claim controller made for the pod's template entries.
fn generated_claims(text: &str) -> Vec<GeneratedClaim> {
    let Ok(statuses) = sonic_rs::get(text, ["status", "resourceClaimStatuses"]) else {
        return Vec::new();
    };
    let statuses: Vec<ClaimStatus> = sonic_rs::from_str(statuses.as_raw_str()).unwrap_or_default();
    statuses
        .into_iter()
        .map(|status| GeneratedClaim { pod_claim: status.name, claim: status.resource_claim_name })
        .collect()
}

/// What its `status` names, and the claims and templates of the pod's
/// entries that `cache` cannot answer. Nothing to read for a pod that lists
/// more than the policy judges, or is no pod (the policy says so).
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
    let entries =
        pod_claim_origins(&view.resource_claims, &generated, made_for.pod_claim.as_deref());
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
    let reads =
        to_read(&entries, known).into_iter().map(|(kind, name)| (kind, name.to_owned())).collect();
    (generated, reads)
}

/// `text`: None when not found.
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

/// The images of the pod worth a registry lookup before its claim is
/// evaluated: those of its containers that use a claim or ask for a GPU
/// resource. Which hold GPUs is known only once the claims are resolved;
/// one that holds none costs a lookup more, from the resolver's caches.
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
