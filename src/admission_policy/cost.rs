//! The static worst-case cost of admission policies' CEL, in Kubernetes'
//! units: cel-go's estimator (`checker/cost.go`, `common/cost.go`) with the
//! Kubernetes function costs (`k8s.io/apiserver/pkg/cel/library/cost.go`),
//! over the `cel` crate's AST; docs/policy.md, "gpu-policy's estimate", says
//! what is exact and what approximates. A function outside the model is an
//! error, not a guess. Over one request ([`Shape::of_value`],
//! [`MissingFields::Absent`]) it bounds what that request costs.

use std::collections::BTreeMap;

use cel::IdedExpr;
use cel::common::ast::{CallExpr, ComprehensionExpr, EntryExpr, Expr, LiteralValue, operators};
use cel::parser::Parser;

#[path = "cost_shapes.rs"]
mod shapes;
use shapes::union_items;
pub use shapes::{
    Bounds, MATCH_CONDITIONS_COST_BUDGET, MAX_REQUEST_SIZE_BYTES, MIN_STRING_SIZE, PER_CALL_LIMIT,
    RUNTIME_COST_BUDGET,
};
pub use shapes::{
    Shape, Variables, claim_policy_variables, max_list_items, max_map_entries,
    object_min_serialized_size, pod_policy_variables, variables, workload_policy_variables,
};

/// The longest decimal text of a 64-bit integer (`-9223372036854775808`).
const MAX_NUMBER_TEXT: u64 = 20;

// cel-go common/cost.go.
const SELECT_AND_IDENT_COST: u64 = 1;
const CONST_COST: u64 = 0;
const LIST_CREATE_BASE_COST: u64 = 10;
const MAP_CREATE_BASE_COST: u64 = 30;
const STRUCT_CREATE_BASE_COST: u64 = 40;
const STRING_TRAVERSAL_COST_FACTOR: f64 = 0.1;
const REGEX_STRING_LENGTH_COST_FACTOR: f64 = 0.25;

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CostError {
    #[error("the expression does not parse: {0}")]
    Parse(String),
    #[error("`{0}` is not a declared variable")]
    UndeclaredVariable(String),
    #[error("no field `{field}` on a value that is not an object or a map")]
    NoField { field: String },
    #[error("`{0}` with these arguments is not in the cost model")]
    UnsupportedFunction(String),
    #[error("{0} is not in the cost model")]
    Unsupported(&'static str),
}

/// What a field an object's shape does not list is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MissingFields {
    /// Of unknown shape: the object is a schema's, whose unlisted fields
    /// can hold anything.
    Unknown,
    /// Absent: the object is one value's ([`Shape::of_value`]), which has
    /// no such field.
    Absent,
}

pub fn estimate(expression: &str, variables: &Variables) -> Result<Bounds, CostError> {
    estimate_value(expression, variables, MissingFields::Unknown).map(|(cost, _)| cost)
}

/// The cost range of `expression` over `variables` and the shape of its
/// value: what `variables.<name>` is to the expressions after it.
pub fn estimate_value(
    expression: &str,
    variables: &Variables,
    missing: MissingFields,
) -> Result<(Bounds, Shape), CostError> {
    // Kubernetes enables optional types (`a.?b`) from 1.28 on
    // (`k8s.io/apiserver/pkg/cel/environment/base.go`).
    let ast = Parser::new()
        .enable_optional_syntax(true)
        .parse(expression)
        .map_err(|errors| CostError::Parse(errors.to_string()))?;
    let mut coster = Coster { variables, locals: Vec::new(), missing };
    let estimated = coster.cost(&ast)?;
    Ok((estimated.cost, estimated.shape))
}

/// The cost range of expressions that share one budget, such as the
/// validations of a policy against [`RUNTIME_COST_BUDGET`].
pub fn total(costs: &[Bounds]) -> Bounds {
    costs.iter().fold(Bounds::fixed(0), |sum, cost| sum.add(*cost))
}

struct Estimated {
    cost: Bounds,
    shape: Shape,
}

