//! Generated DRA claims whose GPU counts reach past the 64-bit range, the
//! pods that use them, and what the policy must count, for the properties
//! of `tests/it/properties/claim_counts.rs`.
//!
//! A claim's requests carry counts over the whole u64 range, the i64 edges,
//! negative numbers, floats (integral or not, up to 1e300), strings and
//! other JSON; `allocationMode` ExactCount, All, absent or wrong; consumable
//! capacity (`capacity.requests`) of any shape, which never changes how many
//! devices a request takes; `firstAvailable` lists; the v1 and the flat
//! v1beta1 shapes; up to a thousand requests.
//!
//! The oracles read the generated values, never the JSON the reader sees:
//! a count is a JSON integer from 1 to u64::MAX (absent or null: 1), and
//! anything else is refused; totals are summed in u128 and capped at
//! u64::MAX, `All` absorbing everything. [`pods`] uses such claims in
//! pods.

use proptest::prelude::*;
use serde_json::{Map, Value, json};

use super::claimed_pods::GPU_CLASSES;
use super::pods::pick;

pub mod pods;

/// How many devices the oracle says something takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Devices {
    Exactly(u128),
    /// `allocationMode: All`: every matching device of a node.
    All,
}

impl Devices {
    fn add(self, other: Devices) -> Devices {
        match (self, other) {
            // At most a few thousand u64 counts: far from u128's end.
            (Devices::Exactly(a), Devices::Exactly(b)) => Devices::Exactly(a.saturating_add(b)),
            _ => Devices::All,
        }
    }

    /// The number as a u64 can hold it: capped at u64::MAX.
    pub fn capped(self) -> Option<u64> {
        match self {
            Devices::Exactly(n) => Some(u64::try_from(n).unwrap_or(u64::MAX)),
            Devices::All => None,
        }
    }

    /// Whether this is more than `maximum`, as R2 compares: the sum capped
    /// at u64::MAX, All above everything.
    pub fn above(self, maximum: u64) -> bool {
        self.capped().is_none_or(|n| n > maximum)
    }
}

/// The sum of what takes devices; None when nothing does.
pub fn sum(parts: impl IntoIterator<Item = Option<Devices>>) -> Option<Devices> {
    parts.into_iter().flatten().reduce(Devices::add)
}

/// A request's `count` as generated.
#[derive(Debug, Clone)]
pub enum Count {
    Absent,
    Null,
    /// A JSON integer; 0 is refused.
    Whole(u64),
    /// A negative JSON integer.
    Negative(i64),
    /// A JSON float, integral or not: never a count.
    Float(f64),
    /// A string, a boolean, a list or an object.
    Other(Value),
}

impl Count {
    fn json(&self) -> Option<Value> {
        match self {
            Count::Absent => None,
            Count::Null => Some(Value::Null),
            Count::Whole(n) => Some(json!(n)),
            Count::Negative(n) => Some(json!(n)),
            Count::Float(f) => {
                Some(serde_json::Number::from_f64(*f).map_or(Value::Null, Value::Number))
            }
            Count::Other(value) => Some(value.clone()),
        }
    }

    /// The devices it asks for; None when it must be refused.
    fn devices(&self) -> Option<u64> {
        match self {
            Count::Absent | Count::Null => Some(1),
            Count::Whole(n) if *n > 0 => Some(*n),
            // A float that is not finite is no JSON number: it is written
            // as null, which is the default.
            Count::Float(f) if !f.is_finite() => Some(1),
            _ => None,
        }
    }
}

/// A request's `allocationMode` as generated.
#[derive(Debug, Clone)]
pub enum Mode {
    Absent,
    Null,
    ExactCount,
    All,
    /// A string that is neither ExactCount nor All.
    Wrong(&'static str),
    /// Not a string at all.
    NotText(Value),
}

impl Mode {
    fn json(&self) -> Option<Value> {
        match self {
            Mode::Absent => None,
            Mode::Null => Some(Value::Null),
            Mode::ExactCount => Some(json!("ExactCount")),
            Mode::All => Some(json!("All")),
            Mode::Wrong(text) => Some(json!(text)),
            Mode::NotText(value) => Some(value.clone()),
        }
    }
}

/// One device alternative: the request itself, or a `firstAvailable`
/// entry.
#[derive(Debug, Clone)]
pub struct Alternative {
    pub class: Option<&'static str>,
    pub count: Count,
    pub mode: Mode,
    /// `capacity`, of any shape: never read for counting.
    pub capacity: Option<Value>,
    pub admin: bool,
}

impl Alternative {
    fn fields(&self) -> Map<String, Value> {
        let mut fields = Map::new();
        if let Some(class) = self.class {
            fields.insert("deviceClassName".to_owned(), json!(class));
        }
        let optional = [
            ("allocationMode", self.mode.json()),
            ("count", self.count.json()),
            ("capacity", self.capacity.clone()),
            ("adminAccess", self.admin.then_some(json!(true))),
        ];
        for (key, value) in optional {
            if let Some(value) = value {
                fields.insert(key.to_owned(), value);
            }
        }
        fields
    }

