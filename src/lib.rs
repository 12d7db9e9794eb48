//! gpu-policy: a Kubernetes admission webhook that enforces NVIDIA GPU
//! policy.
//!
//! The rooms, from the bottom of the layering up. Each imports only the
//! rooms listed before it (`tests/it/architecture.rs` holds the code to
//! that, and to no cycle between files); below them all is the
//! `kubernetes-cel` crate, the offline evaluator of admission policies.
//!
//! - [`duration`]: the one reader of Go durations;
//! - [`kubernetes_version`]: the supported Kubernetes releases and what
//!   each serves of the APIs the install uses;
//! - [`manifest`]: reading Kubernetes manifests (YAML, JSON, Lists);
//! - [`cuda`]: compute capabilities, CUDA versions and requirements, what
//!   an image needs, as values;
//! - [`document`]: the borrowed JSON document a review is read into, and
//!   the values patches are made of;
//! - [`telemetry`]: logs, and the closed label values every counter uses;
//! - [`poll`]: re-reading files and the certificate Secret on a timer;
//! - [`settings`]: the cluster configuration and namespace settings;
//! - [`policy`]: the rules, pure functions over raw pod JSON, with their
//!   registry, the DRA claim model and the images the rules read;
//! - [`registry`]: image configs from their registries (CUDA versions);
//! - [`admission`]: AdmissionReviews in, decisions out; the offline `check`
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

pub mod admission;
pub mod admission_policy;
pub mod certs;
pub mod cli;
pub mod cluster;
pub mod cuda;
pub mod doctor;
pub mod document;
pub mod duration;
pub mod install;
pub mod kubernetes_version;
pub mod manifest;
pub mod metrics;
pub mod policy;
pub mod poll;
pub mod registry;
pub mod reports;
pub mod server;
pub mod settings;
pub mod telemetry;
