//! AdmissionReview v1 in, AdmissionReview v1 out.
//!
//! The object stays raw JSON from request to patch ([`RawObject`]): typed
//! decoding would drop fields this program does not know, and a patch
//! computed on a re-encoded object would address the wrong thing.

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use kube::core::admission::{
    AdmissionRequest, AdmissionResponse, META_API_VERSION_V1, META_KIND, Operation,
};
use kube::core::{ApiResource, DynamicResourceScope, Resource, Status, TypeMeta};
use serde::de::DeserializeSeed;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;

use super::object_tree::ObjectTree;
use super::{
    Decision, Mode, ObjectKind, PodOperation, Subject, decide, evaluate_object, namespace_guard,
    unreadable,
};
use crate::policy::{
    ClaimFacts, ClusterFacts, Evaluator, ImageFacts, Message, RuleId, Shape, gpu_images,
};
use crate::registry::Platform;
use crate::settings::Settings;

/// An object as the API server sent it, less the fields no rule reads
/// ([`ObjectTree`]: probes, commands, ports, `managedFields`, `status`).
///
/// `metadata` is decoded from `raw` only if something asks for it through
/// [`Resource`] (nothing on the admission path does); the policy reads only
/// `raw`.
#[derive(Debug, Clone)]
pub struct RawObject {
    pub raw: Value,
    metadata: OnceLock<ObjectMeta>,
}

impl RawObject {
    pub fn new(raw: Value) -> Self {
        Self {
            raw,
            metadata: OnceLock::new(),
        }
    }

    fn decoded_metadata(&self) -> ObjectMeta {
        self.raw
            .get("metadata")
            .and_then(|meta| ObjectMeta::deserialize(meta).ok())
            .unwrap_or_default()
    }
}

impl PartialEq for RawObject {
    fn eq(&self, other: &Self) -> bool {
        self.raw == other.raw
    }
}

/// Read without the fields no rule reads ([`ObjectTree`]).
impl<'de> Deserialize<'de> for RawObject {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        ObjectTree::object()
            .deserialize(deserializer)
            .map(RawObject::new)
    }
}

impl Serialize for RawObject {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.raw.serialize(serializer)
    }
}

impl Resource for RawObject {
    type DynamicType = ApiResource;
    type Scope = DynamicResourceScope;

    fn kind(dt: &ApiResource) -> Cow<'_, str> {
        dt.kind.as_str().into()
    }

    fn group(dt: &ApiResource) -> Cow<'_, str> {
        dt.group.as_str().into()
    }

    fn version(dt: &ApiResource) -> Cow<'_, str> {
        dt.version.as_str().into()
    }

    fn plural(dt: &ApiResource) -> Cow<'_, str> {
        dt.plural.as_str().into()
    }

    fn meta(&self) -> &ObjectMeta {
        self.metadata.get_or_init(|| self.decoded_metadata())
    }

    /// Not on the admission path: nothing changes metadata this way, and
    /// a change here would not reach `raw`.
    fn meta_mut(&mut self) -> &mut ObjectMeta {
        if self.metadata.get().is_none() {
            self.metadata = OnceLock::from(self.decoded_metadata());
        }
        match self.metadata.get_mut() {
            Some(metadata) => metadata,
            // `OnceLock::get_mut_or_init` is not stable; the lock was filled above.
            None => unreachable!("metadata was set above"),
        }
    }
}

/// Which webhook is asking: the mutating one (enforce namespaces) or a
/// validating one, whose path tells the namespace's mode.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Mutate,
    Validate(Mode),
    /// The namespace guard on the `gpu-policy.io/mode` label.
    Namespace,
}

