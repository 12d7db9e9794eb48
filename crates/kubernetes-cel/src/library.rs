//! The CEL environment of admission policies
//! (`k8s.io/apiserver/pkg/cel/environment/base.go`): the `cel` crate's
//! standard library, its `ext.Strings` and `ext.Lists` extensions, the
//! Kubernetes lists library (`lists.rs`), and here the quantity library
//! (`k8s.io/apiserver/pkg/cel/library/quantity.go`), `jsonpatch.escapeKey`
//! and the `JSONPatch` type of MutatingAdmissionPolicy. The functions and
//! the release that introduced each: `releases.rs`.

use super::quantity::Quantity;
use cel::common::types::{
    CelBool, CelDouble, CelInt, CelString, CelStruct, Kind, STRING_TYPE, Type,
};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError, StructType};
use std::collections::BTreeMap;

super::opaque_val!(
    /// The CEL type name cel-go gives quantities (`apiservercel.QuantityType`);
    /// equal when `apiservercel.Quantity.Equal` (`Cmp == 0`) says so.
    Quantity,
    QUANTITY_TYPE,
    "kubernetes.Quantity"
);

/// The object type MutatingAdmissionPolicy's JSONPatch expressions construct.
pub(crate) static JSON_PATCH_TYPE: Type = Type::new_struct_type("JSONPatch");

/// The environment every policy expression compiles and runs in.
pub(crate) fn environment() -> Result<Env, DeclarationError> {
    let mut env = Env::stdlib();
    env.add_extension(cel::extensions::strings)?;
    env.add_extension(cel::extensions::lists)?;
    env.add_extension(super::lists::extension)?;
    env.add_type(QUANTITY_TYPE.to_owned())?;
    cel::add_overload!(env, fn quantity: (CelString) -> Result<Quantity>)?;
    cel::add_overload!(env, fn is_quantity: (CelString) -> CelBool)?;
    // A global function, as upstream declares it (`cel.Overload`, not
    // `cel.MemberOverload`), although its documentation shows a method:
    // the API server refuses `quantity(x).sign()`.
    cel::add_overload!(env, fn sign: (Quantity) -> CelInt)?;
    cel::add_member_overload!(env, fn is_greater_than: (Quantity, Quantity) -> Result<CelBool>)?;
    cel::add_member_overload!(env, fn is_less_than: (Quantity, Quantity) -> Result<CelBool>)?;
    cel::add_member_overload!(env, fn compare_to: (Quantity, Quantity) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn add: (Quantity, Quantity) -> Result<Quantity>)?;
    cel::add_member_overload!(env, fn add_int: (Quantity, CelInt) -> Result<Quantity>, name = "add")?;
    cel::add_member_overload!(env, fn sub: (Quantity, Quantity) -> Result<Quantity>)?;
    cel::add_member_overload!(env, fn sub_int: (Quantity, CelInt) -> Result<Quantity>, name = "sub")?;
    cel::add_member_overload!(env, fn as_integer: (Quantity) -> Result<CelInt>)?;
    cel::add_member_overload!(env, fn is_integer: (Quantity) -> CelBool)?;
    cel::add_member_overload!(env, fn as_approximate_float: (Quantity) -> CelDouble)?;
    cel::add_overload!(env, fn escape_key: (CelString) -> CelString, name = "jsonpatch.escapeKey")?;
    env.add_type(JsonPatchType)?;
    Ok(env)
}

/// `quantity(string)`: `resource.ParseQuantity`, its error as the result's.
fn quantity(s: &CelString<'_>) -> Result<Quantity, ExecutionError> {
    Quantity::parse(s.inner()).map_err(|e| ExecutionError::function_error("quantity", e))
}

/// `isQuantity(string)`: whether `quantity` would succeed.
fn is_quantity(s: &CelString<'_>) -> CelBool {
    Quantity::parse(s.inner()).is_ok().into()
}

/// `sign(<Quantity>)`: -1, 0 or 1.
fn sign(q: &Quantity) -> CelInt {
    q.sign().into()
}

fn ordering(function: &str, a: &Quantity, b: &Quantity) -> Result<i64, ExecutionError> {
    a.compare(b).map(|o| o as i64).map_err(|e| ExecutionError::function_error(function, e))
}

