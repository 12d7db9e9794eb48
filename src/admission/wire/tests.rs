//! The wire format: what `decode` reads of a review, what `encode` writes.

use std::borrow::Cow;

use std::collections::BTreeMap;

use kube::core::Status;
use kube::core::admission::AdmissionResponse;
use proptest::prelude::*;
use serde::Serialize;
use serde_json::{Value, json};

use super::*;
use gpu_policy_test_support::review::Review;

/// The requester's groups point into the body, as its other strings do;
/// one with an escape is unescaped.
#[test]
fn the_requesters_groups_are_read_from_the_body() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
    let body = Review::create(&pod, "ml")
        .user("alice", &["system:authenticated", "a\\u0062c"])
        .body();
    let request = decode(&body).unwrap_or_else(|err| panic!("{err}"));
    let groups = request.user_info.groups.unwrap_or_default();
    assert_eq!(groups, ["system:authenticated", "a\\u0062c"]);
    assert!(matches!(groups[0], Cow::Borrowed(_)));
    assert!(matches!(groups[1], Cow::Owned(_)));
    let body = Review::create(&pod, "ml")
        .set("userInfo", json!({"username": "alice"}))
        .body();
    let without = decode(&body).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(without.user_info.groups, None);
}

#[test]
fn encoding_is_one_byte_sequence_per_answer() {
    let mut response = AdmissionResponse::invalid("x");
    response.allowed = true;
    response.result = Default::default();
    response.uid = "u".to_owned();
    for key in ["violations", "mutations", "allowlisted", "a", "z"] {
        response
            .audit_annotations
            .insert(key.to_owned(), format!("{key} value"));
    }
    let first = encode(response.clone()).unwrap_or_default();
    let text = String::from_utf8_lossy(&first).into_owned();
    assert_eq!(
        text,
        r#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"u","allowed":true,"status":{},"auditAnnotations":{"a":"a value","allowlisted":"allowlisted value","mutations":"mutations value","violations":"violations value","z":"z value"}}}"#
    );
    // A HashMap's order changes from one map to the next; the bytes do not.
    for _ in 0..20 {
        let mut again = response.clone();
        again.audit_annotations = response
            .audit_annotations
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect();
        assert_eq!(encode(again).unwrap_or_default(), first);
    }
}

/// The answer is kube's `AdmissionResponse` as kube writes it, in its
/// order, but for the patch (base64 rather than an array of numbers) and
/// the audit annotations (after it, in key order).
#[test]
fn encoding_writes_kubes_fields_in_kubes_order_with_a_base64_patch() {
    let patch = json_patch::Patch(vec![json_patch::PatchOperation::Remove(
        json_patch::RemoveOperation {
            path: json_patch::jsonptr::PointerBuf::parse("/a").unwrap_or_default(),
        },
    )]);
    let patched = AdmissionResponse::invalid("x").with_patch(patch);
    let Ok(mut response) = patched else {
        panic!("a patch of one operation encodes");
    };
    response.uid = "u".to_owned();
    response.allowed = true;
    response.warnings = Some(vec!["w1".to_owned(), "w \"2\"".to_owned()]);
    response
        .audit_annotations
        .insert("k".to_owned(), "v".to_owned());
    let denied = {
        let mut denied = AdmissionResponse::invalid("no \"x\"");
        denied.uid = "d".to_owned();
        denied
    };
    for response in [response, denied] {
        let kubes = serde_json::to_string(&response).unwrap_or_default();
        let mut expected: Vec<(String, Value)> = members(&kubes, "")
            .into_iter()
            .filter(|(key, _)| key != "patch" && key != "auditAnnotations")
            .collect();
        if let Some(patch) = &response.patch {
            expected.push((
                "patch".into(),
                json!(base64::Engine::encode(
                    &base64::engine::general_purpose::STANDARD,
                    patch
                )),
            ));
        }
        if !response.audit_annotations.is_empty() {
            expected.push(("auditAnnotations".into(), json!(response.audit_annotations)));
        }
        let bytes = encode(response).unwrap_or_default();
        let text = String::from_utf8_lossy(&bytes);
        let review: Vec<String> = members(&text, "").into_iter().map(|(key, _)| key).collect();
        assert_eq!(review, ["apiVersion", "kind", "response"]);
        assert_eq!(members(&text, "/response"), expected, "{text}");
    }
}

/// The answer as a serde struct of the same fields writes it: the oracle
/// of `encode`, which writes the keys and constants as they are.
fn encoded_by_serde(response: &AdmissionResponse) -> Vec<u8> {
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
        patch: Option<String>,
        #[serde(
            rename = "auditAnnotations",
            skip_serializing_if = "BTreeMap::is_empty"
        )]
        audit_annotations: BTreeMap<&'a str, &'a str>,
    }
    let patch = response
        .patch
        .as_ref()
        .map(|patch| base64::Engine::encode(&base64::engine::general_purpose::STANDARD, patch));
    let review = Review {
        api_version: kube::core::admission::META_API_VERSION_V1,
        kind: kube::core::admission::META_KIND,
        response: Response {
            uid: &response.uid,
            allowed: response.allowed,
            status: &response.result,
            patch_type: patch.as_ref().map(|_| "JSONPatch"),
            warnings: response.warnings.as_deref(),
            audit_annotations: response
                .audit_annotations
                .iter()
                .map(|(key, value)| (key.as_str(), value.as_str()))
                .collect(),
            patch,
        },
    };
    serde_json::to_vec(&review).unwrap_or_default()
}

