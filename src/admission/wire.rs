//! The AdmissionReview v1 request body, read ([`decode`]).
//!
//! The object stays raw JSON from request to patch ([`RawObject`]): typed
//! decoding would drop fields this program does not know, and a patch
//! computed on a re-encoded object would address the wrong thing.

use std::borrow::Cow;

use kube::core::admission::{META_API_VERSION_V1, META_KIND, Operation};
use serde::de::{self, DeserializeSeed, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer};

use super::object_tree;
use crate::document::{Budget, Document, Json};

/// An object as the API server sent it, borrowing the body, with only the
/// fields some rule reads ([`object_tree`]).
#[derive(Debug, Clone)]
pub struct RawObject<'a> {
    document: Document<'a>,
}

impl<'a> RawObject<'a> {
    pub fn new(document: Document<'a>) -> Self {
        Self { document }
    }

    /// Null when it [`RawObject::exceeds_budget`].
    pub fn json(&self) -> Json<'_> {
        self.document.root()
    }

    /// Over [`object_tree::budget`]: nothing was kept, and a review that
    /// would read it is denied.
    pub fn exceeds_budget(&self) -> bool {
        self.document.exceeded_budget()
    }
}

/// A body that is no AdmissionReview v1 request: answered 400.
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

/// An AdmissionReview v1 request, its strings borrowing the body: the
/// fields of kube's `AdmissionRequest` that gpu-policy reads, as required
/// (`uid`, `kind`, `resource`, `operation`, `userInfo`). Read by hand
/// (`RequestSeed`) so that the reader of `object` and `oldObject` knows the
/// body and the budget the two share.
#[derive(Debug, Clone)]
pub struct AdmissionRequest<'a> {
    pub uid: Cow<'a, str>,
    pub kind: GroupVersionKind<'a>,
    pub sub_resource: Option<Cow<'a, str>>,
    pub name: Cow<'a, str>,
    pub namespace: Option<Cow<'a, str>>,
    pub operation: Operation,
    pub user_info: UserInfo<'a>,
    pub object: Option<RawObject<'a>>,
    pub old_object: Option<RawObject<'a>>,
    pub dry_run: bool,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct GroupVersionKind<'a> {
    #[serde(default, borrow)]
    pub group: Cow<'a, str>,
    #[serde(default, borrow)]
    pub version: Cow<'a, str>,
    #[serde(default, borrow)]
    pub kind: Cow<'a, str>,
}

#[derive(Debug, Clone, Default, Deserialize)]
pub struct UserInfo<'a> {
    #[serde(default, borrow)]
    pub username: Option<Cow<'a, str>>,
    #[serde(default, borrow, deserialize_with = "borrowed_strs")]
    pub groups: Option<Vec<Cow<'a, str>>>,
}

/// Strings that borrow the body: serde borrows a `Cow<str>` field marked
/// `borrow`, but copies the elements of a list of them.
fn borrowed_strs<'de: 'a, 'a, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<Cow<'a, str>>>, D::Error> {
    let list: Option<Vec<Borrowed<'a>>> = Option::deserialize(deserializer)?;
    Ok(list.map(|list| list.into_iter().map(|Borrowed(text)| text).collect()))
}

/// sonic-rs's message for a refused body, on one line, without the excerpt
/// of the body it appends after the position: the body is the requester's,
/// and the message goes into the answer and the log.
fn refusal(error: &sonic_rs::Error) -> String {
    let text = error.to_string();
    let position = format!(" at line {} column {}", error.line(), error.column());
    let end = match text.find(&position) {
        Some(at) => at + position.len(),
        None => text.find("\n\n\t").unwrap_or(text.len()),
    };
    crate::manifest::one_line(&text[..end])
}

