//! gpu-policy's core: the rules as pure functions over the raw JSON of pods, workloads and
//! DRA claims, and the values they read. No I/O but reading the files a user names
//! (settings, manifests); no network.
//!
//! The rooms, bottom up; each uses only those before it, and the crate only `kubernetes-cel`
//! of the workspace (docs/architecture.md, "The rooms"):
//!
//! - [`duration`]: the one reader of Go durations;
//! - [`kubernetes_version`]: the supported releases and the APIs each serves;
//! - [`manifest`]: reading Kubernetes manifests (YAML, JSON, Lists);
//! - [`cuda`]: compute capabilities, CUDA versions and requirements;
//! - [`document`]: the borrowed JSON document a review is read into;
//! - [`settings`]: the cluster configuration and namespace settings;
//! - [`policy`]: the rules, their registry, the DRA claim model, the images.

pub mod cuda;
pub mod document;
pub mod duration;
pub mod kubernetes_version;
pub mod manifest;
pub mod policy;
pub mod settings;
