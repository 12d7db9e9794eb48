//! Costs derived by hand from the upstream rules, for expressions over the
//! Pod of [`pod`].
//!
//! The sizes (`k8s.io/apiserver/pkg/cel/common/schemas.go`, a 3 MiB request):
//! - S = 3 MiB - 2 = 3,145,726: an unbounded string;
//! - N = S / (12 + 1) = 241,978: containers, env vars, volumes (smallest
//!   JSON `{"name":""}`, 12 bytes);
//! - M = S / (2 + 6) = 393,215: a map of strings (labels, limits).
//!
//! The costs (cel-go `checker/cost.go`, `common/cost.go`): an identifier or
//! a field selection 1, a literal 0, a list literal 10, a map literal 30, a
//! struct literal 40, most calls 1 plus their arguments; `&&` and `||` the
//! left side at least, both sides at most; `==` of strings ⌈min(size) ×
//! 0.1⌉ (at least 1 if neither side is empty), ⌈⌉ rounding every factor.
//! A comprehension costs its range, its start and its result once, and
//! (loop condition + step) per element: `all` has condition
//! `@not_strictly_false(@result)` = 2 and step `@result && p` = [1, 1 + p];
//! `exists` has condition `@not_strictly_false(!@result)` = 3 and step
//! `@result || p` = [1, 1 + p]; both have result `@result` = 1.

use rstest::rstest;

use super::*;

const S: u64 = MAX_REQUEST_SIZE_BYTES - 2;
const N: u64 = 241_978;
const M: u64 = 393_215;

#[test]
fn sizes_kubernetes_derives_for_unbounded_lists_maps_and_strings() {
    assert_eq!(S, 3_145_726);
    // {"name":""}: 2 + len("name") + 2 + 4.
    assert_eq!(object_min_serialized_size(&[("name", MIN_STRING_SIZE)]), 12);
    assert_eq!(max_list_items(12), N);
    assert_eq!(max_map_entries(MIN_STRING_SIZE), M);
    // volumeMounts require name and mountPath: 2 + 10 + 15 = 27 bytes.
    assert_eq!(object_min_serialized_size(&[("name", 2), ("mountPath", 2)]), 27);
    assert_eq!(max_list_items(27), 112_347);
}

