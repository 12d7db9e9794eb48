//! The admission layer: review in, answer out; docs/architecture.md, "The
//! rooms", says what each file holds.

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
    Answer, Decision, IMAGE_RESOLUTION_ANNOTATION, MAX_WARNING_CHARS, Mode,
    UNENFORCED_FLOOR_ANNOTATION, UnknownMode, decide, namespace_settings, unreadable, warning,
};
pub use checker::{Checker, ObjectFacts, ObjectReport};
pub use kinds::{ObjectKind, Workload};
pub use owner::OwnerRead;
pub use respond::{Endpoint, Unread, answer, claim_owner_to_read, respond, subject};
pub use wire::{AdmissionRequest, GroupVersionKind, RawObject, ReviewError, UserInfo, decode};

#[cfg(test)]
mod tests;
