use super::*;
use serde_json::json;

#[test]
fn unknown_keys_are_refused_with_the_keys_allowed() {
    let err = Fields::new(json!({"name": "a", "nmae": "b"}), "cases[1]", &["name"])
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("cases[1].nmae: unknown field (expected one of: name)")
    );
}

#[test]
fn types_are_named_with_the_value() {
    let mut fields = match Fields::new(
        json!({"allowed": "yes", "name": 3}),
        "",
        &["allowed", "name"],
    ) {
        Ok(fields) => fields,
        Err(err) => panic!("{err}"),
    };
    assert_eq!(
        fields
            .boolean("allowed")
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("allowed: must be true or false, not a string (\"yes\")")
    );
    assert_eq!(
        fields
            .required_string("name")
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("name: must be a string, not a number (3)")
    );
    assert_eq!(
        fields
            .required_string("gone")
            .err()
            .map(|e| e.to_string())
            .as_deref(),
        Some("gone: missing")
    );
}

#[test]
fn a_document_that_is_no_mapping_is_refused() {
    let err = Fields::new(json!(["a"]), "", &[])
        .err()
        .map(|e| e.to_string());
    assert_eq!(
        err.as_deref(),
        Some("the document: must be a mapping, not a list")
    );
}
