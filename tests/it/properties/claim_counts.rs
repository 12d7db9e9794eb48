//! Counting the GPUs of DRA claims without overflow or panic.
//!
//! The claims of `support/counted_claims/` carry counts over the whole
//! u64 range and past it, every kind of JSON where a count belongs,
//! capacity requests of any shape and up to a thousand requests: each is
//! read into the counts the oracle sums (u128, capped at u64::MAX, All
//! absorbing) or refused on one line naming a wrong field. Pods whose
//! containers share such claims hold the sum of the claims they use, each
//! pod claim once, and R2 denies exactly the totals above `maxPerPod`.
//! Through the router in process, none of it is answered with an error.

use std::sync::LazyLock;

use gpu_policy::admission::Endpoint;
use gpu_policy::document::Document;
use gpu_policy::policy::dra::claims::{ClaimKind, DraCount, parse_object};
use gpu_policy::policy::dra::resolution::resolve;
use gpu_policy::policy::dra::tables::ClaimTables;
use gpu_policy::policy::{PodView, RuleId, Scope, Shape, Subject};
use gpu_policy::settings::MAX_GPUS_PER_POD_ANNOTATION;

use super::*;
use crate::support::counted_claims::pods::{ClaimPod, NAMESPACE, claim_pod, evaluate};
use crate::support::counted_claims::{Devices, Expected, counted_claim};
use crate::support::review::Review;
use crate::support::router::InProcess;

const KINDS: [&str; 2] = ["ResourceClaim", "ResourceClaimTemplate"];

/// The default settings but `maxPerPod` at u64::MAX, so that a namespace
/// annotation can set any maximum below it.
static UNBOUNDED: LazyLock<Settings> = LazyLock::new(|| {
    let mut config = Settings::default().config().clone();
    config.max_per_pod = u64::MAX;
    Settings::from_config(config).unwrap_or_default()
});

static ROUTER: LazyLock<Result<InProcess, String>> =
    LazyLock::new(|| InProcess::new(Settings::default()));

/// The oracle's count as the policy holds it.
fn held(devices: Option<Devices>) -> Option<DraCount> {
    devices.map(|d| d.capped().map_or(DraCount::All, DraCount::Exactly))
}

fn claim_kind(kind: &str) -> Result<ClaimKind, TestCaseError> {
    ClaimKind::of_kind(kind).ok_or_else(|| TestCaseError::fail(format!("no claim kind {kind}")))
}

/// R2's messages in an evaluation.
fn bounded_requests(evaluation: &Evaluation) -> Vec<String> {
    evaluation
        .violations
        .iter()
        .filter(|v| v.rule == RuleId::BoundedRequests)
        .map(|v| v.message.to_string())
        .collect()
}

proptest! {
    #![proptest_config(config(256))]

    /// A claim of any counts, modes, capacity requests and shapes is read
    /// into each request's GPUs and the claim's saturating total, or
    /// refused on one line naming a wrong field of the first alternative
    /// that has one; R2 denies it exactly when a GPU request is `All` or
    /// above `maxPerContainer`, sets `adminAccess`, or the total is above
    /// `maxPerPod`.
    #[test]
    fn claim_counts_are_read_to_their_saturating_sum(
        claim in counted_claim(1000, 3),
        kind in pick(&KINDS),
    ) {
        let object = claim.object(kind, "counted", NAMESPACE);
        let expected = claim.expected(kind);
        let document = Document::from_value(&object);
        let read = parse_object(document.root(), claim_kind(kind)?, &|c| SETTINGS.is_gpu_device_class(c));
        match (&expected, read) {
            (Expected::Read(requests), Ok(summary)) => {
                let found: Vec<_> =
                    summary.requests.iter().map(|r| (r.gpu, r.admin_access)).collect();
                let wanted: Vec<_> = requests.iter().map(|(gpu, admin)| (held(*gpu), *admin)).collect();
                prop_assert_eq!(found, wanted);
                prop_assert_eq!(summary.gpu_total(), held(expected.total()));
            }
            (Expected::Unreadable(fields), Err(err)) => {
                let line = err.to_string();
                prop_assert!(!line.contains('\n') && line.len() <= 200, "{:?}", line);
                prop_assert!(fields.contains(&err.field), "{:?} names none of {:?}", line, fields);
                prop_assert!(line.starts_with(&format!("{}: ", err.field)), "{:?}", line);
            }
            (expected, read) => {
                return Err(TestCaseError::fail(format!("expected {expected:?}, read {read:?}")));
            }
        }
        let namespace = SETTINGS.for_namespace(&BTreeMap::new());
        let subject = Subject::claim(document.root(), claim_kind(kind)?, NAMESPACE);
        match (evaluate(&subject, &[], &SETTINGS, &namespace), &expected) {
            (Ok(evaluation), Expected::Read(_)) => {
                let config = SETTINGS.config();
                let denied = bounded_requests(&evaluation);
                prop_assert_eq!(
                    !denied.is_empty(),
                    expected.violates(config.max_per_container, config.max_per_pod),
                    "{:?}", denied
                );
            }
            (Err(_), Expected::Unreadable(_)) => {}
            (evaluated, expected) => {
                return Err(TestCaseError::fail(format!(
                    "expected {expected:?}, evaluated {evaluated:?}"
                )));
            }
        }
    }
}

