//! Tests of device selectors: the cases of upstream's `TestCEL`
//! (`k8s.io/dynamic-resource-allocation/cel/compile_test.go`) that do not
//! depend on costs or list-valued attributes, the default-empty domain
//! lookup, a device of the NVIDIA DRA driver, and hostile input.

use super::{AttributeValue, Device, DeviceSelector, MAX_EXPRESSION_BYTES, MAX_NESTING};
use crate::Quantity;
use proptest::prelude::*;
use rstest::rstest;
use serde_json::{Value as Json, json};

const DRIVER: &str = "dra.example.com";

/// What a case expects.
#[derive(Debug)]
enum Expect {
    Match(bool),
    /// The evaluation error contains this.
    MatchError(&'static str),
    /// The compile error contains this.
    CompileError(&'static str),
}
use Expect::{CompileError, Match, MatchError};

/// A device as upstream's table gives one: attributes and capacities by
/// qualified name, read as a ResourceSlice entry.
fn device(driver: &str, attributes: Json, capacity: Json) -> Device {
    Device::from_slice_device(
        driver,
        &json!({"name": "dev", "attributes": attributes, "capacity": capacity}),
    )
}

fn run(expression: &str, device: &Device) -> Result<Result<bool, String>, String> {
    DeviceSelector::compile(expression).map(|selector| selector.matches(device))
}

fn check(expression: &str, device: &Device, expect: &Expect) {
    match (run(expression, device), expect) {
        (Ok(Ok(matched)), Match(want)) => assert_eq!(matched, *want, "{expression}"),
        (Ok(Err(error)), MatchError(want)) | (Err(error), CompileError(want)) => {
            assert!(error.contains(want), "{expression}: {error:?} lacks {want:?}");
            assert!(!error.contains('\n'), "{expression}: not one line: {error:?}");
        }
        (outcome, _) => panic!("{expression}: expected {expect:?}, got {outcome:?}"),
    }
}

/// `TestCEL`, by upstream's case names. Left out: the cost cases
/// (`expensive`, and every `expectCost`), the list-valued attributes and
/// `includes` (the `DRAListTypeAttributes` feature, not supported), and the
/// feature-gated environments of `allowMultipleAllocations` (always on
/// here). `list-result-type-causes-match-error` needs a list attribute: a
/// map stands in for it below.
#[rstest]
#[case::match_true("true", json!({}), json!({}), Match(true))]
#[case::match_false("false", json!({}), json!({}), Match(false))]
#[case::syntax_error("?!", json!({}), json!({}), CompileError("Syntax error"))]
#[case::type_error("1", json!({}), json!({}), CompileError("must evaluate to bool or the unknown type, not int"))]
#[case::runtime_error_lookup_identifier(
    r#"device.attributes["no-such-domain"].noSuchAttr.isGreaterThan(quantity("0"))"#,
    json!({}), json!({}), MatchError("no such key: noSuchAttr")
)]
#[case::runtime_error_lookup_map(
    r#"device.attributes["no-such-domain"]["noSuchAttr"].isGreaterThan(quantity("0"))"#,
    json!({}), json!({}), MatchError("no such key: noSuchAttr")
)]
#[case::domain_check_negative(r#""no-such-domain" in device.attributes"#, json!({}), json!({}), Match(false))]
#[case::domain_check_positive(
    r#""dra.example.com" in device.attributes"#,
    json!({"dra.example.com/something": {"bool": true}}), json!({}), Match(true)
)]
#[case::driver_name_qualifier(
    r#"device.attributes["dra.example.com"].name"#,
    json!({"name": {"bool": true}}), json!({}), Match(true)
)]
#[case::driver_name_qualifier_map_lookup(
    r#"device.attributes["dra.example.com"]["name"]"#,
    json!({"name": {"bool": true}}), json!({}), Match(true)
)]
#[case::bind(
    r#"cel.bind(dra, device.attributes["dra.example.com"], dra.name)"#,
    json!({"name": {"bool": true}}), json!({}), Match(true)
)]
#[case::qualified_attribute_name(
    r#"device.attributes["other.example.com"].name"#,
    json!({"other.example.com/name": {"bool": true}}), json!({}), Match(true)
)]
#[case::bool(r#"device.attributes["dra.example.com"].name"#, json!({"name": {"bool": true}}), json!({}), Match(true))]
#[case::int(r#"device.attributes["dra.example.com"].name > 0"#, json!({"name": {"int": 1}}), json!({}), Match(true))]
#[case::string(
    r#"device.attributes["dra.example.com"].name == "fish""#,
    json!({"name": {"string": "fish"}}), json!({}), Match(true)
)]
// Upstream's message is cel-go's ("got 'types.Int', expected iterable
// type"); here it is the `cel` crate's, naming the type.
#[case::macro_exists_on_int(
    r#"device.attributes["dra.example.com"].name.exists(x, x > 0)"#,
    json!({"name": {"int": 1}}), json!({}), MatchError("int")
)]
#[case::macro_exists_on_string(
    r#"device.attributes["dra.example.com"].name.exists(x, x == "fish")"#,
    json!({"name": {"string": "fish"}}), json!({}), MatchError("string")
)]
#[case::macro_exists_on_version(
    r#"device.attributes["dra.example.com"].name.exists(x, x.isGreaterThan(semver("0.0.1")))"#,
    json!({"name": {"version": "1.0.0"}}), json!({}), MatchError("kubernetes.Semver")
)]
#[case::version(
    r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("0.0.1"))"#,
    json!({"name": {"version": "1.0.0"}}), json!({}), Match(true)
)]
#[case::version_v(
    r#"device.attributes["dra.example.com"].name.isGreaterThan(semver("v0.0.1", true)) && isSemver("v1.0.0", true)"#,
    json!({"name": {"version": "1.0.0"}}), json!({}), Match(true)
)]
#[case::quantity(
    r#"device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
    json!({}), json!({"name": {"value": "1Mi"}}), Match(true)
)]
#[case::check_positive(
    r#""name" in device.capacity["dra.example.com"] && device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
    json!({}), json!({"name": {"value": "1Mi"}}), Match(true)
)]
#[case::check_negative(
    r#"!("name" in device.capacity["dra.example.com"]) || device.capacity["dra.example.com"].name.isGreaterThan(quantity("1Ki"))"#,
    json!({}), json!({}), Match(true)
)]
#[case::all(
    r#"