struct Coster<'v> {
    variables: &'v Variables,
    missing: MissingFields,
    /// Iteration and accumulator variables, innermost last.
    locals: Vec<(String, Shape)>,
}

impl Coster<'_> {
    fn cost(&mut self, e: &IdedExpr) -> Result<Estimated, CostError> {
        match &e.expr {
            Expr::Literal(literal) => {
                Ok(Estimated { cost: Bounds::fixed(CONST_COST), shape: literal_shape(literal) })
            }
            Expr::Ident(name) => {
                let shape = self
                    .locals
                    .iter()
                    .rev()
                    .find(|(local, _)| local == name)
                    .map(|(_, shape)| shape)
                    .or_else(|| self.variables.get(name))
                    .ok_or_else(|| CostError::UndeclaredVariable(name.clone()))?;
                Ok(Estimated { cost: Bounds::fixed(SELECT_AND_IDENT_COST), shape: shape.clone() })
            }
            Expr::Select(select) => {
                let operand = self.cost(&select.operand)?;
                if select.test {
                    // has(): no cost of its own in Kubernetes.
                    return Ok(Estimated { cost: operand.cost, shape: Shape::Scalar });
                }
                let shape = field(&operand.shape, &select.field, self.missing)?;
                Ok(Estimated {
                    cost: operand.cost.add(Bounds::fixed(SELECT_AND_IDENT_COST)),
                    shape,
                })
            }
            Expr::Call(call) => self.call(call),
            Expr::List(list) => {
                let mut cost = Bounds::fixed(LIST_CREATE_BASE_COST);
                let mut item: Option<Shape> = None;
                for element in &list.elements {
                    let element = self.cost(element)?;
                    cost = cost.add(element.cost);
                    item = Some(match item {
                        None => element.shape,
                        Some(item) => item.union(element.shape),
                    });
                }
                let len = Bounds::fixed(list.elements.len() as u64);
                let item = Box::new(item.unwrap_or(Shape::Absent));
                Ok(Estimated { cost, shape: Shape::List { len, item } })
            }
            Expr::Map(map) => {
                let mut cost = Bounds::fixed(MAP_CREATE_BASE_COST);
                let mut value: Option<Shape> = None;
                // Keys that are all string literals: each value keeps its
                // own shape, as a field (cel-go's type checker would type
                // the map `map(string, dyn)`).
                let mut fields = Some(BTreeMap::new());
                for entry in &map.entries {
                    let EntryExpr::MapEntry(entry) = &entry.expr else {
                        return Err(CostError::Unsupported("a struct field in a map literal"));
                    };
                    cost = cost.add(self.cost(&entry.key)?.cost);
                    let entry_value = self.cost(&entry.value)?;
                    cost = cost.add(entry_value.cost);
                    match (&mut fields, &entry.key.expr) {
                        (Some(fields), Expr::Literal(LiteralValue::String(key))) => {
                            fields.insert(key.inner().to_owned(), entry_value.shape.clone());
                        }
                        _ => fields = None,
                    }
                    value = Some(match value {
                        None => entry_value.shape,
                        Some(value) => value.union(entry_value.shape),
                    });
                }
                let shape = match fields {
                    Some(fields) if !fields.is_empty() => Shape::Object(fields),
                    _ => Shape::Map {
                        len: Bounds::fixed(map.entries.len() as u64),
                        value: Box::new(value.unwrap_or(Shape::Absent)),
                    },
                };
                Ok(Estimated { cost, shape })
            }
            Expr::Struct(object) => {
                let mut cost = Bounds::fixed(STRUCT_CREATE_BASE_COST);
                let mut fields = BTreeMap::new();
                for entry in &object.entries {
                    let EntryExpr::StructField(entry) = &entry.expr else {
                        return Err(CostError::Unsupported("a map entry in a struct literal"));
                    };
                    let value = self.cost(&entry.value)?;
                    cost = cost.add(value.cost);
                    fields.insert(entry.field.clone(), value.shape);
                }
                Ok(Estimated { cost, shape: Shape::Object(fields) })
            }
            Expr::Comprehension(comprehension) => self.comprehension(comprehension),
            Expr::Unspecified => Err(CostError::Unsupported("an empty expression")),
        }
    }

    /// cel-go `costComprehension`: the range, the accumulator's start and
    /// the result once, the loop condition and step once per element.
    fn comprehension(&mut self, c: &ComprehensionExpr) -> Result<Estimated, CostError> {
        let range = self.cost(&c.iter_range)?;
        let init = self.cost(&c.accu_init)?;
        let (first, second) = match (&range.shape, &c.iter_var2) {
            (Shape::List { item, .. }, None) => ((**item).clone(), None),
            (Shape::List { item, .. }, Some(_)) => (Shape::Scalar, Some((**item).clone())),
            (Shape::Map { value, .. }, second) => {
                (Shape::unbounded_string(), second.as_ref().map(|_| (**value).clone()))
            }
            (Shape::Dyn, second) => (Shape::Dyn, second.as_ref().map(|_| Shape::Dyn)),
            // An object read as a map (one of [`Shape::of_value`]): its
            // field names are the keys.
            (Shape::Absent, second) => (Shape::Absent, second.as_ref().map(|_| Shape::Absent)),
            (Shape::Object(fields), second) if self.missing == MissingFields::Absent => (
                Shape::String(
                    fields
                        .keys()
                        .map(|k| Bounds::fixed(k.chars().count() as u64))
                        .reduce(Bounds::union)
                        .unwrap_or(Bounds::fixed(0)),
                ),
                second
                    .as_ref()
                    .map(|_| fields.values().cloned().reduce(Shape::union).unwrap_or(Shape::Dyn)),
            ),
            _ => {
                return Err(CostError::Unsupported("a comprehension over a non-container"));
            }
        };
        let accu_is_list = matches!(c.accu_init.expr, Expr::List(_));
        self.locals.push((c.accu_var.clone(), init.shape));
        self.locals.push((c.iter_var.clone(), first));
        if let (Some(name), Some(shape)) = (&c.iter_var2, second) {
            self.locals.push((name.clone(), shape));
        }
        let per_element = self.cost(&c.loop_cond).and_then(|condition| {
            let step = self.cost(&c.loop_step)?;
            Ok((condition.cost.add(step.cost), step.shape))
        });
        self.locals.truncate(self.locals.len() - 1 - usize::from(c.iter_var2.is_some()));
        let result = self.cost(&c.result);
        self.locals.pop();
        let ((per_element, step_shape), result) = (per_element?, result?);
        let elements = range.shape.size();
        let cost = range.cost.add(init.cost).add(result.cost).add(elements.multiply(per_element));
        // A list built by the loop (map, filter) has at most as many
        // elements as the range.
        let shape = match step_shape {
            Shape::List { item, .. } if accu_is_list => Shape::List { len: elements, item },
            _ if accu_is_list => Shape::List { len: elements, item: Box::new(Shape::Dyn) },
            _ => result.shape,
        };
        Ok(Estimated { cost, shape })
    }

    /// The length bounds of `x` when `arg` is `size(x)` or `x.size()`.
    fn size_argument(&mut self, arg: &IdedExpr) -> Result<Option<Bounds>, CostError> {
        let Expr::Call(call) = &arg.expr else {
            return Ok(None);
        };
        let sized = match (call.func_name.as_str(), &call.target, call.args.as_slice()) {
            ("size", None, [x]) => x,
            ("size", Some(x), []) => x.as_ref(),
            _ => return Ok(None),
        };
        Ok(Some(self.cost(sized)?.shape.size()))
    }

    fn call(&mut self, call: &CallExpr) -> Result<Estimated, CostError> {
        // The parser reads `lists.range(n)` as a method of an identifier
        // `lists`: it is the namespaced function.
        let namespaced = match &call.target {
            Some(target) if matches!(&target.expr, Expr::Ident(ns) if ns == "lists") => {
                Some(format!("lists.{}", call.func_name))
            }
            _ => None,
        };
        let name = namespaced.as_deref().unwrap_or(call.func_name.as_str());
        let target = match &call.target {
            Some(target) if namespaced.is_none() => Some(self.cost(target)?),
            _ => None,
        };
        let args = call.args.iter().map(|arg| self.cost(arg)).collect::<Result<Vec<_>, _>>()?;
        let args_cost = total(&args.iter().map(|a| a.cost).collect::<Vec<_>>());
        // `lists.range(size(x))`: as long as `x` (cel-go knows no length
        // of a computed int, and takes the largest).
        let range_len = match (name, call.args.as_slice()) {
            ("lists.range", [arg]) => self.size_argument(arg)?,
            _ => None,
        };
        let unsupported = || CostError::UnsupportedFunction(name.to_owned());
        let scalar = |cost: Bounds| (cost, Shape::Scalar);
        let one = Bounds::fixed(1);
        let traversal = |shape: &Shape| shape.size().times_factor(STRING_TRAVERSAL_COST_FACTOR);
        let (cost, shape) = match (name, &target, args.as_slice()) {
            // Short-circuiting: not every argument is evaluated.
            (operators::LOGICAL_AND | operators::LOGICAL_OR, None, [lhs, rhs]) => {
                let max = lhs.cost.max.saturating_add(rhs.cost.max);
                return Ok(Estimated {
                    cost: Bounds { min: lhs.cost.min, max },
                    shape: Shape::Scalar,
                });
            }
            (operators::CONDITIONAL, None, [condition, yes, no]) => {
                return Ok(Estimated {
                    cost: condition.cost.add(yes.cost.union(no.cost)),
                    shape: yes.shape.clone().union(no.shape.clone()),
                });
            }
            // O(1): arithmetic, size, the quantity methods, conversions
            // other than between strings and bytes (cel-go `functionCost`);
            // `sign` is a function upstream, not a method (see
            // `kubernetes_cel::library`).
            (
                operators::LOGICAL_NOT
                | operators::NEGATE
                | operators::NOT_STRICTLY_FALSE
                | "size"
                | "sign"
                | "int"
                | "uint"
                | "double"
                | "bool",
                None,
                [_],
            )
            | (
                operators::SUBSTRACT | operators::MULTIPLY | operators::DIVIDE | operators::MODULO,
                None,
                [_, _],
            )
            | ("size", Some(_), [])
            | (
                "asInteger" | "isInteger" | "asApproximateFloat" | "isGreaterThan" | "isLessThan"
                | "compareTo",
                Some(_),
                _,
            ) => scalar(one),
            ("dyn", None, [value]) => (one, value.shape.clone()),
            (operators::EQUALS | operators::NOT_EQUALS, None, [lhs, rhs]) => {
                if lhs.shape == Shape::Quantity && rhs.shape == Shape::Quantity {
                    scalar(one)
                } else {
                    scalar(compare_sizes(&lhs.shape, &rhs.shape))
                }
            }
            (
                operators::LESS
                | operators::LESS_EQUALS
                | operators::GREATER
                | operators::GREATER_EQUALS,
                None,
                [lhs, rhs],
            ) => match (&lhs.shape, &rhs.shape) {
                (Shape::String(_), Shape::String(_)) => {
                    scalar(compare_sizes(&lhs.shape, &rhs.shape))
                }
                _ => scalar(one),
            },
            (operators::ADD, None, [lhs, rhs]) => add(&lhs.shape, &rhs.shape),
            (operators::INDEX, None, [container, key]) => {
                let shape = match (&container.shape, &key.shape) {
                    (Shape::List { item, .. }, _) => (**item).clone(),
                    (Shape::Map { value, .. }, _) => (**value).clone(),
                    (Shape::Object(_), _) => match &call.args[1].expr {
                        Expr::Literal(LiteralValue::String(key)) => {
                            field(&container.shape, key.inner(), self.missing)?
                        }
                        _ => match (self.missing, &container.shape) {
                            (MissingFields::Absent, Shape::Object(fields)) => fields
                                .values()
                                .cloned()
                                .reduce(Shape::union)
                                .unwrap_or(Shape::Absent),
                            _ => Shape::Dyn,
                        },
                    },
                    (Shape::Dyn, _) => Shape::Dyn,
                    (Shape::Absent, _) => Shape::Absent,
                    _ => return Err(unsupported()),
                };
                (one, shape)
            }
            // a.?b, a[?b] and the optional's methods: O(1), of unknown shape.
            (operators::OPT_SELECT | operators::OPT_INDEX, None, [_, _])
            | ("hasValue" | "value" | "orValue" | "or", Some(_), _) => (one, Shape::Dyn),
            (operators::IN, None, [_, container]) => match &container.shape {
                Shape::Map { .. } | Shape::Object(_) => scalar(one),
                shape => scalar(shape.size()),
            },
            ("startsWith" | "endsWith", Some(_), [prefix]) => scalar(traversal(&prefix.shape)),
            ("contains", Some(text), [part]) => {
                scalar(traversal(&text.shape).multiply(traversal(&part.shape)))
            }
            ("matches", Some(text), [regex]) => scalar(
                text.shape
                    .size()
                    .add(Bounds::fixed(1))
                    .times_factor(STRING_TRAVERSAL_COST_FACTOR)
                    .multiply(regex.shape.size().times_factor(REGEX_STRING_LENGTH_COST_FACTOR)),
            ),
            ("lowerAscii" | "upperAscii" | "trim", Some(text), []) => {
                (traversal(&text.shape), Shape::String(text.shape.size()))
            }
            ("quantity", None, [text]) => (traversal(&text.shape), Shape::Quantity),
            ("isQuantity", None, [text]) => scalar(traversal(&text.shape)),
            ("add" | "sub", Some(_), [_]) => (one, Shape::Quantity),
            // The decimal text of a number has at most 20 characters
            // (cel-go leaves the size unknown).
            ("string", None, [value]) => (
                one,
                match &value.shape {
                    Shape::String(len) => Shape::String(*len),
                    _ => Shape::String(Bounds::up_to(MAX_NUMBER_TEXT)),
                },
            ),
            // Kubernetes' string library (`k8s.io/apiserver/pkg/cel/library/cost.go`):
            // a traversal plus the building of the result, ⌈size × 0.2⌉;
            // as many parts as characters at most (cel-go leaves the
            // parts' size unknown: here no longer than the string).
            ("split", Some(text), [_]) => (
                text.shape.size().times_factor(2.0 * STRING_TRAVERSAL_COST_FACTOR),
                Shape::List {
                    len: Bounds::up_to(text.shape.size().max),
                    item: Box::new(Shape::String(Bounds::up_to(text.shape.size().max))),
                },
            ),
            // join: the result's size (items × their size, plus the
            // separators) times the traversal factor.
            ("join", Some(list), separator) => {
                let (len, item) = list_parts(&list.shape).ok_or_else(unsupported)?;
                let mut size = len.multiply(item.size());
                if let [separator] = separator {
                    let separators =
                        Bounds { min: len.min.saturating_sub(1), max: len.max.saturating_sub(1) };
                    size = size.add(separator.shape.size().multiply(separators));
                }
                (size.times_factor(STRING_TRAVERSAL_COST_FACTOR), Shape::String(size))
            }
            // The list library's one-pass functions: 1 per element, plus
            // the traversal of each element that is a string.
            ("indexOf" | "lastIndexOf" | "sum" | "max" | "min" | "isSorted", Some(list), _)
                if list_parts(&list.shape).is_some() =>
            {
                let (len, item) = list_parts(&list.shape).ok_or_else(unsupported)?;
                let per_item = match item {
                    Shape::String(size) => {
                        Bounds::fixed(1).add(size.times_factor(STRING_TRAVERSAL_COST_FACTOR))
                    }
                    _ => Bounds::fixed(1),
                };
                let shape = match name {
                    "max" | "min" => item.clone(),
                    _ => Shape::Scalar,
                };
                (len.multiply(per_item), shape)
            }
            // cel-go's ext.Lists (`ext/lists.go`): an allocating call of
            // cost factor 1 over the list (flatten: the outer one), plus 1.
            ("flatten", Some(list), []) => {
                let (len, item) = list_parts(&list.shape).ok_or_else(unsupported)?;
                let shape = match item {
                    Shape::List { len: inner, item: inner_item } => {
                        Shape::List { len: len.multiply(*inner), item: inner_item.clone() }
                    }
                    _ => list.shape.clone(),
                };
                (len.add(Bounds::fixed(1)), shape)
            }
            ("lists.range", None, [_]) => {
                let len = range_len.unwrap_or(Bounds::UNKNOWN);
                (len.add(Bounds::fixed(1)), Shape::List { len, item: Box::new(Shape::Scalar) })
            }
            ("indexOf" | "lastIndexOf", Some(text), _) => scalar(traversal(&text.shape)),
            _ => return Err(unsupported()),
        };
        // The target and the arguments are evaluated first.
        let target_cost = target.map_or(Bounds::fixed(0), |t| t.cost);
        Ok(Estimated { cost: target_cost.add(args_cost).add(cost), shape })
    }
}

