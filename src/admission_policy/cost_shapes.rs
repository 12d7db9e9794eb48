//! The sizes and limits Kubernetes applies to admission policies' CEL,
//! [`Bounds`] (a range of sizes or costs with cel-go's arithmetic), what a
//! value is to the cost model ([`Shape`]), and the shapes of what
//! admission policies read, with the sizes Kubernetes derives from schemas
//! without `maxItems` or `maxLength` (`k8s.io/apiserver/pkg/cel/common/schemas.go`;
//! docs/policy.md, "The sizes of unbounded lists"). Only the fields the
//! policies read are listed; another field is of unknown shape.

use std::collections::BTreeMap;

/// The largest request the API server accepts, which bounds every list,
/// map and string of a schema without `maxItems`, `maxProperties` or
/// `maxLength` (`MaxRequestSizeBytes`, `k8s.io/apiserver/pkg/apis/cel/config.go`).
pub const MAX_REQUEST_SIZE_BYTES: u64 = 3 * 1024 * 1024;
/// The most one evaluation of one expression may cost before it is stopped
/// (`PerCallLimit`, `k8s.io/apiserver/pkg/apis/cel/config.go`).
pub const PER_CALL_LIMIT: u64 = 1_000_000;
/// What the validations and message expressions of one policy binding, or
/// one mutation, may cost together on one request (`RuntimeCELCostBudget`).
pub const RUNTIME_COST_BUDGET: u64 = 10_000_000;
/// What the match conditions of one binding may cost together
/// (`RuntimeCELCostBudgetMatchConditions`).
pub const MATCH_CONDITIONS_COST_BUDGET: u64 = 2_500_000;

/// The smallest JSON of a string, `""` (`k8s.io/apiserver/pkg/cel/limits.go`).
pub const MIN_STRING_SIZE: u64 = 2;

/// A range of sizes or of costs, with cel-go's arithmetic: saturating at
/// `u64::MAX`, fractional factors rounded up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Bounds {
    pub min: u64,
    pub max: u64,
}

impl Bounds {
    /// Nothing known: 0 to `u64::MAX` (cel-go's unknown size estimate).
    pub const UNKNOWN: Bounds = Bounds { min: 0, max: u64::MAX };

    pub const fn fixed(value: u64) -> Bounds {
        Bounds { min: value, max: value }
    }

    pub const fn up_to(max: u64) -> Bounds {
        Bounds { min: 0, max }
    }

    pub(super) fn add(self, other: Bounds) -> Bounds {
        Bounds { min: self.min.saturating_add(other.min), max: self.max.saturating_add(other.max) }
    }

    pub(super) fn multiply(self, other: Bounds) -> Bounds {
        Bounds { min: self.min.saturating_mul(other.min), max: self.max.saturating_mul(other.max) }
    }

    pub(super) fn union(self, other: Bounds) -> Bounds {
        Bounds { min: self.min.min(other.min), max: self.max.max(other.max) }
    }

    /// cel-go's `MultiplyByCostFactor`: each end times `factor`, rounded up.
    pub(super) fn times_factor(self, factor: f64) -> Bounds {
        Bounds { min: times_factor(self.min, factor), max: times_factor(self.max, factor) }
    }

    pub fn within(self, limit: u64) -> bool {
        self.max <= limit
    }
}

/// `multiplyByCostFactor` of cel-go `checker/cost.go`, in the same float
/// arithmetic so that the roundings agree.
#[allow(clippy::cast_precision_loss, clippy::cast_possible_truncation, clippy::cast_sign_loss)]
fn times_factor(value: u64, factor: f64) -> u64 {
    let product = (value as f64 * factor).ceil();
    if product >= 18_446_744_073_709_551_616.0 { u64::MAX } else { product as u64 }
}

pub type Variables = BTreeMap<String, Shape>;