device.capacity["dra.example.com"].quantity.isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"].bool &&
device.attributes["dra.example.com"].int > 0 &&
device.attributes["dra.example.com"].string == "fish" &&
device.attributes["dra.example.com"].version.isGreaterThan(semver("0.0.1")) &&
device.capacity["dra.example.com"]["quantity"].isGreaterThan(quantity("1Ki")) &&
device.attributes["dra.example.com"]["bool"] &&
device.attributes["dra.example.com"]["int"] > 0 &&
device.attributes["dra.example.com"]["string"] == "fish" &&
device.attributes["dra.example.com"]["version"].isGreaterThan(semver("0.0.1"))
"#,
    json!({"bool": {"bool": true}, "int": {"int": 1}, "string": {"string": "fish"}, "version": {"version": "1.0.0"}}),
    json!({"quantity": {"value": "1Mi"}}),
    Match(true)
)]
#[case::many(
    r#"device.attributes["dra.example.com"].a && device.attributes["dra.example.com"].b && device.attributes["dra.example.com"].c"#,
    json!({"a": {"bool": true}, "b": {"bool": true}, "c": {"bool": true}}), json!({}), Match(true)
)]
#[case::check_attribute_domains(
    r#"device.attributes.exists_one(x, x == "dra.example.com")"#,
    json!({"services": {"string": "some_example_value"}}), json!({}), Match(true)
)]
#[case::check_attribute_ids(
    r#"device.attributes["dra.example.com"].exists_one(x, x == "services")"#,
    json!({"services": {"string": "some_example_value"}}), json!({}), Match(true)
)]
#[case::split_attribute(
    r#"device.attributes["dra.example.com"].services.split("example").size() >= 2"#,
    json!({"services": {"string": "some_example_value"}}), json!({}), Match(true)
)]
#[case::regexp_attribute(
    r#"device.attributes["dra.example.com"].services.matches("[^a]?sym")"#,
    json!({"services": {"string": "asymetric"}}), json!({}), Match(true)
)]
#[case::check_capacity_domains(
    r#"device.capacity.exists_one(x, x == "dra.example.com")"#,
    json!({}), json!({"memory": {"value": "1Mi"}}), Match(true)
)]
#[case::check_capacity_ids(
    r#"device.capacity["dra.example.com"].exists_one(x, x == "memory")"#,
    json!({}), json!({"memory": {"value": "1Mi"}}), Match(true)
)]
#[case::list_result_type_causes_match_error(
    r#"device.attributes["dra.example.com"]"#,
    json!({"names": {"string": "fish"}}), json!({}),
    MatchError("CEL result of type map could not be converted to bool")
)]
fn upstream_table(
    #[case] expression: &str,
    #[case] attributes: Json,
    #[case] capacity: Json,
    #[case] expect: Expect,
) {
    check(expression, &device(DRIVER, attributes, capacity), &expect);
}