#[rstest]
// A literal: 0.
#[case::literal("true", 0, 0)]
// object (1) .spec (1) .containers (1).
#[case::field_path("object.spec.containers", 3, 3)]
// has() costs nothing itself; its operand object.spec costs 2.
#[case::presence_test("has(object.spec.runtimeClassName)", 2, 2)]
// size(): 1 + 3; <= of ints: 1 + (4 + 0).
#[case::size_of_a_list("size(object.spec.containers) <= 8", 5, 5)]
// == : min(S, 3) = 3 → [⌈0.1⌉, ⌈0.3⌉] = [1, 1]; plus 3 + 0.
#[case::string_equals_a_literal("object.metadata.name == 'gpu'", 4, 4)]
// == of two unbounded strings: [1, ⌈S × 0.1⌉ = 314,573] + 3 + 3.
#[case::string_equals_a_string("object.metadata.name == object.metadata.namespace", 7, 314_579)]
// in over a literal list: its size 2 (factor 1) + 3 + list literal 10.
#[case::in_a_literal_list("object.spec.runtimeClassName in ['nvidia', 'nvidia-cdi']", 15, 15)]
// in over a map: O(1) = 1; + the map: containers[0] is _[_] = 1 + 3 + 0,
// .resources .limits 2 more = 6; + the literal 0: 7.
#[case::in_a_map("'nvidia.com/gpu' in object.spec.containers[0].resources.limits", 7, 7)]
// Target 3 × regex: ⌈(size + 1) × 0.1⌉ × ⌈8 × 0.25⌉ = [1 × 2, 314,573 × 2].
#[case::matches("object.metadata.name.matches('^[a-z]+$')", 5, 629_149)]
// + of strings: sizes [0, S] + [4, 4] → ⌈[4, S + 4] × 0.1⌉ = [1, 314,573]; + 3.
#[case::string_concatenation("object.metadata.name + '-gpu'", 4, 314_576)]
// all: range 3, start 0, result 1; per container: condition 2 + step
// [1, 1 + (c.name 2 + != 0 (min(S, 0) = 0))] = [3, 5].
// [3 + 1, 3 + 1 + N × 5].
#[case::all_over_containers("object.spec.containers.all(c, c.name != '')", 4, 1_209_894)]
// exists: per container 3 + [1, 1 + (c.image 2 + ⌈8 × 0.1⌉ = 1)] = [4, 7].
// [3 + 1, 3 + 1 + N × 7].
#[case::exists_starts_with(
    "object.spec.containers.exists(c, c.image.startsWith('nvcr.io/'))",
    4,
    1_693_850
)]
// Inner exists over env: range c.env 2, result 1; per var 3 + [1, 1 +
// (e.name 2 + [1, ⌈22 × 0.1⌉ = 3])] = [4, 9]: [3, 3 + N × 9 = 2,177,805].
// Outer: per container 3 + [1, 1 + 2,177,805]: [4, 4 + N × 2,177,809].
#[case::nested_exists(
    "object.spec.containers.exists(c, c.env.exists(e, e.name == 'NVIDIA_VISIBLE_DEVICES'))",
    4,
    526_981_866_206
)]
// exists_one over [1, 2, 3]: range 10 (size 3), start 0, condition true 0,
// result @result == 1 = 1 + 0 + 1 = 2; step x == 2 (1 + ⌈1 × 0.1⌉ = 2) ?
// @result + 1 (2) : @result (1) = [3, 4]. [10 + 2 + 3 × 3, 10 + 2 + 3 × 4].
#[case::exists_one_over_a_literal("[1, 2, 3].exists_one(x, x == 2)", 21, 24)]
// filter: range 3, start [] 10, condition 0, result 1; step p ? @result +
// [c] : @result with p = 3, @result + [c] = 1 + (10 + 1) + 1 = 13:
// [3 + 1, 3 + 13] = [4, 16]; filter = [14, 14 + N × 16 = 3,871,662], of at
// most N elements. all over it: per element [3, 5] as above:
// [14 + 1, 3,871,662 + 1 + N × 5].
#[case::filter_then_all(
    "object.spec.containers.filter(c, c.image.startsWith('nvcr.io/')).all(c, c.name != '')",
    15,
    5_081_553
)]
// all over a map's keys (strings of up to S): range 3, result 1; per label
// 2 + [1, 1 + (k 1 + ⌈11 × 0.1⌉ = 2)] = [3, 6]: [4, 4 + M × 6].
#[case::all_over_map_keys(
    "object.metadata.labels.all(k, k.startsWith('nvidia.com/'))",
    4,
    2_359_294
)]
// The limit value: containers[0] 4 + .resources .limits 2 + ['...'] (1 + 0)
// = 7; quantity(): ⌈[0, S] × 0.1⌉ + 7 = [7, 314,580]; quantity('0'): ⌈1 ×
// 0.1⌉ = 1; isGreaterThan: 1 + 1 + the target.
#[case::quantity_comparison(
    "quantity(object.spec.containers[0].resources.limits['nvidia.com/gpu']).isGreaterThan(quantity('0'))",
    9,
    314_582
)]
// == of two quantities: O(1) in Kubernetes' library: 1 + 1 + 1.
#[case::quantity_equality("quantity('1') == quantity('1')", 3, 3)]
// A MutatingAdmissionPolicy apply configuration: two struct literals
// (40 each) and a map literal (30) of literals (0).
#[case::apply_configuration(
    "Object{metadata: Object.metadata{labels: {'gpu-policy': 'checked'}}}",
    110,
    110
)]
// ?: the condition plus the costlier branch at most, the cheaper at least:
// has(...) is its operand object.metadata, 2; + [0 (''), 3 (the name)].
#[case::conditional("has(object.metadata.labels) ? object.metadata.name : ''", 2, 5)]
// || : at least the left side, at most both. Left: size() 1 + 3, == of
// ints 1 (sizes 1 and 1: ⌈0.1⌉) = 5. Right: all() over volumes as over
// containers, [4, 4 + N × 5].
#[case::or_short_circuits(
    "size(object.spec.volumes) == 0 || object.spec.volumes.all(v, v.name != '')",
    5,
    5 + 4 + N * 5
)]
// The functions of Kubernetes' libraries
// (k8s.io/apiserver/pkg/cel/library/cost.go) and conversions.
// split: the target 3 + ⌈[0, S] × 0.2⌉ = [0, 629,146].
#[case::split("object.metadata.name.split('/')", 3, 629_149)]
// The names: map over containers, range 3, start [] 10, result 1, per
// container the step @result + [c.name] = 1 + (10 + 2) + 1 = 14:
// [14, 14 + N × 14]. join: its size N × S + 2 × (N - 1) = 761,196,969,982
// characters at most, × 0.1 = 76,119,696,999.
#[case::join(
    "object.spec.containers.map(c, c.name).join(', ')",
    14,
    14 + N * 14 + 76_119_696_999
)]
// indexOf on a list of strings: per name 1 + ⌈[0, S] × 0.1⌉ = [1, 314,574],
// times [0, N] names, plus the names.
#[case::index_of_a_name(
    "object.spec.containers.map(c, c.name).indexOf('a')",
    14,
    14 + N * 14 + N * 314_574
)]
// sum over a list literal of 3 numbers: 10 + 3 × 1.
#[case::sum("[1, 2, 3].sum()", 13, 13)]
// max: 10 + 2 × 1; > of numbers: 1.
#[case::max("[1, 2].max() > 1", 13, 13)]
// string(int): 1 + size() (1 + 3), of at most 20 characters; + of
// strings: ⌈[2, 22] × 0.1⌉ = [1, 3], plus 0 + 5.
#[case::string_of_an_int("'n=' + string(size(object.spec.containers))", 6, 8)]
// int(string), O(1): 1 + 3; == of numbers 1.
#[case::int_of_a_string("int(object.metadata.name) == 1", 5, 5)]
// trim, lowerAscii: ⌈[0, S] × 0.1⌉ each, the second over the first's
// result; + 3; startsWith: ⌈7 × 0.1⌉ = 1.
#[case::trim_lower_starts_with(
    "object.metadata.name.trim().lowerAscii().startsWith('nvidia/')",
    4,
    3 + 314_573 * 2 + 1
)]
// The labels or an empty map: has() 2 + [3 (labels), 30 (the literal)];
// exists over [0, M] keys: result 1, per key 3 + [1, 1 + (k 1 + ⌈1 ×
// 0.1⌉ = 1)] = [4, 6].
#[case::labels_or_an_empty_map(
    "(has(object.metadata.labels) ? object.metadata.labels : {}).exists(k, k == 'a')",
    6,
    33 + 6 * M
)]
// A JSONPatch struct literal: 40 + its fields (0, 0, 3).
#[case::json_patch("JSONPatch{op: 'add', path: '/x', value: object.metadata.name}", 43, 43)]
// Objects compared: ⌈min(fields) × 0.1⌉ (an object of 7 fields is a map of
// 7 entries at run time) = 1, + 2 + 2.
#[case::objects_compared("object.spec != oldObject.spec", 5, 5)]
// namespaceObject and request: a null test 1 + 1; annotations in a map 1 +
// (namespaceObject.metadata.annotations 3); && at most both.
#[case::namespace_annotation(
    "namespaceObject != null && 'a' in namespaceObject.metadata.annotations",
    2,
    6
)]
// request.subResource 2; == of up to 19 characters: [⌈0.1⌉, ⌈1.9⌉] = [1, 2].
#[case::request_field("request.subResource == 'ephemeralcontainers'", 3, 4)]
fn estimates_match_the_upstream_rules(
    #[case] expression: &str,
    #[case] min: u64,
    #[case] max: u64,
) {
    assert_eq!(
        estimate(expression, &pod_policy_variables()),
        Ok(Bounds { min, max }),
        "{expression}"
    );
}

