//! R2 `bounded-requests` for Dynamic Resource Allocation objects: a
//! ResourceClaim or ResourceClaimTemplate asks for a bounded number of GPUs.
//!
//! Reads: `metadata.annotations`, the device requests (see
//! [`crate::policy::dra::claims`]); `maxPerContainer`, the namespace's `maxPerPod`, the
//! namespaces the allowlist names.
//!
//! Denies, naming the request and the fix:
//! - a GPU request with `allocationMode: All` (every device of a node);
//! - a GPU request whose count is above `maxPerContainer`;
//! - a claim whose GPU requests together are above `maxPerPod`;
//! - `adminAccess: true` on a GPU request, outside the namespaces an
//!   allowlist entry names (monitoring lives there);
//! - a claim made for a pod whose claims together are above `maxPerPod`
//!   (`super::claim_pod_total`).
//!
//! Never denies a claim annotated
//! `resource.kubernetes.io/extended-resource-claim: "true"`: the scheduler
//! creates those for `nvidia.com/gpu` limits served by DRA, which were
//! checked on the pod.

use super::claim_pod_total;
pub use super::rule::ClaimInput;
use super::rule::{ApiServer, Coverage, Findings};
use crate::policy::dra::claims::{ClaimSummary, DraCount};
use crate::policy::message::MessageTemplate;

/// The annotation the scheduler sets on the claims it creates for extended
/// resources served by DRA.
pub const EXTENDED_RESOURCE_CLAIM: &str = "resource.kubernetes.io/extended-resource-claim";

pub const API_SERVER: ApiServer = ApiServer::Validating(Coverage {
    enforced: "`allocationMode: All`, counts above `maxPerContainer`, the claim total against \
        `maxPerPod` and the namespace annotation, `adminAccess` outside the allowlist's \
        namespaces",
    webhook_only: "DeviceClasses that hand out GPUs by selector or extended resource name (the \
        policy knows `gpuDeviceClasses` by name only; DeviceClasses are other objects); a claim \
        made for a pod counted with the pod's other claims against `maxPerPod` (the pod and \
        its claims are other objects)",
});

/// `{request}`: the request's name, quoted.
pub const ALL_DEVICES: MessageTemplate = MessageTemplate::new(
    "request {request} asks for every GPU of a node (allocationMode: All); \
     use allocationMode: ExactCount with a count",
);
pub const ABOVE_CONTAINER_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "request {request} asks for {count} GPUs, above the maximum of {maximum} per container; \
     lower its count",
);
pub const ADMIN_ACCESS: MessageTemplate = MessageTemplate::new(
    "request {request} sets adminAccess on a GPU class, allowed only in namespaces the \
     allowlist names; remove adminAccess",
);
/// After [`MAX_LISTED`] problems of single requests.
pub const MORE: MessageTemplate =
    MessageTemplate::new("and {more} more like these in the claim's other requests");
pub const ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the claim's GPU requests total {total}, above the maximum of {maximum} per pod here; \
     split the claim or lower the counts",
);

/// R2 on a claim: its requests, and their total.
pub fn check(input: &ClaimInput<'_>) -> Findings {
    if input.extended_resource {
        return Findings::default();
    }
    let monitoring = input
        .settings
        .config()
        .allowlist
        .iter()
        .any(|entry| entry.namespace == input.namespace_name);
    let mut findings = Findings {
        violations: problems(
            input.summary,
            input.settings.config().max_per_container,
            input.namespace.max_per_pod,
            monitoring,
        ),
        ..Findings::default()
    };
    claim_pod_total::check(input, &mut findings);
    findings
}

/// How many problems of single requests a denial names; the rest are
/// counted ([`MORE`]).
pub const MAX_LISTED: usize = 3;

/// The message bodies of what a claim must fix.
fn problems(
    summary: &ClaimSummary,
    max_per_container: u64,
    max_per_pod: u64,
    admin_allowed: bool,
) -> Vec<String> {
    let mut found = Vec::new();
    for request in &summary.requests {
        let name = format!("{:?}", request.name);
        match request.gpu {
            None => continue,
            Some(DraCount::All) => found.push(ALL_DEVICES.format(&[("request", &name)])),
            Some(DraCount::Exactly(count)) if count > max_per_container => {
                found.push(ABOVE_CONTAINER_MAXIMUM.format(&[
                    ("request", &name),
                    ("count", &count),
                    ("maximum", &max_per_container),
                ]));
            }
            Some(DraCount::Exactly(_)) => {}
        }
        if request.admin_access && !admin_allowed {
            found.push(ADMIN_ACCESS.format(&[("request", &name)]));
        }
    }
    if found.len() > MAX_LISTED {
        // One short line for a person, even for thousands of requests.
        let more = found.len() - MAX_LISTED;
        found.truncate(MAX_LISTED);
        found.push(MORE.format(&[("more", &more)]));
    }
    if let Some(DraCount::Exactly(total)) = summary.gpu_total()
        && total > max_per_pod
    {
        found.push(ABOVE_POD_MAXIMUM.format(&[("total", &total), ("maximum", &max_per_pod)]));
    }
    found
}

#[cfg(test)]
mod tests;