proptest! {
    // Pods are cheap: twice the cases.
    #![proptest_config(config(512))]

    /// A pod's claims, shared by several containers and narrowed to
    /// requests and subrequests, resolve to what the oracle sums: each
    /// container the claims it uses, the pod every claim used, each pod
    /// claim once; R2 denies the pod exactly when that total is above the
    /// namespace's `maxPerPod`, naming the total.
    #[test]
    fn pods_hold_the_saturating_sum_of_the_claims_they_use(case in claim_pod()) {
        let pod = case.pod();
        let objects = case.objects();
        let refs: Vec<&Value> = objects.iter().collect();
        let input = ClaimTables::collect(&refs, NAMESPACE, &*SETTINGS);
        let document = Document::from_value(&pod);
        let mut view = match PodView::parse(document.root(), Shape::Pod, &SETTINGS) {
            Ok(Some(view)) => view,
            other => return Err(TestCaseError::fail(format!("the pod is not read: {other:?}"))),
        };
        resolve(&mut view, Some(&input), NAMESPACE);
        prop_assert_eq!(view.dra_gpus, held(case.total()));
        for container in &view.containers {
            let index = container
                .name
                .strip_prefix('c')
                .and_then(|n| n.parse::<usize>().ok())
                .ok_or_else(|| TestCaseError::fail(format!("container {:?}", container.name)))?;
            prop_assert_eq!(
                container.dra_gpus,
                held(case.container_gpus(index)),
                "container {}", ClaimPod::container_name(index)
            );
        }

        let annotations =
            BTreeMap::from([(MAX_GPUS_PER_POD_ANNOTATION.to_owned(), case.max_per_pod.to_string())]);
        let namespace = UNBOUNDED.for_namespace(&annotations);
        prop_assert_eq!(namespace.max_per_pod, case.max_per_pod);
        let subject = Subject::pod(document.root(), NAMESPACE, Scope::Whole);
        let evaluation = evaluate(&subject, &objects, &UNBOUNDED, &namespace)
            .map_err(|err| TestCaseError::fail(format!("the pod is not evaluated: {err}")))?;
        let denied = bounded_requests(&evaluation);
        let total = case.total();
        let above = total.is_some_and(|t| t.above(case.max_per_pod));
        prop_assert_eq!(!denied.is_empty(), above, "total {:?}: {:?}", total, denied);
        if let Some(total) = held(total).filter(|_| above) {
            prop_assert_eq!(denied.len(), 1, "{:?}", denied);
            let hold = format!("claims hold {total} GPUs");
            prop_assert!(denied[0].contains(&hold), "{:?} lacks {:?}", denied, hold);
        }
    }
}

/// POSTs `object`'s review to `endpoint`: the answer is a 200 with an
/// AdmissionReview that echoes the uid and says whether it is allowed.
fn answer(router: &InProcess, endpoint: Endpoint, object: &Value) -> Result<Value, TestCaseError> {
    let review = Review::create(object, NAMESPACE).uid("counted").json();
    let body = serde_json::to_vec(&review).map_err(|err| TestCaseError::fail(err.to_string()))?;
    let (status, bytes) = router.post(endpoint.path(), body).map_err(TestCaseError::fail)?;
    let text = String::from_utf8_lossy(&bytes);
    prop_assert_eq!(status.as_u16(), 200, "{:?}: {}", endpoint, text);
    let reply: Value = serde_json::from_slice(&bytes)
        .map_err(|err| TestCaseError::fail(format!("{endpoint:?}: not JSON ({err}): {text}")))?;
    let response = &reply["response"];
    prop_assert_eq!(&response["uid"], "counted", "{:?}: {}", endpoint, text);
    prop_assert!(response["allowed"].is_boolean(), "{:?}: {}", endpoint, text);
    Ok(response.clone())
}

proptest! {
    #![proptest_config(config(64))]

    /// Such claims, and the pods and claims of such a pod, sent as
    /// AdmissionReviews to every endpoint of the router are answered 200:
    /// a claim the reader refuses is denied on every validating endpoint,
    /// on one line naming the field; one R2 denies is denied in enforce
    /// mode.
    #[test]
    fn counted_claims_and_pods_are_answered_by_the_router(
        claim in counted_claim(1000, 3),
        kind in pick(&KINDS),
        case in claim_pod(),
    ) {
        let router = ROUTER.as_ref().map_err(|err| TestCaseError::fail(err.clone()))?;
        let object = claim.object(kind, "counted", NAMESPACE);
        let expected = claim.expected(kind);
        let config = SETTINGS.config();
        let violates = expected.violates(config.max_per_container, config.max_per_pod);
        for endpoint in Endpoint::ALL {
            let response = answer(router, endpoint, &object)?;
            let Endpoint::Validate(mode) = endpoint else {
                continue;
            };
            let allowed = response["allowed"] == true;
            let message = response["status"]["message"].as_str().unwrap_or_default();
            match &expected {
                Expected::Unreadable(fields) => {
                    prop_assert!(!allowed, "{:?} allowed an unreadable claim", endpoint);
                    prop_assert!(!message.contains('\n'), "{:?}", message);
                    prop_assert!(
                        fields.iter().any(|f| message.contains(&format!("{f}: "))),
                        "{:?} names none of {:?}", message, fields
                    );
                }
                Expected::Read(_) if mode == Mode::Enforce && violates => {
                    prop_assert!(!allowed, "a claim R2 denies was allowed");
                }
                Expected::Read(_) => {}
            }
        }
        let pod = case.pod();
        for endpoint in Endpoint::ALL {
            answer(router, endpoint, &pod)?;
        }
        for object in case.objects() {
            answer(router, Endpoint::Validate(Mode::Enforce), &object)?;
        }
    }
}
