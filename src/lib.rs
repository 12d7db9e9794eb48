//! gpu-policy: a Kubernetes admission webhook that enforces NVIDIA GPU
//! policy.
//!
//! From the bottom of the layering up: each module uses only modules
//! listed before it, and no file of `src/` imports one that imports it
//! back (`tests/it/architecture.rs` holds the code to that).
//!
//! - [`duration`]: the one reader of durations;
//! - [`kubernetes_version`]: the supported Kubernetes releases and what
//!   each serves of the APIs the install uses;
//! - [`manifest`]: reading Kubernetes manifests (YAML, JSON, Lists);
//! - [`cuda`]: compute capabilities, CUDA versions and requirements, what
//!   an image needs, as values;
//! - [`settings`]: the cluster configuration and namespace settings;
//! - [`policy`]: the rules, pure functions over raw pod JSON, with their
//!   registry, the DRA claim model and the images the rules read;
//! - [`registry`]: image configs from their registries (CUDA versions);
//! - [`admission`]: AdmissionReviews in, decisions out; the offline `check`
//!   and `audit` of manifests ([`admission::Checker`]);
//! - [`doctor`]: what keeps GPUs from showing up, as findings over a
//!   plain inventory of the cluster (pure: read by [`cluster`]);
//! - [`reports`]: `audit`'s and `doctor`'s findings as PolicyReports and OpenReports
//!   (pure: built, not written);
//! - [`cluster`]: lean, watch-backed caches of what the rules read of the
//!   cluster; listing for `audit`, and writing its reports;
//! - [`install`]: the install manifests, from the program's constants;
//! - [`admission_policy`]: the rules as generated ValidatingAdmissionPolicies
//!   and MutatingAdmissionPolicies (CEL, evaluated by the API server),
//!   iterating the rules' registry; their CEL cost;
//! - [`poll`]: re-reading files and the certificate Secret on a timer;
//! - [`certs`]: serving certificates, generated or loaded, reloaded;
//! - [`metrics`], [`telemetry`]: Prometheus metrics and logs;
//! - [`server`]: the HTTPS webhook server (no policy logic);
//! - [`cli`]: the command line;
//! - [`allocator`]: the allocator the binary installs.

pub mod admission;
pub mod admission_policy;
pub mod allocator;
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
