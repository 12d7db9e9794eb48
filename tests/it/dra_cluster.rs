//! Dynamic Resource Allocation in cluster mode, against the fake API
//! server: pods' claims resolve from the watch caches of ResourceClaims,
//! ResourceClaimTemplates and DeviceClasses, a DeviceClass counts by its
//! selector, a claim's allocation and owner and the NVIDIA ResourceSlices
//! are kept and followed, one Pod's metadata is read within a budget, and
//! a cluster that serves DRA only as `resource.k8s.io/v1beta1` (Kubernetes
//! 1.32 and 1.33) is read in that version, and a cluster without DRA is
//! ready with every claim unknown.

use std::sync::Arc;
use std::time::Duration;

use crate::support::fake_api::dra::{
    NVIDIA_DRIVER, allocated, claim_for_pod, gpu, mig, resource_slice, vfio,
};
use crate::support::fake_api::{FakeApi, eventually, watching};
use gpu_policy::admission::Mode;
use gpu_policy::admission::checker::{Checker, ObjectReport, mutated};
use gpu_policy::cluster::{ClusterCache, Source};
use gpu_policy::policy::{ClaimFacts, ClusterFacts, RuleId};
use gpu_policy::settings::Settings;
use serde_json::{Value, json};

const WAIT: Duration = Duration::from_secs(15);

const DRA_SOURCES: [Source; 4] = [
    Source::ResourceClaims,
    Source::ResourceClaimTemplates,
    Source::DeviceClasses,
    Source::ResourceSlices,
];

pub fn template(name: &str, class: &str, count: u64) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": name, "namespace": "ml"},
           "spec": {"spec": {"devices": {"requests": [
               {"name": "gpu", "exactly": {"deviceClassName": class, "count": count}}]}}}})
}

fn claim(name: &str, class: &str) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
           "metadata": {"name": name, "namespace": "ml"},
           "spec": {"devices": {"requests": [
               {"name": "gpu", "exactly": {"deviceClassName": class}}]}}})
}

/// A pod in `ml` whose container `ctr` uses the template `template`, next
/// to a container `sidecar` that uses no claim.
pub fn claimed_pod(name: &str, template: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "namespace": "ml"},
           "spec": {"resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                    "containers": [
                        {"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}},
                        {"name": "sidecar", "image": "busybox"}]}})
}

