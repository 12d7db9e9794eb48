//! gpu-policy's core: the rules as pure functions over the raw JSON of pods, workloads and
//! DRA claims, and the values they read. No I/O but reading the files a user names
//! (settings, manifests); no network.
//!
//! The rooms, bottom up; each uses only those before it, and the crate only `kubernetes-cel`
//! of the workspace: [`duration`], [`kubernetes_version`], [`manifest`], [`cuda`],
//! [`document`], [`settings`], [`policy`] (docs/architecture.md, "The rooms").

pub mod cuda;
pub mod document;
pub mod duration;
pub mod kubernetes_version;
pub mod manifest;
pub mod policy;
pub mod settings;
