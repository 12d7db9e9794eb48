//! The resolver: caches, one fetch per image however many admissions wait,
//! a time budget per admission (docs/architecture.md, "Where registries
//! enter"). A failure is remembered for [`ResolverOptions::negative_ttl`],
//! so a hostile image costs one fetch per period, not one per admission.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use arc_swap::ArcSwap;
use oci_client::Reference;
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::credentials::Credentials;
use super::dns::{Dns, DnsOptions};
use super::error::RegistryError;
use super::hosts::HostPolicy;
use super::in_flight::{Answer, InFlight, Places};
use super::lookup::{Failure, Lookup};
use super::lookup_cache::{CacheBytes, Caches, LookupKey, ParsedReference, TagState, lock};
use super::lookup_metrics::ResolverMetrics;
use super::oci::ImageConfigFacts;
use super::platform::Platform;
use super::pod_strings::shown;
use super::reference::{MAX_REFERENCE_LEN, TOO_LONG, parse_reference};
use super::transport::{Timeouts, Transport};

/// How the resolver reaches registries and how long it remembers.
#[derive(Debug, Clone)]
pub struct ResolverOptions {
    /// The registry hosts that may be contacted (`host`, `host:port`,
    /// `*.suffix`): `imageResolution.registries`.
    pub registries: Vec<String>,
    /// Which of them are spoken to over plain HTTP.
    pub insecure_registries: Vec<String>,
    pub credentials: Credentials,
    /// How long a tag's digest is trusted before the registry is asked
    /// again (a HEAD; the config of a known digest is never fetched again).
    pub tag_ttl: Duration,
    /// How long a failed lookup is answered from the cache.
    pub negative_ttl: Duration,
    /// The most a fetch may take, in the background, before it fails
    /// (waiting for its turn included).
    pub fetch_deadline: Duration,
    /// More wait for a turn, so many new images never become as many
    /// connections. Each fetch holds at most one document of 4 MiB: this
    /// many times that is the most registry answers take in memory.
    pub max_concurrent_fetches: usize,
    /// This and the next two: docs/operations.md, "Registry mode" ("The
    /// lookup queue").
    pub max_pending_lookups: usize,
    pub max_lookups_per_namespace: usize,
    /// So that a registry that never answers holds at most this many fetch
    /// turns, never all of them.
    pub max_lookups_per_registry: usize,
    /// How long to wait to connect, and between two reads of an answer.
    pub connect_timeout: Duration,
    pub read_timeout: Duration,
    pub tag_capacity: usize,
    pub facts_capacity: usize,
    /// What each cache may hold in bytes, besides its entries.
    pub cache_bytes: CacheBytes,
    /// Where DNS questions go: `/etc/resolv.conf`'s name servers unless a
    /// library user or a test says otherwise; the configuration file does
    /// not set it.
    pub dns: DnsOptions,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        Self {
            registries: crate::settings::default_registries(),
            insecure_registries: Vec::new(),
            credentials: Credentials::none(),
            tag_ttl: Duration::from_secs(5 * 60),
            negative_ttl: Duration::from_secs(30),
            fetch_deadline: Duration::from_secs(10),
            max_concurrent_fetches: 8,
            max_pending_lookups: 64,
            max_lookups_per_namespace: 16,
            max_lookups_per_registry: 4,
            connect_timeout: Duration::from_secs(3),
            read_timeout: Duration::from_secs(5),
            tag_capacity: 1024,
            facts_capacity: 1024,
            cache_bytes: CacheBytes::DEFAULT,
            dns: DnsOptions::default(),
        }
    }
}

impl ResolverOptions {
    /// The options of the (already checked) `imageResolution` block; the
    /// rest defaults.
    pub fn from_settings(config: &crate::settings::ImageResolution) -> Result<Self, RegistryError> {
        let credentials = match &config.credentials_file {
            Some(path) => Credentials::load(path)?,
            None => Credentials::none(),
        };
        Ok(Self {
            registries: config.registries.clone(),
            insecure_registries: config.insecure_registries.clone(),
            credentials,
            ..Self::default()
        })
    }
}

fn transport(
    options: &ResolverOptions,
    hosts: &Arc<HostPolicy>,
    dns: &Dns,
    credentials: Credentials,
) -> Result<Transport, RegistryError> {
    let _ = rustls::crypto::ring::default_provider().install_default();
    let timeouts = Timeouts { connect: options.connect_timeout, read: options.read_timeout };
    Transport::new(Arc::clone(hosts), dns, credentials, timeouts)
}

pub(super) struct Inner {
    /// The client with the credentials it is given, swapped by
    /// [`Resolver::set_credentials`] (tokens belong to credentials).
    pub(super) transport: ArcSwap<Transport>,
    hosts: Arc<HostPolicy>,
    /// Shared by every client: the name servers and their cache.
    dns: Dns,
    options: ResolverOptions,
    caches: Mutex<Caches>,
    in_flight: Mutex<InFlight>,
    turns: Semaphore,
    metrics: Option<ResolverMetrics>,
}