/// Refuses a `\u` escape without four hex digits anywhere in the text:
/// sonic-rs steps over the four characters in what it skips (probes,
/// `options`), so would read a body that is not JSON. A backslash only
/// ever begins an escape (elsewhere the reader refuses it).
fn check_unicode_escapes(text: &str) -> Result<(), ReviewError> {
    let bytes = text.as_bytes();
    let mut from = 0;
    // memchr finds the backslashes in vector steps: 300 instructions on
    // the GPU pod's review, where core's search takes about one per byte.
    while let Some(found) = bytes.get(from..).and_then(|rest| memchr::memchr(b'\\', rest)) {
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

/// sonic-rs reads the body into the same serde types as any serde reader
/// (`check` and `audit` use serde_json): the GPU pod 38,700 instructions
/// with serde_json and 34,800 with sonic-rs, the DRA pod 31,400 and 27,900
/// (callgrind, 1,000 decodes; docs/performance.md).
pub fn decode(body: &[u8]) -> Result<AdmissionRequest<'_>, ReviewError> {
    // One pass with simdutf8: 345 instructions for the GPU pod's review
    // where core's `from_utf8` takes 872 (docs/performance.md). Core's
    // runs only to say where a refused body goes wrong.
    let text = match simdutf8::basic::from_utf8(body) {
        Ok(text) => text,
        Err(_) => std::str::from_utf8(body)?,
    };
    check_unicode_escapes(text)?;
    let budget = Budget::new(object_tree::budget(text.len()));
    let mut deserializer = sonic_rs::Deserializer::from_str(text);
    let review = ReviewSeed(Body { text, budget: &budget }).deserialize(&mut deserializer)?;
    deserializer.end()?;
    if review.api_version != META_API_VERSION_V1 {
        return Err(ReviewError::Version(review.api_version.into_owned()));
    }
    if review.kind != META_KIND {
        return Err(ReviewError::Kind(review.kind.into_owned()));
    }
    review.request.ok_or(ReviewError::MissingRequest)
}

/// The AdmissionReview, read in one pass: kube's flattens its `TypeMeta`,
/// which serde reads by buffering the whole body into a content tree first
/// (about 1,000 instructions per review). The fields are kube's.
struct ReviewBody<'a> {
    api_version: Cow<'a, str>,
    kind: Cow<'a, str>,
    request: Option<AdmissionRequest<'a>>,
}

/// Reads a [`ReviewBody`] of `text`, whose objects share `budget`, as
/// serde's derive would: required fields there, none twice, others skipped.
struct ReviewSeed<'t, 'b>(Body<'t, 'b>);

/// The body's text, which the objects' strings borrow, and their budget.
#[derive(Clone, Copy)]
struct Body<'t, 'b> {
    text: &'t str,
    budget: &'b Budget,
}

