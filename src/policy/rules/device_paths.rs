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
//!   `management.nvidia.com/...`): a runtime with CDI enabled injects them;
//! - containers in scope with `securityContext.privileged: true` that are not
//!   GPU containers (ephemeral ones included): a privileged container sees
//!   every `/dev/nvidia*` of the node, whatever it requested.
//!
//! Warns (a notice), or with `privilegedGpu: deny` denies, privileged GPU
//! containers: they see every card of the node, not only their own.
//!
//! Allows every other hostPath, mount and annotation, and containers that
//! are not privileged.

use std::borrow::Cow;

use super::rule::{ApiServer, Coverage, Findings, RuleInput};
use crate::policy::container::ContainerKind;
use crate::policy::message::{CONTAINER, MessageTemplate, Notice, NoticeKind, Noun};
use crate::settings::PrivilegedGpu;

pub const DEVICE_LIST_MOUNT: &str = "/var/run/nvidia-container-devices";

pub const API_SERVER: ApiServer = ApiServer::Validating(Coverage {
    enforced: "hostPath volumes at `/`, `/dev`, `/dev/nvidia*`; mounts at \
        `/var/run/nvidia-container-devices`; CDI annotations naming NVIDIA devices; privileged \
        containers without a GPU; privileged ephemeral containers; with `privilegedGpu: deny`, \
        privileged GPU containers (a container naming a claim included)",
    webhook_only: "`..` in a mount path is not resolved (the API server already rejects it in a \
        hostPath); a privileged container naming a DRA claim is not denied (the claim may hold \
        a GPU); the warning about privileged GPU containers (a policy warns only what it \
        would deny)",
});

pub const HOST_PATH_VOLUME: Noun = Noun::new("hostPath volume", "hostPath volumes");
pub const ANNOTATION: Noun = Noun::new("annotation", "annotations");
pub const EPHEMERAL_CONTAINER: Noun = Noun::new("ephemeral container", "ephemeral containers");
/// The verb of [`PRIVILEGED_GPU`], agreeing with its containers.
pub const SEES: Noun = Noun::new("sees", "see");

/// `{volumes}`: [`HOST_PATH_VOLUME`]'s list.
pub const HOST_PATH: MessageTemplate = MessageTemplate::new(
    "{volumes} must not mount a host path that exposes /dev/nvidia*; \
     request nvidia.com/gpu in limits instead",
);
/// `{mount}`: [`DEVICE_LIST_MOUNT`].
pub const DEVICE_LIST: MessageTemplate = MessageTemplate::new(
    "{containers} must not mount {mount}, a device request to the NVIDIA runtime; \
     request nvidia.com/gpu in limits instead",
);
/// `{annotations}`: [`ANNOTATION`]'s list of the keys, sorted.
pub const CDI_ANNOTATIONS: MessageTemplate = MessageTemplate::new(
    "{annotations} must not inject NVIDIA devices through CDI; \
     request nvidia.com/gpu in limits instead",
);
pub const PRIVILEGED: MessageTemplate = MessageTemplate::new(
    "{containers} must not be privileged without a GPU: a privileged container sees \
     every GPU of the node; drop privileged, or request nvidia.com/gpu in limits",
);
/// `{containers}`: [`EPHEMERAL_CONTAINER`]'s list.
pub const PRIVILEGED_EPHEMERAL: MessageTemplate = MessageTemplate::new(
    "{containers} must not be privileged: a privileged container sees every GPU of \
     the node; use a kubectl debug profile other than sysadmin",
);
/// A notice with `privilegedGpu: warn`; `{sees}`: [`SEES`].
pub const PRIVILEGED_GPU: MessageTemplate = MessageTemplate::new(
    "privileged {containers} {sees} every GPU of the node, not only the ones requested",
);
/// With `privilegedGpu: deny`: `{notice}` is [`PRIVILEGED_GPU`]'s.
pub const PRIVILEGED_GPU_DENIED: MessageTemplate =
    MessageTemplate::new("{notice}; drop privileged (privilegedGpu: deny)");

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    if input.allowlisted.is_some() {
        return findings;
    }
    let view = input.view;
    if input.scope.is_whole() {
        let host_paths: Vec<&str> = view
            .volumes
            .iter()
            .filter(|volume| volume.host_path.is_some_and(exposes_nvidia_devices))
            .map(|volume| volume.name)
            .collect();
        if !host_paths.is_empty() {
            findings
                .violations
                .push(HOST_PATH.format(&[("volumes", &HOST_PATH_VOLUME.list(host_paths))]));
        }
        let mut annotations: Vec<(&str, &str)> = view
            .annotations
            .into_iter()
            .flatten()
            .filter_map(|(key, value)| Some((key, value.as_str()?)))
            .filter(|(key, value)| is_cdi_key(key) && names_nvidia_device(value))
            .collect();
        annotations.sort_unstable();
        if !annotations.is_empty() {
            let keys = ANNOTATION.list(annotations.iter().map(|(k, _)| *k));
            findings
                .violations
                .push(CDI_ANNOTATIONS.format(&[("annotations", &keys)]));
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
        findings.violations.push(DEVICE_LIST.format(&[
            ("containers", &CONTAINER.list(mounting)),
            ("mount", &DEVICE_LIST_MOUNT),
        ]));
    }
    check_privileged(input, &mut findings);
    findings
}

