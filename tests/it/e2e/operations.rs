//! What an operator sees: the decision log, the metrics, the config
//! reload, and what the cluster knows.

use std::time::Duration;

use serde_json::{Value, json};
use tokio::time::{Instant, sleep};

use super::{all_containers, visible_devices};
use crate::support::fake_api::FakeApi;
use crate::support::fixtures::fixture;
use crate::support::server::{
    AUDIT, ENFORCE, MUTATE, NAMESPACE, Options, POLL, Server, WARN, body_of, namespace_of,
    next_uid, opt_in_review, patch_of, pod_with_gpus, review, template_pod, write_atomically,
};
use crate::support::workloads::pod_of_workload;

// ---------------------------------------------------------------------------
// 8. Metrics.

/// The value of the sample line whose name and labels are `series`.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

/// Audit mode changes nothing and warns nobody: its record is the audit
/// annotations, the metrics and one JSON log line per decision, written by
/// the log thread and all there once the request is answered and the log
/// drained.
#[tokio::test(flavor = "multi_thread")]
async fn every_decision_is_one_json_log_line() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let exporter = fixture("04");
    let violating = template_pod(&exporter).expect("a template");
    let uid = next_uid();
    let reply =
        connection.post(AUDIT, body_of(&review(&violating, &uid, true))).await.expect("answer");
    reply.admission(&uid);
    server.wait_for_log(&uid, Duration::from_secs(5)).await;
    let log = server.log();
    let lines: Vec<Value> = log
        .lines()
        .filter(|line| line.contains(&uid))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    let line = &lines[0];
    assert_eq!(line["message"], "admission decision", "{line}");
    assert_eq!(line["level"], "INFO", "{line}");
    assert_eq!(line["kind"], "Pod", "{line}");
    assert_eq!(line["namespace"], namespace_of(&violating), "{line}");
    assert_eq!(line["operation"], "CREATE", "{line}");
    assert_eq!(line["endpoint"], "/validate/audit", "{line}");
    assert_eq!(line["dry_run"], true, "{line}");
    assert_eq!(line["decision"], "allowed", "{line}");
    let name = line["name"].as_str().unwrap_or_default();
    assert!(!name.is_empty(), "a pod of a controller is named by generateName: {line}");
    let rules: Vec<&str> = line["rules"].as_str().unwrap_or_default().split(',').collect();
    assert!(rules.contains(&"visible-devices"), "{line}");
    assert!(rules.contains(&"runtime-class"), "{line}");
    assert!(line["duration_us"].is_u64(), "{line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_decisions_and_show_certificate_expiry() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let pod = fixture("11");
    let exporter = fixture("04");
    for _ in 0..2 {
        connection.admit(MUTATE, &pod).await;
    }
    connection.admit(ENFORCE, &exporter).await;
    connection.admit(WARN, &exporter).await;
    let bad = connection.post(ENFORCE, b"not json".to_vec()).await.expect("answer");
    assert_eq!(bad.status, 400);

    let metrics = server.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/mutate",kind="Pod",operation="CREATE",decision="mutated"}"#
        ),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/validate/enforce",kind="DaemonSet",operation="CREATE",decision="denied"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/validate/warn",kind="DaemonSet",operation="CREATE",decision="warned"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/validate/enforce",kind="",operation="",decision="bad_request"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    let expiry = sample(&metrics, "gpu_policy_certificate_expiry_timestamp_seconds")
        .unwrap_or_else(|| panic!("no certificate expiry gauge:\n{metrics}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    // The generated serving certificate is valid for 365 days.
    let days = (expiry - now) / 86_400.0;
    assert!((364.0..=366.0).contains(&days), "expires in {days} days");
    assert_eq!(
        sample(&metrics, r#"gpu_policy_reload_success{source="certificate"}"#),
        Some(1.0),
        "{metrics}"
    );
    assert!(metrics.trim_end().ends_with("# EOF"), "OpenMetrics text");
}

// ---------------------------------------------------------------------------
// 9. Config reload.

#[tokio::test(flavor = "multi_thread")]
async fn config_is_reloaded_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    write_atomically(&config, b"maxPerContainer: 8\n");
    let server =
        Server::start(Options { config: Some(config.clone()), ..Options::default() }, None).await;
    let mut connection = server.connect().await;

    // The pod as the validating webhook sees it: after /mutate.
    let pod = connection.mutated(&pod_with_gpus(4)).await;
    let allowed = connection.admit(ENFORCE, &pod).await;
    assert_eq!(allowed["allowed"], true, "4 <= 8: {allowed}");

    write_atomically(&config, b"maxPerContainer: 2\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    let denied = loop {
        let response = connection.admit(ENFORCE, &pod).await;
        if response["allowed"] == false {
            break response;
        }
        assert!(
            Instant::now() < deadline,
            "the new config was not applied within 10 s; log:\n{}",
            server.log()
        );
        sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    let message = denied["status"]["message"].as_str().expect("a message").to_owned();
    assert!(
        message.starts_with("gpu-policy: ") && message.contains("train"),
        "names the container: {message}"
    );
    server.wait_for_metric_line(r#"gpu_policy_reload_success{source="config"} 1"#).await;

    // An invalid config is refused; the last good one (2) stays in force.
    write_atomically(&config, b"maxPerContainer: lots\n");
    server.wait_for_metric_line(r#"gpu_policy_reload_success{source="config"} 0"#).await;
    let still = connection.admit(ENFORCE, &pod).await;
    assert_eq!(still["allowed"], false, "{still}");
    assert_eq!(still["status"]["message"], message.as_str());
    let two = connection.mutated(&pod_with_gpus(2)).await;
    let two = connection.admit(ENFORCE, &two).await;
    assert_eq!(two["allowed"], true, "2 <= 2 is allowed: {two}");
    assert!(server.log().contains("new config refused"));
    // Still ready and serving.
    let ready = server.operations_get("/readyz").await.expect("readyz");
    assert_eq!(ready.status, 200);
}

/// `serve --kubeconfig` against the fake API server: namespace annotations,
/// RuntimeClass scheduling, forged owners and the opt-in warning come from
/// the cluster.
#[tokio::test(flavor = "multi_thread")]
async fn cluster_mode_uses_what_the_cluster_knows() {
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE,
        "annotations": {"gpu-policy.io/max-gpus-per-pod": "1"}}}));
    api.insert(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}),
    );
    api.insert(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "t4",
        "labels": {"nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "5"}},
        "status": {"allocatable": {"nvidia.com/gpu": "4"}}}));
    api.insert(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"}, "handler": "nvidia",
        "overhead": {"podFixed": {"cpu": "100m"}},
        "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}}));
    api.insert(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
        "name": "nvidia-gpu-exporter", "namespace": "kube-system", "uid": "real-uid"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "e", "image": "x"}]}}}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "half-card", "namespace": "lab"},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}));
    let (server, _scratch) = Server::start_in_cluster(&api).await;
    let mut connection = server.connect().await;

    // The namespace annotation lowers the pod maximum to 1.
    let mut two = pod_with_gpus(2);
    two["metadata"]["namespace"] = json!(NAMESPACE);
    let denied = connection.admit(ENFORCE, &two).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    let message = denied["status"]["message"].as_str().unwrap_or("");
    assert!(message.contains("maximum of 1 per pod"), "{message}");

    // The injected RuntimeClass brings its overhead and node selector.
    let mut one = pod_with_gpus(1);
    one["metadata"]["namespace"] = json!(NAMESPACE);
    let after = connection.mutated(&one).await;
    assert_eq!(after["spec"]["runtimeClassName"], "nvidia");
    assert_eq!(after["spec"]["overhead"], json!({"cpu": "100m"}));
    assert_eq!(after["spec"]["nodeSelector"], json!({"nvidia.com/gpu.present": "true"}));

    // A forged owner reference to the exporter gets no exemption.
    let forged = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "forged",
        "namespace": "kube-system", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
        "name": "nvidia-gpu-exporter", "uid": "forged-uid", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}});
    let response = connection.admit(MUTATE, &forged).await;
    assert!(patch_of(&response).is_some(), "{response}");
    let warned = connection.admit("/validate/warn?timeout=10s", &forged).await;
    let warnings = warned["warnings"].to_string();
    assert!(warnings.contains("no exemption"), "{warnings}");

    // Opting a namespace in warns about the pods already running there:
    // how many, not which (no client certificate is required).
    let uid = next_uid();
    let body = opt_in_review("lab", "enforce", &uid);
    let reply = connection
        .post("/validate/namespace?timeout=10s", body_of(&body))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let response = reply.admission(&uid);
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].to_string();
    assert!(
        warnings.contains(
            "1 existing pod(s) in lab violate enforce mode; `gpu-policy audit -n lab` names them"
        ),
        "{warnings}"
    );
    assert!(!warnings.contains("half-card"), "{warnings}");

    let metrics = server.metrics().await;
    for resource in ["namespaces", "nodes", "runtimeclasses", "allowlisted-workloads"] {
        let line = format!("gpu_policy_cluster_cache_stale{{resource=\"{resource}\"}} 0");
        assert!(metrics.contains(&line), "{line} missing:\n{metrics}");
    }
}