/// Resolves image references to what their configs say of CUDA. Cheap to
/// clone: clones share the client, the caches and the fetches in flight.
#[derive(Clone)]
pub struct Resolver {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for Resolver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Resolver").field("options", &self.inner.options).finish_non_exhaustive()
    }
}

/// A year from now for a budget past any clock.
fn deadline_after(budget: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(budget)
        .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(now)
}

/// The images, each once, in first-appearance order (a set beside the list:
/// logarithmic however many a pod names).
fn each_once<I, S>(images: I) -> Vec<String>
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut seen = std::collections::BTreeSet::new();
    images
        .into_iter()
        .map(|image| image.as_ref().to_owned())
        .filter(|image| seen.insert(image.clone()))
        .collect()
}

/// Where a lookup stands before anything is awaited.
enum Start {
    Ready(Result<Arc<ImageConfigFacts>, Failure>),
    Waiting(watch::Receiver<Answer>),
}

impl Inner {
    pub(super) fn caches(&self) -> MutexGuard<'_, Caches> {
        lock(&self.caches)
    }

    pub(super) fn hit(&self, cache: &str) {
        if let Some(metrics) = &self.metrics {
            metrics.hit(cache);
        }
    }

    fn count(&self, lookup: &Lookup) {
        if let Some(metrics) = &self.metrics {
            metrics.lookup(lookup.result());
        }
    }

    fn cached(
        &self,
        reference: &Reference,
        key: &LookupKey,
    ) -> Option<Result<Arc<ImageConfigFacts>, Failure>> {
        let now = std::time::Instant::now();
        let mut caches = self.caches();
        if let Some(failure) = caches.failure(key, now) {
            drop(caches);
            self.hit("negative");
            return Some(Err(failure));
        }
        let (digest, from_tag) = match reference.digest() {
            Some(digest) => (digest.to_owned(), false),
            None => match caches.tag(&key.0, now) {
                TagState::Fresh(digest) => (digest, true),
                TagState::Stale | TagState::Unknown => return None,
            },
        };
        let facts = caches.facts(digest, &key.1)?;
        drop(caches);
        if from_tag {
            self.hit("tag");
        }
        self.hit("config");
        Some(Ok(facts))
    }
}

impl Resolver {
    /// A resolver with its own HTTP client. Installs the process-wide ring
    /// provider for rustls if none is installed yet.
    pub fn new(
        options: ResolverOptions,
        metrics: Option<ResolverMetrics>,
    ) -> Result<Self, RegistryError> {
        let hosts = Arc::new(HostPolicy::new(&options.registries, &options.insecure_registries)?);
        let dns = Dns::new(&options.dns)?;
        let client = transport(&options, &hosts, &dns, options.credentials.clone())?;
        Ok(Self {
            inner: Arc::new(Inner {
                transport: ArcSwap::from_pointee(client),
                hosts,
                dns,
                caches: Mutex::new(Caches::new(
                    options.tag_ttl,
                    options.negative_ttl,
                    options.tag_capacity,
                    options.facts_capacity,
                    options.cache_bytes,
                )),
                in_flight: Mutex::new(InFlight::default()),
                turns: Semaphore::new(options.max_concurrent_fetches.max(1)),
                options,
                metrics,
            }),
        })
    }

    /// Uses `credentials` from now on (the file was read again): a new
    /// client, and the failures remembered so far forgotten. Fetches in
    /// flight finish with the credentials they started with.
    pub fn set_credentials(&self, credentials: Credentials) -> Result<(), RegistryError> {
        let inner = &self.inner;
        let client = transport(&inner.options, &inner.hosts, &inner.dns, credentials)?;
        inner.transport.store(Arc::new(client));
        self.inner.caches().forget_failures();
        Ok(())
    }

