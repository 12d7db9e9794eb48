//! Compiled expressions and what they run against: the CEL variables of an
//! admission request (`object`, `oldObject`, `namespaceObject`, `request`,
//! `params`, `variables`), converted from JSON, and results converted back.
//!
//! Reads [`Attributes`]; allows JSON objects, arrays, strings, integers
//! (int64; larger numbers as doubles), doubles, booleans and null, as
//! `k8s.io/apiserver/pkg/cel/common/values.go` exposes unstructured objects.

use super::{Attributes, PolicyError, library};
use cel::objects::{Key, Map};
use cel::{Context, Env, ExecutionError, Program, Value};
use serde_json::Value as Json;
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The environment a policy's expressions run in, shared by all policies.
#[derive(Clone)]
pub(crate) struct SharedEnv(pub Arc<Env>);

impl std::fmt::Debug for SharedEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("kubernetes CEL environment")
    }
}

impl std::ops::Deref for SharedEnv {
    type Target = Env;
    fn deref(&self) -> &Env {
        &self.0
    }
}

/// The shared environment, declared once per process.
pub(crate) fn environment() -> Result<SharedEnv, PolicyError> {
    static ENV: OnceLock<Result<Arc<Env>, String>> = OnceLock::new();
    ENV.get_or_init(|| {
        library::environment()
            .map(Arc::new)
            .map_err(|e| e.to_string())
    })
    .clone()
    .map(SharedEnv)
    .map_err(PolicyError::Environment)
}

/// One expression, compiled once.
#[derive(Debug)]
pub(crate) struct Expression {
    /// The source as written (messages quote it).
    pub source: String,
    program: Program,
}

impl Expression {
    /// Compiles `source`, naming `field` in the error.
    pub fn compile(env: &Env, source: &str, field: &str) -> Result<Self, PolicyError> {
        let program = env.compile(source).map_err(|e| PolicyError::Compile {
            field: field.to_owned(),
            message: e.to_string(),
        })?;
        Ok(Expression {
            source: source.to_owned(),
            program,
        })
    }

    /// Evaluates in `context`.
    pub fn evaluate(&self, context: &Context<'_, '_>) -> Result<Value, ExecutionError> {
        self.program.execute(context)
    }

    /// `expression '<source>' resulted in error: <error>`, the wording of
    /// `k8s.io/apiserver/pkg/admission/plugin/cel/filter.go`.
    pub fn error_message(&self, error: &ExecutionError) -> String {
        format!("expression '{}' resulted in error: {error}", self.source)
    }
}

/// `spec.variables`, compiled in order.
#[derive(Debug, Default)]
pub(crate) struct Variables {
    entries: Vec<(String, Expression)>,
}

impl Variables {
    pub fn read(env: &Env, spec: &Json) -> Result<Self, PolicyError> {
        let mut entries = Vec::new();
        for (i, variable) in super::list_field(spec, "variables", "spec")?
            .iter()
            .enumerate()
        {
            let path = format!("spec.variables[{i}]");
            let name = super::string_field(variable, "name", &path)?;
            let source = super::string_field(variable, "expression", &path)?;
            let expression = Expression::compile(env, &source, &format!("{path}.expression"))?;
            entries.push((name, expression));
        }
        Ok(Variables { entries })
    }

    /// The `variables` map: each variable evaluated in order, seeing those
    /// before it. A variable that fails is left out, so an expression that
    /// reads it fails too (upstream evaluates variables lazily, with the
    /// same effect on the expressions that use them).
    pub fn evaluate(&self, context: &Context<'_, '_>) -> Value {
        let mut values: HashMap<Key, Value> = HashMap::with_capacity(self.entries.len());
        for (name, expression) in &self.entries {
            let mut scope = context.new_inner_scope();
            scope.add_variable_from_value("variables", map_value(values.clone()));
            if let Ok(value) = expression.evaluate(&scope) {
                values.insert(Key::String(Arc::new(name.clone())), value);
            }
        }
        map_value(values)
    }
}

