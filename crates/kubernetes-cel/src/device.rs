//! Dynamic Resource Allocation device selectors evaluated offline, as the
//! Kubernetes scheduler evaluates them
//! (`k8s.io/dynamic-resource-allocation/cel/compile.go`): the CEL
//! expressions of `spec.devices.requests[].exactly.selectors[].cel` of a
//! ResourceClaim, against the devices of ResourceSlices.
//!
//! Reads: an expression, and a [`Device`] (built from a `spec.devices[]`
//! entry of a resource.k8s.io/v1 ResourceSlice with
//! [`Device::from_slice_device`]). Allows expressions to read the variable
//! `device`: `driver` (string), `attributes` and `capacity` (maps from a
//! domain to a map from a name to a value: bool, int, string or semver for
//! attributes, quantity for capacity), `allowMultipleAllocations` (bool).
//! Looking up a domain the device has nothing in gives an empty map, as
//! upstream's `newStringInterfaceMapWithDefault`: `"dom" in
//! device.attributes` is false, `device.attributes["dom"]` is `{}`, and
//! `device.attributes["dom"].name` fails with `no such key: name`. Like
//! upstream, `has(device.attributes.dom)` is therefore true for any domain
//! (cel-go's presence test asks the same `Find` that never misses); test
//! presence with `in`, or `has()` one level down.
//!
//! The environment is the admission policies' plus, as upstream's, the
//! semver library and `cel.bind` (cel-go's `ext.Bindings`).
//!
//! Narrower than upstream: there is no type checker and no cost limit.
//! Only a literal non-bool expression (`1`, `"a"`, `[true]`) is refused at
//! compile time; other type errors and undeclared references are
//! evaluation errors, and an expression whose result is not a bool fails
//! every match. Without a cost limit, `lists.range` (whose size only the
//! cost limit bounds) is refused at compile time, and expressions are
//! capped at upstream's 10 KiB; an expression can still be made slow.
//! List-valued attributes (the `DRAListTypeAttributes` feature) and
//! `includes` are not supported.
//!
//! Stack: the `cel` crate parses and evaluates recursively. Its evaluator,
//! `Value::resolve_val`, is `#[inline(always)]`, so it is compiled with
//! the calling crate: unoptimized (a debug build of this crate) it takes
//! about 56 KiB of stack per level of the expression's tree (36 nested
//! `+` overflow a 2 MiB thread), optimized about 1.6 KiB. Parsing 10 KiB
//! of `a.a.a…` takes between 2 and 4 MiB. So an expression is parsed on
//! a thread of its own with `COMPILE_STACK_BYTES`, refused if it nests
//! deeper than `MAX_NESTING` levels, and evaluated on the caller's
//! thread only if it nests at most `INLINE_NESTING` levels (as real
//! selectors do), else on a thread with a stack sized for its depth.

use super::quantity::Quantity;
use super::semver::Semver;
use cel::common::ast::{ComprehensionExpr, Expr, ListExpr, LiteralValue};
use cel::common::traits::{Container, Indexer, Iterable, Iterator as CelIterator, Sizer, Zeroer};
use cel::common::types::{CelBool, CelInt, CelMap, CelMapKey, CelString, Kind, MAP_TYPE, Type};
use cel::common::value::{CowVal, Val};
use cel::parser::{Macro, MacroExprHelper};
use cel::{Context, DeclarationError, Env, ExecutionError, IdedExpr, ParseError, Program, Value};
use serde_json::Value as Json;
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};

/// `resource.CELSelectorExpressionMaxLength`: the API server refuses a
/// longer selector, and the limit bounds parsing and evaluation here.
pub const MAX_EXPRESSION_BYTES: usize = 10 * 1024;

/// The stack an expression is parsed on: four times what the worst
/// 10 KiB expression measured needs.
const COMPILE_STACK_BYTES: usize = 16 << 20;

/// The deepest expression tree accepted (the parser already refuses 96
/// nested parentheses; only chains of operators get deeper, and no real
/// selector comes near).
pub(crate) const MAX_NESTING: usize = 100;

/// The deepest expression evaluated on the caller's thread: about 700 KiB
/// of stack unoptimized, within the 2 MiB of a Rust or tokio thread.
const INLINE_NESTING: usize = 12;

