//! One admission request, orchestrated: what it puts under evaluation
//! ([`evaluated`]), the registry lookups that evaluation waits on
//! ([`images_to_resolve`]), the rules run on it and the mode's decision
//! turned into an `AdmissionResponse` ([`answer`], [`respond`]).
//!
//! It reads the request decoded by [`super::wire`] and decides through
//! [`super::decision`]; neither knows of it.

use std::collections::BTreeMap;

use crate::document::{Json, Object};
use kube::core::Status;
use kube::core::admission::{AdmissionResponse, Operation};

use super::decision::{
    Decision, DecisionKind, MAX_DENIAL_BYTES, Mode, Verdict, bounded_warnings, decide_taking_patch,
    namespace_settings, template_warning, unreadable,
};
use super::images;
use super::kinds::ObjectKind;
use super::namespace_guard;
use super::owner::{OwnerDocument, OwnerRead};
use super::wire::{AdmissionRequest, RawObject};
use crate::policy::dra::allocation::{MadeFor, read_made_for};
use crate::policy::dra::claims::{ClaimKind, parse_object};
use crate::policy::message::prefix_within;
use crate::policy::rules::bounded_requests::claim_requests::EXTENDED_RESOURCE_CLAIM;
use crate::policy::{
    ClaimFacts, ClusterFacts, Evaluator, ImageFacts, Message, NoticeKind, Scope, Subject,
    scope_for_update,
};
use crate::settings::Settings;

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

/// Answers one admission request as the webhook does: with the settings in
/// force in the request's namespace and what the webhook knows of the
/// cluster, when it can read it.
/// `images`: what the images of the object need, as resolved from their
/// registries beforehand ([`images_to_resolve`]).
/// `claim_owner`: for a ResourceClaim made for a pod, the pod as read
/// beforehand ([`claim_owner_to_read`]).
pub fn answer(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
    images: Option<&dyn ImageFacts>,
    claim_owner: Option<&OwnerRead>,
) -> (AdmissionResponse, Verdict) {
    let namespace_settings = namespace_settings(settings, cluster, request.namespace.as_deref());
    let owner_document = claim_owner.map(OwnerRead::document);
    let owner = owner_document.as_ref().map(OwnerDocument::owner_pod);
    let evaluator = Evaluator {
        claim_owner: owner.as_ref(),
        ..Evaluator::of_cluster(settings, &namespace_settings, cluster, images)
    };
    respond(request, endpoint, &evaluator)
}

/// The pod to read before [`answer`], for a ResourceClaim being created
/// with GPU requests: its controller owner of kind Pod (its namespace, and
/// the pod's name and UID as the claim names them). On the mutating
/// webhook R4 gives the claim the floors of the pod's images; on a
/// validating one R2 counts it with the pod's other claims, for a claim
/// made from one of the pod's templates (`resource.kubernetes.io/pod-claim-name`;
/// not the scheduler's claims of extended resources, never denied).
/// `claims`: the caches, which say which DeviceClasses hand out GPUs.
pub fn claim_owner_to_read(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    settings: &Settings,
    claims: Option<&dyn ClaimFacts>,
) -> Option<(String, MadeFor)> {
    // Only a claim's creation: told from the request's kind before the
    // subject is built, as this is asked of every request.
    let kind = ObjectKind::of(&request.kind.group, &request.kind.kind);
    if kind != ObjectKind::Claim(ClaimKind::Claim) || request.operation != Operation::Create {
        return None;
    }
    let validating = match endpoint {
        // With `draComputeAffinity: nodeLabels` claims get no floors.
        Endpoint::Mutate if !settings.config().dra_compute_affinity.claims() => return None,
        Endpoint::Mutate => false,
        Endpoint::Validate(_) => true,
        Endpoint::Namespace => return None,
    };
    let evaluated = evaluated(request, endpoint).ok()??;
    let object = evaluated.subject.object;
    let made_for = read_made_for(object)?;
    let is_gpu_class = |class: &str| {
        settings.is_gpu_device_class(class) || claims.is_some_and(|c| c.is_gpu_device_class(class))
    };
    // Floors go into GPU requests, and only GPUs are counted.
    let summary = parse_object(object, ClaimKind::Claim, &is_gpu_class).ok()?;
    if !summary.is_gpu() {
        return None;
    }
    if validating {
        let extended = object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM))
            .and_then(Json::as_str)
            == Some("true");
        if made_for.pod_claim.is_none() || extended {
            return None;
        }
    }
    Some((evaluated.subject.namespace.to_owned(), made_for))
}

