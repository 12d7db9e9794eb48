//! Tests of the semver library: the parser and precedence on their own,
//! and the CEL functions with the cases of upstream's `TestSemver`
//! (`k8s.io/apiserver/pkg/cel/library/semver_test.go`).

use super::{Semver, extension};
use cel::{Context, Env, Value};
use rstest::rstest;
use std::cmp::Ordering;
use std::sync::Arc;

fn eval(expression: &str) -> Result<Value, String> {
    let mut env = Env::stdlib();
    env.add_extension(extension).map_err(|e| e.to_string())?;
    let program = env.compile(expression).map_err(|e| e.to_string())?;
    let context = Context::with_env(Arc::new(env));
    program.execute(&context).map_err(|e| e.to_string())
}

fn v(s: &str) -> Semver {
    match Semver::parse(s) {
        Ok(v) => v,
        Err(e) => panic!("{s}: {e}"),
    }
}

/// `TestSemver`, all cases (the `version: 1` ones are the two-argument
/// overloads, always offered here); its compile-time overload error is an
/// evaluation error here.
#[rstest]
#[case::parse(r#"semver("1.2.3") == semver("1.2.3")"#, Value::Bool(true))]
#[case::is_semver(r#"isSemver("1.2.3-beta.1+build.1")"#, Value::Bool(true))]
#[case::is_semver_empty_false(r#"isSemver("")"#, Value::Bool(false))]
#[case::is_semver_v_prefix_false(r#"isSemver("v1.0.0")"#, Value::Bool(false))]
#[case::is_semver_leading_whitespace_false(r#"isSemver(" 1.0.0")"#, Value::Bool(false))]
#[case::is_semver_contains_whitespace_false(r#"isSemver("1. 0.0")"#, Value::Bool(false))]
#[case::is_semver_trailing_whitespace_false(r#"isSemver("1.0.0 ")"#, Value::Bool(false))]
#[case::is_semver_leading_zeros_false(r#"isSemver("01.01.01")"#, Value::Bool(false))]
#[case::is_semver_major_only_false(r#"isSemver("1")"#, Value::Bool(false))]
#[case::is_semver_major_minor_only_false(r#"isSemver("1.1")"#, Value::Bool(false))]
#[case::is_semver_empty_normalize_false(r#"isSemver("", true)"#, Value::Bool(false))]
#[case::is_semver_leading_whitespace_normalize_false(
    r#"isSemver(" 1.0.0", true)"#,
    Value::Bool(false)
)]
#[case::is_semver_contains_whitespace_normalize_false(
    r#"isSemver("1. 0.0", true)"#,
    Value::Bool(false)
)]
#[case::is_semver_trailing_whitespace_normalize_false(
    r#"isSemver("1.0.0 ", true)"#,
    Value::Bool(false)
)]
#[case::is_semver_v_prefix_normalize_true(r#"isSemver("v1.0.0", true)"#, Value::Bool(true))]
#[case::is_semver_leading_zeros_normalize_true(r#"isSemver("01.01.01", true)"#, Value::Bool(true))]
#[case::is_semver_major_only_normalize_true(r#"isSemver("1", true)"#, Value::Bool(true))]
#[case::is_semver_major_minor_only_normalize_true(r#"isSemver("1.1", true)"#, Value::Bool(true))]
#[case::is_semver_normalize_false_is_strict(r#"isSemver("v1.0.0", false)"#, Value::Bool(false))]
#[case::equality_normalize(r#"semver("v01.01", true) == semver("1.1.0")"#, Value::Bool(true))]
#[case::equality_reflexivity(r#"semver("1.2.3") == semver("1.2.3")"#, Value::Bool(true))]
#[case::equality_ignores_build(r#"semver("1.2.3+a") == semver("1.2.3+b")"#, Value::Bool(true))]
#[case::inequality(r#"semver("1.2.3") == semver("1.0.0")"#, Value::Bool(false))]
#[case::not_equal(r#"semver("1.2.3") != semver("1.0.0")"#, Value::Bool(true))]
#[case::semver_less(r#"semver("1.0.0").isLessThan(semver("1.2.3"))"#, Value::Bool(true))]
#[case::semver_less_false(r#"semver("1.0.0").isLessThan(semver("1.0.0"))"#, Value::Bool(false))]
#[case::semver_greater(r#"semver("1.2.3").isGreaterThan(semver("1.0.0"))"#, Value::Bool(true))]
#[case::semver_greater_false(
    r#"semver("1.0.0").isGreaterThan(semver("1.0.0"))"#,
    Value::Bool(false)
)]
#[case::compare_equal(r#"semver("1.2.3").compareTo(semver("1.2.3"))"#, Value::Int(0))]
#[case::compare_less(r#"semver("1.0.0").compareTo(semver("1.2.3"))"#, Value::Int(-1))]
#[case::compare_greater(r#"semver("1.2.3").compareTo(semver("1.0.0"))"#, Value::Int(1))]
#[case::compare_pre_release(r#"semver("1.0.0-rc.1").compareTo(semver("1.0.0"))"#, Value::Int(-1))]
#[case::major(r#"semver("1.2.3").major()"#, Value::Int(1))]
#[case::minor(r#"semver("1.2.3").minor()"#, Value::Int(2))]
#[case::patch(r#"semver("1.2.3").patch()"#, Value::Int(3))]
#[case::major_wraps_as_upstream(r#"semver("18446744073709551615.0.0").major()"#, Value::Int(-1))]
fn upstream_table(#[case] expression: &str, #[case] expected: Value) {
    assert_eq!(eval(expression), Ok(expected), "{expression}");
}

