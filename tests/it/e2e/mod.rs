//! End-to-end tests of `gpu-policy serve`: the built binary as a child
//! process, spoken to exactly as the API server does: HTTP/1.1 over TLS
//! (rustls, ring), the server certificate verified against the CA the
//! server generated (or the test made) as the only root, SNI
//! `gpu-policy.gpu-policy.svc` on a socket to 127.0.0.1, ALPN `http/1.1`,
//! keep-alive, AdmissionReview v1 bodies POSTed as `application/json` to
//! `/mutate?timeout=10s` and `/validate/<mode>?timeout=10s`.
//!
//! Every server runs on free loopback ports with its own directories, and
//! is killed by a drop guard, so a failing test leaves no process behind.
//! Logs (JSON, on stderr) go to a file the tests read.

use hyper::Method;
use serde_json::{Value, json};

use crate::support::bad_claims;
use crate::support::fixtures::{self, FixturePod};
use crate::support::server::{
    AUDIT, ENFORCE, MUTATE, NAMESPACE, Options, Server, WARN, body_of, namespace_of, next_uid,
    patch_of, patched, review, template_pod,
};

mod certificates;
mod claims;
mod client_certificates;
mod dra;
mod dra_driver;
mod dra_floors;
mod dra_products;
mod memory;
mod operations;
mod pod_claims;
mod pod_updates;
mod registry;
mod shutdown;

// ---------------------------------------------------------------------------
// Fixtures.

use crate::support::fixtures::fixture;

/// The pods of test 1: the Pod fixtures and one pod per workload template,
/// in the test namespace when the workload names none.
fn fixture_pods() -> Vec<(String, Value)> {
    fixtures::pods("e2e01", "5f0c8a52-2f5e-4b8e-9d59-1d1b0c3c0001")
        .into_iter()
        .map(|fixture_pod| {
            let label = fixture_pod.label();
            let FixturePod { source, mut pod, .. } = fixture_pod;
            if !fixtures::is_pod(&source) {
                pod["metadata"]["namespace"] = json!(namespace_of(&source));
            }
            (label, pod)
        })
        .collect()
}

// ---------------------------------------------------------------------------
// 1. Every pod through /mutate, the patch applied, then idempotence and
//    validation over the wire.

/// What each pod's mutation must write into `gpu-policy.io/mutations`;
/// `None`: the pod is left alone (allowlisted).
fn expected_mutations(label: &str) -> Option<&'static str> {
    let prefix = &label[..2];
    match prefix {
        // kube-system DaemonSets on the default allowlist.
        "00" | "01" => None,
        // Non-GPU pods, not allowlisted: void pins.
        "02" | "03" | "04" | "09" => Some("visible-devices"),
        // GPU pods whose image implies no minimum compute capability.
        "05" | "06" | "07" | "08" | "10" => Some("runtime-class"),
        // The seed pods of 11 and 12: their images need a compute capability
        // (and 12 has one with a driver floor).
        "11" | "12" => Some("runtime-class,compute-affinity"),
        // DRA quickstart pods: without a cluster the webhook cannot resolve
        // claims, so their claimed containers stay pinned (and the pod is
        // warned).
        "20" | "21" | "22" | "23" => Some("visible-devices"),
        // An nvidia.com/gpu limit, served by DRA or not: a device-plugin GPU pod.
        "24" => Some("runtime-class"),
        other => panic!("unknown fixture {other}"),
    }
}

fn all_containers(pod: &Value) -> Vec<&Value> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|field| pod["spec"][field].as_array())
        .flatten()
        .collect()
}

