//! One admission request, read once: what it puts under evaluation
//! ([`subject`]), handed to the claim owner's read ([`claim_owner_to_read`]),
//! the registry lookups and the rules; [`answer`] makes the endpoint's [`Answer`].

use std::collections::BTreeMap;

use crate::document::Json;
use kube::core::admission::Operation;

use super::answer::{
    Answer, Mode, bounded_warnings, decide, namespace_settings, template_warning, unreadable,
};
use super::kinds::ObjectKind;
use super::namespace_guard;
use super::owner::{OwnerDocument, OwnerRead};
use super::wire::{AdmissionRequest, RawObject};
use crate::policy::dra::allocation::{MadeFor, read_made_for};
use crate::policy::dra::claims::{ClaimKind, parse_object};
use crate::policy::rules::bounded_requests::claim_requests::EXTENDED_RESOURCE_CLAIM;
use crate::policy::{
    ClaimFacts, ClusterFacts, Evaluator, ImageFacts, Message, NoticeKind, Scope, Subject,
    scope_for_update,
};
use crate::settings::Settings;

/// Which webhook is asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Endpoint {
    Mutate,
    Validate(Mode),
    /// The namespace guard on the `gpu-policy.io/mode` label.
    Namespace,
}

impl Endpoint {
    pub fn path(self) -> &'static str {
        match self {
            Endpoint::Mutate => "/mutate",
            Endpoint::Validate(Mode::Enforce) => "/validate/enforce",
            Endpoint::Validate(Mode::Warn) => "/validate/warn",
            Endpoint::Validate(Mode::Audit) => "/validate/audit",
            Endpoint::Namespace => "/validate/namespace",
        }
    }

    /// The mutating webhook is called in enforce namespaces; the namespace
    /// guard evaluates nothing.
    pub fn mode(self) -> Option<Mode> {
        match self {
            Endpoint::Mutate => Some(Mode::Enforce),
            Endpoint::Validate(mode) => Some(mode),
            Endpoint::Namespace => None,
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

/// Why a review cannot be evaluated; answered with a denial that says so.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum Unread {
    #[error("the review carries no object")]
    NoObject,
    #[error("the review carries no oldObject")]
    NoOldObject,
    /// Over `admission::object_tree::budget`: nothing of it was kept.
    #[error(
        "the object is not read: it holds more values (containers, entries, list elements) \
         than the webhook holds in memory for a review of its size"
    )]
    OverBudget,
}

