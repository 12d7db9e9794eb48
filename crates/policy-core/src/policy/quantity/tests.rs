use super::*;
use proptest::prelude::*;
use rstest::rstest;
use serde_json::{Value, json};

use crate::document::Document;

use GpuCount::{Invalid, Whole};
use QuantityError::{Fractional, Malformed, Negative, TooLarge};

#[rstest]
// Plain integers and signs.
#[case("0", Whole(0))]
#[case("1", Whole(1))]
#[case("2", Whole(2))]
#[case("+3", Whole(3))]
#[case("0001", Whole(1))]
#[case("18446744073709551615", Whole(u64::MAX))]
// Zero forms.
#[case("-0", Whole(0))]
#[case("+0", Whole(0))]
#[case("0m", Whole(0))]
#[case("0.0", Whole(0))]
#[case("-0.000", Whole(0))]
#[case(".0", Whole(0))]
#[case("0.", Whole(0))]
#[case("0Ki", Whole(0))]
#[case("0e400", Whole(0))]
#[case("-0e-400", Whole(0))]
#[case("0e99999999999999999999999999", Whole(0))]
// Decimal point forms.
#[case("1.", Whole(1))]
#[case("1.0", Whole(1))]
#[case("1.000", Whole(1))]
#[case(".5k", Whole(500))]
#[case("0.5k", Whole(500))]
#[case("+.5k", Whole(500))]
#[case("1.5k", Whole(1500))]
#[case("2.000000000", Whole(2))]
// Decimal SI suffixes.
#[case("1000000000n", Whole(1))]
#[case("3000000000n", Whole(3))]
#[case("1000000u", Whole(1))]
#[case("2000m", Whole(2))]
#[case("1k", Whole(1_000))]
#[case("1M", Whole(1_000_000))]
#[case("1G", Whole(1_000_000_000))]
#[case("1T", Whole(1_000_000_000_000))]
#[case("1P", Whole(1_000_000_000_000_000))]
#[case("1E", Whole(1_000_000_000_000_000_000))]
#[case("18E", Whole(18_000_000_000_000_000_000))]
// Binary SI suffixes.
#[case("1Ki", Whole(1024))]
#[case("1Mi", Whole(1 << 20))]
#[case("1Gi", Whole(1 << 30))]
#[case("1Ti", Whole(1 << 40))]
#[case("1Pi", Whole(1 << 50))]
#[case("1Ei", Whole(1 << 60))]
#[case("15Ei", Whole(15 << 60))]
#[case("0.5Ki", Whole(512))]
#[case("0.125Ki", Whole(128))]
#[case("0.0009765625Ki", Whole(1))]
#[case("1.5Mi", Whole(3 << 19))]
// Exponents.
#[case("1e0", Whole(1))]
#[case("2E0", Whole(2))]
#[case("1e3", Whole(1000))]
#[case("1E3", Whole(1000))]
#[case("1e+3", Whole(1000))]
#[case("1e-0", Whole(1))]
#[case("10e-1", Whole(1))]
#[case("100e-2", Whole(1))]
#[case("1.5e1", Whole(15))]
#[case("1e19", Whole(10_000_000_000_000_000_000))]
#[case("1e0000000000000000000000000000000001", Whole(10))]
#[case("1000000000000000000000000000000000000000000e-42", Whole(1))]
#[case("18446744073709551615000m", Whole(u64::MAX))]
#[case("1844674407370955161500000000000000000000000000000e-29", Whole(u64::MAX))]
// Fractional.
#[case("500m", Invalid(Fractional))]
#[case("1500m", Invalid(Fractional))]
#[case("1001m", Invalid(Fractional))]
#[case("0.1", Invalid(Fractional))]
#[case(".5", Invalid(Fractional))]
#[case("1n", Invalid(Fractional))]
#[case("1u", Invalid(Fractional))]
#[case("1e-1", Invalid(Fractional))]
#[case("1e-400", Invalid(Fractional))]
#[case("1e-99999999999999999999999999", Invalid(Fractional))]
#[case("0.1Ki", Invalid(Fractional))]
#[case("0.0001Ki", Invalid(Fractional))]
#[case("0.00048828125Ki", Invalid(Fractional))]
// Negative.
#[case("-1", Invalid(Negative))]
#[case("-1Ki", Invalid(Negative))]
#[case("-500m", Invalid(Negative))]
#[case("-1e400", Invalid(Negative))]
#[case("-.5", Invalid(Negative))]
// Too large.
#[case("18446744073709551616", Invalid(TooLarge))]
#[case("16Ei", Invalid(TooLarge))]
#[case("19E", Invalid(TooLarge))]
#[case("1e20", Invalid(TooLarge))]
#[case("1e400", Invalid(TooLarge))]
#[case("1e99999999999999999999999999", Invalid(TooLarge))]
#[case("99999999999999999999999999999999999999999", Invalid(TooLarge))]
#[case("16384Pi", Invalid(TooLarge))]
#[case("1e19Ki", Invalid(Malformed))]
// Malformed.
#[case("abc", Invalid(Malformed))]
#[case("", Invalid(Malformed))]
#[case(" 1", Invalid(Malformed))]
#[case("1 ", Invalid(Malformed))]
#[case("1.2.3", Invalid(Malformed))]
#[case("1e", Invalid(Malformed))]
#[case("1E+", Invalid(Malformed))]
#[case("1e-", Invalid(Malformed))]
#[case("1e1.5", Invalid(Malformed))]
#[case("1ee1", Invalid(Malformed))]
#[case("Ki", Invalid(Malformed))]
#[case(".", Invalid(Malformed))]
#[case("+", Invalid(Malformed))]
#[case("-", Invalid(Malformed))]
#[case("-.", Invalid(Malformed))]
#[case("--1", Invalid(Malformed))]
#[case("+-1", Invalid(Malformed))]
#[case("1K", Invalid(Malformed))]
#[case("1ki", Invalid(Malformed))]
#[case("1KiB", Invalid(Malformed))]
#[case("1mi", Invalid(Malformed))]
#[case("1Kie3", Invalid(Malformed))]
#[case("1m0", Invalid(Malformed))]
#[case("0x10", Invalid(Malformed))]
#[case("1_000", Invalid(Malformed))]
#[case("1,000", Invalid(Malformed))]
#[case("\u{ff11}", Invalid(Malformed))]
#[case("1\n", Invalid(Malformed))]
#[case("NaN", Invalid(Malformed))]
#[case("inf", Invalid(Malformed))]
fn parses(#[case] input: &str, #[case] expected: GpuCount) {
    assert_eq!(GpuCount::parse(input), expected, "input {input:?}");
}

