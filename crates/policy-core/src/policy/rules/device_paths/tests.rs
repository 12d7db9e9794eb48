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
    assert_eq!(violations(&host_path_pod(path)).len(), usize::from(denied), "{path}");
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
#[case("nvidia.cdi.k8s.io/container.app", "nvidia.com/gpu=0,nvidia.com/gpu=1", true)]
#[case("cdi.k8s.io/x", "vendor.example/dev=1, management.nvidia.com/gpu=all", true)]
#[case("CDI.k8s.io/x", "NVIDIA.com/gpu=0", true)]
#[case("cdi.k8s.io/net", "vendor.example/nic=0", false)]
#[case("example.com/note", "nvidia.com/gpu=all", false)]
#[case("notcdi.k8s.io/x", "nvidia.com/gpu=all", false)]
fn cdi_annotations(#[case] key: &str, #[case] value: &str, #[case] denied: bool) {
    let pod =
        json!({"metadata": {"annotations": {key: value}}, "spec": {"containers": [{"name": "c"}]}});
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
    assert!(evaluation.violations.iter().any(|v| v.rule == ID && v.message.contains("\"debug\"")));
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
    let found: Vec<String> =
        violations(&pod).into_iter().filter(|m| m.contains("privileged")).collect();
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
        ["gpu-policy: privileged container \"g\" sees every GPU of the node, not only \
              the ones requested; drop privileged (privilegedGpu: deny)"]
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
    let violations: Vec<&str> =
        evaluation.violations.iter().filter(|v| v.rule == ID).map(|v| v.message.as_str()).collect();
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
fn new_privileged_ephemeral_containers_are_denied(#[case] privileged: bool, #[case] denied: bool) {
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
    assert!(evaluation.violations.iter().all(|v| v.rule != ID), "{:?}", evaluation.violations);
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
