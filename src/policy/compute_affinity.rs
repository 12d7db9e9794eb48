//! R4 `compute-affinity` (mutating): GPU pods land only on cards their CUDA
//! build can run on, with a driver that can run it.
//!
//! Reads: whether the pod is a GPU pod; the images of its GPU containers and
//! what they need (`policy::image_needs`: resolved from the registry when
//! the evaluator has [`super::ImageFacts`], else the image table), with the
//! containers' own `NVIDIA_REQUIRE_CUDA` / `NVIDIA_DISABLE_REQUIRE`; the pod
//! annotation `gpu-policy.io/min-compute-capability`; the namespace's
//! minimum (cluster default raised by the namespace annotation);
//! `spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution`.
//!
//! Changes: the minimum `M.m` is the highest of those sources. The constraint
//! on the GFD labels `nvidia.com/gpu.compute.major` / `.minor` is
//! `major > M-1` when `m == 0`, else `(major > M) OR (major == M AND minor >
//! m-1)`. The images' driver floor (`policy::cuda_requirement`: the CUDA
//! version the driver supports, or a forward-compatible driver branch, on
//! both generations of GFD's CUDA labels) is ANDed with it: each compute
//! alternative with each driver alternative. Node selector terms are ORed and
//! the expressions inside a term ANDed, so the constraint is ANDed into every
//! existing term (multiplying the terms out); adding it as a term of its own
//! would OR it away. A term that already carries one alternative is left as
//! it is, so re-evaluating a mutated pod adds nothing. Preferred affinity and
//! `nodeSelector` are never touched.
//!
//! With a cluster to read, a notice says so when no node's GFD labels meet
//! the minimum (the pod would stay Pending).
//!
//! Without a minimum or a driver floor from any source nothing is injected.
//! A pod annotation that is unreadable or lower than the namespace's minimum
//! is ignored with a notice.

use json_patch::jsonptr::PointerBuf;
use json_patch::{PatchOperation, ReplaceOperation};
use serde_json::{Map, Value, json};

use super::cuda_requirement::DriverFloor;
use super::message::{Notice, NoticeKind};
use super::{Findings, ImageNeeds, Mutation, RuleInput, add};
use crate::settings::{
    ComputeCapability, MIN_COMPUTE_CAPABILITY_ANNOTATION, ResolutionMode, tighter_capability,
};

pub const MAJOR_LABEL: &str = "nvidia.com/gpu.compute.major";
pub const MINOR_LABEL: &str = "nvidia.com/gpu.compute.minor";
const REQUIRED: &str = "requiredDuringSchedulingIgnoredDuringExecution";

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    if !input.scope.is_whole() || !input.view.is_gpu_pod() {
        return findings;
    }
    let images = image_floors(input);
    let minimum = minimum(input, images.compute, &mut findings.notices);
    let compute = minimum
        .as_ref()
        .map(|(minimum, _)| alternatives(*minimum))
        .unwrap_or_default();
    let driver = images
        .driver
        .as_ref()
        .map(|(floor, _)| floor.alternatives())
        .unwrap_or_default();
    let alternatives = product(&compute, &driver);
    if alternatives.is_empty() {
        return findings;
    }
    if let (Some(cluster), Some((minimum, _))) = (input.cluster, &minimum) {
        let present = cluster.compute_capabilities();
        if !present.is_empty() && present.iter().all(|cc| cc < minimum) {
            let listed: Vec<String> = present.iter().map(ToString::to_string).collect();
            findings.notices.push(Notice::new(
                NoticeKind::UnmetComputeCapability,
                format!(
                    "compute-affinity: no node has compute capability >= {minimum} \
                     (nodes have {}); the pod will stay Pending",
                    listed.join(", ")
                ),
            ));
        }
    }
    // One summary per part, so that each warning fits a kubectl line; the
    // first carries the operation.
    let mut summaries = Vec::new();
    let mut words = Vec::new();
    if let Some((minimum, source)) = &minimum {
        summaries.push(format!(
            "require GPU compute capability >= {minimum} ({source})"
        ));
        words.push(format!("compute capability >= {minimum}"));
    }
    if let Some((floor, source)) = &images.driver {
        let same = minimum.as_ref().is_some_and(|(_, s)| s == source);
        let source = if same { "same image" } else { source.as_str() };
        summaries.push(format!("require a driver for {floor} ({source})"));
        words.push(format!("driver for {floor}"));
    }
    let words = words.join(" and ");
    match constrain(input.view.spec, &input.view.spec_pointer, &alternatives) {
        Ok(Some(operation)) => {
            let mut operations = vec![operation];
            for summary in summaries {
                findings.changes.push(Mutation {
                    summary,
                    operations: std::mem::take(&mut operations),
                    overrides_author: false,
                });
            }
        }
        Ok(None) => {}
        Err(field) => findings.violations.push(format!(
            "{field} is malformed, so the {words} constraint cannot be added; fix the affinity"
        )),
    }
    findings
}

