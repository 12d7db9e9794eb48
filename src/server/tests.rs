//! In-process router tests (`oneshot`), including the bad-input table.

use gpu_policy_test_support::pods::gpu_pod;
use std::sync::Arc;

use axum::body::Body;
use axum::http::{Method, Request, StatusCode};
use http_body_util::BodyExt;
use rstest::rstest;
use serde_json::{Value, json};
use tower::ServiceExt;

use super::*;
use gpu_policy_test_support::review::Review;

fn state() -> Arc<AppState> {
    Arc::new(AppState::new(Settings::default()))
}

async fn send(
    app: &Router,
    method: Method,
    path: &str,
    content_type: Option<&str>,
    body: Vec<u8>,
) -> (StatusCode, Vec<u8>) {
    let mut request = Request::builder().method(method).uri(path);
    if let Some(content_type) = content_type {
        request = request.header(header::CONTENT_TYPE, content_type);
    }
    let request = match request.body(Body::from(body)) {
        Ok(request) => request,
        Err(err) => panic!("request: {err}"),
    };
    let response = match app.clone().oneshot(request).await {
        Ok(response) => response,
        Err(never) => match never {},
    };
    let status = response.status();
    let bytes = match response.into_body().collect().await {
        Ok(collected) => collected.to_bytes().to_vec(),
        Err(err) => panic!("body: {err}"),
    };
    (status, bytes)
}

fn review_with(object: Value, operation: &str) -> Value {
    Review::create(&object, "ml").set("operation", json!(operation)).json()
}

fn pod(spec: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": spec})
}

fn bytes(value: &Value) -> Vec<u8> {
    value.to_string().into_bytes()
}

