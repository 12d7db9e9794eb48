//! Registry mode in the webhook: docs/architecture.md, "Where registries
//! enter".

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use crate::admission::AdmissionRequest;
use arc_swap::ArcSwapOption;

use super::record::{NAME_BYTES, NAMESPACE_BYTES, UID_BYTES};
use crate::admission::images::{self as lookups, ResolvedImages, needs_of};
use crate::metrics::Metrics;
use crate::policy::ImageNeeds;
use crate::registry::{BoundedLru, Credentials, ImageConfigFacts, Resolver, ResolverOptions, lock};
use crate::settings::{ImageResolution, ResolutionMode, Settings};
use crate::telemetry::bounded_field;

/// Rebuilt when the registries change, given new credentials when their
/// file does.
#[derive(Default)]
pub struct Images {
    current: ArcSwapOption<Built>,
}

struct Built {
    resolver: Resolver,
    /// `registries` and `insecureRegistries`.
    hosts: (Vec<String>, Vec<String>),
    credentials_file: Option<PathBuf>,
    /// The bytes last given to the resolver.
    credentials: Mutex<Option<Vec<u8>>>,
    needs: NeedsCache,
}

/// Image configs already interpreted: reading `NVIDIA_REQUIRE_CUDA` again
/// would cost more than the resolver's cache hit. Bounded in entries (as
/// the resolver's configs) and in [`NEEDS_CACHE_BYTES`].
struct NeedsCache(Mutex<BoundedLru<Arc<ImageConfigFacts>, Result<ImageNeeds, String>>>);

/// An entry is charged its config whole and what it means: ~4.8 KB for a
/// CUDA image (~1 KB of requirement in 30 alternatives), ~39 KiB at most.
/// A full cache of ordinary entries fits (the tests measure both).
const NEEDS_CACHE_BYTES: usize = 8 << 20;

fn needs_heap(facts: &Arc<ImageConfigFacts>, needs: &Result<ImageNeeds, String>) -> usize {
    let meaning = match needs {
        Ok(needs) => needs.heap_bytes(),
        Err(reason) => reason.len(),
    };
    facts.heap_bytes().saturating_add(meaning)
}

impl NeedsCache {
    fn new() -> Self {
        Self(Mutex::new(BoundedLru::new(
            ResolverOptions::default().facts_capacity,
            NEEDS_CACHE_BYTES,
            needs_heap,
        )))
    }

    fn needs_of(&self, facts: &Arc<ImageConfigFacts>) -> Result<ImageNeeds, String> {
        if let Some(needs) = lock(&self.0).get(facts) {
            return needs.clone();
        }
        let needs = needs_of(facts);
        lock(&self.0).put(Arc::clone(facts), needs.clone());
        needs
    }
}

/// An unreadable credentials file is logged (never quoted) and gives no
/// bytes: the caller keeps the credentials it has.
fn read_credentials(path: Option<&Path>, metrics: &Metrics) -> (Credentials, Option<Vec<u8>>) {
    let Some(path) = path else {
        return (Credentials::none(), None);
    };
    match Credentials::read(path) {
        Ok((credentials, bytes)) => {
            metrics.set_reload("registry-credentials", true);
            (credentials, Some(bytes))
        }
        Err(error) => {
            metrics.set_reload("registry-credentials", false);
            tracing::error!(%error, "imageResolution.credentialsFile unreadable; anonymous pulls only");
            (Credentials::none(), None)
        }
    }
}

