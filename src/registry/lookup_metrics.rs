//! The image registry client's metrics. Their label values are the closed
//! lists below, never an image's words.

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use crate::telemetry::labels::closed_label;

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct LookupLabels {
    /// One of [`LOOKUP_RESULTS`], or `other`.
    pub result: &'static str,
}

/// The values of `image_lookups`' `result`.
pub const LOOKUP_RESULTS: [&str; 5] = ["found", "failed", "too_large", "refused", "timed_out"];

#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct CacheLabels {
    /// One of [`CACHES`], or `other`.
    pub cache: &'static str,
}

/// The values of `image_cache_hits`' `cache`: `tag` (tag to digest),
/// `config` (digest to what the image needs) or `negative` (a recent
/// failure).
pub const CACHES: [&str; 3] = ["tag", "config", "negative"];

#[derive(Debug, Clone)]
pub struct ResolverMetrics {
    pub lookups: Family<LookupLabels, Counter>,
    pub cache_hits: Family<CacheLabels, Counter>,
    /// One fetch from the registries (in the background when it outlives
    /// the admission that started it), whatever its result.
    pub fetch_duration: Histogram,
}

impl ResolverMetrics {
    /// Under the registry's prefix.
    pub fn register(registry: &mut Registry) -> Self {
        let metrics = Self {
            lookups: Family::default(),
            cache_hits: Family::default(),
            // 5 ms .. ~40 s: a warm registry answers in tens of
            // milliseconds; a background fetch may run to its deadline.
            fetch_duration: Histogram::new(exponential_buckets(0.005, 2.0, 14)),
        };
        registry.register(
            "image_lookups",
            "Image config lookups for admissions, by result (found, failed, too_large, refused, timed_out)",
            metrics.lookups.clone(),
        );
        registry.register(
            "image_cache_hits",
            "Image lookups answered from a cache, by cache (tag, config, negative)",
            metrics.cache_hits.clone(),
        );
        registry.register(
            "image_fetch_duration_seconds",
            "Time one fetch of an image's manifest and config from its registry took",
            metrics.fetch_duration.clone(),
        );
        metrics
    }

    pub(super) fn lookup(&self, result: &str) {
        self.lookups
            .get_or_create(&LookupLabels { result: closed_label(result, &LOOKUP_RESULTS) })
            .inc();
    }

    pub(super) fn hit(&self, cache: &str) {
        self.cache_hits.get_or_create(&CacheLabels { cache: closed_label(cache, &CACHES) }).inc();
    }
}

#[cfg(test)]
mod tests;
