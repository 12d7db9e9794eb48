use super::*;
use crate::policy::dra::tables::ClaimTables;
use crate::policy::testing::{claim_template, leaked};
use rstest::rstest;
use serde_json::{Value, json};

fn gpu(name: &str, image: &str, count: Value) -> Value {
    json!({"name": name, "image": image,
               "resources": {"limits": {"nvidia.com/gpu": count, "cpu": "2"}}})
}

fn pod(init: Vec<Value>, containers: Vec<Value>) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
               "spec": {"initContainers": init, "containers": containers}})
}

/// Both readings, with the claims of `objects`.
fn both(
    object: &Value,
    shape: Shape,
    objects: &[Value],
) -> (Option<GpuImages<'static>>, Option<GpuImages<'static>>) {
    let object = leaked(object);
    let settings = Settings::default();
    let refs: Vec<&Value> = objects.iter().collect();
    let claims = ClaimTables::collect(&refs, "default", &settings);
    let lean = gpu_images(object, shape, "default", &settings, Some(&claims));
    let view = view_gpu_images(object, shape, "default", &settings, Some(&claims));
    (lean, view.ok().flatten())
}

fn images_of(found: &Option<GpuImages<'_>>) -> Option<Vec<String>> {
    found.as_ref().map(|(images, _)| images.iter().map(|image| (*image).to_owned()).collect())
}

#[rstest]
#[case::one_gpu_container(pod(vec![], vec![gpu("a", "train:1", json!(1))]), &["train:1"])]
#[case::cpu_containers_are_not_looked_up(
        pod(vec![], vec![json!({"name": "c", "image": "nvidia/cuda:13.0.2-base"}), gpu("a", "train:1", json!("1"))]),
        &["train:1"]
    )]
#[case::each_image_once_in_order(
        pod(vec![gpu("i", "init:1", json!(1))], vec![gpu("a", "train:1", json!(1)), gpu("b", "init:1", json!(2)), gpu("c", "train:1", json!(1))]),
        &["init:1", "train:1"]
    )]
#[case::a_zero_limit_is_no_request(pod(vec![], vec![gpu("a", "train:1", json!("0"))]), &[])]
#[case::an_unreadable_count_is_one(pod(vec![], vec![gpu("a", "train:1", json!("lots"))]), &["train:1"])]
#[case::a_request_alone(
        pod(vec![], vec![json!({"name": "a", "image": "train:1", "resources": {"requests": {"nvidia.com/gpu": 1}}})]),
        &["train:1"]
    )]
#[case::a_request_beside_a_zero_limit(
        pod(vec![], vec![json!({"name": "a", "image": "train:1", "resources": {"requests": {"nvidia.com/gpu": 1}, "limits": {"nvidia.com/gpu": 0}}})]),
        &["train:1"]
    )]
#[case::mig_slices_are_gpus(
        pod(vec![], vec![json!({"name": "a", "image": "mig:1", "resources": {"limits": {"nvidia.com/mig-1g.5gb": 1}}})]),
        &["mig:1"]
    )]
#[case::a_sidecar(
        pod(vec![{ let mut s = gpu("s", "side:1", json!(1)); s["restartPolicy"] = json!("Always"); s }], vec![]),
        &["side:1"]
    )]
#[case::no_image(pod(vec![], vec![json!({"name": "a", "resources": {"limits": {"nvidia.com/gpu": 1}}})]), &[])]
#[case::null_fields(
        json!({"spec": {"initContainers": null, "containers": [{"name": "a", "image": null, "resources": null}]}}),
        &[]
    )]
#[case::ephemeral_containers_never(
        json!({"spec": {"containers": [], "ephemeralContainers": [gpu("e", "debug:1", json!(1))]}}),
        &[]
    )]
#[case::a_list_that_is_not_one(json!({"spec": {"containers": {"a": 1}}}), &[])]
#[case::an_image_that_is_not_a_string(json!({"spec": {"containers": [gpu("a", "x", json!(1)), {"image": 7}]}}), &[])]
#[case::limits_that_are_not_a_map(
        json!({"spec": {"containers": [gpu("a", "x", json!(1)), {"image": "y", "resources": {"limits": [1]}}]}}),
        &[]
    )]
#[case::no_spec(json!({"metadata": {}}), &[])]
fn pods_read_as_the_view_reads_them(#[case] object: Value, #[case] expected: &[&str]) {
    let (lean, view) = both(&object, Shape::Pod, &[]);
    assert_eq!(images_of(&lean), images_of(&view), "{object}");
    let expected =
        (!expected.is_empty()).then(|| expected.iter().map(|image| (*image).to_owned()).collect());
    assert_eq!(images_of(&lean), expected, "{object}");
    if let (Some((_, lean_spec)), Some((_, view_spec))) = (&lean, &view) {
        assert_eq!(lean_spec, view_spec, "the same spec");
    }
}

#[rstest]
#[case::deployment(Shape::Template, json!({"spec": {"template": {"spec": {"containers": [gpu("a", "train:1", json!(1))]}}}}), Some("train:1"))]
#[case::cron_job(Shape::CronJob, json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [gpu("a", "train:1", json!(1))]}}}}}}), Some("train:1"))]
#[case::pod_template(Shape::PodTemplate, json!({"template": {"spec": {"containers": [gpu("a", "train:1", json!(1))]}}}), Some("train:1"))]
#[case::no_template(Shape::Template, json!({"spec": {"replicas": 1}}), None)]
#[case::a_null_template(Shape::Template, json!({"spec": {"template": null}}), None)]
#[case::a_template_without_spec(Shape::Template, json!({"spec": {"template": {"metadata": {}}}}), None)]
fn templates_read_as_the_view_reads_them(
    #[case] shape: Shape,
    #[case] object: Value,
    #[case] expected: Option<&str>,
) {
    let (lean, view) = both(&object, shape, &[]);
    assert_eq!(images_of(&lean), images_of(&view), "{object}");
    assert_eq!(images_of(&lean), expected.map(|image| vec![image.to_owned()]));
}

/// A claim makes a container a GPU container only when it resolves to
/// a GPU request: the pod is read through the view.
#[test]
fn claims_are_resolved_as_the_view_resolves_them() {
    let with_claim = |template: &str| {
        json!({"spec": {
                "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
                "containers": [
                    {"name": "a", "image": "dra:1", "resources": {"claims": [{"name": "gpu"}]}},
                    {"name": "log", "image": "log:1"}]}})
    };
    let objects = [
        claim_template("gpu-template", "gpu.nvidia.com"),
        claim_template("nic-template", "nic.example.com"),
    ];
    let gpu_claim = with_claim("gpu-template");
    let (lean, view) = both(&gpu_claim, Shape::Pod, &objects);
    assert_eq!(images_of(&lean), Some(vec!["dra:1".to_owned()]));
    assert_eq!(images_of(&lean), images_of(&view));
    for other in [with_claim("nic-template"), with_claim("missing")] {
        let (lean, view) = both(&other, Shape::Pod, &objects);
        assert_eq!(images_of(&lean), None, "{other}");
        assert_eq!(images_of(&view), None, "{other}");
    }
}
