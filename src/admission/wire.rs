//! The AdmissionReview v1 wire format: the request body in
//! ([`decode`]), the response body out ([`encode`]). Nothing here knows
//! what the policy decides.
//!
//! The object stays raw JSON from request to patch ([`RawObject`]): typed
//! decoding would drop fields this program does not know, and a patch
//! computed on a re-encoded object would address the wrong thing.

use std::borrow::Cow;
use std::collections::BTreeMap;
use std::sync::LazyLock;

use kube::core::admission::{AdmissionResponse, META_API_VERSION_V1, META_KIND, Operation};
use kube::core::{Status, TypeMeta};
use serde::{Deserialize, Deserializer};

use super::object_tree;
use crate::document::{Document, Json};

/// An object as the API server sent it, a [`Document`] that borrows the
/// request body, less the fields no rule reads ([`object_tree`]: probes,
/// commands, ports, `managedFields`, `status`, env entries of other
/// names). The policy reads [`RawObject::json`].
#[derive(Debug, Clone)]
pub struct RawObject<'a> {
    document: Document<'a>,
}

impl<'a> RawObject<'a> {
    pub fn new(document: Document<'a>) -> Self {
        Self { document }
    }

    /// The object.
    pub fn json(&self) -> Json<'_> {
        self.document.root()
    }
}

/// Read without the fields no rule reads ([`object_tree`]).
impl<'de: 'a, 'a> Deserialize<'de> for RawObject<'a> {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        object_tree::read(deserializer).map(RawObject::new)
    }
}

/// A review body that is not an AdmissionReview v1 request. The server
/// answers these with HTTP 400.
#[derive(Debug, thiserror::Error)]
pub enum ReviewError {
    #[error("body is not an AdmissionReview: {}", refusal(.0))]
    Malformed(#[from] sonic_rs::Error),
    #[error("body is not an AdmissionReview: not UTF-8 ({0})")]
    NotUtf8(#[from] std::str::Utf8Error),
    #[error("body is not an AdmissionReview: invalid \\u escape at line {line} column {column}")]
    Escape { line: usize, column: usize },
    #[error("unsupported apiVersion {0:?}: only admission.k8s.io/v1 is served")]
    Version(String),
    #[error("kind is {0:?}, expected AdmissionReview")]
    Kind(String),
    #[error("AdmissionReview has no request")]
    MissingRequest,
}

/// An AdmissionReview v1 request, read from the body it borrows: the
/// fields gpu-policy reads, with strings that point into the body.
///
/// kube's `AdmissionRequest` owns every string of the request and its
/// `options` as a JSON tree; the fields read here are the same and as
/// required (`uid`, `kind`, `resource`, `operation`, `userInfo`), the rest
/// (`requestKind`, `requestResource`, `options`, ...) is parsed and left.
#[derive(Debug, Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct AdmissionRequest<'a> {
    #[serde(borrow)]
    pub uid: Cow<'a, str>,
    #[serde(borrow)]
    pub kind: GroupVersionKind<'a>,
    /// Required as the API server always sends it; not read.
    #[serde(rename = "resource")]
    _resource: serde::de::IgnoredAny,
    #[serde(default, borrow)]
    pub sub_resource: Option<Cow<'a, str>>,
    #[serde(default, borrow)]
    pub name: Cow<'a, str>,
    #[serde(default, borrow)]
    pub namespace: Option<Cow<'a, str>>,
    pub operation: Operation,
    #[serde(borrow)]
    pub user_info: UserInfo<'a>,
    #[serde(borrow)]
    pub object: Option<RawObject<'a>>,
    #[serde(borrow)]
    pub old_object: Option<RawObject<'a>>,
    #[serde(default)]
    pub dry_run: bool,
}

/// The kind of the object of a request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
}

/// Who sent the request.
#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo<'a> {
    #[serde(default, borrow)]
    pub username: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed_strs")]
    pub groups: Option<Vec<Cow<'a, str>>>,
}

/// A list of strings that point into the body (unless they have escapes):
/// serde borrows a `Cow<str>` field marked `borrow`, but copies the
/// elements of a list of them.
fn borrowed_strs<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<Cow<'a, str>>>, D::Error> {
    #[derive(Deserialize)]
    struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);
    let list: Option<Vec<Borrowed<'a>>> = Option::deserialize(deserializer)?;
    Ok(list.map(|list| list.into_iter().map(|Borrowed(text)| text).collect()))
}

impl AdmissionRequest<'_> {
    /// The response that allows the request: `allowed: true` for its uid.
    pub fn allowed(&self) -> AdmissionResponse {
        let mut response = ALLOWED.clone();
        response.uid = self.uid.clone().into_owned();
        response
    }
}

/// The allowed response, less its uid. kube's type has no other public
/// constructor than `invalid`, which allocates a type meta (not written
/// on the wire) and a reason: cloning this one allocates nothing.
static ALLOWED: LazyLock<AdmissionResponse> = LazyLock::new(|| {
    let mut response = AdmissionResponse::invalid("");
    response.types = TypeMeta::default();
    response.allowed = true;
    response.result = Status::default();
    response
});

/// sonic-rs's message for a body it refuses, on one line, without the
/// excerpt of the body it appends after the position: the body is the
/// requester's, and the message goes into the answer and the log. (A
/// message that quotes the requester's text is cut at the first thing
/// that reads like the position, which only shortens it.)
fn refusal(error: &sonic_rs::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let end = match text.find(&position) {
        Some(at) => at + position.len(),
        None => text.find("\n\n\t").unwrap_or(text.len()),
    };
    crate::manifest::one_line(&text[..end])
}

