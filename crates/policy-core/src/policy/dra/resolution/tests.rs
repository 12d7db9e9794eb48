use rstest::rstest;
use serde_json::{Value, json};

use crate::policy::dra::claims::DraCount::{self, All, Exactly};
use crate::policy::dra::tables::ClaimTables;
use crate::policy::testing::leaked;
use crate::policy::testing::{apply, evaluate_pod, evaluate_with_claims, messages_of};
use crate::policy::{Evaluation, NoticeKind, PodView, RuleId, Shape};
use crate::settings::Settings;

/// A ResourceClaimTemplate in `default` with one request per (name,
/// class, count).
fn template(name: &str, requests: &[(&str, &str, Value)]) -> Value {
    let requests: Vec<Value> = requests
        .iter()
        .map(|(request, class, count)| {
            let mut exactly = json!({"deviceClassName": class});
            match count {
                Value::String(mode) if mode == "All" => {
                    exactly["allocationMode"] = json!("All");
                }
                count => exactly["count"] = count.clone(),
            }
            json!({"name": request, "exactly": exactly})
        })
        .collect();
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
               "metadata": {"name": name, "namespace": "default"},
               "spec": {"spec": {"devices": {"requests": requests}}}})
}

fn one_gpu() -> Vec<Value> {
    vec![template("single-gpu", &[("gpu", "gpu.nvidia.com", json!(1))])]
}

fn uses(name: &str, claim: &str) -> Value {
    json!({"name": name, "image": "nvidia/cuda:12.6.3-base-ubuntu24.04",
               "resources": {"claims": [{"name": claim}]}})
}

fn plain(name: &str) -> Value {
    json!({"name": name, "image": "busybox"})
}

fn pod(containers: Vec<Value>, claims: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "p", "namespace": "default"},
               "spec": {"containers": containers, "resourceClaims": claims}})
}

fn template_claim(name: &str, template: &str) -> Value {
    json!([{"name": name, "resourceClaimTemplateName": template}])
}

fn rules_changed(evaluation: &Evaluation) -> Vec<(RuleId, String)> {
    evaluation.changes.iter().map(|c| (c.rule, c.summary.clone())).collect()
}

fn unresolved(evaluation: &Evaluation) -> Vec<String> {
    evaluation
        .notices
        .iter()
        .filter(|n| n.kind == NoticeKind::UnresolvedClaim)
        .map(|n| n.message.to_string())
        .collect()
}

#[test]
fn a_claimed_container_is_not_pinned_and_the_others_are() {
    let pod = pod(vec![uses("ctr", "gpu"), plain("sidecar")], template_claim("gpu", "single-gpu"));
    let evaluation = evaluate_with_claims(&pod, &one_gpu(), &Settings::default());
    let mut changed = rules_changed(&evaluation);
    // The last: the selector the claim made from the template gets.
    assert!(
        changed
            .pop()
            .is_some_and(|(_, s)| s.starts_with("give the claims made for p from single-gpu"))
    );
    assert_eq!(
            changed,
            vec![
                (
                    RuleId::VisibleDevices,
                    "pin NVIDIA_VISIBLE_DEVICES=void in container \"sidecar\" (no GPU limit)"
                        .to_owned()
                ),
                (
                    RuleId::ComputeAffinity,
                    "require compute capability >= 5.0 of the GPUs of the claims made for the pod \
                     (image nvidia/cuda:12.6.3-base-ubuntu24.04), recorded in gpu-policy.io/gpu-needs"
                        .to_owned()
                ),
            ]
        );
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    assert!(evaluation.notices.is_empty(), "{:?}", evaluation.notices);
    // No runtime class: the runtime injects the claimed device via CDI.
    let after = apply(&pod, &evaluation.patch);
    assert_eq!(after["spec"].get("runtimeClassName"), None);
}

#[test]
fn author_written_visible_devices_is_removed_from_a_claimed_container() {
    let mut ctr = uses("ctr", "gpu");
    ctr["env"] = json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]);
    let pod = pod(vec![ctr], template_claim("gpu", "single-gpu"));
    let evaluation = evaluate_with_claims(&pod, &one_gpu(), &Settings::default());
    let after = apply(&pod, &evaluation.patch);
    assert_eq!(after["spec"]["containers"][0]["env"], json!([]));
}