/// What a value is, with the sizes that bound its worst case: the part of
/// a Kubernetes `DeclType` the cost model reads.
#[derive(Clone, Debug, PartialEq)]
pub enum Shape {
    /// A boolean, number, duration or timestamp: size 1.
    Scalar,
    /// A string (or bytes) of a length in the bounds.
    String(Bounds),
    /// A list of a length in the bounds.
    List { len: Bounds, item: Box<Shape> },
    /// A map with string keys and a number of entries in the bounds.
    Map { len: Bounds, value: Box<Shape> },
    /// An object with these fields; a field not listed is [`Shape::Dyn`].
    Object(BTreeMap<String, Shape>),
    /// A Kubernetes quantity (`quantity(...)`): compared at cost 1.
    Quantity,
    /// Anything: size unknown.
    Dyn,
    /// A field the object does not have (with [`MissingFields::Absent`](super::MissingFields::Absent)),
    /// which `has()` guards, or the item of an empty list or map: a value
    /// never read.
    Absent,
}

impl Shape {
    /// A string without `maxLength`: as long as a request can hold
    /// (`estimateMaxStringLengthPerRequest`).
    pub fn unbounded_string() -> Shape {
        Shape::String(Bounds::up_to(MAX_REQUEST_SIZE_BYTES - 2))
    }

    /// A list without `maxItems` of items whose JSON is at least
    /// `item_min_serialized_size` bytes (`estimateMaxArrayItemsFromMinSize`).
    pub fn unbounded_list(item: Shape, item_min_serialized_size: u64) -> Shape {
        Shape::List {
            len: Bounds::up_to(max_list_items(item_min_serialized_size)),
            item: Box::new(item),
        }
    }

    /// A map without `maxProperties` of values whose JSON is at least
    /// `value_min_serialized_size` bytes
    /// (`estimateMaxAdditionalPropertiesFromMinSize`).
    pub fn unbounded_map(value: Shape, value_min_serialized_size: u64) -> Shape {
        Shape::Map {
            len: Bounds::up_to(max_map_entries(value_min_serialized_size)),
            value: Box::new(value),
        }
    }

    pub fn object<'a>(fields: impl IntoIterator<Item = (&'a str, Shape)>) -> Shape {
        Shape::Object(fields.into_iter().map(|(name, shape)| (name.to_owned(), shape)).collect())
    }

    /// cel-go's size of a value of this shape (`computeSize`).
    pub(super) fn size(&self) -> Bounds {
        match self {
            Shape::Scalar => Bounds::fixed(1),
            Shape::String(len) | Shape::List { len, .. } | Shape::Map { len, .. } => *len,
            // At run time an object is a map, of as many entries as it has
            // fields (cel-go `actualSize`); cel-go's estimator, without a
            // schema here, would not know.
            Shape::Object(fields) => Bounds::up_to(fields.len() as u64),
            Shape::Quantity | Shape::Dyn => Bounds::UNKNOWN,
            Shape::Absent => Bounds::fixed(0),
        }
    }

    /// The shape of one value, with its own sizes: the estimate over it
    /// bounds what evaluating the expression on it costs. A list's items
    /// have the shape of all of them (its longest string, its largest
    /// map), an object the fields it has.
    pub fn of_value(value: &serde_json::Value) -> Shape {
        use serde_json::Value;
        match value {
            Value::String(text) => Shape::String(Bounds::fixed(text.chars().count() as u64)),
            Value::Array(items) => Shape::List {
                len: Bounds::fixed(items.len() as u64),
                item: Box::new(
                    items.iter().map(Shape::of_value).reduce(Shape::union).unwrap_or(Shape::Absent),
                ),
            },
            Value::Object(fields) => Shape::Object(
                fields.iter().map(|(name, field)| (name.clone(), Shape::of_value(field))).collect(),
            ),
            Value::Null | Value::Bool(_) | Value::Number(_) => Shape::Scalar,
        }
    }

    /// The shape of a value that is one or the other.
    pub(super) fn union(self, other: Shape) -> Shape {
        match (self, other) {
            (a, b) if a == b => a,
            (Shape::Absent, other) | (other, Shape::Absent) => other,
            (Shape::String(a), Shape::String(b)) => Shape::String(a.union(b)),
            (Shape::List { len: a, item: i }, Shape::List { len: b, item: j }) => {
                Shape::List { len: a.union(b), item: Box::new(union_items(a, *i, b, *j)) }
            }
            (Shape::Map { len: a, value: i }, Shape::Map { len: b, value: j }) => {
                Shape::Map { len: a.union(b), value: Box::new(union_items(a, *i, b, *j)) }
            }
            // The empty map literal of `has(x) ? x : {}` stands for an
            // absent object: the object's shape, whose fields it lacks.
            (Shape::Object(fields), empty) | (empty, Shape::Object(fields))
                if empty.is_empty_literal() =>
            {
                Shape::Object(fields)
            }
            (Shape::Object(mut a), Shape::Object(b)) => {
                for (name, shape) in b {
                    let merged = match a.remove(&name) {
                        Some(mine) => mine.union(shape),
                        None => shape,
                    };
                    a.insert(name, merged);
                }
                Shape::Object(a)
            }
            _ => Shape::Dyn,
        }
    }

    /// `{}` or `[]`: a container that holds nothing.
    fn is_empty_literal(&self) -> bool {
        matches!(self, Shape::Map { len, .. } | Shape::List { len, .. } if len.max == 0)
    }
}

