//! A JSON document that borrows the text it was read from: the object of
//! an admission request as the request body holds it.
//!
//! Every value is one node of a flat list, in the order of the text, and a
//! node is one word (8 bytes); a string without escapes is its place in the
//! text, not a copy; an array or an object knows where its last node ends,
//! so that reading a field steps over its siblings without reading them.
//! Reading a document costs one allocation for its nodes (and one per
//! string with escapes), and freeing it one; a `serde_json::Value` costs
//! one per string and per map entry. Decoding the GPU pod's review takes
//! 40,360 instructions with it against 56,119 with a `serde_json::Value`
//! and kube's owned request, and freeing the request about 300 against
//! 5,000 to 7,000 (docs/performance.md, "The borrowed document"). What
//! reading may take is bounded by a [`Budget`].
//!
//! [`Json`] is a handle on one value, `Copy`, with the accessors of
//! `serde_json::Value` that the policy reads (`get`, `as_str`, `as_array`,
//! `as_object`, ...). Maps behave as `serde_json`'s do: of two members with
//! the same key the last one counts. Their members come in the order of
//! the text, which for what the API server sends (Go sorts map keys) and
//! for a document made from a `serde_json::Value` (a sorted map) is the
//! order of the keys.
//!
//! A document is read from text ([`Document::parse`], or while a larger
//! text is deserialized: [`read`](fn@read)) or made from a `serde_json::Value` it
//! borrows ([`Document::from_value`]: `check`, `audit` and tests).

mod read;
mod tree;
mod value;

pub use read::{Budget, Everything, Unread, read};
pub use tree::{Array, Document, Elements, Json, Kind, Members, Object};

#[cfg(test)]
mod tests;
