//! `gpu-policy doctor`, the real binary, against a real API server with a
//! fake GPU fleet: Node objects created with kubectl, their capacity, the
//! DaemonSets' and pods' status set through the status subresource (there
//! is no kubelet or controller manager to set them).
//!
//! Each case's text output is the README's walk-through of it ("GPUs do
//! not show up"): the README shows what the program prints, and
//! `UPDATE_GOLDEN=1` rewrites it.

use serde_json::Value;

use crate::support::control_plane::{ControlPlane, NVIDIA_RUNTIME_CLASS, Webhook, WebhookOptions};
use crate::support::generated_docs::assert_section;
use crate::support::process::{self, Run};
use crate::support::report_crds;

/// The namespace of the device plugin and GFD.
const NVIDIA: &str = "nvidia";

/// GFD's labels of a working GPU node.
const GFD_LABELS: &[(&str, &str)] = &[
    ("nvidia.com/gpu.present", "true"),
    ("nvidia.com/gpu.compute.major", "8"),
    ("nvidia.com/gpu.compute.minor", "0"),
    ("nvidia.com/cuda.driver-version.major", "13"),
];

/// A cluster to build a fleet in.
struct Fleet {
    cluster: ControlPlane,
}

impl Fleet {
    /// A control plane with the `nvidia` namespace, the team namespace
    /// `team-a` opted in (enforce) and gpu-policy's ConfigMap; None when
    /// no control plane is built.
    fn start() -> Option<Self> {
        let cluster = ControlPlane::start()?;
        cluster.namespace(NVIDIA, None);
        cluster.namespace("team-a", Some("enforce"));
        cluster.namespace("gpu-policy", None);
        cluster.apply(
            "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: gpu-policy, namespace: gpu-policy}\n\
             data:\n  config.yaml: |\n    runtimeClassName: nvidia\n",
        );
        Some(Self { cluster })
    }

    /// A Node with `labels` and, in its status, `capacity` (and the same
    /// allocatable).
    fn node(&self, name: &str, labels: &[(&str, &str)], capacity: &[(&str, &str)]) -> &Self {
        let labels: String =
            labels.iter().map(|(key, value)| format!("\n    {key}: \"{value}\"")).collect();
        self.cluster.apply(&format!(
            "apiVersion: v1\nkind: Node\nmetadata:\n  name: {name}\n  labels:\n    kubernetes.io/hostname: {name}{labels}\n"
        ));
        let resources: serde_json::Map<String, Value> =
            [("cpu", "8"), ("memory", "32Gi"), ("pods", "110")]
                .iter()
                .chain(capacity)
                .map(|(k, v)| ((*k).to_owned(), Value::from(*v)))
                .collect();
        let status =
            serde_json::json!({"status": {"capacity": resources, "allocatable": resources}});
        self.patch_status(&["node", name], &status);
        self
    }

    fn patch_status(&self, object: &[&str], status: &Value) {
        let patch = status.to_string();
        let mut args = vec!["patch"];
        args.extend_from_slice(object);
        args.extend_from_slice(&["--subresource=status", "--type=merge", "-p", &patch]);
        self.cluster.kubectl(&args).success();
    }

    /// A DaemonSet in `nvidia` whose pods carry `label`, with `desired`
    /// pods scheduled and `ready` ready.
    fn daemon_set(&self, name: &str, label: (&str, &str), desired: u32, ready: u32) -> &Self {
        let (key, value) = label;
        self.cluster.apply(&format!(
            "apiVersion: apps/v1\nkind: DaemonSet\nmetadata: {{name: {name}, namespace: {NVIDIA}}}\n\
             spec:\n  selector: {{matchLabels: {{{key}: {value}}}}}\n  template:\n    \
             metadata: {{labels: {{{key}: {value}}}}}\n    spec:\n      containers:\n      \
             - {{name: main, image: nvcr.io/nvidia/k8s-device-plugin:v0.17.1}}\n"
        ));
        let status = serde_json::json!({"status": {
            "desiredNumberScheduled": desired, "currentNumberScheduled": desired,
            "numberReady": ready, "numberMisscheduled": 0,
        }});
        self.patch_status(&["daemonset", "-n", NVIDIA, name], &status);
        self
    }

