//! The image registry client: what an image's own config says of the CUDA
//! version it is built on ([`ImageConfigFacts`]), read from its registry
//! for the platform the pod runs on ([`Platform`]).
//!
//! Every registry is hostile input; where each bound lives:
//! docs/architecture.md, "Where registries enter".

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
