//! Generated pods that hold GPUs through DRA resource claims, with the
//! ResourceClaimTemplates and ResourceClaims they name, for the property
//! tests (`tests/it/properties/claims.rs`) and the independent patch check.
//!
//! [`claimed_case`] takes an adversarial pod of [`super::pods`], removes its
//! device-plugin GPU resources (so that every GPU comes through a claim),
//! and gives it `spec.resourceClaims` and `resources.claims` on its
//! containers (ephemeral ones included), some resolvable from the generated
//! objects and some not: a missing template or claim, a pod claim naming
//! neither, a container naming a claim the pod does not have, a `request`
//! the claim does not have. The oracles below resolve them from the
//! definitions of docs/policy.md, not from the implementation.

use std::collections::BTreeSet;

use proptest::prelude::*;
use serde_json::{Value, json};

use super::oracles::{Kind, containers};
use super::pods::{Case, Pods, case_of, pick, strip_gpu_resources};

/// The GPU device classes of the default configuration.
pub const GPU_CLASSES: [&str; 3] = ["gpu.nvidia.com", "mig.nvidia.com", "vfio.gpu.nvidia.com"];

/// A pod, its namespace, and the claim objects of the same input.
#[derive(Debug, Clone)]
pub struct ClaimedCase {
    pub case: Case,
    /// ResourceClaimTemplates and ResourceClaims, in the case's namespace.
    pub objects: Vec<Value>,
}

/// The device requests of template or claim number `shape`: GPU and not,
/// in the v1 and the flat v1beta1 shapes, one or two requests.
fn requests(shape: u8) -> Value {
    match shape {
        0 => json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]),
        1 => json!([{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com", "count": 2}}]),
        2 => json!([{"name": "gpu", "firstAvailable": [
            {"name": "mig", "deviceClassName": "mig.nvidia.com"},
            {"name": "full", "deviceClassName": "gpu.nvidia.com", "count": 2}]}]),
        3 => {
            json!([{"name": "nic", "exactly": {"deviceClassName": "rdma.example.com", "count": 4}}])
        }
        4 => json!([{"name": "gpu", "deviceClassName": "vfio.gpu.nvidia.com"}]),
        _ => json!([
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
            {"name": "nic", "exactly": {"deviceClassName": "rdma.example.com"}}]),
    }
}

/// Templates `tmpl-0`.. and claims `rc-0`.. of the given shapes.
fn objects(namespace: &str, templates: &[u8], claims: &[u8]) -> Vec<Value> {
    let mut objects = Vec::new();
    for (i, shape) in templates.iter().enumerate() {
        objects.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": format!("tmpl-{i}"), "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": requests(*shape)}}}}));
    }
    for (i, shape) in claims.iter().enumerate() {
        objects.push(json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
            "metadata": {"name": format!("rc-{i}"), "namespace": namespace},
            "spec": {"devices": {"requests": requests(*shape)}}}));
    }
    objects
}

/// One entry of `spec.resourceClaims`: `claim-N`, from template `k` or
/// claim `k` (which may not exist), or naming neither.
fn pod_claim(index: usize, source: u8, target: usize) -> Value {
    let name = format!("claim-{index}");
    match source {
        0..=3 => json!({"name": name, "resourceClaimTemplateName": format!("tmpl-{target}")}),
        4 | 5 => json!({"name": name, "resourceClaimName": format!("rc-{target}")}),
        _ => json!({"name": name}),
    }
}

/// One entry of a container's `resources.claims`.
fn claim_use(claim: usize, request: u8) -> Value {
    let name = if claim == 9 { "ghost".to_owned() } else { format!("claim-{claim}") };
    match request {
        0..=5 => json!({"name": name}),
        6 => json!({"name": name, "request": "gpu"}),
        7 => json!({"name": name, "request": "nic"}),
        8 => json!({"name": name, "request": "gpu/full"}),
        _ => json!({"name": name, "request": "missing"}),
    }
}

