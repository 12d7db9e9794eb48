//! The policy: the rules over the raw JSON of a pod, a pod template or a DRA claim.
//! [`rules::entries`] lists them once; [`Evaluator::evaluate`] runs them and tags what each finds
//! with its stable [`RuleId`]. Nothing here logs, reads a clock or touches the network, so the
//! offline `check`, the webhook and the audit give the same answers.

pub mod claim_owner;
pub mod cluster;
pub mod container;
pub mod dra;
pub mod evaluation;
pub mod evaluator;
pub mod fields;
pub mod images;
pub mod message;
pub mod patch;
pub mod pod;
pub mod quantity;
pub mod rule_id;
pub mod rules;
pub mod sharing;
pub mod subject;
/// The rules' table-test helpers, for this crate's tests and, with the
/// `testing` feature, the suites of the crates above.
#[cfg(any(test, feature = "testing"))]
pub mod testing;

pub use crate::cuda::ImageNeeds;
pub use cluster::{ClusterFacts, NodeFacts};
pub use container::READ_ENV_NAMES;
pub use dra::ClaimFacts;
pub use evaluation::{Change, Evaluation, Violation};
pub use evaluator::Evaluator;
pub use images::ImageFacts;
pub use message::{Message, Notice, NoticeKind, quoted_list};
pub use patch::add;
pub use pod::{Container, ContainerKind, ObjectError, PodView, Shape};
pub use rule_id::RuleSet;
pub use rules::{Findings, Mutation, Rule, RuleId, RuleInput};
pub use subject::{Form, Identity, Scope, Subject, scope_for_update};
