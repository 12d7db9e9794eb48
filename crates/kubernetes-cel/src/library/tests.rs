//! Table tests of the Kubernetes CEL library, with the upstream cases.

use crate::activation::environment;
use cel::{Context, Value};

fn eval(expression: &str) -> Result<Value, String> {
    let env = environment().expect("environment");
    let program = env.compile(expression).map_err(|e| e.to_string())?;
    let context = Context::with_env(env.clone());
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
        (r#"quantity("50Mi").isGreaterThan(quantity("50M"))"#, t.clone()),
        (r#"quantity("150Mi").isGreaterThan(quantity("100Mi"))"#, t.clone()),
        (r#"quantity("50M").isGreaterThan(quantity("100M"))"#, f.clone()),
        (r#"quantity("200M").compareTo(quantity("0.2G"))"#, Value::Int(0)),
        (r#"quantity("50M").compareTo(quantity("50Mi"))"#, Value::Int(-1)),
        (r#"quantity("50Mi").compareTo(quantity("50M"))"#, Value::Int(1)),
        (r#"quantity("50k").add(quantity("20")) == quantity("50.02k")"#, t.clone()),
        (r#"quantity("50k").add(20).isLessThan(quantity("50020"))"#, f.clone()),
        (r#"quantity("50k").sub(quantity("20")) == quantity("49.98k")"#, t.clone()),
        (r#"quantity("50k").sub(20) == quantity("49980")"#, t.clone()),
        (r#"quantity("50k").add(20).sub(quantity("100k")).asInteger()"#, Value::Int(-49980)),
        (
            r#"quantity("50k").add(20).sub(quantity("100k")).sub(-50000).asInteger()"#,
            Value::Int(20),
        ),
        (r#"quantity("50k").asInteger()"#, Value::Int(50000)),
        (r#"quantity("9999999999999999999999999999999999999G").isInteger()"#, f.clone()),
        (r#"quantity("50").isInteger()"#, t.clone()),
        (r#"quantity("50.703k").asApproximateFloat()"#, Value::Float(50703.0)),
    ]);
    assert_errors(&[
        (r#"quantity("10Mo")"#, "quantities must match the regular expression"),
        (r#"quantity("10Mm")"#, "unable to parse quantity's suffix"),
        (
            r#"quantity("9999999999999999999999999999999999999G").asInteger()"#,
            "cannot convert value to integer",
        ),
        (r#"isQuantity([1, 2, 3])"#, "found no matching overload for 'isQuantity'"),
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
        (r#"quantity("50k").sub(20000).asApproximateFloat() == 30000.0"#, t.clone()),
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
        // `sign` is a function upstream (`cel.Overload("quantity_sign")`),
        // whatever its documentation shows.
        (r#"sign(quantity("-0.0000001m"))"#, Value::Int(-1)),
        (r#"sign(quantity("0"))"#, Value::Int(0)),
        (r#"sign(quantity("3"))"#, Value::Int(1)),
        (r#"quantity("922337203685477580").asInteger()"#, Value::Int(922_337_203_685_477_580)),
        // 19 digits exceed the 18 the int64 form takes when parsing.
        (r#"quantity("9223372036854775807").isInteger()"#, f.clone()),
        (r#"quantity("900000000000000000").add(quantity("9E")).isInteger()"#, f.clone()),
        (r#"quantity("16Ei") == quantity("9223372036854775807")"#, t.clone()),
        (r#"quantity("1e999999999").isGreaterThan(quantity("1Ei"))"#, t.clone()),
        (r#"quantity("1.5").asApproximateFloat()"#, Value::Float(1.5)),
    ]);
    assert_errors(&[
        (r#"quantity("Three")"#, "quantities must match"),
        // The API server refuses the method form when a policy is created.
        (r#"quantity("3").sign()"#, "sign"),
    ]);
}

/// `jsonpatch.escapeKey`: the example of
/// `k8s.io/apiserver/pkg/cel/library/jsonpatch.go`, and the replacer's
/// single pass (`/` to `~1`, `~` to `~0`) on text holding both.
#[test]
fn jsonpatch_escape_key() {
    let s = |v: &str| Value::String(v.to_owned().into());
    assert_cases(&[
        (
            r#""/metadata/labels/" + jsonpatch.escapeKey('k8s.io/my~label')"#,
            s("/metadata/labels/k8s.io~1my~0label"),
        ),
        (r#"jsonpatch.escapeKey("no-escaping")"#, s("no-escaping")),
        (r#"jsonpatch.escapeKey("~/~1")"#, s("~0~1~01")),
    ]);
}

/// cel-go's `ext.Strings`, which the Kubernetes environment includes: the
/// `stringTests` table of `github.com/google/cel-go/ext/strings_test.go`
/// (its parse-only no-overload cases aside), plus `lowerAscii`, `join` and
/// the standard `startsWith`/`endsWith`/`contains`/`matches`.
#[test]
fn strings_extension() {
    let holds = [
        r#"'tacocat'.charAt(3) == 'o'"#,
        r#"'tacocat'.charAt(7) == ''"#,
        r#"'©αT'.charAt(0) == '©' && '©αT'.charAt(1) == 'α' && '©αT'.charAt(2) == 'T'"#,
        r#"'tacocat'.indexOf('') == 0"#,
        r#"'tacocat'.indexOf('ac') == 1"#,
        r#"'tacocat'.indexOf('none') == -1"#,
        r#"'tacocat'.indexOf('', 3) == 3"#,
        r#"'tacocat'.indexOf('a', 3) == 5"#,
        r#"'tacocat'.indexOf('at', 3) == 5"#,
        r#"'ta©o©αT'.indexOf('©') == 2"#,
        r#"'ta©o©αT'.indexOf('©', 3) == 4"#,
        r#"'ta©o©αT'.indexOf('©αT', 3) == 4"#,
        r#"'ta©o©αT'.indexOf('©α', 5) == -1"#,
        r#"'ijk'.indexOf('k') == 2"#,
        r#"'hello wello'.indexOf('hello wello') == 0"#,
        r#"'hello wello'.indexOf('ello', 6) == 7"#,
        r#"'hello wello'.indexOf('elbo room!!') == -1"#,
        r#"'hello wello'.indexOf('elbo room!!!') == -1"#,
        r#"'tacocat'.lastIndexOf('') == 7"#,
        r#"'tacocat'.lastIndexOf('at') == 5"#,
        r#"'tacocat'.lastIndexOf('none') == -1"#,
        r#"'tacocat'.lastIndexOf('', 3) == 3"#,
        r#"'tacocat'.lastIndexOf('a', 3) == 1"#,
        r#"'ta©o©αT'.lastIndexOf('©') == 4"#,
        r#"'ta©o©αT'.lastIndexOf('©', 3) == 2"#,
        r#"'ta©o©αT'.lastIndexOf('©α', 4) == 4"#,
        r#"'hello wello'.lastIndexOf('ello', 6) == 1"#,
        r#"'hello wello'.lastIndexOf('low') == -1"#,
        r#"'hello wello'.lastIndexOf('elbo room!!') == -1"#,
        r#"'hello wello'.lastIndexOf('elbo room!!!') == -1"#,
        r#"'hello wello'.lastIndexOf('hello wello') == 0"#,
        r#"'bananananana'.lastIndexOf('nana', 8) == 8"#,
        r#""12 days 12 hours".replace("{0}", "2") == "12 days 12 hours""#,
        r#""{0} days {0} hours".replace("{0}", "2") == "2 days 2 hours""#,
        r#""{0} days {0} hours".replace("{0}", "2", 1).replace("{0}", "23") == "2 days 23 hours""#,
        r#""1 ©αT taco".replace("αT", "o©α") == "1 ©o©α taco""#,
        r#""hello world".split(" ") == ["hello", "world"]"#,
        r#""hello world events!".split(" ", 0) == []"#,
        r#""hello world events!".split(" ", 1) == ["hello world events!"]"#,
        r#""o©o©o©o".split("©", -1) == ["o", "o", "o", "o"]"#,
        r#""tacocat".substring(4) == "cat""#,
        r#""tacocat".substring(7) == """#,
        r#""tacocat".substring(0, 4) == "taco""#,
        r#""tacocat".substring(4, 4) == """#,
        r#"'ta©o©αT'.substring(2, 6) == "©o©α""#,
        r#"'ta©o©αT'.substring(7, 7) == """#,
        r#"" \f\n\r\t\vtext  ".trim() == "text""#,
        r#""\u0085\u00a0\u1680text".trim() == "text""#,
        r#""text\u2000\u2001\u2002\u2003\u2004\u2004\u2006\u2007\u2008\u2009".trim() == "text""#,
        r#""\u200atext\u2028\u2029\u202F\u205F\u3000".trim() == "text""#,
        r#""\u180etext\u200b\u200c\u200d\u2060\ufeff".trim() == "\u180etext\u200b\u200c\u200d\u2060\ufeff""#,
        r#"'TacoCat'.lowerAscii() == 'tacocat'"#,
        r#"'TacoCÆt Xii'.lowerAscii() == 'tacocÆt xii'"#,
        r#"['x', 'y'].join() == 'xy'"#,
        r#"['x', 'y'].join('-') == 'x-y'"#,
        r#"'nvidia.com/gpu'.startsWith('nvidia.com/') && 'a.b'.endsWith('.b') && 'abc'.contains('b')"#,
        r#"'nvidia.com/gpu'.matches('^nvidia\\.com/')"#,
    ];
    let cases: Vec<(&str, Value)> = holds.into_iter().map(|e| (e, Value::Bool(true))).collect();
    assert_cases(&cases);
    assert_errors(&[
        (r#"'tacocat'.charAt(30) == ''"#, "index out of range: 30"),
        (r#"'tacocat'.indexOf('a', 30) == -1"#, "index out of range: 30"),
        (r#"'tacocat'.lastIndexOf('a', -1) == -1"#, "index out of range: -1"),
        (r#"'tacocat'.lastIndexOf('a', 30) == -1"#, "index out of range: 30"),
        (r#""tacocat".substring(40) == "cat""#, "index out of range: 40"),
        (r#""tacocat".substring(-1) == "cat""#, "index out of range: -1"),
        (r#""tacocat".substring(1, 50) == "cat""#, "index out of range: 50"),
        (r#""tacocat".substring(49, 50) == "cat""#, "index out of range: 49"),
        (r#""tacocat".substring(4, 3) == """#, "invalid substring range. start: 4, end: 3"),
        (r#"42.charAt(2) == """#, "no matching overload"),
    ]);
}

/// The examples of the lists library's documentation
/// (`k8s.io/apiserver/pkg/cel/library/lists.go`, the doc comment of
/// `Lists`) for the functions offered, then the overflow and string cases
/// its implementation implies (cel-go's `Int.Add` overflow error; `indexOf`
/// by equality on any type).
#[test]
fn lists_upstream_table() {
    assert_cases(&[
        // Upstream's examples.
        ("[1, 3].sum()", Value::Int(4)),
        ("[1.0, 3.0].sum()", Value::Float(4.0)),
        ("[].sum()", Value::Int(0)),
        ("[1, 3].min()", Value::Int(1)),
        ("[1, 3].max()", Value::Int(3)),
        ("[1].min()", Value::Int(1)),
        ("([0] + []).min()", Value::Int(0)),
        ("[1, 2, 2, 3].indexOf(2)", Value::Int(1)),
        ("['a', 'b', 'b', 'c'].lastIndexOf('b')", Value::Int(2)),
        ("[1.0].indexOf(1.1)", Value::Int(-1)),
        ("[].indexOf('string')", Value::Int(-1)),
        // What the policies need besides: names, and the strings
        // extension's own indexOf left alone.
        ("['init', 'side'].indexOf('side')", Value::Int(1)),
        ("'abc'.indexOf('c')", Value::Int(2)),
    ]);
    // cel-go's ext.Lists (Kubernetes 1.34+): its examples.
    let ints =
        |v: &[i64]| Value::List(std::sync::Arc::new(v.iter().map(|i| Value::Int(*i)).collect()));
    assert_cases(&[
        ("[1, [2, 3], [4]].flatten()", ints(&[1, 2, 3, 4])),
        ("[1, 2, [], [], [3, 4]].flatten()", ints(&[1, 2, 3, 4])),
        ("[[1, [2]]].flatten() == [1, [2]]", Value::Bool(true)),
        ("lists.range(4)", ints(&[0, 1, 2, 3])),
        ("lists.range(0)", ints(&[])),
    ]);
    assert_errors(&[
        ("[].min()", "empty list"),
        ("[].max()", "empty list"),
        ("[9223372036854775807, 1].sum()", "overflow"),
    ]);
}
