//! The strings of a pod that reach the resolver (the node selector's
//! architecture, the image references) are checked against Kubernetes'
//! own limits first: a pod under admission has not been validated yet, and
//! a value of megabytes must not be copied, hashed, spawned with, cached
//! or keyed by. A refusal quotes a short prefix of the value, never all
//! of it.

/// The longest label value Kubernetes accepts.
pub const MAX_LABEL_VALUE: usize = 63;

/// The characters of a value a refusal quotes.
const SHOWN_CHARS: usize = 48;

/// `value` quoted for a one-line message: its first characters, escaped,
/// and its length when that is not all of it (`"amd64…" (1400000
/// bytes)`).
pub fn shown(value: &str) -> String {
    match value.char_indices().nth(SHOWN_CHARS) {
        None => format!("{value:?}"),
        Some((end, _)) => {
            let prefix = value.get(..end).unwrap_or_default();
            format!("{:?} ({} bytes)", format!("{prefix}…"), value.len())
        }
    }
}

/// A pod's string that is not a label value Kubernetes accepts: the
/// field, and a prefix of the value ([`shown`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LabelValueError {
    #[error(
        "{field} {shown} is not a label value: a label value has at most \
         {MAX_LABEL_VALUE} characters"
    )]
    TooLong { field: String, shown: String },
    #[error(
        "{field} {shown} is not a label value: letters, digits, '-', '_' and '.', \
         starting and ending with a letter or digit"
    )]
    Malformed { field: String, shown: String },
}

/// Whether `value` is a label value Kubernetes accepts: at most 63
/// characters of `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`.
pub fn check_label_value(field: &str, value: &str) -> Result<(), LabelValueError> {
    let bytes = value.as_bytes();
    if bytes.len() > MAX_LABEL_VALUE {
        let (field, shown) = (field.to_owned(), shown(value));
        return Err(LabelValueError::TooLong { field, shown });
    }
    let inner = |b: &u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.');
    let well_formed = match bytes {
        [] => true,
        [only] => only.is_ascii_alphanumeric(),
        [first, middle @ .., last] => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && middle.iter().all(inner)
        }
    };
    if well_formed {
        Ok(())
    } else {
        let (field, shown) = (field.to_owned(), shown(value));
        Err(LabelValueError::Malformed { field, shown })
    }
}

#[cfg(test)]
mod tests;
