//! What the images of some of a pod's GPU containers need, for R4's two halves: node affinity
//! ([`compute_affinity`](super)) and the claims ([`super::dra_floors`]).
//!
//! Reads: the containers' `image`, their `NVIDIA_REQUIRE_CUDA` and
//! `NVIDIA_DISABLE_REQUIRE` env; what the registry said of an image (when the
//! evaluator has [`crate::policy::ImageFacts`]), else the image table.

use std::collections::BTreeSet;

use crate::cuda::requirement::DriverFloor;
use crate::cuda::{ComputeCapability, ImageNeeds};
use crate::policy::container::Container;
use crate::policy::message::{Notice, NoticeKind};
use crate::policy::rules::rule::RuleInput;
use crate::settings::{MIN_COMPUTE_CAPABILITY_ANNOTATION, ResolutionMode, tighter_capability};

/// Which containers a part of the rule looks at.
pub(super) type Containers<'f> = &'f dyn Fn(&Container<'_>) -> bool;

/// What the images of some GPU containers need, with the images that need it.
pub(super) struct ImageFloors<'v> {
    pub compute: Option<(ComputeCapability, String)>,
    pub driver: Option<(DriverFloor, String)>,
    /// Every image that gave a floor.
    pub images: Vec<&'v str>,
}

/// Registry answers first (when `resolved`), else the image table, with a notice for an image whose
/// lookup gave no usable answer; the container's own env may override the image's requirement. The
/// highest compute floor wins; a node must meet every image's driver floor.
pub(super) fn image_floors<'v>(
    input: &RuleInput<'_, 'v>,
    resolved: bool,
    which: Containers<'_>,
    notices: &mut Vec<Notice>,
) -> ImageFloors<'v> {
    let mut compute: Option<(ComputeCapability, String)> = None;
    let mut driver: Option<(DriverFloor, Vec<&str>)> = None;
    let mut images: Vec<&'v str> = Vec::new();
    // `images` and the driver floor's sources as sets: each image is
    // looked for in logarithmic time, however many containers name one.
    let mut in_images = BTreeSet::new();
    let mut in_sources = BTreeSet::new();
    if input.settings.config().image_resolution.mode == ResolutionMode::Off {
        return ImageFloors { compute: None, driver: None, images };
    }
    for container in input.view.containers.iter().filter(|c| which(c)) {
        let Some(image) = container.image else {
            continue;
        };
        let facts = input.images.filter(|_| resolved);
        let needs: Vec<ImageNeeds> = match facts.and_then(|facts| facts.image_needs(image)) {
            Some(resolved) => vec![resolved],
            None => {
                if let Some(reason) = facts.and_then(|facts| facts.fallback(image))
                    && !notices.iter().any(|n| {
                        n.kind == NoticeKind::ImageTableFallback && n.message.body().contains(image)
                    })
                {
                    notices.push(Notice::new(
                        NoticeKind::ImageTableFallback,
                        format!("compute-affinity: table used for {image}: {reason}"),
                    ));
                }
                input.settings.image_needs(image).into_iter().cloned().collect()
            }
        };
        for need in needs {
            let need = need.with_container_env(
                container
                    .env
                    .iter()
                    .flatten()
                    .filter_map(|entry| Some((entry.name, entry.literal()?))),
            );
            let compute_floor = need.compute_floor();
            let driver_floor = need.driver_floor();
            if (compute_floor.is_some() || driver_floor.is_some()) && in_images.insert(image) {
                images.push(image);
            }
            if let Some(floor) = compute_floor
                && compute.as_ref().is_none_or(|(current, _)| floor > *current)
            {
                compute = Some((floor, format!("image {image}")));
            }
            let Some(floor) = driver_floor else {
                continue;
            };
            driver = match driver {
                None => {
                    in_sources.insert(image);
                    Some((floor, vec![image]))
                }
                Some((current, mut sources)) => match current.and(&floor) {
                    Some(both) => {
                        if in_sources.insert(image) {
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
        let noun = if sources.len() == 1 { "image" } else { "images" };
        (floor, format!("{noun} {}", sources.join(", ")))
    });
    ImageFloors { compute, driver, images }
}

/// The higher of a minimum and an image's floor, with its source; None when neither asks anything.
pub(super) fn raise(
    base: Option<(ComputeCapability, String)>,
    images: Option<(ComputeCapability, String)>,
) -> Option<(ComputeCapability, String)> {
    let best = match (base, images) {
        (Some(base), Some(image)) if image.0 > base.0 => Some(image),
        (Some(base), _) => Some(base),
        (None, image) => image,
    };
    best.filter(|(minimum, _)| *minimum != ComputeCapability::new(0, 0))
}

/// The higher of the namespace's minimum and the pod annotation's, with
/// where it came from; the images' floors are raised onto it ([`raise`]).
pub(super) fn base_minimum(
    input: &RuleInput<'_, '_>,
    notices: &mut Vec<Notice>,
) -> Option<(ComputeCapability, String)> {
    let namespace = input
        .namespace
        .min_compute_capability
        .map(|m| (m, "namespace or cluster minimum".to_owned()));
    let Some(raw) = input.view.annotation(MIN_COMPUTE_CAPABILITY_ANNOTATION) else {
        return namespace;
    };
    match tighter_capability(raw, input.namespace.min_compute_capability) {
        Ok(value) if namespace.as_ref().is_none_or(|(current, _)| value > *current) => {
            Some((value, "pod annotation".to_owned()))
        }
        Ok(_) => namespace,
        Err(reason) => {
            notices.push(Notice::new(
                NoticeKind::IgnoredAnnotation,
                format!(
                    "pod annotation {MIN_COMPUTE_CAPABILITY_ANNOTATION}={raw:?} ignored: {reason}"
                ),
            ));
            namespace
        }
    }
}
