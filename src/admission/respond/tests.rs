use super::same_json;
use crate::document::Document;

/// `same_json` says what `Json`'s `==` says: objects as maps whatever
/// the order of their members, the last of a repeated key, arrays in
/// order, numbers as `serde_json` compares them.
#[test]
fn same_json_is_json_equality() {
    let texts = [
        r#"{"a": 1, "b": [1, {"c": null}]}"#,
        r#"{"b": [1, {"c": null}], "a": 1}"#,
        r#"{"a": 2, "b": [1, {"c": null}], "a": 1}"#,
        r#"{"a": 1, "b": [{"c": null}, 1]}"#,
        r#"{"a": 1.0, "b": [1, {"c": null}]}"#,
        r#"{"a": 1, "b": [1, {"c": null}], "d": {}}"#,
        r#"{"a": 1, "b": [1, {}]}"#,
        r#"[1, 2]"#,
        r#""a""#,
        r#"null"#,
    ];
    let documents: Vec<Document<'_>> =
        texts.iter().map(|text| Document::parse(text).expect("JSON")).collect();
    for left in &documents {
        for right in &documents {
            assert_eq!(
                same_json(left.root(), right.root()),
                left.root() == right.root(),
                "{left:?} {right:?}"
            );
        }
    }
    let equal = [(0, 1), (0, 2)];
    for (left, right) in equal {
        assert!(same_json(documents[left].root(), documents[right].root()));
    }
}
