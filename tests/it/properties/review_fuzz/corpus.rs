//! The objects the bodies are made from, read, generated and written out
//! once, with where each node is in the text.

use super::*;

/// A node of a written-out object.
pub struct Node {
    pub pointer: String,
    /// The value's bytes.
    pub value: Range<usize>,
    /// What removing the node from its parent removes: the member or
    /// element and one comma next to it.
    pub entry: Range<usize>,
    pub is_object: bool,
}

/// One object a case starts from: its compact JSON text and where each
/// node is in it.
pub struct Base {
    pub object: Value,
    pub text: Vec<u8>,
    /// `group`, `version`, `kind`, `resource` of the request.
    pub kind: [&'static str; 4],
    /// Every node, the root first.
    pub nodes: Vec<Node>,
    pub index: HashMap<String, usize>,
    /// Nodes that are objects, containers, env entries, resource
    /// quantities (indices into `nodes`).
    pub objects: Vec<usize>,
    pub containers: Vec<usize>,
    pub env_entries: Vec<usize>,
    pub quantities: Vec<usize>,
}

impl Base {
    pub fn new(object: Value) -> Self {
        let mut text = Vec::with_capacity(4096);
        let mut nodes = Vec::new();
        write_nodes(&mut text, &object, String::new(), 0..0, &mut nodes);
        let index: HashMap<String, usize> =
            nodes.iter().enumerate().map(|(i, node)| (node.pointer.clone(), i)).collect();
        let select = |keep: &dyn Fn(&Node, &str, &str) -> bool| -> Vec<usize> {
            nodes
                .iter()
                .enumerate()
                .filter(|(_, node)| {
                    let (parent, last) = node.pointer.rsplit_once('/').unwrap_or(("", ""));
                    keep(node, parent, last)
                })
                .map(|(i, _)| i)
                .collect()
        };
        let numbered = |last: &str| !last.is_empty() && last.bytes().all(|b| b.is_ascii_digit());
        let objects = select(&|node, _, _| node.is_object);
        let containers = select(&|_, parent, last| {
            numbered(last) && LISTS.iter().any(|list| parent.ends_with(&format!("/{list}")))
        });
        let env_entries = select(&|_, parent, last| numbered(last) && parent.ends_with("/env"));
        let quantities = select(&|_, parent, _| {
            parent.ends_with("/resources/limits") || parent.ends_with("/resources/requests")
        });
        Base {
            kind: request_kind(&object),
            object,
            text,
            nodes,
            index,
            objects,
            containers,
            env_entries,
            quantities,
        }
    }

    pub fn node(&self, pointer: &str) -> Option<&Node> {
        self.index.get(pointer).map(|&i| &self.nodes[i])
    }
}

/// Writes `value` as compact JSON (the text `serde_json::to_vec` writes,
/// several times faster in a debug build) and records its nodes.
pub fn write_nodes(
    out: &mut Vec<u8>,
    value: &Value,
    pointer: String,
    entry_start: Range<usize>,
    nodes: &mut Vec<Node>,
) {
    let start = out.len();
    let at = nodes.len();
    nodes.push(Node {
        pointer: pointer.clone(),
        value: start..start,
        entry: entry_start,
        is_object: value.is_object(),
    });
    let mut children: Vec<usize> = Vec::new();
    match value {
        Value::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                children.push(nodes.len());
                let here = out.len();
                write_nodes(out, item, format!("{pointer}/{i}"), here..here, nodes);
            }
            out.push(b']');
        }
        Value::Object(map) => {
            out.push(b'{');
            for (i, (key, item)) in map.iter().enumerate() {
                if i > 0 {
                    out.push(b',');
                }
                let here = out.len();
                write_str(out, key);
                out.push(b':');
                children.push(nodes.len());
                write_nodes(out, item, format!("{pointer}/{}", escape(key)), here..here, nodes);
            }
            out.push(b'}');
        }
        Value::String(s) => write_str(out, s),
        Value::Number(n) => out.extend_from_slice(n.to_string().as_bytes()),
        Value::Bool(true) => out.extend_from_slice(b"true"),
        Value::Bool(false) => out.extend_from_slice(b"false"),
        Value::Null => out.extend_from_slice(b"null"),
    }
    nodes[at].value.end = out.len();
    // An entry takes the comma before it, the first one the comma after
    // it (if any), so that the rest stays valid JSON.
    let count = children.len();
    for (i, child) in children.into_iter().enumerate() {
        let node = &mut nodes[child];
        let (from, to) = (node.entry.start, node.value.end);
        node.entry = match i {
            0 if count > 1 => from..to + 1,
            0 => from..to,
            _ => from - 1..to,
        };
    }
}