/// What a request puts under evaluation: the object as the evaluator
/// takes it, what kind it is and the mode the endpoint stands for.
#[derive(Debug, Clone)]
pub struct Evaluated<'r> {
    pub kind: ObjectKind,
    /// The object, its namespace, and the operation as a scope: a whole
    /// object being created (or a workload or claim being updated), or the
    /// new ephemeral containers of a Pod.
    pub subject: Subject<'r>,
    /// The namespace's mode: the mutating webhook is called in enforce
    /// namespaces, each validating one in the mode its path names.
    pub mode: Mode,
}

/// What gets evaluated for a request, the one table of it:
/// - a Pod being created, on any admission endpoint;
/// - the new ephemeral containers of a Pod (`pods/ephemeralcontainers`);
/// - an update of a Pod itself, judged against the old pod (what the
///   webhook wrote at creation kept, its annotations, the images changed
///   in place): on any admission endpoint;
/// - a workload's pod template being created or updated, on a validating
///   endpoint (pods are mutated, templates never);
/// - a claim or claim template being created, or updated with a changed
///   spec, on a validating endpoint;
/// - a claim being created, on the mutating endpoint (a claim made for a
///   pod gets the pod's floors, R4).
///
/// `Ok(None)` for everything else (allowed untouched, reported as
/// ignored); `Err` with a denial's body when the review lacks what the
/// evaluation needs.
pub fn evaluated<'r>(
    request: &'r AdmissionRequest<'_>,
    endpoint: Endpoint,
) -> Result<Option<Evaluated<'r>>, &'static str> {
    let mode = match endpoint {
        Endpoint::Namespace => return Ok(None),
        Endpoint::Mutate => Mode::Enforce,
        Endpoint::Validate(mode) => mode,
    };
    let kind = ObjectKind::of(&request.kind.group, &request.kind.kind);
    let main = request.sub_resource.is_none();
    let ephemeral = request.sub_resource.as_deref() == Some("ephemeralcontainers");
    let validating = matches!(endpoint, Endpoint::Validate(_));
    let written = matches!(request.operation, Operation::Create | Operation::Update);
    let unread = exceeds_budget(request);
    // How the object is read: as created, as an update of a Pod's
    // ephemeral containers, or as an update of a Pod itself.
    let update_scope = match (kind, &request.operation) {
        (ObjectKind::Pod, Operation::Create) if main => Read::Created,
        (ObjectKind::Pod, Operation::Update) if ephemeral => match request.old_object.as_ref() {
            Some(old) => Read::Ephemeral(scope_for_update(old.json())),
            None => return Err("the review carries no oldObject"),
        },
        (ObjectKind::Pod, Operation::Update) if main => match request.old_object.as_ref() {
            Some(old) => Read::Updated(old.json()),
            None => return Err("the review carries no oldObject"),
        },
        (ObjectKind::Workload(_), _) if main && validating && written => Read::Created,
        (ObjectKind::Claim(_), _)
            if main && validating && written && (unread || !spec_unchanged(request)) =>
        {
            Read::Created
        }
        (ObjectKind::Claim(ClaimKind::Claim), Operation::Create) if main && !validating => {
            Read::Created
        }
        _ => return Ok(None),
    };
    let Some(object) = request.object.as_ref() else {
        return Err("the review carries no object");
    };
    if unread {
        return Err(UNREAD);
    }
    let namespace = request
        .namespace
        .as_deref()
        .or_else(|| {
            object
                .json()
                .get("metadata")
                .and_then(|metadata| metadata.get("namespace"))
                .and_then(Json::as_str)
        })
        .unwrap_or("default");
    let subject = match update_scope {
        Read::Ephemeral(scope) => Some(Subject::pod(object.json(), namespace, scope)),
        Read::Updated(old) => Some(Subject::pod_update(object.json(), old, namespace)),
        Read::Created => kind.created(object.json(), namespace),
    };
    Ok(subject.map(|subject| Evaluated {
        kind,
        subject,
        mode,
    }))
}

/// How [`evaluated`] reads a request's object.
enum Read<'r> {
    /// As created: the whole object.
    Created,
    /// The new ephemeral containers of a Pod.
    Ephemeral(Scope),
    /// An update of a Pod itself, beside the old pod.
    Updated(Json<'r>),
}