    /// The device plugin's pod on `node`, Ready, without a RuntimeClass.
    fn plugin_pod(&self, node: &str) -> &Self {
        let name = format!("nvidia-device-plugin-{node}");
        self.cluster.apply(&format!(
            "apiVersion: v1\nkind: Pod\nmetadata:\n  name: {name}\n  namespace: {NVIDIA}\n  \
             labels: {{name: nvidia-device-plugin-ds}}\nspec:\n  nodeName: {node}\n  containers:\n  \
             - {{name: main, image: nvcr.io/nvidia/k8s-device-plugin:v0.17.1}}\n"
        ));
        let status = serde_json::json!({"status": {"phase": "Running", "conditions": [
            {"type": "Ready", "status": "True"}]}});
        self.patch_status(&["pod", "-n", NVIDIA, &name], &status);
        self
    }

    /// Both DaemonSets, each with `ready` of `ready` pods ready.
    fn components(&self, ready: u32) -> &Self {
        self.daemon_set(
            "nvidia-device-plugin-daemonset",
            ("name", "nvidia-device-plugin-ds"),
            ready,
            ready,
        )
        .daemon_set(
            "gpu-feature-discovery",
            ("app.kubernetes.io/name", "gpu-feature-discovery"),
            ready,
            ready,
        )
    }

    fn doctor(&self, extra: &[&str]) -> Run {
        let kubeconfig = self.cluster.kubeconfig.display().to_string();
        let mut args = vec!["doctor", "--kubeconfig", &kubeconfig];
        args.extend_from_slice(extra);
        process::gpu_policy(&args, None)
    }
}

/// The findings of `doctor -o json` as (id, cause, objects).
fn findings(run: &Run) -> Vec<(String, String, Vec<String>)> {
    let text = |v: &Value| v.as_str().unwrap_or("").to_owned();
    run.value()["findings"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|f| {
            let objects =
                f["subjects"].as_array().into_iter().flatten().map(|s| text(&s["name"])).collect();
            (text(&f["id"]), text(&f["cause"]), objects)
        })
        .collect()
}

fn finding(id: &str, cause: &str, objects: &[&str]) -> (String, String, Vec<String>) {
    (id.to_owned(), cause.to_owned(), objects.iter().map(|s| (*s).to_owned()).collect())
}

/// The README's block of one case: the command and what it printed.
fn readme_case(case: &str, run: &Run) {
    assert_section(
        "README.md",
        &format!("<!-- doctor:{case}:begin: printed by tests/apiserver/doctor.rs -->\n"),
        &format!("<!-- doctor:{case}:end -->\n"),
        &format!("```console\n$ gpu-policy doctor\n{}```", run.stdout),
        "--test apiserver doctor::",
    );
}

#[test]
fn doctor_reports_a_gpu_node_without_capacity() {
    let Some(fleet) = Fleet::start() else {
        return;
    };
    fleet.cluster.apply(NVIDIA_RUNTIME_CLASS);
    fleet
        .components(2)
        .node("gpu-1", GFD_LABELS, &[("nvidia.com/gpu", "4")])
        .node("gpu-2", &[("nvidia.com/gpu.present", "true")], &[])
        .node("cpu-1", &[], &[])
        .plugin_pod("gpu-1")
        .plugin_pod("gpu-2");

    let json = fleet.doctor(&["-o", "json"]);
    assert_eq!(json.code, 1, "{json:?}");
    assert_eq!(
        findings(&json),
        [finding("no-gpu-capacity", "runtime-not-default", &["gpu-2"])],
        "{}",
        json.stdout
    );
    let text = fleet.doctor(&[]);
    assert_eq!(text.code, 1, "{text:?}");
    assert!(
        text.stdout.contains("nvidia-ctk runtime configure --runtime=containerd --set-as-default"),
        "{}",
        text.stdout
    );
    readme_case("no-gpu-capacity", &text);
}

