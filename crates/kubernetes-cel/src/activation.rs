//! Compiled expressions and what they run against: the CEL variables of an
//! admission request (`object`, `oldObject`, `namespaceObject`, `request`,
//! `params`, `variables`), converted from JSON, and results converted back.
//!
//! Reads [`Attributes`]; allows JSON objects, arrays, strings, integers
//! (int64; larger numbers as doubles), doubles, booleans and null, as
//! `k8s.io/apiserver/pkg/cel/common/values.go` exposes unstructured objects.

use super::quantity::Quantity;
use super::{Attributes, PolicyError, library};
use cel::common::traits::Indexer;
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelList, CelMap, CelMapKey, CelNull, CelString, Type,
};
use cel::common::value::{CowVal, Val};
use cel::objects::Key;
use cel::{Context, Env, ExecutionError, Program, Value};
use serde_json::{Value as Json, json};
use std::collections::HashMap;
use std::sync::{Arc, OnceLock};

/// The environment policies' expressions run in, declared once per
/// process and shared by all policies.
pub(crate) fn environment() -> Result<Arc<Env>, PolicyError> {
    static ENV: OnceLock<Result<Arc<Env>, String>> = OnceLock::new();
    ENV.get_or_init(|| library::environment().map(Arc::new).map_err(|e| e.to_string()))
        .clone()
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
        Ok(Expression { source: source.to_owned(), program })
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

    /// Evaluates a condition or validation. The API server's type check
    /// rejects non-bool ones at compile time; here they are evaluation
    /// errors.
    pub fn evaluate_bool(&self, context: &Context<'_, '_>) -> Result<bool, String> {
        match self.evaluate(context) {
            Ok(Value::Bool(b)) => Ok(b),
            Ok(other) => {
                Err(format!("expression '{}' resulted in a {other:?}, not a bool", self.source))
            }
            Err(e) => Err(self.error_message(&e)),
        }
    }
}

/// `spec.variables`, compiled in order.
#[derive(Debug, Default)]
pub(crate) struct Variables {
    entries: Vec<(String, Expression)>,
}

/// One request's variable values, each set once, in order. They own their
/// data: a value borrowing the request would borrow these slots too.
pub(crate) type VariableValues = Vec<OnceLock<Result<Box<dyn Val>, ExecutionError>>>;

/// `spec.<key>[]` entries of a `name` and an `expression`, compiled:
/// `variables` and `matchConditions`.
pub(crate) fn named_expressions(
    env: &Env,
    spec: &Json,
    key: &str,
) -> Result<Vec<(String, Expression)>, PolicyError> {
    let entries = super::list_field(spec, key, "spec")?.iter().enumerate();
    entries
        .map(|(i, entry)| {
            let path = format!("spec.{key}[{i}]");
            let name = super::string_field(entry, "name", &path)?;
            let source = super::string_field(entry, "expression", &path)?;
            Ok((name, Expression::compile(env, &source, &format!("{path}.expression"))?))
        })
        .collect()
}

impl Variables {
    pub fn read(env: &Env, spec: &Json) -> Result<Self, PolicyError> {
        Ok(Variables { entries: named_expressions(env, spec, "variables")? })
    }

    /// Empty slots for one request's values.
    pub fn slots(&self) -> VariableValues {
        (0..self.entries.len()).map(|_| OnceLock::new()).collect()
    }

    /// Evaluates each variable in order, each seeing those before it, and
    /// binds `variables` in `context`. A variable's error is kept and
    /// surfaces in the expressions that read it, as with upstream's lazy
    /// variables (`k8s.io/apiserver/pkg/cel/lazy`).
    pub fn bind<'v>(
        &'v self,
        root: &Context<'_, 'v>,
        values: &'v VariableValues,
        context: &mut Context<'_, 'v>,
    ) {
        for (i, (_, expression)) in self.entries.iter().enumerate() {
            let mut scope = root.new_inner_scope();
            scope.add_variable_as_val("variables", Box::new(self.view(values)));
            let value = Value::resolve_val(expression.program.expression(), &scope)
                .and_then(|v| detach(v.as_ref()));
            drop(scope);
            if let Some(slot) = values.get(i) {
                let _ = slot.set(value);
            }
        }
        context.add_variable_as_val("variables", Box::new(self.view(values)));
    }

    fn view<'v>(&'v self, values: &'v VariableValues) -> VariablesView<'v> {
        VariablesView { entries: &self.entries, values }
    }
}

/// An owned copy of a value that may borrow the request: one deep copy for
/// lists, maps and strings; other values through `Value`.
fn detach(value: &dyn Val) -> Result<Box<dyn Val>, ExecutionError> {
    if let Some(list) = value.downcast_ref::<CelList>() {
        let items = list.inner().iter().map(|v| detach(v.as_ref()));
        return Ok(Box::new(CelList::from(items.collect::<Result<Vec<_>, _>>()?)));
    }
    if let Some(map) = value.downcast_ref::<CelMap>() {
        let entries =
            map.inner().iter().map(|(k, v)| Ok((k.clone().into_static(), detach(v.as_ref())?)));
        return Ok(Box::new(CelMap::from(
            entries.collect::<Result<HashMap<_, _>, ExecutionError>>()?,
        )));
    }
    if let Some(string) = value.downcast_ref::<CelString>() {
        return Ok(Box::new(CelString::from(string.inner().to_owned())));
    }
    if let Some(quantity) = value.downcast_ref::<Quantity>() {
        return Ok(Box::new(quantity.clone()));
    }
    Box::<dyn Val>::try_from(Value::try_from(value)?)
}