#[rstest]
// not in the input at all
#[case(vec![], "ResourceClaimTemplate \"single-gpu\" not found")]
// in another namespace
#[case(vec![{ let mut t = template("single-gpu", &[("gpu", "gpu.nvidia.com", json!(1))]); t["metadata"]["namespace"] = json!("other"); t }],
           "ResourceClaimTemplate \"single-gpu\" not found")]
// unreadable
#[case(vec![template("single-gpu", &[("gpu", "gpu.nvidia.com", json!("two"))])],
           "ResourceClaimTemplate \"single-gpu\": spec.spec.devices.requests[0].exactly.count: must be a whole number above 0, not a string")]
fn an_unresolvable_claim_warns_and_keeps_the_pin(
    #[case] objects: Vec<Value>,
    #[case] reason: &str,
) {
    let mut pod = pod(vec![uses("ctr", "gpu")], template_claim("gpu", "single-gpu"));
    pod["spec"]["runtimeClassName"] = json!("nvidia");
    let evaluation = evaluate_with_claims(&pod, &objects, &Settings::default());
    assert_eq!(
        unresolved(&evaluation),
        vec![format!(
            "gpu-policy: claim \"gpu\" unresolved, container \"ctr\" stays pinned: {reason}"
        )]
    );
    assert_eq!(
        rules_changed(&evaluation),
        vec![(
            RuleId::VisibleDevices,
            "pin NVIDIA_VISIBLE_DEVICES=void in container \"ctr\" (no GPU limit)".to_owned()
        )]
    );
    // The claim may hold a GPU: the reserved class is not refused.
    assert!(messages_of(&evaluation, RuleId::RuntimeClass).is_empty());
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
}

/// A privileged container whose claim cannot be resolved may hold a
/// GPU: warned about (as a privileged GPU container), never denied; a
/// privileged container beside it that uses no claim still is.
#[test]
fn a_privileged_container_with_an_unresolved_claim_is_warned_not_denied() {
    let mut claimed = uses("ctr", "gpu");
    claimed["securityContext"] = json!({"privileged": true});
    let helper = json!({"name": "helper", "securityContext": {"privileged": true}});
    let alone = pod(vec![claimed.clone()], template_claim("gpu", "single-gpu"));
    let evaluation = evaluate_with_claims(&alone, &[], &Settings::default());
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    assert!(
        evaluation.notices.iter().any(|n| n.kind == NoticeKind::PrivilegedGpuContainer),
        "{:?}",
        evaluation.notices
    );
    let with_helper = pod(vec![claimed, helper], template_claim("gpu", "single-gpu"));
    let evaluation = evaluate_with_claims(&with_helper, &[], &Settings::default());
    let denied = messages_of(&evaluation, RuleId::DevicePaths);
    assert_eq!(denied.len(), 1, "{denied:?}");
    assert!(denied[0].contains("container \"helper\" must not be privileged"));
}

#[test]
fn without_any_claim_source_claims_are_unresolved_never_denied() {
    let pod = pod(vec![uses("ctr", "gpu")], template_claim("gpu", "single-gpu"));
    let evaluation = evaluate_pod(&pod);
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    assert_eq!(unresolved(&evaluation).len(), 1);
}

#[test]
fn many_unresolved_claims_share_one_warning() {
    let names = ["a", "b", "c", "d", "e"];
    let containers = names.iter().map(|n| uses(n, n)).collect();
    let claims: Vec<Value> = names.iter().map(|n| template_claim(n, n)[0].clone()).collect();
    let evaluation = evaluate_pod(&pod(containers, Value::Array(claims)));
    assert!(evaluation.violations.is_empty());
    let found = unresolved(&evaluation);
    assert_eq!(found.len(), 4, "{found:?}");
    assert!(found[2].starts_with("gpu-policy: claim \"c\" unresolved"), "{found:?}");
    assert_eq!(
        found[3],
        "gpu-policy: 2 more claims unresolved; the containers that use them stay pinned"
    );
}

#[test]
fn a_reserved_runtime_class_is_accepted_on_a_dra_pod() {
    let mut pod = pod(vec![uses("ctr", "gpu")], template_claim("gpu", "single-gpu"));
    pod["spec"]["runtimeClassName"] = json!("nvidia");
    let evaluation = evaluate_with_claims(&pod, &one_gpu(), &Settings::default());
    assert!(evaluation.violations.is_empty(), "{:?}", evaluation.violations);
    // A class outside the GPU set is still refused on a GPU pod.
    pod["spec"]["runtimeClassName"] = json!("kata");
    let evaluation = evaluate_with_claims(&pod, &one_gpu(), &Settings::default());
    assert_eq!(messages_of(&evaluation, RuleId::RuntimeClass).len(), 1);
}

