use super::*;
use serde_json::json;

#[test]
fn json_differences_name_the_pointer() {
    let mut found = Vec::new();
    json_differences(
        &json!({"spec": {"a/b": 1, "list": [1, 2]}}),
        &json!({"spec": {"a/b": 2, "list": [1], "extra": true}}),
        "",
        &mut found,
    );
    let lines: Vec<String> =
        found.into_iter().map(|(p, w, h)| format!("{p}: {w} -> {h}")).collect();
    assert_eq!(
        lines,
        ["/spec/a~1b: 1 -> 2", "/spec/extra: absent -> true", "/spec/list/1: 2 -> absent"]
    );
}

#[test]
fn a_difference_is_one_line_with_object_rule_and_both_sides() {
    let difference = Difference {
        object: "Pod/team-a/train".into(),
        rules: vec![RuleId::BoundedRequests],
        field: "violations".into(),
        expected: "none".into(),
        got: "\"gpu-policy: a\\nb\"".into(),
    };
    assert_eq!(
        difference.to_string(),
        "Pod/team-a/train: [bounded-requests] violations: expected none, got \"gpu-policy: a\\nb\""
    );
}
