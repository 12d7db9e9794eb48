//! A pod's own updates on a real API server (docs/policy.md, "Pod
//! updates"): the second `kubectl apply` of a pinned bare pod, client-side
//! and server-side, stores nothing new; `kubectl set image` is held to the
//! bound node's compute capability; the webhook's annotations survive
//! `kubectl annotate --overwrite`; label and annotation updates never reach
//! the webhook (its `matchConditions`), counted by its metrics; a sidecar
//! injector's webhook that changes the pod after gpu-policy leaves nothing
//! written twice; a Deployment's image change is warned.
//!
//! No kubelet and no scheduler run: the Nodes are created with kubectl,
//! their capacity written through the status subresource, and the pods are
//! bound by `spec.nodeName` at creation.

use serde_json::Value;

use crate::support::control_plane::{ControlPlane, Webhook, WebhookOptions, denial};
use crate::support::late_webhook::LateWebhook;
use crate::support::process::Run;

const NAMESPACE: &str = "ml";
const CUDA_13: &str = "nvidia/cuda:13.0.1-base-ubuntu24.04";

/// A bare pod as its author wrote it: a GPU container with the author's
/// zone affinity, and a sidecar whose author asked for every card.
fn pod(name: &str, node: Option<&str>) -> String {
    let node = node.map(|node| format!("  nodeName: {node}\n")).unwrap_or_default();
    format!(
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {NAMESPACE}\nspec:\n\
         {node}  containers:\n  - name: train\n    image: nvidia/cuda:12.6.3-base-ubuntu24.04\n    \
         resources:\n      limits:\n        nvidia.com/gpu: 1\n  - name: sidecar\n    \
         image: busybox\n    env:\n    - name: NVIDIA_VISIBLE_DEVICES\n      value: all\n  \
         affinity:\n    nodeAffinity:\n      requiredDuringSchedulingIgnoredDuringExecution:\n        \
         nodeSelectorTerms:\n        - matchExpressions:\n          - key: zone\n            \
         operator: In\n            values: [a]\n"
    )
}

/// A GPU node whose GFD labels say compute capability `major.minor`.
fn gpu_node(cluster: &ControlPlane, name: &str, major: u32, minor: u32) {
    cluster
        .create(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    \
             nvidia.com/gpu.compute.major: \"{major}\"\n    nvidia.com/gpu.compute.minor: \
             \"{minor}\"\n    nvidia.com/cuda.driver-version.major: \"580\"\n"
        ))
        .success();
    cluster
        .kubectl(&[
            "patch",
            "node",
            name,
            "--subresource=status",
            "--type=merge",
            "-p",
            r#"{"status":{"capacity":{"nvidia.com/gpu":"4"},"allocatable":{"nvidia.com/gpu":"4"}}}"#,
        ])
        .success();
}

fn stored(cluster: &ControlPlane, name: &str) -> Value {
    cluster.get(&["pod", "-n", NAMESPACE, name])
}

/// Pod UPDATEs the webhook answered so far, on every endpoint.
async fn pod_updates_answered(webhook: &Webhook) -> u64 {
    webhook
        .server
        .metrics()
        .await
        .lines()
        .filter(|line| {
            line.starts_with("gpu_policy_admission_requests_total{")
                && line.contains("kind=\"Pod\"")
                && line.contains("operation=\"UPDATE\"")
        })
        .filter_map(|line| line.rsplit(' ').next()?.parse::<u64>().ok())
        .sum()
}

fn set_image(cluster: &ControlPlane, pod: &str, image: &str, dry_run: bool) -> Run {
    let assignment = format!("train={image}");
    let mut args = vec!["set", "image", "-n", NAMESPACE, "pod", pod, assignment.as_str()];
    if dry_run {
        args.push("--dry-run=server");
    }
    cluster.kubectl(&args)
}