#[test]
fn a_pod_with_device_plugin_gpus_too_still_gets_the_runtime_class() {
    let mut both = uses("ctr", "gpu");
    both["resources"]["limits"] = json!({"nvidia.com/gpu": 1});
    let pod = pod(vec![both], template_claim("gpu", "single-gpu"));
    let evaluation = evaluate_with_claims(&pod, &one_gpu(), &Settings::default());
    let after = apply(&pod, &evaluation.patch);
    assert_eq!(after["spec"]["runtimeClassName"], "nvidia");
}

#[test]
fn a_non_gpu_claim_does_not_make_a_gpu_container() {
    let objects = vec![template(
        "imex",
        &[("channel", "compute-domain-default-channel.nvidia.com", json!(1))],
    )];
    let pod = pod(vec![uses("ctr", "cd")], template_claim("cd", "imex"));
    let evaluation = evaluate_with_claims(&pod, &objects, &Settings::default());
    assert!(unresolved(&evaluation).is_empty(), "{:?}", evaluation.notices);
    assert_eq!(
        rules_changed(&evaluation),
        vec![(
            RuleId::VisibleDevices,
            "pin NVIDIA_VISIBLE_DEVICES=void in container \"ctr\" (no GPU limit)".to_owned()
        )]
    );
}

#[test]
fn a_request_narrows_the_use_to_one_request() {
    let objects = vec![template(
        "mixed",
        &[("gpu", "gpu.nvidia.com", json!(1)), ("nic", "rdma.example.com", json!(1))],
    )];
    let mut gpu = uses("gpu-user", "c");
    gpu["resources"]["claims"][0]["request"] = json!("gpu");
    let mut nic = uses("nic-user", "c");
    nic["resources"]["claims"][0]["request"] = json!("nic");
    let mut missing = uses("typo", "c");
    missing["resources"]["claims"][0]["request"] = json!("gpus");
    let pod = pod(vec![gpu, nic, missing], template_claim("c", "mixed"));
    let evaluation = evaluate_with_claims(&pod, &objects, &Settings::default());
    assert_eq!(
        rules_changed(&evaluation)
            .into_iter()
            .filter(|(rule, _)| *rule == RuleId::VisibleDevices)
            .map(|(_, summary)| summary)
            .collect::<Vec<_>>(),
        vec!["pin NVIDIA_VISIBLE_DEVICES=void in containers \"nic-user\", \"typo\" (no GPU limit)"]
    );
    assert_eq!(
        unresolved(&evaluation),
        vec![
            "gpu-policy: claim \"c\" unresolved, container \"typo\" stays pinned: \
                 ResourceClaimTemplate \"mixed\" has no request \"gpus\""
        ]
    );
}

#[test]
fn a_named_resource_claim_resolves_too() {
    let objects = vec![json!({"apiVersion": "resource.k8s.io/v1beta1", "kind": "ResourceClaim",
            "metadata": {"name": "shared", "namespace": "default"},
            "spec": {"devices": {"requests": [{"name": "gpu", "deviceClassName": "mig.nvidia.com"}]}}})];
    let pod = pod(vec![uses("ctr", "g")], json!([{"name": "g", "resourceClaimName": "shared"}]));
    let evaluation = evaluate_with_claims(&pod, &objects, &Settings::default());
    assert!(unresolved(&evaluation).is_empty(), "{:?}", evaluation.notices);
    assert!(rules_changed(&evaluation).iter().all(|(rule, _)| *rule != RuleId::VisibleDevices));
}

#[test]
fn an_ephemeral_container_naming_a_gpu_claim_is_still_pinned() {
    let mut pod = pod(vec![uses("ctr", "gpu")], template_claim("gpu", "single-gpu"));
    pod["spec"]["ephemeralContainers"] = json!([uses("debug", "gpu")]);
    let evaluation = evaluate_with_claims(&pod, &one_gpu(), &Settings::default());
    assert!(rules_changed(&evaluation).contains(&(
        RuleId::VisibleDevices,
        "pin NVIDIA_VISIBLE_DEVICES=void in container \"debug\" (no GPU limit)".to_owned()
    )));
}