impl Endpoint {
    /// The HTTP path the API server calls.
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Mutate => "/mutate",
            Endpoint::Validate(Mode::Enforce) => "/validate/enforce",
            Endpoint::Validate(Mode::Warn) => "/validate/warn",
            Endpoint::Validate(Mode::Audit) => "/validate/audit",
            Endpoint::Namespace => "/validate/namespace",
        }
    }

    pub const ALL: [Endpoint; 5] = [
        Endpoint::Mutate,
        Endpoint::Validate(Mode::Enforce),
        Endpoint::Validate(Mode::Warn),
        Endpoint::Validate(Mode::Audit),
        Endpoint::Namespace,
    ];
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

/// Decodes an AdmissionReview v1 request body.
pub fn decode(body: &[u8]) -> Result<AdmissionRequest<RawObject>, ReviewError> {
    // One pass over the whole body: decoding from bytes would check every
    // string on its own, which costs more than the rest of the decoding.
    let text = std::str::from_utf8(body)?;
    let review: ReviewBody = serde_json::from_str(text)?;
    if review.api_version != META_API_VERSION_V1 {
        return Err(ReviewError::Version(review.api_version));
    }
    if review.kind != META_KIND {
        return Err(ReviewError::Kind(review.kind));
    }
    let mut request = review.request.ok_or(ReviewError::MissingRequest)?;
    request.types = TypeMeta {
        api_version: review.api_version,
        kind: review.kind,
    };
    Ok(request)
}

/// The AdmissionReview as the API server sends it, read in one pass.
///
/// kube's `AdmissionReview` flattens its `TypeMeta`, and serde reads a
/// struct with a flattened field by first buffering the whole body into
/// its own content tree and then reading that again (about 1,000
/// instructions per review here). The fields are the same, and equally
/// required.
#[derive(Deserialize)]
struct ReviewBody {
    #[serde(rename = "apiVersion")]
    api_version: String,
    kind: String,
    #[serde(default)]
    request: Option<AdmissionRequest<RawObject>>,
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

/// What became of one request, as metrics and the decision log name it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DecisionKind {
    /// Allowed as it is.
    Allowed,
    /// Allowed with a patch.
    Mutated,
    Denied,
    /// Allowed with warnings.
    Warned,
    /// Not something the policy looks at.
    Ignored,
    /// The body was not a review the server could read (HTTP 400).
    BadRequest,
}

impl DecisionKind {
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::Allowed => "allowed",
            DecisionKind::Mutated => "mutated",
            DecisionKind::Denied => "denied",
            DecisionKind::Warned => "warned",
            DecisionKind::Ignored => "ignored",
            DecisionKind::BadRequest => "bad_request",
        }
    }
}

impl fmt::Display for DecisionKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What was decided, for logs and metrics.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    pub decision: DecisionKind,
    /// Rules that changed (or would change) the object.
    pub changes: BTreeSet<RuleId>,
    /// Rules the object violates.
    pub violations: BTreeSet<RuleId>,
}

impl Verdict {
    fn new(decision: DecisionKind) -> Self {
        Self {
            decision,
            changes: BTreeSet::new(),
            violations: BTreeSet::new(),
        }
    }
}

/// Answers one admission request as the webhook does: with the settings in
/// force in the request's namespace and what the webhook knows of the
/// cluster, when it can read it.
/// `images`: what the images of the object need, as resolved from their
/// registries beforehand ([`images_to_resolve`]).
pub fn answer(
    request: &AdmissionRequest<RawObject>,
    endpoint: Endpoint,
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
    images: Option<&dyn ImageFacts>,
) -> (AdmissionResponse, Verdict) {
    let namespace_settings =
        super::namespace_settings(settings, cluster, request.namespace.as_deref());
    let evaluator = Evaluator::of_cluster(settings, &namespace_settings, cluster, images);
    respond(request, endpoint, &evaluator)
}

