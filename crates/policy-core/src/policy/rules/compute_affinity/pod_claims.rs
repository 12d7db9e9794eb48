//! The claims whose GPUs a pod's containers hold, with the devices allocated to them: what R4
//! judges of the devices a pod got through claims (the floors, [`super::dra_floors`]; the
//! products, [`super::dra_products`]).
//!
//! Reads: `spec.resourceClaims`, the containers' `resources.claims`, `metadata.uid`; from the
//! claims' facts (the cluster, or `check`'s input) the claims the pod names (`resourceClaimName`)
//! and, for a pod that already exists (`audit`), the claims made for it from its templates, with
//! their allocations.

use std::collections::{BTreeMap, BTreeSet};

use crate::document::Json;

use super::image_floors::Containers;
use crate::policy::dra::Resolved;
use crate::policy::dra::allocation::AllocatedDevice;
use crate::policy::dra::claims::{ClaimSummary, base_request};
use crate::policy::dra::tables::GPU_DRIVER;
use crate::policy::message::quoted_list;
use crate::policy::pod::ClaimSource;
use crate::policy::rules::rule::RuleInput;

/// How many devices a violation names.
pub(super) const MAX_DEVICES_NAMED: usize = 3;

/// A claim whose GPUs some of the pod's containers hold.
pub(super) struct ClaimInUse<'v> {
    /// The ResourceClaim's name.
    pub name: String,
    /// Named by the pod (`resourceClaimName`); false: made for it from one of its templates.
    pub referenced: bool,
    pub summary: ClaimSummary,
    /// The containers that hold its GPUs, in the pod's order, each once.
    pub users: Vec<&'v str>,
    /// The devices of `gpu.nvidia.com` allocated for its GPU requests; None: not allocated.
    pub allocated: Option<Vec<AllocatedDevice>>,
}

impl ClaimInUse<'_> {
    /// `container "a"` or `containers "a", "b"`.
    pub fn users_text(&self) -> String {
        quoted_list("container", "containers", self.users.iter().copied())
    }

    /// `uses` or `use`, as many users as it has.
    pub fn verb(&self) -> &'static str {
        if self.users.len() == 1 { "uses" } else { "use" }
    }
}

/// The claims whose GPUs the `in_claims` containers hold, in the order of `spec.resourceClaims`.
pub(super) fn claims_in_use<'v>(
    input: &RuleInput<'_, 'v>,
    in_claims: Containers<'_>,
) -> Vec<ClaimInUse<'v>> {
    let mut found = Vec::new();
    let Some(claims) = input.claims else {
        return found;
    };
    let view = input.view;
    let uid = view.metadata.and_then(|m| m.get("uid")).and_then(Json::as_str);
    // Pod claim name -> the uses of it by the containers in claims, in the containers' order: each
    // pod claim finds its users without a pass over every container.
    let mut uses: BTreeMap<&str, Vec<(usize, Option<&str>)>> = BTreeMap::new();
    for (at, container) in view.containers.iter().enumerate() {
        if !in_claims(container) {
            continue;
        }
        for claim_use in &container.claims {
            uses.entry(claim_use.name).or_default().push((at, claim_use.request));
        }
    }
    // The claims made for the pod from its templates, read once: asking
    // for each pod claim would go over the namespace's claims each time.
    let mut made_for: Option<Option<BTreeMap<String, String>>> = None;
    // A pod claim's name is its key (the API server refuses a pod that
    // names two alike, and the containers' uses resolve to the first).
    let mut seen = BTreeSet::new();
    for pod_claim in &view.resource_claims {
        if !seen.insert(pod_claim.name) {
            continue;
        }
        let (name, referenced) = match pod_claim.source {
            ClaimSource::Claim(name) => (name.to_owned(), true),
            ClaimSource::Template(_) => {
                let made = uid.and_then(|uid| {
                    made_for
                        .get_or_insert_with(|| claims.claims_made_for(input.namespace_name, uid))
                        .as_ref()?
                        .get(pod_claim.name)
                        .cloned()
                });
                match made {
                    Some(name) => (name, false),
                    None => continue,
                }
            }
            ClaimSource::Missing => continue,
        };
        let summary = match claims.resource_claim(input.namespace_name, &name) {
            Resolved::Known(summary) => summary,
            _ => continue,
        };
        let gpu_requests = gpu_request_names(&summary);
        // The containers that hold the claim's GPUs: a use narrowed to a
        // request that is not a GPU one (or not there) holds none of them.
        let holds =
            |request: Option<&str>| request.is_none_or(|r| gpu_requests.contains(&base_request(r)));
        let mut users: Vec<&'v str> = Vec::new();
        // The uses come in the containers' order; a container is named once.
        let mut named = None;
        for &(at, request) in uses.get(pod_claim.name).into_iter().flatten() {
            if named != Some(at)
                && holds(request)
                && let Some(container) = view.containers.get(at)
            {
                users.push(container.name);
                named = Some(at);
            }
        }
        if users.is_empty() {
            continue;
        }
        let allocated = claims.allocation(input.namespace_name, &name).map(|devices| {
            devices
                .into_iter()
                .filter(|d| d.driver == GPU_DRIVER)
                .filter(|d| gpu_requests.contains(&base_request(&d.request)))
                .collect()
        });
        found.push(ClaimInUse { name, referenced, summary, users, allocated });
    }
    found
}

/// The names of the claim's GPU requests.
pub(super) fn gpu_request_names(summary: &ClaimSummary) -> Vec<&str> {
    summary.requests.iter().filter(|r| r.gpu.is_some()).map(|r| r.name.as_str()).collect()
}

/// The first [`MAX_DEVICES_NAMED`] of `problems`, then how many more.
pub(super) fn named_devices(problems: Vec<String>) -> String {
    let more = problems.len().saturating_sub(MAX_DEVICES_NAMED);
    let mut named = problems.into_iter().take(MAX_DEVICES_NAMED).collect::<Vec<_>>();
    if more > 0 {
        named.push(format!("{more} more"));
    }
    named.join(", ")
}