/// The length and item shape of a list; a value of unknown shape is a
/// list of unknown length and items.
fn list_parts(shape: &Shape) -> Option<(Bounds, &Shape)> {
    match shape {
        Shape::List { len, item } => Some((*len, item)),
        Shape::Dyn => Some((Bounds::UNKNOWN, &Shape::Dyn)),
        _ => None,
    }
}

fn literal_shape(literal: &LiteralValue) -> Shape {
    match literal {
        LiteralValue::String(text) => {
            Shape::String(Bounds::fixed(text.inner().chars().count() as u64))
        }
        LiteralValue::Bytes(bytes) => Shape::String(Bounds::fixed(bytes.inner().len() as u64)),
        _ => Shape::Scalar,
    }
}

fn field(operand: &Shape, name: &str, missing: MissingFields) -> Result<Shape, CostError> {
    match operand {
        Shape::Object(fields) => Ok(fields.get(name).cloned().unwrap_or(match missing {
            MissingFields::Unknown => Shape::Dyn,
            MissingFields::Absent => Shape::Absent,
        })),
        Shape::Absent => Ok(Shape::Absent),
        Shape::Map { value, .. } => Ok((**value).clone()),
        Shape::Dyn => Ok(Shape::Dyn),
        _ => Err(CostError::NoField { field: name.to_owned() }),
    }
}