#[test]
fn the_per_call_limit_catches_an_all_over_unbounded_containers() {
    let variables = pod_policy_variables();
    let one_pass = estimate("object.spec.containers.all(c, c.name != '')", &variables);
    assert!(!one_pass.expect("estimates").within(PER_CALL_LIMIT));
    let counted = estimate("size(object.spec.containers) <= 8", &variables);
    assert!(counted.expect("estimates").within(PER_CALL_LIMIT));
}

#[test]
fn a_declared_bound_replaces_the_request_size() {
    // The same all() over a list of at most 8, the range an identifier (1):
    // [1 + 1, 1 + 1 + 8 × 5].
    let mut variables = Variables::new();
    variables.insert(
        "containers".to_owned(),
        Shape::List {
            len: Bounds::up_to(8),
            item: Box::new(Shape::object([("name", Shape::unbounded_string())])),
        },
    );
    assert_eq!(
        estimate("containers.all(c, c.name != '')", &variables),
        Ok(Bounds { min: 2, max: 42 })
    );
}

#[test]
fn the_policy_total_is_the_sum_against_the_runtime_budget() {
    let costs = [Bounds { min: 4, max: 6_000_000 }, Bounds { min: 1, max: 5_000_000 }];
    let sum = total(&costs);
    assert_eq!(sum, Bounds { min: 5, max: 11_000_000 });
    assert!(!sum.within(RUNTIME_COST_BUDGET));
    assert!(total(&costs[..1]).within(RUNTIME_COST_BUDGET));
}

#[test]
fn saturates_instead_of_overflowing() {
    // Three nested loops over N: past u64 only with unknown sizes; a Dyn
    // list has size up to u64::MAX and saturates.
    let mut variables = Variables::new();
    variables.insert("items".to_owned(), Shape::Dyn);
    let cost = estimate("items.all(x, items.all(y, x == y))", &variables).expect("estimates");
    assert_eq!(cost.max, u64::MAX);
}

#[rstest]
#[case::undeclared("foo == 1", CostError::UndeclaredVariable("foo".to_owned()))]
#[case::field_of_a_string(
    "object.metadata.name.first",
    CostError::NoField { field: "first".to_owned() }
)]
#[case::unknown_function(
    "object.metadata.name.reverse()",
    CostError::UnsupportedFunction("reverse".to_owned())
)]
fn what_it_cannot_estimate_is_an_error(#[case] expression: &str, #[case] error: CostError) {
    assert_eq!(estimate(expression, &pod_policy_variables()), Err(error));
}

#[test]
fn a_parse_error_is_reported() {
    assert!(matches!(
        estimate("object.spec.containers.all(c,", &pod_policy_variables()),
        Err(CostError::Parse(_))
    ));
}