/// The stack of an evaluation thread, per level of nesting (over four
/// times the unoptimized need) and on top of that.
const STACK_PER_LEVEL_BYTES: usize = 256 << 10;
const STACK_BASE_BYTES: usize = 1 << 20;

/// One device as a selector sees it.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Device {
    /// `device.driver`.
    pub driver: String,
    /// `device.attributes`: domain -> name -> value.
    pub attributes: BTreeMap<String, BTreeMap<String, AttributeValue>>,
    /// `device.capacity`: domain -> name -> quantity.
    pub capacity: BTreeMap<String, BTreeMap<String, Quantity>>,
    /// `device.allowMultipleAllocations`.
    pub allow_multiple_allocations: bool,
}

/// The value of one device attribute.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum AttributeValue {
    /// `bool`.
    Bool(bool),
    /// `int`.
    Int(i64),
    /// `string`.
    String(String),
    /// `version`: semver text, parsed when a selector runs (a selector
    /// fails on a device whose version does not parse, as upstream).
    Version(String),
}

impl AttributeValue {
    /// `{bool|int|string|version: v}`, in upstream's order of precedence
    /// (`getAttributeValue`); `None` for anything else.
    fn from_json(value: &Json) -> Option<AttributeValue> {
        if let Some(i) = value.get("int").and_then(Json::as_i64) {
            return Some(AttributeValue::Int(i));
        }
        if let Some(b) = value.get("bool").and_then(Json::as_bool) {
            return Some(AttributeValue::Bool(b));
        }
        if let Some(s) = value.get("string").and_then(Json::as_str) {
            return Some(AttributeValue::String(s.to_owned()));
        }
        value.get("version").and_then(Json::as_str).map(|v| AttributeValue::Version(v.to_owned()))
    }
}

/// `parseQualifiedName`: `domain/name`, or a bare name in `driver`'s domain.
fn qualified(name: &str, driver: &str) -> (String, String) {
    match name.split_once('/') {
        Some((domain, id)) => (domain.to_owned(), id.to_owned()),
        None => (driver.to_owned(), name.to_owned()),
    }
}

impl Device {
    /// A `spec.devices[]` entry of a resource.k8s.io/v1 ResourceSlice of
    /// driver `driver`: attributes `{name: {bool|int|string|version: v}}`,
    /// capacity `{name: {value: "40Gi"}}`. A bare name belongs to the
    /// driver's domain (`driver`); a qualified one `domain/name` to its
    /// domain. The v1beta1 form, with the fields under `basic`, is read
    /// too. What the API server would not have admitted (an attribute of
    /// another shape, such as a list, or a capacity that is not a
    /// quantity) is left out: a selector sees no such key.
    pub fn from_slice_device(driver: &str, device: &Json) -> Device {
        let fields = device.get("basic").filter(|basic| basic.is_object()).unwrap_or(device);
        let mut out = Device {
            driver: driver.to_owned(),
            allow_multiple_allocations: fields
                .get("allowMultipleAllocations")
                .and_then(Json::as_bool)
                .unwrap_or(false),
            ..Device::default()
        };
        for (name, value) in object(fields, "attributes") {
            if let Some(value) = AttributeValue::from_json(value) {
                let (domain, id) = qualified(name, driver);
                out.attributes.entry(domain).or_default().insert(id, value);
            }
        }
        for (name, value) in object(fields, "capacity") {
            let quantity = value.get("value").and_then(Json::as_str);
            if let Some(quantity) = quantity.and_then(|q| Quantity::parse(q).ok()) {
                let (domain, id) = qualified(name, driver);
                out.capacity.entry(domain).or_default().insert(id, quantity);
            }
        }
        out
    }
}

/// The entries of the object at `key`, none when it is not an object.
fn object<'a>(json: &'a Json, key: &str) -> impl Iterator<Item = (&'a String, &'a Json)> {
    json.get(key).and_then(Json::as_object).into_iter().flat_map(|fields| fields.iter())
}

/// A compiled device selector.
pub struct DeviceSelector {
    expression: String,
    program: Program,
    env: Arc<Env>,
    /// The depth of the expression's tree, at most [`MAX_NESTING`].
    nesting: usize,
}