fn seeded(api: &FakeApi) {
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": "ml", "labels": {"gpu-policy.io/mode": "enforce"}}}));
    api.insert(json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"}, "handler": "nvidia"}));
}

async fn started(api: &FakeApi) -> Arc<ClusterCache> {
    watching(api, &Settings::default()).await.0
}

/// The pod's report in enforce mode, its claims resolved by `cache`.
fn admit(pod: &Value, cache: &ClusterCache) -> ObjectReport {
    Checker::new(&Settings::default(), Mode::Enforce, "ml")
        .with_cluster(cache as &dyn ClusterFacts)
        .check(pod)
}

/// The containers that end up with `NVIDIA_VISIBLE_DEVICES=void`.
pub fn pinned(pod: &Value, report: &ObjectReport) -> Vec<String> {
    let after = mutated(pod, report).unwrap_or_else(|e| panic!("patch: {e}"));
    after["spec"]["containers"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| {
            c["env"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|e| e["name"] == "NVIDIA_VISIBLE_DEVICES" && e["value"] == "void")
        })
        .filter_map(|c| c["name"].as_str().map(str::to_owned))
        .collect()
}

fn unresolved(report: &ObjectReport) -> bool {
    report.warnings.iter().any(|w| w.contains("unresolved"))
}

#[tokio::test(flavor = "multi_thread")]
async fn templates_and_claims_resolve_from_the_caches() {
    let api = FakeApi::start().await;
    seeded(&api);
    api.insert(template("one-gpu", "gpu.nvidia.com", 1));
    api.insert(template("six-gpus", "gpu.nvidia.com", 6));
    api.insert(claim("shared-mig", "mig.nvidia.com"));
    let cache = started(&api).await;

    // A template and a shared claim, the reserved runtime class named.
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "trainer", "namespace": "ml"},
        "spec": {"runtimeClassName": "nvidia",
                 "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                                    {"name": "mig", "resourceClaimName": "shared-mig"}],
                 "containers": [
                     {"name": "ctr", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "gpu"}]}},
                     {"name": "mig-user", "image": "ubuntu:22.04", "resources": {"claims": [{"name": "mig"}]}},
                     {"name": "sidecar", "image": "busybox"}]}});
    let report = admit(&pod, &cache);
    assert!(report.allowed, "{report:#?}");
    assert!(!report.violations.iter().any(|v| v.rule == RuleId::RuntimeClass), "{report:#?}");
    assert!(!unresolved(&report), "{report:#?}");
    assert_eq!(pinned(&pod, &report), vec!["sidecar"]);

    // 6 GPUs claimed plus 4 from the device plugin: 10, above 8.
    let ten = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "ten", "namespace": "ml"},
        "spec": {"resourceClaims": [{"name": "gpus", "resourceClaimTemplateName": "six-gpus"}],
                 "containers": [
                     {"name": "dra", "image": "x", "resources": {"claims": [{"name": "gpus"}]}},
                     {"name": "plugin", "image": "x", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}});
    let report = admit(&ten, &cache);
    assert!(!report.allowed, "{report:#?}");
    let messages: Vec<&str> = report.violations.iter().map(|v| v.message.as_str()).collect();
    assert!(
        messages.iter().any(|m| m.contains("4 nvidia.com/gpu")
            && m.contains("6 GPUs through resource claims")
            && m.contains("maximum of 8 per pod")),
        "{messages:#?}"
    );

    // What the caches keep, and their health.
    let snapshot = cache.snapshot();
    assert_eq!(snapshot.dra.templates.len(), 2);
    assert_eq!(snapshot.dra.claims.len(), 1);
    for source in DRA_SOURCES {
        assert!(!cache.is_stale(source), "{}", source.as_str());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn claims_follow_watch_events() {
    let api = FakeApi::start().await;
    seeded(&api);
    let cache = started(&api).await;
    let pod = claimed_pod("late", "one-gpu");
    let first = admit(&pod, &cache);
    assert!(first.allowed && unresolved(&first), "{first:#?}");
    assert_eq!(pinned(&pod, &first), vec!["ctr", "sidecar"]);

    api.insert(template("one-gpu", "gpu.nvidia.com", 1));
    eventually("the new template", WAIT, || {
        let report = admit(&pod, &cache);
        !unresolved(&report) && pinned(&pod, &report) == ["sidecar"]
    })
    .await;

    api.remove("resource.k8s.io/v1", "ResourceClaimTemplate", Some("ml"), "one-gpu");
    eventually("the template's deletion", WAIT, || unresolved(&admit(&pod, &cache))).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_class_counts_by_its_selector_even_when_it_comes_later() {
    let api = FakeApi::start().await;
    seeded(&api);
    api.insert(template("h100", "h100.example.com", 2));
    let cache = started(&api).await;
    let pod = claimed_pod("big", "h100");

    // Known template, unknown class: no GPU claim, both containers pinned.
    let before = admit(&pod, &cache);
    assert!(!unresolved(&before), "{before:#?}");
    assert_eq!(pinned(&pod, &before), vec!["ctr", "sidecar"]);

    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "h100.example.com"},
        "spec": {"selectors": [{"cel": {"expression":
            "device.driver == \"gpu.nvidia.com\" && device.attributes[\"gpu.nvidia.com\"].productName.contains(\"H100\")"}}]}}));
    eventually("the DeviceClass", WAIT, || pinned(&pod, &admit(&pod, &cache)) == ["sidecar"]).await;
    assert!(cache.is_gpu_device_class("h100.example.com"));

    // A class whose selector names another driver hands out no GPU.
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "imex.example.com"},
        "spec": {"selectors": [{"cel": {"expression": "device.driver == 'compute-domain.nvidia.com'"}}]}}));
    api.insert(template("imex", "imex.example.com", 1));
    let imex = claimed_pod("imex", "imex");
    eventually("the imex template", WAIT, || {
        let report = admit(&imex, &cache);
        !unresolved(&report) && pinned(&imex, &report) == ["ctr", "sidecar"]
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_without_dra_is_ready_and_claims_stay_unknown() {
    let api = FakeApi::start().await;
    api.unregister_group_version("resource.k8s.io", "v1");
    seeded(&api);
    let cache = started(&api).await;
    for source in DRA_SOURCES {
        assert!(!cache.is_stale(source), "{}", source.as_str());
        assert_eq!(cache.watched(source), (false, ""), "{}", source.as_str());
    }
    assert_eq!(cache.watched(Source::Nodes), (true, "v1"));
    let pod = claimed_pod("dra", "one-gpu");
    let report = admit(&pod, &cache);
    assert!(report.allowed && unresolved(&report), "{report:#?}");
    assert_eq!(pinned(&pod, &report), vec!["ctr", "sidecar"]);

    // Asked once, not polled: no watch of resource.k8s.io is attempted.
    tokio::time::sleep(Duration::from_secs(2)).await;
    let asked: Vec<String> = api
        .requests()
        .into_iter()
        .map(|(_, path)| path)
        .filter(|path| path.starts_with("/apis/resource.k8s.io"))
        .collect();
    assert_eq!(asked.len(), 1, "{asked:#?}");
}

/// Kubernetes 1.32 and 1.33 with DRA on serve `resource.k8s.io/v1beta1`:
/// its flat requests resolve, and its slices' `basic.attributes` are read.
#[tokio::test(flavor = "multi_thread")]
async fn a_cluster_serving_dra_as_v1beta1_is_read_in_that_version() {
    let api = FakeApi::start().await;
    api.serve_dra_as("v1beta1");
    seeded(&api);
    api.insert(json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": "one-gpu", "namespace": "ml"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "gpu", "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}]}}}}));
    api.insert(json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceSlice",
        "metadata": {"name": "node-1-gpu.nvidia.com-abcde"},
        "spec": {"driver": NVIDIA_DRIVER, "nodeName": "node-1",
            "pool": {"name": "node-1", "generation": 1, "resourceSliceCount": 1},
            "devices": [{"name": "gpu-0", "basic": {"attributes": {
                "cudaComputeCapability": {"version": "8.0.0"}}}}]}}));
    let cache = started(&api).await;
    assert_eq!(cache.dra_version(), Some(Some("v1beta1")));
    assert_eq!(cache.watched(Source::ResourceClaims), (true, "v1beta1"));

    let pod = claimed_pod("trainer", "one-gpu");
    let report = admit(&pod, &cache);
    assert!(report.allowed && !unresolved(&report), "{report:#?}");
    assert_eq!(pinned(&pod, &report), ["sidecar"]);
    assert_eq!(capability(&cache, "node-1", "gpu-0").as_deref(), Some("8.0.0"));
    let asked_v1 = api
        .requests()
        .into_iter()
        .filter(|(_, path)| path.starts_with("/apis/resource.k8s.io/v1/"))
        .count();
    assert_eq!(asked_v1, 0);
}

