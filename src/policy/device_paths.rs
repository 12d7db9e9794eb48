//! R6 `device-paths` (validating): no other way to a card than the device
//! plugin.
//!
//! Reads: `spec.volumes[].hostPath.path`; `volumeMounts[].mountPath` of
//! every container in scope (new ephemeral containers included);
//! `metadata.annotations` of the pod or template.
//!
//! Denies, in pods that are not allowlisted:
//! - hostPath volumes at `/dev/nvidia*` (`/dev/nvidiactl`, `/dev/nvidia0`,
//!   `/dev/nvidia-uvm`, `/dev/nvidia-caps/...`) or at a folder above them
//!   (`/dev`, `/`), after normalising the path (`//`, `/./`, `..`, trailing
//!   `/`);
//! - volume mounts at or under `/var/run/nvidia-container-devices`: with the
//!   hardened toolkit setting `accept-nvidia-visible-devices-as-volume-mounts`
//!   such a mount *is* a device request;
//! - annotations whose key prefix is `cdi.k8s.io` or ends in `.cdi.k8s.io`
//!   and whose value names an NVIDIA device (`nvidia.com/...`,
//!   `management.nvidia.com/...`): a runtime with CDI enabled injects them.
//!
//! Allows every other hostPath, mount and annotation.

use super::{Findings, RuleInput, containers_phrase, quoted_list};

pub const DEVICE_LIST_MOUNT: &str = "/var/run/nvidia-container-devices";

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    if input.allowlisted.is_some() {
        return findings;
    }
    let view = input.view;
    let fix = "request nvidia.com/gpu in limits instead";
    if input.scope.is_whole() {
        let host_paths: Vec<&str> = view
            .volumes
            .iter()
            .filter(|volume| volume.host_path.is_some_and(exposes_nvidia_devices))
            .map(|volume| volume.name)
            .collect();
        if !host_paths.is_empty() {
            findings.violations.push(format!(
                "{} must not mount a host path that exposes /dev/nvidia*; {fix}",
                quoted_list("hostPath volume", "hostPath volumes", host_paths)
            ));
        }
        let mut annotations: Vec<(&str, &str)> = view
            .annotations
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key.as_str(), value.as_str()?)))
            .filter(|(key, value)| is_cdi_key(key) && names_nvidia_device(value))
            .collect();
        annotations.sort_unstable();
        if !annotations.is_empty() {
            findings.violations.push(format!(
                "{} must not inject NVIDIA devices through CDI; {fix}",
                quoted_list(
                    "annotation",
                    "annotations",
                    annotations.iter().map(|(k, _)| *k)
                )
            ));
        }
    }
    let mounting: Vec<&str> = view
        .containers
        .iter()
        .filter(|c| input.scope.includes(c))
        .filter(|c| c.mount_paths.iter().any(|path| is_device_list_mount(path)))
        .map(|c| c.name)
        .collect();
    if !mounting.is_empty() {
        findings.violations.push(format!(
            "{} must not mount {DEVICE_LIST_MOUNT}, a device request to \
             the NVIDIA runtime; {fix}",
            containers_phrase(mounting)
        ));
    }
    findings
}

/// Lexically normalises an absolute path: no empty or `.` segments, `..`
/// resolved, no trailing `/`. The root is `/`.
pub fn normalize(path: &str) -> String {
    let mut segments: Vec<&str> = Vec::new();
    for segment in path.split('/') {
        match segment {
            "" | "." => {}
            ".." => {
                segments.pop();
            }
            other => segments.push(other),
        }
    }
    format!("/{}", segments.join("/"))
}

/// `/`, `/dev`, or anything at `/dev/nvidia*`.
fn exposes_nvidia_devices(host_path: &str) -> bool {
    let path = normalize(host_path);
    path == "/" || path == "/dev" || path.starts_with("/dev/nvidia")
}

fn is_device_list_mount(mount_path: &str) -> bool {
    let path = normalize(mount_path);
    path == DEVICE_LIST_MOUNT
        || path
            .strip_prefix(DEVICE_LIST_MOUNT)
            .is_some_and(|rest| rest.starts_with('/'))
}

fn is_cdi_key(key: &str) -> bool {
    let Some((prefix, _)) = key.split_once('/') else {
        return false;
    };
    let prefix = prefix.to_ascii_lowercase();
    prefix == "cdi.k8s.io" || prefix.ends_with(".cdi.k8s.io")
}