fn map_value(values: HashMap<Key, Value>) -> Value {
    Value::Map(Map {
        map: Arc::new(values),
    })
}

/// The root context of one request: every variable but `variables`.
pub(crate) fn request_context(
    env: &SharedEnv,
    attributes: &Attributes,
) -> Context<'static, 'static> {
    let mut context = Context::with_env(env.0.clone());
    let object = |o: &Option<Json>| o.as_ref().map_or(Value::Null, from_json);
    context.add_variable_from_value("object", object(&attributes.object));
    context.add_variable_from_value("oldObject", object(&attributes.old_object));
    context.add_variable_from_value("namespaceObject", object(&attributes.namespace_object));
    context.add_variable_from_value("params", Value::Null);
    context.add_variable_from_value("request", request(attributes));
    context
}

/// `request`: the AdmissionRequest fields policies read
/// (`k8s.io/apiserver/pkg/admission/plugin/cel/activation.go`).
fn request(a: &Attributes) -> Value {
    let s = |v: &str| Value::String(Arc::new(v.to_owned()));
    let map = |entries: Vec<(&str, Value)>| {
        map_value(
            entries
                .into_iter()
                .map(|(k, v)| (Key::String(Arc::new(k.to_owned())), v))
                .collect(),
        )
    };
    let kind = map(vec![
        ("group", s(&a.kind.group)),
        ("version", s(&a.kind.version)),
        ("kind", s(&a.kind.kind)),
    ]);
    let resource = map(vec![
        ("group", s(&a.resource.group)),
        ("version", s(&a.resource.version)),
        ("resource", s(&a.resource.resource)),
    ]);
    let groups = a.user_info.groups.iter().map(|g| s(g)).collect::<Vec<_>>();
    map(vec![
        ("kind", kind.clone()),
        ("resource", resource.clone()),
        ("subResource", s(&a.sub_resource)),
        ("requestKind", kind),
        ("requestResource", resource),
        ("requestSubResource", s(&a.sub_resource)),
        ("name", s(&a.name)),
        ("namespace", s(&a.namespace)),
        ("operation", s(&a.operation)),
        (
            "userInfo",
            map(vec![
                ("username", s(&a.user_info.username)),
                ("groups", Value::List(Arc::new(groups))),
            ]),
        ),
        ("dryRun", Value::Bool(false)),
    ])
}

/// JSON as a CEL value.
pub(crate) fn from_json(json: &Json) -> Value {
    match json {
        Json::Null => Value::Null,
        Json::Bool(b) => Value::Bool(*b),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Value::Int(i),
            None => Value::Float(n.as_f64().unwrap_or(f64::NAN)),
        },
        Json::String(s) => Value::String(Arc::new(s.clone())),
        Json::Array(items) => Value::List(Arc::new(items.iter().map(from_json).collect())),
        Json::Object(fields) => map_value(
            fields
                .iter()
                .map(|(k, v)| (Key::String(Arc::new(k.clone())), from_json(v)))
                .collect(),
        ),
    }
}

/// A CEL value as JSON, for patch values.
pub(crate) fn to_json(value: &Value) -> Result<Json, String> {
    Ok(match value {
        Value::Null => Json::Null,
        Value::Bool(b) => Json::Bool(*b),
        Value::Int(i) => Json::from(*i),
        Value::UInt(u) => Json::from(*u),
        Value::Float(f) => serde_json::Number::from_f64(*f)
            .map(Json::Number)
            .ok_or_else(|| format!("{f} is not a JSON number"))?,
        Value::String(s) => Json::String(s.as_ref().clone()),
        Value::List(items) => Json::Array(items.iter().map(to_json).collect::<Result<_, _>>()?),
        Value::Map(map) => {
            let mut fields = serde_json::Map::with_capacity(map.map.len());
            for (key, value) in map.map.iter() {
                let Key::String(key) = key else {
                    return Err(format!("map key {key:?} is not a string"));
                };
                fields.insert(key.as_ref().clone(), to_json(value)?);
            }
            Json::Object(fields)
        }
        other => return Err(format!("{other:?} has no JSON form")),
    })
}