#[test]
fn gpu_device_classes_are_configurable() {
    let objects = vec![template("t", &[("g", "gpus.example.com", json!(1))])];
    let pod = pod(vec![uses("ctr", "g")], template_claim("g", "t"));
    let pinned = |settings: &Settings| {
        rules_changed(&evaluate_with_claims(&pod, &objects, settings))
            .iter()
            .any(|(rule, _)| *rule == RuleId::VisibleDevices)
    };
    assert!(pinned(&Settings::default()));
    let mut config = Settings::default().config().clone();
    config.gpu_device_classes = vec!["gpus.example.com".to_owned()];
    let settings = Settings::from_config(config).unwrap_or_default();
    assert!(!pinned(&settings));
}

fn sidecar_uses(name: &str, claim: &str) -> Value {
    let mut c = uses(name, claim);
    c["restartPolicy"] = json!("Always");
    c
}

fn with_limit(mut container: Value, count: u64) -> Value {
    container["resources"]["limits"] = json!({"nvidia.com/gpu": count});
    container
}

fn plugin(name: &str, count: u64) -> Value {
    with_limit(plain(name), count)
}

/// (init containers, regular containers, pod claims) -> violations of
/// R2 with templates `six` (6 GPUs), `two` (2), `all` (All).
#[rstest]
// 6 claimed plus 4 through the device plugin is 10, above 8
#[case(vec![], vec![uses("a", "six"), plugin("b", 4)], true)]
// 6 claimed plus 2 is 8: allowed
#[case(vec![], vec![uses("a", "six"), plugin("b", 2)], false)]
// a claim used by two containers is allocated once: 6 + 2
#[case(vec![], vec![uses("a", "six"), uses("b", "six"), plugin("c", 2)], false)]
// a claim used only by a plain init container is held for the pod's
// whole life: 6 + 4 (not max(6, 4))
#[case(vec![uses("i", "six")], vec![plugin("a", 4)], true)]
// a sidecar's claim likewise: 6 + 2 + 1
#[case(vec![sidecar_uses("s", "six")], vec![plugin("a", 2), uses("b", "one")], true)]
// the device-plugin part keeps Kubernetes' formula: the init container's
// 3 is not added to the regular 2 (max 3), so 3 + 2 + 2 = 7
#[case(vec![plugin("i", 3)], vec![plugin("a", 2), uses("b", "two"), uses("c", "two")], false)]
// only DRA: two claims of 6 and 2 is 8, allowed; All is unbounded
#[case(vec![], vec![uses("a", "six"), uses("b", "two")], false)]
#[case(vec![], vec![uses("a", "six"), uses("b", "two"), uses("c", "one")], true)]
#[case(vec![], vec![uses("a", "all")], true)]
fn the_effective_count_adds_claimed_gpus(
    #[case] init: Vec<Value>,
    #[case] regular: Vec<Value>,
    #[case] denied: bool,
) {
    let objects = vec![
        template("six-gpus", &[("g", "gpu.nvidia.com", json!(6))]),
        template(
            "two-gpus",
            &[("g", "gpu.nvidia.com", json!(1)), ("h", "mig.nvidia.com", json!(1))],
        ),
        template("one-gpu", &[("g", "gpu.nvidia.com", json!(1))]),
        template("all-gpus", &[("g", "gpu.nvidia.com", json!("All"))]),
    ];
    let mut pod = pod(
        regular,
        json!([
            {"name": "six", "resourceClaimTemplateName": "six-gpus"},
            {"name": "two", "resourceClaimTemplateName": "two-gpus"},
            {"name": "one", "resourceClaimTemplateName": "one-gpu"},
            {"name": "all", "resourceClaimTemplateName": "all-gpus"},
        ]),
    );
    pod["spec"]["initContainers"] = json!(init);
    let evaluation = evaluate_with_claims(&pod, &objects, &Settings::default());
    assert!(unresolved(&evaluation).is_empty(), "{:?}", evaluation.notices);
    let found = messages_of(&evaluation, RuleId::BoundedRequests);
    assert_eq!(!found.is_empty(), denied, "{found:?}");
    assert!(found.len() <= 1, "{found:?}");
}