impl std::fmt::Debug for DeviceSelector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DeviceSelector")
            .field("expression", &self.expression)
            .finish_non_exhaustive()
    }
}

impl DeviceSelector {
    /// Compiles a CEL selector
    /// (`spec.devices.requests[].exactly.selectors[].cel.expression`).
    /// Err: one line, why.
    pub fn compile(expression: &str) -> Result<DeviceSelector, String> {
        if expression.len() > MAX_EXPRESSION_BYTES {
            return Err(format!(
                "expression too long: {} bytes, the limit is {MAX_EXPRESSION_BYTES}",
                expression.len()
            ));
        }
        let env = environment()?;
        let (program, nesting) = on_own_stack(COMPILE_STACK_BYTES, || -> Result<_, String> {
            let program = env.compile(expression).map_err(|errors| {
                let lines = errors.errors.iter().map(first_line).collect::<Vec<_>>();
                format!("compilation failed: {}", lines.join("; "))
            })?;
            // A tree refused here is dropped here too: dropping it recurses.
            let nesting = check(program.expression())?;
            Ok((program, nesting))
        })??;
        Ok(DeviceSelector { expression: expression.to_owned(), program, env, nesting })
    }

    /// The expression as written.
    pub fn expression(&self) -> &str {
        &self.expression
    }

    /// Whether the device matches. Err: the evaluation error (the scheduler
    /// aborts the allocation on one), one line; a non-bool result is an
    /// error too.
    pub fn matches(&self, device: &Device) -> Result<bool, String> {
        if self.nesting <= INLINE_NESTING {
            return self.evaluate(device);
        }
        let stack =
            self.nesting.saturating_mul(STACK_PER_LEVEL_BYTES).saturating_add(STACK_BASE_BYTES);
        on_own_stack(stack, || self.evaluate(device))?
    }

    fn evaluate(&self, device: &Device) -> Result<bool, String> {
        let mut context = Context::with_env(self.env.clone());
        context.add_variable_as_val("device", device_value(device)?);
        let result = Value::resolve_val(self.program.expression(), &context)
            .map_err(|error| evaluation_error(&error))?;
        match result.downcast_ref::<CelBool>() {
            Some(matched) => Ok(*matched.inner()),
            None => Err(format!(
                "CEL result of type {} could not be converted to bool",
                result.get_type().name()
            )),
        }
    }
}

/// Runs `f` on a thread of its own with `stack_bytes` of stack, and waits
/// for it.
fn on_own_stack<T: Send>(stack_bytes: usize, f: impl FnOnce() -> T + Send) -> Result<T, String> {
    std::thread::scope(|scope| {
        std::thread::Builder::new()
            .name("device-selector".to_owned())
            .stack_size(stack_bytes)
            .spawn_scoped(scope, f)
            .map_err(|e| format!("cannot start a thread to run the selector on: {e}"))?
            .join()
            .map_err(|_| "the CEL interpreter panicked".to_owned())
    })
}

/// A parse error without the source snippet the `cel` crate adds below it.
fn first_line(error: &ParseError) -> String {
    error.to_string().lines().next().unwrap_or_default().to_owned()
}

/// An evaluation error on one line, `no such key` worded as cel-go's.
fn evaluation_error(error: &ExecutionError) -> String {
    match error {
        ExecutionError::NoSuchKey(key) => format!("no such key: {key}"),
        other => other.to_string().replace('\n', " "),
    }
}