/// Refuses a `\u` escape without four hex digits after it, anywhere in
/// the text. sonic-rs checks every other escape, and this one in the
/// strings it reads, but steps over the four characters in what it skips
/// (probes, `options`, ...): without this, a body that is not JSON, which
/// the API server never sends and serde_json refuses, would be read.
///
/// A backslash only ever begins an escape (outside a string it is not
/// JSON, which the reader refuses), so each one found is an escape and the
/// next is looked for after it.
fn check_unicode_escapes(text: &str) -> Result<(), ReviewError> {
    let bytes = text.as_bytes();
    let mut from = 0;
    while let Some(found) = bytes
        .get(from..)
        .and_then(|rest| memchr::memchr(b'\\', rest))
    {
        let at = from + found;
        from = match bytes.get(at + 1) {
            Some(b'u') => {
                let digits = bytes.get(at + 2..at + 6);
                if !digits.is_some_and(|d| d.iter().all(u8::is_ascii_hexdigit)) {
                    let before = text.get(..at).unwrap_or(text);
                    let line = before.matches('\n').count() + 1;
                    let column = before.len() - before.rfind('\n').map_or(0, |n| n + 1) + 1;
                    return Err(ReviewError::Escape { line, column });
                }
                at + 6
            }
            // Another escape (the reader checks it), or the end.
            _ => at + 2,
        };
    }
    Ok(())
}

/// Decodes an AdmissionReview v1 request body.
///
/// sonic-rs reads it (Cargo.toml says why), into the same serde types and
/// the same borrowed document as any serde reader; `check` and `audit`
/// read files with serde_json.
pub fn decode(body: &[u8]) -> Result<AdmissionRequest<'_>, ReviewError> {
    // One pass over the whole body, in vector steps (a third of core's
    // instructions); decoding from bytes would check every string on its
    // own. Core's check runs only to say where a refused body goes wrong.
    let text = match simdutf8::basic::from_utf8(body) {
        Ok(text) => text,
        Err(_) => std::str::from_utf8(body)?,
    };
    check_unicode_escapes(text)?;
    let review: ReviewBody = sonic_rs::from_str(text)?;
    if review.api_version != META_API_VERSION_V1 {
        return Err(ReviewError::Version(review.api_version.into_owned()));
    }
    if review.kind != META_KIND {
        return Err(ReviewError::Kind(review.kind.into_owned()));
    }
    review.request.ok_or(ReviewError::MissingRequest)
}

/// The AdmissionReview as the API server sends it, read in one pass.
///
/// kube's `AdmissionReview` flattens its `TypeMeta`, and serde reads a
/// struct with a flattened field by first buffering the whole body into
/// its own content tree and then reading that again (about 1,000
/// instructions per review here). The fields are the same, and equally
/// required.
#[derive(Deserialize)]
struct ReviewBody<'a> {
    #[serde(rename = "apiVersion", borrow)]
    api_version: Cow<'a, str>,
    #[serde(borrow)]
    kind: Cow<'a, str>,
    #[serde(default, borrow)]
    request: Option<AdmissionRequest<'a>>,
}

/// Encodes the response as an AdmissionReview v1.
///
/// The fields are kube's `AdmissionResponse`'s, in its order. Two differ:
/// - `patch` is a Go `[]byte`, which the API documents (and every client
///   expects) as a base64 string; kube-core 5 writes it as an array of
///   numbers, so it is written here as base64, after the fields kube
///   writes.
/// - Audit annotations are written last and in key order, so that equal
///   answers are equal bytes.
///
/// `patchType` (private to kube's type) is written as `JSONPatch`, the
/// only type there is, whenever there is a patch.
///
/// The keys, the envelope's constants and the patch's base64 (an alphabet
/// without escapes) are written as they are; every value that comes from
/// the response (the uid, the status, warnings, audit annotations) goes
/// through serde_json. Writing the constants through serde as well
/// scanned each one for escapes: about 1,000 instructions per answer. The
/// tests hold the bytes to those of a serde struct of the same fields.
pub fn encode(response: AdmissionResponse) -> Result<Vec<u8>, serde_json::Error> {
    let patch = response.patch.as_deref();
    let patch_len = patch.map_or(0, |p| p.len().div_ceil(3) * 4);
    let mut body = Vec::with_capacity(ENVELOPE_BYTES + response.uid.len() + patch_len);
    body.extend_from_slice(ENVELOPE_START.as_bytes());
    serde_json::to_writer(&mut body, &response.uid)?;
    body.extend_from_slice(if response.allowed {
        br#","allowed":true,"status":"#
    } else {
        br#","allowed":false,"status":"#
    });
    serde_json::to_writer(&mut body, &response.result)?;
    if patch.is_some() {
        body.extend_from_slice(br#","patchType":"JSONPatch""#);
    }
    if let Some(warnings) = &response.warnings {
        body.extend_from_slice(br#","warnings":"#);
        serde_json::to_writer(&mut body, warnings)?;
    }
    if let Some(patch) = patch {
        body.extend_from_slice(br#","patch":""#);
        // In vector steps (Cargo.toml says why this encoder).
        base64_simd::STANDARD.encode_append(patch, &mut body);
        body.push(b'"');
    }
    if !response.audit_annotations.is_empty() {
        let sorted: BTreeMap<&str, &str> = response
            .audit_annotations
            .iter()
            .map(|(key, value)| (key.as_str(), value.as_str()))
            .collect();
        body.extend_from_slice(br#","auditAnnotations":"#);
        serde_json::to_writer(&mut body, &sorted)?;
    }
    body.extend_from_slice(b"}}");
    Ok(body)
}

/// An answer up to its uid's value.
const ENVELOPE_START: &str =
    r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"#;

/// An answer's bytes besides its uid and patch: the envelope, `allowed`,
/// a short status and a warning or two.
const ENVELOPE_BYTES: usize = 512;

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
