//! Bounded fuzzing on the stable toolchain of what the server does with a
//! request body: [`admission::decode`], [`admission::respond`] on every endpoint
//! and [`admission::Answer::encode`]. The bodies are AdmissionReviews around the
//! fixtures of `tests/fixtures/` (and pods made from their templates),
//! generated pods and workloads, and namespaces, damaged by structure-aware
//! mutations (a subtree replaced or removed, a field added, an env entry
//! duplicated, a GPU count changed), with a damaged envelope or damaged bytes
//! some of the time, or plain random bytes.
//!
//! Debug builds are slow and a case must cost little more than the server's
//! own work: the objects are read, generated and written out once
//! ([`corpus::corpus`]), with the byte range of every node, and a case is a small
//! recipe of edits spliced into that text.

use std::collections::HashMap;
use std::ops::Range;
use std::sync::OnceLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use gpu_policy::admission::{self, Endpoint};
use gpu_policy::settings::{MODE_LABEL, NamespaceSettings};
use proptest::strategy::ValueTree;
use proptest::test_runner::{Config, RngAlgorithm, TestRng, TestRunner};

use super::*;

mod corpus;
mod edits;
mod envelope;

use corpus::*;
use edits::*;
use envelope::*;

const GENERATED_PODS: usize = 384;
const GENERATED_WORKLOADS: usize = 128;
const UID: &str = "705ab4f5-6393-11e8-b7cc-42010a800002";

/// Runs the body through the server's steps and checks the answer.
fn serve(
    body: &[u8],
    well_formed: bool,
    endpoint: Endpoint,
    namespace_settings: &NamespaceSettings,
) -> Result<(), TestCaseError> {
    let decoded = admission::decode(body);
    let request = match decoded {
        Ok(request) => request,
        Err(err) => {
            prop_assert!(!well_formed, "a well-formed review was rejected: {}", err);
            return Ok(());
        }
    };
    let evaluator = Evaluator {
        settings: &SETTINGS,
        namespace: namespace_settings,
        cluster: None,
        nodes: None,
        claims: None,
        images: None,
        claim_owner: None,
    };
    let subject = admission::subject(&request, endpoint);
    let answer = admission::respond(&request, endpoint, &subject, &evaluator);
    let encoded = match answer.encode(&request.uid) {
        Ok(encoded) => encoded,
        Err(err) => return Err(TestCaseError::fail(format!("encode failed: {err}"))),
    };
    let reply: Value = serde_json::from_slice(&encoded)
        .map_err(|err| TestCaseError::fail(format!("the answer is not JSON: {err}")))?;
    prop_assert_eq!(&reply["apiVersion"], "admission.k8s.io/v1");
    prop_assert_eq!(&reply["kind"], "AdmissionReview");
    let response = &reply["response"];
    prop_assert_eq!(response["uid"].as_str(), Some(&*request.uid), "uid not echoed");
    prop_assert!(response["allowed"].is_boolean(), "no allowed: {}", response);
    let Some(patch) = response.get("patch") else {
        return Ok(());
    };
    prop_assert_eq!(endpoint, Endpoint::Mutate, "a validating answer has a patch");
    prop_assert_eq!(&response["patchType"], "JSONPatch");
    let decoded = patch
        .as_str()
        .and_then(|p| BASE64.decode(p).ok())
        .ok_or_else(|| TestCaseError::fail(format!("patch is not base64: {patch}")))?;
    let operations: json_patch::Patch = serde_json::from_slice(&decoded)
        .map_err(|err| TestCaseError::fail(format!("patch is not a JSON patch: {err}")))?;
    // The object as the API server sent it, every field in it.
    let sent: Value = serde_json::from_slice(body)
        .map_err(|err| TestCaseError::fail(format!("a decoded body is not JSON: {err}")))?;
    let mut object = match (&request.object, sent.pointer("/request/object")) {
        (Some(_), Some(object)) => object.clone(),
        _ => return Err(TestCaseError::fail("a patch without an object")),
    };
    json_patch::patch(&mut object, &operations)
        .map_err(|err| TestCaseError::fail(format!("the patch does not apply: {err}")))?;
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig {
        // The bounded fuzzing run of CI: about a minute in a debug build.
        cases: 100_000,
        failure_persistence: None,
        max_shrink_iters: 2048,
        // ChaCha, the default, costs a tenth of the time in a debug build.
        rng_algorithm: RngAlgorithm::XorShift,
        ..ProptestConfig::default()
    })]

    /// No request body makes the server panic or fail to answer:
    /// only `decode` may refuse a body, and never a well-formed review;
    /// every answer encodes and echoes the uid; a patch (mutating
    /// webhook only) is base64 of a JSON patch that applies to the
    /// object.
    #[test]
    fn review_bodies_never_fail_the_server(
        source in source(),
        mutations in prop::collection::vec(mutation(), 0..=3),
        envelope in envelope(),
        bytes in bytes(),
        endpoint in endpoint(),
        namespace_settings in any::<Index>(),
    ) {
        corpus();
        let (body, well_formed) = body(&source, &mutations, &envelope, &bytes);
        let namespace_settings = namespace_settings.get(&corpus().namespace_settings);
        serve(&body, well_formed, endpoint, namespace_settings).map_err(|err| {
            TestCaseError::fail(format!(
                "{err}\nendpoint {endpoint:?}, body:\n{}",
                String::from_utf8_lossy(&body)
            ))
        })?;
    }
}
