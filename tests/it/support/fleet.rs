//! A GPU fleet for the fake API server: opted-in namespaces with the
//! policy's annotations, GPU nodes labelled the way GPU feature discovery
//! labels them, ResourceClaimTemplates like the NVIDIA DRA driver's demos,
//! and the DeviceClasses and RuntimeClass that driver and the GPU operator
//! install. Objects carry what a real cluster sends too (managedFields,
//! node status, unrelated labels and annotations), so the caches decode and
//! drop as much as they would.
//!
//! The fleet is deterministic: object `i` of a kind is always the same, so
//! a test can tell what the caches must know about it.

use serde_json::{Value, json};

use super::fake_api::FakeApi;

/// The namespace of `benches/reviews/`: opted in (enforce), no annotations.
pub const REVIEW_NAMESPACE: &str = "ml";

/// How many objects of each grown source a fleet has.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Opted-in namespaces, [`REVIEW_NAMESPACE`] included.
    pub namespaces: usize,
    pub nodes: usize,
    pub templates: usize,
}

impl Shape {
    /// The team namespaces (all but [`REVIEW_NAMESPACE`]).
    pub fn teams(self) -> usize {
        self.namespaces.saturating_sub(1).max(1)
    }
}

/// The modes, in turn.
const MODES: [&str; 3] = ["enforce", "warn", "audit"];

pub fn team_name(i: usize) -> String {
    format!("team-{i:05}")
}

pub fn team_mode(i: usize) -> &'static str {
    MODES[i % MODES.len()]
}

/// The team's `gpu-policy.io/max-gpus-per-pod`: every other team has one.
pub fn team_max_gpus(i: usize) -> Option<u64> {
    i.is_multiple_of(2).then(|| [1, 2, 4, 8][(i / 2) % 4])
}

fn managed_fields(manager: &str, fields: Value) -> Value {
    json!([{"manager": manager, "operation": "Update", "apiVersion": "v1",
            "time": "2025-06-02T09:14:07Z", "fieldsType": "FieldsV1", "fieldsV1": fields}])
}

/// Team namespace `i`.
pub fn team_namespace(i: usize) -> Value {
    let name = team_name(i);
    let mut annotations = json!({
        "kubectl.kubernetes.io/last-applied-configuration": format!(
            "{{\"apiVersion\":\"v1\",\"kind\":\"Namespace\",\"metadata\":{{\"labels\":\
             {{\"gpu-policy.io/mode\":\"{}\",\"team\":\"{name}\"}},\"name\":\"{name}\"}}}}\n",
            team_mode(i)
        ),
        "owner": format!("{name}@example.com"),
    });
    if let Some(max) = team_max_gpus(i) {
        annotations["gpu-policy.io/max-gpus-per-pod"] = json!(max.to_string());
    }
    if i.is_multiple_of(5) {
        annotations["gpu-policy.io/min-compute-capability"] = json!("8.0");
    }
    json!({"apiVersion": "v1", "kind": "Namespace",
           "metadata": {"name": name, "annotations": annotations,
               "labels": {"gpu-policy.io/mode": team_mode(i), "team": name,
                          "kubernetes.io/metadata.name": name},
               "managedFields": managed_fields("kubectl-client-side-apply", json!({
                   "f:metadata": {"f:annotations": {".": {},
                       "f:kubectl.kubernetes.io/last-applied-configuration": {}},
                   "f:labels": {".": {}, "f:gpu-policy.io/mode": {}, "f:team": {}}}}))},
           "spec": {"finalizers": ["kubernetes"]},
           "status": {"phase": "Active"}})
}

/// (product, family, compute major, minor, memory MiB, GPUs per node)
const PRODUCTS: [(&str, &str, u32, u32, u32, u32); 5] = [
    ("NVIDIA-A100-SXM4-80GB", "ampere", 8, 0, 81920, 8),
    ("NVIDIA-H100-80GB-HBM3", "hopper", 9, 0, 81559, 8),
    ("NVIDIA-L4", "ada-lovelace", 8, 9, 23034, 4),
    ("Tesla-T4", "turing", 7, 5, 15360, 4),
    ("NVIDIA-A10G", "ampere", 8, 6, 23028, 1),
];

/// A driver version (major, minor, revision) and the CUDA version it
/// supports (major, minor).
type Driver = ((u32, u32, u32), (u32, u32));

const DRIVERS: [Driver; 3] =
    [((535, 183, 1), (12, 2)), ((550, 90, 7), (12, 4)), ((570, 124, 6), (12, 8))];

