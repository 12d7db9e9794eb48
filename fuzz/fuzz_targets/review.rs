//! The server's request path without HTTP: a body through `admission::decode`,
//! `admission::respond` on every endpoint and `Answer::encode`, judged as the
//! API server would judge the answer (see `review_bodies_never_fail_the_server`
//! in `tests/it/properties/review_fuzz/`, the bounded version of this target).
//!
//! - `decode` may refuse a body (the server answers 400), with a one-line
//!   reason;
//! - every answer encodes, is an AdmissionReview v1, echoes the uid and says
//!   `allowed`; a denial has a reason; warnings fit on one kubectl line;
//! - only the mutating webhook patches, with base64 of a JSON patch that
//!   applies to the request's object;
//! - mutation is idempotent: the patched object gets no further patch
//!   (the API server may call the webhook again after other webhooks ran).

#![no_main]

use std::collections::BTreeMap;
use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use gpu_policy::admission::{self, Endpoint, MAX_WARNING_CHARS, RawObject};
use gpu_policy::document::Document;
use gpu_policy::policy::Evaluator;
use gpu_policy::settings::{
    MAX_GPUS_PER_POD_ANNOTATION, MIN_COMPUTE_CAPABILITY_ANNOTATION, NamespaceSettings, Settings,
};
use crate::admission::AdmissionRequest;
use libfuzzer_sys::fuzz_target;
use serde_json::Value;

static SETTINGS: LazyLock<Settings> = LazyLock::new(Settings::default);

/// What the server derives from a namespace's annotations: nothing, a
/// tightened policy, and annotations it ignores with a notice.
static NAMESPACES: LazyLock<Vec<NamespaceSettings>> = LazyLock::new(|| {
    [None, Some(("2", "8.0")), Some(("sixteen", "ampere"))]
        .into_iter()
        .map(|values| {
            let mut annotations = BTreeMap::new();
            if let Some((max, min)) = values {
                annotations.insert(MAX_GPUS_PER_POD_ANNOTATION.to_owned(), max.to_owned());
                annotations.insert(MIN_COMPUTE_CAPABILITY_ANNOTATION.to_owned(), min.to_owned());
            }
            SETTINGS.for_namespace(&annotations)
        })
        .collect()
});

fuzz_target!(|body: &[u8]| {
    let request = match admission::decode(body) {
        Ok(request) => request,
        Err(err) => {
            let reason = err.to_string();
            assert!(
                !reason.contains(['\n', '\r']),
                "a 400 reason spans lines: {reason}"
            );
            return;
        }
    };
    // The object as the API server sent it, every field in it: what a
    // patch is applied to.
    let sent = serde_json::from_slice::<Value>(body)
        .ok()
        .and_then(|review| review.pointer("/request/object").cloned());
    for namespace in NAMESPACES.iter() {
        for endpoint in Endpoint::ALL {
            let reply = serve(&request, endpoint, namespace);
            let Some(patched) = check(&request, sent.as_ref(), endpoint, &reply) else {
                continue;
            };
            let document = Document::from_value(&patched);
            let mut again = request.clone();
            again.object = Some(RawObject::new(document));
            let reply = serve(&again, endpoint, namespace);
            assert!(
                check(&again, Some(&patched), endpoint, &reply).is_none(),
                "not idempotent: the patched object is patched again\nanswer: {reply}\nobject: {}",
                patched
            );
        }
    }
});

/// What the server answers to `request` on `endpoint`, as JSON.
fn serve(
    request: &AdmissionRequest<'_>,
    endpoint: Endpoint,
    namespace: &NamespaceSettings,
) -> Value {
    let evaluator = Evaluator {
        settings: &SETTINGS,
        namespace,
        cluster: None,
        nodes: None,
        claims: None,
        images: None,
        claim_owner: None,
    };
    let subject = admission::subject(request, endpoint);
    let answer = admission::respond(request, endpoint, &subject, &evaluator);
    let encoded = answer
        .encode(&request.uid)
        .unwrap_or_else(|err| panic!("encode failed: {err}"));
    serde_json::from_slice(&encoded).unwrap_or_else(|err| panic!("the answer is not JSON: {err}"))
}

/// Checks an answer; returns the patched object when there is a patch.
fn check(
    request: &AdmissionRequest<'_>,
    sent: Option<&Value>,
    endpoint: Endpoint,
    reply: &Value,
) -> Option<Value> {
    assert_eq!(reply["apiVersion"], "admission.k8s.io/v1", "{reply}");
    assert_eq!(reply["kind"], "AdmissionReview", "{reply}");
    let response = &reply["response"];
    assert_eq!(
        response["uid"].as_str(),
        Some(&*request.uid),
        "uid not echoed: {reply}"
    );
    let allowed = response["allowed"]
        .as_bool()
        .unwrap_or_else(|| panic!("no allowed: {reply}"));
    if !allowed {
        let reason = response["status"]["message"].as_str().unwrap_or("");
        assert!(!reason.is_empty(), "a denial without a reason: {reply}");
    }
    for warning in response["warnings"].as_array().into_iter().flatten() {
        let text = warning
            .as_str()
            .unwrap_or_else(|| panic!("warning {warning}"));
        assert!(
            text.chars().count() <= MAX_WARNING_CHARS,
            "warning too long: {text:?}"
        );
    }
    let patch = response.get("patch")?;
    assert_eq!(
        endpoint,
        Endpoint::Mutate,
        "a validating answer has a patch"
    );
    assert_eq!(response["patchType"], "JSONPatch", "{reply}");
    let bytes = patch
        .as_str()
        .and_then(|p| BASE64.decode(p).ok())
        .unwrap_or_else(|| panic!("patch is not base64: {patch}"));
    let operations: json_patch::Patch = serde_json::from_slice(&bytes)
        .unwrap_or_else(|err| panic!("patch is not a JSON patch: {err}"));
    let mut object = request
        .object
        .as_ref()
        .and(sent)
        .cloned()
        .unwrap_or_else(|| panic!("a patch without an object: {reply}"));
    if let Err(err) = json_patch::patch(&mut object, &operations) {
        panic!("the patch does not apply: {err}\npatch: {operations:?}\nobject: {object}");
    }
    Some(object)
}
