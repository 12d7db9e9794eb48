use super::*;
use rstest::rstest;

#[rstest]
#[case("", true)]
#[case("a", true)]
#[case("7", true)]
#[case("arm64", true)]
#[case("x86_64", true)]
#[case("a-b.c_d", true)]
#[case("v8.2", true)]
#[case("-arm64", false)]
#[case("arm64-", false)]
#[case("_", false)]
#[case(".", false)]
#[case("arm 64", false)]
#[case(" arm64", false)]
#[case("arm64\n", false)]
#[case("arm/64", false)]
#[case("\u{e9}", false)]
#[case("a\u{e9}b", false)]
fn label_values_follow_the_kubernetes_grammar(#[case] value: &str, #[case] valid: bool) {
    assert_eq!(check_label_value("f", value).is_ok(), valid, "{value:?}");
}

#[test]
fn a_label_value_has_at_most_63_characters() {
    let longest = "a".repeat(MAX_LABEL_VALUE);
    assert_eq!(check_label_value("f", &longest), Ok(()));
    let refused = check_label_value("f", &format!("{longest}a"));
    assert_eq!(
        refused.map_err(|err| err.to_string()),
        Err(format!(
            "f \"{}…\" (64 bytes) is not a label value: a label value has at most 63 \
                 characters",
            "a".repeat(48)
        ))
    );
}

#[test]
fn a_refusal_quotes_a_short_prefix_on_one_line() {
    let huge = format!("arm64\n{}", "x".repeat(1_400_000));
    let refused = check_label_value("nodeSelector kubernetes.io/arch", &huge)
        .err()
        .map(|err| err.to_string())
        .unwrap_or_default();
    assert!(refused.len() < 200, "{} bytes", refused.len());
    assert!(!refused.contains('\n'), "{refused}");
    assert!(refused.contains("\"arm64\\nxxx"), "{refused}");
    assert!(refused.contains("(1400006 bytes)"), "{refused}");
    // Characters, not bytes, are cut: never inside one.
    assert_eq!(shown(&"\u{e9}".repeat(60)), format!("\"{}…\" (120 bytes)", "\u{e9}".repeat(48)));
    assert_eq!(shown("amd64"), "\"amd64\"");
}
