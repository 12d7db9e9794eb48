//! The admission layer: which objects the policy looks at, and what a
//! namespace's mode makes of the rules' results; review in, response out.
//!
//! One request goes down one path; each file is a step of it, and each
//! imports only the files below it on its line (`a -> b`: a imports b):
//!
//! ```text
//! respond.rs -> wire.rs        AdmissionReview bytes <-> request, response
//!            -> decision.rs    Mode, decide (and decide_taking_patch, for the
//!                              webhook): (mode, kind, evaluation) -> Decision
//!            -> kinds.rs       ObjectKind, Workload; the policy::Subject of each
//!            -> images.rs      registry lookups -> policy::ImageFacts
//!            -> owner.rs       the pod a claim is made for, as read
//!                              -> policy::dra::owner::OwnerPod
//!            -> namespace_guard.rs -> decision.rs
//! checker.rs -> decision.rs, kinds.rs, images.rs
//! decision.rs -> kinds.rs
//! ```
//!
//! [`respond::evaluated`] says what a request puts under evaluation, once,
//! for the rules and for the registry lookups alike; [`respond::respond`]
//! runs them and turns the decision into a response. `checker.rs` is the
//! same path offline (`check`, `audit`): manifests in, an [`ObjectReport`]
//! per object out. `wire.rs`, `decision.rs` and `kinds.rs` know nothing of
//! the orchestration.

pub mod checker;
pub mod decision;
pub mod images;
pub mod kinds;
pub mod namespace_guard;
pub mod object_tree;
pub mod owner;
pub mod respond;
pub mod wire;

pub use checker::{Checker, ObjectFacts, ObjectReport};
pub use decision::{
    Decision, DecisionKind, IMAGE_RESOLUTION_ANNOTATION, MAX_WARNING_CHARS, Mode,
    UNENFORCED_FLOOR_ANNOTATION, UnknownMode, Verdict, decide, decide_taking_patch,
    namespace_settings, unreadable, warning,
};
pub use kinds::{ObjectKind, Workload};
pub use owner::OwnerRead;
pub use respond::{
    Endpoint, Evaluated, answer, claim_owner_to_read, evaluated, images_to_resolve, respond,
};
pub use wire::{
    AdmissionRequest, GroupVersionKind, RawObject, ReviewError, UserInfo, decode, encode,
};

#[cfg(test)]
mod tests;
