//! The images of the GPU containers of an object being created, read from its pod template: what
//! the webhook looks up in registries before the rules run, in registry mode. It reads the init and
//! regular containers' `image` and `resources` alone, without building a [`PodView`] (which costs
//! more than the cached lookup that follows), and answers as [`view_gpu_images`] does for every
//! object the rules can read.
//!
//! A HAMi share makes a GPU container here too. A pod with KAI's fraction annotations, or with a
//! container that uses a DRA claim, is read through the whole view ([`view_gpu_images`]), which
//! knows the share container and resolves the claims. A field read with the wrong shape means no
//! lookup; one not read here is the rules' to refuse.

use std::collections::BTreeSet;

use crate::document::{Json, Object};

use crate::policy::dra::resolution as pod_claims;
use crate::policy::fields::member;
use crate::policy::quantity::GpuCount;
use crate::policy::sharing::{GPU_FRACTION, GPU_MEMORY};
use crate::policy::{ClaimFacts, Form, ObjectError, PodView, Shape, Subject};
use crate::settings::Settings;

/// The images of an object's GPU containers, each once, and the raw pod spec they run in.
pub type GpuImages<'t> = (Vec<&'t str>, Object<'t>);

impl<'a> Subject<'a> {
    /// [`gpu_images`] of the subject; of an update of a pod, those the old pod does not run. None
    /// for a claim, for an update of ephemeral containers, and for an object without a GPU
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
                let changed: Vec<&'a str> =
                    images.into_iter().filter(|image| !before.contains(image)).collect();
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

/// [`gpu_images`] through the whole [`PodView`], claims resolved from `claims`.
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
    for image in view.containers.iter().filter(|c| c.is_gpu()).filter_map(|c| c.image) {
        if seen.insert(image) {
            images.push(image);
        }
    }
    Ok((!images.is_empty()).then_some((images, view.spec)))
}

/// The images of the object's GPU containers, each once in order, and the raw pod spec they run in.
/// None without a GPU container, a pod template or a readable one.
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
    let annotations =
        template.get("metadata").and_then(|m| m.get("annotations")).and_then(Json::as_object);
    if settings.config().gpu_sharing.kai_scheduler.enabled
        && annotations.is_some_and(|a| a.contains_key(GPU_FRACTION) || a.contains_key(GPU_MEMORY))
    {
        return view_gpu_images(object, shape, namespace, settings, claims).ok().flatten();
    }
    let mut images: Vec<&'t str> = Vec::new();
    let mut seen = BTreeSet::new();
    for field in ["initContainers", "containers"] {
        let Some(list) = member(spec, field) else {
            continue;
        };
        for container in list.as_array()? {
            let container = container.as_object()?;
            let image = match member(container, "image") {
                Some(image) => Some(image.as_str()?),
                None => None,
            };
            let Some(resources) = member(container, "resources") else {
                continue;
            };
            let resources = resources.as_object()?;
            if member(resources, "claims").is_some() {
                return view_gpu_images(object, shape, namespace, settings, claims).ok().flatten();
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

/// Whether `resources` requests or limits a GPU resource with a count
/// other than zero (an unreadable count is a request: `GpuResource::asks`).
/// None when `requests` or `limits` is not an object.
fn asks_for_gpus(resources: Object<'_>, settings: &Settings) -> Option<bool> {
    let mut asks = false;
    for field in ["requests", "limits"] {
        let Some(map) = member(resources, field) else {
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
mod tests;