fn visible_devices(container: &Value) -> Vec<&Value> {
    container["env"]
        .as_array()
        .map(|env| env.iter().filter(|e| e["name"] == "NVIDIA_VISIBLE_DEVICES").collect())
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_fixture_pod_is_mutated_idempotently_and_then_admitted() {
    let server = Server::start(Options::default(), None).await;
    // One keep-alive connection for all of them, as the API server does.
    let mut connection = server.connect().await;
    for (label, mut pod) in fixture_pods() {
        if label.starts_with("04") {
            // runtimeClassName: nvidia without a GPU request, outside the
            // allowlist (namespace ml): a violation. The mutating webhook
            // only mutates (allowed, and no patch for a pod that will be
            // denied); /validate/enforce denies it.
            let mutated = connection.admit(MUTATE, &pod).await;
            assert_eq!(mutated["allowed"], true, "{label}: {mutated}");
            assert!(patch_of(&mutated).is_none(), "{mutated}");
            let denied = connection.admit(ENFORCE, &pod).await;
            assert_eq!(denied["allowed"], false, "{label}: {denied}");
            assert_eq!(denied["status"]["code"], 403, "{denied}");
            let message = denied["status"]["message"].as_str().expect("message");
            assert!(message.contains("runtimeClassName"), "{message}");
            // The author's fix: no runtime class. Then only R1 applies.
            pod["spec"].as_object_mut().expect("spec").remove("runtimeClassName");
        }
        if label.starts_with("02") {
            // GFD runs privileged without a GPU request; outside the
            // allowlist (namespace ml) /validate/enforce denies it, and
            // /mutate leaves it unpatched.
            let mutated = connection.admit(MUTATE, &pod).await;
            assert_eq!(mutated["allowed"], true, "{label}: {mutated}");
            assert!(patch_of(&mutated).is_none(), "{mutated}");
            let denied = connection.admit(ENFORCE, &pod).await;
            assert_eq!(denied["allowed"], false, "{label}: {denied}");
            let message = denied["status"]["message"].as_str().expect("message");
            assert!(
                message.contains(
                    "[device-paths] container \"gpu-feature-discovery\" must not be privileged"
                ),
                "{message}"
            );
            // The author's fix: not privileged. Then only R1 applies.
            pod["spec"]["containers"][0]
                .as_object_mut()
                .expect("container")
                .remove("securityContext");
        }
        let response = connection.admit(MUTATE, &pod).await;
        assert_eq!(response["allowed"], true, "{label}: {response}");
        let after = match (patch_of(&response), expected_mutations(&label)) {
            (None, None) => pod.clone(),
            (Some(patch), Some(rules)) => {
                let after = patched(&pod, &patch);
                assert_eq!(
                    after["metadata"]["annotations"]["gpu-policy.io/mutations"], rules,
                    "{label}: {after}"
                );
                after
            }
            (patch, rules) => panic!("{label}: expected mutations {rules:?}, got patch {patch:?}"),
        };

        // Rule by rule, what the patched pod must look like.
        match expected_mutations(&label) {
            Some("visible-devices") => {
                for container in all_containers(&after) {
                    assert_eq!(
                        visible_devices(container),
                        vec![&json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})],
                        "{label}: container {}",
                        container["name"]
                    );
                }
                assert_eq!(
                    after["spec"].get("runtimeClassName"),
                    pod["spec"].get("runtimeClassName"),
                    "{label}: no runtime class is injected into a non-GPU pod"
                );
            }
            Some(_) => {
                assert_eq!(after["spec"]["runtimeClassName"], "nvidia", "{label}");
            }
            None => {}
        }
        if label.starts_with("11") {
            assert_eq!(
                after["spec"]["affinity"],
                json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{
                        "key": "nvidia.com/gpu.compute.major",
                        "operator": "Gt",
                        "values": ["4"],
                    }]}]
                }}})
            );
        }
        if label.starts_with("09") {
            let vllm = all_containers(&after)
                .into_iter()
                .find(|c| c["name"] == "vllm")
                .expect("container vllm");
            assert_eq!(
                visible_devices(vllm),
                vec![&json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})]
            );
        }
        if label.starts_with("04") || label.starts_with("00") {
            // The exporter's explicit `all`: replaced by the pin, except in
            // the allowlisted kube-system DaemonSet.
            let exporter = &after["spec"]["containers"][0];
            let expected = if label.starts_with("00") { "all" } else { "void" };
            assert_eq!(
                visible_devices(exporter),
                vec![&json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": expected})],
                "{label}: {exporter}"
            );
        }

        // Re-invocation (reinvocationPolicy: IfNeeded): nothing more to do.
        let again = connection.admit(MUTATE, &after).await;
        assert_eq!(again["allowed"], true, "{label}: {again}");
        assert!(patch_of(&again).is_none(), "{label}: second /mutate patched again: {again}");

        // The validating webhook sees the mutated pod.
        let validated = connection.admit(ENFORCE, &after).await;
        assert_eq!(validated["allowed"], true, "{label}: {validated}");
    }
}