    /// The fields the reader must refuse, `at` being the alternative's path.
    fn faults(&self, at: &str) -> Vec<String> {
        let mut faults = Vec::new();
        if matches!(self.mode, Mode::Wrong(_) | Mode::NotText(_)) {
            faults.push(format!("{at}.allocationMode"));
        }
        if self.count.devices().is_none() {
            faults.push(format!("{at}.count"));
        }
        faults
    }

    fn is_gpu(&self) -> bool {
        self.class.is_some_and(|c| GPU_CLASSES.contains(&c))
    }

    /// The GPUs it takes (a readable alternative of a GPU class).
    fn gpus(&self) -> Option<Devices> {
        if !self.is_gpu() {
            return None;
        }
        match self.mode {
            Mode::All => Some(Devices::All),
            _ => self.count.devices().map(|n| Devices::Exactly(n.into())),
        }
    }
}

/// The shape of one request.
#[derive(Debug, Clone)]
pub enum Shape {
    /// v1 and v1beta2: `exactly`.
    Exactly(Alternative),
    /// v1beta1: the alternative's fields on the request itself.
    Flat(Alternative),
    /// `firstAvailable`, its entries named `s0`, `s1`...
    FirstAvailable(Vec<Alternative>),
}

/// A claim's requests, named `r0`, `r1`... in order.
#[derive(Debug, Clone)]
pub struct CountedClaim {
    pub requests: Vec<Shape>,
}

/// What the reader must make of a claim.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Expected {
    /// Each request's GPUs (None: no GPU alternative), and whether
    /// `adminAccess` is set on one of its GPU alternatives.
    Read(Vec<(Option<Devices>, bool)>),
    /// The error names one of these fields: the wrong fields of the first
    /// alternative, in document order, that has one.
    Unreadable(Vec<String>),
}

/// The dotted path of a claim kind's spec.
pub fn spec_path(kind: &str) -> &'static str {
    if kind == "ResourceClaimTemplate" { "spec.spec" } else { "spec" }
}

impl CountedClaim {
    fn alternatives(&self, index: usize, at: &str) -> Vec<(String, &Alternative)> {
        let at = format!("{at}.devices.requests[{index}]");
        match &self.requests[index] {
            Shape::Exactly(alternative) => vec![(format!("{at}.exactly"), alternative)],
            Shape::Flat(alternative) => vec![(at, alternative)],
            Shape::FirstAvailable(list) => list
                .iter()
                .enumerate()
                .map(|(j, alternative)| (format!("{at}.firstAvailable[{j}]"), alternative))
                .collect(),
        }
    }

    /// `devices.requests`.
    pub fn requests_json(&self) -> Value {
        let requests = self.requests.iter().enumerate().map(|(i, shape)| {
            let mut request = Map::new();
            request.insert("name".to_owned(), json!(format!("r{i}")));
            match shape {
                Shape::Exactly(alternative) => {
                    request.insert("exactly".to_owned(), Value::Object(alternative.fields()));
                }
                Shape::Flat(alternative) => request.extend(alternative.fields()),
                Shape::FirstAvailable(list) => {
                    let entries = list.iter().enumerate().map(|(j, alternative)| {
                        let mut entry = alternative.fields();
                        entry.insert("name".to_owned(), json!(format!("s{j}")));
                        Value::Object(entry)
                    });
                    request.insert("firstAvailable".to_owned(), entries.collect());
                }
            }
            Value::Object(request)
        });
        requests.collect()
    }

    /// The claim as a ResourceClaim or ResourceClaimTemplate object.
    pub fn object(&self, kind: &str, name: &str, namespace: &str) -> Value {
        let spec = json!({"devices": {"requests": self.requests_json()}});
        let spec = if kind == "ResourceClaimTemplate" { json!({"spec": spec}) } else { spec };
        json!({"apiVersion": "resource.k8s.io/v1", "kind": kind,
               "metadata": {"name": name, "namespace": namespace}, "spec": spec})
    }

