//! Structure-aware edits of an object's text: a subtree replaced or
//! removed, a field added, an env entry duplicated, a GPU count changed.

use super::*;

/// Small JSON values, cheap to generate (a recursive strategy is not).
pub fn small_json() -> impl Strategy<Value = Value> {
    let composite = vec![
        json!([]),
        json!({}),
        json!([null]),
        json!({"": null}),
        json!([{"name": NVD, "value": "all"}]),
        json!({"name": NVD, "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}),
        json!({"nvidia.com/gpu": "1"}),
        json!({"limits": {"nvidia.com/gpu": 1}, "requests": {"nvidia.com/gpu": 2}}),
        json!({"limits": {"nvidia.com/gpu": "1"}}),
        json!([{"name": "c", "resources": {"limits": {"nvidia.com/gpu": 1}}}]),
        json!({"nodeSelectorTerms": [{"matchExpressions": [
            {"key": MAJOR, "operator": "Gt", "values": ["9"]}]}]}),
        json!({"nodeSelectorTerms": [{}]}),
        json!([{"matchExpressions": null}]),
        json!({"matchExpressions": [{"key": MAJOR, "operator": "In", "values": []}]}),
        json!({"nodeAffinity": {REQUIRED: null}}),
        json!({MUTATIONS: "runtime-class", MIN_CC: "8.0"}),
        json!({MIN_CC: "99.99"}),
        json!([{"apiVersion": "apps/v1", "kind": "DaemonSet",
                "name": "nvidia-gpu-exporter", "controller": true}]),
        json!({"hostPath": {"path": "/dev/nvidia0"}, "name": "v"}),
        json!([{"name": "v", "mountPath": "/dev"}]),
        json!({"a": {"b": {"c": {"d": [[[[]]]]}}}}),
        json!(["\u{0}", "\u{7f}", "\u{10ffff}", "\\\"", "\u{2028}"]),
    ];
    // The likeliest first: a union generates the options before the
    // one it picks lazily, which costs.
    prop_oneof![
        3 => word().prop_map(Value::String),
        3 => prop::sample::select(composite),
        2 => quantity(),
        1 => Just(Value::Null),
        1 => any::<bool>().prop_map(Value::Bool),
        1 => any::<i64>().prop_map(|n| json!(n)),
        1 => any::<u64>().prop_map(|n| json!(n)),
        1 => any::<f64>()
            .prop_map(|f| serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)),
    ]
}

/// Keys and strings the policy reads, and some arbitrary ones.
pub fn word() -> impl Strategy<Value = String> {
    const WORDS: [&str; 24] = [
        "name",
        "value",
        "valueFrom",
        "env",
        "resources",
        "limits",
        "requests",
        "nvidia.com/gpu",
        "nvidia.com/mig-1g.5gb",
        "runtimeClassName",
        "nvidia",
        "affinity",
        "nodeSelectorTerms",
        "matchExpressions",
        "restartPolicy",
        "Always",
        "image",
        "annotations",
        "ownerReferences",
        "controller",
        NVD,
        MUTATIONS,
        MIN_CC,
        "all",
    ];
    prop_oneof![
        3 => pick(&WORDS).prop_map(str::to_owned),
        1 => prop::collection::vec(any::<char>(), 0..6).prop_map(String::from_iter),
    ]
}

/// GPU counts as the API server might let them through, and not.
pub fn quantity() -> impl Strategy<Value = Value> {
    prop::sample::select(vec![
        json!("1"),
        json!(1),
        json!(1.0),
        json!(1.5),
        json!(-0.0),
        json!(8),
        json!(9),
        json!(u64::MAX),
        json!(i64::MIN),
        json!(1e300),
        json!("0"),
        json!("8"),
        json!("9"),
        json!("1.5"),
        json!("0.5"),
        json!(".5"),
        json!("1."),
        json!("1e3"),
        json!("1E0"),
        json!("1e-3"),
        json!("1k"),
        json!("1Ki"),
        json!("1M"),
        json!("1n"),
        json!("+1"),
        json!("-0"),
        json!("01"),
        json!(" 1"),
        json!("1 "),
        json!("1m"),
        json!("999m"),
        json!("1000m"),
        json!("8000m"),
        json!("9223372036854775807"),
        json!("9223372036854775808"),
        json!("18446744073709551616"),
        json!("1e308"),
        json!("1e309"),
        json!("0.000000001e9"),
        json!("1.0000000000000000001"),
        json!(""),
        json!("\u{661}"),
        json!("0x1"),
        json!("1_000"),
        json!("NaN"),
        json!("Infinity"),
        Value::Null,
        json!(true),
        json!([1]),
        json!({"value": 1}),
    ])
}

/// A change to the object; the index picks the node it applies to.
#[derive(Debug, Clone)]
pub enum Mutation {
    Replace(Index, Value),
    Remove(Index),
    /// Sets a field of an object (adds it or replaces its value).
    Set(Index, String, Value),
    /// Appends a copy of an env entry to its list, with value `all` if
    /// the flag is set.
    DuplicateEnv(Index, bool),
    /// Appends an `NVIDIA_VISIBLE_DEVICES` entry to a container's env.
    AddVisibleDevices(Index, Value),
    Quantity(Index, Value),
}

pub fn mutation() -> impl Strategy<Value = Mutation> {
    let devices = prop_oneof![
        pick(&["all", "void", "none", "0", "GPU-1234", "", "all,void"]).prop_map(|v| json!(v)),
        small_json(),
    ];
    prop_oneof![
        4 => (any::<Index>(), small_json()).prop_map(|(at, v)| Mutation::Replace(at, v)),
        4 => (any::<Index>(), quantity()).prop_map(|(at, v)| Mutation::Quantity(at, v)),
        2 => any::<Index>().prop_map(Mutation::Remove),
        2 => (any::<Index>(), word(), small_json())
            .prop_map(|(at, key, v)| Mutation::Set(at, key, v)),
        2 => (any::<Index>(), any::<bool>()).prop_map(|(at, all)| Mutation::DuplicateEnv(at, all)),
        2 => (any::<Index>(), devices).prop_map(|(at, v)| Mutation::AddVisibleDevices(at, v)),
    ]
}

/// Replace `range` of the base text with `text`.
pub struct Splice {
    pub range: Range<usize>,
    pub text: Vec<u8>,
}

pub fn replace(node: &Node, value: &Value) -> Splice {
    Splice { range: node.value.clone(), text: json_text(value) }
}

/// Appends to the array `node`, which is `array` in the base.
pub fn append(node: &Node, array: &[Value], value: &Value) -> Splice {
    let end = node.value.end - 1;
    let mut text = if array.is_empty() { Vec::new() } else { vec![b','] };
    write_json(&mut text, value);
    Splice { range: end..end, text }
}

/// Sets `key` of the object `node`, which is `map` in the base.
pub fn set(base: &Base, node: &Node, map: &Obj, key: &str, value: &Value) -> Splice {
    if let Some(member) = base.node(&format!("{}/{}", node.pointer, escape(key))) {
        return replace(member, value);
    }
    let start = node.value.start + 1;
    let mut text = Vec::new();
    write_str(&mut text, key);
    text.push(b':');
    write_json(&mut text, value);
    if !map.is_empty() {
        text.push(b',');
    }
    Splice { range: start..start, text }
}

pub fn splice_of(base: &Base, mutation: &Mutation) -> Option<Splice> {
    let node = |list: &[usize], at: &Index| -> Option<&Node> {
        (!list.is_empty()).then(|| &base.nodes[*at.get(list)])
    };
    // Any node but the root: the object stays an object.
    let below_root = |at: &Index| -> Option<&Node> {
        let count = base.nodes.len() - 1;
        (count > 0).then(|| &base.nodes[1 + at.index(count)])
    };
    match mutation {
        Mutation::Replace(at, value) => Some(replace(below_root(at)?, value)),
        Mutation::Remove(at) => {
            let node = below_root(at)?;
            Some(Splice { range: node.entry.clone(), text: Vec::new() })
        }
        Mutation::Set(at, key, value) => {
            let node = node(&base.objects, at)?;
            let map = base.object.pointer(&node.pointer)?.as_object()?;
            Some(set(base, node, map, key, value))
        }
        Mutation::DuplicateEnv(at, all) => {
            let node = node(&base.env_entries, at)?;
            let mut entry = base.object.pointer(&node.pointer)?.clone();
            if *all && let Some(map) = entry.as_object_mut() {
                map.insert("value".into(), json!("all"));
            }
            let parent = node.pointer.rsplit_once('/')?.0;
            let env = base.object.pointer(parent)?.as_array()?;
            Some(append(base.node(parent)?, env, &entry))
        }
        Mutation::AddVisibleDevices(at, value) => {
            let node = node(&base.containers, at)?;
            let container = base.object.pointer(&node.pointer)?.as_object()?;
            let entry = json!({"name": NVD, "value": value});
            match container.get("env") {
                Some(Value::Array(env)) => {
                    Some(append(base.node(&format!("{}/env", node.pointer))?, env, &entry))
                }
                _ => Some(set(base, node, container, "env", &json!([entry]))),
            }
        }
        Mutation::Quantity(at, value) => Some(replace(node(&base.quantities, at)?, value)),
    }
}

/// The base text with the splices that do not touch an earlier one (the
/// text stays valid JSON).
pub fn render(base: &Base, splices: Vec<Splice>) -> Vec<u8> {
    let mut kept: Vec<Splice> = Vec::new();
    for splice in splices {
        let touches = kept
            .iter()
            .any(|k| splice.range.start <= k.range.end && k.range.start <= splice.range.end);
        if !touches {
            kept.push(splice);
        }
    }
    kept.sort_by_key(|s| s.range.start);
    let mut out = Vec::with_capacity(base.text.len() + 256);
    let mut at = 0;
    for splice in kept {
        out.extend_from_slice(&base.text[at..splice.range.start]);
        out.extend_from_slice(&splice.text);
        at = splice.range.end;
    }
    out.extend_from_slice(&base.text[at..]);
    out
}
