//! R2 `bounded-requests` (validating): every GPU request is a whole number
//! of devices that some node can actually give.
//!
//! Reads: `resources.requests` and `resources.limits` of init, sidecar and
//! regular containers, for the configured GPU resource names; the GPU count
//! of the pod's resolved DRA claims; the namespace's
//! `maxPerPod` (cluster config, lowered by the namespace annotation).
//!
//! Denies, naming container and resource:
//! - a GPU resource in `requests` without the same resource in `limits`;
//! - a request different from the limit;
//! - a value that is not a whole, non-negative Kubernetes quantity;
//! - a container above `maxPerContainer`;
//! - an effective pod count (Kubernetes' formula, sidecars included) above
//!   `maxPerPod`. The GPUs of the resolved DRA claims the containers use are
//!   added, each claim once: a claim is allocated for the pod's whole life,
//!   whichever container (init, sidecar or regular) uses it;
//! - with a cluster to read: an effective count above what the biggest node
//!   can allocate (`status.allocatable`): such a pod can never be scheduled.
//!
//! Sharing schemes (`sharing.rs`): a KAI fraction counts as the cards it
//! shares (`gpu-fraction-num-devices`, default 1) and its annotations are
//! checked as KAI reads them; a HAMi share without `nvidia.com/gpu` counts
//! as 1 card, and its values are checked as shares, never as cards.
//!
//! Allows: limits only (Kubernetes sets the request to the limit for
//! extended resources), request == limit, and a zero limit (not a request).
//! Applies to allowlisted pods too.

use std::collections::BTreeMap;

use super::rule::{ApiServer, Coverage, Findings, RuleInput};
use crate::policy::container::GpuResource;
use crate::policy::dra::claims::DraCount;
use crate::policy::message::{CONTAINER, MessageTemplate};
use crate::policy::quantity::GpuCount;

/// The pod half; the claims' is [`super::claim_requests::API_SERVER`].
pub const API_SERVER: ApiServer = ApiServer::Validating(Coverage {
    enforced: "request without limit, request ≠ limit, values that are not whole non-negative \
        quantities, `maxPerContainer`, the effective pod count against `maxPerPod` (Kubernetes' \
        formula with sidecars), the namespace annotation; KAI fraction annotations and HAMi \
        share values, and the cards they imply",
    webhook_only: "the GPUs of a pod's DRA claims added to its count (claims are other \
        objects); the largest node's allocatable GPUs (nodes are other objects)",
});

/// A value that is no GPU count: `{field}` is `limits` or `requests`,
/// `{reason}` a [`crate::policy::quantity::QuantityError`].
pub const INVALID_VALUE: MessageTemplate = MessageTemplate::new(
    "{containers}: {field}.{resource} {reason}; \
     GPUs are whole devices: use an integer such as \"1\"",
);
pub const REQUEST_WITHOUT_LIMIT: MessageTemplate = MessageTemplate::new(
    "{containers} must set limits.{resource}: a GPU request needs an equal limit",
);
pub const REQUEST_NOT_LIMIT: MessageTemplate = MessageTemplate::new(
    "{containers}: requests.{resource} differs from limits.{resource}; \
     GPUs cannot be overcommitted, set them equal",
);
pub const ABOVE_CONTAINER_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "{containers} must not ask for more than {maximum} {resource} \
     per container; split the work or lower the limit",
);
/// The effective pod count of one resource above `maxPerPod`.
pub const ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the pod needs {count} {resource} (init and sidecar containers included), \
     above the maximum of {maximum} per pod here",
);
/// Webhook only: the policies cannot resolve a claim.
pub const CLAIMS_ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the pod's resource claims hold {count} GPUs, above the maximum of \
     {maximum} per pod here; claim fewer devices",
);
/// Webhook only, as [`CLAIMS_ABOVE_POD_MAXIMUM`].
pub const WITH_CLAIMS_ABOVE_POD_MAXIMUM: MessageTemplate = MessageTemplate::new(
    "the pod needs {count} {resource} (init and sidecar containers included) \
     and {claimed} GPUs through resource claims, above the maximum of \
     {maximum} per pod here",
);
/// Webhook only: the policies cannot list nodes.
pub const ABOVE_LARGEST_NODE: MessageTemplate = MessageTemplate::new(
    "the pod needs {count} {resource} but the biggest node offers \
     {largest}: it can never be scheduled",
);

