//! The images of the GPU containers of an object being created, read
//! straight from its pod template: what the webhook looks up in
//! registries before the rules run, on every GPU admission in registry
//! mode. It reads the pod spec, its init and regular containers' `image`
//! and `resources` and nothing else; it builds no [`PodView`](crate::policy::PodView), which
//! would cost more than the cached lookup that follows.
//!
//! A HAMi share makes a GPU container here too; a pod with KAI's fraction
//! annotations is read through the whole view, which knows the share
//! container.
//!
//! A container that uses a DRA claim is a GPU container only when the
//! claim resolves to a GPU request: such a pod is read through the whole
//! view and its claims resolved ([`view_gpu_images`]). Ephemeral
//! containers never hold GPUs and are not read.
//!
//! It answers as [`view_gpu_images`] does for every object the rules can
//! read. A field it reads with the wrong shape means no lookup, as there;
//! one it does not read (a volume, an env list) does not, and the rules
//! then answer that the object cannot be read, which no registry answer
//! changes (an API server never sends such an object: it decodes every
//! Pod before admission).

use std::collections::BTreeSet;

use crate::document::{Json, Object};

use crate::policy::dra::resolution as pod_claims;
use crate::policy::quantity::GpuCount;
use crate::policy::sharing::{GPU_FRACTION, GPU_MEMORY};
use crate::policy::{ClaimFacts, Form, ObjectError, PodView, Shape, Subject};
use crate::settings::Settings;

/// The images of an object's GPU containers, each once, and the raw pod
/// spec they run in.
pub type GpuImages<'t> = (Vec<&'t str>, Object<'t>);

impl<'a> Subject<'a> {
    /// The images of the subject's GPU containers, each once, and the pod
    /// spec they run in: what is looked up in registries before the rules
    /// run ([`gpu_images`]); of an update of a pod, those of them the old
    /// pod does not run. None for a claim, for an update of ephemeral
    /// containers (they never hold GPUs), and for an object without a GPU
    /// container or a readable pod template.
    pub fn gpu_images(
        &self,
        settings: &Settings,
        claims: Option<&dyn ClaimFacts>,
    ) -> Option<GpuImages<'a>> {
        match &self.form {
            Form::Pod { shape, scope, .. } if scope.is_whole() => {
                gpu_images(self.object, *shape, self.namespace, settings, claims)
            }
            // An update: the images no container of the old pod runs.
            Form::Pod { shape, scope, .. } if scope.is_update() => {
                let (images, spec) =
                    gpu_images(self.object, *shape, self.namespace, settings, claims)?;
                let before = images_of(self.old?);
                let changed: Vec<&'a str> = images
                    .into_iter()
                    .filter(|image| !before.contains(image))
                    .collect();
                (!changed.is_empty()).then_some((changed, spec))
            }
            Form::Pod { .. } | Form::Claim(_) => None,
        }
    }
}

/// Every image an old pod's init and regular containers run.
fn images_of(pod: Json<'_>) -> BTreeSet<&str> {
    let spec = pod.get("spec").and_then(Json::as_object);
    ["initContainers", "containers"]
        .into_iter()
        .filter_map(|field| spec?.get(field)?.as_array())
        .flatten()
        .filter_map(|container| container.get("image")?.as_str())
        .collect()
}

/// [`gpu_images`] read through the whole [`PodView`], its DRA claims
/// resolved from `claims`, as the rules read the object.
pub fn view_gpu_images<'t>(
    object: Json<'t>,
    shape: Shape,
    namespace: &str,
    settings: &Settings,
    claims: Option<&dyn ClaimFacts>,
) -> Result<Option<GpuImages<'t>>, ObjectError> {
    let Some(mut view) = PodView::parse(object, shape, settings)? else {
        return Ok(None);
    };
    let _unresolved = pod_claims::resolve(&mut view, claims, namespace);
    let mut images: Vec<&'t str> = Vec::new();
    let mut seen = BTreeSet::new();
    for image in view
        .containers
        .iter()
        .filter(|c| c.is_gpu())
        .filter_map(|c| c.image)
    {
        if seen.insert(image) {
            images.push(image);
        }
    }
    Ok((!images.is_empty()).then_some((images, view.spec)))
}

