use super::*;

#[test]
fn templates_fill_their_slots_and_keep_their_words() {
    let template =
        MessageTemplate::new("{containers}: requests.{resource} differs from limits.{resource}");
    assert_eq!(template.slots(), ["containers", "resource"]);
    assert_eq!(
        template.format(&[("containers", &"container \"a\""), ("resource", &"nvidia.com/gpu")]),
        "container \"a\": requests.nvidia.com/gpu differs from limits.nvidia.com/gpu"
    );
    // A slot left unfilled shows; braces that name no slot are words.
    assert_eq!(template.format(&[]), template.text());
    let odd = MessageTemplate::new("a {B} {} {x} {");
    assert_eq!(odd.pieces(), [Piece::Words("a {B} {} "), Piece::Slot("x"), Piece::Words(" {")]);
}

/// A list names its first ten, each cut to a DNS label's length, and
/// counts the rest; the noun agrees with the whole count.
#[test]
fn lists_name_ten_and_count_the_rest() {
    let names: Vec<String> = (0..100_000).map(|at| format!("c{at}")).collect();
    let list = CONTAINER.list(names.iter().map(String::as_str));
    assert_eq!(
        list,
        "containers \"c0\", \"c1\", \"c2\", \"c3\", \"c4\", \"c5\", \"c6\", \"c7\", \
             \"c8\", \"c9\" and 99,990 more"
    );
    let eleven = quoted_list("request", "requests", names.iter().take(11).map(String::as_str));
    assert!(eleven.ends_with("\"c9\" and 1 more"), "{eleven}");
    let ten = quoted_list("request", "requests", names.iter().take(10).map(String::as_str));
    assert!(ten.ends_with("\"c8\", \"c9\""), "{ten}");
    let long = "é".repeat(1 << 19);
    let cut = CONTAINER.list([long.as_str()]);
    assert_eq!(cut, format!("container {:?}", ["é".repeat(31), "…".to_owned()].concat()));
    let exact = "a".repeat(MAX_LISTED_NAME_BYTES);
    assert_eq!(CONTAINER.list([exact.as_str()]), format!("container {exact:?}"));
}

/// A body longer than a message keeps is cut and marked, at a
/// character boundary; the prefix is always whole.
#[test]
fn a_message_keeps_at_most_its_room() {
    let long = "é".repeat(1 << 20);
    let message = Message::new(format_args!("runtimeClassName {long:?} is not allowed"));
    assert!(message.as_str().len() <= Message::PREFIX.len() + Message::MAX_BODY_BYTES + 3);
    assert!(message.starts_with("gpu-policy: runtimeClassName \"éé"), "{message}");
    assert!(message.ends_with("é…"), "{message}");
    let short = "x".repeat(Message::MAX_BODY_BYTES);
    assert_eq!(Message::new(&short).body(), short);
}

#[test]
fn counts_are_written_with_thousands_separators() {
    let cases = [
        (0, "0"),
        (999, "999"),
        (1_000, "1,000"),
        (1_234, "1,234"),
        (99_990, "99,990"),
        (1_234_567, "1,234,567"),
    ];
    for (count, text) in cases {
        assert_eq!(thousands(count), text);
    }
    assert_eq!(and_more(1_234), "and 1,234 more");
    assert_eq!(prefix_within("aé", 2), "a");
    assert_eq!(prefix_within("aé", 3), "aé");
    assert_eq!(prefix_within("", 0), "");
}

#[test]
fn nouns_agree_with_the_count() {
    assert_eq!(CONTAINER.list(["a"]), "container \"a\"");
    assert_eq!(CONTAINER.list(["a", "b"]), "containers \"a\", \"b\"");
}

#[test]
fn the_prefix_is_added_once_and_the_body_kept() {
    let message = Message::new("runtimeClassName \"kata\" is not a GPU runtime class");
    assert_eq!(
        message.as_str(),
        "gpu-policy: runtimeClassName \"kata\" is not a GPU runtime class"
    );
    assert_eq!(message.body(), "runtimeClassName \"kata\" is not a GPU runtime class");
    assert_eq!(
        serde_json::to_value(&message).ok(),
        Some(serde_json::Value::String(message.to_string()))
    );
}