/// The images worth a registry lookup before [`answer`]: those of the GPU
/// containers of a Pod being created or of a workload's pod template, and
/// the platform the pod runs on. None for everything else, so that no
/// other object waits on a registry.
pub fn images_to_resolve(
    request: &AdmissionRequest<RawObject>,
    endpoint: Endpoint,
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
) -> Option<(Vec<String>, Platform)> {
    let kind = ObjectKind::of(&request.kind.group, &request.kind.kind);
    let evaluated = matches!(
        (kind, &request.operation, endpoint),
        (ObjectKind::Pod, Operation::Create, _)
            | (
                ObjectKind::Workload(_),
                Operation::Create | Operation::Update,
                Endpoint::Validate(_)
            )
    );
    if !evaluated || request.sub_resource.is_some() {
        return None;
    }
    let shape = match kind {
        ObjectKind::Pod => Shape::Pod,
        ObjectKind::Workload(workload) => workload.shape(),
        ObjectKind::Claim(_) | ObjectKind::Ignored => return None,
    };
    let object = &request.object.as_ref()?.raw;
    let namespace = request.namespace.as_deref().unwrap_or("default");
    // The claims the rules will resolve, from the same cluster; nothing
    // else of the evaluation is needed to know the GPU containers.
    let claims = cluster.map(|c| -> &dyn ClaimFacts { c });
    let (images, spec) = gpu_images::gpu_images(object, shape, namespace, settings, claims)?;
    let images = images.into_iter().map(str::to_owned).collect();
    Some((images, Platform::of_spec_fields(spec)))
}

/// Answers one admission request with the evaluator given: tests and
/// benchmarks choose the namespace's settings themselves.
pub fn respond(
    request: &AdmissionRequest<RawObject>,
    endpoint: Endpoint,
    evaluator: &Evaluator<'_>,
) -> (AdmissionResponse, Verdict) {
    let response = AdmissionResponse::from(request);
    let ignored = Verdict::new(DecisionKind::Ignored);
    if endpoint == Endpoint::Namespace {
        return guard_namespace(request, response, evaluator.settings);
    }
    let kind = ObjectKind::of(&request.kind.group, &request.kind.kind);
    let ephemeral = request.sub_resource.as_deref() == Some("ephemeralcontainers");
    let operation = match (kind, &request.operation, endpoint) {
        (ObjectKind::Pod, Operation::Create, _) if request.sub_resource.is_none() => {
            PodOperation::Create
        }
        (ObjectKind::Pod, Operation::Update, _) if ephemeral => match request.old_object.as_ref() {
            Some(old) => PodOperation::EphemeralContainers {
                old_object: &old.raw,
            },
            None => {
                return deny(response, "the review carries no oldObject");
            }
        },
        (ObjectKind::Workload(_), Operation::Create | Operation::Update, Endpoint::Validate(_))
            if request.sub_resource.is_none() =>
        {
            PodOperation::Create
        }
        (ObjectKind::Claim(_), Operation::Create | Operation::Update, Endpoint::Validate(_))
            if request.sub_resource.is_none() && !spec_unchanged(request) =>
        {
            PodOperation::Create
        }
        _ => return (response, ignored),
    };
    let Some(object) = request.object.as_ref() else {
        return deny(response, "the review carries no object");
    };
    let namespace = request
        .namespace
        .as_deref()
        .or_else(|| {
            object
                .raw
                .pointer("/metadata/namespace")
                .and_then(Value::as_str)
        })
        .unwrap_or("default");
    let mode = match endpoint {
        Endpoint::Mutate | Endpoint::Namespace => Mode::Enforce,
        Endpoint::Validate(mode) => mode,
    };
    let subject = Subject {
        object: &object.raw,
        kind,
        namespace,
        operation,
    };
    let evaluated = evaluate_object(evaluator, &subject);
    let mut verdict = Verdict::new(DecisionKind::Allowed);
    let decision = match evaluated {
        Ok(Some(evaluation)) => {
            verdict.changes = evaluation.changed_rules();
            verdict.violations = evaluation.violations.iter().map(|v| v.rule).collect();
            decide(mode, kind, &evaluation)
        }
        Ok(None) => return (response, ignored),
        Err(error) => unreadable(&request.kind.kind, &error),
    };
    into_response(response, endpoint, decision, verdict)
}