/// `==`, `!=` and string ordering: the length of the shorter side times the
/// traversal factor, at least 1 when neither side can be empty of size
/// (cel-go `functionCost`, `overloads.Equals`).
fn compare_sizes(lhs: &Shape, rhs: &Shape) -> Bounds {
    let smallest_max = lhs.size().max.min(rhs.size().max);
    Bounds { min: u64::from(smallest_max > 0), max: smallest_max }
        .times_factor(STRING_TRAVERSAL_COST_FACTOR)
}

/// `+`: strings are copied (their summed length times the traversal
/// factor), lists are joined at 1, numbers add at 1.
fn add(lhs: &Shape, rhs: &Shape) -> (Bounds, Shape) {
    match (lhs, rhs) {
        (Shape::List { len: a, item: i }, Shape::List { len: b, item: j }) => (
            Bounds::fixed(1),
            Shape::List {
                len: a.add(*b),
                item: Box::new(union_items(*a, (**i).clone(), *b, (**j).clone())),
            },
        ),
        (Shape::String(_) | Shape::Dyn, Shape::String(_) | Shape::Dyn) => {
            let len = lhs.size().add(rhs.size());
            (len.times_factor(STRING_TRAVERSAL_COST_FACTOR), Shape::String(len))
        }
        _ => (Bounds::fixed(1), Shape::Scalar),
    }
}

#[cfg(test)]
mod tests;
