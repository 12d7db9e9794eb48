//! The reasons a lookup gives: one line, within [`MAX_REASON_BYTES`].

use std::borrow::Cow;
use std::fmt;

use crate::manifest::one_line;
use crate::policy::message::Bounded;
use crate::telemetry::bounded_field;

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
