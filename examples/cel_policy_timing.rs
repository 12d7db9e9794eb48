//! Microseconds per evaluation of a ValidatingAdmissionPolicy with three
//! variables and three validations on a five-container pod, by the embedded
//! CEL engine (`kubernetes_cel`).
//!
//! ```sh
//! cargo run --release --example cel_policy_timing [-- ITERATIONS]
//! ```

use kubernetes_cel::{Attributes, GroupVersionKind, GroupVersionResource, ValidatingPolicy};
use serde_json::json;
use std::time::Instant;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let iterations: u32 = std::env::args().nth(1).map_or(Ok(20_000), |a| a.parse())?;
    let policy = ValidatingPolicy::from_object(&json!({
        "metadata": {"name": "gpu-policy-bounded-requests"},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]
            }]},
            "variables": [
                {"name": "containers", "expression": "object.spec.containers + (has(object.spec.initContainers) ? object.spec.initContainers : [])"},
                {"name": "gpu", "expression": "variables.containers.filter(c, has(c.resources) && has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits)"},
                {"name": "tooMany", "expression": "variables.gpu.filter(c, quantity(c.resources.limits['nvidia.com/gpu']).isGreaterThan(quantity('4'))).map(c, c.name)"}
            ],
            "validations": [
                {"expression": "size(variables.tooMany) == 0", "messageExpression": "'containers ' + variables.tooMany.join(', ') + ' request too many GPUs'"},
                {"expression": "variables.gpu.all(c, isQuantity(c.resources.limits['nvidia.com/gpu']) && quantity(c.resources.limits['nvidia.com/gpu']).isInteger())"},
                {"expression": "!has(object.spec.runtimeClassName) || object.spec.runtimeClassName.startsWith('nvidia')"}
            ]
        }
    }))?;
    let containers: Vec<_> = (0..5)
        .map(|i| {
            json!({
                "name": format!("c{i}"), "image": "nvcr.io/nvidia/cuda:12.4.0-base",
                "env": [{"name": "A", "value": "1"}],
                "resources": {"limits": {"nvidia.com/gpu": "1", "memory": "1Gi"}}
            })
        })
        .collect();
    let pod = json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "labels": {"app": "x"}},
        "spec": {"containers": containers, "runtimeClassName": "nvidia"}});
    let attributes = Attributes::create(
        pod,
        GroupVersionKind { group: String::new(), version: "v1".into(), kind: "Pod".into() },
        GroupVersionResource {
            group: String::new(),
            version: "v1".into(),
            resource: "pods".into(),
        },
    );
    // The fixed cost: binding the request, with one constant validation.
    let baseline = ValidatingPolicy::from_object(&json!({
        "metadata": {"name": "baseline"},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]
            }]},
            "validations": [{"expression": "true"}]
        }
    }))?;
    for (name, policy) in [("3 variables, 3 validations", &policy), ("binding only", &baseline)] {
        let warmup = policy.evaluate(&attributes);
        if !warmup.violations().is_empty() {
            return Err(format!("unexpected violations: {warmup:?}").into());
        }
        let start = Instant::now();
        for _ in 0..iterations {
            std::hint::black_box(policy.evaluate(std::hint::black_box(&attributes)));
        }
        let per = start.elapsed().as_secs_f64() * 1e6 / f64::from(iterations);
        println!("{name}: {per:.1} µs per evaluation ({iterations} evaluations)");
    }
    Ok(())
}
