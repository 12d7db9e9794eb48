//! `gpu-policy audit --write-reports` against a real API server with the
//! upstream report CRDs installed (`tests/crds/`): the reports it applies
//! are stored as written (nothing pruned), rewritten when a finding goes,
//! deleted when the namespace has nothing left, and need no more than the
//! RBAC docs/operations.md lists.

use serde_json::{Value, json};

use crate::support::chart;
use crate::support::control_plane::ControlPlane;
use crate::support::process::{self, Run};
use crate::support::report_crds::{self, Row, row, rows};

/// In namespace `legacy` (enforce), created before it opted in: a pod
/// pinned as the webhook would have pinned it (nothing to say), a CPU pod
/// of a CUDA image (visible-devices would pin it) and a pod with a
/// hostPath to a GPU device node (device-paths denies it).
const PODS: &str = "\
apiVersion: v1
kind: Pod
metadata: {name: pinned, namespace: legacy}
spec:
  containers:
  - name: app
    image: busybox
    env: [{name: NVIDIA_VISIBLE_DEVICES, value: void}]
---
apiVersion: v1
kind: Pod
metadata: {name: notebook, namespace: legacy}
spec:
  containers:
  - {name: nb, image: 'nvidia/cuda:12.6.3-base-ubuntu24.04'}
---
apiVersion: v1
kind: Pod
metadata: {name: devices, namespace: legacy}
spec:
  containers:
  - name: app
    image: busybox
    env: [{name: NVIDIA_VISIBLE_DEVICES, value: void}]
    volumeMounts: [{name: dev, mountPath: /dev/nvidia0}]
  volumes:
  - {name: dev, hostPath: {path: /dev/nvidia0}}
";

/// The auditor's ServiceAccount and binding: it runs with exactly the
/// ClusterRole the chart gives its reports CronJob ([`cronjob_rules`]).
const AUDITOR: &str = "\
apiVersion: v1
kind: ServiceAccount
metadata: {name: auditor, namespace: legacy}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: gpu-policy-auditor}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: gpu-policy-auditor}
subjects:
- {kind: ServiceAccount, name: auditor, namespace: legacy}
";

/// The chart's ClusterRole for its reports CronJob (`reports.api: auto`,
/// both APIs), renamed `gpu-policy-auditor`: what audit needs, and no more.
fn cronjob_rules() -> String {
    let objects = chart::render(&json!({"reports": {"enabled": true, "api": "auto"}}));
    let mut role = objects
        .into_iter()
        .find(|o| o["kind"] == "ClusterRole" && o["metadata"]["name"] == "gpu-policy-reports")
        .unwrap_or_else(|| panic!("the chart renders no reports ClusterRole"));
    role["metadata"] = json!({"name": "gpu-policy-auditor"});
    role.to_string()
}

/// The namespaced report kinds as kubectl names them, at the version
/// gpu-policy writes.
const OPENREPORTS: &str = "reports.v1alpha1.openreports.io";
const POLICYREPORTS: &str = "policyreports.v1alpha2.wgpolicyk8s.io";

fn audit(kubeconfig: &str, api: &str) -> Run {
    process::gpu_policy(
        &["audit", "-A", "--kubeconfig", kubeconfig, "--write-reports", "--report-api", api],
        None,
    )
}

/// The rows of a report's results, sorted.
fn sorted_rows(report: &Value) -> Vec<Row> {
    let mut rows = rows(report);
    rows.sort();
    rows
}