/// The images worth a registry lookup before [`answer`], the platform the
/// pod runs on and the namespace the lookups are made for: those of the
/// GPU containers of what the request puts under evaluation
/// ([`evaluated`], [`images::wanted`]). None for everything else, so that
/// no other object waits on a registry.
pub fn images_to_resolve(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
) -> Option<images::Wanted> {
    let evaluated = evaluated(request, endpoint).ok()??;
    // The claims the rules will resolve, from the same cluster; nothing
    // else of the evaluation is needed to know the GPU containers.
    let claims = cluster.map(|c| -> &dyn ClaimFacts { c });
    images::wanted(&evaluated.subject, settings, claims)
}

/// Answers one admission request with the evaluator given: tests and
/// benchmarks choose the namespace's settings themselves.
pub fn respond(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    evaluator: &Evaluator<'_>,
) -> (AdmissionResponse, Verdict) {
    let response = request.allowed();
    if endpoint == Endpoint::Namespace {
        return guard_namespace(request, response, evaluator.settings);
    }
    let evaluated = match evaluated(request, endpoint) {
        Ok(Some(evaluated)) => evaluated,
        Ok(None) => return (response, Verdict::new(DecisionKind::Ignored)),
        Err(missing) => return deny(response, missing),
    };
    let mut verdict = Verdict::new(DecisionKind::Allowed);
    let decision = match evaluator.evaluate(&evaluated.subject) {
        Ok(mut evaluation) => {
            verdict.changes = evaluation.changed_rules();
            verdict.violations = evaluation.violations.iter().map(|v| v.rule).collect();
            let claim = matches!(evaluated.kind, ObjectKind::Claim(_));
            if claim && endpoint != Endpoint::Mutate {
                // What R4 could not do to the claim is the mutating
                // webhook's to say.
                evaluation
                    .notices
                    .retain(|notice| notice.kind != NoticeKind::UnreadClaimOwner);
            }
            let mut decision = decide_taking_patch(evaluated.mode, evaluated.kind, &mut evaluation);
            if evaluated.mode == Mode::Enforce {
                let new_changes = new_template_changes(request, &evaluated, &evaluation, evaluator);
                if !new_changes.is_empty() {
                    decision.warnings_in_full.extend(new_changes);
                    decision.warnings = bounded_warnings(&decision.warnings_in_full);
                }
            }
            if endpoint == Endpoint::Mutate && claim {
                // Only this webhook reads the claim's pod: what it could not
                // read is said here (the validating webhooks say the rest).
                let notices: Vec<String> = evaluation
                    .notice_bodies(NoticeKind::UnreadClaimOwner)
                    .into_iter()
                    .map(|body| Message::new(body).into_string())
                    .collect();
                decision.warnings = bounded_warnings(&notices);
            }
            decision
        }
        Err(error) => unreadable(&request.kind.kind, &error),
    };
    into_response(response, endpoint, decision, verdict)
}

/// On a workload's update in an enforce namespace, what its new pods will
/// get that the old template's pods did not (an image that needs a higher
/// compute capability: `[compute-affinity] pods will require GPU compute
/// capability >= 7.5 (image ...)`), beside what `decide` warns of every
/// template (the changes that override the author). The old template is
/// evaluated as the new one is.
fn new_template_changes(
    request: &AdmissionRequest<'_>,
    evaluated: &Evaluated<'_>,
    evaluation: &crate::policy::Evaluation,
    evaluator: &Evaluator<'_>,
) -> Vec<String> {
    let ObjectKind::Workload(_) = evaluated.kind else {
        return Vec::new();
    };
    let Some(old) = request
        .old_object
        .as_ref()
        .filter(|_| request.operation == Operation::Update)
    else {
        return Vec::new();
    };
    let Some(subject) = evaluated
        .kind
        .created(old.json(), evaluated.subject.namespace)
    else {
        return Vec::new();
    };
    let Ok(before) = evaluator.evaluate(&subject) else {
        return Vec::new();
    };
    // What overrides the author is warned of every template (`decide`).
    evaluation
        .changes_new_since(&before)
        .into_iter()
        .filter(|change| !change.overrides_author)
        .map(template_warning)
        .collect()
}

/// The denial of an object that was not read: it holds more values than
/// the body's memory budget allows (`admission::object_tree::budget`).
pub const UNREAD: &str = "the object is not read: it holds more values (containers, entries, \
    list elements) than the webhook holds in memory for a review of its size";

/// Whether the object or the old object of `request` exceeded the budget
/// of its body, and so holds nothing to read.
fn exceeds_budget(request: &AdmissionRequest<'_>) -> bool {
    [&request.object, &request.old_object]
        .into_iter()
        .any(|object| object.as_ref().is_some_and(RawObject::exceeds_budget))
}