/// What a bad input must produce.
#[derive(Debug, Clone, Copy)]
enum Expect {
    /// An HTTP error with this status and a one-line reason.
    Status(u16),
    /// A review answered `allowed: false`, the message containing this.
    Denied(&'static str),
    /// A review answered `allowed: true`.
    Allowed,
}

fn deep_nesting(levels: usize) -> Value {
    let mut value = json!("bottom");
    for _ in 0..levels {
        value = json!({ "n": value });
    }
    value
}

fn with_request(mut review: Value, key: &str, value: Value) -> Value {
    review["request"][key] = value;
    review
}

fn without_request_key(mut review: Value, key: &str) -> Value {
    if let Some(request) = review["request"].as_object_mut() {
        request.remove(key);
    }
    review
}

/// (name, path, content type, body, expectation)
type Case = (&'static str, &'static str, Option<&'static str>, Vec<u8>, Expect);

fn cases() -> Vec<Case> {
    let json = Some("application/json");
    let valid = bytes(&review_with(gpu_pod().name("p").json(), "CREATE"));
    let mut truncated = valid.clone();
    truncated.truncate(valid.len() / 2);
    let huge_env: Vec<Value> =
        (0..20_000).map(|i| json!({"name": format!("VAR_{i}"), "value": "x"})).collect();
    let mut invalid_utf8 =
        br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":""#
            .to_vec();
    invalid_utf8.extend_from_slice(&[0xff, 0xfe]);
    invalid_utf8.extend_from_slice(br#""}}"#);
    let oversized = {
        let filler = "x".repeat(MAX_BODY_BYTES + 1);
        bytes(&review_with(pod(json!({"containers": [{"name": "c", "args": [filler]}]})), "CREATE"))
    };
    vec![
        ("empty body", "/mutate", json, Vec::new(), Expect::Status(400)),
        ("not JSON", "/mutate", json, b"hello".to_vec(), Expect::Status(400)),
        ("truncated body", "/mutate", json, truncated, Expect::Status(400)),
        ("JSON null", "/mutate", json, b"null".to_vec(), Expect::Status(400)),
        ("JSON array", "/mutate", json, b"[]".to_vec(), Expect::Status(400)),
        ("empty object", "/mutate", json, b"{}".to_vec(), Expect::Status(400)),
        ("v1beta1", "/validate/enforce", json,
            bytes(&json!({"apiVersion": "admission.k8s.io/v1beta1", "kind": "AdmissionReview", "request": review_with(gpu_pod().name("p").json(), "CREATE")["request"]})),
            Expect::Status(400)),
        ("wrong review kind", "/mutate", json,
            bytes(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "Pod", "request": review_with(gpu_pod().name("p").json(), "CREATE")["request"]})),
            Expect::Status(400)),
        ("missing request", "/mutate", json,
            bytes(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview"})), Expect::Status(400)),
        ("null request", "/mutate", json,
            bytes(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": null})), Expect::Status(400)),
        ("missing uid", "/mutate", json, bytes(&without_request_key(review_with(gpu_pod().name("p").json(), "CREATE"), "uid")), Expect::Status(400)),
        ("uid a number", "/mutate", json, bytes(&with_request(review_with(gpu_pod().name("p").json(), "CREATE"), "uid", json!(7))), Expect::Status(400)),
        ("missing request kind", "/mutate", json, bytes(&without_request_key(review_with(gpu_pod().name("p").json(), "CREATE"), "kind")), Expect::Status(400)),
        ("unknown operation", "/mutate", json, bytes(&review_with(gpu_pod().name("p").json(), "PATCH")), Expect::Status(400)),
        ("text/plain", "/mutate", Some("text/plain"), valid.clone(), Expect::Status(415)),
        ("no content type", "/mutate", None, valid.clone(), Expect::Status(415)),
        ("form content type", "/mutate", Some("application/x-www-form-urlencoded"), valid.clone(), Expect::Status(415)),
        ("json with charset", "/mutate", Some("application/json; charset=utf-8"), valid.clone(), Expect::Allowed),
        ("body over 3 MiB", "/mutate", json, oversized, Expect::Status(413)),
        ("invalid UTF-8", "/mutate", json, invalid_utf8, Expect::Status(400)),
        ("nesting deeper than the parser allows", "/mutate", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c"}], "affinity": deep_nesting(300)})), "CREATE")),
            Expect::Status(400)),
        ("number out of range", "/mutate", json,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{},"object":{"spec":{"containers":[{"name":"c","resources":{"limits":{"nvidia.com/gpu":1e400}}}]}}}}"#.to_vec(),
            Expect::Status(400)),
        ("claim count an integer above u64", "/validate/enforce", json,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"resource.k8s.io","version":"v1","kind":"ResourceClaim"},"resource":{"group":"resource.k8s.io","version":"v1","resource":"resourceclaims"},"operation":"CREATE","userInfo":{},"object":{"spec":{"devices":{"requests":[{"name":"g","exactly":{"deviceClassName":"gpu.nvidia.com","count":18446744073709551616}}]}}}}}"#.to_vec(),
            Expect::Denied("exactly.count: must be a whole number above 0, not 1.8446744073709552e+19")),
        ("claim count 1e400", "/validate/enforce", json,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","kind":{"group":"resource.k8s.io","version":"v1","kind":"ResourceClaim"},"resource":{"group":"resource.k8s.io","version":"v1","resource":"resourceclaims"},"operation":"CREATE","userInfo":{},"object":{"spec":{"devices":{"requests":[{"name":"g","exactly":{"count":1e400}}]}}}}}"#.to_vec(),
            Expect::Status(400)),
        ("containers a string", "/validate/enforce", json, bytes(&review_with(pod(json!({"containers": "app"})), "CREATE")),
            Expect::Denied("spec.containers: must be a list, not a string")),
        ("container a string", "/validate/enforce", json, bytes(&review_with(pod(json!({"containers": ["app"]})), "CREATE")),
            Expect::Denied("spec.containers[0]: must be an object, not a string")),
        ("resources a list", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "resources": ["gpu"]}]})), "CREATE")),
            Expect::Denied("spec.containers[0].resources: must be an object, not a list")),
        ("limits a string", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "resources": {"limits": "1"}}]})), "CREATE")),
            Expect::Denied("spec.containers[0].resources.limits: must be an object, not a string")),
        ("env a map", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "env": {"A": "1"}}]})), "CREATE")),
            Expect::Denied("spec.containers[0].env: must be a list, not an object")),
        ("env entry a number", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "env": [1]}]})), "CREATE")),
            Expect::Denied("spec.containers[0].env[0]: must be an object, not a number")),
        ("spec missing", "/validate/enforce", json,
            bytes(&review_with(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}), "CREATE")),
            Expect::Denied("spec: is missing")),
        ("spec a list", "/validate/enforce", json, bytes(&review_with(pod(json!([])), "CREATE")),
            Expect::Denied("spec: must be an object, not a list")),
        ("object a string", "/validate/enforce", json,
            bytes(&with_request(review_with(gpu_pod().name("p").json(), "CREATE"), "object", json!("pod"))),
            Expect::Denied("object: must be an object, not a string")),
        ("no object on CREATE", "/mutate", json,
            bytes(&with_request(review_with(gpu_pod().name("p").json(), "CREATE"), "object", Value::Null)),
            Expect::Denied("carries no object")),
        ("metadata a list", "/validate/enforce", json,
            bytes(&review_with(json!({"apiVersion": "v1", "kind": "Pod", "metadata": [], "spec": {}}), "CREATE")),
            Expect::Denied("metadata: must be an object, not a list")),
        ("annotation value a number", "/validate/enforce", json,
            bytes(&review_with(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"annotations": {"a": 1}}, "spec": {"containers": []}}), "CREATE")),
            Expect::Denied("metadata.annotations.a: must be a string")),
        ("runtimeClassName a number", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"runtimeClassName": 3, "containers": []})), "CREATE")),
            Expect::Denied("spec.runtimeClassName: must be a string, not a number")),
        ("volumes a map", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"volumes": {"v": {}}, "containers": []})), "CREATE")),
            Expect::Denied("spec.volumes: must be a list, not an object")),
        ("hostPath path a number", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"volumes": [{"name": "v", "hostPath": {"path": 1}}], "containers": []})), "CREATE")),
            Expect::Denied("spec.volumes[0].hostPath.path: must be a string, not a number")),
        ("GPU quantity an object", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": {"n": 1}}}}]})), "CREATE")),
            Expect::Denied("is not a Kubernetes quantity")),
        ("fractional GPU", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]})), "CREATE")),
            Expect::Denied("is not a whole number")),
        ("negative GPU", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "resources": {"limits": {"nvidia.com/gpu": "-1"}}}]})), "CREATE")),
            Expect::Denied("is negative")),
        ("affinity a string on a GPU pod", "/validate/enforce", json,
            bytes(&review_with(pod(json!({"affinity": "fast", "containers": [{"name": "c", "image": "nvidia/cuda:12.2.0-base", "resources": {"limits": {"nvidia.com/gpu": 1}}}]})), "CREATE")),
            Expect::Denied("spec.affinity is malformed")),
        ("template a string", "/validate/enforce", json,
            bytes(&json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {
                "uid": "u", "kind": {"group": "apps", "version": "v1", "kind": "Deployment"},
                "resource": {"group": "apps", "version": "v1", "resource": "deployments"},
                "operation": "CREATE", "userInfo": {}, "object": {"spec": {"template": "x"}}}})),
            Expect::Denied("spec.template: must be an object, not a string")),
        ("owner references garbage", "/validate/enforce", json,
            bytes(&review_with(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"ownerReferences": "x"}, "spec": {"containers": [{"name": "c"}]}}), "CREATE")),
            Expect::Allowed),
        ("huge env list", "/mutate", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "c", "env": huge_env}]})), "CREATE")),
            Expect::Allowed),
        ("unicode names", "/mutate", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "ünïcødé-🚀", "image": "nvidia/cuda:13.0.0-base"}]})), "CREATE")),
            Expect::Allowed),
        ("NUL bytes in strings", "/mutate", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "a\u{0}b", "env": [{"name": "NVIDIA_VISIBLE_DEVICES\u{0}", "value": "\u{0}"}]}]})), "CREATE")),
            Expect::Allowed),
        ("a very long name", "/mutate", json,
            bytes(&review_with(pod(json!({"containers": [{"name": "n".repeat(100_000)}]})), "CREATE")),
            Expect::Allowed),
        ("duplicate keys", "/mutate", json,
            br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","uid":"v","kind":{"group":"","version":"v1","kind":"Pod"},"resource":{"group":"","version":"v1","resource":"pods"},"operation":"CREATE","userInfo":{},"object":{"spec":{"containers":[]}}}}"#.to_vec(),
            Expect::Status(400)),
        ("DELETE without object", "/validate/enforce", json,
            bytes(&with_request(review_with(gpu_pod().name("p").json(), "DELETE"), "object", Value::Null)),
            Expect::Allowed),
        ("unknown kind", "/validate/enforce", json,
            bytes(&review_with(json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"a": "b"}}), "CREATE")),
            Expect::Allowed),
        ("namespace with labels a string", "/validate/namespace", json,
            bytes(&review_with(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "n", "labels": "x"}}), "CREATE")),
            Expect::Allowed),
    ]
}

