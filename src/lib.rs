//! gpu-policy: a Kubernetes admission webhook that enforces NVIDIA GPU
//! policy.
//!
//! - [`policy`]: the six rules, pure functions over raw pod JSON;
//! - [`settings`]: the cluster configuration and namespace settings;
//! - [`admission`]: objects and AdmissionReviews in, decisions out;
//! - [`manifest`]: reading Kubernetes manifests for the offline `check`;
//! - [`cli`]: the command line.

pub mod admission;
pub mod cli;
pub mod manifest;
pub mod policy;
pub mod report;
pub mod settings;
