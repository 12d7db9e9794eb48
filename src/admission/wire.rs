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
use serde::{Deserialize, Deserializer, Serialize};
use serde_json::value::RawValue;

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
    // One pass over the whole body: decoding from bytes would check every
    // string on its own.
    let text = std::str::from_utf8(body)?;
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
/// The fields are kube's `AdmissionResponse`'s, in its order, written
/// from borrowed fields rather than through `#[serde(flatten)]`, which
/// writes each one through a map adapter. Two differ:
/// - `patch` is a Go `[]byte`, which the API documents (and every client
///   expects) as a base64 string; kube-core 5 writes it as an array of
///   numbers, so it is written here as base64, after the fields kube
///   writes.
/// - Audit annotations are written last and in key order, so that equal
///   answers are equal bytes.
///
/// `patchType` (private to kube's type) is written as `JSONPatch`, the
/// only type there is, whenever there is a patch.
pub fn encode(response: AdmissionResponse) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    struct Review<'a> {
        #[serde(rename = "apiVersion")]
        api_version: &'a str,
        kind: &'a str,
        response: Response<'a>,
    }
    #[derive(Serialize)]
    struct Response<'a> {
        uid: &'a str,
        allowed: bool,
        status: &'a Status,
        #[serde(rename = "patchType", skip_serializing_if = "Option::is_none")]
        patch_type: Option<&'a str>,
        #[serde(skip_serializing_if = "Option::is_none")]
        warnings: Option<&'a [String]>,
        #[serde(skip_serializing_if = "Option::is_none")]
        patch: Option<Box<RawValue>>,
        #[serde(
            rename = "auditAnnotations",
            skip_serializing_if = "BTreeMap::is_empty"
        )]
        audit_annotations: BTreeMap<&'a str, &'a str>,
    }
    let patch = response.patch.as_deref().map(base64_string);
    let review = Review {
        api_version: META_API_VERSION_V1,
        kind: META_KIND,
        response: Response {
            uid: &response.uid,
            allowed: response.allowed,
            status: &response.result,
            patch_type: patch.as_ref().map(|_| JSON_PATCH),
            warnings: response.warnings.as_deref(),
            audit_annotations: response
                .audit_annotations
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str()))
                .collect(),
            patch,
        },
    };
    // Room for the envelope, the status and the patch, so that the buffer
    // is not grown as it is written.
    let patch_len = review.response.patch.as_ref().map_or(0, |p| p.get().len());
    let mut body = Vec::with_capacity(ENVELOPE_BYTES + response.uid.len() + patch_len);
    serde_json::to_writer(&mut body, &review)?;
    Ok(body)
}

/// `bytes` in base64, as a JSON string. The base64 alphabet needs no
/// escapes, so the string is written as it is rather than scanned for
/// them byte by byte (a patch's base64 is most of an answer).
fn base64_string(bytes: &[u8]) -> Box<RawValue> {
    // Encoded in vector steps into a string of its final size (Cargo.toml
    // says why this encoder).
    let mut quoted = String::with_capacity(bytes.len().div_ceil(3) * 4 + 2);
    quoted.push('"');
    base64_simd::STANDARD.encode_append(bytes, &mut quoted);
    quoted.push('"');
    // SAFETY: a quote, the base64 alphabet (letters, digits, `+`, `/`,
    // `=`), a quote: one JSON string, without whitespace around it, which
    // is what a RawValue must hold. (`from_string` would parse it again to
    // find that out: about 800 instructions, twice the encoding.)
    unsafe { RawValue::from_string_unchecked(quoted) }
}

/// The patch type of every patch.
const JSON_PATCH: &str = "JSONPatch";

/// An answer's bytes besides its uid and patch: the envelope, `allowed`,
/// a short status and a warning or two.
const ENVELOPE_BYTES: usize = 512;

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