    /// What the reader must make of the claim as a `kind`.
    pub fn expected(&self, kind: &str) -> Expected {
        let at = spec_path(kind);
        let mut read = Vec::new();
        for index in 0..self.requests.len() {
            let alternatives = self.alternatives(index, at);
            for (path, alternative) in &alternatives {
                let faults = alternative.faults(path);
                if !faults.is_empty() {
                    return Expected::Unreadable(faults);
                }
            }
            let gpu = alternatives.iter().filter_map(|(_, a)| a.gpus()).max();
            let admin = alternatives.iter().any(|(_, a)| a.is_gpu() && a.admin);
            read.push((gpu, admin));
        }
        Expected::Read(read)
    }
}

impl Expected {
    /// The GPUs of the whole claim.
    pub fn total(&self) -> Option<Devices> {
        match self {
            Expected::Read(requests) => sum(requests.iter().map(|(gpu, _)| *gpu)),
            Expected::Unreadable(_) => None,
        }
    }

    /// Whether R2 must deny the claim: a GPU request of every device, or
    /// above `max_per_container`, `adminAccess` on a GPU request (outside
    /// the allowlist's namespaces), or a total above `max_per_pod`.
    pub fn violates(&self, max_per_container: u64, max_per_pod: u64) -> bool {
        let Expected::Read(requests) = self else {
            return false;
        };
        requests.iter().any(|(gpu, admin)| {
            *admin || gpu.is_some_and(|g| g == Devices::All || g.above(max_per_container))
        }) || self.total().is_some_and(|t| t.above(max_per_pod))
    }
}

// ---------------------------------------------------------------------------
// Generators
// ---------------------------------------------------------------------------

/// Counts near and past the ends of i64 and u64.
const EDGES: [u64; 10] = [
    1,
    2,
    8,
    9,
    i64::MAX as u64 - 1,
    i64::MAX as u64,
    i64::MAX as u64 + 1,
    u64::MAX / 2 + 1,
    u64::MAX - 1,
    u64::MAX,
];

/// Floats a count must never be: fractions, integral floats, 2^63, 2^64
/// (the first integer serde_json reads as a float), and far beyond.
const FLOATS: [f64; 10] = [
    0.5,
    1.0,
    2.0,
    -0.0,
    -1.5,
    (1u64 << 63) as f64,
    1.844_674_407_370_955_2e19,
    1e30,
    1e300,
    f64::MIN_POSITIVE,
];

/// Strings where a number belongs.
const TEXTS: [&str; 7] = ["2", "1e400", "9999999999999999999999Ei", "-1", "", "All", "0x10"];

/// Any count: mostly numbers over the whole u64 range, and every kind of
/// number or value the reader must refuse.
pub fn count() -> impl Strategy<Value = Count> {
    prop_oneof![
        2 => Just(Count::Absent),
        1 => Just(Count::Null),
        3 => (0..=16u64).prop_map(Count::Whole),
        3 => any::<u64>().prop_map(Count::Whole),
        3 => pick(&EDGES).prop_map(Count::Whole),
        1 => prop_oneof![Just(i64::MIN), Just(-1i64), i64::MIN..0].prop_map(Count::Negative),
        1 => pick(&FLOATS).prop_map(Count::Float),
        1 => any::<f64>().prop_map(Count::Float),
        1 => pick(&TEXTS).prop_map(|t| Count::Other(json!(t))),
        1 => pick(&[json!(true), json!([]), json!({"value": 1})]).prop_map(Count::Other),
    ]
}

/// A count the reader accepts, over the whole u64 range.
pub fn readable_count() -> impl Strategy<Value = Count> {
    prop_oneof![
        1 => Just(Count::Absent),
        3 => (1..=8u64).prop_map(Count::Whole),
        3 => pick(&EDGES).prop_map(Count::Whole),
        1 => (1..=u64::MAX).prop_map(Count::Whole),
    ]
}

/// A count the reader accepts, mostly small, so that a pod's total falls
/// on either side of its maximum.
fn small_count() -> impl Strategy<Value = Count> {
    prop_oneof![
        1 => Just(Count::Absent),
        6 => (1..=4u64).prop_map(Count::Whole),
        1 => pick(&EDGES).prop_map(Count::Whole),
        1 => (1..=u64::MAX).prop_map(Count::Whole),
    ]
}