impl<'de> DeserializeSeed<'de> for ReviewSeed<'de, '_> {
    type Value = ReviewBody<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for ReviewSeed<'de, '_> {
    type Value = ReviewBody<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an AdmissionReview")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let (mut api_version, mut kind, mut request) = (None, None, None);
        while let Some(Borrowed(key)) = map.next_key()? {
            match &*key {
                "apiVersion" => {
                    once(&mut api_version, "apiVersion", map.next_value::<Borrowed>()?)?
                }
                "kind" => once(&mut kind, "kind", map.next_value::<Borrowed>()?)?,
                "request" => {
                    let seed = Nullable(RequestSeed(self.0));
                    once(&mut request, "request", map.next_value_seed(seed)?)?;
                }
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        Ok(ReviewBody {
            api_version: required(api_version, "apiVersion")?.0,
            kind: required(kind, "kind")?.0,
            request: request.flatten(),
        })
    }
}

struct RequestSeed<'t, 'b>(Body<'t, 'b>);

impl<'de> DeserializeSeed<'de> for RequestSeed<'de, '_> {
    type Value = AdmissionRequest<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_map(self)
    }
}

impl<'de> Visitor<'de> for RequestSeed<'de, '_> {
    type Value = AdmissionRequest<'de>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("an AdmissionRequest")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut uid = None;
        let mut kind = None;
        let mut resource = None;
        let mut sub_resource = None;
        let mut name = None;
        let mut namespace = None;
        let mut operation = None;
        let mut user_info = None;
        let mut object = None;
        let mut old_object = None;
        let mut dry_run = None;
        let object_seed = || Nullable(ObjectSeed(self.0));
        while let Some(Borrowed(key)) = map.next_key()? {
            match &*key {
                "uid" => once(&mut uid, "uid", map.next_value::<Borrowed>()?.0)?,
                "kind" => once(&mut kind, "kind", map.next_value()?)?,
                "resource" => once(&mut resource, "resource", map.next_value::<IgnoredAny>()?)?,
                "subResource" => {
                    let value = map.next_value::<Option<Borrowed>>()?;
                    once(&mut sub_resource, "subResource", value.map(|b| b.0))?;
                }
                "name" => once(&mut name, "name", map.next_value::<Borrowed>()?.0)?,
                "namespace" => {
                    let value = map.next_value::<Option<Borrowed>>()?;
                    once(&mut namespace, "namespace", value.map(|b| b.0))?;
                }
                "operation" => once(&mut operation, "operation", map.next_value()?)?,
                "userInfo" => once(&mut user_info, "userInfo", map.next_value()?)?,
                "object" => once(&mut object, "object", map.next_value_seed(object_seed())?)?,
                "oldObject" => {
                    let value = map.next_value_seed(object_seed())?;
                    once(&mut old_object, "oldObject", value)?;
                }
                "dryRun" => once(&mut dry_run, "dryRun", map.next_value()?)?,
                _ => {
                    map.next_value::<IgnoredAny>()?;
                }
            }
        }
        required(resource, "resource")?;
        Ok(AdmissionRequest {
            uid: required(uid, "uid")?,
            kind: required(kind, "kind")?,
            sub_resource: sub_resource.flatten(),
            name: name.unwrap_or_default(),
            namespace: namespace.flatten(),
            operation: required(operation, "operation")?,
            user_info: required(user_info, "userInfo")?,
            object: object.flatten(),
            old_object: old_object.flatten(),
            dry_run: dry_run.unwrap_or_default(),
        })
    }
}

struct ObjectSeed<'t, 'b>(Body<'t, 'b>);

impl<'de> DeserializeSeed<'de> for ObjectSeed<'de, '_> {
    type Value = RawObject<'de>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        object_tree::read(self.0.text, deserializer, self.0.budget).map(RawObject::new)
    }
}

/// A value read with the seed inside, or null.
struct Nullable<S>(S);

impl<'de, S: DeserializeSeed<'de>> DeserializeSeed<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn deserialize<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        deserializer.deserialize_option(self)
    }
}

impl<'de, S: DeserializeSeed<'de>> Visitor<'de> for Nullable<S> {
    type Value = Option<S::Value>;

    fn expecting(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.write_str("a value or null")
    }

    fn visit_none<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_unit<E>(self) -> Result<Self::Value, E> {
        Ok(None)
    }

    fn visit_some<D: Deserializer<'de>>(self, deserializer: D) -> Result<Self::Value, D::Error> {
        self.0.deserialize(deserializer).map(Some)
    }
}

/// Borrows the body, unless it has escapes.
#[derive(Deserialize)]
struct Borrowed<'a>(#[serde(borrow)] Cow<'a, str>);

fn once<T, E: de::Error>(slot: &mut Option<T>, field: &'static str, value: T) -> Result<(), E> {
    if slot.is_some() {
        return Err(E::duplicate_field(field));
    }
    *slot = Some(value);
    Ok(())
}

fn required<T, E: de::Error>(slot: Option<T>, field: &'static str) -> Result<T, E> {
    slot.ok_or_else(|| E::missing_field(field))
}

#[cfg(test)]
mod tests;
