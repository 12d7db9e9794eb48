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
mod tests {
    use crate::policy::RuleId;
    use crate::policy::testing::{evaluate_pod_in, violation_messages};
    use rstest::rstest;
    use serde_json::{Value, json};

    const ID: RuleId = RuleId::BoundedRequests;

    fn messages(pod: &Value) -> Vec<String> {
        violation_messages(pod, ID)
    }

    fn with_resources(resources: Value) -> Value {
        json!({"spec": {"containers": [{"name": "train", "resources": resources}]}})
    }

    #[rstest]
    #[case(json!({"limits": {"nvidia.com/gpu": 1}}))]
    #[case(json!({"limits": {"nvidia.com/gpu": "2"}}))]
    #[case(json!({"limits": {"nvidia.com/gpu": "2000m"}, "requests": {"nvidia.com/gpu": "2"}}))]
    #[case(json!({"limits": {"nvidia.com/gpu": "1e0"}, "requests": {"nvidia.com/gpu": 1}}))]
    #[case(json!({"limits": {"nvidia.com/gpu": "8"}}))]
    #[case(json!({"limits": {"nvidia.com/gpu": 0}}))]
    #[case(json!({"requests": {"nvidia.com/gpu": "0"}}))]
    #[case(json!({"limits": {"nvidia.com/mig-1g.5gb": "1"}, "requests": {"nvidia.com/mig-1g.5gb": "1"}}))]
    #[case(json!({"requests": {"cpu": "500m"}, "limits": {"nvidia.com/gpu": 1}}))]
    #[case(json!({}))]
    fn bounded_requests_pass(#[case] resources: Value) {
        assert_eq!(messages(&with_resources(resources)), Vec::<String>::new());
    }

    #[rstest]
    #[case(json!({"requests": {"nvidia.com/gpu": 1}}),
           "gpu-policy: container \"train\" must set limits.nvidia.com/gpu: a GPU request needs an equal limit")]
    #[case(json!({"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 2}}),
           "gpu-policy: container \"train\": requests.nvidia.com/gpu differs from limits.nvidia.com/gpu; GPUs cannot be overcommitted, set them equal")]
    #[case(json!({"limits": {"nvidia.com/gpu": "500m"}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is not a whole number; GPUs are whole devices: use an integer such as \"1\"")]
    #[case(json!({"limits": {"nvidia.com/gpu": "-1"}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is negative; GPUs are whole devices: use an integer such as \"1\"")]
    #[case(json!({"limits": {"nvidia.com/gpu": "abc"}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is not a Kubernetes quantity; GPUs are whole devices: use an integer such as \"1\"")]
    #[case(json!({"limits": {"nvidia.com/gpu": 1.5}}),
           "gpu-policy: container \"train\": limits.nvidia.com/gpu is not a whole number; GPUs are whole devices: use an integer such as \"1\"")]
    #[case(json!({"limits": {"nvidia.com/gpu": 9}}),
           "gpu-policy: container \"train\" must not ask for more than 8 nvidia.com/gpu per container; split the work or lower the limit")]
    fn unbounded_requests_are_denied(#[case] resources: Value, #[case] expected: &str) {
        let found = messages(&with_resources(resources));
        assert!(found.iter().any(|m| m == expected), "{found:#?}");
    }

    #[test]
    fn containers_are_aggregated_per_problem() {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"requests": {"nvidia.com/gpu": 1}}},
            {"name": "b", "resources": {"requests": {"nvidia.com/gpu": 1}}},
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}},
        ]}});
        let found = messages(&pod);
        assert_eq!(found.len(), 1, "{found:#?}");
        assert!(
            found[0]
                .starts_with("gpu-policy: containers \"a\", \"b\" must set limits.nvidia.com/gpu")
        );
    }

    #[test]
    fn pod_total_counts_sidecars() {
        let pod = json!({"spec": {
            "initContainers": [{"name": "s", "restartPolicy": "Always", "resources": {"limits": {"nvidia.com/gpu": 4}}}],
            "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 5}}}],
        }});
        assert_eq!(
            messages(&pod),
            vec![
                "gpu-policy: the pod needs 9 nvidia.com/gpu (init and sidecar containers included), above the maximum of 8 per pod here"
            ]
        );
    }

    #[test]
    fn plain_init_containers_do_not_add_up() {
        let pod = json!({"spec": {
            "initContainers": [{"name": "i", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
            "containers": [{"name": "a", "resources": {"limits": {"nvidia.com/gpu": 8}}}],
        }});
        assert!(messages(&pod).is_empty());
    }

    #[rstest]
    #[case("2", 3, 1)]
    #[case("4", 3, 0)]
    #[case("16", 9, 1)]
    #[case("lots", 9, 1)]
    fn namespace_annotation_lowers_the_pod_maximum(
        #[case] annotation: &str,
        #[case] gpus: u64,
        #[case] expected: usize,
    ) {
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": gpus.min(8)}}},
            {"name": "b", "resources": {"limits": {"nvidia.com/gpu": gpus.saturating_sub(8)}}},
        ]}});
        let evaluation = evaluate_pod_in(&pod, &[("gpu-policy.io/max-gpus-per-pod", annotation)]);
        let found = evaluation
            .violations
            .iter()
            .filter(|v| v.rule == ID)
            .count();
        assert_eq!(found, expected, "{:?}", evaluation.violations);
    }

    #[test]
    fn allowlisted_pods_are_still_bounded() {
        let pod = json!({"metadata": {"namespace": "kube-system", "ownerReferences": [
            {"kind": "DaemonSet", "name": "nvidia-gpu-exporter", "controller": true}]},
            "spec": {"containers": [{"name": "e", "resources": {"requests": {"nvidia.com/gpu": 1}}}]}});
        assert_eq!(messages(&pod).len(), 1);
    }

    #[rstest]
    #[case(&[4, 8], 8, 0)]
    #[case(&[4, 8], 9, 1)]
    #[case(&[0], 1, 1)]
    #[case(&[], 9, 1)]
    fn pods_bigger_than_any_node_can_never_schedule(
        #[case] nodes: &[u64],
        #[case] gpus: u64,
        #[case] expected: usize,
    ) {
        use crate::policy::cluster::{ClusterSnapshot, NodeGpus};
        let cluster = ClusterSnapshot {
            nodes: nodes
                .iter()
                .enumerate()
                .map(|(i, n)| {
                    (
                        format!("node-{i}"),
                        NodeGpus {
                            allocatable: [("nvidia.com/gpu".to_owned(), *n)].into_iter().collect(),
                            compute_capability: None,
                            driver_labels: false,
                        },
                    )
                })
                .collect(),
            ..ClusterSnapshot::default()
        };
        let pod = json!({"spec": {"containers": [
            {"name": "a", "resources": {"limits": {"nvidia.com/gpu": gpus.min(8)}}},
            {"name": "b", "resources": {"limits": {"nvidia.com/gpu": gpus.saturating_sub(8)}}},
        ]}});
        let evaluation = crate::policy::testing::evaluate_in_cluster(&pod, &cluster);
        let found: Vec<&str> = evaluation
            .violations
            .iter()
            .filter(|v| v.message.contains("can never be scheduled"))
            .map(|v| v.message.as_str())
            .collect();
        // No node known at all: nothing can be concluded.
        let expected = if nodes.is_empty() { 0 } else { expected };
        assert_eq!(found.len(), expected, "{found:?}");
    }
}