// ---------------------------------------------------------------------------
// 2. Workloads on the validating endpoints.

#[tokio::test(flavor = "multi_thread")]
async fn workloads_are_validated_per_mode() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let exporter_elsewhere = fixture("04");
    let exporter_allowlisted = fixture("00");
    assert_eq!(namespace_of(&exporter_elsewhere), NAMESPACE);
    assert_eq!(namespace_of(&exporter_allowlisted), "kube-system");

    let denied = connection.admit(ENFORCE, &exporter_elsewhere).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    assert_eq!(denied["status"]["status"], "Failure", "{denied}");
    assert_eq!(denied["status"]["reason"], "Forbidden", "{denied}");
    let message = denied["status"]["message"].as_str().expect("a message");
    assert!(
        message.starts_with("gpu-policy: ") && message.contains("runtimeClassName"),
        "{message}"
    );
    assert!(patch_of(&denied).is_none(), "templates are never patched");

    let allowed = connection.admit(ENFORCE, &exporter_allowlisted).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert!(patch_of(&allowed).is_none(), "{allowed}");
    assert!(
        allowed.get("warnings").is_none_or(Value::is_null),
        "the allowlisted exporter raises nothing: {allowed}"
    );

    let warned = connection.admit(WARN, &exporter_elsewhere).await;
    assert_eq!(warned["allowed"], true, "{warned}");
    assert!(patch_of(&warned).is_none(), "{warned}");
    let warnings = warned["warnings"].as_array().expect("warnings");
    assert!(!warnings.is_empty(), "{warned}");
    for warning in warnings {
        let warning = warning.as_str().expect("a string");
        assert!(warning.starts_with("gpu-policy:"), "{warning}");
    }
    assert!(
        warnings.iter().any(|w| w.as_str().is_some_and(|w| w.contains("runtimeClassName"))),
        "the would-be denial is among the warnings: {warnings:?}"
    );

    let audited = connection.admit(AUDIT, &exporter_elsewhere).await;
    assert_eq!(audited["allowed"], true, "{audited}");
    assert!(patch_of(&audited).is_none(), "{audited}");
    assert!(
        audited.get("warnings").is_none_or(Value::is_null),
        "audit mode does not warn: {audited}"
    );
    let annotations = audited["auditAnnotations"].as_object().expect("auditAnnotations");
    assert!(!annotations.is_empty(), "{audited}");
    assert!(
        annotations
            .get("violations")
            .and_then(Value::as_str)
            .is_some_and(|v| v.contains("runtime-class")),
        "{annotations:?}"
    );
}

// ---------------------------------------------------------------------------
// 3. dryRun changes nothing in the answer (sideEffects: None).

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_gets_the_same_bytes_as_the_real_request() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let pod = fixture("11");
    let exporter = fixture("04");
    // A pod that both changes and violates, so audit mode writes two
    // annotations.
    let violating = template_pod(&exporter).expect("a template");
    let cases = [
        (MUTATE, &pod),
        (ENFORCE, &pod),
        (ENFORCE, &exporter),
        (WARN, &exporter),
        (AUDIT, &exporter),
        (AUDIT, &violating),
    ];
    for (path, object) in cases.iter().cycle().take(cases.len() * 5) {
        let uid = next_uid();
        let real = connection
            .post(path, body_of(&review(object, &uid, false)))
            .await
            .expect("real request");
        let dry = connection
            .post(path, body_of(&review(object, &uid, true)))
            .await
            .expect("dry-run request");
        // Both are well-formed answers to the same uid...
        let response = real.admission(&uid);
        dry.admission(&uid);
        if *path == AUDIT && object["kind"] == "Pod" {
            // Two annotations: their order must not vary either.
            let annotations = response["auditAnnotations"].as_object().expect("map");
            assert_eq!(
                annotations.keys().collect::<Vec<_>>(),
                ["mutations", "violations"],
                "{response}"
            );
        }
        // ...and byte for byte the same.
        assert_eq!(
            real.body,
            dry.body,
            "{path} {}: real {} vs dry run {}",
            object["metadata"]["name"],
            real.text(),
            dry.text()
        );
    }
}