/// GPU node `i`: GFD's labels of both generations, the device plugin's
/// allocatable, and the status a kubelet reports.
pub fn gpu_node(i: usize) -> Value {
    let name = format!("gpu-node-{i:05}");
    let (product, family, major, minor, memory, count) = PRODUCTS[i % PRODUCTS.len()];
    let ((driver_major, driver_minor, driver_rev), (cuda_major, cuda_minor)) =
        DRIVERS[(i / PRODUCTS.len()) % DRIVERS.len()];
    let zone = format!("us-east-1{}", ["a", "b", "c"][i % 3]);
    let labels = json!({
        "beta.kubernetes.io/arch": "amd64", "beta.kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64", "kubernetes.io/os": "linux",
        "kubernetes.io/hostname": name,
        "node.kubernetes.io/instance-type": "p4d.24xlarge",
        "topology.kubernetes.io/region": "us-east-1", "topology.kubernetes.io/zone": zone,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "feature.node.kubernetes.io/cpu-model.vendor_id": "Intel",
        "feature.node.kubernetes.io/kernel-version.full": "6.8.0-1021-aws",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.deploy.device-plugin": "true",
        "nvidia.com/gpu.deploy.gpu-feature-discovery": "true",
        "nvidia.com/gpu.compute.major": major.to_string(),
        "nvidia.com/gpu.compute.minor": minor.to_string(),
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.family": family,
        "nvidia.com/gpu.memory": memory.to_string(),
        "nvidia.com/gpu.count": count.to_string(),
        "nvidia.com/gpu.replicas": "1",
        "nvidia.com/gpu.sharing-strategy": "none",
        "nvidia.com/gpu.mode": "compute",
        "nvidia.com/gpu.machine": "p4d.24xlarge",
        "nvidia.com/mig.capable": (major >= 8 && minor == 0).to_string(),
        "nvidia.com/mig.strategy": "single",
        "nvidia.com/mps.capable": "false",
        "nvidia.com/vgpu.present": "false",
        "nvidia.com/gfd.timestamp": "1748855647",
        "nvidia.com/cuda.driver-version.full":
            format!("{driver_major}.{driver_minor}.{driver_rev:02}"),
        "nvidia.com/cuda.driver-version.major": driver_major.to_string(),
        "nvidia.com/cuda.driver-version.minor": driver_minor.to_string(),
        "nvidia.com/cuda.driver-version.revision": format!("{driver_rev:02}"),
        "nvidia.com/cuda.runtime-version.full": format!("{cuda_major}.{cuda_minor}"),
        "nvidia.com/cuda.runtime-version.major": cuda_major.to_string(),
        "nvidia.com/cuda.runtime-version.minor": cuda_minor.to_string(),
        "nvidia.com/cuda.driver.major": driver_major.to_string(),
        "nvidia.com/cuda.driver.minor": driver_minor.to_string(),
        "nvidia.com/cuda.driver.rev": format!("{driver_rev:02}"),
        "nvidia.com/cuda.runtime.major": cuda_major.to_string(),
        "nvidia.com/cuda.runtime.minor": cuda_minor.to_string(),
    });
    let resources = json!({"cpu": "96", "memory": "1176000Mi", "pods": "110",
        "ephemeral-storage": "7499362Mi", "hugepages-1Gi": "0", "hugepages-2Mi": "0",
        "nvidia.com/gpu": count.to_string()});
    let condition = |kind: &str, status: &str, reason: &str| {
        json!({"type": kind, "status": status, "reason": reason,
               "message": format!("kubelet reports {reason}"),
               "lastHeartbeatTime": "2025-06-02T09:14:07Z",
               "lastTransitionTime": "2025-05-20T11:02:41Z"})
    };
    let images: Vec<Value> = [
        "nvcr.io/nvidia/k8s-device-plugin:v0.17.2",
        "nvcr.io/nvidia/k8s/dcgm-exporter:4.2.3-4.1.3-ubuntu22.04",
        "nvcr.io/nvidia/gpu-feature-discovery:v0.17.2",
        "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "vllm/vllm-openai:v0.11.0",
        "registry.k8s.io/kube-proxy:v1.33.1",
    ]
    .iter()
    .enumerate()
    .map(|(n, image)| {
        json!({"names": [image, format!("{image}@sha256:{n:064x}")],
               "sizeBytes": 1_000_000 * (n + 1) * 37})
    })
    .collect();
    json!({"apiVersion": "v1", "kind": "Node",
           "metadata": {"name": name, "labels": labels,
               "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                   "volumes.kubernetes.io/controller-managed-attach-detach": "true",
                   "nfd.node.kubernetes.io/feature-labels": "cpu-model.vendor_id,kernel-version.full,pci-10de.present"},
               "managedFields": managed_fields("gpu-feature-discovery", json!({
                   "f:metadata": {"f:labels": {"f:nvidia.com/gpu.product": {},
                       "f:nvidia.com/gpu.compute.major": {}, "f:nvidia.com/gpu.compute.minor": {},
                       "f:nvidia.com/cuda.driver-version.major": {}}}}))},
           "spec": {"providerID": format!("aws:///{zone}/i-{i:017x}"),
                    "podCIDR": format!("10.{}.{}.0/24", 64 + i / 256 % 64, i % 256),
                    "taints": [{"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}]},
           "status": {"capacity": resources, "allocatable": resources,
               "conditions": [
                   condition("MemoryPressure", "False", "KubeletHasSufficientMemory"),
                   condition("DiskPressure", "False", "KubeletHasNoDiskPressure"),
                   condition("PIDPressure", "False", "KubeletHasSufficientPID"),
                   condition("Ready", "True", "KubeletReady")],
               "addresses": [{"type": "InternalIP", "address": format!("10.0.{}.{}", i / 256 % 256, i % 256)},
                             {"type": "Hostname", "address": name}],
               "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
               "nodeInfo": {"machineID": format!("{i:032x}"), "systemUUID": format!("ec2{i:029x}"),
                   "bootID": format!("{i:032x}"), "kernelVersion": "6.8.0-1021-aws",
                   "osImage": "Ubuntu 22.04.5 LTS", "containerRuntimeVersion": "containerd://1.7.27",
                   "kubeletVersion": "v1.33.1", "kubeProxyVersion": "v1.33.1",
                   "operatingSystem": "linux", "architecture": "amd64"},
               "images": images}})
}

/// Claim template `i`, in team namespace `i % teams`, in the shapes of the
/// NVIDIA DRA driver's demos: one GPU, several, a MIG slice, or two
/// requests with opaque sharing configuration.
pub fn claim_template(i: usize, teams: usize) -> Value {
    let request = |name: &str, class: &str, count: Option<u64>| {
        let mut exactly = json!({"deviceClassName": class});
        if let Some(count) = count {
            exactly["count"] = json!(count);
        }
        json!({"name": name, "exactly": exactly})
    };
    let sharing = |request: &str, strategy: &str| {
        json!({"requests": [request], "opaque": {"driver": "gpu.nvidia.com",
               "parameters": {"apiVersion": "resource.nvidia.com/v1beta1", "kind": "GpuConfig",
                              "sharing": {"strategy": strategy}}}})
    };
    let devices = match i % 4 {
        0 => json!({"requests": [request("gpu", "gpu.nvidia.com", None)]}),
        1 => json!({"requests": [request("gpus", "gpu.nvidia.com", Some([2, 4, 8][i / 4 % 3]))]}),
        2 => json!({"requests": [request("mig", "mig.nvidia.com", None)]}),
        _ => json!({"requests": [request("ts-gpu", "gpu.nvidia.com", None),
                                 request("mps-gpu", "gpu.nvidia.com", None)],
                    "config": [sharing("ts-gpu", "TimeSlicing"), sharing("mps-gpu", "MPS")]}),
    };
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
           "metadata": {"name": format!("claim-{i:05}"), "namespace": team_name(i % teams),
               "managedFields": managed_fields("kubectl-client-side-apply",
                   json!({"f:spec": {"f:spec": {"f:devices": {}}}}))},
           "spec": {"spec": {"devices": devices}}})
}

