//! gpu-policy: a Kubernetes admission webhook that enforces NVIDIA GPU
//! policy.
//!
//! - [`policy`]: the six rules, pure functions over raw pod JSON;
//! - [`settings`]: the cluster configuration and namespace settings;
//! - [`admission`]: objects and AdmissionReviews in, decisions out; the
//!   offline `check` and `audit` of manifests ([`admission::Checker`]);
//! - [`manifest`]: reading Kubernetes manifests for the offline `check`;
//! - [`server`]: the HTTPS webhook server (no policy logic);
//! - [`certs`]: serving certificates, generated or loaded, reloaded;
//! - [`poll`]: re-reading files and the certificate Secret on a timer;
//! - [`quantity`], [`duration`]: the one reader of each of these texts;
//! - [`registry`]: image configs from their registries (CUDA versions);
//! - [`metrics`], [`telemetry`]: Prometheus metrics and logs;
//! - [`install`]: the install manifests, from the program's constants;
//! - [`admission_policy`]: the validating rules as generated
//!   ValidatingAdmissionPolicies (CEL, evaluated by the API server);
//! - [`cli`]: the command line.

pub mod admission;
pub mod admission_policy;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod cuda;
pub mod duration;
pub mod install;
pub mod kubernetes_cel;
pub mod manifest;
pub mod metrics;
pub mod policy;
pub mod poll;
pub mod quantity;
pub mod registry;
pub mod server;
pub mod settings;
pub mod telemetry;

/// AdmissionReview requests as the API server sends them, for the unit
/// tests: the integration tests' builder, so that there is one.
#[cfg(test)]
#[allow(dead_code)]
#[path = "../tests/it/support/review.rs"]
mod review_builder;

/// The bad-input catalog of DRA objects, shared with the integration tests.
#[cfg(test)]
#[path = "../tests/it/support/bad_claims.rs"]
mod bad_claims;
