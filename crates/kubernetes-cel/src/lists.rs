//! The Kubernetes lists library (`k8s.io/apiserver/pkg/cel/library/lists.go`),
//! the part the generated policies use: `sum`, `min`, `max`, `indexOf` and
//! `lastIndexOf` on lists.
//!
//! As upstream: `sum` of an empty list is `0`; `min` and `max` of an empty
//! list are errors; an integer sum that overflows is an error; `indexOf`
//! and `lastIndexOf` compare with CEL equality and answer `-1` when the
//! element is absent. Narrower than upstream: `sum`, `min` and `max` take
//! lists of ints and doubles only (upstream also uints, durations, and for
//! `min`/`max` every comparable type), and `isSorted` and `includes` are
//! not offered; the generated policies use none of those. cel-go's
//! `ext.Lists` is the `cel` crate's, registered beside this one.

use cel::common::traits::Iterable;
use cel::common::types::{CelDouble, CelInt, DYN_TYPE, LIST_TYPE};
use cel::common::value::{CowVal, Val};
use cel::{DeclarationError, Env, ExecutionError};

pub(crate) fn extension(env: &mut Env) -> Result<(), DeclarationError> {
    env.add_member_overload("sum", "list.sum()", LIST_TYPE, vec![], sum)?;
    env.add_member_overload("min", "list.min()", LIST_TYPE, vec![], min)?;
    env.add_member_overload("max", "list.max()", LIST_TYPE, vec![], max)?;
    env.add_member_overload("indexOf", "list.indexOf(dyn)", LIST_TYPE, vec![DYN_TYPE], index_of)?;
    env.add_member_overload(
        "lastIndexOf",
        "list.lastIndexOf(dyn)",
        LIST_TYPE,
        vec![DYN_TYPE],
        last_index_of,
    )?;
    Ok(())
}

fn items<'b, 'v>(list: &'b (dyn Val + 'v)) -> Result<Vec<&'b (dyn Val + 'v)>, ExecutionError> {
    let iterable: &(dyn Iterable + 'v) =
        list.as_iterable().ok_or_else(|| ExecutionError::UnexpectedType {
            got: list.get_type().name().to_owned(),
            want: "list".to_owned(),
        })?;
    let mut iter = iterable.iter();
    let mut out = Vec::new();
    while let Some(item) = iter.next() {
        out.push(item);
    }
    Ok(out)
}

/// A number of a list: an int or a double.
enum Number {
    Int(i64),
    Double(f64),
}

fn number(function: &str, item: &dyn Val) -> Result<Number, ExecutionError> {
    if let Some(i) = item.downcast_ref::<CelInt>() {
        return Ok(Number::Int(*i.inner()));
    }
    if let Some(d) = item.downcast_ref::<CelDouble>() {
        return Ok(Number::Double(*d.inner()));
    }
    Err(ExecutionError::function_error(
        function,
        format!("no such overload for {}", item.get_type().name()),
    ))
}

fn one<'a, 'b, 'v>(
    args: &'a [CowVal<'b, 'v>],
    function: &str,
) -> Result<&'a CowVal<'b, 'v>, ExecutionError> {
    match args {
        [list] => Ok(list),
        _ => Err(ExecutionError::invalid_argument_count(1, args.len()))
            .map_err(|e| ExecutionError::function_error(function, e)),
    }
}

fn sum<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one(&args, "sum")?;
    let mut int: i64 = 0;
    let mut double: Option<f64> = None;
    for item in items(list.as_ref())? {
        match number("sum", item)? {
            Number::Int(i) => {
                int = int
                    .checked_add(i)
                    .ok_or_else(|| ExecutionError::function_error("sum", "integer overflow"))?;
            }
            Number::Double(d) => double = Some(double.unwrap_or(0.0) + d),
        }
    }
    Ok(match double {
        Some(d) => CowVal::owned(CelDouble::from(d + int as f64)),
        None => CowVal::owned(CelInt::from(int)),
    })
}

fn extreme<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    function: &str,
    better: fn(f64, f64) -> bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let list = one(&args, function)?;
    let mut best: Option<Number> = None;
    for item in items(list.as_ref())? {
        let candidate = number(function, item)?;
        let value = |n: &Number| match n {
            Number::Int(i) => *i as f64,
            Number::Double(d) => *d,
        };
        let replace = match &best {
            None => true,
            Some(current) => match (&candidate, current) {
                (Number::Int(a), Number::Int(b)) => better(*a as f64, *b as f64) && a != b,
                _ => better(value(&candidate), value(current)),
            },
        };
        if replace {
            best = Some(candidate);
        }
    }
    match best {
        Some(Number::Int(i)) => Ok(CowVal::owned(CelInt::from(i))),
        Some(Number::Double(d)) => Ok(CowVal::owned(CelDouble::from(d))),
        None => Err(ExecutionError::function_error(
            function,
            format!("{function} called on empty list"),
        )),
    }
}

fn min<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "min", |a, b| a < b)
}

fn max<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    extreme(args, "max", |a, b| a > b)
}

fn position<'b, 'v>(
    args: Vec<CowVal<'b, 'v>>,
    last: bool,
) -> Result<CowVal<'b, 'v>, ExecutionError> {
    let [list, element] = args.as_slice() else {
        return Err(ExecutionError::invalid_argument_count(2, args.len()));
    };
    let items = items(list.as_ref())?;
    let element = element.as_ref();
    let found = if last {
        items.iter().rposition(|item| item.equals(element))
    } else {
        items.iter().position(|item| item.equals(element))
    };
    let index = found.and_then(|i| i64::try_from(i).ok()).unwrap_or(-1);
    Ok(CowVal::owned(CelInt::from(index)))
}

fn index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, false)
}

fn last_index_of<'b, 'v>(args: Vec<CowVal<'b, 'v>>) -> Result<CowVal<'b, 'v>, ExecutionError> {
    position(args, true)
}