/// The DeviceClasses the NVIDIA DRA driver's chart installs.
pub fn device_classes() -> [Value; 2] {
    let class = |name: &str, kind: &str| {
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "DeviceClass",
               "metadata": {"name": name},
               "spec": {"selectors": [{"cel": {"expression": format!(
                   "device.driver == 'gpu.nvidia.com' && device.attributes['gpu.nvidia.com'].type == '{kind}'")}}]}})
    };
    [class("gpu.nvidia.com", "gpu"), class("mig.nvidia.com", "mig")]
}

/// The GPU operator's RuntimeClass.
pub fn nvidia_runtime_class() -> Value {
    json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
           "metadata": {"name": "nvidia"}, "handler": "nvidia"})
}

/// A fake API server serving a fleet of `shape`.
pub async fn fleet(shape: Shape) -> FakeApi {
    let api = FakeApi::start().await;
    api.insert(json!({"apiVersion": "v1", "kind": "Namespace",
        "metadata": {"name": REVIEW_NAMESPACE, "labels": {"gpu-policy.io/mode": "enforce"}}}));
    for i in 0..shape.namespaces.saturating_sub(1) {
        api.insert(team_namespace(i));
    }
    for i in 0..shape.nodes {
        api.insert(gpu_node(i));
    }
    for i in 0..shape.templates {
        api.insert(claim_template(i, shape.teams()));
    }
    for class in device_classes() {
        api.insert(class);
    }
    api.insert(nvidia_runtime_class());
    api
}
