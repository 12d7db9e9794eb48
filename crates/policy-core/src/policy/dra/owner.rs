//! The pod a ResourceClaim is made for, as read before the claim is evaluated ([`OwnerPod`]), and
//! where each of its claims gets its devices ([`pod_claim_origins`], [`OwnerClaims`]).
//!
//! A claim made for a pod is judged with the whole pod (its images' floors, its other claims'
//! GPUs): a pod created before its templates (`kubectl apply -f dir/`, Helm's install order) could
//! not be judged whole when it was admitted.
//!
//! Reads, of the pod: `metadata.uid`, `spec.resourceClaims[]` and `status.resourceClaimStatuses[]`
//! ([`GeneratedClaim`]). The claims and templates the entries name are answered by what was read
//! beside the pod ([`ReadClaim`]), else by the cluster's caches.

use std::collections::{BTreeMap, BTreeSet};

use super::claims::{ClaimKind, ClaimSpec, ClaimSummary};
use super::{ClaimFacts, Resolved};
use crate::document::Json;
use crate::policy::dra::allocation::{AllocatedDevice, DeviceVersions};
use crate::policy::pod::{ClaimSource, PodClaim};

/// The most entries of `spec.resourceClaims` a pod is judged with: each
/// may cost an API call while the claim's review waits, so past it nothing
/// but the pod is read and the claim rules say so. Real pods list a few.
pub const MAX_POD_CLAIMS: usize = 32;

/// The Pod a claim is made for, as the webhook read it from the API server before the claim.
#[derive(Debug, Clone, PartialEq)]
pub enum OwnerPod<'a> {
    Read(ReadPod<'a>),
    /// No pod of that name has the UID the claim was made for. One answer
    /// for "none" and "another one", because anyone who reaches the webhook
    /// can forge a claim's review: it must not learn whether a pod exists.
    NotFound,
    /// It could not be read: why, on one line.
    Unreadable(String),
}

/// What was read of the pod.
#[derive(Debug, Clone, PartialEq)]
pub struct ReadPod<'a> {
    /// The pod (its metadata and spec, as the rules read them).
    pub pod: Json<'a>,
    /// What its `status.resourceClaimStatuses` names.
    pub generated: &'a [GeneratedClaim],
    /// Its claims and templates the caches did not know, read beside it.
    pub claims: &'a [ReadClaim],
}

/// One entry of a pod's `status.resourceClaimStatuses`: the claim the resource claim controller
/// made for the pod claim `pod_claim`; None when it made none (none was needed).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GeneratedClaim {
    pub pod_claim: String,
    pub claim: Option<String>,
}

/// A ResourceClaim or ResourceClaimTemplate read by name beside the pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadClaim {
    pub kind: ClaimKind,
    pub name: String,
    pub read: Fetched,
}

/// What one read found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fetched {
    /// Its requests as written (which classes hand out GPUs is judged when it is evaluated).
    Found(ClaimSpec),
    NotFound,
    /// Not read, or not readable: why, on one line.
    Unread(String),
}

/// Where one entry of a pod's `spec.resourceClaims` gets its devices.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimOrigin<'a> {
    /// The claim under review is made from it.
    UnderReview,
    /// An existing claim (`resourceClaimName`), possibly shared.
    Claim(&'a str),
    /// A template, and the claim made from it for this pod when the pod's status names one (it has
    /// the template's requests, and outlives the template).
    Template { template: &'a str, generated: Option<&'a str> },
    /// Nothing: the pod's status says no claim was needed, or the entry names neither kind.
    Nothing,
}

/// One entry of a pod's `spec.resourceClaims`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodClaimEntry<'a> {
    pub name: &'a str,
    pub origin: ClaimOrigin<'a>,
}

/// The pod's claims, each entry name once (the API server refuses a pod
/// that names one twice); `under_review`: the pod claim the claim under
/// review is made from (`resource.kubernetes.io/pod-claim-name`). Err with
/// their number when they are more than [`MAX_POD_CLAIMS`].
pub fn pod_claim_origins<'a>(
    resource_claims: &[PodClaim<'a>],
    generated: &'a [GeneratedClaim],
    under_review: Option<&str>,
) -> Result<Vec<PodClaimEntry<'a>>, usize> {
    // Pod claim -> what the controller made for it: of two, the first.
    let mut made: BTreeMap<&str, Option<&'a str>> = BTreeMap::new();
    for status in generated {
        made.entry(status.pod_claim.as_str()).or_insert(status.claim.as_deref());
    }
    let mut seen = BTreeSet::new();
    let mut entries = Vec::new();
    for claim in resource_claims {
        if !seen.insert(claim.name) {
            continue;
        }
        if entries.len() == MAX_POD_CLAIMS {
            let listed: BTreeSet<&str> = resource_claims.iter().map(|c| c.name).collect();
            return Err(listed.len());
        }
        let origin = match claim.source {
            ClaimSource::Template(_) if under_review == Some(claim.name) => {
                ClaimOrigin::UnderReview
            }
            ClaimSource::Template(template) => match made.get(claim.name) {
                Some(None) => ClaimOrigin::Nothing,
                generated => {
                    ClaimOrigin::Template { template, generated: generated.copied().flatten() }
                }
            },
            ClaimSource::Claim(name) => ClaimOrigin::Claim(name),
            ClaimSource::Missing => ClaimOrigin::Nothing,
        };
        entries.push(PodClaimEntry { name: claim.name, origin });
    }
    Ok(entries)
}