/// What a request puts under evaluation, the one table of it:
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
/// `Ok(None)` for everything else (allowed untouched, reported ignored).
pub fn subject<'r>(
    request: &'r AdmissionRequest<'_>,
    endpoint: Endpoint,
) -> Result<Option<(ObjectKind, Subject<'r>)>, Unread> {
    if endpoint == Endpoint::Namespace {
        return Ok(None);
    }
    let kind = ObjectKind::of(&request.kind.group, &request.kind.kind);
    let main = request.sub_resource.is_none();
    let ephemeral = request.sub_resource.as_deref() == Some("ephemeralcontainers");
    let validating = matches!(endpoint, Endpoint::Validate(_));
    let written = matches!(request.operation, Operation::Create | Operation::Update);
    let unread = exceeds_budget(request);
    let old = || request.old_object.as_ref().ok_or(Unread::NoOldObject);
    let read = match (kind, &request.operation) {
        (ObjectKind::Pod, Operation::Create) if main => Read::Created,
        (ObjectKind::Pod, Operation::Update) if ephemeral => {
            Read::Ephemeral(scope_for_update(old()?.json()))
        }
        (ObjectKind::Pod, Operation::Update) if main => Read::Updated(old()?.json()),
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
    let object = request.object.as_ref().ok_or(Unread::NoObject)?;
    if unread {
        return Err(Unread::OverBudget);
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
    let subject = match read {
        Read::Ephemeral(scope) => Some(Subject::pod(object.json(), namespace, scope)),
        Read::Updated(old) => Some(Subject::pod_update(object.json(), old, namespace)),
        Read::Created => kind.created(object.json(), namespace),
    };
    Ok(subject.map(|subject| (kind, subject)))
}

/// How [`subject`] reads a request's object.
enum Read<'r> {
    Created,
    /// The new ephemeral containers of a Pod.
    Ephemeral(Scope),
    /// An update of a Pod itself, beside the old pod.
    Updated(Json<'r>),
}

/// The pod to read before [`answer`], for a ResourceClaim created with GPU
/// requests: its controller owner of kind Pod. R4 gives the claim the pod's
/// floors (mutating webhook); R2 counts it with the pod's other claims
/// (validating), for a claim made from one of the pod's templates
/// (`resource.kubernetes.io/pod-claim-name`; not the scheduler's claims of
/// extended resources, never denied).
pub fn claim_owner_to_read(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    (kind, subject): &(ObjectKind, Subject<'_>),
    settings: &Settings,
    claims: Option<&dyn ClaimFacts>,
) -> Option<(String, MadeFor)> {
    if *kind != ObjectKind::Claim(ClaimKind::Claim) || request.operation != Operation::Create {
        return None;
    }
    let validating = match endpoint {
        // With `draComputeAffinity: nodeLabels` claims get no floors.
        Endpoint::Mutate if !settings.config().dra_compute_affinity.claims() => return None,
        Endpoint::Mutate => false,
        Endpoint::Validate(_) => true,
        Endpoint::Namespace => return None,
    };
    let object = subject.object;
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
    Some((subject.namespace.to_owned(), made_for))
}

/// Answers one admission request as the webhook does, with the settings
/// in force in the request's namespace, the registries' answers read
/// beforehand, and for a claim the pod read for [`claim_owner_to_read`].
pub fn answer(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    subject: &Result<Option<(ObjectKind, Subject<'_>)>, Unread>,
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
    images: Option<&dyn ImageFacts>,
    claim_owner: Option<&OwnerRead>,
) -> Answer {
    let namespace_settings = namespace_settings(settings, cluster, request.namespace.as_deref());
    let owner_document = claim_owner.map(OwnerRead::document);
    let owner = owner_document.as_ref().map(OwnerDocument::owner_pod);
    let evaluator = Evaluator {
        claim_owner: owner.as_ref(),
        ..Evaluator::of_cluster(settings, &namespace_settings, cluster, images)
    };
    respond(request, endpoint, subject, &evaluator)
}

/// [`answer`] with the evaluator given (tests and benchmarks).
pub fn respond(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    subject: &Result<Option<(ObjectKind, Subject<'_>)>, Unread>,
    evaluator: &Evaluator<'_>,
) -> Answer {
    if endpoint == Endpoint::Namespace {
        return guard_namespace(request, evaluator.settings);
    }
    let (kind, subject) = match subject {
        Ok(Some(read)) => read,
        Ok(None) => return Answer::ignored(),
        Err(unread) => return Answer::denied(Message::new(unread).into_string()),
    };
    let Some(mode) = endpoint.mode() else {
        return Answer::ignored();
    };
    let mut evaluation = match evaluator.evaluate(subject) {
        Ok(evaluation) => evaluation,
        Err(error) => return for_endpoint(unreadable(&request.kind.kind, &error), endpoint),
    };
    let claim = matches!(kind, ObjectKind::Claim(_));
    if claim && endpoint != Endpoint::Mutate {
        // What R4 could not do is the mutating webhook's to say.
        evaluation.notices.retain(|notice| notice.kind != NoticeKind::UnreadClaimOwner);
    }
    let mut answer = decide(mode, *kind, &evaluation);
    if mode == Mode::Enforce {
        let new_changes = new_template_changes(request, *kind, subject, &evaluation, evaluator);
        if !new_changes.is_empty() {
            answer.warnings_in_full.extend(new_changes);
            answer.warnings = bounded_warnings(&answer.warnings_in_full);
        }
    }
    if endpoint == Endpoint::Mutate && claim {
        // Only this webhook reads the claim's pod, and says what it could
        // not read; the validating webhooks say the rest.
        let notices: Vec<String> = evaluation
            .notice_bodies(NoticeKind::UnreadClaimOwner)
            .into_iter()
            .map(|body| Message::new(body).into_string())
            .collect();
        answer.warnings = bounded_warnings(&notices);
    }
    for_endpoint(answer, endpoint)
}

/// What `endpoint` says of the answer `decide` gave.
///
/// The mutating webhook only patches: denials, warnings and audit
/// annotations come from the validating webhook, which sees the mutated
/// object. The exception is a patch over its budget: the mutating webhook
/// cannot make the changes, so it denies rather than let the pod through.
fn for_endpoint(mut answer: Answer, endpoint: Endpoint) -> Answer {
    let mutating = endpoint == Endpoint::Mutate;
    if !answer.allowed && (!mutating || answer.over_patch_budget) {
        answer.audit_annotations.clear();
        answer.encoded_patch.clear();
    } else if mutating {
        answer.allowed = true;
        answer.denial = None;
        answer.audit_annotations.clear();
    } else {
        answer.encoded_patch.clear();
    }
    answer
}

/// On a workload's update in an enforce namespace, what its new pods will
/// get that the old template's did not (`[compute-affinity] pods will
/// require GPU compute capability >= 7.5 (image ...)`), beside what
/// `decide` warns of every template (the changes that override the author).
fn new_template_changes(
    request: &AdmissionRequest<'_>,
    kind: ObjectKind,
    subject: &Subject<'_>,
    evaluation: &crate::policy::Evaluation,
    evaluator: &Evaluator<'_>,
) -> Vec<String> {
    let ObjectKind::Workload(_) = kind else {
        return Vec::new();
    };
    let Some(old) = request.old_object.as_ref().filter(|_| request.operation == Operation::Update)
    else {
        return Vec::new();
    };
    let Some(subject) = kind.created(old.json(), subject.namespace) else {
        return Vec::new();
    };
    let Ok(before) = evaluator.evaluate(&subject) else {
        return Vec::new();
    };
    evaluation
        .changes_new_since(&before)
        .into_iter()
        .filter(|change| !change.overrides_author)
        .map(template_warning)
        .collect()
}

fn exceeds_budget(request: &AdmissionRequest<'_>) -> bool {
    [&request.object, &request.old_object]
        .into_iter()
        .any(|object| object.as_ref().is_some_and(RawObject::exceeds_budget))
}

/// An update that leaves `spec` as it was: for a claim (whose spec is
/// immutable) a change of labels, annotations or finalizers, which must go
/// through so that a claim admitted under a looser configuration can still
/// be released and deleted.
fn spec_unchanged(request: &AdmissionRequest<'_>) -> bool {
    fn spec<'o>(object: Option<&'o RawObject<'_>>) -> Option<Json<'o>> {
        object.and_then(|o| o.json().get("spec"))
    }
    request.operation == Operation::Update
        && request.old_object.is_some()
        && match (spec(request.object.as_ref()), spec(request.old_object.as_ref())) {
            (Some(new), Some(old)) => same_json(new, old),
            (new, old) => new.is_none() && old.is_none(),
        }
}

/// Equal as `Json`'s `==` (objects as maps, of a repeated key the last),
/// in O(n log n) by sorting members once, where looking each key up in
/// the other object would be quadratic in a request's members.
fn same_json(left: Json<'_>, right: Json<'_>) -> bool {
    match (left.as_object(), right.as_object()) {
        (Some(left), Some(right)) => {
            let left: BTreeMap<&str, Json<'_>> = left.into_iter().collect();
            let right: BTreeMap<&str, Json<'_>> = right.into_iter().collect();
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

fn guard_namespace(request: &AdmissionRequest<'_>, settings: &Settings) -> Answer {
    if ObjectKind::of(&request.kind.group, &request.kind.kind) != ObjectKind::Ignored
        || request.kind.kind != "Namespace"
    {
        return Answer::ignored();
    }
    if exceeds_budget(request) {
        return Answer::denied(Message::new(Unread::OverBudget).into_string());
    }
    let groups = request.user_info.groups.as_deref().unwrap_or_default();
    let requester = namespace_guard::Requester {
        username: request.user_info.username.as_deref().unwrap_or(""),
        groups,
    };
    let old = request.old_object.as_ref().map(RawObject::json);
    let new = request.object.as_ref().map(RawObject::json);
    match namespace_guard::check(old, new, requester, &settings.config().policy_admins) {
        Ok(()) => Answer::allowed(),
        Err(refusal) => Answer::denied(Message::new(refusal).into_string()),
    }
}

#[cfg(test)]
mod tests;
