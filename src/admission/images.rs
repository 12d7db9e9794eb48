//! Registry mode's lookups, for the webhook and `check --resolve-images`
//! ([`wanted`], [`ResolvedImages`]). Only the GPU containers' images of a
//! Pod or pod template are looked up: no other object waits on a registry.
//! An image without a usable answer is left to the image table, which the
//! rule then says.

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

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Wanted {
    /// Of its GPU containers, each once.
    pub images: Vec<String>,
    /// The platform its pods run on, or why its `kubernetes.io/arch` may
    /// not be looked up: then every image is refused with that reason.
    pub platform: Result<Platform, LabelValueError>,
    /// Whose share of the resolver's queue the lookups take.
    pub namespace: String,
}

/// What is looked up before the subject is evaluated; None: nothing.
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

/// Looks up one object's images within `budget`; the fallbacks' full
/// reasons are returned beside, for the caller to log or print.
pub async fn resolve(
    resolver: &Resolver,
    wanted: &Wanted,
    budget: Duration,
    interpret: impl FnMut(&Arc<ImageConfigFacts>) -> Result<ImageNeeds, String>,
) -> (ResolvedImages, Vec<String>) {
    let lookups = match &wanted.platform {
        Ok(platform) => {
            resolver.resolve_all(&wanted.namespace, &wanted.images, platform, budget).await
        }
        Err(refusal) => resolver.refuse_all(&wanted.images, &refusal.to_string()),
    };
    let mut details = Vec::new();
    let resolved = ResolvedImages::of_lookups(lookups, budget, interpret, &mut details);
    (resolved, details)
}

/// A resolver for one offline run: no metrics, nothing kept past it.
pub fn offline_resolver(config: &ImageResolution) -> Result<Resolver, RegistryError> {
    Resolver::new(ResolverOptions::from_settings(config)?, None)
}

/// The needs of the images read, and why the others are left to the table.
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
    /// `details` collects each fallback's full reason, for the log.
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
                    // Nothing of CUDA: left to the table without a word.
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

/// Whole when it may be a reference, else a quoted prefix (a pod's image
/// may be megabytes long).
fn shown_image(image: &str) -> std::borrow::Cow<'_, str> {
    if image.len() <= MAX_REFERENCE_LEN {
        std::borrow::Cow::Borrowed(image)
    } else {
        std::borrow::Cow::Owned(shown(image))
    }
}

/// What an image config's CUDA envs and label mean, or why they cannot be
/// read (one line, cached with the config).
pub fn needs_of(facts: &ImageConfigFacts) -> Result<ImageNeeds, String> {
    if let Some(oversized) = &facts.oversized {
        return Err(oversized.to_string());
    }
    let cuda = facts.cuda_version.as_ref().map(|v| format!("{CUDA_VERSION_ENV}={v}"));
    let require = facts.require_cuda.as_ref().map(|v| format!("{REQUIRE_CUDA_ENV}={v}"));
    let env = cuda.iter().chain(require.iter()).map(String::as_str);
    let label = facts.cuda_label.as_deref().map(|value| (CUDA_VERSION_LABEL, value));
    ImageNeeds::from_image_config(env, label).map_err(|err| crate::registry::error_text(&err))
}

#[cfg(test)]
mod tests;
