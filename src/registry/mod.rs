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
//! - [`Resolver`]: the fetches behind the caches (tag to digest with a
//!   TTL, digest to facts without one, recent failures briefly; all
//!   LRU, bounded in entries and in bytes: [`BoundedLru`], [`CacheBytes`]),
//!   one fetch per image however many wait for it, a bounded number of
//!   lookups in flight, shared fairly among namespaces and registries
//!   (`in_flight.rs`), and a time budget per admission
//!   ([`Resolver::resolve_all`]); a fetch that outlives the budget finishes
//!   in the background and fills the caches;
//! - [`ResolverMetrics`]: lookups by result, cache hits, fetch latency.
//!
//! Whoever may create a pod names the registry and so chooses what it
//! answers: every registry is hostile input. The pod's architecture and
//! image references are held to Kubernetes' limits before anything is
//! looked up (`pod_strings.rs`, `reference.rs`). Only the hosts of
//! `imageResolution.registries` are contacted (`hosts.rs`), names are
//! asked of DNS as absolute names, never under the pod's search list
//! (`dns.rs`), connections go only to the addresses checked when the name
//! was resolved (`addresses.rs`), redirects are followed by hand and
//! checked the same way, every body is read within a bound as it streams
//! (`transport.rs`), and every manifest and config must hash to its
//! digest (`digest.rs`).
//! The documents are read by lean readers that keep only what is used
//! (`documents.rs`), and a value longer than [`MAX_VALUE_BYTES`] is not
//! kept at all: the image's facts say it was too long
//! ([`OversizedValue`]), which leaves the image to the table. Every
//! failure's reason is cut at [`MAX_REASON_BYTES`], whatever it quotes.
//!
//! The registries are reached here only: the policy gets the facts as
//! data and never waits on the network.

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use crate::manifest::one_line;
use crate::policy::message::{Bounded, thousands};
use crate::telemetry::bounded_field;

mod addresses;
mod cache;
mod credentials;
mod digest;
mod dns;
mod documents;
mod fetch;
mod hosts;
mod in_flight;
mod metrics;
mod platform;
mod pod_strings;
mod reference;
mod resolver;
mod transport;

pub use addresses::{AddressClass, classify};
pub use cache::{BoundedLru, CacheBytes};
pub use credentials::Credentials;
pub use dns::DnsOptions;
pub use documents::{
    CUDA_LABEL, CUDA_VERSION_ENV, Descriptor, IndexEntry, MAX_INDEX_ENTRIES, MAX_VALUE_BYTES,
    Manifest, REQUIRE_CUDA_ENV, facts_of_config, read_manifest,
};
pub use metrics::ResolverMetrics;
pub use platform::{ARCH_LABEL, Platform};
pub use pod_strings::shown;
pub use reference::MAX_REFERENCE_LEN;
pub use resolver::{Resolver, ResolverOptions};
pub use transport::{MAX_CONFIG_BYTES, MAX_MANIFEST_BYTES, MAX_TOKEN_BYTES};

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
    /// A value longer than [`MAX_VALUE_BYTES`], not kept: the config's
    /// CUDA values cannot be used (cut, a requirement would say something
    /// else).
    pub oversized: Option<OversizedValue>,
}

/// A CUDA env or label of an image config longer than a value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OversizedValue {
    /// The env or label (`NVIDIA_REQUIRE_CUDA`).
    pub name: &'static str,
    /// Its length, in bytes.
    pub bytes: usize,
}

impl fmt::Display for OversizedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {} bytes long, more than the {} KiB an image config value may be",
            self.name,
            thousands(self.bytes),
            MAX_VALUE_BYTES >> 10
        )
    }
}

#[cfg(test)]
impl ImageConfigFacts {
    /// An image config for tests: its CUDA env, requirement and label.
    pub fn of(
        cuda: Option<&str>,
        require: Option<&str>,
        label: Option<&str>,
    ) -> std::sync::Arc<ImageConfigFacts> {
        std::sync::Arc::new(ImageConfigFacts {
            cuda_version: cuda.map(str::to_owned),
            require_cuda: require.map(str::to_owned),
            cuda_label: label.map(str::to_owned),
            digest: "sha256:00".to_owned(),
            oversized: None,
        })
    }

