//! Registry mode in the webhook (`imageResolution.mode: registry`): the
//! resolver the server keeps across reloads, its credentials, and the
//! lookups made before an admission is evaluated (which images, and what
//! their answers mean, is `admission::images`'). A lookup that outlives
//! `imageResolution.timeout` goes on in the background and fills the
//! resolver's caches for the next admission.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};

use crate::admission::AdmissionRequest;
use arc_swap::ArcSwapOption;

use super::record::{NAME_BYTES, NAMESPACE_BYTES, UID_BYTES};
use crate::admission::images::{self as lookups, ResolvedImages, needs_of};
use crate::metrics::Metrics;
use crate::policy::ImageNeeds;
use crate::registry::{BoundedLru, Credentials, ImageConfigFacts, Resolver, ResolverOptions};
use crate::settings::{ImageResolution, ResolutionMode, Settings};
use crate::telemetry::bounded_field;

/// The resolver of registry mode, rebuilt when the registries it speaks to
/// change and given new credentials when their file does.
#[derive(Default)]
pub struct Images {
    current: ArcSwapOption<Built>,
}

struct Built {
    resolver: Resolver,
    /// The `registries` and `insecureRegistries` it was built with.
    hosts: (Vec<String>, Vec<String>),
    credentials_file: Option<PathBuf>,
    /// The credentials file's bytes last given to the resolver.
    credentials: Mutex<Option<Vec<u8>>>,
    /// What the image configs the resolver answers with mean, read once
    /// per config.
    needs: NeedsCache,
}

/// Image configs already interpreted: the resolver answers a cached image
/// with the same facts every time, and reading its `NVIDIA_REQUIRE_CUDA`
/// again would cost more than the cache hit itself. Bounded in entries (as
/// many as the resolver keeps configs) and in [`NEEDS_CACHE_BYTES`].
struct NeedsCache(Mutex<BoundedLru<Arc<ImageConfigFacts>, Result<ImageNeeds, String>>>);

/// The bytes the cache of interpreted configs may hold. An entry is
/// charged its config whole (the resolver's cache may have let it go) and
/// what the config means: ~4.8 KB for a CUDA image, whose requirement of
/// ~1 KB is parsed into 30 alternatives; at most ~39 KiB (three values of
/// 4 KiB, the requirement in hundreds of alternatives). A full cache of
/// ordinary entries fits (the tests measure both).
const NEEDS_CACHE_BYTES: usize = 8 << 20;

/// The heap bytes of one interpreted config, its key's included.
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

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Reads the credentials file; an unreadable one is logged (never quoted)
/// and gives no bytes: the caller keeps the credentials it has (none at
/// start).
fn read_credentials(path: Option<&Path>, metrics: &Metrics) -> (Credentials, Option<Vec<u8>>) {
    let Some(path) = path else {
        return (Credentials::none(), None);
    };
    let read = std::fs::read(path)
        .map_err(|err| format!("cannot read {}: {err}", path.display()))
        .and_then(|bytes| {
            Credentials::from_docker_config(&bytes)
                .map(|credentials| (credentials, bytes))
                .map_err(|err| format!("{}: {err}", path.display()))
        });
    match read {
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
    /// Follows the settings: a resolver in registry mode (a new one when
    /// the registries or the plain-HTTP ones change; otherwise the
    /// credentials are read again), none in the other modes.
    pub fn apply(&self, settings: &Settings, metrics: &Metrics) {
        let config: &ImageResolution = &settings.config().image_resolution;
        if config.mode != ResolutionMode::Registry {
            self.current.store(None);
            return;
        }
        let credentials_file = config.credentials_file.clone();
        let hosts = (
            config.registries.clone(),
            config.insecure_registries.clone(),
        );
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

    /// Reads the credentials file again when it changed on disk (a Secret
    /// mounted as a volume is updated in place).
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

    /// Looks up the images `wanted` names (the GPU images of what the
    /// request puts under evaluation, or of the pod its claim is made
    /// for) within the configured budget, and logs those without a usable
    /// answer once. None when registry mode is off (`wanted` is not asked
    /// then) or there is nothing to look up.
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
        // Boxed: only registry mode waits on it, and inline its state would
        // be moved with the future of every request.
        let (resolved, details) = Box::pin(lookups::resolve(
            &built.resolver,
            &wanted,
            budget,
            interpret,
        ))
        .await;
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

/// The longest list of images (with why each got no answer) logged for
/// one request.
const IMAGES_LOG_BYTES: usize = 2048;

#[cfg(test)]
mod tests;
