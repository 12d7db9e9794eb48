//! The AdmissionReview v1 wire format: the request body in
//! ([`decode`]), the response body out ([`encode`]). Nothing here knows
//! what the policy decides.
//!
//! The object stays raw JSON from request to patch ([`RawObject`]): typed
//! decoding would drop fields this program does not know, and a patch
//! computed on a re-encoded object would address the wrong thing.

use std::borrow::Cow;
use std::collections::BTreeMap;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use kube::core::Status;
use kube::core::admission::{AdmissionResponse, META_API_VERSION_V1, META_KIND, Operation};
use serde::{Deserialize, Deserializer, Serialize};

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
    #[error("body is not an AdmissionReview: {}", crate::manifest::one_line(&.0.to_string()))]
    Malformed(#[from] serde_json::Error),
    #[error("body is not an AdmissionReview: not UTF-8 ({0})")]
    NotUtf8(#[from] std::str::Utf8Error),
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
    #[serde(default, borrow)]
    pub groups: Option<Vec<Cow<'a, str>>>,
}

impl AdmissionRequest<'_> {
    /// The response that allows the request: `allowed: true` for its uid.
    pub fn allowed(&self) -> AdmissionResponse {
        let mut response = AdmissionResponse::invalid("");
        response.uid = self.uid.clone().into_owned();
        response.allowed = true;
        response.result = Status::default();
        response
    }
}

/// Decodes an AdmissionReview v1 request body.
pub fn decode(body: &[u8]) -> Result<AdmissionRequest<'_>, ReviewError> {
    // One pass over the whole body: decoding from bytes would check every
    // string on its own, which costs more than the rest of the decoding.
    let text = std::str::from_utf8(body)?;
    let review: ReviewBody = serde_json::from_str(text)?;
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
/// `response.patch` is a Go `[]byte`, which the API documents (and every
/// client expects) as a base64 string; kube-core 5 writes it as an array of
/// numbers, so the patch is written here in its place. Audit annotations
/// are written in key order, so that equal answers are equal bytes.
pub fn encode(mut response: AdmissionResponse) -> Result<Vec<u8>, serde_json::Error> {
    #[derive(Serialize)]
    struct Review<'a> {
        #[serde(rename = "apiVersion")]
        api_version: &'a str,
        kind: &'a str,
        response: Response<'a>,
    }
    #[derive(Serialize)]
    struct Response<'a> {
        #[serde(flatten)]
        response: &'a AdmissionResponse,
        #[serde(skip_serializing_if = "Option::is_none")]
        patch: Option<String>,
        #[serde(
            rename = "auditAnnotations",
            skip_serializing_if = "BTreeMap::is_empty"
        )]
        audit_annotations: BTreeMap<String, String>,
    }
    let patch = response.patch.take().map(|patch| BASE64.encode(patch));
    let audit_annotations = std::mem::take(&mut response.audit_annotations)
        .into_iter()
        .collect();
    serde_json::to_vec(&Review {
        api_version: META_API_VERSION_V1,
        kind: META_KIND,
        response: Response {
            response: &response,
            patch,
            audit_annotations,
        },
    })
}
