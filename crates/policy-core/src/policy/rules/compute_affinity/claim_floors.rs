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
//! of a GPU device class, unless it carries it already (re-invocation); nothing with
//! `draComputeAffinity: nodeLabels`.
//!
//! Never denies. A claim whose pod cannot be read (missing, API error, no connection,
//! another pod of the name) is admitted unchanged with a notice; missing and renamed get the
//! same notice, so a forged review cannot tell whether a pod exists.

use json_patch::PatchOperation;
use json_patch::jsonptr::PointerBuf;
use serde_json::{Value, json};

use crate::document::Json;

use super::dra_floors::pod_needs;
use super::image_floors::base_minimum;
use crate::policy::dra::allocation::read_made_for;
use crate::policy::dra::claims::ClaimKind;
use crate::policy::message::{Notice, NoticeKind, quoted_list};
use crate::policy::patch::add;
use crate::policy::rules::rule::{
    ApiServer, Check, ClaimInput, ClaimOwner, Entry, Findings, Mutation,
};

pub const ENTRY: Entry = Entry {
    check: Check::Claim(check),
    api_server: ApiServer::WebhookOnly {
        reason: "what a claim's pod needs comes from the pod's images, another object, which a \
        policy on the claim cannot read",
    },
};

pub fn check(input: &ClaimInput<'_>) -> Findings {
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
    let selector = needs.selector();
    let mut operations = Vec::new();
    let mut requests = Vec::new();
    let listed = input.object.pointer("/spec/devices/requests").and_then(Json::as_array);
    for (index, request) in listed.into_iter().flatten().enumerate() {
        let name = request.get("name").and_then(Json::as_str).unwrap_or("");
        let base = format!("/spec/devices/requests/{index}");
        let mut places: Vec<(String, Json<'_>)> = Vec::new();
        if let Some(exactly) = request.get("exactly").filter(|v| v.is_object()) {
            places.push((format!("{base}/exactly"), exactly));
        } else if let Some(first) = request.get("firstAvailable").and_then(Json::as_array) {
            for (sub, alternative) in first.iter().enumerate() {
                places.push((format!("{base}/firstAvailable/{sub}"), alternative));
            }
        } else {
            places.push((base, request));
        }
        let mut changed = false;
        for (at, alternative) in places {
            let class = alternative.get("deviceClassName").and_then(Json::as_str);
            if !class.is_some_and(|c| (input.is_gpu_class)(c)) {
                continue;
            }
            if let Some(operation) = add_selector(&at, alternative, &selector) {
                operations.push(operation);
                changed = true;
            }
        }
        if changed {
            requests.push(name);
        }
    }
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

/// The operation adding `selector` to the alternative at `at` (a JSON
/// pointer), or None when it carries it already.
fn add_selector(at: &str, alternative: Json<'_>, selector: &str) -> Option<PatchOperation> {
    let entry = json!({"cel": {"expression": selector}});
    let path = |suffix: &str| PointerBuf::parse(format!("{at}/{suffix}")).ok();
    match alternative.get("selectors").and_then(Json::as_array) {
        Some(existing) => {
            let carried = existing
                .iter()
                .any(|s| s.pointer("/cel/expression").and_then(Json::as_str) == Some(selector));
            if carried {
                return None;
            }
            path("selectors/-").map(|p| add(p, entry))
        }
        _ => {
            let list = vec![entry];
            path("selectors").map(|p| add(p, Value::Array(list)))
        }
    }
}

#[cfg(test)]
mod tests;
