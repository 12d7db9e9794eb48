//! The HTTP layer: decode, call the admission layer, encode. No policy here.
//! [`run`](fn@run) puts the whole server together from its [`Options`].

mod body;
pub mod budget;
mod claim_owner;
pub mod cluster_reads;
mod error;
pub mod images;
pub mod listener;
mod opt_in;
mod record;
mod run;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use arc_swap::ArcSwap;
use axum::Router;
use axum::extract::{DefaultBodyLimit, State};
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use body::ReviewPost;
use cluster_reads::{Caller, ClusterReads};

use crate::admission::namespace_guard::Disclosure;
use crate::admission::{self, AdmissionRequest, Answer, Endpoint};
use crate::cluster::{self, ClusterCache};
use crate::metrics::Metrics;
use crate::policy::{ClaimFacts, ClusterFacts, ImageFacts};
use crate::settings::Settings;
pub use error::RequestError;
use record::{Answered, Outcome, record};
pub use run::{Certificates, ClientAuthOptions, ClusterAccess, Options, ServeError, run};

pub use body::MAX_BODY_BYTES;

pub struct AppState {
    /// Swapped whole when the file changes.
    pub settings: ArcSwap<Settings>,
    pub metrics: Metrics,
    pub readiness: Readiness,
    /// Never set with `--no-cluster`.
    pub cluster: OnceLock<Arc<ClusterCache>>,
    pub client: OnceLock<kube::Client>,
    pub images: images::Images,
    pub cluster_reads: ClusterReads,
    /// `--client-ca`: only then may an answer name objects the review did
    /// not carry.
    pub client_certificates_required: AtomicBool,
    /// The longest `?timeout=` the API server has sent, in milliseconds: how
    /// long shutdown lets requests in flight finish.
    request_timeout_ms: AtomicU64,
}

/// The API server's default webhook timeout is 10 s (30 s at most).
const DEFAULT_REQUEST_TIMEOUT_MS: u64 = 10_000;
const MAX_REQUEST_TIMEOUT_MS: u64 = 30_000;

impl AppState {
    pub fn new(settings: Settings) -> Self {
        let metrics = Metrics::new();
        let images = images::Images::default();
        images.apply(&settings, &metrics);
        Self {
            settings: ArcSwap::from_pointee(settings),
            metrics,
            readiness: Readiness::default(),
            cluster: OnceLock::new(),
            client: OnceLock::new(),
            images,
            cluster_reads: ClusterReads::default(),
            client_certificates_required: AtomicBool::new(false),
            request_timeout_ms: AtomicU64::new(0),
        }
    }

    pub fn drain_timeout(&self) -> Duration {
        match self.request_timeout_ms.load(Ordering::Relaxed) {
            0 => Duration::from_millis(DEFAULT_REQUEST_TIMEOUT_MS),
            ms => Duration::from_millis(ms),
        }
    }

    fn saw_timeout(&self, timeout: Duration) {
        let ms = u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX);
        self.request_timeout_ms.fetch_max(ms.min(MAX_REQUEST_TIMEOUT_MS), Ordering::Relaxed);
    }
}

#[derive(Debug, Default)]
pub struct Readiness {
    pub listener_bound: AtomicBool,
    pub config_loaded: AtomicBool,
    pub certificate_loaded: AtomicBool,
}

impl Readiness {
    pub fn is_ready(&self) -> bool {
        self.listener_bound.load(Ordering::Acquire)
            && self.config_loaded.load(Ordering::Acquire)
            && self.certificate_loaded.load(Ordering::Acquire)
    }
}

pub fn router(state: Arc<AppState>) -> Router {
    let mut router = Router::new();
    for endpoint in Endpoint::ALL {
        router = router.route(
            endpoint.path(),
            post(move |state: State<Arc<AppState>>, caller: Caller, review: ReviewPost| {
                admit(state, endpoint, caller, review)
            }),
        );
    }
    router.layer(DefaultBodyLimit::max(MAX_BODY_BYTES)).with_state(state)
}

pub fn operations_router(state: Arc<AppState>) -> Router {
    Router::new()
        .route("/healthz", get(|| async { "ok" }))
        .route(
            "/readyz",
            get(|State(state): State<Arc<AppState>>| async move {
                let cluster_synced = state.cluster.get().is_none_or(|c| c.is_synced());
                if state.readiness.is_ready() && cluster_synced {
                    (StatusCode::OK, "ready")
                } else {
                    (StatusCode::SERVICE_UNAVAILABLE, "not ready")
                }
            }),
        )
        .route(
            "/metrics",
            get(|State(state): State<Arc<AppState>>| async move {
                if let Some(cache) = state.cluster.get() {
                    for source in cluster::Source::ALL {
                        state
                            .metrics
                            .cache_stale
                            .get_or_create(&crate::metrics::CacheLabels {
                                resource: source.as_str().to_owned(),
                            })
                            .set(i64::from(cache.is_stale(source)));
                        let (watched, version) = cache.watched(source);
                        state
                            .metrics
                            .cache_watched
                            .get_or_create(&crate::metrics::WatchedLabels {
                                resource: source.as_str().to_owned(),
                                version: version.to_owned(),
                            })
                            .set(i64::from(watched));
                    }
                }
                (
                    [(
                        header::CONTENT_TYPE,
                        "application/openmetrics-text; version=1.0.0; charset=utf-8",
                    )],
                    state.metrics.encode(),
                )
            }),
        )
        .with_state(state)
}