/// What the images of the GPU containers need, with the images that need it.
struct ImageFloors {
    compute: Option<(ComputeCapability, String)>,
    driver: Option<(DriverFloor, String)>,
}

/// Registry answers first, else the image table; the container's own env
/// may override the image's requirement. The highest compute floor wins;
/// a node must meet every image's driver floor.
fn image_floors(input: &RuleInput<'_, '_>) -> ImageFloors {
    let mut compute: Option<(ComputeCapability, String)> = None;
    let mut driver: Option<(DriverFloor, Vec<&str>)> = None;
    if input.settings.config().image_resolution.mode == ResolutionMode::Off {
        return ImageFloors {
            compute: None,
            driver: None,
        };
    }
    for container in input.view.containers.iter().filter(|c| c.is_gpu()) {
        let Some(image) = container.image else {
            continue;
        };
        let needs: Vec<ImageNeeds> = match input.images.and_then(|facts| facts.image_needs(image)) {
            Some(resolved) => vec![resolved],
            None => input
                .settings
                .image_needs(image)
                .into_iter()
                .cloned()
                .collect(),
        };
        for need in needs {
            let need = need.in_container(container);
            if let Some(floor) = need.compute_floor()
                && compute.as_ref().is_none_or(|(current, _)| floor > *current)
            {
                compute = Some((floor, format!("image {image}")));
            }
            let Some(floor) = need.driver_floor() else {
                continue;
            };
            driver = match driver {
                None => Some((floor, vec![image])),
                Some((current, mut sources)) => match current.and(&floor) {
                    Some(both) => {
                        if !sources.contains(&image) {
                            sources.push(image);
                        }
                        Some((both, sources))
                    }
                    // No driver meets both (only bounded driver ranges can
                    // exclude each other): the first image's floor stands.
                    None => Some((current, sources)),
                },
            };
        }
    }
    let driver = driver.map(|(floor, sources)| {
        let noun = if sources.len() == 1 {
            "image"
        } else {
            "images"
        };
        (floor, format!("{noun} {}", sources.join(", ")))
    });
    ImageFloors { compute, driver }
}

/// The highest minimum of the namespace, the pod annotation and the images,
/// with a description of where it came from.
fn minimum(
    input: &RuleInput<'_, '_>,
    images: Option<(ComputeCapability, String)>,
    notices: &mut Vec<Notice>,
) -> Option<(ComputeCapability, String)> {
    let mut best: Option<(ComputeCapability, String)> = input
        .namespace
        .min_compute_capability
        .map(|m| (m, "namespace or cluster minimum".to_owned()));
    let mut raise = |candidate: ComputeCapability, source: String| {
        if best
            .as_ref()
            .is_none_or(|(current, _)| candidate > *current)
        {
            best = Some((candidate, source));
        }
    };
    if let Some(raw) = input.view.annotation(MIN_COMPUTE_CAPABILITY_ANNOTATION) {
        match tighter_capability(raw, input.namespace.min_compute_capability) {
            Ok(value) => raise(value, "pod annotation".to_owned()),
            Err(reason) => notices.push(Notice::new(
                NoticeKind::IgnoredAnnotation,
                format!(
                    "pod annotation {MIN_COMPUTE_CAPABILITY_ANNOTATION}={raw:?} ignored: {reason}"
                ),
            )),
        }
    }
    if let Some((value, source)) = images {
        raise(value, source);
    }
    best.filter(|(minimum, _)| *minimum != ComputeCapability::new(0, 0))
}

