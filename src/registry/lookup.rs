//! The answer for one image ([`Lookup`]) and why a fetch gave none
//! ([`Failure`]): every reason one line, cut at [`MAX_REASON_BYTES`](super::MAX_REASON_BYTES)
//! (`reason.rs`).

use std::sync::Arc;

use super::oci::ImageConfigFacts;
use super::reason::bounded_reason;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Lookup {
    /// Shared with the resolver's cache.
    Found(Arc<ImageConfigFacts>),
    /// The registry answered with an error, or with content that is not
    /// what was asked for, or a name gave no address.
    Failed(String),
    /// A document was larger than the webhook reads (`manifest larger than
    /// 4 MiB`); the connection was dropped there.
    TooLarge(String),
    /// Nothing was contacted, or not where the answer pointed: the image
    /// is not a reference or the platform no label value, the host is not
    /// in `imageResolution.registries`, an address or a redirect is one
    /// the webhook never contacts, or the lookup queue is full.
    Refused(String),
    /// No answer within the budget; the fetch goes on in the background.
    TimedOut,
}

impl Lookup {
    pub fn result(&self) -> &'static str {
        match self {
            Lookup::Found(_) => "found",
            Lookup::Failed(_) => "failed",
            Lookup::TooLarge(_) => "too_large",
            Lookup::Refused(_) => "refused",
            Lookup::TimedOut => "timed_out",
        }
    }
}

/// Why a fetch gave no facts: the kind decides the [`Lookup`] it becomes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    pub(crate) kind: FailureKind,
    pub(crate) reason: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum FailureKind {
    Failed,
    TooLarge,
    Refused,
}

impl Failure {
    fn new(kind: FailureKind, reason: String) -> Self {
        Self { kind, reason: bounded_reason(reason) }
    }

    pub(crate) fn failed(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Failed, reason.into())
    }

    pub(crate) fn too_large(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::TooLarge, reason.into())
    }

    pub(crate) fn refused(reason: impl Into<String>) -> Self {
        Self::new(FailureKind::Refused, reason.into())
    }

    /// A plain failure's reason after `context` (what was fetched, for the
    /// log). Refusals and size bounds say all in their own words, short
    /// enough for the warning a user reads.
    pub(crate) fn within(self, context: &str) -> Self {
        match self.kind {
            FailureKind::Failed => Self::failed(format!("{context}: {}", self.reason)),
            FailureKind::TooLarge | FailureKind::Refused => self,
        }
    }
}

impl From<Failure> for Lookup {
    fn from(failure: Failure) -> Self {
        match failure.kind {
            FailureKind::Failed => Lookup::Failed(failure.reason),
            FailureKind::TooLarge => Lookup::TooLarge(failure.reason),
            FailureKind::Refused => Lookup::Refused(failure.reason),
        }
    }
}

impl From<Result<Arc<ImageConfigFacts>, Failure>> for Lookup {
    fn from(answer: Result<Arc<ImageConfigFacts>, Failure>) -> Self {
        match answer {
            Ok(facts) => Lookup::Found(facts),
            Err(failure) => failure.into(),
        }
    }
}
