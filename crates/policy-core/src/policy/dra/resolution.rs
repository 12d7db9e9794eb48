//! Which containers of a pod hold GPUs through Dynamic Resource Allocation.
//!
//! A container whose `resources.claims[]` names a pod claim (`spec.resourceClaims[]`) that holds a
//! request for a GPU device class is a GPU container; an entry's `request` narrows the use to that
//! request. Ephemeral containers are never GPU containers.
//!
//! A claim that cannot be resolved never gets a pod denied: a notice says
//! so, and its containers are treated as holding no GPU (they stay pinned;
//! the DRA driver's CDI edit replaces the pin where it hands out a device).

use std::collections::{BTreeMap, BTreeSet};

use super::{ClaimFacts, Resolved};
use crate::policy::container::ContainerKind;
use crate::policy::dra::claims::{ClaimSummary, DraCount, base_request};
use crate::policy::message::{Notice, NoticeKind, quoted_list};
use crate::policy::pod::{ClaimSource, PodView};

/// Resolves the claims of the view's containers, setting each container's and the pod's `dra_gpus`.
/// Returns one notice per claim that cannot be resolved.
pub fn resolve<'a>(
    view: &mut PodView<'a>,
    claims: Option<&dyn ClaimFacts>,
    namespace: &str,
) -> Vec<Notice> {
    if view.containers.iter().all(|c| c.claims.is_empty()) {
        // Nearly every pod: what the loop below leaves, without its maps.
        for container in &mut view.containers {
            if container.kind != ContainerKind::Ephemeral {
                container.dra_gpus = None;
                container.unresolved_claim = false;
            }
        }
        view.dra_gpus = None;
        return Vec::new();
    }
    // Each claim or template the pod names, looked up once, however many pod claims name it.
    let mut summaries: Vec<Result<ClaimSummary, String>> = Vec::new();
    let mut by_source: BTreeMap<Option<ClaimSource<'a>>, usize> = BTreeMap::new();
    // Pod claim name -> its entry of `summaries`.
    let mut known: BTreeMap<&str, usize> = BTreeMap::new();
    // Pod claim name -> the containers left without their claim.
    let mut unresolved: BTreeMap<&str, (String, Vec<&str>)> = BTreeMap::new();
    // What the pod's (not ephemeral) containers use, together.
    let mut used = Uses::new();
    // Pod claim name -> where it comes from: of two entries with one name,
    // the first (the API server refuses a pod that has both).
    let mut pod_claims: BTreeMap<&'a str, ClaimSource<'a>> = BTreeMap::new();
    for claim in &view.resource_claims {
        pod_claims.entry(claim.name).or_insert(claim.source);
    }

    for container in &mut view.containers {
        if container.kind == ContainerKind::Ephemeral {
            continue;
        }
        // What this container uses: a request it names twice (through two
        // of its subrequests, or beside the whole claim) is one allocation.
        let mut mine = Uses::new();
        let mut unresolved_use = false;
        for claim_use in container.claims.clone() {
            let at = *known.entry(claim_use.name).or_insert_with(|| {
                let source = pod_claims.get(claim_use.name).copied();
                *by_source.entry(source).or_insert_with(|| {
                    summaries.push(lookup(source, claims, namespace));
                    summaries.len().saturating_sub(1)
                })
            });
            let Some(summary) = summaries.get(at) else {
                continue;
            };
            let count = match summary {
                Err(reason) => Err(reason.clone()),
                Ok(summary) => match claim_use.request {
                    None => Ok(summary.gpu_total()),
                    // `request/subrequest` names a firstAvailable alternative:
                    // the request's count is that of its largest alternative.
                    Some(request) => {
                        summary.request(base_request(request)).map(|r| r.gpu).ok_or_else(|| {
                            format!(
                                "{} has no request {request:?}",
                                source_name(&pod_claims, claim_use.name)
                            )
                        })
                    }
                },
            };
            match count {
                Err(reason) => {
                    unresolved_use = true;
                    unresolved
                        .entry(claim_use.name)
                        .or_insert_with(|| (reason, Vec::new()))
                        .1
                        .push(container.name);
                }
                Ok(None) => {}
                Ok(Some(_)) => {
                    record_use(&mut mine, claim_use.name, claim_use.request);
                    record_use(&mut used, claim_use.name, claim_use.request);
                }
            }
        }
        container.dra_gpus = held(&known, &summaries, &mine);
        container.unresolved_claim = unresolved_use;
    }
    view.dra_gpus = held(&known, &summaries, &used);

    let more = unresolved.len().saturating_sub(MAX_UNRESOLVED_NAMED);
    let mut notices: Vec<Notice> = unresolved
        .into_iter()
        .take(MAX_UNRESOLVED_NAMED)
        .map(|(claim, (reason, containers))| {
            // Fits a kubectl warning: who stays pinned first, then the (maybe long) reason.
            let verb = if containers.len() == 1 { "stays" } else { "stay" };
            let who = quoted_list("container", "containers", containers);
            Notice::new(
                NoticeKind::UnresolvedClaim,
                format!("claim {claim:?} unresolved, {who} {verb} pinned: {reason}"),
            )
        })
        .collect();
    if more > 0 {
        notices.push(Notice::new(
            NoticeKind::UnresolvedClaim,
            format!("{more} more claims unresolved; the containers that use them stay pinned"),
        ));
    }
    notices
}