#[tokio::test]
async fn pod_updates_are_transparent_and_checked() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    cluster.namespace(NAMESPACE, Some("enforce"));
    webhook.wait_effective(&cluster, NAMESPACE);
    gpu_node(&cluster, "old-gpu", 6, 0);
    gpu_node(&cluster, "new-gpu", 8, 0);

    // The second apply of a pinned bare pod: client-side, then server-side.
    for (name, apply) in [
        ("trainer", vec!["apply", "-f", "-"]),
        ("trainer-ssa", vec!["apply", "--server-side", "-f", "-"]),
    ] {
        let manifest = pod(name, Some("old-gpu"));
        cluster.kubectl_stdin(&apply, Some(&manifest)).success();
        let first = stored(&cluster, name);
        assert_eq!(first["spec"]["containers"][1]["env"][0]["value"], "void", "{first}");
        assert_eq!(first["spec"]["runtimeClassName"], "nvidia", "{first}");
        let mut dry_run = apply.clone();
        dry_run.insert(1, "--dry-run=server");
        cluster.kubectl_stdin(&dry_run, Some(&manifest)).success();
        let again = cluster.kubectl_stdin(&apply, Some(&manifest));
        assert_eq!(again.code, 0, "{name}: {}", again.stderr);
        let second = stored(&cluster, name);
        assert_eq!(
            second["metadata"]["resourceVersion"], first["metadata"]["resourceVersion"],
            "{name}: the second apply stored something new:\n{first}\n{second}"
        );
        assert_eq!(second["spec"], first["spec"]);
    }

    // The webhook's annotations survive an overwrite.
    let before = stored(&cluster, "trainer");
    let mutations = before["metadata"]["annotations"]["gpu-policy.io/mutations"].clone();
    assert!(mutations.as_str().is_some_and(|m| m.contains("visible-devices")), "{before}");
    let updates = pod_updates_answered(&webhook).await;
    cluster
        .kubectl(&[
            "annotate",
            "--overwrite",
            "-n",
            NAMESPACE,
            "pod/trainer",
            "gpu-policy.io/mutations=",
        ])
        .success();
    assert_eq!(
        stored(&cluster, "trainer")["metadata"]["annotations"]["gpu-policy.io/mutations"],
        mutations
    );
    assert!(
        pod_updates_answered(&webhook).await > updates,
        "the webhook was called for its own annotation"
    );

    // Five label and annotation updates by hand: no webhook call.
    let updates = pod_updates_answered(&webhook).await;
    for change in [
        vec!["label", "-n", NAMESPACE, "pod/trainer", "team=vision"],
        vec!["label", "-n", NAMESPACE, "pod/trainer", "--overwrite", "team=speech"],
        vec!["label", "-n", NAMESPACE, "pod/trainer", "team-"],
        vec!["annotate", "-n", NAMESPACE, "pod/trainer", "owner=alice"],
        vec!["annotate", "-n", NAMESPACE, "pod/trainer", "--overwrite", "owner=bob"],
    ] {
        cluster.kubectl(&change).success();
    }
    assert_eq!(pod_updates_answered(&webhook).await, updates);
    assert_eq!(stored(&cluster, "trainer")["metadata"]["annotations"]["owner"], "bob");

    // An image update below the bound node's compute capability is denied,
    // once the webhook's cache has the node; one above it is allowed.
    cluster.eventually("the webhook's node cache has old-gpu", || {
        denial(&set_image(&cluster, "trainer", CUDA_13, true)).is_some()
    });
    let refused = set_image(&cluster, "trainer", CUDA_13, false);
    let message = denial(&refused).unwrap_or_else(|| panic!("denied: {}", refused.stderr));
    for needle in ["\"train\"", CUDA_13, "7.5", "node old-gpu", "6.0"] {
        assert!(message.contains(needle), "{needle}: {message}");
    }
    assert_eq!(
        stored(&cluster, "trainer")["spec"]["containers"][0]["image"],
        "nvidia/cuda:12.6.3-base-ubuntu24.04"
    );
    cluster
        .kubectl_stdin(&["apply", "-f", "-"], Some(&pod("trainer-new", Some("new-gpu"))))
        .success();
    set_image(&cluster, "trainer-new", CUDA_13, false).success();
    assert_eq!(stored(&cluster, "trainer-new")["spec"]["containers"][0]["image"], CUDA_13);
}

