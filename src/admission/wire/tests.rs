//! The wire format: what `decode` reads of a review.

use std::borrow::Cow;

use serde_json::{Value, json};

use super::*;
use gpu_policy_test_support::review::Review;

/// The requester's groups point into the body, as its other strings do;
/// one with an escape is unescaped.
#[test]
fn the_requesters_groups_are_read_from_the_body() {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
    let body =
        Review::create(&pod, "ml").user("alice", &["system:authenticated", "a\\u0062c"]).body();
    let request = decode(&body).unwrap_or_else(|err| panic!("{err}"));
    let groups = request.user_info.groups.unwrap_or_default();
    assert_eq!(groups, ["system:authenticated", "a\\u0062c"]);
    assert!(matches!(groups[0], Cow::Borrowed(_)));
    assert!(matches!(groups[1], Cow::Owned(_)));
    let body = Review::create(&pod, "ml").set("userInfo", json!({"username": "alice"})).body();
    let without = decode(&body).unwrap_or_else(|err| panic!("{err}"));
    assert_eq!(without.user_info.groups, None);
}

/// A body the reader refuses is named by the position, on one line, and
/// without the excerpt of the body the reader's own message carries.
#[test]
fn a_refused_body_is_named_by_its_position_alone() {
    let body = br#"{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u" secret-token}}"#;
    let text = refusal_of(body);
    assert!(text.starts_with("body is not an AdmissionReview: "), "{text}");
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

    let in_options =
        body.replacen("\"request\":{", &format!("\"request\":{{\"options\":{nested},"), 1);
    assert_ne!(in_options, body);
    assert!(decode(in_options.as_bytes()).is_ok());

    let unread = body.replacen("\"spec\":{}", &format!("\"spec\":{{\"x\":{nested}}}"), 1);
    assert_ne!(unread, body);
    assert!(decode(unread.as_bytes()).is_ok());

    let in_spec = body.replacen("\"spec\":{}", &format!("\"spec\":{{\"affinity\":{nested}}}"), 1);
    assert_ne!(in_spec, body);
    let text = refusal_of(in_spec.as_bytes());
    assert!(text.contains("nesting"), "{text}");
}

/// A `\u` escape without four hex digits makes the body not JSON, in what
/// the reader skips as in what it reads; an escaped backslash before a
/// `u` is no such escape. (Found by the `review` fuzz target: the reader
/// steps over the four characters in what it skips.)
#[rstest::rstest]
#[case(r#""options":{"x":"a\u00ne"},"#, Some("invalid \\u escape at line 1 column "))]
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
    decode(body).err().map(|e| e.to_string()).unwrap_or_default()
}

/// The review of a small pod's creation, as text to edit.
fn pod_review_text() -> String {
    let pod = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}});
    String::from_utf8(Review::create(&pod, "ml").body()).unwrap_or_default()
}