#[rstest]
#[case::empty_driver_name(r#"device.driver == """#, "", Match(true))]
#[case::real_driver_name(r#"device.driver == "dra.example.com""#, DRIVER, Match(true))]
#[case::other_driver_name(r#"device.driver == "dra.example.com""#, "gpu.nvidia.com", Match(false))]
fn driver_name(#[case] expression: &str, #[case] driver: &str, #[case] expect: Expect) {
    check(expression, &device(driver, json!({}), json!({})), &expect);
}

#[rstest]
#[case::allow_multiple_allocations("device.allowMultipleAllocations == true", Some(true))]
#[case::allow_multiple_allocations_default("device.allowMultipleAllocations == false", None)]
#[case::allow_multiple_allocations_false("device.allowMultipleAllocations == false", Some(false))]
fn allow_multiple_allocations(#[case] expression: &str, #[case] allow: Option<bool>) {
    let mut entry = json!({"name": "dev"});
    if let Some(allow) = allow {
        entry["allowMultipleAllocations"] = json!(allow);
    }
    let device = Device::from_slice_device(DRIVER, &entry);
    check(expression, &device, &Match(true));
}

/// A domain the device has nothing in is an empty map, whatever
/// expression names it; a name missing from a map is an error, except
/// under `has()` and `in`.
#[rstest]
#[case::computed_domain_is_empty(
    r#"size(device.attributes[device.driver + ".other"]) == 0"#,
    Match(true)
)]
#[case::computed_domain_found(
    r#"device.attributes["dra." + "example.com"].name == "x""#,
    Match(true)
)]
#[case::bound_domain_name(r#"cel.bind(d, "nowhere", d in device.attributes)"#, Match(false))]
#[case::empty_domain_equals_empty_map(r#"device.capacity["nowhere"] == {}"#, Match(true))]
#[case::computed_domain_missing_name(
    r#"device.capacity["no" + "where"].memory.isGreaterThan(quantity("1"))"#,
    MatchError("no such key: memory")
)]
#[case::has_present_name(r#"has(device.attributes["dra.example.com"].name)"#, Match(true))]
#[case::has_missing_name(r#"has(device.attributes["dra.example.com"].other)"#, Match(false))]
#[case::has_in_missing_domain(r#"has(device.attributes["nowhere"].name)"#, Match(false))]
// Upstream's `Find` never misses, and cel-go's `has()` asks it.
#[case::has_domain_is_always_true(r#"has(device.attributes.nowhere)"#, Match(true))]
#[case::in_present_name(r#""name" in device.attributes["dra.example.com"]"#, Match(true))]
#[case::in_missing_name(r#""other" in device.attributes["dra.example.com"]"#, Match(false))]
#[case::size_counts_present_domains(
    "size(device.attributes) == 1 && size(device.capacity) == 0",
    Match(true)
)]
#[case::missing_name_is_an_error(
    r#"device.attributes["dra.example.com"].other == "x""#,
    MatchError("no such key: other")
)]
#[case::optional_missing_name(
    r#"device.attributes["dra.example.com"].?other.orValue("y") == "y""#,
    Match(true)
)]
#[case::domains_equal_themselves(
    "device.attributes == device.attributes && device.capacity == {}",
    Match(true)
)]
#[case::domains_equal_a_literal(
    r#"device.attributes == {"dra.example.com": {"name": "x"}}"#,
    Match(true)
)]
#[case::domains_differ(r#"device.attributes == {"dra.example.com": {"name": "y"}}"#, Match(false))]
#[case::non_string_domain("device.attributes[1].name", MatchError("no such key: name"))]
fn domain_lookup(#[case] expression: &str, #[case] expect: Expect) {
    let device = device(DRIVER, json!({"name": {"string": "x"}}), json!({}));
    check(expression, &device, &expect);
}

