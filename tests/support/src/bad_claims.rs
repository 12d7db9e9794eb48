//! The bad-input catalog of Dynamic Resource Allocation objects: malformed
//! ResourceClaims and ResourceClaimTemplates, and pods whose claims are
//! malformed, each with the words its one-line denial must contain.
//!
//! The router's unit tests and the end-to-end test over TLS send the same
//! bodies.

use serde_json::{Value, json};

/// What becomes of a bad object on the validating webhooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    /// Denied in every mode, the message containing this: the object
    /// cannot be read.
    Unreadable(&'static str),
    /// Readable, and violates a rule: denied in enforce mode with this
    /// message, warned in warn mode, annotated in audit mode.
    Violates(&'static str),
    /// Allowed.
    Allowed,
}

/// One bad object: a name for failure messages, the object, and what
/// becomes of it.
pub type BadObject = (&'static str, Value, Expect);

/// A ResourceClaim in `ml` whose `spec.devices.requests` is `requests`.
pub fn claim(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": "bad", "namespace": "ml"},
           "spec": {"devices": {"requests": requests}}})
}

/// A ResourceClaimTemplate in `ml` whose `spec.spec.devices.requests` is
/// `requests`.
pub fn template(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "bad", "namespace": "ml"},
           "spec": {"spec": {"devices": {"requests": requests}}}})
}

/// One GPU request whose `exactly` is `exactly` on top of the GPU class.
fn gpu(exactly: Value) -> Value {
    let mut fields = json!({"deviceClassName": "gpu.nvidia.com"});
    if let (Some(into), Some(from)) = (fields.as_object_mut(), exactly.as_object()) {
        into.extend(from.clone());
    }
    json!([{"name": "gpu", "exactly": fields}])
}

/// `n` GPU requests of `exactly` each.
fn many(n: usize, exactly: Value) -> Value {
    let requests: Vec<Value> = (0..n)
        .map(|i| {
            let mut request = gpu(exactly.clone())[0].clone();
            request["name"] = json!(format!("r{i}"));
            request
        })
        .collect();
    Value::Array(requests)
}

/// Malformed claims and claim templates.
pub fn claims() -> Vec<BadObject> {
    vec![
        ("requests an object", claim(json!({"gpu": {}})),
            Expect::Unreadable("cannot read this ResourceClaim: spec.devices.requests: must be a list, not an object")),
        ("requests a string", template(json!("gpu")),
            Expect::Unreadable("cannot read this ResourceClaimTemplate: spec.spec.devices.requests: must be a list, not a string")),
        ("request a number", claim(json!([7])),
            Expect::Unreadable("spec.devices.requests[0]: must be an object, not a number")),
        ("exactly a string", claim(json!([{"name": "gpu", "exactly": "gpu.nvidia.com"}])),
            Expect::Unreadable("spec.devices.requests[0].exactly: must be an object, not a string")),
        ("count a string", claim(gpu(json!({"count": "2"}))),
            Expect::Unreadable("spec.devices.requests[0].exactly.count: must be a whole number above 0, not a string")),
        ("count negative", claim(gpu(json!({"count": -3}))),
            Expect::Unreadable("spec.devices.requests[0].exactly.count: must be a whole number above 0, not -3")),
        ("count a float", template(gpu(json!({"count": 1.5}))),
            Expect::Unreadable("spec.spec.devices.requests[0].exactly.count: must be a whole number above 0, not 1.5")),
        ("count zero", claim(gpu(json!({"count": 0}))),
            Expect::Unreadable("exactly.count: must be a whole number above 0, not 0")),
        ("count above u64", claim(gpu(json!({"count": 18_446_744_073_709_551_616.0_f64}))),
            Expect::Unreadable("exactly.count: must be a whole number above 0, not 1.8446744073709552e+19")),
        ("count 1e30", claim(gpu(json!({"count": 1e30}))),
            Expect::Unreadable("exactly.count: must be a whole number above 0, not 1e+30")),
        ("count u64::MAX", claim(gpu(json!({"count": u64::MAX}))),
            Expect::Violates("asks for 18446744073709551615 GPUs, above the maximum of 8 per container")),
        ("allocationMode unknown", claim(gpu(json!({"allocationMode": "Most"}))),
            Expect::Unreadable("exactly.allocationMode: must be ExactCount or All, not \"Most\"")),
        ("adminAccess a string", claim(gpu(json!({"adminAccess": "yes"}))),
            Expect::Unreadable("exactly.adminAccess: must be a boolean, not a string")),
        ("firstAvailable an object", claim(json!([{"name": "gpu", "firstAvailable": {"a": {}}}])),
            Expect::Unreadable("spec.devices.requests[0].firstAvailable: must be a list, not an object")),
        ("firstAvailable entry a string", claim(json!([{"name": "gpu", "firstAvailable": ["gpu.nvidia.com"]}])),
            Expect::Unreadable("spec.devices.requests[0].firstAvailable[0]: must be an object, not a string")),
        ("spec missing", json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim", "metadata": {"name": "bad"}}),
            Expect::Unreadable("cannot read this ResourceClaim: spec: is missing")),
        ("template spec a list", json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate", "metadata": {"name": "bad"}, "spec": {"spec": []}}),
            Expect::Unreadable("spec.spec: must be an object, not a list")),
        // Well-formed but huge: one denial line, not one per request.
        ("10,000 requests of one GPU", claim(many(10_000, json!({}))),
            Expect::Violates("the claim's GPU requests total 10000, above the maximum of 8 per pod here")),
        ("10,000 requests of every GPU", template(many(10_000, json!({"allocationMode": "All"}))),
            Expect::Violates("and 9997 more like these in the claim's other requests")),
        ("10,000 requests of another class", claim(json!((0..10_000).map(|i| json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "nic.example.com", "count": 4}})).collect::<Vec<_>>())),
            Expect::Allowed),
    ]
}