#[test]
fn length_cap() {
    let at_cap = "0".repeat(MAX_QUANTITY_LEN - 1) + "1";
    assert_eq!(GpuCount::parse(&at_cap), Whole(1));
    let over_cap = "0".repeat(MAX_QUANTITY_LEN) + "1";
    assert_eq!(GpuCount::parse(&over_cap), Invalid(Malformed));
}

#[test]
fn long_pathological_inputs_do_not_panic() {
    let nines = "9".repeat(MAX_QUANTITY_LEN);
    assert_eq!(GpuCount::parse(&nines), Invalid(TooLarge));
    let tiny = format!("0.{}1", "0".repeat(MAX_QUANTITY_LEN - 4));
    assert_eq!(GpuCount::parse(&tiny), Invalid(Fractional));
    let fives = format!("{}e-100", "5".repeat(MAX_QUANTITY_LEN - 5));
    assert_eq!(GpuCount::parse(&fives), Invalid(Fractional));
    let big_binary = format!("{}Ei", "1".repeat(MAX_QUANTITY_LEN - 2));
    assert_eq!(GpuCount::parse(&big_binary), Invalid(TooLarge));
}

#[rstest]
#[case(json!(0), Whole(0))]
#[case(json!(1), Whole(1))]
#[case(json!(u64::MAX), Whole(u64::MAX))]
#[case(json!(-1), Invalid(Negative))]
#[case(json!(i64::MIN), Invalid(Negative))]
#[case(json!(1.0), Whole(1))]
#[case(json!(4.0), Whole(4))]
#[case(json!(0.0), Whole(0))]
#[case(json!(-0.0), Whole(0))]
#[case(json!(1.5), Invalid(Fractional))]
#[case(json!(0.5), Invalid(Fractional))]
#[case(json!(-2.5), Invalid(Negative))]
#[case(json!(-2.0), Invalid(Negative))]
#[case(json!(1e30), Invalid(TooLarge))]
#[case(json!(18_446_744_073_709_551_616.0_f64), Invalid(TooLarge))]
#[case(json!(9_007_199_254_740_992.0_f64), Whole(9_007_199_254_740_992))]
#[case(json!("2"), Whole(2))]
#[case(json!("2000m"), Whole(2))]
#[case(json!("500m"), Invalid(Fractional))]
#[case(json!("-1"), Invalid(Negative))]
#[case(json!(" 1"), Invalid(Malformed))]
#[case(json!(true), Invalid(Malformed))]
#[case(json!(false), Invalid(Malformed))]
#[case(json!(null), Invalid(Malformed))]
#[case(json!({}), Invalid(Malformed))]
#[case(json!({"value": 1}), Invalid(Malformed))]
#[case(json!([]), Invalid(Malformed))]
#[case(json!([1]), Invalid(Malformed))]
fn from_json(#[case] value: Value, #[case] expected: GpuCount) {
    assert_eq!(GpuCount::from_json(Document::from_value(&value).root()), expected, "value {value}");
}

