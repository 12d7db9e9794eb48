//! gpu-policy's core: the rules as pure functions over the raw JSON of
//! pods, workloads and DRA claims, and the values they read. No I/O but
//! reading the files a user names (settings, manifests); no network.
//!
//! The rooms, from the bottom of the layering up; each uses only the
//! rooms listed before it, and the crate only `kubernetes-cel` of the
//! workspace:
//!
//! - [`duration`]: the one reader of Go durations;
//! - [`kubernetes_version`]: the supported Kubernetes releases and what
//!   each serves of the APIs the install uses;
//! - [`manifest`]: reading Kubernetes manifests (YAML, JSON, Lists);
//! - [`cuda`]: compute capabilities, CUDA versions and requirements, what
//!   an image needs, as values;
//! - [`document`]: the borrowed JSON document a review is read into;
//! - [`settings`]: the cluster configuration and namespace settings;
//! - [`policy`]: the rules, with their registry, the DRA claim model and
//!   the images the rules read.

pub mod cuda;
pub mod document;
pub mod duration;
pub mod kubernetes_version;
pub mod manifest;
pub mod policy;
pub mod settings;