/// Every compute alternative ANDed with every driver alternative (either
/// side may be absent).
fn product(compute: &[Vec<Value>], driver: &[Vec<Value>]) -> Vec<Vec<Value>> {
    match (compute.is_empty(), driver.is_empty()) {
        (_, true) => compute.to_vec(),
        (true, false) => driver.to_vec(),
        (false, false) => compute
            .iter()
            .flat_map(|c| {
                driver.iter().map(move |d| {
                    let mut both = c.clone();
                    both.extend(d.iter().filter(|e| !c.contains(e)).cloned());
                    both
                })
            })
            .collect(),
    }
}

/// The constraint as alternatives (ORed), each a list of expressions
/// (ANDed). Empty when every card qualifies.
pub fn alternatives(minimum: ComputeCapability) -> Vec<Vec<Value>> {
    let ComputeCapability { major, minor } = minimum;
    let expression = |key: &str, operator: &str, value: String| json!({"key": key, "operator": operator, "values": [value]});
    if minor == 0 {
        if major == 0 {
            return Vec::new();
        }
        return vec![vec![expression(MAJOR_LABEL, "Gt", (major - 1).to_string())]];
    }
    vec![
        vec![expression(MAJOR_LABEL, "Gt", major.to_string())],
        vec![
            expression(MAJOR_LABEL, "In", major.to_string()),
            expression(MINOR_LABEL, "Gt", (minor - 1).to_string()),
        ],
    ]
}

/// The operation that ANDs the alternatives into every required node
/// selector term, or None when every term already carries one. `Err` names
/// a field of the wrong shape.
fn constrain(
    spec: &Map<String, Value>,
    spec_pointer: &PointerBuf,
    alternatives: &[Vec<Value>],
) -> Result<Option<PatchOperation>, String> {
    let new_terms = || -> Value {
        Value::Array(
            alternatives
                .iter()
                .map(|expressions| json!({"matchExpressions": expressions}))
                .collect(),
        )
    };
    let mut path = spec_pointer.clone();
    path.push_back("affinity");
    let Some(affinity) = present(spec, "affinity") else {
        let value = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": new_terms()}}});
        return Ok(Some(add(path, value)));
    };
    let affinity = affinity.as_object().ok_or("spec.affinity")?;
    path.push_back("nodeAffinity");
    let Some(node_affinity) = present(affinity, "nodeAffinity") else {
        let value = json!({REQUIRED: {"nodeSelectorTerms": new_terms()}});
        return Ok(Some(add(path, value)));
    };
    let node_affinity = node_affinity
        .as_object()
        .ok_or("spec.affinity.nodeAffinity")?;
    path.push_back(REQUIRED);
    let Some(required) = present(node_affinity, REQUIRED) else {
        return Ok(Some(add(path, json!({"nodeSelectorTerms": new_terms()}))));
    };
    let required = required
        .as_object()
        .ok_or("spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution")?;
    path.push_back("nodeSelectorTerms");
    let existing = match present(required, "nodeSelectorTerms") {
        None => return Ok(Some(add(path, new_terms()))),
        Some(Value::Array(terms)) if terms.is_empty() => {
            return Ok(Some(add(path, new_terms())));
        }
        Some(Value::Array(terms)) => terms,
        Some(_) => {
            return Err(format!(
                "{}.nodeSelectorTerms",
                "spec.affinity.nodeAffinity.requiredDuringSchedulingIgnoredDuringExecution"
            ));
        }
    };
    let mut changed = false;
    let mut terms = Vec::with_capacity(existing.len() * alternatives.len());
    for (index, term) in existing.iter().enumerate() {
        let field = || format!("spec.affinity.nodeAffinity.{REQUIRED}.nodeSelectorTerms[{index}]");
        let object = term.as_object().ok_or_else(field)?;
        let expressions: &[Value] = match present(object, "matchExpressions") {
            None => &[],
            Some(Value::Array(list)) => list,
            Some(_) => return Err(format!("{}.matchExpressions", field())),
        };
        let carried = alternatives
            .iter()
            .any(|alternative| alternative.iter().all(|e| expressions.contains(e)));
        if carried {
            terms.push(term.clone());
            continue;
        }
        changed = true;
        for alternative in alternatives {
            let mut multiplied = object.clone();
            let mut all = expressions.to_vec();
            // A term may already carry part of an alternative.
            for expression in alternative {
                if !all.contains(expression) {
                    all.push(expression.clone());
                }
            }
            multiplied.insert("matchExpressions".to_owned(), Value::Array(all));
            terms.push(Value::Object(multiplied));
        }
    }
    if !changed {
        return Ok(None);
    }
    Ok(Some(PatchOperation::Replace(ReplaceOperation {
        path,
        value: Value::Array(terms),
    })))
}