/// Privileged containers: denied without a GPU; with one, warned about
/// or denied as `privilegedGpu` says.
fn check_privileged(input: &RuleInput<'_, '_>, findings: &mut Findings) {
    let privileged = input
        .view
        .containers
        .iter()
        .filter(|c| input.scope.includes(c) && c.privileged);
    let (mut gpu, mut ephemeral, mut plain) = (Vec::new(), Vec::new(), Vec::new());
    for container in privileged {
        // A container whose claim cannot be resolved may hold a GPU: it is
        // warned about like a GPU container (and about the claim), not denied.
        if container.is_gpu() || container.unresolved_claim {
            gpu.push(container.name);
        } else if container.kind == ContainerKind::Ephemeral {
            ephemeral.push(container.name);
        } else {
            plain.push(container.name);
        }
    }
    if !plain.is_empty() {
        findings
            .violations
            .push(PRIVILEGED.format(&[("containers", &CONTAINER.list(plain))]));
    }
    if !ephemeral.is_empty() {
        // Ephemeral containers cannot request a GPU: dropping privileged is
        // the only fix (`kubectl debug --profile=sysadmin` sets it).
        findings.violations.push(
            PRIVILEGED_EPHEMERAL.format(&[("containers", &EPHEMERAL_CONTAINER.list(ephemeral))]),
        );
    }
    if !gpu.is_empty() {
        let message = PRIVILEGED_GPU.format(&[
            ("sees", &SEES.of(gpu.len())),
            ("containers", &CONTAINER.list(gpu)),
        ]);
        match input.settings.config().privileged_gpu {
            PrivilegedGpu::Warn => findings
                .notices
                .push(Notice::new(NoticeKind::PrivilegedGpuContainer, message)),
            PrivilegedGpu::Deny => findings
                .violations
                .push(PRIVILEGED_GPU_DENIED.format(&[("notice", &message)])),
        }
    }
}