impl Images {
    /// Follows the settings: a new resolver when the registries change,
    /// else the credentials read again; none outside registry mode.
    pub fn apply(&self, settings: &Settings, metrics: &Metrics) {
        let config: &ImageResolution = &settings.config().image_resolution;
        if config.mode != ResolutionMode::Registry {
            self.current.store(None);
            return;
        }
        let credentials_file = config.credentials_file.clone();
        let hosts = (config.registries.clone(), config.insecure_registries.clone());
        if let Some(built) = self.current.load_full()
            && built.hosts == hosts
        {
            let (credentials, bytes) = read_credentials(credentials_file.as_deref(), metrics);
            if bytes.is_some() || credentials_file.is_none() {
                self.give_credentials(&built, credentials, bytes);
            }
            if built.credentials_file != credentials_file {
                self.current.store(Some(Arc::new(Built {
                    resolver: built.resolver.clone(),
                    hosts: built.hosts.clone(),
                    credentials_file,
                    credentials: Mutex::new(lock(&built.credentials).clone()),
                    needs: NeedsCache::new(),
                })));
            }
            return;
        }
        let (credentials, bytes) = read_credentials(credentials_file.as_deref(), metrics);
        let options = ResolverOptions {
            registries: config.registries.clone(),
            insecure_registries: config.insecure_registries.clone(),
            credentials,
            ..ResolverOptions::default()
        };
        match Resolver::new(options, Some(metrics.images.clone())) {
            Ok(resolver) => {
                tracing::info!(
                    timeout = ?settings.image_timeout(),
                    registries = ?config.registries,
                    insecure_registries = ?config.insecure_registries,
                    credentials_file = ?credentials_file,
                    "image registry resolution on"
                );
                self.current.store(Some(Arc::new(Built {
                    resolver,
                    hosts,
                    credentials_file,
                    credentials: Mutex::new(bytes),
                    needs: NeedsCache::new(),
                })));
            }
            Err(error) => {
                tracing::error!(%error, "no image registry client; the image table applies");
                self.current.store(None);
            }
        }
    }

    fn give_credentials(&self, built: &Built, credentials: Credentials, bytes: Option<Vec<u8>>) {
        let mut last = lock(&built.credentials);
        if *last == bytes {
            return;
        }
        match built.resolver.set_credentials(credentials) {
            Ok(()) => {
                tracing::info!("registry credentials reloaded");
                *last = bytes;
            }
            Err(error) => tracing::error!(%error, "registry credentials not applied"),
        }
    }

    /// A Secret mounted as a volume is updated in place.
    pub fn poll_credentials(&self, metrics: &Metrics) {
        let Some(built) = self.current.load_full() else {
            return;
        };
        let Some(path) = built.credentials_file.as_deref() else {
            return;
        };
        let Ok(bytes) = std::fs::read(path) else {
            return;
        };
        if lock(&built.credentials).as_deref() == Some(bytes.as_slice()) {
            return;
        }
        let (credentials, bytes) = read_credentials(Some(path), metrics);
        if bytes.is_some() {
            self.give_credentials(&built, credentials, bytes);
        }
    }

    /// None outside registry mode (`wanted` is not asked) or with nothing
    /// to look up.
    pub async fn resolve(
        &self,
        request: &AdmissionRequest<'_>,
        settings: &Settings,
        wanted: impl FnOnce() -> Option<lookups::Wanted>,
    ) -> Option<ResolvedImages> {
        let built = self.current.load_full()?;
        let wanted = wanted()?;
        let budget = settings.image_timeout();
        let interpret = |facts: &Arc<ImageConfigFacts>| built.needs.needs_of(facts);
        // Boxed, or its state would be moved with every request's future.
        let (resolved, details) =
            Box::pin(lookups::resolve(&built.resolver, &wanted, budget, interpret)).await;
        if !details.is_empty() {
            // The request's strings, cut as on its decision line.
            let images = details.join("; ");
            tracing::warn!(
                uid = &*bounded_field(&request.uid, UID_BYTES),
                namespace =
                    &*bounded_field(request.namespace.as_deref().unwrap_or(""), NAMESPACE_BYTES),
                name = &*bounded_field(&request.name, NAME_BYTES),
                images = &*bounded_field(&images, IMAGES_LOG_BYTES),
                "image registry gave no usable answer; the image table applies"
            );
        }
        Some(resolved)
    }
}

/// The longest list of images without an answer logged for a request.
const IMAGES_LOG_BYTES: usize = 2048;

#[cfg(test)]
mod tests;