/// The checks upstream's compiler makes that this one can without a type
/// checker (a literal result must be a bool), and those this one needs
/// (see the module documentation): no `lists.range`, no deeper nesting
/// than [`MAX_NESTING`]. Returns the nesting. Walks the tree with a stack
/// of its own, as the tree may be deep.
fn check(root: &IdedExpr) -> Result<usize, String> {
    let not_bool =
        |kind: &str| Err(format!("must evaluate to bool or the unknown type, not {kind}"));
    match &root.expr {
        Expr::Literal(LiteralValue::Boolean(_)) => {}
        Expr::Literal(literal) => return not_bool(literal.to_val().get_type().name()),
        Expr::List(_) => return not_bool("list"),
        Expr::Map(_) => return not_bool("map"),
        _ => {}
    }
    let mut deepest = 0;
    let mut pending = vec![(root, 1usize)];
    while let Some((node, depth)) = pending.pop() {
        if depth > MAX_NESTING {
            return Err(format!("the expression nests more than {MAX_NESTING} levels deep"));
        }
        deepest = deepest.max(depth);
        // `lists.range(n)` parses as the method `range` of an identifier
        // `lists`.
        if let Expr::Call(call) = &node.expr
            && call.func_name == "range"
            && matches!(call.target.as_deref(), Some(IdedExpr { expr: Expr::Ident(name), .. }) if name == "lists")
        {
            return Err(
                "lists.range is not offered to device selectors: without a cost limit its size is unbounded"
                    .to_owned(),
            );
        }
        let children = super::children(node);
        pending.extend(children.into_iter().map(|child| (child, depth + 1)));
    }
    Ok(deepest)
}

/// The environment selectors compile and run in, declared once per process.
fn environment() -> Result<Arc<Env>, String> {
    static ENV: OnceLock<Result<Arc<Env>, String>> = OnceLock::new();
    let declare = || -> Result<Env, DeclarationError> {
        let mut env = super::library::environment()?;
        env.add_extension(super::semver::extension)?;
        env.add_macro(Macro::receiver("bind", 3, bind))?;
        Ok(env)
    };
    ENV.get_or_init(|| declare().map(Arc::new).map_err(|e| format!("CEL environment: {e}"))).clone()
}

/// cel-go's `ext.Bindings`: `cel.bind(name, init, body)` evaluates `body`
/// with `name` bound to `init`, expanded as cel-go expands it, into a
/// comprehension over an empty list whose accumulator is the binding.
fn bind(
    helper: &mut MacroExprHelper<'_>,
    target: &mut Option<IdedExpr>,
    args: &mut Vec<IdedExpr>,
) -> Result<Option<IdedExpr>, ParseError> {
    // Only `cel.bind`: a `bind` method of anything else stays a call.
    let is_cel =
        matches!(target.as_ref().map(|t| &t.expr), Some(Expr::Ident(name)) if name == "cel");
    if !is_cel {
        return Ok(None);
    }
    let (Some(body), Some(init), Some(variable)) = (args.pop(), args.pop(), args.pop()) else {
        return Err(helper.new_error(0, "cel.bind() takes three arguments"));
    };
    let Expr::Ident(name) = variable.expr else {
        return Err(
            helper.new_error(variable.id, "cel.bind() variable names must be simple identifiers")
        );
    };
    target.take();
    let binding = ComprehensionExpr {
        iter_range: helper.next_expr(Expr::List(ListExpr::new(Vec::new()))),
        iter_var: "#unused".to_owned(),
        iter_var2: None,
        accu_var: name.clone(),
        accu_init: init,
        loop_cond: helper.next_expr(Expr::Literal(LiteralValue::Boolean(false.into()))),
        loop_step: helper.next_expr(Expr::Ident(name)),
        result: body,
    };
    Ok(Some(helper.next_expr(Expr::Comprehension(Box::new(binding)))))
}

/// `device`, borrowing the device's strings.
fn device_value(device: &Device) -> Result<Box<dyn Val + '_>, String> {
    let attributes = domains(&device.attributes, |domain, name, value| {
        Ok(match value {
            AttributeValue::Bool(b) => Box::new(CelBool::from(*b)),
            AttributeValue::Int(i) => Box::new(CelInt::from(*i)),
            AttributeValue::String(s) => Box::new(CelString::from(s.as_str())),
            AttributeValue::Version(v) => Box::new(Semver::parse(v).map_err(|e| {
                let qualified = if domain == device.driver {
                    name.to_owned()
                } else {
                    format!("{domain}/{name}")
                };
                format!("attribute {qualified}: parse semantic version: {}", e.reason())
            })?),
        })
    })?;
    let capacity = domains(&device.capacity, |_, _, quantity| Ok(Box::new(quantity.clone())))?;
    let fields: HashMap<CelMapKey<'_>, Box<dyn Val + '_>> = HashMap::from([
        (key("driver"), Box::new(CelString::from(device.driver.as_str())) as Box<dyn Val>),
        (key("attributes"), attributes),
        (key("capacity"), capacity),
        (
            key("allowMultipleAllocations"),
            Box::new(CelBool::from(device.allow_multiple_allocations)),
        ),
    ]);
    Ok(Box::new(CelMap::from(fields)))
}

