use super::*;

fn parts(text: &str) -> (bool, &str, Option<&str>, &str, Suffix<'_>) {
    let p = split(text).unwrap_or_else(|e| panic!("{text:?}: {e:?}"));
    (p.negative, p.integer, p.fraction, p.number, p.suffix)
}

#[test]
fn splits_the_grammar() {
    use Suffix::{Binary, Decimal, Exponent};
    assert_eq!(parts("1"), (false, "1", None, "1", Decimal(0)));
    assert_eq!(parts("-007.50m"), (true, "007", Some("50"), "-007.50", Decimal(-3)));
    assert_eq!(parts("+.5Ki"), (false, "", Some("5"), "+.5", Binary(10)));
    assert_eq!(parts("1.e-3"), (false, "1", Some(""), "1.", Exponent("-3")));
    assert_eq!(parts("2E+12"), (false, "2", None, "2", Exponent("+12")));
    // No digits: a quantity to upstream's scanner, not to a GPU count.
    assert!(!split("+").is_ok_and(|p| p.has_digits()));
    assert!(!split("Ki").is_ok_and(|p| p.has_digits()));
    assert!(split(".0").is_ok_and(|p| p.has_digits()));
}

#[test]
fn refuses_what_is_not_a_quantity() {
    for text in ["", " 1", "1 ", "1.2.3", "0x10", "1_000", "1e1.5", "1\n"] {
        assert_eq!(split(text), Err(SyntaxError::Format), "{text:?}");
    }
    for text in ["1K", "1ki", "1e", "1E+", "1ee1", "1Kie3", "1mi", "1Ki5", "1m0"] {
        assert_eq!(split(text), Err(SyntaxError::Suffix), "{text:?}");
    }
}