/// The claims and templates to read beside the pod: those the entries count from that `known` (the
/// caches) cannot answer, each once, in the entries' order. A template entry whose generated claim
/// or template is known reads nothing; one that knows neither reads the generated claim (what the
/// pod got), else the template.
pub fn to_read<'a>(
    entries: &[PodClaimEntry<'a>],
    known: impl Fn(ClaimKind, &str) -> bool,
) -> Vec<(ClaimKind, &'a str)> {
    let mut reads: Vec<(ClaimKind, &'a str)> = Vec::new();
    let mut seen = BTreeSet::new();
    let mut push = |kind: ClaimKind, name: &'a str| {
        if seen.insert((kind.as_str(), name)) {
            reads.push((kind, name));
        }
    };
    for entry in entries {
        match entry.origin {
            ClaimOrigin::Claim(name) if !known(ClaimKind::Claim, name) => {
                push(ClaimKind::Claim, name);
            }
            ClaimOrigin::Template { template, generated } => {
                let generated_known = generated.is_some_and(|g| known(ClaimKind::Claim, g));
                if generated_known || known(ClaimKind::Template, template) {
                    continue;
                }
                match generated {
                    Some(name) => push(ClaimKind::Claim, name),
                    None => push(ClaimKind::Template, template),
                }
            }
            _ => {}
        }
    }
    reads
}

/// Where a claim's pod's claims resolve: the claim under review for the template its pod claim
/// names, what was read beside the pod, then the cluster's caches; a template neither knows answers
/// as the claim made from it for this pod, when the pod's status names one.
pub struct OwnerClaims<'a> {
    namespace: &'a str,
    /// The template of the claim under review's pod claim, and the claim.
    under_review: Option<(&'a str, ClaimSummary)>,
    /// What was read beside the pod.
    read: BTreeMap<(ClaimKind, &'a str), Resolved>,
    /// Template -> the claim made from it for this pod.
    generated: BTreeMap<&'a str, &'a str>,
    cache: Option<&'a dyn ClaimFacts>,
}

impl<'a> OwnerClaims<'a> {
    /// `is_gpu_class` judges the classes of what was read.
    pub fn new(
        namespace: &'a str,
        entries: &[PodClaimEntry<'a>],
        read: &'a [ReadClaim],
        under_review: Option<(&'a str, ClaimSummary)>,
        cache: Option<&'a dyn ClaimFacts>,
        is_gpu_class: &dyn Fn(&str) -> bool,
    ) -> Self {
        let read = read.iter().map(|claim| {
            let resolved = match &claim.read {
                Fetched::Found(spec) => Resolved::Known(spec.summary(is_gpu_class)),
                Fetched::NotFound => Resolved::Unknown,
                Fetched::Unread(why) => Resolved::Unreadable(format!(
                    "{} {:?} not read: {why}",
                    claim.kind.as_str(),
                    claim.name
                )),
            };
            ((claim.kind, claim.name.as_str()), resolved)
        });
        let read = read.collect();
        let generated = entries
            .iter()
            .filter_map(|entry| match entry.origin {
                ClaimOrigin::Template { template, generated: Some(claim) } => {
                    Some((template, claim))
                }
                _ => None,
            })
            .collect();
        OwnerClaims { namespace, under_review, read, generated, cache }
    }

    /// Read beside the pod, else known to the caches.
    fn lookup(&self, kind: ClaimKind, name: &str) -> Resolved {
        if let Some(read) = self.read.get(&(kind, name)) {
            return read.clone();
        }
        match (self.cache, kind) {
            (None, _) => Resolved::Unknown,
            (Some(cache), ClaimKind::Claim) => cache.resource_claim(self.namespace, name),
            (Some(cache), ClaimKind::Template) => {
                cache.resource_claim_template(self.namespace, name)
            }
        }
    }
}

impl ClaimFacts for OwnerClaims<'_> {
    fn resource_claim_template(&self, namespace: &str, name: &str) -> Resolved {
        if namespace != self.namespace {
            return Resolved::Unknown;
        }
        if let Some((template, summary)) = &self.under_review
            && *template == name
        {
            return Resolved::Known(summary.clone());
        }
        match self.lookup(ClaimKind::Template, name) {
            Resolved::Known(summary) => Resolved::Known(summary),
            unknown => match self.generated.get(name) {
                Some(claim) => match self.lookup(ClaimKind::Claim, claim) {
                    Resolved::Known(summary) => Resolved::Known(summary),
                    _ => unknown,
                },
                None => unknown,
            },
        }
    }

    fn resource_claim(&self, namespace: &str, name: &str) -> Resolved {
        if namespace != self.namespace {
            return Resolved::Unknown;
        }
        self.lookup(ClaimKind::Claim, name)
    }

    fn is_gpu_device_class(&self, class: &str) -> bool {
        self.cache.is_some_and(|c| c.is_gpu_device_class(class))
    }

    fn allocation(&self, namespace: &str, name: &str) -> Option<Vec<AllocatedDevice>> {
        self.cache?.allocation(namespace, name)
    }

    fn device_versions(&self, driver: &str, pool: &str, device: &str) -> Option<DeviceVersions> {
        self.cache?.device_versions(driver, pool, device)
    }

    fn claims_made_for(&self, namespace: &str, pod_uid: &str) -> Option<BTreeMap<String, String>> {
        self.cache?.claims_made_for(namespace, pod_uid)
    }

    fn serves_extended_resource(&self, resource: &str) -> bool {
        self.cache.is_some_and(|c| c.serves_extended_resource(resource))
    }
}

#[cfg(test)]
mod tests;