#[rstest]
#[case::string_result(
    r#"device.driver"#,
    MatchError("CEL result of type string could not be converted to bool")
)]
#[case::int_result(
    "size(device.attributes)",
    MatchError("CEL result of type int could not be converted to bool")
)]
#[case::semver_result(
    r#"semver("1.0.0")"#,
    MatchError("CEL result of type kubernetes.Semver could not be converted to bool")
)]
#[case::list_literal("[true]", CompileError("must evaluate to bool or the unknown type, not list"))]
#[case::string_literal(r#""true""#, CompileError("not string"))]
#[case::undeclared_variable("other == 1", MatchError("other"))]
#[case::unknown_function("device.driver.frobnicate()", MatchError("frobnicate"))]
#[case::bad_semver(
    r#"semver("1.0") == semver("1.0.0")"#,
    MatchError(
        "Could not parse semver: unexpected end of input while parsing minor version number"
    )
)]
#[case::lists_range("lists.range(1000000000000).size() > 0", CompileError("lists.range"))]
#[case::bind_needs_an_identifier(r#"cel.bind("d", 1, true)"#, CompileError("simple identifiers"))]
#[case::multi_line_syntax_error("device.driver ==\n== 1", CompileError("compilation failed"))]
#[case::semver_and_quantity_overloads_coexist(
    r#"quantity("2").isGreaterThan(quantity("1")) && semver("2.0.0").isGreaterThan(semver("1.0.0")) && quantity("1").compareTo(quantity("1")) == semver("1.0.0").compareTo(semver("1.0.0+b"))"#,
    Match(true)
)]
#[case::strings_extension(r#"device.driver.upperAscii().startsWith("DRA")"#, Match(true))]
fn results_and_errors(#[case] expression: &str, #[case] expect: Expect) {
    check(expression, &device(DRIVER, json!({}), json!({})), &expect);
}

#[test]
fn an_expression_over_the_api_limit_does_not_compile() {
    let long = format!("true || {}", "a".repeat(MAX_EXPRESSION_BYTES));
    let error = DeviceSelector::compile(&long).map(|_| ()).unwrap_err();
    assert!(error.contains("too long"), "{error}");
}

#[test]
fn a_version_that_does_not_parse_fails_the_match() {
    let device = device(
        DRIVER,
        json!({"v": {"version": "1.0"}, "x.example.com/w": {"version": "v2"}}),
        json!({}),
    );
    check(
        "true",
        &device,
        &MatchError(
            "attribute v: parse semantic version: unexpected end of input while parsing minor version number",
        ),
    );
}

/// Deep trees: parsed on a thread of their own, evaluated on one when
/// deeper than the inline limit, refused beyond [`MAX_NESTING`]; never a
/// stack overflow of the caller (here a test thread, 2 MiB of stack).
#[rstest]
#[case::plus_chain_inline(8, Match(true))]
#[case::plus_chain_on_its_own_thread(60, Match(true))]
#[case::plus_chain_at_the_limit(MAX_NESTING - 2, Match(true))]
#[case::plus_chain_beyond_the_limit(MAX_NESTING - 1, CompileError("nests more than 100 levels"))]
#[case::plus_chain_of_ten_kib(5000, CompileError("nests more than 100 levels"))]
fn deep_sums(#[case] terms: usize, #[case] expect: Expect) {
    // `==` over a left-leaning chain of `terms` additions: `terms + 2` levels.
    let expression = format!("1{} == {}", "+1".repeat(terms), terms + 1);
    check(&expression, &Device::default(), &expect);
}