/// One kind of problem with one resource; containers sharing it are named
/// in one message.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    InvalidValue { field: &'static str, reason: String },
    RequestWithoutLimit,
    RequestNotLimit,
    AboveContainerMaximum { maximum: u64 },
}

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    if !input.scope.is_whole() {
        return findings;
    }
    let view = input.view;
    let max_per_container = input.settings.config().max_per_container;
    // (resource, problem) -> container names, in a stable order.
    let mut problems: BTreeMap<(&str, Problem), Vec<&str>> = BTreeMap::new();
    for container in &view.containers {
        for resource in &container.gpu_resources {
            for problem in problems_of(resource, max_per_container) {
                problems
                    .entry((resource.name, problem))
                    .or_default()
                    .push(container.name);
            }
        }
    }
    for ((resource, problem), names) in problems {
        let containers = CONTAINER.list(names);
        let message = match problem {
            Problem::InvalidValue { field, reason } => INVALID_VALUE.format(&[
                ("containers", &containers),
                ("field", &field),
                ("resource", &resource),
                ("reason", &reason),
            ]),
            Problem::RequestWithoutLimit => REQUEST_WITHOUT_LIMIT
                .format(&[("containers", &containers), ("resource", &resource)]),
            Problem::RequestNotLimit => {
                REQUEST_NOT_LIMIT.format(&[("containers", &containers), ("resource", &resource)])
            }
            Problem::AboveContainerMaximum { maximum } => ABOVE_CONTAINER_MAXIMUM.format(&[
                ("containers", &containers),
                ("maximum", &maximum),
                ("resource", &resource),
            ]),
        };
        findings.violations.push(message);
    }
    findings
        .violations
        .extend(crate::policy::rules::sharing::problems(
            view,
            input.settings,
        ));
    let max_per_pod = input.namespace.max_per_pod;
    let dra = view.dra_gpus;
    let counts = view.effective_counts();
    if let Some(dra) = dra
        && counts.is_empty()
        && dra > DraCount::Exactly(max_per_pod)
    {
        findings
            .violations
            .push(CLAIMS_ABOVE_POD_MAXIMUM.format(&[("count", &dra), ("maximum", &max_per_pod)]));
    }
    for (resource, count) in counts {
        let largest = input.cluster.and_then(|c| c.largest_allocatable(resource));
        if let Some(largest) = largest
            && count > largest
        {
            findings.violations.push(ABOVE_LARGEST_NODE.format(&[
                ("count", &count),
                ("resource", &resource),
                ("largest", &largest),
            ]));
        }
        match dra {
            None if count > max_per_pod => findings.violations.push(ABOVE_POD_MAXIMUM.format(&[
                ("count", &count),
                ("resource", &resource),
                ("maximum", &max_per_pod),
            ])),
            Some(dra) if DraCount::Exactly(count).plus(dra) > DraCount::Exactly(max_per_pod) => {
                findings
                    .violations
                    .push(WITH_CLAIMS_ABOVE_POD_MAXIMUM.format(&[
                        ("count", &count),
                        ("resource", &resource),
                        ("claimed", &dra),
                        ("maximum", &max_per_pod),
                    ]));
            }
            _ => {}
        }
    }
    findings
}

fn problems_of(resource: &GpuResource<'_>, max_per_container: u64) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut whole = |field: &'static str, count: Option<GpuCount>| match count {
        Some(GpuCount::Invalid(reason)) => {
            problems.push(Problem::InvalidValue {
                field,
                reason: reason.to_string(),
            });
            None
        }
        Some(GpuCount::Whole(n)) => Some(n),
        None => None,
    };
    let request = whole("requests", resource.request);
    let limit = whole("limits", resource.limit);
    match (resource.request, resource.limit) {
        (Some(request), None) if !request.is_zero() => problems.push(Problem::RequestWithoutLimit),
        _ => {}
    }
    if let (Some(request), Some(limit)) = (request, limit)
        && request != limit
    {
        problems.push(Problem::RequestNotLimit);
    }
    if limit.or(request).is_some_and(|n| n > max_per_container) {
        problems.push(Problem::AboveContainerMaximum {
            maximum: max_per_container,
        });
    }
    problems
}

#[cfg(test)]
mod tests;