/// An update that leaves the object's `spec` as it was: for a claim (whose
/// spec is immutable) a change of labels, annotations or finalizers, which
/// must go through so that a claim admitted earlier, under a looser
/// configuration, can still be released and deleted.
fn spec_unchanged(request: &AdmissionRequest<'_>) -> bool {
    fn spec<'o>(object: Option<&'o RawObject<'_>>) -> Option<Json<'o>> {
        object.and_then(|o| o.json().get("spec"))
    }
    request.operation == Operation::Update
        && request.old_object.is_some()
        && match (
            spec(request.object.as_ref()),
            spec(request.old_object.as_ref()),
        ) {
            (Some(new), Some(old)) => same_json(new, old),
            (new, old) => new.is_none() && old.is_none(),
        }
}

/// The members of `object` by key: of a repeated key the last, as the
/// members are inserted in order.
fn members<'a>(object: Object<'a>) -> BTreeMap<&'a str, Json<'a>> {
    let mut members = BTreeMap::new();
    for (key, value) in object {
        members.insert(key, value);
    }
    members
}

/// Equal as JSON values are (as `Json`'s `==`: objects as maps, of a
/// repeated key the last), in O(n log n): each object's members are sorted
/// by key once, where looking every key up in the other object would take
/// time quadratic in the members of an object of the request's.
fn same_json(left: Json<'_>, right: Json<'_>) -> bool {
    match (left.as_object(), right.as_object()) {
        (Some(left), Some(right)) => {
            let (left, right) = (members(left), members(right));
            left.len() == right.len()
                && left
                    .iter()
                    .zip(right.iter())
                    .all(|((lk, lv), (rk, rv))| lk == rk && same_json(*lv, *rv))
        }
        (None, None) => match (left.as_array(), right.as_array()) {
            (Some(left), Some(right)) => {
                left.len() == right.len()
                    && left.iter().zip(right.iter()).all(|(l, r)| same_json(l, r))
            }
            (None, None) => left == right,
            _ => false,
        },
        _ => false,
    }
}

fn guard_namespace(
    request: &AdmissionRequest<'_>,
    response: AdmissionResponse,
    settings: &Settings,
) -> (AdmissionResponse, Verdict) {
    if ObjectKind::of(&request.kind.group, &request.kind.kind) != ObjectKind::Ignored
        || request.kind.kind != "Namespace"
    {
        return (response, Verdict::new(DecisionKind::Ignored));
    }
    if exceeds_budget(request) {
        return deny(response, UNREAD);
    }
    let groups = request.user_info.groups.as_deref().unwrap_or_default();
    let requester = namespace_guard::Requester {
        username: request.user_info.username.as_deref().unwrap_or(""),
        groups,
    };
    let old = request.old_object.as_ref().map(RawObject::json);
    let new = request.object.as_ref().map(RawObject::json);
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

/// Denies with `message`, cut to [`MAX_DENIAL_BYTES`] (and `…`) should a
/// message ever come here longer: every denial passes this way.
fn forbidden(mut response: AdmissionResponse, message: &str) -> AdmissionResponse {
    response.allowed = false;
    let kept = prefix_within(message, MAX_DENIAL_BYTES);
    let message = if kept.len() < message.len() {
        std::borrow::Cow::Owned([kept, "…"].concat())
    } else {
        std::borrow::Cow::Borrowed(message)
    };
    response.result = Status::failure(&message, "Forbidden").with_code(403);
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
    // denied gets no patch: `decide` returns none with violations. A patch
    // over its budget is the exception: the mutating webhook cannot make
    // the changes, so it denies rather than let the pod through unchanged.
    if !decision.allowed && (endpoint != Endpoint::Mutate || decision.over_patch_budget) {
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
            if !decision.warnings.is_empty() {
                verdict.decision = DecisionKind::Warned;
                response.warnings = Some(decision.warnings);
            }
            if !decision.patch.is_empty() {
                // Encoded first, so that a patch that cannot be encoded
                // leaves the response to deny. `decide` encoded it when it
                // measured it against its budget.
                let encoded = if decision.encoded_patch.is_empty() {
                    serde_json::to_vec(&decision.patch)
                } else {
                    Ok(decision.encoded_patch)
                };
                match encoded {
                    Ok(encoded) => {
                        // `encode` writes the patch type with the patch.
                        response.patch = Some(encoded);
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

#[cfg(test)]
mod tests;