/// The CEL type of `variables`.
static VARIABLES_TYPE: Type = Type::new_unspecified_type("kubernetes.variables");

/// `variables`: a borrowed view of the values, so no expression copies them.
#[derive(Debug)]
struct VariablesView<'v> {
    entries: &'v [(String, Expression)],
    values: &'v VariableValues,
}

impl<'v> Val for VariablesView<'v> {
    fn get_type(&self) -> &Type {
        &VARIABLES_TYPE
    }
    fn cel_type() -> &'static Type {
        &VARIABLES_TYPE
    }
    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }
    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(VariablesView { entries: self.entries, values: self.values })
    }
}

impl<'v> Indexer for VariablesView<'v> {
    fn get<'b, 'w>(&'b self, idx: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        let name = idx.downcast_ref::<CelString>().map(|s| s.inner()).ok_or_else(|| {
            ExecutionError::UnexpectedType {
                got: idx.get_type().name().to_owned(),
                want: "string".to_owned(),
            }
        })?;
        let position = self.entries.iter().position(|(n, _)| n == name);
        match position.and_then(|i| self.values.get(i)).and_then(OnceLock::get) {
            Some(Ok(value)) => Ok(CowVal::Borrowed(value.as_ref())),
            Some(Err(error)) => Err(error.clone()),
            None => Err(ExecutionError::no_such_key(name)),
        }
    }

    fn steal<'w>(self: Box<Self>, idx: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(idx).map(|v| v.as_ref().clone_as_boxed())
    }
}

/// The root context of one request: every variable but `variables`.
pub(crate) fn request_context<'v>(env: &Arc<Env>, attributes: &'v Attributes) -> Context<'v, 'v> {
    let mut context = Context::with_env(env.clone());
    let objects = [
        ("object", &attributes.object),
        ("oldObject", &attributes.old_object),
        ("namespaceObject", &attributes.namespace_object),
    ];
    for (name, object) in objects {
        context.add_variable_as_val(name, json_val(object.as_ref().unwrap_or(&Json::Null)));
    }
    context.add_variable_from_value("params", Value::Null);
    // Owned: the JSON is this function's.
    let request = detach(json_val(&request(attributes)).as_ref());
    context.add_variable_as_val("request", request.unwrap_or_else(|_| Box::new(CelNull)));
    context
}

/// `request`: the AdmissionRequest fields policies read
/// (`k8s.io/apiserver/pkg/admission/plugin/cel/condition.go`,
/// `CreateAdmissionRequest`), converted as the API server converts it:
/// through its JSON, so the `omitempty` fields (`subResource`,
/// `requestSubResource`, `name`, `namespace`, the user's `username` and
/// `groups`) are absent when empty, and reading one is an error.
fn request(a: &Attributes) -> Json {
    let kind = json!({"group": a.kind.group, "version": a.kind.version, "kind": a.kind.kind});
    let resource = json!({
        "group": a.resource.group, "version": a.resource.version, "resource": a.resource.resource
    });
    let mut user = json!({});
    if !a.user_info.username.is_empty() {
        user["username"] = json!(a.user_info.username);
    }
    if !a.user_info.groups.is_empty() {
        user["groups"] = json!(a.user_info.groups);
    }
    let mut request = json!({
        "uid": "", "kind": kind, "resource": resource, "requestKind": kind,
        "requestResource": resource, "operation": a.operation, "userInfo": user, "dryRun": false
    });
    let omit_empty = [
        ("subResource", &a.sub_resource),
        ("requestSubResource", &a.sub_resource),
        ("name", &a.name),
        ("namespace", &a.namespace),
    ];
    for (key, value) in omit_empty {
        if !value.is_empty() {
            request[key] = json!(value);
        }
    }
    request
}

/// JSON as a CEL value that borrows the JSON's strings.
pub(crate) fn json_val<'v>(json: &'v Json) -> Box<dyn Val + 'v> {
    match json {
        Json::Null => Box::new(CelNull),
        Json::Bool(b) => Box::new(CelBool::from(*b)),
        Json::Number(n) => match n.as_i64() {
            Some(i) => Box::new(CelInt::from(i)),
            None => Box::new(CelDouble::from(n.as_f64().unwrap_or(f64::NAN))),
        },
        Json::String(s) => Box::new(CelString::from(s.as_str())),
        Json::Array(items) => {
            Box::new(CelList::from(items.iter().map(json_val).collect::<Vec<_>>()))
        }
        Json::Object(fields) => Box::new(CelMap::from(
            fields
                .iter()
                .map(|(k, v)| (CelMapKey::String(CelString::from(k.as_str())), json_val(v)))
                .collect::<HashMap<_, _>>(),
        )),
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