async fn admit(
    State(state): State<Arc<AppState>>,
    endpoint: Endpoint,
    caller: Caller,
    review: ReviewPost,
) -> Response {
    let received = Instant::now();
    if let Some(timeout) = review.timeout {
        state.saw_timeout(timeout);
    }
    let request = match read_review(review.content_type.as_ref(), &review.body) {
        Ok(request) => request,
        Err(error) => {
            let outcome = Outcome { endpoint, latency: received.elapsed(), result: Err(&error) };
            record(&state.metrics, &outcome);
            return error.into_response();
        }
    };
    let answer = answer(&state, endpoint, caller, &request).await;
    let took = received.elapsed();
    let encoded = answer.encode(&request.uid).map_err(RequestError::Encode);
    let result = match &encoded {
        Ok(_) => Ok(Answered { request: &request, answer: &answer, took }),
        Err(error) => Err(error),
    };
    let outcome = Outcome { endpoint, latency: received.elapsed(), result };
    record(&state.metrics, &outcome);
    match encoded {
        Ok(bytes) => ([(header::CONTENT_TYPE, "application/json")], bytes).into_response(),
        Err(error) => error.into_response(),
    }
}

fn read_review<'b>(
    content_type: Option<&HeaderValue>,
    body: &'b [u8],
) -> Result<AdmissionRequest<'b>, RequestError> {
    let content_type = content_type.and_then(|v| v.to_str().ok()).unwrap_or("");
    let essence = content_type.split(';').next().unwrap_or("").trim();
    if !essence.eq_ignore_ascii_case("application/json") {
        return Err(RequestError::ContentType(content_type.to_owned()));
    }
    if body.is_empty() {
        return Err(RequestError::EmptyBody);
    }
    Ok(admission::decode(body)?)
}

async fn answer(
    state: &AppState,
    endpoint: Endpoint,
    caller: Caller,
    request: &AdmissionRequest<'_>,
) -> Answer {
    let settings = state.settings.load();
    let cluster = state.cluster.get().map(|cache| cache.as_ref() as &dyn ClusterFacts);
    let claims = cluster.map(|c| -> &dyn ClaimFacts { c });
    let subject = admission::subject(request, endpoint);
    let read = subject.as_ref().ok().and_then(Option::as_ref);
    let owner = match read
        .and_then(|read| admission::claim_owner_to_read(request, endpoint, read, &settings, claims))
    {
        Some((namespace, made_for)) => {
            let reads = claim_owner::ReadContext {
                client: state.client.get(),
                reads: &state.cluster_reads,
                settings: &settings,
                claims,
            };
            claim_owner::read(reads, caller, request, namespace, made_for).await
        }
        None => None,
    };
    // For a claim made for a pod, the pod's images, whose floors it gets.
    let wanted = || match &owner {
        Some(owner) => {
            let namespace = request.namespace.as_deref().unwrap_or_default();
            admission::owner::images_to_resolve(&owner.read, &settings, namespace)
        }
        None => read.and_then(|(_, subject)| admission::images::wanted(subject, &settings, claims)),
    };
    let images = state.images.resolve(request, &settings, wanted).await;
    let images = images.as_ref().map(|i| i as &dyn ImageFacts);
    let mut answer = admission::answer(
        request,
        endpoint,
        &subject,
        &settings,
        cluster,
        images,
        owner.as_ref().map(|owner| &owner.read),
    );
    // The owner's turn among the pods held at once ends with its answer.
    drop(owner);
    if endpoint == Endpoint::Namespace && answer.allowed {
        // Boxed: inline, it would make every request's future 2 KiB larger.
        let look = opt_in::NamespaceLook {
            client: state.client.get(),
            cluster,
            reads: &state.cluster_reads,
            dra_version: state.cluster.get().and_then(|cache| cache.dra_version()).flatten(),
            disclosure: if state.client_certificates_required.load(Ordering::Acquire) {
                Disclosure::Names
            } else {
                Disclosure::Counts
            },
        };
        let warnings = Box::pin(opt_in::opt_in_warnings(look, caller, request, &settings)).await;
        answer.warnings.extend(warnings);
    }
    answer
}

#[cfg(test)]
mod tests;
