//! ResourceClaims and ResourceClaimTemplates on the validating endpoints,
//! as the API server sends them (v1; older versions arrive converted).

use serde_json::{Value, json};

use crate::support::server::{
    AUDIT, ENFORCE, MUTATE, Options, Server, WARN, body_of, next_uid, patch_of, review,
};

/// The quickstart's template, asking for every GPU of a node.
fn all_gpus_template() -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": "all-gpus", "namespace": "ml"},
           "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
               "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}}]}}}})
}

const ALL_DENIAL: &str = "request \"gpu\" asks for every GPU of a node (allocationMode: All); \
                          use allocationMode: ExactCount with a count";

#[tokio::test(flavor = "multi_thread")]
async fn a_template_of_every_gpu_is_decided_per_mode() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let template = all_gpus_template();

    let denied = connection.admit(ENFORCE, &template).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    assert_eq!(
        denied["status"]["message"],
        format!("gpu-policy: [bounded-requests] {ALL_DENIAL}"),
        "{denied}"
    );

    let warned = connection.admit(WARN, &template).await;
    assert_eq!(warned["allowed"], true, "{warned}");
    let warnings = warned["warnings"].as_array().expect("warnings");
    assert_eq!(warnings.len(), 1, "{warned}");
    let warning = warnings[0].as_str().unwrap_or_default();
    assert!(
        warning.starts_with(
            "gpu-policy: [bounded-requests] would deny: request \"gpu\" asks for every GPU"
        ),
        "{warning}"
    );

    let audited = connection.admit(AUDIT, &template).await;
    assert_eq!(audited["allowed"], true, "{audited}");
    assert!(audited.get("warnings").is_none_or(Value::is_null), "{audited}");
    assert_eq!(
        audited["auditAnnotations"]["violations"],
        format!("[bounded-requests] {ALL_DENIAL}"),
        "{audited}"
    );

    // Never mutated, even if a configuration sent it to /mutate.
    let mutated = connection.admit(MUTATE, &template).await;
    assert_eq!(mutated["allowed"], true, "{mutated}");
    assert!(patch_of(&mutated).is_none(), "{mutated}");

    // The claim the scheduler makes for an nvidia.com/gpu limit served by
    // DRA is never denied, whatever it asks for.
    let mut generated = template.clone();
    generated["kind"] = json!("ResourceClaim");
    generated["spec"] = template["spec"]["spec"].clone();
    generated["metadata"]["annotations"] =
        json!({"resource.kubernetes.io/extended-resource-claim": "true"});
    for path in [ENFORCE, WARN, AUDIT] {
        let response = connection.admit(path, &generated).await;
        assert_eq!(response["allowed"], true, "{path}: {response}");
        assert!(response.get("warnings").is_none_or(Value::is_null));
    }

    // A bounded template is allowed quietly.
    let mut bounded = template.clone();
    bounded["spec"]["spec"]["devices"]["requests"][0]["exactly"] =
        json!({"deviceClassName": "gpu.nvidia.com", "count": 2});
    let allowed = connection.admit(ENFORCE, &bounded).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert!(allowed.get("warnings").is_none_or(Value::is_null), "{allowed}");

    // The metrics count claims and templates by their kind.
    let metrics = server.metrics().await;
    for (endpoint, kind, decision, count) in [
        ("/validate/enforce", "ResourceClaimTemplate", "denied", 1),
        ("/validate/enforce", "ResourceClaimTemplate", "allowed", 1),
        ("/validate/warn", "ResourceClaimTemplate", "warned", 1),
        ("/validate/audit", "ResourceClaimTemplate", "allowed", 1),
        ("/mutate", "ResourceClaimTemplate", "ignored", 1),
        ("/validate/enforce", "ResourceClaim", "allowed", 1),
        ("/validate/warn", "ResourceClaim", "allowed", 1),
    ] {
        let line = format!(
            "gpu_policy_admission_requests_total{{endpoint=\"{endpoint}\",kind=\"{kind}\",\
             operation=\"CREATE\",decision=\"{decision}\"}} {count}"
        );
        assert!(metrics.lines().any(|l| l == line), "{line} missing:\n{metrics}");
    }
    let violations =
        "gpu_policy_rule_findings_total{rule=\"bounded-requests\",finding=\"violation\"} 3";
    assert!(metrics.lines().any(|l| l == violations), "{violations} missing:\n{metrics}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dry_run_of_a_claim_gets_the_same_answer() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let template = all_gpus_template();
    for path in [ENFORCE, WARN, AUDIT] {
        let uid = next_uid();
        let real = connection
            .post(path, body_of(&review(&template, &uid, false)))
            .await
            .expect("real request");
        let dry = connection
            .post(path, body_of(&review(&template, &uid, true)))
            .await
            .expect("dry-run request");
        real.admission(&uid);
        dry.admission(&uid);
        assert_eq!(real.body, dry.body, "{path}: {} vs {}", real.text(), dry.text());
    }
}