#[test]
fn doctor_reports_gpu_nodes_without_gfd_labels() {
    let Some(fleet) = Fleet::start() else {
        return;
    };
    fleet.cluster.apply(NVIDIA_RUNTIME_CLASS);
    fleet
        .daemon_set("nvidia-device-plugin-daemonset", ("name", "nvidia-device-plugin-ds"), 2, 2)
        .node("gpu-1", &[], &[("nvidia.com/gpu", "8")])
        .node("gpu-2", &[("nvidia.com/gpu.present", "true")], &[("nvidia.com/gpu", "8")]);

    let json = fleet.doctor(&["-o", "json"]);
    assert_eq!(json.code, 1, "{json:?}");
    assert_eq!(
        findings(&json),
        [finding("gfd-missing", "", &["gpu-1", "gpu-2"])],
        "{}",
        json.stdout
    );
    let text = fleet.doctor(&[]);
    assert!(text.stdout.contains("whenNodesUnlabelled"), "{}", text.stdout);
    readme_case("gfd-missing", &text);
}

#[test]
fn doctor_reports_a_missing_runtime_class() {
    let Some(fleet) = Fleet::start() else {
        return;
    };
    fleet.components(1).node("gpu-1", GFD_LABELS, &[("nvidia.com/gpu", "4")]);

    let json = fleet.doctor(&["-o", "json"]);
    assert_eq!(json.code, 1, "{json:?}");
    assert_eq!(
        findings(&json),
        [finding("runtime-class-missing", "", &["nvidia"])],
        "{}",
        json.stdout
    );
    let text = fleet.doctor(&[]);
    readme_case("runtime-class-missing", &text);
}

#[test]
fn doctor_exits_0_on_a_healthy_fleet_and_2_without_a_server() {
    let Some(fleet) = Fleet::start() else {
        return;
    };
    fleet.cluster.apply(NVIDIA_RUNTIME_CLASS);
    fleet
        .components(2)
        .node("gpu-1", GFD_LABELS, &[("nvidia.com/gpu", "4")])
        .node("gpu-2", GFD_LABELS, &[("nvidia.com/gpu", "4")])
        .node("cpu-1", &[], &[]);

    let json = fleet.doctor(&["-o", "json"]);
    assert_eq!(json.code, 0, "{json:?}");
    let value = json.value();
    assert_eq!(value["healthy"], true, "{value}");
    assert_eq!(value["summary"]["gpuNodes"], 2, "{value}");
    assert_eq!(value["summary"]["optedIn"]["enforce"][0], "team-a", "{value}");
    let text = fleet.doctor(&[]);
    assert_eq!(text.code, 0, "{text:?}");
    readme_case("healthy", &text);

    // The same kubeconfig, its server gone.
    let dir = tempfile::tempdir().expect("tempdir");
    let gone = dir.path().join("gone.kubeconfig");
    let port = crate::support::server::free_port();
    let config = std::fs::read_to_string(&fleet.cluster.kubeconfig)
        .expect("kubeconfig")
        .replace(&fleet.cluster.api_url, &format!("https://127.0.0.1:{port}"));
    std::fs::write(&gone, config).expect("write kubeconfig");
    let run = process::gpu_policy(&["doctor", "--kubeconfig", &gone.display().to_string()], None);
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "", "{run:?}");
    assert!(run.stderr.contains("cannot reach the API server"), "{run:?}");
}

#[test]
fn doctor_writes_its_report_beside_audits() {
    let Some(fleet) = Fleet::start() else {
        return;
    };
    let cluster = &fleet.cluster;
    for crd in report_crds::files() {
        cluster.kubectl(&["apply", "--server-side", "-f", &crd.display().to_string()]).success();
    }
    cluster
        .kubectl(&[
            "wait",
            "--for=condition=Established",
            "--timeout=30s",
            "crd/clusterreports.openreports.io",
            "crd/reports.openreports.io",
        ])
        .success();
    fleet.components(1).node("gpu-1", &[("nvidia.com/gpu.present", "true")], &[]);

    let run = fleet.doctor(&["--write-report", "--report-api", "openreports"]);
    assert_eq!(run.code, 0, "{run:?}");
    assert_eq!(
        run.lines(),
        ["wrote ClusterReport gpu-policy-doctor: 1 fail, 1 warn, 0 error, 1 skip, 0 pass"],
        "{run:?}"
    );
    let report = cluster.get(&["clusterreports.v1alpha1.openreports.io", "gpu-policy-doctor"]);
    let rules: Vec<(&str, &str)> = report["results"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|r| (r["result"].as_str().unwrap_or(""), r["rule"].as_str().unwrap_or("")))
        .collect();
    assert_eq!(
        rules,
        [("fail", "no-gpu-capacity"), ("warn", "runtime-class-missing"), ("skip", ""),],
        "{report}"
    );
    let result = &report["results"][0];
    assert_eq!(result["policy"], "gpu-policy-doctor");
    assert_eq!(result["resources"][0]["kind"], "Node");
    assert_eq!(result["resources"][0]["name"], "gpu-1");
    assert_eq!(result["properties"]["cause"], "device-plugin-not-on-node");
    assert!(
        result["properties"]["fix"].as_str().is_some_and(|fix| fix.contains("nodeSelector")),
        "{result}"
    );

    // audit writes and cleans up its own reports, and leaves doctor's.
    let kubeconfig = cluster.kubeconfig.display().to_string();
    let audit = process::gpu_policy(
        &[
            "audit",
            "-A",
            "--kubeconfig",
            &kubeconfig,
            "--write-reports",
            "--report-api",
            "openreports",
        ],
        None,
    );
    assert_eq!(audit.code, 0, "{audit:?}");
    cluster
        .kubectl(&["get", "clusterreports.v1alpha1.openreports.io", "gpu-policy-doctor"])
        .success();
}

