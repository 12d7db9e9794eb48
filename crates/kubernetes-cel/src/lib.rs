#![doc = include_str!("../README.md")]
#![warn(missing_docs)]

mod activation;
pub mod device;
mod library;
mod lists;
mod matching;
mod mutating;
pub mod quantity;
pub mod releases;
mod semver;
mod validating;

pub use device::{AttributeValue, Device, DeviceSelector};
pub use matching::{LabelSelector, PolicyBinding};
pub use mutating::{MutatingPolicy, MutatingPolicyBinding, MutationOutcome};
pub use quantity::{Quantity, QuantityError};
pub use semver::{Semver, SemverError};
pub use validating::{ValidatingPolicy, ValidatingPolicyBinding, ValidationAction};

use cel::IdedExpr;
use cel::common::ast::{EntryExpr, Expr, MapExpr, StructExpr};
use serde_json::Value as Json;

/// Declares the static CEL type `$static` named `$name` of the opaque
/// values `$rust`, and their `Val`: equal when `==`.
macro_rules! opaque_val {
    ($(#[$doc:meta])* $rust:ty, $static:ident, $name:literal) => {
        $(#[$doc])*
        static $static: cel::common::types::Type =
            cel::common::types::Type::new_unspecified_type($name);

        impl cel::common::value::Val for $rust {
            fn get_type(&self) -> &cel::common::types::Type {
                &$static
            }
            fn cel_type() -> &'static cel::common::types::Type {
                &$static
            }
            fn equals(&self, other: &dyn cel::common::value::Val) -> bool {
                other.downcast_ref::<$rust>().is_some_and(|o| o == self)
            }
            fn clone_as_boxed<'v>(&self) -> Box<dyn cel::common::value::Val + 'v> {
                Box::new(self.clone())
            }
            fn as_any(&self) -> Option<&dyn std::any::Any> {
                Some(self)
            }
        }
        impl cel::common::value::StaticVal for $rust {}
    };
}
use opaque_val;

/// Why a policy or binding object could not be read or compiled.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum PolicyError {
    /// A required field is missing or has the wrong JSON type.
    #[error("{field}: {problem}")]
    Field {
        /// The field's path, e.g. `spec.validations[0].expression`.
        field: String,
        /// What is wrong with it.
        problem: String,
    },
    /// An expression does not parse.
    #[error("{field}: compilation failed: {message}")]
    Compile {
        /// The expression's field path.
        field: String,
        /// The parser's message.
        message: String,
    },
    /// The CEL environment could not be declared (a duplicate overload).
    #[error("CEL environment: {0}")]
    Environment(String),
}

/// The `kind`/`requestKind` of an admission request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupVersionKind {
    /// API group, empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Kind, e.g. `Pod`.
    pub kind: String,
}

/// The `resource`/`requestResource` of an admission request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GroupVersionResource {
    /// API group, empty for the core group.
    pub group: String,
    /// API version, e.g. `v1`.
    pub version: String,
    /// Plural resource name, e.g. `pods`.
    pub resource: String,
}

/// The requesting user (`request.userInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct UserInfo {
    /// `username`.
    pub username: String,
    /// `groups`.
    pub groups: Vec<String>,
}

/// What a policy sees of one admission request: the CEL variables
/// `object`, `oldObject`, `namespaceObject` and `request`.
#[derive(Debug, Clone, Default)]
pub struct Attributes {
    /// The object as admitted (`null` for DELETE).
    pub object: Option<Json>,
    /// The object before an UPDATE or DELETE.
    pub old_object: Option<Json>,
    /// The request's namespace, as a Namespace object; its labels are what
    /// namespace selectors match (none when absent: the API server would
    /// look the namespace up, this evaluator cannot).
    pub namespace_object: Option<Json>,
    /// `CREATE`, `UPDATE`, `DELETE` or `CONNECT`.
    pub operation: String,
    /// The object's kind.
    pub kind: GroupVersionKind,
    /// The resource requested.
    pub resource: GroupVersionResource,
    /// The subresource, empty for the main resource (`ephemeralcontainers`
    /// for `pods/ephemeralcontainers`).
    pub sub_resource: String,
    /// The request's namespace, empty for cluster-scoped objects.
    pub namespace: String,
    /// The object's name (empty on CREATE with `generateName`).
    pub name: String,
    /// Who asks.
    pub user_info: UserInfo,
}

impl Attributes {
    /// A CREATE of `object` as the resource `group/version/resource` of kind
    /// `kind`; name and namespace are read from the object's metadata.
    pub fn create(object: Json, kind: GroupVersionKind, resource: GroupVersionResource) -> Self {
        let metadata = |key: &str| {
            object
                .pointer(&format!("/metadata/{key}"))
                .and_then(Json::as_str)
                .unwrap_or_default()
                .to_owned()
        };
        Attributes {
            namespace: metadata("namespace"),
            name: metadata("name"),
            object: Some(object),
            operation: "CREATE".to_owned(),
            kind,
            resource,
            ..Attributes::default()
        }
    }
}