/// The compute capability a device publishes, as the cache says it.
fn capability(cache: &ClusterCache, pool: &str, device: &str) -> Option<String> {
    cache.device_versions(NVIDIA_DRIVER, pool, device)?.compute_capability
}

#[tokio::test(flavor = "multi_thread")]
async fn slices_and_allocated_claims_follow_watch_events() {
    let api = FakeApi::start().await;
    seeded(&api);
    api.insert(resource_slice(
        "node-1-gpu.nvidia.com-abcde",
        NVIDIA_DRIVER,
        "node-1",
        &[
            gpu("gpu-0", "9.0.0", "12.8.0", "570.124.6"),
            mig("gpu-1-mig-1g10gb-0", "8.0.0", "12.8.0", "570.124.6"),
            vfio("gpu-2"),
        ],
    ));
    api.insert(resource_slice(
        "node-1-rdma",
        "rdma.example.com",
        "node-1",
        &[gpu("gpu-9", "9.0.0", "12.8.0", "570.124.6")],
    ));
    let made = claim_for_pod("ml", "trainer-gpu-x7k2p", "trainer", "uid-trainer", "gpu");
    api.insert(made.clone());
    let cache = started(&api).await;
    for source in DRA_SOURCES {
        assert!(!cache.is_stale(source), "{}", source.as_str());
    }

    // The slices: only the NVIDIA driver's is kept.
    let snapshot = cache.snapshot();
    assert_eq!(snapshot.dra.slices.keys().collect::<Vec<_>>(), ["node-1-gpu.nvidia.com-abcde"]);
    assert_eq!(capability(&cache, "node-1", "gpu-0").as_deref(), Some("9.0.0"));
    assert_eq!(capability(&cache, "node-1", "gpu-1-mig-1g10gb-0").as_deref(), Some("8.0.0"));
    assert_eq!(
        cache.device_versions(NVIDIA_DRIVER, "node-1", "gpu-2"),
        Some(Default::default()),
        "a VFIO device publishes no versions"
    );
    assert_eq!(cache.device_versions("rdma.example.com", "node-1", "gpu-9"), None);

    // The claim: made for its pod, not allocated yet.
    assert_eq!(
        cache
            .claims_made_for("ml", "uid-trainer")
            .and_then(|mut made| made.remove("gpu"))
            .as_deref(),
        Some("trainer-gpu-x7k2p")
    );
    assert_eq!(cache.claims_made_for("ml", "uid-other"), Some(Default::default()));
    assert_eq!(cache.allocation("ml", "trainer-gpu-x7k2p"), None);

    // The scheduler writes its status: the allocation follows.
    api.insert(allocated(made, &[("node-1", "gpu-1-mig-1g10gb-0")]));
    eventually("the claim's allocation", WAIT, || {
        cache.allocation("ml", "trainer-gpu-x7k2p").is_some_and(|devices| {
            devices.len() == 1
                && devices[0].pool == "node-1"
                && devices[0].device == "gpu-1-mig-1g10gb-0"
        })
    })
    .await;

    // The driver is upgraded: the slice follows.
    api.insert(resource_slice(
        "node-1-gpu.nvidia.com-abcde",
        NVIDIA_DRIVER,
        "node-1",
        &[gpu("gpu-0", "9.0.0", "13.0.0", "580.126.20")],
    ));
    eventually("the slice's new versions", WAIT, || {
        cache
            .device_versions(NVIDIA_DRIVER, "node-1", "gpu-0")
            .and_then(|v| v.cuda_driver_version)
            .as_deref()
            == Some("13.0.0")
            && capability(&cache, "node-1", "gpu-1-mig-1g10gb-0").is_none()
    })
    .await;

    // Deleted: forgotten.
    api.remove("resource.k8s.io/v1", "ResourceClaim", Some("ml"), "trainer-gpu-x7k2p");
    api.remove("resource.k8s.io/v1", "ResourceSlice", None, "node-1-gpu.nvidia.com-abcde");
    eventually("the deletions", WAIT, || {
        cache.allocation("ml", "trainer-gpu-x7k2p").is_none()
            && cache.claims_made_for("ml", "uid-trainer").is_some_and(|made| made.is_empty())
            && cache.snapshot().dra.slices.is_empty()
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_device_class_serves_its_extended_resource() {
    let api = FakeApi::start().await;
    seeded(&api);
    let cache = started(&api).await;
    assert!(!cache.serves_extended_resource("example.com/accel"));
    api.insert(json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
        "metadata": {"name": "accel.example.com"},
        "spec": {"extendedResourceName": "example.com/accel"}}));
    eventually("the DeviceClass", WAIT, || cache.serves_extended_resource("example.com/accel"))
        .await;
}