#[tokio::test]
async fn bad_input_never_gets_a_5xx_and_the_server_keeps_serving() {
    let app = router(state());
    let cases = cases();
    assert!(cases.len() >= 40, "only {} cases", cases.len());
    for (name, path, content_type, body, expect) in cases {
        let (status, body) = send(&app, Method::POST, path, content_type, body).await;
        let text = String::from_utf8_lossy(&body);
        assert!(!status.is_server_error(), "{name}: {status} {text}");
        match expect {
            Expect::Status(code) => {
                assert_eq!(status.as_u16(), code, "{name}: {text}");
                assert!(text.trim_end().lines().count() <= 1, "{name}: reason spans lines: {text}");
                assert!(!text.trim().is_empty(), "{name}: no reason");
            }
            Expect::Denied(reason) => {
                assert_eq!(status, StatusCode::OK, "{name}: {text}");
                let reply: Value = serde_json::from_slice(&body).unwrap_or_default();
                assert_eq!(reply["response"]["allowed"], false, "{name}: {text}");
                assert_eq!(reply["response"]["status"]["code"], 403, "{name}: {text}");
                let message = reply["response"]["status"]["message"].as_str().unwrap_or("");
                assert!(message.contains(reason), "{name}: {message}");
            }
            Expect::Allowed => {
                assert_eq!(status, StatusCode::OK, "{name}: {text}");
                let reply: Value = serde_json::from_slice(&body).unwrap_or_default();
                assert_eq!(reply["response"]["allowed"], true, "{name}: {text}");
            }
        }
    }
    // Still serving.
    let (status, body) = send(
        &app,
        Method::POST,
        "/mutate",
        Some("application/json"),
        bytes(&review_with(gpu_pod().name("p").json(), "CREATE")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let reply: Value = serde_json::from_slice(&body).unwrap_or_default();
    assert_eq!(reply["response"]["patchType"], "JSONPatch");
}

/// Malformed DRA claims and pods: on every endpoint, never a 5xx; on the
/// validating ones a denial naming the field on one line (or an answer
/// allowing it), and the server keeps serving.
#[tokio::test]
async fn malformed_claims_get_a_one_line_denial() {
    use gpu_policy_test_support::bad_claims::Expect as BadExpect;
    let app = router(state());
    let catalog: Vec<_> = gpu_policy_test_support::bad_claims::claims()
        .into_iter()
        .chain(gpu_policy_test_support::bad_claims::pods())
        .collect();
    assert!(catalog.len() >= 25, "only {} cases", catalog.len());
    for (name, object, expected) in catalog {
        let body = bytes(&Review::create(&object, "ml").json());
        for path in ["/mutate", "/validate/enforce", "/validate/warn", "/validate/audit"] {
            let (status, reply) =
                send(&app, Method::POST, path, Some("application/json"), body.clone()).await;
            let text = String::from_utf8_lossy(&reply);
            assert_eq!(status, StatusCode::OK, "{name} {path}: {text}");
            let reply: Value = serde_json::from_slice(&reply).unwrap_or_default();
            let response = &reply["response"];
            let denied = match (path, expected) {
                ("/mutate", _) | (_, BadExpect::Allowed) => None,
                (_, BadExpect::Unreadable(message)) => Some(message),
                ("/validate/enforce", BadExpect::Violates(message)) => Some(message),
                (_, BadExpect::Violates(_)) => None,
            };
            assert_eq!(response["allowed"], denied.is_none(), "{name} {path}: {text}");
            if let Some(expected) = denied {
                let message = response["status"]["message"].as_str().unwrap_or("");
                assert!(message.contains(expected), "{name} {path}: {message}");
                assert!(message.starts_with("gpu-policy: "), "{name}: {message}");
                assert!(!message.contains('\n'), "{name}: {message}");
                assert!(message.len() < 1_000, "{name}: {} bytes", message.len());
            }
            let warnings = response["warnings"].as_array().map_or(0, Vec::len);
            assert!(warnings <= 5, "{name} {path}: {warnings} warnings");
        }
    }
    let (status, _) = send(
        &app,
        Method::POST,
        "/mutate",
        Some("application/json"),
        bytes(&review_with(gpu_pod().name("p").json(), "CREATE")),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
}

#[rstest]
#[case(Method::GET, "/mutate", 405)]
#[case(Method::POST, "/nope", 404)]
#[case(Method::POST, "/validate/strict", 404)]
#[tokio::test]
async fn routes(#[case] method: Method, #[case] path: &str, #[case] status: u16) {
    let (got, _) = send(&router(state()), method, path, Some("application/json"), Vec::new()).await;
    assert_eq!(got.as_u16(), status);
}

#[tokio::test]
async fn every_mode_has_its_endpoint() {
    let app = router(state());
    let body = bytes(&review_with(
        pod(json!({"containers": [
        {"name": "c", "resources": {"requests": {"nvidia.com/gpu": 1}}}]})),
        "CREATE",
    ));
    let mut answers = Vec::new();
    for path in ["/validate/enforce", "/validate/warn", "/validate/audit"] {
        let (status, reply) =
            send(&app, Method::POST, path, Some("application/json"), body.clone()).await;
        assert_eq!(status, StatusCode::OK);
        let reply: Value = serde_json::from_slice(&reply).unwrap_or_default();
        answers.push((
            reply["response"]["allowed"].as_bool(),
            reply["response"]["warnings"].as_array().map(Vec::len).unwrap_or(0) > 0,
            reply["response"]["auditAnnotations"].is_object(),
        ));
    }
    assert_eq!(
        answers,
        vec![(Some(false), false, false), (Some(true), true, false), (Some(true), false, true)]
    );
}

#[tokio::test]
async fn dry_run_is_answered_like_any_request() {
    let app = router(state());
    let mut review = review_with(gpu_pod().name("p").json(), "CREATE");
    let (_, live) =
        send(&app, Method::POST, "/mutate", Some("application/json"), bytes(&review)).await;
    review["request"]["dryRun"] = json!(true);
    let (_, dry) =
        send(&app, Method::POST, "/mutate", Some("application/json"), bytes(&review)).await;
    assert_eq!(live, dry);
}

#[tokio::test]
async fn namespace_guard_denies_loosening() {
    let app = router(state());
    let old = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"gpu-policy.io/mode": "enforce"}}});
    let new = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml", "labels": {"gpu-policy.io/mode": "audit"}}});
    let mut review = review_with(new, "UPDATE");
    review["request"]["oldObject"] = old;
    let (_, reply) =
        send(&app, Method::POST, "/validate/namespace", Some("application/json"), bytes(&review))
            .await;
    let reply: Value = serde_json::from_slice(&reply).unwrap_or_default();
    assert_eq!(reply["response"]["allowed"], false);
    review["request"]["userInfo"]["groups"] = json!(["system:masters"]);
    let (_, reply) =
        send(&app, Method::POST, "/validate/namespace", Some("application/json"), bytes(&review))
            .await;
    let reply: Value = serde_json::from_slice(&reply).unwrap_or_default();
    assert_eq!(reply["response"]["allowed"], true);
}

