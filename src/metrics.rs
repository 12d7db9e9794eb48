//! Prometheus metrics: here, in `metrics/admission.rs` (those every request
//! writes) and in the registry room's `ResolverMetrics`.
//!
//! Every label value is one of a closed list ([`closed_label`],
//! [`kind_label`]): docs/operations.md, "Metrics and the decision log".

mod admission;

use crate::telemetry::labels::closed_label;
use admission::registered;
pub use admission::{AdmissionMetrics, Finding, KINDS, OTHER_KIND, kind_label, operation_name};

use std::sync::atomic::AtomicU64;

use prometheus_client::encoding::{EncodeLabelSet, text::encode};
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ReloadLabels {
    /// One of [`RELOAD_SOURCES`], or `other`.
    pub source: &'static str,
}

pub const RELOAD_SOURCES: [&str; 4] =
    ["config", "certificate", "client_ca", "registry-credentials"];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// One of `cluster::Source`.
    pub resource: String,
}

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchedLabels {
    pub resource: String,
    /// Empty when not watched or not known yet.
    pub version: String,
}

/// What the admission port's budget refused, and why.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct RefusedLabels {
    pub resource: &'static str,
    pub reason: &'static str,
}

impl RefusedLabels {
    pub const CONNECTIONS: &str = "connections";
    pub const BODY_BYTES: &str = "body_bytes";
    pub const OVER_SHARE: &str = "over_share";
    pub const FULL: &str = "full";
}

/// `gpu_policy_admission_refused_total`.
pub type BudgetRefusals = Family<RefusedLabels, Counter>;

#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    pub admission: AdmissionMetrics,
    pub certificate_expiry: Gauge<f64, AtomicU64>,
    pub reload_success: Family<ReloadLabels, Gauge>,
    pub cache_stale: Family<CacheLabels, Gauge>,
    pub cache_watched: Family<WatchedLabels, Gauge>,
    pub images: crate::registry::ResolverMetrics,
    pub refused: BudgetRefusals,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("gpu_policy");
        // Registered in this order, which the scrape keeps.
        Self {
            admission: AdmissionMetrics::register(&mut registry),
            certificate_expiry: registered(
                &mut registry,
                "certificate_expiry_timestamp_seconds",
                "Unix time at which the serving certificate expires",
            ),
            reload_success: registered(
                &mut registry,
                "reload_success",
                "1 when the last reload of the config, certificate or client CA succeeded, else 0",
            ),
            cache_stale: registered(
                &mut registry,
                "cluster_cache_stale",
                "1 while a cluster cache cannot follow the API server (decisions use the last known state)",
            ),
            cache_watched: registered(
                &mut registry,
                "cluster_cache_watched",
                "1 when a cluster cache watches its resource (in the API version labelled), 0 when the API server does not serve it",
            ),
            images: crate::registry::ResolverMetrics::register(&mut registry),
            refused: registered(
                &mut registry,
                "admission_refused",
                "Connections closed at once and requests answered 429 or 503 by the admission port's budget",
            ),
            registry,
        }
    }

    pub fn set_reload(&self, source: &str, ok: bool) {
        self.reload_success
            .get_or_create(&ReloadLabels { source: closed_label(source, &RELOAD_SOURCES) })
            .set(i64::from(ok));
    }

    pub fn encode(&self) -> String {
        let mut text = String::new();
        if encode(&mut text, &self.registry).is_err() {
            text.clear();
        }
        text
    }
}

#[cfg(test)]
mod tests;