/// Pod claim name -> None (the whole claim is used) or the names of the requests used.
type Uses<'a> = BTreeMap<&'a str, Option<BTreeSet<&'a str>>>;

/// Records a use of the pod claim `claim`, narrowed to `request` if given: a request is one entry
/// whichever of its subrequests is named (only one of them is allocated).
fn record_use<'a>(uses: &mut Uses<'a>, claim: &'a str, request: Option<&'a str>) {
    let entry = uses.entry(claim).or_insert_with(|| Some(BTreeSet::new()));
    match (request, entry) {
        (None, entry) => *entry = None,
        (Some(request), Some(requests)) => {
            requests.insert(base_request(request));
        }
        (Some(_), None) => {}
    }
}

/// The GPUs the uses hold: each claim (or request) once, however many uses name it.
fn held(
    known: &BTreeMap<&str, usize>,
    summaries: &[Result<ClaimSummary, String>],
    uses: &Uses<'_>,
) -> Option<DraCount> {
    uses.iter()
        .filter_map(|(name, requests)| {
            let Some(Ok(summary)) = known.get(name).and_then(|at| summaries.get(*at)) else {
                return None;
            };
            match requests {
                None => summary.gpu_total(),
                Some(requests) => requests
                    .iter()
                    .filter_map(|r| summary.request(r).and_then(|r| r.gpu))
                    .reduce(DraCount::plus),
            }
        })
        .reduce(DraCount::plus)
}

/// How many unresolved claims get a warning of their own; the rest share
/// one, so that `kubectl` prints a few lines, not thousands.
const MAX_UNRESOLVED_NAMED: usize = 3;

/// `ResourceClaimTemplate "name"` or `ResourceClaim "name"` of a pod claim.
fn source_name(pod_claims: &BTreeMap<&str, ClaimSource<'_>>, claim: &str) -> String {
    pod_claims
        .get(claim)
        .and_then(|source| source_phrase(*source))
        .unwrap_or_else(|| format!("claim {claim:?}"))
}

/// `ResourceClaimTemplate "name"` or `ResourceClaim "name"`; None for a pod claim naming neither.
fn source_phrase(source: ClaimSource<'_>) -> Option<String> {
    match source {
        ClaimSource::Template(name) => Some(format!("ResourceClaimTemplate {name:?}")),
        ClaimSource::Claim(name) => Some(format!("ResourceClaim {name:?}")),
        ClaimSource::Missing => None,
    }
}

fn lookup(
    source: Option<ClaimSource<'_>>,
    claims: Option<&dyn ClaimFacts>,
    namespace: &str,
) -> Result<ClaimSummary, String> {
    let resolved = match (source, claims) {
        (None, _) => return Err("no such entry in spec.resourceClaims".to_owned()),
        (Some(ClaimSource::Missing), _) => {
            return Err("it names neither a template nor a claim".to_owned());
        }
        (Some(_), None) => Resolved::Unknown,
        (Some(ClaimSource::Template(name)), Some(facts)) => {
            facts.resource_claim_template(namespace, name)
        }
        (Some(ClaimSource::Claim(name)), Some(facts)) => facts.resource_claim(namespace, name),
    };
    match resolved {
        Resolved::Known(summary) => Ok(summary),
        Resolved::Unknown => {
            Err(format!("{} not found", source.and_then(source_phrase).unwrap_or_default()))
        }
        Resolved::Unreadable(reason) => Err(reason),
    }
}

#[cfg(test)]
mod tests;
