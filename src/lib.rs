//! gpu-policy: a Kubernetes admission webhook that enforces NVIDIA GPU policy.
//!
//! The rooms, bottom first: each imports only the rooms listed before it
//! (`tests/it/architecture.rs` reads this list and holds the code to it;
//! docs/architecture.md, "The rooms", says what each holds). Below them are
//! the crates `gpu-policy-core` (its rooms re-exported here: [`duration`],
//! [`kubernetes_version`], [`manifest`], [`cuda`], [`document`], [`settings`],
//! [`policy`]) and `kubernetes-cel`, which import nothing of this crate.
//!
//! - [`telemetry`]
//! - [`poll`]
//! - [`registry`]
//! - [`admission`]: also the offline `check` and `audit` ([`admission::Checker`])
//! - [`install`]
//! - [`doctor`]: pure, read by [`cluster`]
//! - [`reports`]: pure, built, not written
//! - [`metrics`]
//! - [`certs`]
//! - [`cluster`]
//! - [`admission_policy`]
//! - [`server`]: no policy logic
//! - [`cli`]

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