/// The images of the object's GPU containers, each once in order, and the
/// raw pod spec they run in. None without a GPU container, a pod template
/// or a readable one.
pub fn gpu_images<'t>(
    object: Json<'t>,
    shape: Shape,
    namespace: &str,
    settings: &Settings,
    claims: Option<&dyn ClaimFacts>,
) -> Option<GpuImages<'t>> {
    let mut template = object.as_object()?;
    for key in shape.template_path() {
        template = template.get(key)?.as_object()?;
    }
    let spec = template.get("spec")?.as_object()?;
    // Which container holds a KAI fraction takes the whole view to say.
    let annotations = template
        .get("metadata")
        .and_then(|m| m.get("annotations"))
        .and_then(Json::as_object);
    if settings.config().gpu_sharing.kai_scheduler.enabled
        && annotations.is_some_and(|a| a.contains_key(GPU_FRACTION) || a.contains_key(GPU_MEMORY))
    {
        return view_gpu_images(object, shape, namespace, settings, claims)
            .ok()
            .flatten();
    }
    let mut images: Vec<&'t str> = Vec::new();
    // Each image once, found in logarithmic time however many there are.
    let mut seen = BTreeSet::new();
    for field in ["initContainers", "containers"] {
        let Some(list) = present(spec, field) else {
            continue;
        };
        for container in list.as_array()? {
            let container = container.as_object()?;
            let image = match present(container, "image") {
                Some(image) => Some(image.as_str()?),
                None => None,
            };
            let Some(resources) = present(container, "resources") else {
                continue;
            };
            let resources = resources.as_object()?;
            if present(resources, "claims").is_some() {
                return view_gpu_images(object, shape, namespace, settings, claims)
                    .ok()
                    .flatten();
            }
            if asks_for_gpus(resources, settings)?
                && let Some(image) = image
                && seen.insert(image)
            {
                images.push(image);
            }
        }
    }
    (!images.is_empty()).then_some((images, spec))
}

/// A field that is there and not null.
fn present<'a>(object: Object<'a>, key: &str) -> Option<Json<'a>> {
    object.get(key).filter(|value| !value.is_null())
}

/// Whether `resources` requests or limits a GPU resource with a count
/// other than zero (an unreadable count is a request: `GpuResource::asks`).
/// None when `requests` or `limits` is not an object.
fn asks_for_gpus(resources: Object<'_>, settings: &Settings) -> Option<bool> {
    let mut asks = false;
    for field in ["requests", "limits"] {
        let Some(map) = present(resources, field) else {
            continue;
        };
        asks |= map.as_object()?.iter().any(|(resource, count)| {
            (settings.is_gpu_resource(resource) || settings.is_share_resource(resource))
                && !GpuCount::from_json(count).is_zero()
        });
    }
    Some(asks)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::dra::input::InputClaims;
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
        let claims = InputClaims::collect(&refs, "default", &settings);
        let lean = gpu_images(object, shape, "default", &settings, Some(&claims));
        let view = view_gpu_images(object, shape, "default", &settings, Some(&claims));
        (lean, view.ok().flatten())
    }

    fn images_of(found: &Option<GpuImages<'_>>) -> Option<Vec<String>> {
        found
            .as_ref()
            .map(|(images, _)| images.iter().map(|image| (*image).to_owned()).collect())
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
        let expected = (!expected.is_empty())
            .then(|| expected.iter().map(|image| (*image).to_owned()).collect());
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
        assert_eq!(
            images_of(&lean),
            expected.map(|image| vec![image.to_owned()])
        );
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
}
