//! The image registry client: what an image's own config says of the CUDA
//! version it is built on, read from its registry.
//!
//! An image reference (normalised as Docker does: `ubuntu` is
//! `docker.io/library/ubuntu:latest`) and the platform the pod will run on
//! resolve to [`ImageConfigFacts`]: the `CUDA_VERSION` and
//! `NVIDIA_REQUIRE_CUDA` envs and the `com.nvidia.cuda.version` label of the
//! image config, as plain strings (the policy interprets them), and the
//! digest the reference names.
//!
//! - [`ResolverOptions::from_settings`]: the options of the
//!   configuration's `imageResolution` block (`settings::ImageResolution`);
//! - [`Credentials`]: one dockerconfigjson file, never the pods' secrets
//!   ([`Resolver::set_credentials`] when it changes);
//! - [`Platform`]: the image index entry a pod runs (its node selector's
//!   `kubernetes.io/arch`, else amd64);
//! - [`Resolver`]: oci-client behind the caches (tag to digest with a TTL,
//!   digest to facts without one, recent failures briefly; all bounded
//!   LRU), one fetch per image however many wait for it, and a time budget
//!   per admission ([`Resolver::resolve_all`]); a fetch that outlives the
//!   budget finishes in the background and fills the caches;
//! - [`ResolverMetrics`]: lookups by result, cache hits, fetch latency.
//!
//! The registries are reached here only: the policy gets the facts as
//! data and never waits on the network.

use std::sync::Arc;

mod cache;
mod credentials;
mod fetch;
mod metrics;
mod platform;
mod resolver;

pub use credentials::Credentials;
pub use fetch::{CUDA_LABEL, CUDA_VERSION_ENV, REQUIRE_CUDA_ENV, facts_of_config};
pub use metrics::ResolverMetrics;
pub use platform::{ARCH_LABEL, Platform};
pub use resolver::{Resolver, ResolverOptions};

/// What the policy reads of an image's config, as written there.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageConfigFacts {
    /// The `CUDA_VERSION` env (`13.1.0`).
    pub cuda_version: Option<String>,
    /// The `NVIDIA_REQUIRE_CUDA` env (`cuda>=13.1 brand=tesla,driver>=535,...`).
    pub require_cuda: Option<String>,
    /// The `com.nvidia.cuda.version` label.
    pub cuda_label: Option<String>,
    /// The digest the reference names: the image index's when the tag
    /// names an index, else the image manifest's.
    pub digest: String,
}

/// The answer for one image of an admission.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Shared with the resolver's cache.
    Found(Arc<ImageConfigFacts>),
    /// The registry answered with an error, or the reference is not one;
    /// the reason is one line.
    Failed(String),
    /// No answer within the budget; the fetch goes on in the background.
    TimedOut,
}

impl Lookup {
    /// `found`, `failed` or `timed_out`: the metric label.
    pub fn result(&self) -> &'static str {
        match self {
            Lookup::Found(_) => "found",
            Lookup::Failed(_) => "failed",
            Lookup::TimedOut => "timed_out",
        }
    }
}

/// Why a resolver cannot be built from its configuration. One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RegistryError {
    #[error("imageResolution.credentialsFile: {0}")]
    Credentials(String),
    #[error("image registry client: {0}")]
    Client(String),
}
