use super::*;
use serde_json::json;

fn parsed(document: Value) -> Result<Test, String> {
    parse_test(document, Path::new("."), "t.yaml").map_err(|err| err.to_string())
}

fn minimal() -> Value {
    json!({
        "apiVersion": TEST_API_VERSION, "kind": TEST_KIND, "name": "t",
        "resources": [{"inline": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}}}],
        "cases": [{"object": "Pod/p", "allowed": true}],
    })
}

#[test]
fn a_minimal_test_gets_the_defaults() {
    let test = match parsed(minimal()) {
        Ok(test) => test,
        Err(err) => panic!("{err}"),
    };
    assert_eq!((test.namespace.as_str(), test.mode), ("default", Mode::Enforce));
    assert_eq!(test.resources.len(), 1);
    assert_eq!(test.cases[0].object.to_string(), "Pod/default/p");
    assert_eq!(test.cases[0].engines, Engines::BOTH);
    assert_eq!(test.cases[0].expect.given(), ["allowed"]);
}

#[test]
fn every_problem_names_its_field() {
    let cases: [(&str, Value, &str); 20] = [
        ("kind", json!("Tset"), "kind: must be Test, not \"Tset\""),
        (
            "namespace",
            json!({"mode": "strict"}),
            "namespace.mode: unknown mode \"strict\" (expected enforce, warn or audit)",
        ),
        (
            "namespace",
            json!({"annotations": {"a": 2}}),
            "namespace.annotations.a: invalid type: integer `2`, expected a string",
        ),
        ("config", json!({"maxPerPd": 2}), "config: unknown field `maxPerPd`"),
        (
            "engines",
            json!(["kyverno"]),
            "engines[0]: unknown variant `kyverno`, expected `webhook` or `cel`",
        ),
        ("engines", json!(["webhook", "webhook"]), "engines[1]: webhook is listed twice"),
        (
            "cases",
            json!([{"object": "Pod/p", "violations": ["bounded"]}]),
            "cases[0].violations[0]: unknown rule \"bounded\"",
        ),
        (
            "cases",
            json!([{"object": "p", "allowed": true}]),
            "cases[0].object: must be Kind/namespace/name or Kind/name, not \"p\"",
        ),
        (
            "cases",
            json!([{"object": "Pod/p", "alowed": true}]),
            "cases[0].alowed: unknown field `alowed`, expected one of `object`, `engines`, ",
        ),
        (
            "cases",
            json!([{"object": "Pod/p", "allowed": "yes"}]),
            "cases[0].allowed: invalid type: string \"yes\", expected a boolean",
        ),
        ("cases", json!([{"object": " ", "allowed": true}]), "cases[0].object: is empty"),
        ("cases", json!([{"object": "Pod/p"}]), "cases[0]: expects nothing"),
        (
            "cases",
            json!([{"object": "Pod/p", "messages": ["/(/"]}]),
            "cases[0].messages[0]: not a regular expression",
        ),
        // A list is never read as a mapping's fields in order.
        (
            "namespace",
            json!(["ns", "warn"]),
            "namespace: invalid type: sequence, expected a mapping",
        ),
        (
            "cases",
            json!([["Pod/p", null, true, null, null, null, null, null, null, null]]),
            "cases[0]: invalid type: sequence, expected a mapping",
        ),
        (
            "cases",
            json!([{"object": "Pod/p", "patched": ["out.yaml", null]}]),
            "cases[0].patched: invalid type: sequence, expected a mapping",
        ),
        (
            "resources",
            json!([[{"apiVersion": "v1", "kind": "Pod"}]]),
            "resources[0]: invalid type: sequence, expected a path or a mapping with inline",
        ),
        ("resources", json!(["  "]), "resources[0]: is empty"),
        (
            "resources",
            json!([{"inlne": {}}]),
            "resources[0].inlne: unknown field `inlne`, expected `inline`",
        ),
        (
            "resources",
            json!([{"inline": {}, "extra": 1}]),
            "resources[0].extra: unknown field `extra`, expected `inline`",
        ),
    ];
    for (key, value, expected) in cases {
        let mut document = minimal();
        document[key] = value;
        let err = parsed(document).err().unwrap_or_default();
        assert!(err.starts_with(expected), "{key}: {err}");
        assert!(!err.contains('\n'), "{err}");
    }
}

#[test]
fn null_annotations_are_none() {
    let mut document = minimal();
    document["namespace"] = json!({"annotations": null});
    match parsed(document) {
        Ok(test) => assert!(test.annotations.is_empty()),
        Err(err) => panic!("{err}"),
    }
}

#[test]
fn a_document_that_is_no_mapping_is_refused() {
    let err = parsed(json!(["a"])).err().unwrap_or_default();
    assert_eq!(err, "the document: must be a mapping, not a list");
    let mut nameless = minimal();
    nameless.as_object_mut().map(|document| document.remove("name"));
    let err = parsed(nameless).err().unwrap_or_default();
    assert_eq!(err, "the document: missing field `name`");
}

#[test]
fn patterns_are_substrings_or_slashed_regular_expressions() {
    let substring = Pattern::try_from(NonEmpty("above 2".into()));
    let regex = Pattern::try_from(NonEmpty("/above [0-9]+$/".into()));
    let (Ok(substring), Ok(regex)) = (substring, regex) else {
        panic!("patterns parse");
    };
    assert!(substring.matches("gpu-policy: above 2 per pod"));
    assert!(regex.matches("above 16"));
    assert!(!regex.matches("above 16 per pod"));
    assert_eq!(regex.to_string(), "/above [0-9]+$/");
}