proptest! {
    /// Whatever the response holds (strings that need escapes, a denial's
    /// status, any patch bytes), `encode` writes the bytes serde writes.
    #[test]
    fn an_answer_is_the_bytes_serde_writes(
        uid in "(?s).{0,12}",
        allowed in any::<bool>(),
        message in proptest::option::of("(?s).{0,12}"),
        code in proptest::option::of(100u16..600),
        warnings in proptest::option::of(prop::collection::vec("(?s).{0,8}", 0..3)),
        patch in proptest::option::of(prop::collection::vec(any::<u8>(), 0..64)),
        annotations in prop::collection::vec(("(?s).{0,6}", "(?s).{0,6}"), 0..4),
    ) {
        let mut response = match &message {
            Some(message) => AdmissionResponse::invalid(message),
            None => AdmissionResponse::invalid(""),
        };
        response.result = match (message, code) {
            (None, None) => Status::default(),
            (message, code) => {
                let mut status = Status::failure(&message.unwrap_or_default(), "Invalid");
                status.code = code.unwrap_or_default();
                status
            }
        };
        response.uid = uid;
        response.allowed = allowed;
        response.warnings = warnings;
        response.patch = patch;
        response.audit_annotations = annotations.into_iter().collect();
        let expected = encoded_by_serde(&response);
        let bytes = encode(response).unwrap_or_default();
        prop_assert_eq!(String::from_utf8_lossy(&bytes), String::from_utf8_lossy(&expected));
    }
}

/// The members of the object at `pointer` in `text`, in the order of the
/// text.
fn members(text: &str, pointer: &str) -> Vec<(String, Value)> {
    let document = crate::document::Document::parse(text).unwrap_or_else(|err| panic!("{err}"));
    let object = document
        .root()
        .pointer(pointer)
        .and_then(|at| at.as_object());
    let object = object.unwrap_or_else(|| panic!("no object at {pointer:?}: {text}"));
    object
        .iter()
        .map(|(key, value)| (key.to_owned(), value.to_value()))
        .collect()
}

/// A body the reader refuses is named by the position, on one line, and
/// without the excerpt of the body the reader's own message carries.
#[test]
fn a_refused_body_is_named_by_its_position_alone() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u" secret-token}}"#;
    let text = refusal_of(body);
    assert!(
        text.starts_with("body is not an AdmissionReview: "),
        "{text}"
    );
    assert!(text.ends_with(" at line 1 column 83"), "{text}");
    assert!(!text.contains("secret"), "{text}");
    assert!(!text.contains(['\n', '\t']), "{text:?}");
}

/// What no one reads is skipped without recursion, however deep; what is
/// read into the document is refused past the reader's nesting limit, not
/// read into a stack overflow.
#[test]
fn nesting_is_bounded_where_it_is_read_and_free_where_it_is_skipped() {
    let nested = "[".repeat(100_000) + &"]".repeat(100_000);
    let body = pod_review_text();

    let in_options = body.replacen(
        "\"request\":{",
        &format!("\"request\":{{\"options\":{nested},"),
        1,
    );
    assert_ne!(in_options, body);
    assert!(decode(in_options.as_bytes()).is_ok());

    let unread = body.replacen("\"spec\":{}", &format!("\"spec\":{{\"x\":{nested}}}"), 1);
    assert_ne!(unread, body);
    assert!(decode(unread.as_bytes()).is_ok());

    let in_spec = body.replacen(
        "\"spec\":{}",
        &format!("\"spec\":{{\"affinity\":{nested}}}"),
        1,
    );
    assert_ne!(in_spec, body);
    let text = refusal_of(in_spec.as_bytes());
    assert!(text.contains("nesting"), "{text}");
}

/// A `\u` escape without four hex digits makes the body not JSON, in what
/// the reader skips as in what it reads; an escaped backslash before a
/// `u` is no such escape. (Found by the `review` fuzz target: the reader
/// steps over the four characters in what it skips.)
#[rstest::rstest]
#[case(
    r#""options":{"x":"a\u00ne"},"#,
    Some("invalid \\u escape at line 1 column ")
)]
#[case(r#""options":{"x":"\u12"},"#, Some("invalid \\u escape"))]
#[case(r#""options":{"x":"a\\u00ne \u00e9 \"\\"},"#, None)]
fn unicode_escapes_are_checked_where_they_are_skipped(
    #[case] options: &str,
    #[case] refused: Option<&str>,
) {
    let body = pod_review_text().replacen("\"request\":{", &format!("\"request\":{{{options}"), 1);
    assert_eq!(
        serde_json::from_str::<Value>(&body).is_err(),
        refused.is_some(),
        "serde_json and decode must agree: {body}"
    );
    match (decode(body.as_bytes()), refused) {
        (Ok(_), None) => {}
        (Err(err), Some(message)) => assert!(err.to_string().contains(message), "{err}"),
        (Ok(_), Some(_)) => panic!("decoded: {body}"),
        (Err(err), None) => panic!("{err}: {body}"),
    }
}

/// Why `decode` refused `body`; empty when it did not.
fn refusal_of(body: &[u8]) -> String {
    decode(body)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default()
}

/// The review of a small pod's creation, as text to edit.
fn pod_review_text() -> String {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
    String::from_utf8(Review::create(&pod, "ml").body()).unwrap_or_default()
}
