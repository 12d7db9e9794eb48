use super::*;

#[test]
fn markup_and_forbidden_characters_are_escaped() {
    assert_eq!(
        escape("a<b> & \"c\" 'd'\n\u{1}\u{ffff}"),
        "a&lt;b&gt; &amp; &quot;c&quot; &apos;d&apos;&#10;\u{fffd}\u{fffd}"
    );
}