#[test]
fn from_json_raw_text() {
    let parse = |text: &str| {
        let value: Value = serde_json::from_str(text).expect("test JSON is valid");
        GpuCount::from_json(Document::from_value(&value).root())
    };
    assert_eq!(parse("1"), Whole(1));
    assert_eq!(parse("-0"), Whole(0));
    assert_eq!(parse("1e0"), Whole(1));
    assert_eq!(parse("18446744073709551615"), Whole(u64::MAX));
    assert_eq!(parse("18446744073709551616"), Invalid(TooLarge));
    assert_eq!(parse("1.25"), Invalid(Fractional));
}

#[rstest]
#[case(Whole(0), Some(0), true)]
#[case(Whole(1), Some(1), false)]
#[case(Whole(u64::MAX), Some(u64::MAX), false)]
#[case(Invalid(Malformed), None, false)]
#[case(Invalid(Negative), None, false)]
#[case(Invalid(Fractional), None, false)]
#[case(Invalid(TooLarge), None, false)]
fn accessors(#[case] count: GpuCount, #[case] whole: Option<u64>, #[case] zero: bool) {
    assert_eq!(count.whole(), whole);
    assert_eq!(count.is_zero(), zero);
}

#[rstest]
#[case("0")]
#[case("0m")]
#[case("0.0")]
#[case("-0")]
#[case("+0")]
#[case(".0")]
#[case("0Ki")]
#[case("0e5")]
fn zero_forms_are_zero(#[case] input: &str) {
    assert!(GpuCount::parse(input).is_zero(), "input {input:?}");
}

#[test]
fn zero_json_is_zero() {
    assert!(GpuCount::from_json(Document::from_value(&json!(0)).root()).is_zero());
    assert!(!GpuCount::from_json(Document::from_value(&json!(1)).root()).is_zero());
    assert!(!GpuCount::from_json(Document::from_value(&json!("500m")).root()).is_zero());
}

#[test]
fn error_messages() {
    assert_eq!(Malformed.to_string(), "is not a Kubernetes quantity");
    assert_eq!(Negative.to_string(), "is negative");
    assert_eq!(Fractional.to_string(), "is not a whole number");
    assert_eq!(TooLarge.to_string(), "is too large");
}

proptest! {
    #[test]
    fn any_u64_round_trips(n: u64) {
        prop_assert_eq!(GpuCount::parse(&n.to_string()), Whole(n));
        prop_assert_eq!(GpuCount::from_json(Document::from_value(&json!(n)).root()), Whole(n));
        prop_assert_eq!(GpuCount::from_json(Document::from_value(&json!(n.to_string())).root()), Whole(n));
    }

    #[test]
    fn milli_multiples_are_whole(n: u32) {
        prop_assert_eq!(GpuCount::parse(&format!("{n}000m")), Whole(u64::from(n)));
        prop_assert_eq!(GpuCount::parse(&format!("{n}e0")), Whole(u64::from(n)));
        prop_assert_eq!(GpuCount::parse(&format!("{n}E0")), Whole(u64::from(n)));
        prop_assert_eq!(GpuCount::parse(&format!("+{n}")), Whole(u64::from(n)));
        prop_assert_eq!(GpuCount::parse(&format!("{n}.0")), Whole(u64::from(n)));
    }

    #[test]
    fn binary_suffix_multiplies(n: u32) {
        prop_assert_eq!(GpuCount::parse(&format!("{n}Ki")), Whole(u64::from(n) << 10));
        prop_assert_eq!(GpuCount::parse(&format!("{n}Mi")), Whole(u64::from(n) << 20));
        prop_assert_eq!(GpuCount::parse(&format!("{n}Gi")), Whole(u64::from(n) << 30));
    }

    #[test]
    fn non_multiples_of_milli_are_fractional(n in 1u32..1000) {
        prop_assert_eq!(
            GpuCount::parse(&format!("{}m", n * 1000 + 1)),
            Invalid(Fractional)
        );
    }

    #[test]
    fn negative_nonzero_is_negative(n in 1u64..) {
        prop_assert_eq!(GpuCount::parse(&format!("-{n}")), Invalid(Negative));
    }

    /// The plain count's shortcut reads what the grammar reads,
    /// leading zeros and 20-digit counts included, and both read what
    /// u128 arithmetic reads.
    #[test]
    fn plain_counts_read_as_the_grammar_reads_them(s in "[0-9]{1,25}") {
        let wide: u128 = s.parse().map_err(|_| TestCaseError::fail("25 digits fit a u128"))?;
        let expected = u64::try_from(wide).map_err(|_| TooLarge);
        prop_assert_eq!(exact(&s), expected);
        prop_assert_eq!(parse_quantity(&s), exact(&s));
    }

    #[test]
    fn arbitrary_strings_never_panic(s in ".*") {
        let _ = GpuCount::parse(&s);
    }

    #[test]
    fn quantity_like_strings_never_panic(s in "[-+0-9.eEinumkKMGTP]{0,300}") {
        let count = GpuCount::parse(&s);
        if s.len() > MAX_QUANTITY_LEN {
            prop_assert_eq!(count, Invalid(Malformed));
        }
    }
}
