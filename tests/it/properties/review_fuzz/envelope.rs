//! The review around the object, damaged some of the time, and the bytes
//! of the body.

use super::*;

/// What the request says about the operation.
#[derive(Debug, Clone)]
pub struct Envelope {
    pub uid: String,
    /// CREATE, UPDATE, DELETE or CONNECT.
    pub operation: usize,
    /// `ephemeralcontainers` (or `status`), with an oldObject that has
    /// the last `n` ephemeral containers fewer.
    pub sub_resource: Option<(bool, usize)>,
    /// Another kind than the object's.
    pub kind: Option<[&'static str; 4]>,
    pub namespace: Option<&'static str>,
    pub admin: bool,
    /// The mode label of a Namespace's oldObject.
    pub old_label: Option<&'static str>,
    /// A field of the request (`true`) or of the review replaced, or
    /// removed.
    pub damage: Option<(bool, Index, Option<Value>)>,
}

pub const REQUEST_FIELDS: [&str; 14] = [
    "uid",
    "kind",
    "resource",
    "requestKind",
    "namespace",
    "operation",
    "userInfo",
    "object",
    "oldObject",
    "subResource",
    "dryRun",
    "name",
    "options",
    "extra",
];
pub const REVIEW_FIELDS: [&str; 3] = ["apiVersion", "kind", "request"];
pub const OPERATIONS: [&str; 4] = ["CREATE", "UPDATE", "DELETE", "CONNECT"];

pub fn envelope() -> impl Strategy<Value = Envelope> {
    let odd_uids = [
        "",
        "x",
        "\"quoted\" \\ back\\slash",
        "\u{0}\u{1f}\u{7f}",
        "\u{2028}\u{feff}\u{10ffff}",
        "gpu-policy: ünïcödé ✓",
    ]
    .map(str::to_owned);
    let uid = prop_oneof![
        16 => Just(UID.to_owned()),
        1 => prop::sample::select(odd_uids.to_vec()),
        1 => prop::collection::vec(any::<char>(), 0..12).prop_map(String::from_iter),
        1 => Just("u".repeat(300)),
    ];
    let kinds = [
        ["", "v1", "Pod", "pods"],
        ["apps", "v1", "Deployment", "deployments"],
        ["batch", "v1", "CronJob", "cronjobs"],
        ["", "v1", "PodTemplate", "podtemplates"],
        ["apps", "v1", "Pod", "pods"],
        ["", "v1", "Namespace", "namespaces"],
        ["", "v1", "Service", "services"],
    ];
    (
        uid,
        prop_oneof![12 => Just(0usize), 3 => Just(1), 1 => Just(2), 1 => Just(3)],
        prop::option::weighted(0.1, (prop::bool::weighted(0.9), 0..3usize)),
        prop::option::weighted(0.08, pick(&kinds)),
        prop::option::weighted(0.9, pick(&["default", "kube-system", "ml"])),
        any::<bool>(),
        prop::option::weighted(0.7, pick(&["enforce", "warn", "audit", "bogus"])),
        prop::option::weighted(
            0.08,
            (any::<bool>(), any::<Index>(), prop::option::weighted(0.7, small_json())),
        ),
    )
        .prop_map(
            |(uid, operation, sub_resource, kind, namespace, admin, old_label, damage)| Envelope {
                uid,
                operation,
                sub_resource,
                kind,
                namespace,
                admin,
                old_label,
                damage,
            },
        )
}

/// How the finished body is damaged, if at all.
#[derive(Debug, Clone)]
pub enum Bytes {
    Intact,
    Arbitrary(Vec<u8>),
    Truncate(Index),
    Flip(Index, u8),
    Splice(Index, Vec<u8>),
}

pub fn bytes() -> impl Strategy<Value = Bytes> {
    prop_oneof![
        90 => Just(Bytes::Intact),
        3 => prop::collection::vec(any::<u8>(), 0..96).prop_map(Bytes::Arbitrary),
        2 => any::<Index>().prop_map(Bytes::Truncate),
        3 => (any::<Index>(), 1..=255u8).prop_map(|(at, bits)| Bytes::Flip(at, bits)),
        2 => (any::<Index>(), prop::collection::vec(any::<u8>(), 1..8))
            .prop_map(|(at, extra)| Bytes::Splice(at, extra)),
    ]
}

pub fn endpoint() -> impl Strategy<Value = Endpoint> {
    prop_oneof![
        5 => Just(Endpoint::Mutate),
        2 => Just(Endpoint::Validate(Mode::Enforce)),
        1 => Just(Endpoint::Validate(Mode::Warn)),
        1 => Just(Endpoint::Validate(Mode::Audit)),
        1 => Just(Endpoint::Namespace),
    ]
}

/// The starting object: one of the corpus, or (rarely: it is slow) a
/// freshly generated pod.
#[derive(Debug, Clone)]
pub enum Source {
    Corpus(Index),
    Fresh(Box<Case>),
}

pub fn source() -> impl Strategy<Value = Source> {
    prop_oneof![
        399 => any::<Index>().prop_map(Source::Corpus),
        // Boxed: the value trees of `case` are large, and debug builds
        // copy them around.
        1 => case().prop_map(|c| Source::Fresh(Box::new(c))).boxed(),
    ]
}

/// A field of the review, already JSON text.
pub type Fields = Vec<(&'static str, Vec<u8>)>;

pub fn write_fields(out: &mut Vec<u8>, fields: &Fields) {
    out.push(b'{');
    for (i, (key, text)) in fields.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        write_str(out, key);
        out.push(b':');
        out.extend_from_slice(text);
    }
    out.push(b'}');
}

pub fn damage(fields: &mut Fields, names: &[&'static str], at: &Index, value: &Option<Value>) {
    let name = *at.get(names);
    fields.retain(|(key, _)| *key != name);
    if let Some(value) = value {
        fields.push((name, json_text(value)));
    }
}

/// The review body of a case, and whether it is a well-formed review.
pub fn body(
    source: &Source,
    mutations: &[Mutation],
    envelope: &Envelope,
    bytes: &Bytes,
) -> (Vec<u8>, bool) {
    let fresh;
    let base = match source {
        Source::Corpus(index) => index.get(&corpus().bases),
        Source::Fresh(case) => {
            fresh = Base::new(case.pod.clone());
            &fresh
        }
    };
    let splices = || mutations.iter().filter_map(|m| splice_of(base, m));
    let object = render(base, splices().collect());
    let [group, version, kind, resource] = envelope.kind.unwrap_or(base.kind);
    let operation = OPERATIONS[envelope.operation];
    // Plain ASCII, written as it is (faster than `json!`).
    let text = |s: String| s.into_bytes();
    let mut uid = Vec::new();
    write_str(&mut uid, &envelope.uid);
    let mut request: Fields = vec![
        ("uid", uid),
        ("kind", text(format!(r#"{{"group":"{group}","version":"{version}","kind":"{kind}"}}"#))),
        (
            "resource",
            text(format!(r#"{{"group":"{group}","version":"{version}","resource":"{resource}"}}"#)),
        ),
        ("operation", text(format!(r#""{operation}""#))),
        ("dryRun", text("false".into())),
    ];
    if let Some(namespace) = envelope.namespace
        && kind != "Namespace"
    {
        request.push(("namespace", text(format!(r#""{namespace}""#))));
    }
    let groups = if envelope.admin { "system:masters" } else { "system:authenticated" };
    request.push(("userInfo", text(format!(r#"{{"username":"alice","groups":["{groups}"]}}"#))));
    let mut old = None;
    if kind == "Namespace" && operation != "CREATE" {
        // Namespaces are small: edit the value.
        let mut namespace: Value = serde_json::from_slice(&object).unwrap_or(Value::Null);
        if let Some(labels) =
            namespace.pointer_mut("/metadata/labels").and_then(Value::as_object_mut)
        {
            match envelope.old_label {
                Some(label) => labels.insert(MODE_LABEL.into(), json!(label)),
                None => labels.remove(MODE_LABEL),
            };
        }
        old = Some(json_text(&namespace));
    }
    if let Some((ephemeral, removed)) = envelope.sub_resource {
        let name = if ephemeral { "ephemeralcontainers" } else { "status" };
        request.push(("subResource", json_text(&json!(name))));
        let count = base
            .object
            .pointer("/spec/ephemeralContainers")
            .and_then(Value::as_array)
            .map_or(0, Vec::len);
        let removals = (count.saturating_sub(removed)..count).filter_map(|i| {
            let node = base.node(&format!("/spec/ephemeralContainers/{i}"))?;
            Some(Splice { range: node.entry.clone(), text: Vec::new() })
        });
        old = Some(render(base, splices().chain(removals).collect()));
    }
    if operation == "DELETE" {
        request.push(("oldObject", old.take().unwrap_or(object)));
    } else {
        request.push(("object", object));
        if let Some(old) = old {
            request.push(("oldObject", old));
        }
    }
    let mut review: Fields = vec![
        ("apiVersion", br#""admission.k8s.io/v1""#.to_vec()),
        ("kind", br#""AdmissionReview""#.to_vec()),
    ];
    match &envelope.damage {
        Some((true, at, value)) => damage(&mut request, &REQUEST_FIELDS, at, value),
        Some((false, at, value)) => damage(&mut review, &REVIEW_FIELDS, at, value),
        None => {}
    }
    let mut request_text = Vec::with_capacity(base.text.len() * 2 + 512);
    write_fields(&mut request_text, &request);
    if !review.iter().any(|(key, _)| *key == "request") {
        review.push(("request", request_text));
    }
    let mut body = Vec::with_capacity(base.text.len() * 2 + 1024);
    write_fields(&mut body, &review);
    match bytes {
        Bytes::Intact => {}
        Bytes::Arbitrary(arbitrary) => body.clone_from(arbitrary),
        Bytes::Truncate(at) => body.truncate(at.index(body.len())),
        Bytes::Flip(at, bits) => {
            let index = at.index(body.len());
            body[index] ^= bits;
        }
        Bytes::Splice(at, extra) => {
            let index = at.index(body.len() + 1);
            body.splice(index..index, extra.iter().copied());
        }
    }
    (body, envelope.damage.is_none() && matches!(bytes, Bytes::Intact))
}