pub fn mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        4 => Just(Mode::Absent),
        1 => Just(Mode::Null),
        3 => Just(Mode::ExactCount),
        2 => Just(Mode::All),
        1 => pick(&["", "all", "Some", "ExactCount "]).prop_map(Mode::Wrong),
        1 => pick(&[json!(1), json!(true), json!(["All"])]).prop_map(Mode::NotText),
    ]
}

/// A mode the reader accepts.
pub fn readable_mode() -> impl Strategy<Value = Mode> {
    prop_oneof![
        4 => Just(Mode::Absent),
        3 => Just(Mode::ExactCount),
        1 => Just(Mode::All),
    ]
}

/// A quantity where consumable capacity is asked for: valid, huge,
/// negative, not a number, or not a string.
fn quantity() -> impl Strategy<Value = Value> {
    const QUANTITIES: [&str; 10] = [
        "10Gi",
        "1",
        "0",
        "9999999999999999999999Ei",
        "-1",
        "1e400",
        "18446744073709551616",
        "1.5",
        "",
        "NaN",
    ];
    prop_oneof![
        4 => pick(&QUANTITIES).prop_map(Value::from),
        1 => ".{0,12}".prop_map(Value::from),
        1 => any::<u64>().prop_map(Value::from),
        1 => pick(&FLOATS).prop_map(Value::from),
        1 => Just(json!({"value": "1Gi"})),
    ]
}

/// `capacity` of any shape: `requests` of quantities (the documented
/// shape), or something else entirely.
pub fn capacity() -> impl Strategy<Value = Option<Value>> {
    let requests = prop::collection::btree_map(
        pick(&["memory", "cores", "bandwidth", "gpu.nvidia.com/sm", ""]).prop_map(str::to_owned),
        quantity(),
        0..=3,
    )
    .prop_map(|map| json!({"requests": map.into_iter().collect::<Map<String, Value>>()}));
    prop_oneof![
        4 => Just(None),
        4 => requests.prop_map(Some),
        1 => quantity().prop_map(|q| Some(json!({"requests": q}))),
        1 => quantity().prop_map(Some),
        1 => Just(Some(json!([{"requests": {"memory": "1Gi"}}]))),
    ]
}

fn class() -> impl Strategy<Value = Option<&'static str>> {
    prop_oneof![
        6 => pick(&GPU_CLASSES).prop_map(Some),
        2 => pick(&["rdma.example.com", "compute-domain-daemon.nvidia.com"]).prop_map(Some),
        1 => Just(None),
    ]
}

fn alternative_of(
    count: impl Strategy<Value = Count> + 'static,
    mode: impl Strategy<Value = Mode> + 'static,
) -> BoxedStrategy<Alternative> {
    (class(), count, mode, capacity(), prop::bool::weighted(0.1))
        .prop_map(|(class, count, mode, capacity, admin)| Alternative {
            class,
            count,
            mode,
            capacity,
            admin,
        })
        .boxed()
}

fn shape_of(alternative: BoxedStrategy<Alternative>) -> BoxedStrategy<Shape> {
    prop_oneof![
        4 => alternative.clone().prop_map(Shape::Exactly),
        1 => alternative.clone().prop_map(Shape::Flat),
        2 => prop::collection::vec(alternative, 0..=4).prop_map(Shape::FirstAvailable),
    ]
    .boxed()
}

/// A claim of any counts and modes: a few requests, or up to
/// `max_requests`. A third are read and exact (their sums saturate, All
/// absorbing none of it), a third are read, and in the others one
/// alternative in `one_in` has a count or mode that may be refused.
pub fn counted_claim(max_requests: usize, one_in: u32) -> impl Strategy<Value = CountedClaim> {
    let exact = prop_oneof![Just(Mode::Absent), Just(Mode::ExactCount)];
    let count = prop_oneof![one_in - 1 => readable_count(), 1 => count()];
    let mode = prop_oneof![one_in - 1 => readable_mode(), 1 => mode()];
    prop_oneof![
        claim_of(readable_count(), exact, max_requests),
        claim_of(readable_count(), readable_mode(), max_requests),
        claim_of(count, mode, max_requests),
    ]
}

fn claim_of(
    count: impl Strategy<Value = Count> + 'static,
    mode: impl Strategy<Value = Mode> + 'static,
    max_requests: usize,
) -> impl Strategy<Value = CountedClaim> {
    let shape = shape_of(alternative_of(count, mode));
    prop_oneof![
        4 => prop::collection::vec(shape.clone(), 0..=6.min(max_requests)),
        1 => prop::collection::vec(shape, 0..=max_requests),
    ]
    .prop_map(|requests| CountedClaim { requests })
}