#[rstest]
#[case::selections(format!("device{} == 1", ".a".repeat(5000)))]
#[case::indexes(format!("device{} == 1", "[0]".repeat(3000)))]
#[case::conjunctions(format!("true{}", "&&true".repeat(1700)))]
#[case::negations(format!("{}true", "!".repeat(10000)))]
#[case::method_calls(format!("'a'{} == 'a'", ".lowerAscii()".repeat(780)))]
fn ten_kib_of_nesting_never_overflows(#[case] expression: String) {
    assert!(expression.len() <= MAX_EXPRESSION_BYTES);
    if let Ok(selector) = DeviceSelector::compile(&expression) {
        let _ = selector.matches(&nvidia_a100());
    }
}

#[test]
fn a_deep_selector_matches_on_its_own_thread() {
    // 40 nested conditionals: deeper than the inline limit, and deeper
    // than a 2 MiB stack evaluates.
    let expression = format!(
        "{}device.attributes[\"gpu.nvidia.com\"].type == \"gpu\"{}",
        "(true ? ".repeat(40),
        " : false)".repeat(40)
    );
    let selector = DeviceSelector::compile(&expression).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(selector.matches(&nvidia_a100()), Ok(true));
    assert_eq!(
        selector.matches(&Device::default()).map_err(|e| e.contains("no such key: type")),
        Err(true)
    );
}

/// A device of the NVIDIA DRA driver's ResourceSlice.
fn nvidia_a100() -> Device {
    let entry = json!({
        "name": "gpu-0",
        "attributes": {
            "architecture": {"string": "Ampere"},
            "cudaComputeCapability": {"version": "8.0.0"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "driverVersion": {"version": "580.126.20"},
            "productName": {"string": "NVIDIA A100-PCIE-40GB"},
            "resource.kubernetes.io/pciBusID": {"string": "0000:65:00.0"},
            "type": {"string": "gpu"},
            "index": {"int": 0},
            "listed": {"strings": ["a", "b"]}
        },
        "capacity": {
            "memory": {"value": "40Gi"},
            "broken": {"value": "forty"}
        }
    });
    Device::from_slice_device("gpu.nvidia.com", &entry)
}

#[test]
fn a_slice_device_is_read_by_domain() {
    let device = nvidia_a100();
    assert_eq!(device.driver, "gpu.nvidia.com");
    assert!(!device.allow_multiple_allocations);
    let domains: Vec<&str> = device.attributes.keys().map(String::as_str).collect();
    assert_eq!(domains, ["gpu.nvidia.com", "resource.kubernetes.io"]);
    let nvidia = &device.attributes["gpu.nvidia.com"];
    assert_eq!(nvidia.get("architecture"), Some(&AttributeValue::String("Ampere".to_owned())));
    assert_eq!(
        nvidia.get("driverVersion"),
        Some(&AttributeValue::Version("580.126.20".to_owned()))
    );
    assert_eq!(nvidia.get("index"), Some(&AttributeValue::Int(0)));
    // A list attribute is not supported: left out.
    assert_eq!(nvidia.get("listed"), None);
    assert_eq!(
        device.attributes["resource.kubernetes.io"].get("pciBusID"),
        Some(&AttributeValue::String("0000:65:00.0".to_owned()))
    );
    let capacity = &device.capacity["gpu.nvidia.com"];
    assert_eq!(capacity.len(), 1, "a capacity that is not a quantity is left out");
    assert_eq!(capacity.get("memory").and_then(Quantity::as_int64), Some(40 << 30));
}

#[rstest]
#[case::the_example(
    r#"device.driver == "gpu.nvidia.com" && device.attributes["gpu.nvidia.com"].cudaComputeCapability.compareTo(semver("7.5.0")) >= 0 && device.attributes["resource.kubernetes.io"].pciBusID == "0000:65:00.0" && device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("39Gi"))"#,
    Match(true)
)]
#[case::too_little_memory(
    r#"device.capacity["gpu.nvidia.com"].memory.isGreaterThan(quantity("80Gi"))"#,
    Match(false)
)]
#[case::hopper_or_later(
    r#"device.attributes["gpu.nvidia.com"].cudaComputeCapability.major() >= 9"#,
    Match(false)
)]
#[case::driver_release(
    r#"device.attributes["gpu.nvidia.com"].driverVersion.isGreaterThan(semver("580.0.0")) && device.attributes["gpu.nvidia.com"].driverVersion.minor() == 126"#,
    Match(true)
)]
#[case::product(
    r#"device.attributes["gpu.nvidia.com"].productName.contains("A100") && device.attributes["gpu.nvidia.com"].type == "gpu""#,
    Match(true)
)]
#[case::bound_domain(
    r#"cel.bind(gpu, device.attributes["gpu.nvidia.com"], gpu.architecture in ["Ampere", "Hopper"] && gpu.index == 0)"#,
    Match(true)
)]
#[case::unsupported_attribute(r#"has(device.attributes["gpu.nvidia.com"].listed)"#, Match(false))]
fn nvidia_selectors(#[case] expression: &str, #[case] expect: Expect) {
    check(expression, &nvidia_a100(), &expect);
}