/// Lexically normalises an absolute path: no empty or `.` segments, `..`
/// resolved, no trailing `/`. The root is `/`. A path that is already
/// normal, as nearly every mount path is, is returned as it is.
pub fn normalize(path: &str) -> Cow<'_, str> {
    // Split as bytes: a byte loop, where splitting the `str` on a `char`
    // searches for each separator anew (most of this check's cost).
    let normal = path == "/"
        || path.strip_prefix('/').is_some_and(|rest| {
            rest.as_bytes()
                .split(|byte| *byte == b'/')
                .all(|s| !matches!(s, b"" | b"." | b".."))
        });
    if normal {
        return Cow::Borrowed(path);
    }
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
    Cow::Owned(format!("/{}", segments.join("/")))
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
    use crate::policy::testing::{claim_template, evaluate_pod_update, violation_messages};
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

    fn privileged(name: &str) -> Value {
        json!({"name": name, "securityContext": {"privileged": true}})
    }

    fn privileged_gpu(name: &str) -> Value {
        json!({"name": name, "securityContext": {"privileged": true},
               "resources": {"limits": {"nvidia.com/gpu": 1}}})
    }

    #[rstest]
    // regular, plain init and sidecar init containers: denied
    #[case(json!({"containers": [privileged("a")]}), 1)]
    #[case(json!({"initContainers": [privileged("i")], "containers": [{"name": "a"}]}), 1)]
    #[case(json!({"initContainers": [{"name": "s", "restartPolicy": "Always",
        "securityContext": {"privileged": true}}], "containers": [{"name": "a"}]}), 1)]
    // a non-GPU container beside a GPU container is still denied
    #[case(json!({"containers": [privileged("a"), {"name": "g",
        "resources": {"limits": {"nvidia.com/gpu": 1}}}]}), 1)]
    // not privileged: allowed
    #[case(json!({"containers": [{"name": "a", "securityContext": {"privileged": false}}]}), 0)]
    #[case(json!({"containers": [{"name": "a", "securityContext": {"runAsUser": 0}}]}), 0)]
    #[case(json!({"containers": [{"name": "a", "securityContext": {"privileged": null}}]}), 0)]
    // privileged GPU containers (limit or request): warned, not denied
    #[case(json!({"containers": [privileged_gpu("g")]}), 0)]
    #[case(json!({"initContainers": [privileged_gpu("i")], "containers": [{"name": "a"}]}), 0)]
    #[case(json!({"containers": [{"name": "g", "securityContext": {"privileged": true},
        "resources": {"requests": {"nvidia.com/mig-1g.5gb": 1}}}]}), 0)]
    // a zero GPU limit is no GPU request
    #[case(json!({"containers": [{"name": "z", "securityContext": {"privileged": true},
        "resources": {"limits": {"nvidia.com/gpu": 0}}}]}), 1)]
    fn privileged_containers(#[case] spec: Value, #[case] denied: usize) {
        let pod = json!({"spec": spec});
        let found: Vec<String> = violations(&pod)
            .into_iter()
            .filter(|m| m.contains("privileged"))
            .collect();
        assert_eq!(found.len(), denied, "{found:?}");
    }

    #[test]
    fn privileged_containers_without_a_gpu_are_named_together() {
        let pod = json!({"spec": {"initContainers": [privileged("init")],
            "containers": [privileged("a"), {"name": "b"}, privileged("c"), privileged_gpu("g")]}});
        assert_eq!(
            violations(&pod),
            vec![
                "gpu-policy: containers \"init\", \"a\", \"c\" must not be privileged without a GPU: \
                 a privileged container sees every GPU of the node; drop privileged, or request \
                 nvidia.com/gpu in limits"
            ]
        );
        let one = json!({"spec": {"containers": [privileged("a")]}});
        assert_eq!(
            violations(&one),
            vec![
                "gpu-policy: container \"a\" must not be privileged without a GPU: a privileged \
                 container sees every GPU of the node; drop privileged, or request nvidia.com/gpu \
                 in limits"
            ]
        );
    }

    #[rstest]
    #[case(vec![privileged_gpu("g")], Some("gpu-policy: privileged container \"g\" sees every GPU of the node, not only the ones requested"))]
    #[case(vec![privileged_gpu("g"), privileged_gpu("h")], Some("gpu-policy: privileged containers \"g\", \"h\" see every GPU of the node, not only the ones requested"))]
    #[case(vec![json!({"name": "g", "resources": {"limits": {"nvidia.com/gpu": 1}}})], None)]
    #[case(vec![privileged("a")], None)]
    fn privileged_gpu_containers_get_a_notice(
        #[case] containers: Vec<Value>,
        #[case] expected: Option<&str>,
    ) {
        let evaluation =
            crate::policy::testing::evaluate_pod(&json!({"spec": {"containers": containers}}));
        let notices: Vec<&str> = evaluation
            .notices
            .iter()
            .filter(|n| n.kind == crate::policy::NoticeKind::PrivilegedGpuContainer)
            .map(|n| n.message.as_str())
            .collect();
        assert_eq!(notices, expected.into_iter().collect::<Vec<_>>());
        if expected.is_some() {
            assert!(evaluation.violations.iter().all(|v| v.rule != ID));
        }
    }

    #[test]
    fn privileged_gpu_deny_denies_a_privileged_gpu_container() {
        let settings = crate::settings::Settings::from_yaml("privilegedGpu: deny", "t")
            .unwrap_or_else(|err| panic!("{err}"));
        let pod = json!({"spec": {"containers": [privileged_gpu("g"), {"name": "ok",
            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
        let evaluation = crate::policy::testing::evaluate_with(&pod, &settings);
        let denied = crate::policy::testing::messages_of(&evaluation, ID);
        assert_eq!(
            denied,
            [
                "gpu-policy: privileged container \"g\" sees every GPU of the node, not only \
              the ones requested; drop privileged (privilegedGpu: deny)"
            ]
        );
        assert!(
            evaluation
                .notices
                .iter()
                .all(|n| n.kind != crate::policy::NoticeKind::PrivilegedGpuContainer)
        );
    }

    /// A container with `securityContext.privileged: true` and the claims
    /// `claims` of a pod whose claim `gpu` holds one GPU and `nic` none.
    fn privileged_claiming(name: &str, claims: &[&str]) -> Value {
        let uses: Vec<Value> = claims.iter().map(|c| json!({"name": c})).collect();
        json!({"name": name, "securityContext": {"privileged": true},
               "resources": {"claims": uses}})
    }

    #[rstest]
    // a privileged container holding a GPU through a claim: warned only
    #[case(vec![privileged_claiming("train", &["gpu"])], None,
           Some("gpu-policy: privileged container \"train\" sees every GPU of the node, not only the ones requested"))]
    // a privileged container beside the claimed one, naming no claim: denied
    #[case(vec![privileged_claiming("train", &["gpu"]), privileged_claiming("helper", &[])],
           Some("gpu-policy: container \"helper\" must not be privileged without a GPU: a privileged container sees every GPU of the node; drop privileged, or request nvidia.com/gpu in limits"),
           Some("gpu-policy: privileged container \"train\" sees every GPU of the node, not only the ones requested"))]
    // a claim of no GPU class does not make a GPU container: denied
    #[case(vec![privileged_claiming("net", &["nic"])],
           Some("gpu-policy: container \"net\" must not be privileged without a GPU: a privileged container sees every GPU of the node; drop privileged, or request nvidia.com/gpu in limits"),
           None)]
    fn privileged_containers_with_claims(
        #[case] containers: Vec<Value>,
        #[case] denied: Option<&str>,
        #[case] warned: Option<&str>,
    ) {
        let objects = vec![
            claim_template("one-gpu", "gpu.nvidia.com"),
            claim_template("one-nic", "rdma.example.com"),
        ];
        let pod = json!({"metadata": {"namespace": "default"}, "spec": {
            "containers": containers,
            "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"},
                               {"name": "nic", "resourceClaimTemplateName": "one-nic"}]}});
        let evaluation = crate::policy::testing::evaluate_with_claims(
            &pod,
            &objects,
            &crate::settings::Settings::default(),
        );
        let violations: Vec<&str> = evaluation
            .violations
            .iter()
            .filter(|v| v.rule == ID)
            .map(|v| v.message.as_str())
            .collect();
        assert_eq!(violations, denied.into_iter().collect::<Vec<_>>());
        let notices: Vec<&str> = evaluation
            .notices
            .iter()
            .filter(|n| n.kind != crate::policy::NoticeKind::UnresolvedClaim)
            .map(|n| n.message.as_str())
            .collect();
        assert_eq!(notices, warned.into_iter().collect::<Vec<_>>());
    }

    #[rstest]
    // the NVIDIA DaemonSets in the allowlist run privileged without a GPU
    #[case("kube-system", true)]
    #[case("default", false)]
    fn allowlisted_pods_may_be_privileged(#[case] namespace: &str, #[case] exempt: bool) {
        let pod = json!({"metadata": {"namespace": namespace, "ownerReferences": [
                {"kind": "DaemonSet", "name": "gpu-feature-discovery", "controller": true}]},
            "spec": {"containers": [privileged("gfd"), privileged_gpu("g")]}});
        let evaluation = crate::policy::testing::evaluate_pod(&pod);
        assert_eq!(evaluation.violations.iter().all(|v| v.rule != ID), exempt);
        assert_eq!(
            evaluation
                .notices
                .iter()
                .all(|n| n.kind != crate::policy::NoticeKind::PrivilegedGpuContainer),
            exempt
        );
    }

    #[rstest]
    // kubectl debug --profile=sysadmin: a new privileged ephemeral container
    #[case(true, true)]
    #[case(false, false)]
    fn new_privileged_ephemeral_containers_are_denied(
        #[case] privileged: bool,
        #[case] denied: bool,
    ) {
        let old = json!({"spec": {"containers": [{"name": "app",
            "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] = json!([{"name": "debug",
            "securityContext": {"privileged": privileged}}]);
        let messages: Vec<String> = evaluate_pod_update(&new, &old)
            .violations
            .into_iter()
            .filter(|v| v.rule == ID)
            .map(|v| v.message.into_string())
            .collect();
        let expected: Vec<&str> = if denied {
            vec![
                "gpu-policy: ephemeral container \"debug\" must not be privileged: a privileged \
                  container sees every GPU of the node; use a kubectl debug profile other than sysadmin",
            ]
        } else {
            vec![]
        };
        assert_eq!(messages, expected);
    }

    #[test]
    fn existing_privileged_containers_are_not_judged_again_on_an_ephemeral_update() {
        let old = json!({"spec": {"containers": [privileged("app")],
            "ephemeralContainers": [privileged("old-debug")]}});
        let mut new = old.clone();
        new["spec"]["ephemeralContainers"] = json!([privileged("old-debug"), {"name": "debug"}]);
        let evaluation = evaluate_pod_update(&new, &old);
        assert!(
            evaluation.violations.iter().all(|v| v.rule != ID),
            "{:?}",
            evaluation.violations
        );
    }

    #[rstest]
    #[case("/", "/")]
    #[case("", "/")]
    #[case("/a//b/./c/", "/a/b/c")]
    #[case("/a/../../b", "/b")]
    #[case("dev/nvidia0", "/dev/nvidia0")]
    #[case("/dev/nvidia0", "/dev/nvidia0")]
    #[case("/root/.cache/..hidden", "/root/.cache/..hidden")]
    #[case("/dev/.", "/dev")]
    #[case("/dev/nvidia0/..", "/dev")]
    fn normalization(#[case] path: &str, #[case] expected: &str) {
        assert_eq!(normalize(path), expected);
    }
}