pub fn claimed_case() -> impl Strategy<Value = ClaimedCase> {
    let uses = prop::collection::vec(
        prop::collection::vec((prop_oneof![9 => 0..4usize, 1 => Just(9usize)], 0..10u8), 0..=2),
        12,
    );
    (
        case_of(Pods::Adversarial),
        prop::collection::vec(0..6u8, 0..=4),
        prop::collection::vec(0..6u8, 0..=2),
        prop::collection::vec((0..7u8, 0..5usize), 1..=4),
        uses,
        pick(&[false, false, true]),
    )
        .prop_map(|(mut case, templates, claims, pod_claims, uses, keep_class)| {
            let spec = &mut case.pod["spec"];
            strip_gpu_resources(spec);
            if !keep_class && let Some(spec) = spec.as_object_mut() {
                spec.remove("runtimeClassName");
            }
            spec["resourceClaims"] = Value::Array(
                pod_claims
                    .iter()
                    .enumerate()
                    .map(|(i, (source, target))| pod_claim(i, *source, *target))
                    .collect(),
            );
            let mut uses = uses.into_iter();
            for field in ["initContainers", "containers", "ephemeralContainers"] {
                for c in spec[field].as_array_mut().into_iter().flatten() {
                    let Some(mine) = uses.next().filter(|u| !u.is_empty()) else {
                        continue;
                    };
                    if !c["resources"].is_object() {
                        c["resources"] = json!({});
                    }
                    c["resources"]["claims"] = mine
                        .into_iter()
                        .map(|(claim, request)| claim_use(claim, request))
                        .collect();
                }
            }
            let objects = objects(&case.namespace, &templates, &claims);
            ClaimedCase { case, objects }
        })
}

/// What a use of a claim gives a container.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    Gpu,
    NoGpu,
    Unresolved,
}

fn is_gpu_request(request: &Value) -> bool {
    let gpu_class = |fields: &Value| {
        fields["deviceClassName"].as_str().is_some_and(|c| GPU_CLASSES.contains(&c))
    };
    gpu_class(&request["exactly"])
        || gpu_class(request)
        || request["firstAvailable"]
            .as_array()
            .is_some_and(|alternatives| alternatives.iter().any(gpu_class))
}

/// Resolves one entry of a container's `resources.claims` as the policy
/// reference says: the pod claim of that name, its template or claim among
/// the objects, and the request named (its part before `/`), if any.
pub fn resolve(pod: &Value, objects: &[Value], claim_use: &Value) -> Resolution {
    let name = claim_use["name"].as_str().unwrap_or_default();
    let Some(pod_claim) =
        pod["spec"]["resourceClaims"].as_array().into_iter().flatten().find(|c| c["name"] == name)
    else {
        return Resolution::Unresolved;
    };
    let (kind, target) = match (
        pod_claim["resourceClaimTemplateName"].as_str(),
        pod_claim["resourceClaimName"].as_str(),
    ) {
        (Some(template), _) => ("ResourceClaimTemplate", template),
        (None, Some(claim)) => ("ResourceClaim", claim),
        (None, None) => return Resolution::Unresolved,
    };
    let Some(object) =
        objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == target)
    else {
        return Resolution::Unresolved;
    };
    let spec =
        if kind == "ResourceClaimTemplate" { &object["spec"]["spec"] } else { &object["spec"] };
    let requests: Vec<&Value> =
        spec["devices"]["requests"].as_array().into_iter().flatten().collect();
    let used: Vec<&Value> = match claim_use["request"].as_str() {
        None => requests,
        Some(request) => {
            let base = request.split('/').next().unwrap_or(request);
            match requests.into_iter().find(|r| r["name"] == base) {
                Some(found) => vec![found],
                None => return Resolution::Unresolved,
            }
        }
    };
    if used.into_iter().any(is_gpu_request) { Resolution::Gpu } else { Resolution::NoGpu }
}

fn uses(c: &Value) -> impl Iterator<Item = &Value> {
    c["resources"]["claims"].as_array().into_iter().flatten()
}

/// Whether a container holds a GPU through a resolved claim (ephemeral
/// containers never do).
pub fn claimed_gpu(pod: &Value, objects: &[Value], kind: Kind, c: &Value) -> bool {
    kind != Kind::Ephemeral && uses(c).any(|u| resolve(pod, objects, u) == Resolution::Gpu)
}

/// The claims some (not ephemeral) container uses that do not resolve.
pub fn unresolved_claims(pod: &Value, objects: &[Value]) -> BTreeSet<String> {
    containers(pod)
        .into_iter()
        .filter(|(kind, _)| *kind != Kind::Ephemeral)
        .flat_map(|(_, c)| uses(c))
        .filter(|u| resolve(pod, objects, u) == Resolution::Unresolved)
        .filter_map(|u| u["name"].as_str().map(str::to_owned))
        .collect()
}

/// The pod without the uses of claims that do not resolve: what the policy
/// must treat it as, apart from the warnings.
pub fn without_unresolved(pod: &Value, objects: &[Value]) -> Value {
    let mut stripped = pod.clone();
    for field in ["initContainers", "containers"] {
        let count = pod["spec"][field].as_array().map_or(0, Vec::len);
        for index in 0..count {
            let keep: Vec<Value> = uses(&pod["spec"][field][index])
                .filter(|u| resolve(pod, objects, u) != Resolution::Unresolved)
                .cloned()
                .collect();
            if let Some(claims) = stripped["spec"][field][index]["resources"].get_mut("claims") {
                *claims = Value::Array(keep);
            }
        }
    }
    stripped
}