#[test]
fn a_selector_is_reused_across_devices() {
    let selector = DeviceSelector::compile(r#"device.attributes["gpu.nvidia.com"].type == "gpu""#)
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(selector.expression(), r#"device.attributes["gpu.nvidia.com"].type == "gpu""#);
    assert_eq!(selector.matches(&nvidia_a100()), Ok(true));
    assert!(selector.matches(&Device::default()).is_err());
}

/// Fragments hostile expressions are made of.
fn fragment() -> impl Strategy<Value = &'static str> {
    prop::sample::select(vec![
        "device",
        ".",
        "attributes",
        "capacity",
        "driver",
        "[",
        "]",
        "(",
        ")",
        "\"dra.example.com\"",
        "\"x\"",
        "name",
        "has(",
        "cel.bind(",
        "size(",
        ",",
        " in ",
        " && ",
        " || ",
        "!",
        "==",
        "<",
        "+",
        "-",
        "*",
        "/",
        "%",
        "1",
        "-9223372036854775808",
        "18446744073709551615u",
        "1.5",
        "true",
        "null",
        "[]",
        "{}",
        "?",
        ":",
        ".?",
        "semver(",
        "isSemver(",
        "quantity(",
        "\"1.0.0\"",
        "\"v1\"",
        "\"1Ki\"",
        ".isGreaterThan(",
        ".compareTo(",
        ".major()",
        ".exists(x, ",
        ".map(x, ",
        ".all(x, ",
        "x",
        "int(",
        "string(",
        "dyn(",
        "type(",
        "'\\u0000'",
        "b\"\\xff\"",
        ".split(",
        ".substring(",
        "lists",
        ".range(",
        "optional.of(",
        ".orValue(",
    ])
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// Arbitrary text neither panics compiling nor evaluating.
    #[test]
    fn arbitrary_text_never_panics(expression in any::<String>()) {
        if let Ok(selector) = DeviceSelector::compile(&expression) {
            let _ = selector.matches(&nvidia_a100());
        }
    }

    /// Nor does text made of the language's own pieces, which gets further.
    #[test]
    fn arbitrary_fragments_never_panic(fragments in prop::collection::vec(fragment(), 0..24)) {
        let expression = fragments.concat();
        if let Ok(selector) = DeviceSelector::compile(&expression) {
            let _ = selector.matches(&nvidia_a100());
            let _ = selector.matches(&Device::default());
        }
    }

    /// Nor does an arbitrary device.
    #[test]
    fn arbitrary_devices_never_panic(
        driver in ".{0,12}",
        names in prop::collection::vec("[a-z./]{0,8}", 0..6),
        versions in prop::collection::vec(".{0,12}", 0..6),
    ) {
        let attributes: serde_json::Map<String, Json> = names
            .iter()
            .zip(&versions)
            .map(|(name, version)| (name.clone(), json!({"version": version})))
            .collect();
        let capacity: serde_json::Map<String, Json> = names
            .iter()
            .zip(&versions)
            .map(|(name, value)| (name.clone(), json!({"value": value})))
            .collect();
        let device = Device::from_slice_device(
            &driver,
            &json!({"attributes": attributes, "capacity": capacity}),
        );
        let selector = DeviceSelector::compile(
            "device.attributes.all(d, device.attributes[d].all(n, device.attributes[d][n] == semver(\"1.0.0\")))",
        );
        prop_assert!(selector.is_ok());
        if let Ok(selector) = selector {
            let _ = selector.matches(&device);
        }
    }
}

#[test]
fn a_selector_can_be_shared_between_threads() {
    fn shared<T: Send + Sync>() {}
    shared::<DeviceSelector>();
    shared::<Device>();
}