#[tokio::test]
async fn operations_endpoints() {
    let state = state();
    let app = operations_router(Arc::clone(&state));
    let (status, _) = send(&app, Method::GET, "/healthz", None, Vec::new()).await;
    assert_eq!(status, StatusCode::OK);
    let (status, _) = send(&app, Method::GET, "/readyz", None, Vec::new()).await;
    assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
    for flag in [
        &state.readiness.listener_bound,
        &state.readiness.config_loaded,
        &state.readiness.certificate_loaded,
    ] {
        flag.store(true, Ordering::Release);
    }
    let (status, _) = send(&app, Method::GET, "/readyz", None, Vec::new()).await;
    assert_eq!(status, StatusCode::OK);

    let admission = router(Arc::clone(&state));
    send(
        &admission,
        Method::POST,
        "/mutate?timeout=7s",
        Some("application/json"),
        bytes(&review_with(gpu_pod().name("p").json(), "CREATE")),
    )
    .await;
    send(&admission, Method::POST, "/mutate", Some("text/plain"), Vec::new()).await;
    let (_, metrics) = send(&app, Method::GET, "/metrics", None, Vec::new()).await;
    let metrics = String::from_utf8_lossy(&metrics);
    for line in [
        "gpu_policy_admission_requests_total{endpoint=\"/mutate\",kind=\"Pod\",operation=\"CREATE\",decision=\"mutated\"} 1",
        "gpu_policy_admission_requests_total{endpoint=\"/mutate\",kind=\"\",operation=\"\",decision=\"bad_request\"} 1",
        "gpu_policy_rule_findings_total{rule=\"runtime-class\",finding=\"change\"} 1",
        "gpu_policy_admission_duration_seconds_count{endpoint=\"/mutate\"} 2",
    ] {
        assert!(metrics.contains(line), "missing {line} in\n{metrics}");
    }
    assert_eq!(state.drain_timeout(), Duration::from_secs(7));
}

