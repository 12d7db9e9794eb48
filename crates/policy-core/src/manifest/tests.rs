use super::*;
use serde_json::json;

fn objects(text: &str, json: bool) -> Vec<Value> {
    match parse(text, "t.yaml", json) {
        Ok(docs) => docs.into_iter().map(|d| d.object).collect(),
        Err(err) => panic!("{err}"),
    }
}

#[test]
fn multi_document_yaml() {
    let found = objects("kind: A\n---\n---\nkind: B\n...\n", false);
    assert_eq!(found, vec![json!({"kind": "A"}), json!({"kind": "B"})]);
}

#[test]
fn lists_are_flattened() {
    let text = r#"{"kind": "List", "apiVersion": "v1", "items": [{"kind": "Pod"}, {"kind": "PodList", "items": [{"kind": "Pod", "metadata": {"name": "inner"}}]}]}"#;
    let found = objects(text, true);
    assert_eq!(
        found,
        vec![json!({"kind": "Pod"}), json!({"kind": "Pod", "metadata": {"name": "inner"}})]
    );
}

#[test]
fn yaml_numbers_and_strings_keep_their_types() {
    let found = objects("a: 1\nb: \"1\"\nc: 2e0\nd: 500m\n", false);
    assert_eq!(found, vec![json!({"a": 1, "b": "1", "c": 2.0, "d": "500m"})]);
}

#[test]
fn yaml_errors_say_where() {
    let err = parse("kind: Pod\nmetadata:\n  name: [unclosed\n", "bad.yaml", false)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert!(err.starts_with("bad.yaml: invalid YAML"), "{err}");
    assert!(err.contains("line"), "{err}");
    assert!(!err.contains('\n'), "{err}");
}

#[test]
fn json_errors_say_where() {
    let err =
        parse("{\n \"kind\": }", "bad.json", true).err().map(|e| e.to_string()).unwrap_or_default();
    assert!(err.starts_with("bad.json: invalid JSON at line 2, column"), "{err}");
}

#[test]
fn scalar_documents_are_refused() {
    let err = parse("kind: A\n---\njust text\n", "s.yaml", false)
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    assert_eq!(err, "s.yaml: document 2 is not a Kubernetes object (found a string)");
}
