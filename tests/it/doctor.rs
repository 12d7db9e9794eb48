//! `gpu-policy doctor` against the fake API server: what the real API
//! server suite (`tests/apiserver/doctor.rs`) cannot hold cheaply: a fleet
//! past the read's bounds, read in pages and in part, a list that fails
//! with something other than forbidden; and doctor's reports against the
//! report CRDs' schemas, strictly.

use std::time::UNIX_EPOCH;

use gpu_policy::doctor::diagnose;
use gpu_policy::doctor::inventory::{Inventory, Node, Seen};
use gpu_policy::reports::{self, Outcome, ReportApi, Timestamp};
use serde_json::json;

use crate::support::fake_api::FakeApi;
use crate::support::fleet::{gpu_node, nvidia_runtime_class};
use crate::support::process::gpu_policy_beside;
use crate::support::report_crds;

/// More nodes than the read lists (100 pages of 100).
const NODES: usize = 10_050;

fn doctor_args(kubeconfig: &std::path::Path) -> Vec<String> {
    ["doctor", "--kubeconfig", &kubeconfig.display().to_string(), "-o", "json"]
        .map(str::to_owned)
        .to_vec()
}

#[tokio::test]
async fn a_fleet_past_the_bounds_is_read_in_pages_and_in_part() {
    let api = FakeApi::start().await;
    for i in 0..NODES {
        api.insert(gpu_node(i));
    }
    api.insert(nvidia_runtime_class());
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    let run = gpu_policy_beside(doctor_args(&kubeconfig)).await;
    let value = run.value();
    assert_eq!(run.code, 0, "{value}");
    assert_eq!(value["summary"]["nodes"], 10_000, "{}", value["summary"]);
    assert_eq!(value["summary"]["gpuNodes"], 10_000);
    let truncated: Vec<&serde_json::Value> = value["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|note| note["kind"] == "truncated")
        .collect();
    assert_eq!(truncated.len(), 1, "{}", value["notes"]);
    assert!(
        truncated[0]["message"].as_str().is_some_and(|m| m.contains("of nodes")),
        "{}",
        truncated[0]
    );
    // One request a page, each of 100.
    let pages = api.count_requests("GET", &["/api/v1/nodes?", "limit=100"]);
    assert_eq!(pages, 100, "{:?}", api.requests().len());
}

#[tokio::test]
async fn an_error_other_than_forbidden_fails_the_read() {
    let api = FakeApi::start().await;
    api.insert(gpu_node(0));
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.fail_next("GET", "/apis/node.k8s.io/v1/runtimeclasses", 500, 1);

    let run = gpu_policy_beside(doctor_args(&kubeconfig)).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(run.stdout, "");
    assert!(run.stderr.starts_with("gpu-policy: cannot read the cluster: "), "{run:?}");

    // Forbidden instead: a note, and the other checks run.
    api.fail_next("GET", "/apis/node.k8s.io/v1/runtimeclasses", 403, 1);
    let run = gpu_policy_beside(doctor_args(&kubeconfig)).await;
    let value = run.value();
    assert_eq!(run.code, 0, "{value}");
    assert_eq!(
        value["notes"][0],
        json!({"kind": "forbidden", "message":
            "cannot read runtimeclasses.node.k8s.io (forbidden); skipped: the RuntimeClass checks; grant list runtimeclasses.node.k8s.io"}),
        "{value}"
    );
}

#[tokio::test]
async fn forbidden_nodes_fail_the_read() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());
    api.fail_next("GET", "/api/v1/nodes", 403, 1);
    let run = gpu_policy_beside(doctor_args(&kubeconfig)).await;
    assert_eq!(run.code, 2, "{run:?}");
    assert_eq!(
        run.stderr,
        "gpu-policy: cannot read the cluster: nodes are forbidden to this user; grant list nodes\n"
    );
}

/// A diagnosis with findings of each severity and notes (the DaemonSets
/// forbidden, the default configuration), as a report of
/// each API: what its CRD accepts strictly, the summary adding up.
#[test]
fn doctor_reports_are_what_their_crds_accept() {
    let node = |name: &str, labels: &[(&str, &str)], capacity: &[(&str, u64)]| Node {
        name: name.to_owned(),
        labels: labels.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect(),
        capacity: capacity.iter().map(|(k, v)| ((*k).to_owned(), *v)).collect(),
        runtime_handlers: None,
    };
    let inventory = Inventory {
        nodes: Seen::Complete(vec![
            node("gpu-1", &[("nvidia.com/gpu.present", "true")], &[]),
            node("gpu-2", &[], &[("nvidia.com/gpu", 8)]),
        ]),
        daemon_sets: Seen::Forbidden { rbac: "list daemonsets.apps" },
        ..Inventory::default()
    };
    let diagnosis = diagnose(&inventory);
    let mut documents = Vec::new();
    for api in ReportApi::ALL {
        let report = reports::doctor_report(&diagnosis, api, Timestamp::of(UNIX_EPOCH));
        let outcomes: Vec<Outcome> = report.results.iter().map(|r| r.result).collect();
        assert_eq!(
            outcomes,
            [Outcome::Fail, Outcome::Warn, Outcome::Warn, Outcome::Skip, Outcome::Skip],
            "{api}: {:?}",
            report.results
        );
        assert_eq!(report.summary.total(), report.results.len() as u64);
        assert_eq!(report.metadata.name, "gpu-policy-doctor");
        assert_eq!(report.metadata.namespace, None);
        documents.push(serde_json::to_value(&report).expect("serialises"));
    }
    match report_crds::validate(&documents) {
        Ok(summary) => assert!(summary.ends_with(", 0 problems"), "{summary}"),
        Err(problems) => panic!("the CRDs refuse the reports:\n{problems}"),
    }
}

/// Eleven DaemonSets that look like the device plugin's, in a tenant's
/// namespace: the pods of ten are read, and the note says the rest were
/// not, so that no node's cause rests on pods never listed.
#[tokio::test]
async fn component_daemon_sets_past_the_bound_leave_their_pods_read_in_part() {
    let api = FakeApi::start().await;
    api.insert(gpu_node(0));
    api.insert(nvidia_runtime_class());
    for i in 0..11 {
        api.insert(json!({
            "apiVersion": "apps/v1", "kind": "DaemonSet",
            "metadata": {"name": format!("t{i:02}-nvidia-device-plugin"), "namespace": "tenant"},
            "spec": {"selector": {"matchLabels": {"app": format!("t{i:02}")}}},
            "status": {"desiredNumberScheduled": 0, "numberReady": 0},
        }));
    }
    let dir = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(dir.path());

    let run = gpu_policy_beside(doctor_args(&kubeconfig)).await;
    let value = run.value();
    let truncated: Vec<&str> = value["notes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|note| note["kind"] == "truncated")
        .filter_map(|note| note["message"].as_str())
        .collect();
    assert_eq!(truncated.len(), 1, "{}", value["notes"]);
    assert!(truncated[0].contains("pods"), "{}", truncated[0]);
}
