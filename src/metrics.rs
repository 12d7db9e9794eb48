//! Prometheus metrics. Every metric name appears here once, with typed
//! label sets.

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RequestLabels {
    pub endpoint: String,
    pub kind: String,
    pub operation: String,
    /// `allowed`, `mutated`, `warned`, `denied`, `ignored`, or `bad_request`.
    pub decision: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RuleLabels {
    pub rule: String,
    /// `change` or `violation`.
    pub finding: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct EndpointLabels {
    pub endpoint: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// `config` or `certificate`.
    pub source: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// `namespaces`, `nodes`, `runtimeclasses`, `allowlisted-workloads`.
    pub resource: String,
}

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub requests: Family<RequestLabels, Counter>,
    pub findings: Family<RuleLabels, Counter>,
    pub latency: Family<EndpointLabels, Histogram>,
    /// Unix time at which the serving certificate expires.
    pub certificate_expiry: Gauge<f64, AtomicU64>,
    /// 1 when the last reload of the source succeeded, 0 when it failed.
    pub reload_success: Family<ReloadLabels, Gauge>,
    /// 1 while a cluster cache cannot follow the API server.
    pub cache_stale: Family<CacheLabels, Gauge>,
    /// The image registry lookups of `imageResolution.mode: registry`.
    pub images: crate::registry::ResolverMetrics,
}

fn latency_histogram() -> Histogram {
    // 50 µs .. ~0.8 s: admission decisions are micro-seconds; the tail
    // shows queueing.
    Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
        0.000_05, 2.0, 15,
    ))
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gpu_policy");
        let requests = Family::<RequestLabels, Counter>::default();
        registry.register(
            "admission_requests",
            "Admission requests by endpoint, kind, operation and decision",
            requests.clone(),
        );
        let findings = Family::<RuleLabels, Counter>::default();
        registry.register(
            "rule_findings",
            "Changes and violations found, by rule",
            findings.clone(),
        );
        let latency = Family::<EndpointLabels, Histogram>::new_with_constructor(
            latency_histogram as fn() -> Histogram,
        );
        registry.register(
            "admission_duration_seconds",
            "Time from request body received to response encoded",
            latency.clone(),
        );
        let certificate_expiry = Gauge::<f64, AtomicU64>::default();
        registry.register(
            "certificate_expiry_timestamp_seconds",
            "Unix time at which the serving certificate expires",
            certificate_expiry.clone(),
        );
        let reload_success = Family::<ReloadLabels, Gauge>::default();
        registry.register(
            "reload_success",
            "1 when the last reload of the config, certificate or client CA succeeded, else 0",
            reload_success.clone(),
        );
        let cache_stale = Family::<CacheLabels, Gauge>::default();
        registry.register(
            "cluster_cache_stale",
            "1 while a cluster cache cannot follow the API server (decisions use the last known state)",
            cache_stale.clone(),
        );
        let images = crate::registry::ResolverMetrics::register(&mut registry);
        Self {
            registry,
            images,
            requests,
            findings,
            latency,
            certificate_expiry,
            reload_success,
            cache_stale,
        }
    }

    pub fn set_reload(&self, source: &str, ok: bool) {
        self.reload_success
            .get_or_create(&ReloadLabels {
                source: source.to_owned(),
            })
            .set(i64::from(ok));
    }

    /// The OpenMetrics text exposition.
    pub fn encode(&self) -> String {
        let mut text = String::new();
        if encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}