/// A map of domains ([`DomainMap`]) of maps from names to `value`'s
/// conversion of each value.
fn domains<'d, T>(
    map: &'d BTreeMap<String, BTreeMap<String, T>>,
    value: impl Fn(&str, &str, &'d T) -> Result<Box<dyn Val + 'd>, String>,
) -> Result<Box<dyn Val + 'd>, String> {
    let mut outer: HashMap<CelMapKey<'d>, Box<dyn Val + 'd>> = HashMap::new();
    for (domain, values) in map {
        let inner = values.iter().map(|(name, v)| Ok((key(name), value(domain, name, v)?)));
        let inner = inner.collect::<Result<HashMap<_, _>, String>>()?;
        outer.insert(key(domain), Box::new(CelMap::from(inner)));
    }
    Ok(Box::new(DomainMap(CelMap::from(outer))))
}

fn key(s: &str) -> CelMapKey<'_> {
    CelMapKey::String(CelString::from(s))
}

/// `device.attributes` and `device.capacity`: a map of domains in which a
/// domain that is not there is an empty map (upstream's `mapper.Find`).
/// `in`, `size()` and the comprehensions see only the domains there are.
#[derive(Debug, Clone)]
struct DomainMap<'v>(CelMap<'v>);

impl<'v> Val for DomainMap<'v> {
    fn get_type(&self) -> &Type {
        &MAP_TYPE
    }
    fn cel_type() -> &'static Type {
        &MAP_TYPE
    }
    fn as_container(&self) -> Option<&dyn Container> {
        Some(&self.0)
    }
    fn as_indexer<'b, 'w>(&'b self) -> Option<&'b (dyn Indexer + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }
    fn as_iterable<'b, 'w>(&'b self) -> Option<&'b (dyn Iterable + 'w)>
    where
        Self: 'w,
    {
        Some(self)
    }
    fn as_sizer(&self) -> Option<&dyn Sizer> {
        Some(&self.0)
    }
    fn as_zeroer(&self) -> Option<&dyn Zeroer> {
        Some(&self.0)
    }
    /// Same size, and each key of this map in `other` with an equal
    /// value: `other` may be a map of domains too, which `CelMap`'s own
    /// equality does not recognize.
    fn equals(&self, other: &dyn Val) -> bool {
        let (Some(size), Some(container), Some(indexer)) =
            (other.as_sizer(), other.as_container(), other.as_indexer())
        else {
            return false;
        };
        other.get_type().kind() == Kind::Map
            && usize::try_from(*size.size().inner()) == Ok(self.0.inner().len())
            && self.0.inner().iter().all(|(key, value)| {
                let key = key.inner();
                container.contains(key) == Ok(true)
                    && indexer.get(key).is_ok_and(|found| value.equals(found.as_ref()))
            })
    }
    fn clone_as_boxed<'w>(&self) -> Box<dyn Val + 'w>
    where
        Self: 'w,
    {
        Box::new(self.clone())
    }
}

impl<'v> Indexer for DomainMap<'v> {
    fn get<'b, 'w>(&'b self, key: &dyn Val) -> Result<CowVal<'b, 'w>, ExecutionError>
    where
        Self: 'w,
    {
        match Indexer::get(&self.0, key) {
            Err(ExecutionError::NoSuchKey(_)) => Ok(CowVal::owned(CelMap::default())),
            found => found,
        }
    }

    fn steal<'w>(self: Box<Self>, key: &dyn Val) -> Result<Box<dyn Val + 'w>, ExecutionError>
    where
        Self: 'w,
    {
        self.get(key).map(CowVal::into_owned)
    }
}

impl<'v> Iterable for DomainMap<'v> {
    fn iter<'b, 'w>(&'b self) -> Box<dyn CelIterator<'b, 'w> + 'b>
    where
        Self: 'w,
    {
        Iterable::iter(&self.0)
    }
}

#[cfg(test)]
mod tests;
