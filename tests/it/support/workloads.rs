//! Pods as the controllers of the fixtures' workloads would create them.

use serde_json::{Value, json};

/// The pod a controller of `workload` creates from its template
/// (`spec.template`, or `spec.jobTemplate.spec.template` of a CronJob):
/// the template's metadata and spec, named `<workload>-<suffix>`, in the
/// workload's namespace when it has one, with a controller owner reference
/// to the workload carrying `owner_uid`. `None` for objects without a
/// template.
pub fn pod_of_workload(workload: &Value, suffix: &str, owner_uid: &str) -> Option<Value> {
    let template = workload
        .pointer("/spec/template")
        .or_else(|| workload.pointer("/spec/jobTemplate/spec/template"))?;
    let owner = workload.pointer("/metadata/name")?.as_str()?;
    let mut metadata = template.get("metadata").cloned().unwrap_or_else(|| json!({}));
    metadata["name"] = json!(format!("{owner}-{suffix}"));
    if let Some(namespace) = workload.pointer("/metadata/namespace") {
        metadata["namespace"] = namespace.clone();
    }
    metadata["ownerReferences"] = json!([{
        "apiVersion": workload["apiVersion"],
        "kind": workload["kind"],
        "name": owner,
        "uid": owner_uid,
        "controller": true,
        "blockOwnerDeletion": true,
    }]);
    Some(json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": template["spec"],
    }))
}