/// Whether an expression denied or failed.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ViolationCause {
    /// The validation evaluated to false.
    Denied,
    /// The expression (or a match condition) failed under
    /// `failurePolicy: Fail`.
    EvaluationError,
}

/// One validation that did not pass, as the API server reports it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// The message as Kubernetes renders it: the `messageExpression` result,
    /// else `message`, else `failed expression: <expression>`; for an
    /// evaluation error, the error.
    pub message: String,
    /// The validation's `reason` (`Invalid` when unset).
    pub reason: String,
    /// Denied, or failed.
    pub cause: ViolationCause,
}

impl Violation {
    /// An evaluation error, as `failurePolicy: Fail` reports it.
    fn evaluation_error(message: String) -> Self {
        Violation { message, reason: "Invalid".to_owned(), cause: ViolationCause::EvaluationError }
    }
}

/// What a validating policy decided for one request.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicyOutcome {
    /// The request is outside the policy's match constraints, or a match
    /// condition is false.
    NotMatched,
    /// The policy applied; no violations means it admits the request.
    Evaluated {
        /// The validations that denied or failed, in order.
        violations: Vec<Violation>,
    },
}

impl PolicyOutcome {
    /// The violations (none when not matched).
    pub fn violations(&self) -> &[Violation] {
        match self {
            PolicyOutcome::NotMatched => &[],
            PolicyOutcome::Evaluated { violations } => violations,
        }
    }
}

/// `spec.failurePolicy`: `Fail` (the default) or `Ignore`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum FailurePolicy {
    /// An evaluation error rejects the request.
    #[default]
    Fail,
    /// An evaluation error is ignored.
    Ignore,
}

impl FailurePolicy {
    fn read(spec: &Json) -> Result<Self, PolicyError> {
        match spec.get("failurePolicy").and_then(Json::as_str) {
            None | Some("Fail") => Ok(FailurePolicy::Fail),
            Some("Ignore") => Ok(FailurePolicy::Ignore),
            Some(other) => {
                Err(field_error("spec.failurePolicy", format!("unsupported value {other:?}")))
            }
        }
    }
}

fn field_error(field: &str, problem: impl Into<String>) -> PolicyError {
    PolicyError::Field { field: field.to_owned(), problem: problem.into() }
}

/// A required string field.
fn string_field(object: &Json, key: &str, path: &str) -> Result<String, PolicyError> {
    object
        .get(key)
        .and_then(Json::as_str)
        .map(str::to_owned)
        .ok_or_else(|| field_error(&format!("{path}.{key}"), "required string"))
}

/// An optional list field (absent reads as empty).
fn list_field<'a>(object: &'a Json, key: &str, path: &str) -> Result<&'a [Json], PolicyError> {
    match object.get(key) {
        None | Some(Json::Null) => Ok(&[]),
        Some(Json::Array(items)) => Ok(items),
        Some(_) => Err(field_error(&format!("{path}.{key}"), "must be a list")),
    }
}

/// An optional list of strings (absent reads as empty).
fn string_list(object: &Json, key: &str, path: &str) -> Result<Vec<String>, PolicyError> {
    list_field(object, key, path)?
        .iter()
        .map(|v| v.as_str().map(str::to_owned))
        .collect::<Option<Vec<_>>>()
        .ok_or_else(|| field_error(&format!("{path}.{key}"), "must be strings"))
}

/// A policy or binding object's `metadata.name` and its required `spec`.
fn name_and_spec(object: &Json) -> Result<(String, &Json), PolicyError> {
    let name =
        object.pointer("/metadata/name").and_then(Json::as_str).unwrap_or_default().to_owned();
    let spec = object.get("spec").ok_or_else(|| field_error("spec", "required"))?;
    Ok((name, spec))
}

/// The subexpressions of `expr`, in source order but a call's target after
/// its arguments; for the walks that keep a stack of their own, as a
/// tree may be deep.
fn children(expr: &IdedExpr) -> Vec<&IdedExpr> {
    match &expr.expr {
        Expr::Call(call) => call.args.iter().chain(call.target.as_deref()).collect(),
        Expr::Comprehension(c) => {
            vec![&c.iter_range, &c.accu_init, &c.loop_cond, &c.loop_step, &c.result]
        }
        Expr::List(list) => list.elements.iter().collect(),
        Expr::Map(MapExpr { entries }) | Expr::Struct(StructExpr { entries, .. }) => entries
            .iter()
            .flat_map(|entry| match &entry.expr {
                EntryExpr::MapEntry(pair) => vec![&pair.key, &pair.value],
                EntryExpr::StructField(field) => vec![&field.value],
            })
            .collect(),
        Expr::Select(select) => vec![&select.operand],
        Expr::Ident(_) | Expr::Literal(_) | Expr::Unspecified => Vec::new(),
    }
}