    /// The `NVIDIA_REQUIRE_CUDA` of `nvidia/cuda:12.8.1`'s config: 30 brand
    /// and driver alternatives, some 1 KB, an ordinary long requirement.
    pub fn cuda_12_8_requirement() -> String {
        let mut require = "cuda>=12.8".to_owned();
        for driver in [470, 535, 550] {
            for brand in [
                "unknown",
                "grid",
                "tesla",
                "nvidia",
                "quadro",
                "quadrortx",
                "nvidiartx",
                "vapps",
                "vpc",
                "vcs",
            ] {
                require.push_str(&format!(
                    " brand={brand},driver>={driver},driver<{}",
                    driver + 1
                ));
            }
        }
        require
    }
}

/// The answer for one image of an admission. Every reason is one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Shared with the resolver's cache.
    Found(Arc<ImageConfigFacts>),
    /// The registry answered with an error, or with content that is not
    /// what was asked for, or a name gave no address.
    Failed(String),
    /// A document was larger than the webhook reads (`manifest larger than
    /// 4 MiB`); the connection was dropped there.
    TooLarge(String),
    /// Nothing was contacted, or not where the answer pointed: the image
    /// is not a reference or the platform no label value, the host is not
    /// in `imageResolution.registries`, an address or a redirect is one
    /// the webhook never contacts, or the lookup queue is full.
    Refused(String),
    /// No answer within the budget; the fetch goes on in the background.
    TimedOut,
}

impl Lookup {
    /// `found`, `failed`, `too_large`, `refused` or `timed_out`: the
    /// metric label.
    pub fn result(&self) -> &'static str {
        match self {
            Lookup::Found(_) => "found",
            Lookup::Failed(_) => "failed",
            Lookup::TooLarge(_) => "too_large",
            Lookup::Refused(_) => "refused",
            Lookup::TimedOut => "timed_out",
        }
    }
}

/// The longest reason a failure keeps, in bytes: a reason may quote what
/// a registry sent (the JSON reader's errors quote the value they could
/// not read), and it is cached, logged and shown.
pub const MAX_REASON_BYTES: usize = 1 << 10;

/// `reason`, cut at [`MAX_REASON_BYTES`] (and saying so).
fn bounded_reason(reason: String) -> String {
    match bounded_field(&reason, MAX_REASON_BYTES) {
        Cow::Borrowed(_) => reason,
        Cow::Owned(cut) => cut,
    }
}

/// What `err` says, on one line, within [`MAX_REASON_BYTES`]: written
/// through a bounded writer, so an error that quotes megabytes of what a
/// registry sent (the JSON reader's do) is never megabytes here.
pub(crate) fn error_text(err: &dyn fmt::Display) -> String {
    let mut text = Bounded::new(MAX_REASON_BYTES);
    // A `Bounded` never fails a write: past its room it drops the rest.
    let _ = fmt::Write::write_fmt(&mut text, format_args!("{err}"));
    one_line(&text.finish())
}

/// Why a fetch gave no facts: the kind decides the [`Lookup`] it becomes.
/// The reason is one line, at most [`MAX_REASON_BYTES`] (and a few for
/// the mark of the cut).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) kind: FailureKind,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    Failed,
    TooLarge,
    Refused,
}

impl Failure {
    pub(crate) fn failed(reason: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Failed,
            reason: bounded_reason(reason.into()),
        }
    }

    pub(crate) fn too_large(reason: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::TooLarge,
            reason: bounded_reason(reason.into()),
        }
    }

    pub(crate) fn refused(reason: impl Into<String>) -> Self {
        Self {
            kind: FailureKind::Refused,
            reason: bounded_reason(reason.into()),
        }
    }

    /// The same failure, a plain failure's reason after `context` (what
    /// was fetched, for the log). Refusals and size bounds say all in
    /// their own words, short enough for the warning a user reads.
    pub(crate) fn within(self, context: &str) -> Self {
        match self.kind {
            FailureKind::Failed => Self {
                kind: self.kind,
                reason: bounded_reason(format!("{context}: {}", self.reason)),
            },
            FailureKind::TooLarge | FailureKind::Refused => self,
        }
    }
}

impl From<Failure> for Lookup {
    fn from(failure: Failure) -> Self {
        match failure.kind {
            FailureKind::Failed => Lookup::Failed(failure.reason),
            FailureKind::TooLarge => Lookup::TooLarge(failure.reason),
            FailureKind::Refused => Lookup::Refused(failure.reason),
        }
    }
}

impl From<Result<Arc<ImageConfigFacts>, Failure>> for Lookup {
    fn from(answer: Result<Arc<ImageConfigFacts>, Failure>) -> Self {
        match answer {
            Ok(facts) => Lookup::Found(facts),
            Err(failure) => failure.into(),
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
    #[error("{0}")]
    Hosts(String),
}