/// A pod in `ml` with `spec` fields on top of one plain container.
fn pod(spec: Value) -> Value {
    let mut object = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "bad", "namespace": "ml"},
                            "spec": {"containers": [{"name": "ctr", "image": "ubuntu:22.04"}]}});
    if let (Some(into), Some(from)) = (object["spec"].as_object_mut(), spec.as_object()) {
        into.extend(from.clone());
    }
    object
}

/// A pod whose only container uses the claims `uses`.
fn pod_using(uses: Value, claims: Value) -> Value {
    pod(
        json!({"containers": [{"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": uses}}],
               "resourceClaims": claims}),
    )
}

/// Pods with malformed DRA fields; an unresolvable claim is never a denial.
pub fn pods() -> Vec<BadObject> {
    let template_claim = json!([{"name": "gpu", "resourceClaimTemplateName": "single-gpu"}]);
    let thousands: Vec<Value> = (0..10_000)
        .map(|i| json!({"name": format!("c{i}"), "resourceClaimTemplateName": format!("t{i}")}))
        .collect();
    vec![
        (
            "resourceClaims an object",
            pod(json!({"resourceClaims": {"gpu": "single-gpu"}})),
            Expect::Unreadable(
                "cannot read this Pod: spec.resourceClaims: must be a list, not an object",
            ),
        ),
        (
            "resourceClaims entry a string",
            pod(json!({"resourceClaims": ["gpu"]})),
            Expect::Unreadable("spec.resourceClaims[0]: must be an object, not a string"),
        ),
        (
            "resourceClaimTemplateName a number",
            pod(json!({"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": 1}]})),
            Expect::Unreadable(
                "spec.resourceClaims[0].resourceClaimTemplateName: must be a string, not a number",
            ),
        ),
        (
            "resources.claims an object",
            pod_using(json!({"name": "gpu"}), template_claim.clone()),
            Expect::Unreadable(
                "spec.containers[0].resources.claims: must be a list, not an object",
            ),
        ),
        (
            "resources.claims entry a string",
            pod_using(json!(["gpu"]), template_claim.clone()),
            Expect::Unreadable(
                "spec.containers[0].resources.claims[0]: must be an object, not a string",
            ),
        ),
        (
            "claim name a list",
            pod_using(json!([{"name": ["gpu"]}]), template_claim.clone()),
            Expect::Unreadable(
                "spec.containers[0].resources.claims[0].name: must be a string, not a list",
            ),
        ),
        // Unresolvable, never denied: the pod is warned and pinned.
        (
            "claim naming no pod claim",
            pod_using(json!([{"name": "other"}]), template_claim.clone()),
            Expect::Allowed,
        ),
        (
            "pod claim naming nothing",
            pod_using(json!([{"name": "gpu"}]), json!([{"name": "gpu"}])),
            Expect::Allowed,
        ),
        (
            "10,000 unresolved pod claims",
            pod_using(
                json!((0..10_000).map(|i| json!({"name": format!("c{i}")})).collect::<Vec<_>>()),
                Value::Array(thousands),
            ),
            Expect::Allowed,
        ),
    ]
}
