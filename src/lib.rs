//! gpu-policy: a Kubernetes admission webhook that enforces NVIDIA GPU
//! policy.
//!
//! The rooms, from the bottom of the layering up. Each imports only the
//! rooms listed before it (`tests/it/architecture.rs` holds the code to
//! that, and to no cycle between files). Below them all are the crates
//! `gpu-policy-core`, the rules and the values they read (its rooms are
//! re-exported here: [`duration`], [`kubernetes_version`], [`manifest`],
//! [`cuda`], [`document`], [`settings`], [`policy`]), and `kubernetes-cel`,
//! the offline evaluator of admission policies; Cargo holds those to
//! importing nothing of this crate.
//!
//! - [`telemetry`]: logs, and the closed label values every counter uses;
//! - [`poll`]: re-reading files and the certificate Secret on a timer;
//! - [`registry`]: image configs from their registries (CUDA versions);
//! - [`admission`]: AdmissionReviews in, answers out; the offline `check`
//!   and `audit` of manifests ([`admission::Checker`]);
//! - [`install`]: the install manifests, from the program's constants;
//! - [`doctor`]: what keeps GPUs from showing up, as findings over a
//!   plain inventory of the cluster (pure: read by [`cluster`]);
//! - [`reports`]: `audit`'s and `doctor`'s findings as PolicyReports and
//!   OpenReports (pure: built, not written);
//! - [`metrics`]: the Prometheus metrics;
//! - [`certs`]: serving certificates, generated or loaded, reloaded;
//! - [`cluster`]: lean, watch-backed caches of what the rules read of the
//!   cluster; listing for `audit`, and writing its reports;
//! - [`admission_policy`]: the rules as generated ValidatingAdmissionPolicies
//!   and MutatingAdmissionPolicies (CEL, evaluated by the API server),
//!   iterating the rules' registry; their CEL cost;
//! - [`server`]: the HTTPS webhook server (no policy logic);
//! - [`cli`]: the command line.

pub use gpu_policy_core::{
    cuda, document, duration, kubernetes_version, manifest, policy, settings,
};

pub mod admission;
pub mod admission_policy;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod doctor;
pub mod install;
pub mod metrics;
pub mod poll;
pub mod registry;
pub mod reports;
pub mod server;
pub mod telemetry;