/// The item shape of two lists put together: an empty list's item shape
/// says nothing.
pub(super) fn union_items(a_len: Bounds, a: Shape, b_len: Bounds, b: Shape) -> Shape {
    if a_len.max == 0 {
        b
    } else if b_len.max == 0 {
        a
    } else {
        a.union(b)
    }
}

/// `estimateMaxArrayItemsFromMinSize` (`k8s.io/apiserver/pkg/cel/common/schemas.go`;
/// docs/policy.md, "The sizes of unbounded lists", for these three).
pub fn max_list_items(item_min_serialized_size: u64) -> u64 {
    (MAX_REQUEST_SIZE_BYTES - 2) / item_min_serialized_size.saturating_add(1)
}

/// `estimateMaxAdditionalPropertiesFromMinSize`.
pub fn max_map_entries(value_min_serialized_size: u64) -> u64 {
    (MAX_REQUEST_SIZE_BYTES - 2) / value_min_serialized_size.saturating_add(6)
}

/// `SchemaDeclType`'s smallest JSON of an object with these required fields
/// (name, the field's own smallest JSON).
pub fn object_min_serialized_size(required: &[(&str, u64)]) -> u64 {
    required.iter().fold(2, |size, (name, value)| {
        size.saturating_add(name.len() as u64).saturating_add(*value).saturating_add(4)
    })
}

fn string() -> Shape {
    Shape::unbounded_string()
}

fn string_map() -> Shape {
    Shape::unbounded_map(string(), MIN_STRING_SIZE)
}

/// A list of objects whose only required field is `name` (smallest JSON
/// `{"name":""}`, 12 bytes).
fn named_list<'a>(fields: impl IntoIterator<Item = (&'a str, Shape)>) -> Shape {
    Shape::unbounded_list(
        Shape::object(fields),
        object_min_serialized_size(&[("name", MIN_STRING_SIZE)]),
    )
}

fn container() -> Shape {
    Shape::object([
        ("name", string()),
        ("image", string()),
        ("restartPolicy", string()),
        (
            "env",
            named_list([("name", string()), ("value", string()), ("valueFrom", Shape::object([]))]),
        ),
        (
            "resources",
            Shape::object([
                // Quantities are read as strings (`quantity(...)`).
                ("limits", string_map()),
                ("requests", string_map()),
                ("claims", named_list([("name", string()), ("request", string())])),
            ]),
        ),
        (
            "volumeMounts",
            Shape::unbounded_list(
                Shape::object([("name", string()), ("mountPath", string())]),
                object_min_serialized_size(&[
                    ("name", MIN_STRING_SIZE),
                    ("mountPath", MIN_STRING_SIZE),
                ]),
            ),
        ),
        ("securityContext", Shape::object([("privileged", Shape::Scalar)])),
    ])
}

fn metadata() -> Shape {
    // An owner reference requires apiVersion, kind, name and uid.
    let owner_min = object_min_serialized_size(&[
        ("apiVersion", MIN_STRING_SIZE),
        ("kind", MIN_STRING_SIZE),
        ("name", MIN_STRING_SIZE),
        ("uid", MIN_STRING_SIZE),
    ]);
    Shape::object([
        ("name", string()),
        ("namespace", string()),
        ("labels", string_map()),
        ("annotations", string_map()),
        (
            "ownerReferences",
            Shape::unbounded_list(
                Shape::object([
                    ("kind", string()),
                    ("name", string()),
                    ("controller", Shape::Scalar),
                ]),
                owner_min,
            ),
        ),
    ])
}