/// Compact JSON, as [`write_nodes`] writes it; the nodes are dropped
/// (the values written this way, a case's edits, are small).
pub fn write_json(out: &mut Vec<u8>, value: &Value) {
    write_nodes(out, value, String::new(), 0..0, &mut Vec::new());
}

pub fn write_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        serde_json::to_writer(&mut *out, s).expect("a string serialises");
    } else {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    }
}

pub fn json_text(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    write_json(&mut out, value);
    out
}

/// What the API server would put in `request.kind` and
/// `request.resource` for an object.
pub fn request_kind(object: &Value) -> [&'static str; 4] {
    let api_version = object["apiVersion"].as_str().unwrap_or("v1");
    let kind = object["kind"].as_str().unwrap_or("Pod");
    let group = api_version.rsplit_once('/').map_or("", |(group, _)| group);
    Workload::ALL
        .into_iter()
        .find(|w| w.group() == group && w.kind() == kind)
        .map(|w| [w.group(), "v1", w.kind(), w.resource()])
        .unwrap_or(match (api_version, kind) {
            ("v1", "Pod") => ["", "v1", "Pod", "pods"],
            ("v1", "Namespace") => ["", "v1", "Namespace", "namespaces"],
            _ => ["", "v1", "Service", "services"],
        })
}

pub struct Corpus {
    pub bases: Vec<Base>,
    /// One per combination of the namespace annotations [`case`] makes.
    pub namespace_settings: Vec<NamespaceSettings>,
}

/// The fixtures (and a pod for each workload fixture's template),
/// generated pods and workloads, and namespaces; read and generated once.
pub fn corpus() -> &'static Corpus {
    static CORPUS: OnceLock<Corpus> = OnceLock::new();
    CORPUS.get_or_init(|| {
        let mut objects: Vec<Value> = fixtures::objects().into_iter().map(|(_, o)| o).collect();
        let mut templates: Vec<Value> = objects
            .iter()
            .filter_map(|w| pod_of_workload(w, "abcde", "00000000-0000-0000-0000-000000000001"))
            .collect();
        objects.append(&mut templates);
        // Always the same pods (XorShift: ChaCha is slow in debug builds).
        let mut runner = TestRunner::new_with_rng(
            Config { rng_algorithm: RngAlgorithm::XorShift, ..Config::default() },
            TestRng::deterministic_rng(RngAlgorithm::XorShift),
        );
        let strategy = case();
        for index in 0..GENERATED_PODS + GENERATED_WORKLOADS {
            let generated =
                strategy.new_tree(&mut runner).expect("the pod generator never rejects").current();
            objects.push(if index < GENERATED_PODS {
                generated.pod
            } else {
                let kind = Workload::ALL[index % Workload::ALL.len()];
                wrap(kind, &generated.pod, "web", &generated.namespace)
            });
        }
        for mode in ["enforce", "warn", "audit", "off", ""] {
            objects.push(json!({"apiVersion": "v1", "kind": "Namespace",
                "metadata": {"name": "ml", "labels": {MODE_LABEL: mode},
                             "annotations": {MIN_CC: "8.0", MAX_GPUS: "2"}}}));
        }
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "ml"}}));
        let bases: Vec<Base> = objects.into_iter().map(Base::new).collect();
        for base in &bases {
            let back: Value = serde_json::from_slice(&base.text).expect("write_nodes writes JSON");
            assert_eq!(back, base.object, "write_nodes changed a value");
        }
        let mut namespace_settings = Vec::new();
        for min in [None, Some("8.0"), Some("7.5"), Some("junk"), Some("6.1")] {
            for max in [None, Some("2"), Some("16"), Some("x")] {
                let mut annotations = BTreeMap::new();
                if let Some(min) = min {
                    annotations.insert(MIN_CC.to_owned(), min.to_owned());
                }
                if let Some(max) = max {
                    annotations.insert(MAX_GPUS.to_owned(), max.to_owned());
                }
                namespace_settings.push(SETTINGS.for_namespace(&annotations));
            }
        }
        Corpus { bases, namespace_settings }
    })
}
