//! R4 `compute-affinity` for a ResourceClaim made for a pod (mutating): the device the claim gets
//! meets what the pod's images need (docs/policy.md, "GPUs that come through DRA claims").
//!
//! Reads: the claim's controller owner of kind Pod (`metadata.ownerReferences`, set by the
//! resource claim controller, or the scheduler for extended-resource claims); that pod
//! ([`ClaimInput::owner`]: one GET, with the claims and templates the caches lacked), its
//! UID and what R4 reads of it at admission (`super::dra_floors`: images of the claim-backed
//! GPU containers, their `NVIDIA_REQUIRE_CUDA`, the namespace's and pod annotation's
//! minimum); the claim's device requests (`exactly`, each `firstAvailable` subrequest, or the
//! flat v1beta1 request) and their `deviceClassName`.
//!
//! The needs come from the pod's spec, never its `gpu-policy.io/gpu-needs` annotation: an author
//! may edit that after admission (no webhook sees a metadata update), and a pod admitted before its
//! templates recorded nothing; so a pod's claims get the same floors whichever came first.
//!
//! Changes: adds one selector,
//! [`GpuNeeds::selector`](crate::policy::dra::floor::GpuNeeds::selector), to every request
//! of a GPU device class, unless it carries it already (re-invocation; the writing is
//! [`super::claim_selectors`]); nothing with `draComputeAffinity: nodeLabels`.
//!
//! Never denies. A claim whose pod cannot be read (missing, API error, no connection,
//! another pod of the name) is admitted unchanged with a notice; missing and renamed get the
//! same notice, so a forged review cannot tell whether a pod exists.

use super::claim_selectors::{MadeLists, add_selector, gpu_alternatives};
use super::dra_floors::pod_needs;
use super::image_floors::base_minimum;
use crate::policy::dra::allocation::read_made_for;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::message::{Notice, NoticeKind, quoted_list};
use crate::policy::rules::rule::{ClaimInput, ClaimOwner, Findings, Mutation};

/// The floors' half of R4's claim entry ([`super::claim_entry`]); `made`: the selector lists
/// this evaluation made.
pub(super) fn check(input: &ClaimInput<'_>, made: &mut MadeLists) -> Findings {
    let mut findings = Findings::default();
    let (Some(owner), ClaimKind::Claim) = (input.owner, input.kind) else {
        return findings;
    };
    let Some(made_for) = read_made_for(input.object) else {
        return findings;
    };
    if !input.settings.config().dra_compute_affinity.claims() {
        return findings;
    }
    let pod = &made_for.pod;
    let owner = match owner {
        ClaimOwner::Read(owner) => owner,
        ClaimOwner::NotFound => return unchanged(findings, &not_found(pod)),
        ClaimOwner::Unreadable(why) => {
            return unchanged(findings, &format!("cannot read its pod {pod:?}: {why}"));
        }
    };
    // What the pod's admission says of its annotations and images is said there, not on its claims.
    let mut ignored = Vec::new();
    let base = base_minimum(&owner.pod, &mut ignored);
    let Some((needs, _, _)) = pod_needs(&owner.pod, base, &mut ignored) else {
        return findings;
    };
    let alternatives = gpu_alternatives(input);
    let (operations, requests) = add_selector(&alternatives, &needs.selector(), made);
    if operations.is_empty() {
        return findings;
    }
    findings.changes.push(Mutation {
        summary: format!(
            "require {needs} of the devices of {} (pod {}: {})",
            quoted_list("request", "requests", requests),
            made_for.pod,
            needs.images.join(", ")
        ),
        operations,
        overrides_author: false,
    });
    findings
}

/// The claim left as it is, and why.
fn unchanged(mut findings: Findings, why: &str) -> Findings {
    findings.notices.push(Notice::new(
        NoticeKind::UnreadClaimOwner,
        format!("compute-affinity: claim unchanged: {why}"),
    ));
    findings
}

/// Why a claim whose pod is gone, or is another pod of the same name, is left unchanged.
fn not_found(pod: &str) -> String {
    format!("its pod {pod:?} was not found with the UID it was made for")
}

#[cfg(test)]
mod tests;