fn pod_spec_fields() -> Vec<(&'static str, Shape)> {
    let containers = || {
        Shape::unbounded_list(container(), object_min_serialized_size(&[("name", MIN_STRING_SIZE)]))
    };
    vec![
        ("containers", containers()),
        ("initContainers", containers()),
        ("ephemeralContainers", containers()),
        (
            "volumes",
            named_list([("name", string()), ("hostPath", Shape::object([("path", string())]))]),
        ),
        (
            "resourceClaims",
            named_list([
                ("name", string()),
                ("resourceClaimName", string()),
                ("resourceClaimTemplateName", string()),
            ]),
        ),
        ("runtimeClassName", string()),
        ("nodeSelector", string_map()),
    ]
}

/// The Pod, as `object` and `oldObject` of a policy on pods. Containers,
/// environment variables, volumes and claims require only `name`.
fn pod() -> Shape {
    Shape::object([
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", metadata()),
        ("spec", Shape::object(pod_spec_fields())),
    ])
}

/// A Pod or a workload with a pod template (a Deployment's, a Job's,
/// a CronJob's one level deeper, a PodTemplate's at `template`): one
/// object with the fields of them all, so that every branch of the
/// policies' `spec` variable has the same pod spec, of the same sizes.
fn pod_or_workload() -> Shape {
    let template =
        || Shape::object([("metadata", metadata()), ("spec", Shape::object(pod_spec_fields()))]);
    let mut spec = pod_spec_fields();
    spec.push(("template", template()));
    spec.push((
        "jobTemplate",
        Shape::object([("spec", Shape::object([("template", template())]))]),
    ));
    Shape::object([
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", metadata()),
        ("spec", Shape::object(spec)),
        ("template", template()),
    ])
}

/// A ResourceClaim (devices at `spec.devices`) or a ResourceClaimTemplate
/// (at `spec.spec.devices`), resource.k8s.io/v1. A request requires only
/// `name`; a `firstAvailable` alternative `name` and `deviceClassName`.
fn claim_or_template() -> Shape {
    let device_fields = || {
        vec![
            ("name", string()),
            ("deviceClassName", string()),
            ("allocationMode", string()),
            ("count", Shape::Scalar),
            ("adminAccess", Shape::Scalar),
        ]
    };
    let alternative_min = object_min_serialized_size(&[
        ("name", MIN_STRING_SIZE),
        ("deviceClassName", MIN_STRING_SIZE),
    ]);
    let mut request = device_fields();
    request.push(("exactly", Shape::object(device_fields())));
    request.push((
        "firstAvailable",
        Shape::unbounded_list(Shape::object(device_fields()), alternative_min),
    ));
    let devices = || Shape::object([("requests", named_list(request.clone()))]);
    Shape::object([
        ("apiVersion", string()),
        ("kind", string()),
        ("metadata", metadata()),
        (
            "spec",
            Shape::object([
                ("devices", devices()),
                ("spec", Shape::object([("devices", devices())])),
            ]),
        ),
    ])
}

/// `namespaceObject`: the Namespace, of which the policies read the
/// annotations.
fn namespace() -> Shape {
    Shape::object([("metadata", metadata())])
}

/// `request`: the admission request's attributes the policies read
/// (`k8s.io/apiserver/pkg/admission/plugin/cel/compile.go` declares them
/// without a `maxLength`).
fn request() -> Shape {
    Shape::object([
        ("namespace", string()),
        ("name", string()),
        ("operation", string()),
        ("subResource", string()),
    ])
}

pub fn variables(object: Shape, old_object: Shape, namespace: Shape, request: Shape) -> Variables {
    [
        ("object", object),
        ("oldObject", old_object),
        ("namespaceObject", namespace),
        ("request", request),
    ]
    .into_iter()
    .map(|(name, shape)| (name.to_owned(), shape))
    .collect()
}

/// Of a schema's object, in any request.
fn schema_variables(object: Shape) -> Variables {
    variables(object.clone(), object, namespace(), request())
}

pub fn pod_policy_variables() -> Variables {
    schema_variables(pod())
}

pub fn workload_policy_variables() -> Variables {
    schema_variables(pod_or_workload())
}

pub fn claim_policy_variables() -> Variables {
    schema_variables(claim_or_template())
}
