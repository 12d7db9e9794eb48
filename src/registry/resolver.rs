//! The resolver: caches in front of the registries, one fetch per image
//! however many admissions wait for it, and a time budget per admission.
//!
//! A fetch runs in its own task. An admission waits for it at most until
//! its budget is spent and then goes on without it ([`Lookup::TimedOut`]);
//! the fetch carries on (up to [`ResolverOptions::fetch_deadline`]) and
//! fills the caches, so the next admission of that image finds it there.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use arc_swap::ArcSwap;
use oci_client::Client;
use oci_client::Reference;
use oci_client::client::{ClientConfig, ClientProtocol};
use tokio::sync::{Semaphore, watch};
use tokio::time::Instant;

use super::cache::{Caches, LookupKey, ParsedReference, TagState};
use super::credentials::Credentials;
use super::metrics::ResolverMetrics;
use super::{ImageConfigFacts, Lookup, Platform, RegistryError};
use crate::manifest::one_line;

/// How the resolver reaches registries and how long it remembers.
#[derive(Debug, Clone)]
pub struct ResolverOptions {
    /// `host[:port]`s spoken to over plain HTTP.
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
    /// Fetches running at once; more wait for a turn, so many new images
    /// at once never become as many connections.
    pub max_concurrent_fetches: usize,
    pub tag_capacity: usize,
    pub facts_capacity: usize,
}

impl Default for ResolverOptions {
    fn default() -> Self {
        Self {
            insecure_registries: Vec::new(),
            credentials: Credentials::none(),
            tag_ttl: Duration::from_secs(5 * 60),
            negative_ttl: Duration::from_secs(30),
            fetch_deadline: Duration::from_secs(30),
            max_concurrent_fetches: 32,
            tag_capacity: 1024,
            facts_capacity: 1024,
        }
    }
}

impl ResolverOptions {
    /// The options of the configuration's `imageResolution` block (already
    /// checked by `Settings`): its insecure registries and the credentials
    /// read from its file, the rest defaults.
    pub fn from_settings(config: &crate::settings::ImageResolution) -> Result<Self, RegistryError> {
        let credentials = match &config.credentials_file {
            Some(path) => Credentials::load(path).map_err(RegistryError::Credentials)?,
            None => Credentials::none(),
        };
        Ok(Self {
            insecure_registries: config.insecure_registries.clone(),
            credentials,
            ..Self::default()
        })
    }
}

type Answer = Option<Result<Arc<ImageConfigFacts>, String>>;

pub(super) struct Session {
    pub(super) client: Client,
    pub(super) credentials: Credentials,
}

impl Session {
    fn new(options: &ResolverOptions, credentials: Credentials) -> Result<Self, RegistryError> {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let config = ClientConfig {
            protocol: ClientProtocol::HttpsExcept(options.insecure_registries.clone()),
            // Index entries are chosen per pod (`Platform::choose`).
            platform_resolver: None,
            connect_timeout: Some(Duration::from_secs(5)),
            read_timeout: Some(Duration::from_secs(10)),
            user_agent: concat!("gpu-policy/", env!("CARGO_PKG_VERSION")),
            ..ClientConfig::default()
        };
        let client = Client::try_from(config)
            .map_err(|err| RegistryError::Client(one_line(&err.to_string())))?;
        Ok(Self {
            client,
            credentials,
        })
    }
}

pub(super) struct Inner {
    /// The client and the credentials it is given, swapped together by
    /// [`Resolver::set_credentials`] (oci-client keeps the first
    /// credentials it saw for a registry).
    pub(super) session: ArcSwap<Session>,
    options: ResolverOptions,
    caches: Mutex<Caches>,
    in_flight: Mutex<HashMap<LookupKey, watch::Receiver<Answer>>>,
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
        f.debug_struct("Resolver")
            .field("options", &self.inner.options)
            .finish_non_exhaustive()
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Now plus `budget`, or a year from now for a budget past any clock.
fn deadline_after(budget: Duration) -> Instant {
    let now = Instant::now();
    now.checked_add(budget)
        .or_else(|| now.checked_add(Duration::from_secs(365 * 24 * 3600)))
        .unwrap_or(now)
}

/// Where a lookup stands before anything is awaited.
enum Start {
    Ready(Result<Arc<ImageConfigFacts>, String>),
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