/// A config reloaded by `serve --kubeconfig` reaches the cluster watches:
/// an allowlist entry added at reload exempts its workload's pods (as soon
/// as the RBAC grants its watch), removed again it pins them; a GPU
/// resource pattern added at reload counts what the nodes offer of it.
#[tokio::test(flavor = "multi_thread")]
async fn a_reloaded_config_reaches_the_cluster_watches() {
    let api = FakeApi::start().await;
    for name in ["kube-system", "gpu-ops", NAMESPACE] {
        api.insert(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    }
    api.insert(json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "vgpu-host"},
        "status": {"allocatable": {"nvidia.com/gpu": "8", "nvidia.com/vgpu": "4"}}}));
    api.insert(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"}, "handler": "nvidia"}));
    let exporter = json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
        "name": "dcgm-exporter", "namespace": "gpu-ops", "uid": "dcgm-uid"},
        "spec": {"selector": {"matchLabels": {"app": "dcgm"}},
            "template": {"metadata": {"labels": {"app": "dcgm"}},
                "spec": {"containers": [{"name": "exporter", "image": "nvcr.io/nvidia/k8s/dcgm-exporter",
                    "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}}}});
    api.insert(exporter.clone());
    let exporter_pod = pod_of_workload(&exporter, "x1x2", "dcgm-uid").expect("a pod");
    let vgpu_pod = |count: u64| {
        json!({"apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": format!("vgpu-{count}"), "namespace": NAMESPACE},
            "spec": {"containers": [{"name": "c", "image": "busybox",
                "resources": {"limits": {"nvidia.com/vgpu": count}}}]}})
    };
    let pinned = |pod: &Value| {
        all_containers(pod).iter().all(|c| visible_devices(c).iter().any(|e| e["value"] == "void"))
    };

    let scratch = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(scratch.path());
    let config_path = scratch.path().join("config.yaml");
    let write_config = |config: &gpu_policy::settings::Config| {
        // JSON is YAML.
        let text = serde_json::to_vec(config).expect("the config serialises");
        write_atomically(&config_path, &text);
    };
    let defaults = gpu_policy::settings::Config::default();
    write_config(&defaults);
    let server = Server::start(
        Options {
            config: Some(config_path.clone()),
            kubeconfig: Some(kubeconfig),
            ..Options::default()
        },
        None,
    )
    .await;
    let mut connection = server.connect().await;

    // Not allowlisted: the exporter loses its cards. Not a GPU resource:
    // the vGPU pod is a pod without GPUs.
    assert!(pinned(&connection.mutated(&exporter_pod).await));
    let vgpu = connection.mutated(&vgpu_pod(2)).await;
    assert!(pinned(&vgpu), "{vgpu}");
    assert!(vgpu["spec"]["runtimeClassName"].is_null(), "{vgpu}");

    // The reload adds both, while the Role does not grant the new entry
    // yet: its watch is refused twice, says which rule is missing, and
    // retries.
    api.fail_next("GET", "/apis/apps/v1/namespaces/gpu-ops/daemonsets", 403, 2);
    let mut reloaded = defaults.clone();
    reloaded.allowlist.push(gpu_policy::settings::AllowlistEntry::exact(
        "gpu-ops",
        "DaemonSet",
        "dcgm-exporter",
    ));
    reloaded.gpu_resources.push("nvidia.com/vgpu".to_owned());
    write_config(&reloaded);
    server
        .wait_for_log("forbidden to watch an allowlisted workload", Duration::from_secs(30))
        .await;
    let log = server.log();
    let line = log
        .lines()
        .find(|l| l.contains("forbidden to watch an allowlisted workload"))
        .unwrap_or_default();
    assert!(
        line.contains("gpu-ops/DaemonSet/dcgm-exporter")
            && line.contains("resources [daemonsets], resourceNames [dcgm-exporter]"),
        "{line}"
    );

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let response = connection.admit(MUTATE, &exporter_pod).await;
        if patch_of(&response).is_none() {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the exporter is still pinned a minute after the reload: {response}\nlog:\n{}",
            server.log()
        );
        sleep(POLL).await;
    }
    assert!(server.log().contains("the RBAC grants it now"));

    // The vGPU pod is a GPU pod now, and admitted: never refused as a pod
    // no node can run while the nodes are listed again.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mutated = connection.mutated(&vgpu_pod(2)).await;
        let response = connection.admit(ENFORCE, &mutated).await;
        let message = response["status"]["message"].as_str().unwrap_or("");
        assert!(!message.contains("never be scheduled"), "{response}");
        if response["allowed"] == true && mutated["spec"]["runtimeClassName"] == "nvidia" {
            assert!(!pinned(&mutated), "{mutated}");
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the vGPU pod is not admitted a minute after the reload: {response}\nlog:\n{}",
            server.log()
        );
        sleep(POLL).await;
    }
    // What the nodes offer of it is known: more than any node has is refused.
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let mutated = connection.mutated(&vgpu_pod(6)).await;
        let response = connection.admit(ENFORCE, &mutated).await;
        let message = response["status"]["message"].as_str().unwrap_or("");
        if message.contains("the biggest node offers 4: it can never be scheduled") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "6 vGPUs on nodes of 4 are not refused: {response}\nlog:\n{}",
            server.log()
        );
        sleep(POLL).await;
    }

    // Removed again: the exporter's watch stops and its pods are pinned.
    write_config(&defaults);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !pinned(&connection.mutated(&exporter_pod).await) {
        assert!(
            Instant::now() < deadline,
            "the exporter is still exempt a minute after its entry was removed; log:\n{}",
            server.log()
        );
        sleep(POLL).await;
    }
    server.wait_for_metric_line(r#"gpu_policy_reload_success{source="config"} 1"#).await;
}