#[test]
fn the_count_messages_name_both_parts() {
    let objects = vec![
        template("six-gpus", &[("g", "gpu.nvidia.com", json!(6))]),
        template("all-gpus", &[("g", "gpu.nvidia.com", json!("All"))]),
    ];
    let both = pod(
        vec![uses("a", "six"), plugin("b", 4)],
        json!([{"name": "six", "resourceClaimTemplateName": "six-gpus"}]),
    );
    assert_eq!(
        messages_of(
            &evaluate_with_claims(&both, &objects, &Settings::default()),
            RuleId::BoundedRequests
        ),
        vec![
            "gpu-policy: the pod needs 4 nvidia.com/gpu (init and sidecar containers \
                 included) and 6 GPUs through resource claims, above the maximum of 8 per pod here"
        ]
    );
    let all = pod(
        vec![uses("a", "all")],
        json!([{"name": "all", "resourceClaimTemplateName": "all-gpus"}]),
    );
    assert_eq!(
        messages_of(
            &evaluate_with_claims(&all, &objects, &Settings::default()),
            RuleId::BoundedRequests
        ),
        vec![
            "gpu-policy: the pod's resource claims hold all (allocationMode: All) GPUs, \
                 above the maximum of 8 per pod here; claim fewer devices"
        ]
    );
}

/// Containers using request `gpu` (4 GPUs at most, through either of
/// its subrequests) and request `max` (u64::MAX) of pod claim `c`, and
/// `all` (allocationMode: All): (container name, its uses) -> what each
/// container holds, and the pod.
#[rstest]
// Two subrequests of one request: one of them is allocated.
#[case(vec![("a", vec!["c/gpu/big", "c/gpu/small"])], vec![Exactly(4)], Exactly(4))]
#[case(vec![("a", vec!["c/gpu", "c/gpu/small"])], vec![Exactly(4)], Exactly(4))]
// Shared by two containers: held by each, counted once for the pod.
#[case(vec![("a", vec!["c/gpu"]), ("b", vec!["c/gpu/big"])], vec![Exactly(4), Exactly(4)], Exactly(4))]
// Past u64::MAX the sums saturate; All absorbs.
#[case(vec![("a", vec!["c/gpu"]), ("b", vec!["c/max"])], vec![Exactly(4), Exactly(u64::MAX)], Exactly(u64::MAX))]
#[case(vec![("a", vec!["c", "c/max"])], vec![Exactly(u64::MAX)], Exactly(u64::MAX))]
#[case(vec![("a", vec!["c/max", "all"])], vec![All], All)]
fn each_request_counts_once_however_it_is_named(
    #[case] containers: Vec<(&str, Vec<&str>)>,
    #[case] each: Vec<DraCount>,
    #[case] pod_total: DraCount,
) {
    let objects: Vec<Value> = vec![
        json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
                   "metadata": {"name": "either", "namespace": "default"},
                   "spec": {"spec": {"devices": {"requests": [
                       {"name": "gpu", "firstAvailable": [
                           {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 4},
                           {"name": "small", "deviceClassName": "mig.nvidia.com", "count": 2}]},
                       {"name": "max", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                                   "count": u64::MAX}}]}}}}),
        template("all-gpus", &[("g", "gpu.nvidia.com", json!("All"))]),
    ];
    let containers = containers
        .iter()
        .map(|(name, uses)| {
            let uses: Vec<Value> = uses
                .iter()
                .map(|u| match u.split_once('/') {
                    Some((claim, request)) => json!({"name": claim, "request": request}),
                    None => json!({"name": u}),
                })
                .collect();
            json!({"name": name, "resources": {"claims": uses}})
        })
        .collect();
    let pod = pod(
        containers,
        json!([{"name": "c", "resourceClaimTemplateName": "either"},
                   {"name": "all", "resourceClaimTemplateName": "all-gpus"}]),
    );
    let settings = Settings::default();
    let refs: Vec<&Value> = objects.iter().collect();
    let input = ClaimTables::collect(&refs, "default", &settings);
    let Ok(Some(mut view)) = PodView::parse(leaked(&pod), Shape::Pod, &settings) else {
        panic!("the pod is not read");
    };
    let notices = super::resolve(&mut view, Some(&input), "default");
    assert!(notices.is_empty(), "{notices:?}");
    let held: Vec<Option<DraCount>> = view.containers.iter().map(|c| c.dra_gpus).collect();
    let each: Vec<Option<DraCount>> = each.into_iter().map(Some).collect();
    assert_eq!(held, each);
    assert_eq!(view.dra_gpus, Some(pod_total));
}