#[test]
fn audit_writes_both_report_apis_and_keeps_them_current() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    for crd in report_crds::files() {
        let path = crd.display().to_string();
        cluster.kubectl(&["apply", "--server-side", "-f", &path]).success();
    }
    for name in [
        "reports.openreports.io",
        "clusterreports.openreports.io",
        "policyreports.wgpolicyk8s.io",
        "clusterpolicyreports.wgpolicyk8s.io",
    ] {
        cluster
            .kubectl(&[
                "wait",
                "--for=condition=Established",
                "--timeout=30s",
                &format!("crd/{name}"),
            ])
            .success();
    }
    // No webhook: stored as sent, then opted in.
    cluster.namespace("legacy", Some("enforce"));
    cluster.create(PODS).success();
    cluster.apply(&cronjob_rules());
    cluster.apply(AUDITOR);
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig =
        cluster.service_account_kubeconfig(dir.path(), "legacy", "auditor").display().to_string();
    let expected = [
        row("fail", "device-paths", "devices"),
        row("pass", "", "pinned"),
        row("warn", "visible-devices", "notebook"),
    ];

    for (api, resource, kind) in
        [("openreports", OPENREPORTS, "Report"), ("wgpolicyk8s", POLICYREPORTS, "PolicyReport")]
    {
        let run = audit(&kubeconfig, api);
        assert_eq!(run.code, 0, "{api}: {run:?}");
        assert_eq!(
            run.lines(),
            [format!("wrote {kind} legacy/gpu-policy: 1 fail, 1 warn, 0 error, 0 skip, 1 pass")],
            "{api}: {run:?}"
        );
        let report =
            cluster.get(&[resource, "-n", "legacy", "gpu-policy", "--show-managed-fields"]);
        assert_eq!(sorted_rows(&report), expected, "{api}: {report}");
        assert_eq!(
            report["summary"],
            serde_json::json!({"pass": 1, "fail": 1, "warn": 1, "error": 0, "skip": 0}),
            "{api}"
        );
        // Stored as written: nothing pruned by the schema.
        let fail = report["results"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|r| r["result"] == "fail")
            .cloned()
            .unwrap_or(Value::Null);
        for field in ["source", "policy", "rule", "severity", "category", "message", "timestamp"] {
            assert!(!fail[field].is_null(), "{api}: {field} kept: {fail}");
        }
        assert_eq!(fail["severity"], "high", "{api}");
        assert_eq!(fail["properties"]["finding"], "violation", "{api}");
        assert!(fail["resources"][0]["uid"].is_string(), "{api}: {fail}");
        assert_eq!(report["scope"]["kind"], "Namespace", "{api}");
        assert_eq!(report["metadata"]["labels"]["app.kubernetes.io/managed-by"], "gpu-policy");
        let managers: Vec<&Value> = report["metadata"]["managedFields"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|m| &m["manager"])
            .collect();
        assert_eq!(managers, ["gpu-policy-audit"], "{api}: one applier");
    }
    let open = cluster.get(&[OPENREPORTS, "-n", "legacy", "gpu-policy"]);
    assert_eq!(open["source"], "gpu-policy", "OpenReports' report-level source");

    // The hostPath pod goes: the next report has no fail.
    cluster.kubectl(&["delete", "pod", "devices", "-n", "legacy", "--wait=false"]).success();
    cluster.eventually("the pod gone", || {
        cluster.kubectl(&["get", "pod", "devices", "-n", "legacy"]).code != 0
    });
    let run = audit(&kubeconfig, "openreports");
    assert_eq!(run.code, 0, "{run:?}");
    let report = cluster.get(&[OPENREPORTS, "-n", "legacy", "gpu-policy"]);
    assert_eq!(
        sorted_rows(&report),
        [row("pass", "", "pinned"), row("warn", "visible-devices", "notebook")]
    );

    // Nothing left: the report goes too (the PolicyReport stays: the other
    // API is never touched).
    cluster.kubectl(&["delete", "pods", "--all", "-n", "legacy", "--wait=false"]).success();
    cluster.eventually("the pods gone", || {
        cluster.kubectl(&["get", "pods", "-n", "legacy", "-o", "name"]).stdout.trim().is_empty()
    });
    let run = audit(&kubeconfig, "openreports");
    assert_eq!(
        run.lines(),
        ["deleted Report legacy/gpu-policy: no audited object left"],
        "{run:?}"
    );
    let listed = cluster.get(&[OPENREPORTS, "-n", "legacy"]);
    assert_eq!(listed["items"], serde_json::json!([]), "{listed}");
    let kept = cluster.get(&[POLICYREPORTS, "-n", "legacy", "gpu-policy"]);
    assert_eq!(kept["summary"]["fail"], 1);
}
