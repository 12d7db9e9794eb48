//! The answer for one image ([`Lookup`]) and why a fetch gave none
//! ([`Failure`]): every reason one line, within [`MAX_REASON_BYTES`].

use std::borrow::Cow;
use std::fmt;
use std::sync::Arc;

use super::oci::ImageConfigFacts;
use crate::manifest::one_line;
use crate::policy::message::Bounded;
use crate::telemetry::bounded_field;

/// The answer for one image of an admission.
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
    /// The metric label.
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
        Self {
            kind,
            reason: bounded_reason(reason),
        }
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

/// The longest reason a failure keeps, in bytes: a reason may quote what
/// a registry sent (the JSON reader's errors quote the value they could
/// not read), and it is cached, logged and shown.
pub const MAX_REASON_BYTES: usize = 1 << 10;

pub(crate) fn bounded_reason(reason: String) -> String {
    match bounded_field(&reason, MAX_REASON_BYTES) {
        Cow::Borrowed(_) => reason,
        Cow::Owned(cut) => cut,
    }
}

/// What `err` says, on one line, within [`MAX_REASON_BYTES`]: written
/// through a bounded writer, so an error that quotes megabytes of what a
/// registry sent is never megabytes here.
pub(crate) fn error_text(err: &dyn fmt::Display) -> String {
    let mut text = Bounded::new(MAX_REASON_BYTES);
    // A `Bounded` never fails a write: past its room it drops the rest.
    let _ = fmt::Write::write_fmt(&mut text, format_args!("{err}"));
    one_line(&text.finish())
}