/// A sidecar injector's webhook, called after gpu-policy's, adds a
/// container that asks for every card: the API server calls gpu-policy
/// again, which pins it, and nothing gpu-policy wrote is there twice.
#[tokio::test]
async fn reinvocation_leaves_nothing_duplicated() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    cluster.namespace(NAMESPACE, Some("enforce"));
    webhook.wait_effective(&cluster, NAMESPACE);
    let late = LateWebhook::start();
    cluster.apply(&late.configuration(NAMESPACE));
    let mut created = Value::Null;
    cluster.eventually("the injector adds its container", || {
        let _ =
            cluster.kubectl(&["delete", "pod", "-n", NAMESPACE, "trainer", "--ignore-not-found"]);
        let run = cluster.create(&pod("trainer", None));
        created = if run.code == 0 { run.value() } else { Value::Null };
        created["spec"]["containers"].as_array().is_some_and(|c| c.len() == 3)
    });
    let containers = created["spec"]["containers"].as_array().cloned().unwrap_or_default();
    for container in &containers {
        let name = &container["name"];
        let entries: Vec<&Value> = container["env"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|e| e["name"] == "NVIDIA_VISIBLE_DEVICES")
            .collect();
        if *name == "train" {
            assert!(entries.is_empty(), "{created}");
        } else {
            assert_eq!(entries.len(), 1, "{name}: {created}");
            assert_eq!(entries[0]["value"], "void", "{name}: {created}");
        }
    }
    let terms = &created["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
        ["nodeSelectorTerms"];
    let mut texts: Vec<String> =
        terms.as_array().into_iter().flatten().map(Value::to_string).collect();
    let count = texts.len();
    texts.sort();
    texts.dedup();
    assert_eq!(texts.len(), count, "a term twice: {terms}");
    let mutations =
        created["metadata"]["annotations"]["gpu-policy.io/mutations"].as_str().unwrap_or("");
    let mut rules: Vec<&str> = mutations.split(',').collect();
    let listed = rules.len();
    rules.sort_unstable();
    rules.dedup();
    assert_eq!(rules.len(), listed, "{mutations}");
    assert!(mutations.contains("visible-devices"), "{mutations}");
}

const DEPLOYMENT: &str = "apiVersion: apps/v1\nkind: Deployment\nmetadata:\n  name: trainer\n  \
    namespace: ml\nspec:\n  selector:\n    matchLabels:\n      app: trainer\n  template:\n    \
    metadata:\n      labels:\n        app: trainer\n    spec:\n      containers:\n      - name: train\n        \
    image: nvidia/cuda:12.6.3-base-ubuntu24.04\n        resources:\n          limits:\n            \
    nvidia.com/gpu: 1\n";

/// A Deployment's image changed to a CUDA 13 image: the update is warned
/// with what its new pods will get, and a pod made from its new template
/// (as its ReplicaSet would) gets the new floor.
#[tokio::test]
async fn a_deployments_image_change_is_warned_and_its_new_pods_get_the_floor() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    cluster.namespace(NAMESPACE, Some("enforce"));
    webhook.wait_effective(&cluster, NAMESPACE);
    cluster.kubectl_stdin(&["apply", "-f", "-"], Some(DEPLOYMENT)).success();
    let changed = cluster
        .kubectl(&[
            "set",
            "image",
            "-n",
            NAMESPACE,
            "deployment/trainer",
            &format!("train={CUDA_13}"),
        ])
        .success();
    assert!(
        changed.stderr.lines().any(|line| line.starts_with("Warning: gpu-policy: [compute-affinity] pods will require GPU compute capability >= 7.5")),
        "{}",
        changed.stderr
    );
    let template =
        cluster.get(&["deployment", "-n", NAMESPACE, "trainer"])["spec"]["template"].clone();
    let mut pod = serde_json::json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "trainer-abc12", "namespace": NAMESPACE}, "spec": template["spec"]});
    pod["metadata"]["labels"] = template["metadata"]["labels"].clone();
    let created = cluster.create(&pod.to_string()).success().value();
    let terms = created["spec"]["affinity"]["nodeAffinity"]
        ["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
        .to_string();
    assert!(terms.contains(r#""operator":"Gt","values":["7"]"#), "{terms}");
    assert!(terms.contains(r#""operator":"Gt","values":["4"]"#), "{terms}");
}