/// CDI annotation values are comma-separated fully qualified device names
/// (`vendor/class=name`).
fn names_nvidia_device(value: &str) -> bool {
    value.split(',').any(|device| {
        let device = device.trim().to_ascii_lowercase();
        device.starts_with("nvidia.com/") || device.starts_with("management.nvidia.com/")
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RuleId;
    use crate::policy::testing::{evaluate_pod_update, violation_messages};
    use rstest::rstest;
    use serde_json::{Value, json};

    const ID: RuleId = RuleId::DevicePaths;

    fn violations(pod: &Value) -> Vec<String> {
        violation_messages(pod, ID)
    }

    fn host_path_pod(path: &str) -> Value {
        json!({"spec": {"containers": [{"name": "c"}],
            "volumes": [{"name": "dev", "hostPath": {"path": path}}]}})
    }

    #[rstest]
    #[case("/dev/nvidia0", true)]
    #[case("/dev/nvidiactl", true)]
    #[case("/dev/nvidia-uvm", true)]
    #[case("/dev/nvidia-caps", true)]
    #[case("/dev/nvidia-caps/nvidia-cap1", true)]
    #[case("/dev", true)]
    #[case("/dev/", true)]
    #[case("/", true)]
    #[case("//dev//nvidia0", true)]
    #[case("/dev/./nvidia0", true)]
    #[case("/var/../dev/nvidia0", true)]
    #[case("/tmp/../", true)]
    #[case("/dev/null", false)]
    #[case("/dev/dri", false)]
    #[case("/var/lib/kubelet/device-plugins", false)]
    #[case("/sys", false)]
    #[case("/devices", false)]
    fn host_paths(#[case] path: &str, #[case] denied: bool) {
        assert_eq!(
            violations(&host_path_pod(path)).len(),
            usize::from(denied),
            "{path}"
        );
    }

    #[test]
    fn host_path_message_names_volumes_and_fix() {
        let mut pod = host_path_pod("/dev");
        pod["spec"]["volumes"] = json!([
            {"name": "dev", "hostPath": {"path": "/dev"}},
            {"name": "gpu0", "hostPath": {"path": "/dev/nvidia0"}},
        ]);
        assert_eq!(
            violations(&pod),
            vec![
                "gpu-policy: hostPath volumes \"dev\", \"gpu0\" must not mount a host path that exposes /dev/nvidia*; request nvidia.com/gpu in limits instead"
            ]
        );
    }

    #[rstest]
    #[case("/var/run/nvidia-container-devices", true)]
    #[case("/var/run/nvidia-container-devices/", true)]
    #[case("/var/run/nvidia-container-devices/all", true)]
    #[case("/var/run//nvidia-container-devices/0", true)]
    #[case("/var/run/nvidia-container-devices-other", false)]
    #[case("/var/run/secrets/kubernetes.io/serviceaccount", false)]
    fn device_list_mounts(#[case] mount: &str, #[case] denied: bool) {
        let pod = json!({"spec": {"containers": [{"name": "c", "volumeMounts": [{"name": "v", "mountPath": mount}]}]}});
        assert_eq!(violations(&pod).len(), usize::from(denied), "{mount}");
    }

    #[rstest]
    #[case("cdi.k8s.io/gpu", "nvidia.com/gpu=all", true)]
    #[case(
        "nvidia.cdi.k8s.io/container.app",
        "nvidia.com/gpu=0,nvidia.com/gpu=1",
        true
    )]
    #[case(
        "cdi.k8s.io/x",
        "vendor.example/dev=1, management.nvidia.com/gpu=all",
        true
    )]
    #[case("CDI.k8s.io/x", "NVIDIA.com/gpu=0", true)]
    #[case("cdi.k8s.io/net", "vendor.example/nic=0", false)]
    #[case("example.com/note", "nvidia.com/gpu=all", false)]
    #[case("notcdi.k8s.io/x", "nvidia.com/gpu=all", false)]
    fn cdi_annotations(#[case] key: &str, #[case] value: &str, #[case] denied: bool) {
        let pod = json!({"metadata": {"annotations": {key: value}}, "spec": {"containers": [{"name": "c"}]}});
        assert_eq!(violations(&pod).len(), usize::from(denied), "{key}={value}");
    }

    #[test]
    fn allowlisted_pods_may_mount_devices() {
        let mut pod = host_path_pod("/dev");
        pod["metadata"] = json!({"namespace": "kube-system", "ownerReferences": [
            {"kind": "DaemonSet", "name": "nvidia-device-plugin-daemonset", "controller": true}]});
        assert!(violations(&pod).is_empty());
    }

    #[test]
    fn gpu_pods_may_not_mount_devices_either() {
        let mut pod = host_path_pod("/dev/nvidia0");
        pod["spec"]["containers"][0]["resources"] = json!({"limits": {"nvidia.com/gpu": 1}});
        assert_eq!(violations(&pod).len(), 1);
    }

    #[test]
    fn new_ephemeral_container_mounting_the_device_list_is_denied() {
        let old = json!({"spec": {"containers": [{"name": "app"}], "volumes": [{"name": "v", "emptyDir": {}}]}});
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] = json!([{"name": "debug",
            "volumeMounts": [{"name": "v", "mountPath": "/var/run/nvidia-container-devices"}]}]);
        let evaluation = evaluate_pod_update(&new, &old);
        assert!(
            evaluation
                .violations
                .iter()
                .any(|v| v.rule == ID && v.message.contains("\"debug\""))
        );
    }

    #[rstest]
    #[case("/", "/")]
    #[case("", "/")]
    #[case("/a//b/./c/", "/a/b/c")]
    #[case("/a/../../b", "/b")]
    fn normalization(#[case] path: &str, #[case] expected: &str) {
        assert_eq!(normalize(path), expected);
    }
}
