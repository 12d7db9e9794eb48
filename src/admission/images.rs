//! Registry mode's lookups, for the webhook and `check --resolve-images`
//! alike: which images of what gets evaluated are looked up, on which
//! platform, and in whose name ([`wanted`], [`Wanted`]),
//! and one batch of lookups, within its budget, read into
//! [`ResolvedImages`], the `policy::ImageFacts` the rules are given.
//!
//! Only the GPU containers' images of a Pod being created, or of a
//! workload's pod template, are looked up: every other object never waits
//! on a registry. An image without a usable answer is left to the image
//! table, which the rule then says (a warning and the `image-resolution`
//! audit annotation). The resolver itself, and what it keeps between
//! requests, belong to its caller (`server::images` keeps one across
//! reloads; `check` builds one per run with [`offline_resolver`]).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::cuda::needs::{CUDA_VERSION_ENV, CUDA_VERSION_LABEL, REQUIRE_CUDA_ENV};
use crate::policy::{ClaimFacts, ImageFacts, ImageNeeds, Subject};
use crate::registry::{
    ImageConfigFacts, LabelValueError, Lookup, MAX_REFERENCE_LEN, Platform, RegistryError,
    Resolver, ResolverOptions, shown,
};
use crate::settings::{ImageResolution, Settings};

/// What is looked up before one object is evaluated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// The images of its GPU containers, each once.
    pub images: Vec<String>,
    /// The platform its pods run on, or why the pod names none that may be
    /// looked up (its node selector's `kubernetes.io/arch` is no label
    /// value): then every image is refused with that reason, and nothing is
    /// looked up.
    pub platform: Result<Platform, LabelValueError>,
    /// The namespace it lives in: the lookups it starts take that
    /// namespace's share of the resolver's queue.
    pub namespace: String,
}

/// The images of the subject's GPU containers, each once, the platform its
/// pods run on and its namespace: what is looked up before the subject is
/// evaluated, by the webhook and `check --resolve-images` alike. None when
/// there is nothing to look up (`Subject::gpu_images`).
pub fn wanted(
    subject: &Subject<'_>,
    settings: &Settings,
    claims: Option<&dyn ClaimFacts>,
) -> Option<Wanted> {
    let (images, spec) = subject.gpu_images(settings, claims)?;
    Some(Wanted {
        images: images.into_iter().map(str::to_owned).collect(),
        platform: Platform::of_spec_fields(spec),
        namespace: subject.namespace.to_owned(),
    })
}

/// Looks up one object's images within `budget`, each config read through
/// `interpret`; the fallbacks' full reasons are returned beside, for the
/// caller to log or print.
pub async fn resolve(
    resolver: &Resolver,
    wanted: &Wanted,
    budget: Duration,
    interpret: impl FnMut(&Arc<ImageConfigFacts>) -> Result<ImageNeeds, String>,
) -> (ResolvedImages, Vec<String>) {
    let lookups = match &wanted.platform {
        Ok(platform) => {
            resolver
                .resolve_all(&wanted.namespace, &wanted.images, platform, budget)
                .await
        }
        Err(refusal) => resolver.refuse_all(&wanted.images, &refusal.to_string()),
    };
    let mut details = Vec::new();
    let resolved = ResolvedImages::of_lookups(lookups, budget, interpret, &mut details);
    (resolved, details)
}

/// A resolver for one offline run (`check --resolve-images`): no metrics,
/// nothing kept past it.
pub fn offline_resolver(config: &ImageResolution) -> Result<Resolver, RegistryError> {
    Resolver::new(ResolverOptions::from_settings(config)?, None)
}

/// What a registry lookup of one admission found: the needs of the images
/// it could read, and why the others are left to the table.
#[derive(Debug, Default)]
pub struct ResolvedImages {
    needs: HashMap<String, ImageNeeds>,
    fallbacks: HashMap<String, String>,
}

impl ImageFacts for ResolvedImages {
    fn image_needs(&self, image: &str) -> Option<ImageNeeds> {
        self.needs.get(image).cloned()
    }

    fn fallback(&self, image: &str) -> Option<&str> {
        self.fallbacks.get(image).map(String::as_str)
    }
}

impl ResolvedImages {
    /// Reads the answers of one admission, each config through
    /// `interpret`; `details` collects each fallback's full reason, for
    /// the log.
    pub fn of_lookups(
        lookups: Vec<(String, Lookup)>,
        budget: Duration,
        mut interpret: impl FnMut(&Arc<ImageConfigFacts>) -> Result<ImageNeeds, String>,
        details: &mut Vec<String>,
    ) -> Self {
        let mut resolved = Self::default();
        for (image, lookup) in lookups {
            let (short, detail) = match lookup {
                Lookup::Found(facts) => match interpret(&facts) {
                    // An image whose config says nothing of CUDA is left
                    // to the table, without a word: there was an answer.
                    Ok(needs) if needs.is_empty() => continue,
                    Ok(needs) => {
                        resolved.needs.insert(image, needs);
                        continue;
                    }
                    Err(err) => ("unreadable image config".to_owned(), err),
                },
                Lookup::Failed(reason) => ("registry lookup failed".to_owned(), reason),
                // Short, and the whole story: the user reads them.
                Lookup::TooLarge(reason) | Lookup::Refused(reason) => (reason.clone(), reason),
                Lookup::TimedOut => {
                    let short = format!("no registry answer in {budget:?}");
                    (short.clone(), short)
                }
            };
            details.push(format!("{}: {detail}", shown_image(&image)));
            resolved.fallbacks.insert(image, short);
        }
        resolved
    }
}

/// An image for a log line or stderr: whole when it may be a reference,
/// else a quoted prefix (a pod's image may be megabytes long).
fn shown_image(image: &str) -> std::borrow::Cow<'_, str> {
    if image.len() <= MAX_REFERENCE_LEN {
        std::borrow::Cow::Borrowed(image)
    } else {
        std::borrow::Cow::Owned(shown(image))
    }
}

/// What an image config's CUDA envs and label mean, or why they cannot be
/// read (one line, at most `MAX_REASON_BYTES`: it is cached with the
/// config). A value too long to be kept makes the config unreadable.
pub fn needs_of(facts: &ImageConfigFacts) -> Result<ImageNeeds, String> {
    if let Some(oversized) = &facts.oversized {
        return Err(oversized.to_string());
    }
    let cuda = facts
        .cuda_version
        .as_ref()
        .map(|v| format!("{CUDA_VERSION_ENV}={v}"));
    let require = facts
        .require_cuda
        .as_ref()
        .map(|v| format!("{REQUIRE_CUDA_ENV}={v}"));
    let env = cuda.iter().chain(require.iter()).map(String::as_str);
    let label = facts
        .cuda_label
        .as_deref()
        .map(|value| (CUDA_VERSION_LABEL, value));
    ImageNeeds::from_image_config(env, label).map_err(|err| crate::registry::error_text(&err))
}

#[cfg(test)]
mod tests;
