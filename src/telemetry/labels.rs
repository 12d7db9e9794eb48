//! Label values from closed lists: what any value outside a label's list
//! is counted as. Here, below every room that counts (the registry client,
//! the metrics of the server), so that each can use it.

/// The value of a label for anything outside its list.
pub const OTHER: &str = "other";

/// `value` when it is one of `known`, else [`OTHER`]: the value of a label
/// that only the server's own words may take.
pub fn closed_label(value: &str, known: &[&'static str]) -> &'static str {
    known.iter().find(|word| **word == value).copied().unwrap_or(OTHER)
}
