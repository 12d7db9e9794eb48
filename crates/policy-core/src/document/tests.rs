use proptest::prelude::*;
use serde_json::{Value, json};

use super::*;

fn parsed(text: &str) -> Document<'_> {
    Document::parse(text).unwrap_or_else(|err| panic!("{err}: {text}"))
}

#[test]
fn reads_what_serde_json_reads() {
    let text = r#"{"a": [1, -2, 2.5, true, null, "x", "t\"ab\u00e9"], "b": {"c": {}, "d": []}}"#;
    let document = parsed(text);
    let expected: Value = serde_json::from_str(text).unwrap();
    assert_eq!(document.root().to_value(), expected);
    assert_eq!(serde_json::to_value(document.root()).unwrap(), expected);
}

#[test]
fn strings_without_escapes_are_borrowed_from_the_text() {
    let text = r#"{"name": "plain", "quoted": "a\nb"}"#;
    let document = parsed(text);
    let plain = document.root().get("name").and_then(Json::as_str).unwrap();
    let range = text.as_ptr() as usize..text.as_ptr() as usize + text.len();
    assert!(range.contains(&(plain.as_ptr() as usize)));
    assert_eq!(document.strings.len(), 1);
    assert_eq!(document.root().get("quoted").and_then(Json::as_str), Some("a\nb"));
}

#[test]
fn accessors_answer_as_serde_json_does() {
    let value = json!({"s": "x", "n": 3, "neg": -1, "f": 1.5, "b": false, "z": null,
        "l": [10, 20, 30], "o": {"k": "v", "a/b": {"~c": 1}}});
    let document = Document::from_value(&value);
    let root = document.root();
    for key in ["s", "n", "neg", "f", "b", "z", "l", "o", "missing"] {
        let ours = root.get(key);
        let theirs = value.get(key);
        assert_eq!(ours.map(Json::to_value).as_ref(), theirs, "{key}");
        assert_eq!(ours.and_then(Json::as_str), theirs.and_then(Value::as_str));
        assert_eq!(ours.and_then(Json::as_u64), theirs.and_then(Value::as_u64));
        assert_eq!(ours.and_then(Json::as_i64), theirs.and_then(Value::as_i64));
        assert_eq!(ours.and_then(Json::as_f64), theirs.and_then(Value::as_f64));
        assert_eq!(ours.and_then(Json::as_bool), theirs.and_then(Value::as_bool));
        assert_eq!(ours.is_some_and(Json::is_null), theirs.is_some_and(Value::is_null));
    }
    for pointer in ["", "/l/1", "/l/01", "/l/3", "/o/a~1b/~0c", "/o/k/x", "/s/0"] {
        assert_eq!(
            root.pointer(pointer).map(Json::to_value).as_ref(),
            value.pointer(pointer),
            "{pointer}"
        );
    }
    let list = root.get("l").and_then(Json::as_array).unwrap();
    assert_eq!(list.len(), 3);
    assert_eq!(list.iter().len(), 3);
    assert_eq!(list.get(2).and_then(Json::as_u64), Some(30));
    assert_eq!(list.get(3), None);
    let object = root.get("o").and_then(Json::as_object).unwrap();
    assert_eq!(object.keys().collect::<Vec<_>>(), ["a/b", "k"]);
    assert!(object.contains_key("k") && !object.contains_key("v"));
    assert_eq!(root.get("l").map(Json::type_name), Some("a list"));
    assert_eq!(root.get("o").map(Json::type_name), Some("an object"));
}

