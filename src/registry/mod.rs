//! The image registry client: what an image's own config says of the CUDA
//! version it is built on ([`ImageConfigFacts`]), read from its registry
//! for the platform the pod runs on ([`Platform`]).
//!
//! Whoever may create a pod names the registry and so chooses what it
//! answers: every registry is hostile input. Each bound is kept where it
//! applies: the pod's strings (`pod_strings.rs`, `reference.rs`), the
//! hosts contacted (`hosts.rs`, `dns.rs`, `addresses.rs`), the bytes read
//! (`transport.rs`), the digests (`digest.rs`), the values kept
//! (`oci.rs`), the lookups in flight (`in_flight.rs`), the caches
//! (`lookup_cache.rs`) and the reasons given ([`MAX_REASON_BYTES`]).
//! The policy gets the facts as data and never waits on the network.

mod addresses;
mod credentials;
mod digest;
mod dns;
mod error;
mod fetch;
mod hosts;
mod in_flight;
mod lookup;
mod lookup_cache;
mod lookup_metrics;
mod oci;
mod platform;
mod pod_strings;
mod reason;
mod reference;
mod resolver;
mod transport;

pub use credentials::{Credentials, CredentialsError, DockerConfigError};
pub use dns::DnsOptions;
pub use error::RegistryError;
pub use lookup::Lookup;
pub(crate) use lookup_cache::lock;
pub use lookup_cache::{BoundedLru, CacheBytes};
pub use lookup_metrics::ResolverMetrics;
pub use oci::{ImageConfigFacts, MAX_VALUE_BYTES, OversizedValue};
pub use platform::Platform;
pub use pod_strings::{LabelValueError, shown};
pub use reason::MAX_REASON_BYTES;
pub(crate) use reason::error_text;
pub use reference::MAX_REFERENCE_LEN;
pub use resolver::{Resolver, ResolverOptions};