#[rstest]
#[case::parse_invalid_version(
    r#"semver("v1.0")"#,
    "Could not parse semver: unexpected character 'v' while parsing major version number"
)]
#[case::parse_empty(
    r#"semver("")"#,
    "Could not parse semver: empty string, expected a semver version"
)]
#[case::normalize_short_with_pre_release(
    r#"semver("1.0-rc1", true)"#,
    "short version cannot contain PreRelease/Build meta data"
)]
#[case::is_semver_no_overload("isSemver([1, 2, 3])", "found no matching overload for 'isSemver'")]
#[case::semver_against_int(r#"semver("1.0.0").isGreaterThan(1)"#, "isGreaterThan")]
fn errors(#[case] expression: &str, #[case] pattern: &str) {
    match eval(expression) {
        Err(e) => assert!(e.contains(pattern), "{expression}: {e}"),
        Ok(value) => panic!("{expression}: expected an error, got {value:?}"),
    }
}

/// The parser's messages, each for the part it names.
#[rstest]
#[case("1.2", "unexpected end of input while parsing minor version number")]
#[case("a.2.3", "unexpected character 'a' while parsing major version number")]
#[case("01.2.3", "invalid leading zero in major version number")]
#[case("1.02.3", "invalid leading zero in minor version number")]
#[case("1.2.03", "invalid leading zero in patch version number")]
#[case("1.2.x", "unexpected character 'x' while parsing patch version number")]
#[case(".2.3", "unexpected character '.' while parsing major version number")]
#[case("18446744073709551616.0.0", "value of major version number exceeds u64::MAX")]
#[case("1.2.3-", "empty identifier segment in pre-release identifier")]
#[case("1.2.3-a..b", "empty identifier segment in pre-release identifier")]
#[case("1.2.3-01", "invalid leading zero in pre-release identifier")]
#[case("1.2.3-a_b", "unexpected character '_' after pre-release identifier")]
#[case("1.2.3+", "empty identifier segment in build metadata")]
#[case("1.2.3+a!", "unexpected character '!' after build metadata")]
#[case("1.2.3-é", "empty identifier segment in pre-release identifier")]
#[case("١.2.3", "unexpected character '١' while parsing major version number")]
// blang reads numeric pre-release identifiers as uint64s.
#[case(
    "1.2.3-rc.18446744073709551616",
    r#"value of pre-release identifier "18446744073709551616" exceeds u64::MAX"#
)]
fn parse_errors(#[case] text: &str, #[case] reason: &str) {
    match Semver::parse(text) {
        Err(e) => {
            assert_eq!(e.reason(), reason, "{text}");
            assert_eq!(e.to_string(), format!("Could not parse semver: {reason}"));
        }
        Ok(v) => panic!("{text}: parsed as {v}"),
    }
}