#[test]
fn of_a_repeated_key_the_last_counts() {
    let document = parsed(r#"{"k": 1, "k": 2}"#);
    assert_eq!(document.root().get("k").and_then(Json::as_u64), Some(2));
    assert_eq!(document.root().to_value(), json!({"k": 2}));
    assert_eq!(document.root(), Document::from_value(&json!({"k": 2})).root());
}

#[test]
fn equality_is_that_of_json_values() {
    let left = parsed(r#"{"a": [1, {"b": "c"}], "d": null}"#);
    let same = parsed(r#"{"d": null, "a": [1, {"b": "c"}]}"#);
    let other = parsed(r#"{"a": [1, {"b": "C"}], "d": null}"#);
    assert_eq!(left.root(), same.root());
    assert_ne!(left.root(), other.root());
    assert_ne!(left.root().get("a"), left.root().get("d"));
}

#[test]
fn a_text_that_is_not_json_is_refused() {
    for text in ["{", "[1,]", r#"{"a" 1}"#, "1 2", "\"\\x\""] {
        assert!(Document::parse(text).is_err(), "{text}");
    }
}

#[test]
fn a_node_is_one_word() {
    assert_eq!(size_of::<tree::Node>(), 8);
}

#[test]
fn integers_past_a_node_are_kept_aside_and_read_alike() {
    let text = format!(
        "[{}, {}, {}, {}, {}, {}, 0, -1, 1.5]",
        (1i64 << 59) - 1,
        1i64 << 59,
        -(1i64 << 59),
        -(1i64 << 59) - 1,
        u64::MAX,
        i64::MIN
    );
    let document = parsed(&text);
    let expected: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(document.root().to_value(), expected);
    // The three past 60 bits, and the float.
    assert_eq!(document.numbers.len(), 5);
    for (ours, theirs) in
        document.root().as_array().unwrap().iter().zip(expected.as_array().unwrap())
    {
        assert_eq!(ours.as_u64(), theirs.as_u64());
        assert_eq!(ours.as_i64(), theirs.as_i64());
        assert_eq!(ours.as_f64(), theirs.as_f64());
        assert_eq!(ours.as_number().as_ref(), theirs.as_number());
    }
}

#[test]
fn strings_of_the_text_take_no_side_table() {
    let text = r#"{"a": "x", "bb": ["", "yz"]}"#;
    let document = parsed(text);
    assert!(document.strings.is_empty() && document.numbers.is_empty());
    assert_eq!(document.node_count(), 7);
    assert_eq!(document.root().pointer("/bb/1").and_then(Json::as_str), Some("yz"));
}

/// Leaves out the elements of the lists of `drop` that are not `"keep"`.
#[derive(Clone, Copy)]
struct InDrop(bool);

impl Unread for InDrop {
    fn member(self, key: &str) -> Self {
        InDrop(key == "drop")
    }
    fn element(self) -> Self {
        self
    }
    fn skips(self, _: &str) -> bool {
        false
    }
    fn keeps(self, element: Json<'_>) -> bool {
        !self.0 || element.as_str() == Some("keep")
    }
}

#[test]
fn a_run_of_left_out_elements_is_one_node_that_keeps_their_indexes() {
    let text = r#"{"drop": [1, [2, 3], {"a": 4}, "keep", 5, 6, "keep", 7], "other": [1, 2]}"#;
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let document = read(text, &mut deserializer, InDrop(false), &Budget::unlimited()).unwrap();
    let list = document.root().get("drop").and_then(Json::as_array).unwrap();
    assert_eq!(list.len(), 8);
    assert_eq!(list.iter().len(), 8);
    let left: Vec<bool> = list.iter().map(Json::is_left_out).collect();
    assert_eq!(left, [true, true, true, false, true, true, false, true]);
    assert_eq!(list.get(3).and_then(Json::as_str), Some("keep"));
    assert_eq!(list.get(6).and_then(Json::as_str), Some("keep"));
    assert_eq!(document.root().pointer("/drop/6").and_then(Json::as_str), Some("keep"));
    assert!(list.get(8).is_none());
    assert_eq!(document.root().pointer("/other/1").and_then(Json::as_u64), Some(2));
    // The object, its two keys, two lists, three runs, two kept, two numbers.
    assert_eq!(document.node_count(), 12);
}

#[test]
fn a_document_past_its_budget_is_empty_and_its_text_still_checked() {
    let text = r#"{"a": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "b": {"c": "d"}}"#;
    let budget = Budget::new(8 * 5);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let document = read(text, &mut deserializer, Everything, &budget).unwrap();
    assert!(document.exceeded_budget());
    assert!(document.root().is_null());
    assert_eq!(document.node_count(), 1);

    let within = Budget::new(8 * 20);
    let mut deserializer = serde_json::Deserializer::from_str(text);
    let document = read(text, &mut deserializer, Everything, &within).unwrap();
    assert!(!document.exceeded_budget());
    assert_eq!(document.node_count(), 17);

    let broken = r#"{"a": [1, 2, 3, 4, 5, 6, 7, 8, 9, 10], "b": {"c" "d"}}"#;
    let mut deserializer = serde_json::Deserializer::from_str(broken);
    assert!(read(broken, &mut deserializer, Everything, &Budget::new(40)).is_err());
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        (-1e6f64..1e6).prop_map(Value::from),
        "[a-z\"\\\\\n\u{e9}]{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 64, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map("[a-z~/\"]{0,4}", inner, 0..6)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    /// Read from text, a document is what serde_json reads; made from a
    /// value, it is the value.
    #[test]
    fn a_document_is_the_value_it_was_read_from(value in json_value()) {
        let text = serde_json::to_string(&value).unwrap();
        let document = Document::parse(&text).unwrap();
        let read: Value = serde_json::from_str(&text).unwrap();
        prop_assert_eq!(document.root().to_value(), read.clone());
        let made = Document::from_value(&read);
        prop_assert_eq!(made.root().to_value(), read.clone());
        prop_assert_eq!(document.root(), made.root());
        let made = Document::from_value(&value);
        prop_assert_eq!(made.root().to_value(), value.clone());
        prop_assert_eq!(serde_json::to_string(&made.root()).unwrap(), text);
    }
}