// ---------------------------------------------------------------------------
// 4. Bad input over the wire.

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_4xx_and_the_server_keeps_serving() {
    let mut server = Server::start(Options::default(), None).await;
    let pod = fixture("11");
    let mut connection = server.connect().await;

    let malformed = connection
        .post(ENFORCE, br#"{"apiVersion": "admission.k8s.io/v1", "kind": "#.to_vec())
        .await
        .expect("an answer to malformed JSON");
    assert_eq!(malformed.status, 400, "{}", malformed.text());
    let reason = malformed.text();
    assert!(
        reason.starts_with("gpu-policy: ") && reason.trim_end().lines().count() == 1,
        "one line reason: {reason:?}"
    );

    let uid = next_uid();
    let wrong_type = connection
        .send(Method::POST, ENFORCE, Some("text/plain"), body_of(&review(&pod, &uid, false)))
        .await
        .expect("an answer to a wrong content type");
    assert_eq!(wrong_type.status, 415, "{}", wrong_type.text());
    assert!(wrong_type.text().starts_with("gpu-policy: "));

    // Both bodies were read whole: the keep-alive connection still works.
    let response = connection.admit(ENFORCE, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");

    // Over 3 MiB (the API server's object limit): a well-formed review,
    // padded with a large annotation.
    let mut big = pod.clone();
    big["metadata"]["annotations"] =
        json!({"example.com/padding": "x".repeat(3 * 1024 * 1024 + 1024)});
    let big_body = body_of(&review(&big, &next_uid(), false));
    assert!(big_body.len() > 3 * 1024 * 1024);
    let mut fresh = server.connect().await;
    let too_large = fresh.post(MUTATE, big_body).await.expect("an answer to an oversized body");
    assert_eq!(too_large.status, 413, "{}", too_large.text());

    // Malformed claims, and pods with malformed claims, on the keep-alive
    // connection: a one-line denial naming the field, never a 5xx.
    for (name, object, expect) in bad_claims::claims().into_iter().chain(bad_claims::pods()) {
        let uid = next_uid();
        let reply = connection
            .post(ENFORCE, body_of(&review(&object, &uid, false)))
            .await
            .unwrap_or_else(|err| panic!("{name}: {err}"));
        let response = reply.admission(&uid);
        match expect {
            bad_claims::Expect::Unreadable(expected) | bad_claims::Expect::Violates(expected) => {
                assert_eq!(response["allowed"], false, "{name}: {response}");
                let message = response["status"]["message"].as_str().unwrap_or_default();
                assert!(
                    message.starts_with("gpu-policy: ")
                        && message.contains(expected)
                        && !message.contains('\n'),
                    "{name}: {message}"
                );
            }
            bad_claims::Expect::Allowed => {
                assert_eq!(response["allowed"], true, "{name}: {response}");
            }
        }
    }

    // A new connection is served normally.
    let mut after = server.connect().await;
    let uid = next_uid();
    let reply = after
        .post(MUTATE, body_of(&review(&pod, &uid, false)))
        .await
        .expect("a valid request after bad ones");
    let response = reply.admission(&uid);
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_of(&response).is_some(), "{response}");
    assert!(server.child.try_wait().expect("try_wait").is_none(), "the server is still running");
}