fn present<'a>(map: &'a Map<String, Value>, key: &str) -> Option<&'a Value> {
    map.get(key).filter(|value| !value.is_null())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::RuleId;
    use crate::policy::testing::{apply, evaluate_pod, evaluate_pod_in};
    use crate::settings::Settings;
    use rstest::rstest;

    const ID: RuleId = RuleId::ComputeAffinity;

    fn gpu_pod(image: &str) -> Value {
        json!({"spec": {"containers": [
            {"name": "c", "image": image, "resources": {"limits": {"nvidia.com/gpu": 1}}}]}})
    }

    fn terms(pod: &Value) -> Value {
        pod["spec"]["affinity"]["nodeAffinity"][REQUIRED]["nodeSelectorTerms"].clone()
    }

    fn major_gt(value: &str) -> Value {
        json!({"key": MAJOR_LABEL, "operator": "Gt", "values": [value]})
    }

    fn major_in(value: &str) -> Value {
        json!({"key": MAJOR_LABEL, "operator": "In", "values": [value]})
    }

    fn minor_gt(value: &str) -> Value {
        json!({"key": MINOR_LABEL, "operator": "Gt", "values": [value]})
    }

    fn patched(pod: &Value) -> Value {
        apply(pod, &evaluate_pod(pod).patch)
    }

    #[rstest]
    #[case(ComputeCapability::new(5, 0), vec![vec![major_gt("4")]])]
    #[case(ComputeCapability::new(8, 0), vec![vec![major_gt("7")]])]
    #[case(ComputeCapability::new(7, 5), vec![vec![major_gt("7")], vec![major_in("7"), minor_gt("4")]])]
    #[case(ComputeCapability::new(8, 9), vec![vec![major_gt("8")], vec![major_in("8"), minor_gt("8")]])]
    #[case(ComputeCapability::new(0, 0), vec![])]
    #[case(ComputeCapability::new(0, 1), vec![vec![major_gt("0")], vec![major_in("0"), minor_gt("0")]])]
    fn constraint_shapes(#[case] minimum: ComputeCapability, #[case] expected: Vec<Vec<Value>>) {
        assert_eq!(alternatives(minimum), expected);
    }

    #[test]
    fn pod_without_affinity_gets_the_terms() {
        let pod = patched(&gpu_pod("nvidia/cuda:12.6.3-base-ubuntu24.04"));
        assert_eq!(terms(&pod), json!([{"matchExpressions": [major_gt("4")]}]));
    }

    #[test]
    fn two_alternatives_become_two_terms() {
        let pod = patched(&gpu_pod("nvidia/cuda:13.0.0-runtime-ubuntu24.04"));
        assert_eq!(
            terms(&pod),
            json!([{"matchExpressions": [major_gt("7")]},
                   {"matchExpressions": [major_in("7"), minor_gt("4")]}])
        );
    }

    #[test]
    fn constraint_is_anded_into_every_existing_term() {
        let mut pod = gpu_pod("nvidia/cuda:13.0.0-runtime-ubuntu24.04");
        pod["spec"]["affinity"] = json!({
            "nodeAffinity": {
                REQUIRED: {"nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["a"]}]},
                    {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
                ]},
                "preferredDuringSchedulingIgnoredDuringExecution": [
                    {"weight": 1, "preference": {"matchExpressions": [{"key": "x", "operator": "Exists"}]}}
                ],
            },
            "podAntiAffinity": {"futureField": true},
        });
        let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        let fields = json!([{"key": "metadata.name", "operator": "In", "values": ["n1"]}]);
        let result = patched(&pod);
        assert_eq!(
            terms(&result),
            json!([
                {"matchExpressions": [zone, major_gt("7")]},
                {"matchExpressions": [zone, major_in("7"), minor_gt("4")]},
                {"matchFields": fields, "matchExpressions": [major_gt("7")]},
                {"matchFields": fields, "matchExpressions": [major_in("7"), minor_gt("4")]},
            ])
        );
        assert_eq!(
            result["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"],
            pod["spec"]["affinity"]["nodeAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        );
        assert_eq!(
            result["spec"]["affinity"]["podAntiAffinity"],
            json!({"futureField": true})
        );
        // Re-evaluating the result adds nothing.
        assert!(evaluate_pod(&result).patch.is_empty());
    }

    #[test]
    fn expressions_a_term_already_has_are_not_repeated() {
        let mut pod = gpu_pod("nvidia/cuda:13.0.0-runtime-ubuntu24.04");
        pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
            {"matchExpressions": [major_in("7")]}]}}});
        assert_eq!(
            terms(&patched(&pod)),
            json!([{"matchExpressions": [major_in("7"), major_gt("7")]},
                   {"matchExpressions": [major_in("7"), minor_gt("4")]}])
        );
    }

    #[rstest]
    #[case(json!({"podAffinity": {}}))]
    #[case(json!({"nodeAffinity": {}}))]
    #[case(json!({"nodeAffinity": {REQUIRED: {}}}))]
    #[case(json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": []}}}))]
    #[case(json!({"nodeAffinity": null}))]
    fn partial_affinity_is_completed(#[case] affinity: Value) {
        let mut pod = gpu_pod("nvidia/cuda:12.2.0-base");
        pod["spec"]["affinity"] = affinity;
        let result = patched(&pod);
        assert_eq!(
            terms(&result),
            json!([{"matchExpressions": [major_gt("4")]}])
        );
        assert!(evaluate_pod(&result).patch.is_empty());
    }

    #[test]
    fn terms_already_constrained_are_kept() {
        let mut pod = gpu_pod("nvidia/cuda:12.2.0-base");
        pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
            {"matchExpressions": [major_gt("4")]},
            {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}]},
        ]}}});
        let result = patched(&pod);
        assert_eq!(
            terms(&result),
            json!([{"matchExpressions": [major_gt("4")]},
                   {"matchExpressions": [{"key": "zone", "operator": "In", "values": ["b"]}, major_gt("4")]}])
        );
    }

    #[rstest]
    // the highest source wins
    #[case("nvidia/cuda:12.2.0-base", &[], None, Some("require GPU compute capability >= 5.0 (image nvidia/cuda:12.2.0-base)"))]
    #[case("nvidia/cuda:12.2.0-base", &[("gpu-policy.io/min-compute-capability", "8.0")], None,
           Some("require GPU compute capability >= 8.0 (namespace or cluster minimum)"))]
    #[case("nvidia/cuda:12.2.0-base", &[], Some("8.6"), Some("require GPU compute capability >= 8.6 (pod annotation)"))]
    #[case("nvidia/cuda:13.0.0-base", &[], Some("6.0"), Some("require GPU compute capability >= 7.5 (image nvidia/cuda:13.0.0-base)"))]
    // no source: nothing injected
    #[case("registry.example/app:1", &[], None, None)]
    fn minimum_comes_from_the_highest_source(
        #[case] image: &str,
        #[case] namespace: &[(&str, &str)],
        #[case] pod_annotation: Option<&str>,
        #[case] summary: Option<&str>,
    ) {
        let mut pod = gpu_pod(image);
        if let Some(value) = pod_annotation {
            pod["metadata"] = json!({"annotations": {MIN_COMPUTE_CAPABILITY_ANNOTATION: value}});
        }
        let evaluation = evaluate_pod_in(&pod, namespace);
        let found = evaluation
            .changes
            .iter()
            .find(|c| c.rule == ID)
            .map(|c| c.summary.as_str());
        assert_eq!(found, summary);
    }

    #[rstest]
    #[case("eight")]
    #[case("4.0")]
    fn looser_or_unreadable_pod_annotation_is_a_notice(#[case] value: &str) {
        let mut pod = gpu_pod("nvidia/cuda:12.2.0-base");
        pod["metadata"] = json!({"annotations": {MIN_COMPUTE_CAPABILITY_ANNOTATION: value}});
        let evaluation = evaluate_pod_in(&pod, &[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "5.0")]);
        assert_eq!(evaluation.notices.len(), 1, "{:?}", evaluation.notices);
        assert!(evaluation.notices[0].message.contains("ignored"));
        let found = evaluation
            .changes
            .iter()
            .find(|c| c.rule == ID)
            .map(|c| c.summary.clone());
        assert_eq!(
            found.as_deref(),
            Some("require GPU compute capability >= 5.0 (namespace or cluster minimum)")
        );
    }

    #[test]
    fn non_gpu_pods_and_non_gpu_images_do_not_count() {
        let cpu =
            json!({"spec": {"containers": [{"name": "c", "image": "nvidia/cuda:13.0.0-base"}]}});
        assert!(evaluate_pod(&cpu).changes.iter().all(|c| c.rule != ID));
        let sidecar_image = json!({"spec": {"containers": [
            {"name": "gpu", "image": "registry.example/app", "resources": {"limits": {"nvidia.com/gpu": 1}}},
            {"name": "side", "image": "nvidia/cuda:13.0.0-base"}]}});
        assert!(
            evaluate_pod(&sidecar_image)
                .changes
                .iter()
                .all(|c| c.rule != ID)
        );
    }

    #[rstest]
    #[case(json!("fast"))]
    #[case(json!({"nodeAffinity": []}))]
    #[case(json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": {}}}}))]
    #[case(json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": 1}]}}}))]
    fn malformed_affinity_is_a_violation(#[case] affinity: Value) {
        let mut pod = gpu_pod("nvidia/cuda:12.2.0-base");
        pod["spec"]["affinity"] = affinity;
        let evaluation = evaluate_pod(&pod);
        assert!(
            evaluation
                .violations
                .iter()
                .any(|v| v.rule == ID && v.message.contains("malformed"))
        );
    }

    #[rstest]
    #[case(&[(6, 1), (7, 0)], true)]
    #[case(&[(6, 1), (8, 0)], false)]
    #[case(&[], false)]
    fn warns_when_no_node_meets_the_minimum(#[case] nodes: &[(u32, u32)], #[case] warned: bool) {
        use crate::policy::cluster::{ClusterSnapshot, NodeGpus};
        let cluster = ClusterSnapshot {
            nodes: nodes
                .iter()
                .enumerate()
                .map(|(i, (major, minor))| {
                    (
                        format!("node-{i}"),
                        NodeGpus {
                            allocatable: [("nvidia.com/gpu".to_owned(), 1)].into_iter().collect(),
                            compute_capability: Some(ComputeCapability::new(*major, *minor)),
                        },
                    )
                })
                .collect(),
            ..ClusterSnapshot::default()
        };
        let pod = gpu_pod("nvidia/cuda:13.0.0-runtime-ubuntu24.04");
        let evaluation = crate::policy::testing::evaluate_in_cluster(&pod, &cluster);
        let notice = evaluation
            .notices
            .iter()
            .find(|n| n.message.contains("no node has"));
        assert_eq!(notice.is_some(), warned, "{:?}", evaluation.notices);
        if warned {
            assert_eq!(
                notice.map(|n| n.message.as_str()),
                Some(
                    "gpu-policy: compute-affinity: no node has compute capability >= 7.5 (nodes have 6.1, 7.0); the pod will stay Pending"
                )
            );
        }
        // The constraint is injected either way.
        assert!(evaluation.changes.iter().any(|c| c.rule == ID));
    }

    fn driver_gt(key: &str, value: &str) -> Value {
        json!({"key": key, "operator": "Gt", "values": [value]})
    }

    #[test]
    fn ngc_images_get_the_floor_of_their_cuda_version() {
        let evaluation = evaluate_pod(&gpu_pod("nvcr.io/nvidia/pytorch:25.12-py3"));
        let summaries: Vec<&str> = evaluation
            .changes
            .iter()
            .filter(|c| c.rule == ID)
            .map(|c| c.summary.as_str())
            .collect();
        assert_eq!(
            summaries,
            vec!["require GPU compute capability >= 7.5 (image nvcr.io/nvidia/pytorch:25.12-py3)"]
        );
        let pod = patched(&gpu_pod("nvcr.io/nvidia/pytorch:24.05-py3"));
        assert_eq!(terms(&pod), json!([{"matchExpressions": [major_gt("4")]}]));
    }

    /// The CUDA 13.0 vLLM image: compute 7.5 (two alternatives) times its
    /// driver floor (CUDA 13.0, or a forward-compatible branch, on both label
    /// generations: four alternatives), ANDed into each existing term.
    #[test]
    fn the_driver_floor_multiplies_into_every_term() {
        use crate::policy::cuda_requirement::{
            DRIVER_MAJOR_LABEL, OLD_DRIVER_MAJOR_LABEL, OLD_RUNTIME_MAJOR_LABEL,
            RUNTIME_MAJOR_LABEL,
        };
        let mut pod = gpu_pod("vllm/vllm-openai:v0.11.0-cu130");
        let zone = json!({"key": "zone", "operator": "In", "values": ["a"]});
        pod["spec"]["affinity"] = json!({"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": [
            {"matchExpressions": [zone.clone()]}]}}});
        let evaluation = evaluate_pod(&pod);
        assert_eq!(
            summaries(&evaluation),
            vec![
                "require GPU compute capability >= 7.5 (image vllm/vllm-openai:v0.11.0-cu130)",
                "require a driver for CUDA 13.0 or branch 535, 550, 565, 570, 575 (same image)",
            ]
        );
        let result = apply(&pod, &evaluation.patch);
        let branches = ["535", "550", "565", "570", "575"];
        let drivers = [
            driver_gt(RUNTIME_MAJOR_LABEL, "12"),
            json!({"key": DRIVER_MAJOR_LABEL, "operator": "In", "values": branches}),
            driver_gt(OLD_RUNTIME_MAJOR_LABEL, "12"),
            json!({"key": OLD_DRIVER_MAJOR_LABEL, "operator": "In", "values": branches}),
        ];
        let mut expected = Vec::new();
        for compute in [vec![major_gt("7")], vec![major_in("7"), minor_gt("4")]] {
            for driver in &drivers {
                let mut expressions = vec![zone.clone()];
                expressions.extend(compute.clone());
                expressions.push(driver.clone());
                expected.push(json!({"matchExpressions": expressions}));
            }
        }
        assert_eq!(terms(&result), Value::Array(expected));
        // Re-evaluating the result adds nothing.
        assert!(evaluate_pod(&result).patch.is_empty());
    }

    #[rstest]
    // The container turns the toolkit's check off: no driver floor.
    #[case(json!([{"name": "NVIDIA_DISABLE_REQUIRE", "value": "true"}]), &[])]
    // The container's own requirement replaces the image's.
    #[case(json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda>=12.9"}]), &["require a driver for CUDA 12.9 (same image)"])]
    // Unreadable, or a value from a reference: the image's stands.
    #[case(json!([{"name": "NVIDIA_REQUIRE_CUDA", "value": "cuda=>1"}]), &["require a driver for CUDA 12.8 or branch 470, 535, 550, 560, 565 (same image)"])]
    #[case(json!([{"name": "NVIDIA_REQUIRE_CUDA", "valueFrom": {"configMapKeyRef": {"name": "c", "key": "k"}}}]), &["require a driver for CUDA 12.8 or branch 470, 535, 550, 560, 565 (same image)"])]
    fn the_container_env_overrides_the_image(#[case] env: Value, #[case] driver: &[&str]) {
        let mut pod = gpu_pod("vllm/vllm-openai:v0.10.2-cu128");
        pod["spec"]["containers"][0]["env"] = env;
        let mut expected =
            vec!["require GPU compute capability >= 5.0 (image vllm/vllm-openai:v0.10.2-cu128)"];
        expected.extend(driver);
        assert_eq!(summaries(&evaluate_pod(&pod)), expected);
    }

    fn summaries(evaluation: &crate::policy::Evaluation) -> Vec<&str> {
        evaluation
            .changes
            .iter()
            .filter(|c| c.rule == ID)
            .map(|c| c.summary.as_str())
            .collect()
    }

    struct Resolved;

    impl crate::policy::ImageFacts for Resolved {
        fn image_needs(&self, image: &str) -> Option<ImageNeeds> {
            (image == "registry.example/in-house:1").then(|| {
                let env = ["CUDA_VERSION=13.1.0", "NVIDIA_REQUIRE_CUDA=cuda>=13.1"];
                ImageNeeds::from_image_config(env, []).unwrap_or_default()
            })
        }
    }

    #[test]
    fn mode_off_ignores_images_but_not_the_annotation() {
        let settings = Settings::from_yaml("imageResolution: {mode: 'off'}", "c.yaml");
        let settings = settings.unwrap_or_default();
        let mut pod = gpu_pod("vllm/vllm-openai:v0.11.0-cu130");
        assert!(
            crate::policy::testing::evaluate_with(&pod, &settings)
                .changes
                .iter()
                .all(|c| c.rule != ID)
        );
        pod["metadata"] = json!({"annotations": {MIN_COMPUTE_CAPABILITY_ANNOTATION: "8.0"}});
        let evaluation = crate::policy::testing::evaluate_with(&pod, &settings);
        assert_eq!(
            summaries(&evaluation),
            vec!["require GPU compute capability >= 8.0 (pod annotation)"]
        );
    }

    /// An in-house image built FROM an NGC image: the registry answer
    /// applies; an image it does not know falls back to the table.
    #[test]
    fn resolved_images_come_before_the_table() {
        use crate::policy::testing::evaluate_with_images;
        let pod = json!({"spec": {"containers": [
            {"name": "a", "image": "registry.example/in-house:1", "resources": {"limits": {"nvidia.com/gpu": 1}}},
            {"name": "b", "image": "nvidia/cuda:12.6.3-base-ubuntu24.04", "resources": {"limits": {"nvidia.com/gpu": 1}}}]}});
        let evaluation = evaluate_with_images(&pod, &Resolved);
        assert_eq!(
            summaries(&evaluation),
            vec![
                "require GPU compute capability >= 7.5 (image registry.example/in-house:1)",
                "require a driver for CUDA 13.1 (same image)",
            ]
        );
        assert!(evaluate_pod(&pod).changes.iter().any(|c| c.summary
            == "require GPU compute capability >= 5.0 (image nvidia/cuda:12.6.3-base-ubuntu24.04)"));
    }
}