/// `<Quantity>.isGreaterThan(<Quantity>)`: `Cmp == 1`.
fn is_greater_than(a: &Quantity, b: &Quantity) -> Result<CelBool, ExecutionError> {
    Ok((ordering("isGreaterThan", a, b)? == 1).into())
}

/// `<Quantity>.isLessThan(<Quantity>)`: `Cmp == -1`.
fn is_less_than(a: &Quantity, b: &Quantity) -> Result<CelBool, ExecutionError> {
    Ok((ordering("isLessThan", a, b)? == -1).into())
}

/// `<Quantity>.compareTo(<Quantity>)`: `Cmp`.
fn compare_to(a: &Quantity, b: &Quantity) -> Result<CelInt, ExecutionError> {
    Ok(ordering("compareTo", a, b)?.into())
}

/// `<Quantity>.add(<Quantity>)`.
fn add(a: &Quantity, b: &Quantity) -> Result<Quantity, ExecutionError> {
    a.add(b).map_err(|e| ExecutionError::function_error("add", e))
}

/// `<Quantity>.add(<int>)`: adds `NewQuantity(n, DecimalExponent)`.
fn add_int(a: &Quantity, n: &CelInt) -> Result<Quantity, ExecutionError> {
    a.add(&Quantity::from_int(*n.inner())).map_err(|e| ExecutionError::function_error("add", e))
}

/// `<Quantity>.sub(<Quantity>)`.
fn sub(a: &Quantity, b: &Quantity) -> Result<Quantity, ExecutionError> {
    a.sub(b).map_err(|e| ExecutionError::function_error("sub", e))
}

/// `<Quantity>.sub(<int>)`: subtracts `NewQuantity(n, DecimalExponent)`.
fn sub_int(a: &Quantity, n: &CelInt) -> Result<Quantity, ExecutionError> {
    a.sub(&Quantity::from_int(*n.inner())).map_err(|e| ExecutionError::function_error("sub", e))
}

/// `<Quantity>.asInteger()`: `AsInt64`, an error where it does not hold.
fn as_integer(q: &Quantity) -> Result<CelInt, ExecutionError> {
    q.as_int64().map(CelInt::from).ok_or_else(|| {
        ExecutionError::function_error("asInteger", "cannot convert value to integer")
    })
}

/// `<Quantity>.isInteger()`: whether `asInteger` would succeed.
fn is_integer(q: &Quantity) -> CelBool {
    q.as_int64().is_some().into()
}

/// `<Quantity>.asApproximateFloat()`: `AsApproximateFloat64`.
fn as_approximate_float(q: &Quantity) -> CelDouble {
    q.as_approximate_float().into()
}

/// `jsonpatch.escapeKey(string)`: `~` to `~0`, then `/` to `~1` (RFC 6901).
fn escape_key(s: &CelString<'_>) -> CelString<'static> {
    CelString::from(s.inner().replace('~', "~0").replace('/', "~1"))
}

/// `JSONPatch{op, path, from, value}`: the fields upstream declares
/// (`k8s.io/apiserver/pkg/cel/mutation/jsonpatch.go`); `value` is dyn.
struct JsonPatchType;

impl StructType for JsonPatchType {
    fn get_type(&self) -> &Type {
        &JSON_PATCH_TYPE
    }

    fn new_value<'b, 'v>(
        &self,
        fields: BTreeMap<String, CowVal<'b, 'v>>,
    ) -> Result<Box<dyn Val + 'v>, ExecutionError> {
        let mut patch = CelStruct::new(JSON_PATCH_TYPE.name().to_owned());
        for (name, value) in fields {
            match name.as_str() {
                "op" | "path" | "from" => {
                    if value.get_type().kind() != Kind::String {
                        return Err(ExecutionError::UnexpectedType {
                            got: value.get_type().name().to_owned(),
                            want: format!("{} for field {name} in JSONPatch", STRING_TYPE.name()),
                        });
                    }
                }
                "value" => {}
                _ => {
                    return Err(ExecutionError::no_such_key(&format!(
                        "field `{name}` on struct `JSONPatch`"
                    )));
                }
            }
            patch.add_field_value(name, value);
        }
        Ok(Box::new(patch))
    }
}

#[cfg(test)]
mod tests;
