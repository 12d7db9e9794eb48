//! The admission layer: which objects the policy looks at, and what a
//! namespace's mode makes of the rules' results; review in, answer out.
//!
//! One request goes down one path; each file is a step of it, and each
//! imports only the files below it on its line (`a -> b`: a imports b):
//!
//! ```text
//! respond.rs -> wire.rs        AdmissionReview bytes -> request
//!            -> answer.rs      Mode, decide: (mode, kind, evaluation) -> Answer,
//!                              which writes itself as AdmissionReview bytes
//!            -> kinds.rs       ObjectKind, Workload; the policy::Subject of each
//!            -> images.rs      registry lookups -> policy::ImageFacts
//!            -> owner.rs       the pod a claim is made for, as read
//!                              -> policy::dra::owner::OwnerPod
//!            -> namespace_guard.rs
//! checker.rs -> answer.rs, kinds.rs, images.rs
//! answer.rs  -> kinds.rs
//! ```
//!
//! [`respond::subject`] reads what a request puts under evaluation, once;
//! the server hands it to the claim owner's read, the registry lookups and
//! [`respond::answer`], which runs the rules and makes the endpoint's
//! [`Answer`]. `checker.rs` is the same path offline (`check`, `audit`):
//! manifests in, an [`ObjectReport`] per object out.

pub mod answer;
pub mod checker;
pub mod images;
pub mod kinds;
pub mod namespace_guard;
pub mod object_tree;
pub mod owner;
pub mod respond;
pub mod wire;

pub use answer::{
    Answer, BAD_REQUEST, DECISIONS, IMAGE_RESOLUTION_ANNOTATION, MAX_WARNING_CHARS, Mode,
    UNENFORCED_FLOOR_ANNOTATION, UnknownMode, decide, decide_taking_patch, namespace_settings,
    unreadable, warning,
};
pub use checker::{Checker, ObjectFacts, ObjectReport};
pub use kinds::{ObjectKind, Workload};
pub use owner::OwnerRead;
pub use respond::{Endpoint, Unread, answer, claim_owner_to_read, respond, subject};
pub use wire::{AdmissionRequest, GroupVersionKind, RawObject, ReviewError, UserInfo, decode};

#[cfg(test)]
mod tests;