/// An update that leaves the object's `spec` as it was: for a claim (whose
/// spec is immutable) a change of labels, annotations or finalizers, which
/// must go through so that a claim admitted earlier, under a looser
/// configuration, can still be released and deleted.
fn spec_unchanged(request: &AdmissionRequest<RawObject>) -> bool {
    fn spec(object: Option<&RawObject>) -> Option<&Value> {
        object.and_then(|o| o.raw.get("spec"))
    }
    request.operation == Operation::Update
        && request.old_object.is_some()
        && spec(request.object.as_ref()) == spec(request.old_object.as_ref())
}

fn guard_namespace(
    request: &AdmissionRequest<RawObject>,
    response: AdmissionResponse,
    settings: &Settings,
) -> (AdmissionResponse, Verdict) {
    if ObjectKind::of(&request.kind.group, &request.kind.kind) != ObjectKind::Ignored
        || request.kind.kind != "Namespace"
    {
        return (response, Verdict::new(DecisionKind::Ignored));
    }
    let groups = request.user_info.groups.as_deref().unwrap_or_default();
    let requester = namespace_guard::Requester {
        username: request.user_info.username.as_deref().unwrap_or(""),
        groups,
    };
    let old = request.old_object.as_ref().map(|o| &o.raw);
    let new = request.object.as_ref().map(|o| &o.raw);
    match namespace_guard::check(old, new, requester, &settings.config().policy_admins) {
        Ok(()) => (response, Verdict::new(DecisionKind::Allowed)),
        Err(message) => (
            forbidden(response, &message),
            Verdict::new(DecisionKind::Denied),
        ),
    }
}

/// Denies with a message body of the admission layer's own.
fn deny(response: AdmissionResponse, body: &str) -> (AdmissionResponse, Verdict) {
    let message = Message::new(body);
    (
        forbidden(response, &message),
        Verdict::new(DecisionKind::Denied),
    )
}

fn forbidden(mut response: AdmissionResponse, message: &str) -> AdmissionResponse {
    response.allowed = false;
    response.result = Status::failure(message, "Forbidden").with_code(403);
    response
}

fn into_response(
    mut response: AdmissionResponse,
    endpoint: Endpoint,
    decision: Decision,
    mut verdict: Verdict,
) -> (AdmissionResponse, Verdict) {
    // The mutating webhook only mutates: denials and warnings come from the
    // validating webhook, which sees the mutated object (and later mutating
    // webhooks get their chance to change it first). A pod that will be
    // denied gets no patch: `decide` returns none with violations.
    if !decision.allowed && endpoint != Endpoint::Mutate {
        let message = decision
            .denial
            .unwrap_or_else(|| Message::new("denied").into_string());
        let mut response = forbidden(response, &message);
        if !decision.warnings.is_empty() {
            response.warnings = Some(decision.warnings);
        }
        verdict.decision = DecisionKind::Denied;
        return (response, verdict);
    }
    match endpoint {
        Endpoint::Mutate => {
            if !decision.patch.is_empty() {
                match response
                    .clone()
                    .with_patch(json_patch::Patch(decision.patch))
                {
                    Ok(patched) => {
                        response = patched;
                        verdict.decision = DecisionKind::Mutated;
                    }
                    Err(err) => {
                        let body = format!("cannot encode the patch: {err}");
                        return deny(response, &body);
                    }
                }
            }
        }
        Endpoint::Validate(_) | Endpoint::Namespace => {
            if !decision.warnings.is_empty() {
                verdict.decision = DecisionKind::Warned;
                response.warnings = Some(decision.warnings);
            }
            response.audit_annotations = decision.audit_annotations.into_iter().collect();
        }
    }
    (response, verdict)
}