#[rstest]
#[case("1.2.3", "1.2.3")]
#[case("0.0.0", "0.0.0")]
#[case("1.2.3-alpha.1+build.5", "1.2.3-alpha.1+build.5")]
#[case("1.2.3+build-1.x", "1.2.3+build-1.x")]
#[case("1.2.3-0.a-b.0x", "1.2.3-0.a-b.0x")]
// A `-` after the `+` belongs to the build metadata, not a pre-release.
#[case("1.2.3+a-b", "1.2.3+a-b")]
fn parse_round_trips(#[case] text: &str, #[case] expected: &str) {
    assert_eq!(v(text).to_string(), expected);
}

/// `normalizeAndParse`: `v` dropped, zeros trimmed, missing parts filled,
/// no whitespace trimmed.
#[rstest]
#[case("v1.2.3", Some("1.2.3"))]
#[case("1", Some("1.0.0"))]
#[case("v1.2", Some("1.2.0"))]
#[case("01.01.01", Some("1.1.1"))]
#[case("v01.01", Some("1.1.0"))]
#[case("00.0.000", Some("0.0.0"))]
#[case("1.0.00-alpha", Some("1.0.0-alpha"))]
#[case("1.2.3-rc.1+b", Some("1.2.3-rc.1+b"))]
#[case("vv1.0.0", None)]
#[case("V1.0.0", None)]
#[case(" 1.0.0", None)]
#[case("", None)]
#[case("v", None)]
#[case("1.0+b", None)]
#[case("1-rc", None)]
fn normalize(#[case] text: &str, #[case] expected: Option<&str>) {
    let parsed = Semver::parse_normalized(text).ok().map(|v| v.to_string());
    assert_eq!(parsed.as_deref(), expected, "{text:?}");
}

/// The precedence example of semver.org, item 11, in increasing order.
#[test]
fn precedence_follows_semver_2() {
    let ordered = [
        "1.0.0-alpha",
        "1.0.0-alpha.1",
        "1.0.0-alpha.beta",
        "1.0.0-beta",
        "1.0.0-beta.2",
        "1.0.0-beta.11",
        "1.0.0-rc.1",
        "1.0.0",
        "1.0.1",
        "1.1.0",
        "2.0.0",
        "10.0.0",
    ];
    for (i, a) in ordered.iter().enumerate() {
        for (j, b) in ordered.iter().enumerate() {
            assert_eq!(v(a).compare(&v(b)), i.cmp(&j), "{a} vs {b}");
        }
    }
}

#[test]
fn build_metadata_has_no_precedence() {
    assert_eq!(v("1.0.0+a").compare(&v("1.0.0+b")), Ordering::Equal);
    assert_eq!(v("1.0.0-rc+a"), v("1.0.0-rc+zzz"));
    assert_eq!(v("1.0.0-rc+a").compare(&v("1.0.0+a")), Ordering::Less);
}

#[test]
fn numbers_read_as_numbers() {
    let version = v("18446744073709551615.2.3");
    assert_eq!((version.major(), version.minor(), version.patch()), (u64::MAX, 2, 3));
    assert_eq!(v("1.0.0-9").compare(&v("1.0.0-10")), Ordering::Less);
    assert_eq!(v("1.0.0-9").compare(&v("1.0.0-a")), Ordering::Less);
}