    /// Looks up every image of a pod, all within `budget` in total; each
    /// image once, answers in the order the images first appear. The
    /// lookups it starts take `namespace`'s share of the queue (the
    /// admission's namespace, or the object's for `check`).
    pub async fn resolve_all<I, S>(
        &self,
        namespace: &str,
        images: I,
        platform: &Platform,
        budget: Duration,
    ) -> Vec<(String, Lookup)>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let deadline = deadline_after(budget);
        let unique = each_once(images);
        let lookups =
            unique.iter().map(|image| self.resolve_until(namespace, image, platform, deadline));
        let answers = futures::future::join_all(lookups).await;
        unique.into_iter().zip(answers).collect()
    }

    /// Every image refused for `reason` before any lookup (no platform the
    /// resolver may look up, [`Platform::of_pod_spec`]), answered and
    /// counted as [`Resolver::resolve_all`] would.
    pub fn refuse_all<I, S>(&self, images: I, reason: &str) -> Vec<(String, Lookup)>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        each_once(images)
            .into_iter()
            .map(|image| {
                let lookup = Lookup::Refused(reason.to_owned());
                self.inner.count(&lookup);
                (image, lookup)
            })
            .collect()
    }

    /// Looks up one image within `budget`, a lookup of no admission: it
    /// takes the share of the namespace named `""`.
    pub async fn resolve(&self, image: &str, platform: &Platform, budget: Duration) -> Lookup {
        self.resolve_until("", image, platform, deadline_after(budget)).await
    }

    async fn resolve_until(
        &self,
        namespace: &str,
        image: &str,
        platform: &Platform,
        deadline: Instant,
    ) -> Lookup {
        let checked = platform.check().map_err(|refusal| Failure::refused(refusal.to_string()));
        let lookup = match checked.and_then(|()| self.parse(image)) {
            Err(failure) => failure.into(),
            Ok(reference) => match self.start(namespace, reference, platform) {
                Start::Ready(answer) => answer.into(),
                Start::Waiting(mut answer) => {
                    let wait = answer.wait_for(Option::is_some);
                    match tokio::time::timeout_at(deadline, wait).await {
                        Err(_) => Lookup::TimedOut,
                        Ok(waited) => match waited.ok().and_then(|answer| (*answer).clone()) {
                            Some(answer) => answer.into(),
                            None => Lookup::Failed(format!(
                                "{image}: the lookup ended without an answer"
                            )),
                        },
                    }
                }
            },
        };
        self.inner.count(&lookup);
        lookup
    }

    /// A string longer than any reference is refused before the cache is
    /// asked.
    fn parse(&self, image: &str) -> Result<Arc<ParsedReference>, Failure> {
        let refuse = |reason: &str| {
            Failure::refused(format!("{} is not an image reference: {reason}", shown(image)))
        };
        if image.len() > MAX_REFERENCE_LEN {
            return Err(refuse(TOO_LONG));
        }
        if let Some(parsed) = self.inner.caches().reference(image) {
            return Ok(parsed);
        }
        let reference = parse_reference(image).map_err(refuse)?;
        let parsed = Arc::new(ParsedReference::new(reference));
        self.inner.caches().put_reference(image, Arc::clone(&parsed));
        Ok(parsed)
    }

    /// Refuses an unlisted registry, answers from the caches, or joins the
    /// fetch in flight for this lookup, or starts one if `namespace` and
    /// the registry's entry have room in the queue.
    fn start(&self, namespace: &str, parsed: Arc<ParsedReference>, platform: &Platform) -> Start {
        let reference = &parsed.reference;
        let (entry, entry_name) = match self.inner.hosts.registry_entry(reference.registry()) {
            Ok(entry) => entry,
            Err(refusal) => return Start::Ready(Err(refusal)),
        };
        let key: LookupKey = (parsed.whole.clone(), platform.clone());
        if let Some(answer) = self.inner.cached(reference, &key) {
            return Start::Ready(answer);
        }
        let mut in_flight = lock(&self.inner.in_flight);
        if let Some(answer) = in_flight.joinable(&key) {
            return Start::Waiting(answer);
        }
        // A fetch may have finished between the cache look and this lock.
        if let Some(answer) = self.inner.cached(reference, &key) {
            return Start::Ready(answer);
        }
        let options = &self.inner.options;
        let places = Places {
            queue: options.max_pending_lookups,
            per_namespace: options.max_lookups_per_namespace,
            per_registry: options.max_lookups_per_registry,
        };
        if let Err(refusal) = in_flight.admit(namespace, entry, entry_name, places) {
            return Start::Ready(Err(refusal));
        }
        let (sender, receiver) = watch::channel(None);
        in_flight.insert(key.clone(), namespace, entry, receiver.clone());
        drop(in_flight);

        let inner = Arc::clone(&self.inner);
        let platform = platform.clone();
        tokio::spawn(async move {
            let started = Instant::now();
            let deadline = inner.options.fetch_deadline;
            let fetch = async {
                // The semaphore is never closed: a turn always comes.
                let _turn = inner.turns.acquire().await;
                inner.fetch(&parsed.reference, &platform).await
            };
            let answer = match tokio::time::timeout(deadline, fetch).await {
                Ok(answer) => answer,
                Err(_) => Err(Failure::failed(format!(
                    "{}: no answer from the registry within {}s",
                    key.0,
                    deadline.as_secs()
                ))),
            };
            if let Some(metrics) = &inner.metrics {
                metrics.fetch_duration.observe(started.elapsed().as_secs_f64());
            }
            match &answer {
                Ok(_) => inner.caches().forget_failure(&key),
                Err(failure) => {
                    tracing::debug!(image = %key.0, platform = %key.1, reason = %failure.reason, "image lookup failed");
                    inner.caches().put_failure(
                        key.clone(),
                        failure.clone(),
                        std::time::Instant::now(),
                    );
                }
            }
            lock(&inner.in_flight).remove(&key);
            // Nobody may be waiting any more; the caches hold the answer.
            let _ = sender.send(Some(answer));
        });
        Start::Waiting(receiver)
    }
}