/// A claim made for a pod, on `/mutate` without a cluster connection: the
/// pod cannot be read, so the claim is admitted unchanged with a warning.
#[tokio::test]
async fn a_claim_whose_pod_cannot_be_read_is_admitted_unchanged_with_a_warning() {
    let app = router(state());
    let claim = json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
        "metadata": {"name": "pod1-gpu-x7k2p", "namespace": "ml",
            "ownerReferences": [{"apiVersion": "v1", "kind": "Pod", "name": "pod1",
                "uid": "uid-1", "controller": true}]},
        "spec": {"devices": {"requests": [
            {"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]}}});
    let (status, reply) = send(
        &app,
        Method::POST,
        "/mutate",
        Some("application/json"),
        bytes(&Review::create(&claim, "ml").json()),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    let reply: Value = serde_json::from_slice(&reply).unwrap_or_default();
    let response = &reply["response"];
    assert_eq!(response["allowed"], true, "{reply}");
    assert_eq!(response.get("patch"), None, "{reply}");
    assert_eq!(
        response["warnings"],
        json!(["gpu-policy: compute-affinity: claim unchanged: cannot read its pod \
                \"pod1\": no cluster connection (--no-cluster)"])
    );
    // The same claim on a validating endpoint: the pod is not read there,
    // and nothing is said of it.
    let (_, reply) = send(
        &app,
        Method::POST,
        "/validate/enforce",
        Some("application/json"),
        bytes(&Review::create(&claim, "ml").json()),
    )
    .await;
    let reply: Value = serde_json::from_slice(&reply).unwrap_or_default();
    assert_eq!(reply["response"]["allowed"], true, "{reply}");
    assert_eq!(reply["response"].get("warnings"), None, "{reply}");
}

/// Every request's future is moved as axum boxes it: the waits only some
/// requests make (a registry lookup, the pod of a claim, the pods of a
/// namespace being opted in) are boxed where they are made, so that their
/// state is not in it. Inline, they made it three times this size.
#[test]
fn the_future_of_a_request_leaves_out_the_rare_waits() {
    let post = ReviewPost { content_type: None, timeout: None, body: Vec::new() };
    let caller = Caller(std::net::Ipv4Addr::LOCALHOST.into());
    let future = admit(State(state()), Endpoint::Mutate, caller, post);
    let size = std::mem::size_of_val(&future);
    assert!(size <= 2048, "the future of admit is {size} bytes");
}
