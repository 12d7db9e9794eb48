//! Table tests of the Kubernetes CEL library, with the upstream cases.

use super::activation::environment;
use cel::{Context, Value};

fn eval(expression: &str) -> Result<Value, String> {
    let env = environment().expect("environment");
    let program = env.compile(expression).map_err(|e| e.to_string())?;
    let context = Context::with_env(env.0.clone());
    program.execute(&context).map_err(|e| e.to_string())
}

fn assert_cases(cases: &[(&str, Value)]) {
    for (expression, expected) in cases {
        assert_eq!(eval(expression).as_ref(), Ok(expected), "{expression}");
    }
}

fn assert_errors(cases: &[(&str, &str)]) {
    for (expression, pattern) in cases {
        match eval(expression) {
            Err(e) => assert!(e.contains(pattern), "{expression}: {e}"),
            Ok(v) => panic!("{expression}: expected an error, got {v:?}"),
        }
    }
}

/// The cases of `TestQuantity` in
/// `k8s.io/apiserver/pkg/cel/library/quantity_test.go` (all but `mul`,
/// `div` and `divInt`, which this library does not offer; the compile-time
/// overload error is a runtime one here).
#[test]
fn quantity_upstream_table() {
    let t = Value::Bool(true);
    let f = Value::Bool(false);
    assert_cases(&[
        (r#"quantity("12Mi") == quantity("12582912")"#, t.clone()),
        (r#"isQuantity("20")"#, t.clone()),
        (r#"isQuantity("20M")"#, t.clone()),
        (r#"isQuantity("20Mi")"#, t.clone()),
        (r#"isQuantity("20Mo")"#, f.clone()),
        (r#"isQuantity("10Mm")"#, f.clone()),
        (r#"quantity("200M") == quantity("200M")"#, t.clone()),
        (
            r#"quantity("200M") == quantity("0.2G") && quantity("0.2G") == quantity("200M")"#,
            t.clone(),
        ),
        (
            r#"quantity("2M") == quantity("0.002G") && quantity("2000k") == quantity("2M") && quantity("0.002G") == quantity("2000k")"#,
            t.clone(),
        ),
        (r#"quantity("200M") == quantity("0.3G")"#, f.clone()),
        (r#"quantity("50M").isLessThan(quantity("50Mi"))"#, t.clone()),
        (r#"quantity("50M").isLessThan(quantity("100M"))"#, t.clone()),
        (r#"quantity("100M").isLessThan(quantity("50M"))"#, f.clone()),
        (
            r#"quantity("50Mi").isGreaterThan(quantity("50M"))"#,
            t.clone(),
        ),
        (
            r#"quantity("150Mi").isGreaterThan(quantity("100Mi"))"#,
            t.clone(),
        ),
        (
            r#"quantity("50M").isGreaterThan(quantity("100M"))"#,
            f.clone(),
        ),
        (
            r#"quantity("200M").compareTo(quantity("0.2G"))"#,
            Value::Int(0),
        ),
        (
            r#"quantity("50M").compareTo(quantity("50Mi"))"#,
            Value::Int(-1),
        ),
        (
            r#"quantity("50Mi").compareTo(quantity("50M"))"#,
            Value::Int(1),
        ),
        (
            r#"quantity("50k").add(quantity("20")) == quantity("50.02k")"#,
            t.clone(),
        ),
        (
            r#"quantity("50k").add(20).isLessThan(quantity("50020"))"#,
            f.clone(),
        ),
        (
            r#"quantity("50k").sub(quantity("20")) == quantity("49.98k")"#,
            t.clone(),
        ),
        (r#"quantity("50k").sub(20) == quantity("49980")"#, t.clone()),
        (
            r#"quantity("50k").add(20).sub(quantity("100k")).asInteger()"#,
            Value::Int(-49980),
        ),
        (
            r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()"#,
            Value::Int(20),
        ),
        (r#"quantity("50k").asInteger()"#, Value::Int(50000)),
        (
            r#"quantity("9999999999999999999999999999999999999G").isInteger()"#,
            f.clone(),
        ),
        (r#"quantity("50").isInteger()"#, t.clone()),
        (
            r#"quantity("50.703k").asApproximateFloat()"#,
            Value::Float(50703.0),
        ),
    ]);
    assert_errors(&[
        (
            r#"quantity("10Mo")"#,
            "quantities must match the regular expression",
        ),
        (r#"quantity("10Mm")"#, "unable to parse quantity's suffix"),
        (
            r#"quantity("9999999999999999999999999999999999999G").asInteger()"#,
            "cannot convert value to integer",
        ),
        (
            r#"isQuantity([1, 2, 3])"#,
            "found no matching overload for 'isQuantity'",
        ),
    ]);
}

/// The examples of the library's documentation in
/// `k8s.io/apiserver/pkg/cel/library/quantity.go`, and apimachinery's
/// parsing (`k8s.io/apimachinery/pkg/api/resource/quantity.go`): the int64
/// form holds `2`, `2e0` and `1Ki` as integers, `2000m` at scale -3 does
/// not (`AsInt64` refuses negative scales), nor do 19 digits or an int64
/// overflow in `add`, an exponent beyond 10^-9 takes
/// the `inf.Dec` form (never an integer), and `-0.0000001m` (-10^-10) rounds away from zero to `-1n`.
#[test]
fn quantity_documented_examples_and_parsing() {
    let t = Value::Bool(true);
    let f = Value::Bool(false);
    assert_cases(&[
        (r#"isQuantity('1.3G')"#, t.clone()),
        (r#"isQuantity('1.3Gi')"#, t.clone()),
        (r#"isQuantity('1,3G')"#, f.clone()),
        (r#"isQuantity('10000k')"#, t.clone()),
        (r#"isQuantity('200K')"#, f.clone()),
        (r#"isQuantity('Three')"#, f.clone()),
        (r#"isQuantity('')"#, f.clone()),
        (r#"isQuantity('1e')"#, f.clone()),
        (r#"quantity("50000000G").isInteger()"#, t.clone()),
        (r#"quantity("50k").isInteger()"#, t.clone()),
        (
            r#"quantity("50k").sub(20000).asApproximateFloat() == 30000.0"#,
            t.clone(),
        ),
        (
            r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000) == quantity("20")"#,
            t.clone(),
        ),
        (r#"quantity("2").asInteger()"#, Value::Int(2)),
        (r#"quantity("2e0").asInteger()"#, Value::Int(2)),
        (r#"quantity("2E3").asInteger()"#, Value::Int(2000)),
        (r#"quantity("1Ki").asInteger()"#, Value::Int(1024)),
        (r#"quantity("+1.5k").asInteger()"#, Value::Int(1500)),
        (r#"quantity("2000m").isInteger()"#, f.clone()),
        (r#"quantity("2000m") == quantity("2")"#, t.clone()),
        (r#"quantity("1e-10").isInteger()"#, f.clone()),
        (r#"quantity("1e-10") == quantity("1n")"#, t.clone()),
        (r#"quantity("-0.0000001m") == quantity("-1n")"#, t.clone()),
        (r#"quantity("-0.0000001m").sign()"#, Value::Int(-1)),
        (r#"quantity("0").sign()"#, Value::Int(0)),
        (r#"quantity("3").sign()"#, Value::Int(1)),
        (
            r#"quantity("922337203685477580").asInteger()"#,
            Value::Int(922_337_203_685_477_580),
        ),
        // 19 digits exceed the 18 the int64 form takes when parsing.
        (r#"quantity("9223372036854775807").isInteger()"#, f.clone()),
        (
            r#"quantity("900000000000000000").add(quantity("9E")).isInteger()"#,
            f.clone(),
        ),
        (
            r#"quantity("16Ei") == quantity("9223372036854775807")"#,
            t.clone(),
        ),
        (
            r#"quantity("1e999999999").isGreaterThan(quantity("1Ei"))"#,
            t.clone(),
        ),
        (r#"quantity("1.5").asApproximateFloat()"#, Value::Float(1.5)),
    ]);
    assert_errors(&[(r#"quantity("Three")"#, "quantities must match")]);
}

/// `jsonpatch.escapeKey`, with the cases of
/// `k8s.io/apiserver/pkg/cel/library/jsonpatch_test.go`.
#[test]
fn jsonpatch_escape_key() {
    let s = |v: &str| Value::String(v.to_owned().into());
    assert_cases(&[
        (
            r#"jsonpatch.escapeKey("k8s.io/my~label")"#,
            s("k8s.io~1my~0label"),
        ),
        (r#"jsonpatch.escapeKey("no-escaping")"#, s("no-escaping")),
        (r#"jsonpatch.escapeKey("~/~1")"#, s("~0~1~01")),
    ]);
}

/// The string functions of cel-go's `ext.Strings`, which the Kubernetes
/// environment includes, with cases of `github.com/google/cel-go/ext/strings_test.go`.
#[test]
fn strings_extension() {
    let t = Value::Bool(true);
    let cases: Vec<(&str, Value)> = [
        "'tacocat'.charAt(3) == 'o'",
        "'tacocat'.indexOf('') == 0",
        "'tacocat'.indexOf('ac') == 1",
        "'tacocat'.indexOf('none') == -1",
        "'tacocat'.indexOf('a', 3) == 5",
        "'ta©o©αT'.indexOf('©') == 2",
        "'tacocat'.lastIndexOf('at') == 5",
        "'TacoCat'.lowerAscii() == 'tacocat'",
        "'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'",
        "'{0} days {0} hours'.replace('{0}', '2') == '2 days 2 hours'",
        "'{0} days {0} hours'.replace('{0}', '2', 1).replace('{0}', '23') == '2 days 23 hours'",
        "'hello world'.split(' ') == ['hello', 'world']",
        "'hello world events!'.split(' ', 0) == []",
        "'hello world events!'.split(' ', 1) == ['hello world events!']",
        "'o©o©o©o'.split('©', -1) == ['o', 'o', 'o', 'o']",
        "'tacocat'.substring(4) == 'cat'",
        "'tacocat'.substring(0, 4) == 'taco'",
        "'ta©o©αT'.substring(2, 6) == '©o©α'",
        "' \\f\\n\\r\\t\\vtext  '.trim() == 'text'",
        "['x', 'y'].join() == 'xy'",
        "['x', 'y'].join('-') == 'x-y'",
        "'nvidia.com/gpu'.startsWith('nvidia.com/') && 'a.b'.endsWith('.b') && 'abc'.contains('b')",
        "'nvidia.com/gpu'.matches('^nvidia\\\\.com/')",
    ]
    .into_iter()
    .map(|e| (e, t.clone()))
    .collect();
    assert_cases(&cases);
    assert_errors(&[
        ("'tacocat'.charAt(30)", "index out of range: 30"),
        ("'tacocat'.substring(40)", "index out of range: 40"),
    ]);
}