    /// The answer the caches hold for this lookup, if any.
    fn cached(
        &self,
        reference: &Reference,
        key: &LookupKey,
    ) -> Option<Result<Arc<ImageConfigFacts>, String>> {
        let now = std::time::Instant::now();
        let mut caches = self.caches();
        if let Some(reason) = caches.failure(key, now) {
            drop(caches);
            self.hit("negative");
            return Some(Err(reason));
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
        let session = Session::new(&options, options.credentials.clone())?;
        Ok(Self {
            inner: Arc::new(Inner {
                session: ArcSwap::from_pointee(session),
                caches: Mutex::new(Caches::new(
                    options.tag_ttl,
                    options.negative_ttl,
                    options.tag_capacity,
                    options.facts_capacity,
                )),
                in_flight: Mutex::new(HashMap::new()),
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
        let session = Session::new(&self.inner.options, credentials)?;
        self.inner.session.store(Arc::new(session));
        self.inner.caches().forget_failures();
        Ok(())
    }

    /// Looks up every image of a pod, all within `budget` in total; each
    /// image once, answers in the order the images first appear.
    pub async fn resolve_all<I, S>(
        &self,
        images: I,
        platform: &Platform,
        budget: Duration,
    ) -> Vec<(String, Lookup)>
    where
        I: IntoIterator<Item = S>,
        S: AsRef<str>,
    {
        let deadline = deadline_after(budget);
        let mut unique: Vec<String> = Vec::new();
        for image in images {
            let image = image.as_ref();
            if !unique.iter().any(|seen| seen == image) {
                unique.push(image.to_owned());
            }
        }
        let lookups = unique
            .iter()
            .map(|image| self.resolve_until(image, platform, deadline));
        let answers = futures::future::join_all(lookups).await;
        unique.into_iter().zip(answers).collect()
    }

    /// Looks up one image within `budget`.
    pub async fn resolve(&self, image: &str, platform: &Platform, budget: Duration) -> Lookup {
        self.resolve_until(image, platform, deadline_after(budget))
            .await
    }

    async fn resolve_until(&self, image: &str, platform: &Platform, deadline: Instant) -> Lookup {
        let lookup = match self.parse(image) {
            Err(reason) => Lookup::Failed(reason),
            Ok(reference) => match self.start(reference, platform) {
                Start::Ready(answer) => answer.into(),
                Start::Waiting(mut answer) => {
                    let wait = answer.wait_for(Option::is_some);
                    match tokio::time::timeout_at(deadline, wait).await {
                        Err(_) => Lookup::TimedOut,
                        Ok(Ok(answer)) => match answer.as_ref() {
                            Some(answer) => answer.clone().into(),
                            None => Lookup::Failed(format!(
                                "{image}: the lookup ended without an answer"
                            )),
                        },
                        Ok(Err(_)) => {
                            Lookup::Failed(format!("{image}: the lookup ended without an answer"))
                        }
                    }
                }
            },
        };
        if let Some(metrics) = &self.inner.metrics {
            metrics.lookup(lookup.result());
        }
        lookup
    }

    /// The image reference parsed, from the cache when it was seen before.
    fn parse(&self, image: &str) -> Result<Arc<ParsedReference>, String> {
        if let Some(parsed) = self.inner.caches().reference(image) {
            return Ok(parsed);
        }
        let reference = Reference::try_from(image).map_err(|err| {
            format!(
                "{image:?} is not an image reference: {}",
                one_line(&err.to_string())
            )
        })?;
        let parsed = Arc::new(ParsedReference::new(reference));
        self.inner
            .caches()
            .put_reference(image, Arc::clone(&parsed));
        Ok(parsed)
    }

    /// Answers from the caches, or joins the fetch in flight for this
    /// lookup, or starts one.
    fn start(&self, parsed: Arc<ParsedReference>, platform: &Platform) -> Start {
        let reference = &parsed.reference;
        let key: LookupKey = (parsed.whole.clone(), platform.clone());
        if let Some(answer) = self.inner.cached(reference, &key) {
            return Start::Ready(answer);
        }
        let mut in_flight = lock(&self.inner.in_flight);
        if let Some(answer) = in_flight.get(&key) {
            // A fetch that ended without answering (its task panicked) is
            // not joined: it would never answer.
            if answer.has_changed().is_ok() {
                return Start::Waiting(answer.clone());
            }
            in_flight.remove(&key);
        }
        // A fetch may have finished between the cache look and this lock.
        if let Some(answer) = self.inner.cached(reference, &key) {
            return Start::Ready(answer);
        }
        let (sender, receiver) = watch::channel(None);
        in_flight.insert(key.clone(), receiver.clone());
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
                Err(_) => Err(format!(
                    "{}: no answer from the registry within {}s",
                    key.0,
                    deadline.as_secs()
                )),
            };
            if let Some(metrics) = &inner.metrics {
                metrics
                    .fetch_duration
                    .observe(started.elapsed().as_secs_f64());
            }
            match &answer {
                Ok(_) => inner.caches().forget_failure(&key),
                Err(reason) => {
                    tracing::debug!(image = %key.0, platform = %key.1, reason = %reason, "image lookup failed");
                    inner.caches().put_failure(
                        key.clone(),
                        reason.clone(),
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

impl From<Result<Arc<ImageConfigFacts>, String>> for Lookup {
    fn from(answer: Result<Arc<ImageConfigFacts>, String>) -> Self {
        match answer {
            Ok(facts) => Lookup::Found(facts),
            Err(reason) => Lookup::Failed(reason),
        }
    }
}
