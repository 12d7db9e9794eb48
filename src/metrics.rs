//! Prometheus metrics. Every metric name appears once, with typed label
//! sets: here, in `metrics/admission.rs` (those every request writes) and
//! in the registry room's `ResolverMetrics`.

mod admission;

pub use admission::{AdmissionMetrics, Finding, operation_name};

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, text::encode};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

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
    /// The request counter, the rule findings and the latency histogram.
    pub admission: AdmissionMetrics,
    /// Unix time at which the serving certificate expires.
    pub certificate_expiry: Gauge<f64, AtomicU64>,
    /// 1 when the last reload of the source succeeded, 0 when it failed.
    pub reload_success: Family<ReloadLabels, Gauge>,
    /// 1 while a cluster cache cannot follow the API server.
    pub cache_stale: Family<CacheLabels, Gauge>,
    /// The image registry lookups of `imageResolution.mode: registry`.
    pub images: crate::registry::ResolverMetrics,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gpu_policy");
        let admission = AdmissionMetrics::register(&mut registry);
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
            admission,
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
