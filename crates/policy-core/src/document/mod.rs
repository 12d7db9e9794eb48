//! A JSON document that borrows the text it was read from: the object of an admission
//! request as the request body holds it.
//!
//! Every value is one node (8 bytes) of a flat list in text order; a string without escapes
//! is its place in the text; an array or object knows where its last node ends, so reading a
//! field steps over its siblings. One allocation for the nodes (plus one per escaped string)
//! where a `serde_json::Value` makes one per string and map entry: the GPU pod's decode is
//! 40,360 instructions against 56,119, freeing about 300 against 5,000 to 7,000
//! (docs/performance.md, "The borrowed document"). A [`Budget`] bounds reading.
//!
//! [`Json`] is a `Copy` handle on one value with the `serde_json::Value` accessors the policy
//! reads. Of two members with one key the last counts, as in `serde_json`; members come in
//! text order, which is key order for what the API server sends (Go sorts map keys) and for a
//! document made from a `serde_json::Value`.
//!
//! Read from text ([`Document::parse`], or inside a larger deserialization: [`read`](fn@read)) or
//! made from a borrowed `serde_json::Value` ([`Document::from_value`]: `check`, `audit` and tests).

mod read;
mod tree;
mod value;

pub use read::{Budget, Everything, Unread, read};
pub use tree::{Array, Document, Elements, Json, Kind, Members, Object};

#[cfg(test)]
mod tests;