#[test]
fn doctor_reads_everything_it_checks_as_the_webhooks_service_account() {
    let Some(fleet) = Fleet::start() else {
        return;
    };
    let cluster = &fleet.cluster;
    let manifests = cluster.manifests(&["--webhook-url", "https://127.0.0.1:9"]);
    cluster.apply(&manifests);
    cluster.apply(NVIDIA_RUNTIME_CLASS);
    fleet.components(1).node("gpu-1", GFD_LABELS, &[("nvidia.com/gpu", "4")]);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = cluster.service_account_kubeconfig(dir.path(), "gpu-policy", "gpu-policy");

    let run = process::gpu_policy(
        &["doctor", "--kubeconfig", &kubeconfig.display().to_string(), "-o", "json"],
        None,
    );
    let value = run.value();
    assert_eq!(value["notes"], serde_json::json!([]), "{value}");
    assert_eq!(value["findings"], serde_json::json!([]), "{value}");
    assert_eq!(run.code, 0, "{run:?}");
}

/// The installed webhook's caBundle, trusted while the server keeps it,
/// then replaced by another CA's while the server is stopped.
#[tokio::test]
async fn doctor_checks_the_webhooks_ca_bundle() {
    let Some(fleet) = Fleet::start() else {
        return;
    };
    let cluster = &fleet.cluster;
    let mut webhook = Webhook::install(cluster, WebhookOptions::default()).await;
    fleet.components(1).node("gpu-1", GFD_LABELS, &[("nvidia.com/gpu", "4")]);
    let doctor = |fleet: &Fleet| {
        let kubeconfig = fleet.cluster.kubeconfig.display().to_string();
        process::gpu_policy_beside(
            ["doctor", "--kubeconfig", &kubeconfig, "-o", "json"].map(str::to_owned).to_vec(),
        )
    };
    let trusted = doctor(&fleet).await;
    assert_eq!(trusted.code, 0, "{trusted:?}");

    webhook.stop().await;
    let other = gpu_policy::certs::generate_ca(0, 36_500).unwrap_or_else(|e| panic!("{e}"));
    let bundle = base64::Engine::encode(&base64::engine::general_purpose::STANDARD, &other.cert);
    let patch = serde_json::json!([
        {"op": "replace", "path": "/webhooks/0/clientConfig/caBundle", "value": bundle}
    ])
    .to_string();
    cluster
        .kubectl(&[
            "patch",
            "mutatingwebhookconfiguration",
            "gpu-policy",
            "--type=json",
            "-p",
            &patch,
        ])
        .success();
    let mismatch = doctor(&fleet).await;
    assert_eq!(mismatch.code, 1, "{mismatch:?}");
    let value = mismatch.value();
    assert_eq!(
        findings(&mismatch),
        [finding("ca-bundle-mismatch", "", &["gpu-policy"])],
        "{value}"
    );
    let evidence = value["findings"][0]["evidence"].to_string();
    assert!(
        evidence.contains("MutatingWebhookConfiguration") && !evidence.contains("Validating"),
        "{evidence}"
    );
}
