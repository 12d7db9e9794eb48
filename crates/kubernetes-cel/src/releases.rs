//! The Kubernetes release that introduced each CEL function the admission
//! policy environment offers beyond CEL's standard library, from the
//! `IntroducedVersion` of its library in
//! `k8s.io/apiserver/pkg/cel/environment/base.go` (and, for
//! `jsonpatch.escapeKey`, the MutatingAdmissionPolicy environment), and the
//! functions of an expression that a release's API server refuses.
//!
//! By name: `compareTo` is both the quantity library's (1.28) and the
//! semver library's (1.33), and counts as the older; a semver value can
//! only come from `semver()`, which counts as 1.33.

use cel::IdedExpr;
use cel::common::ast::Expr;
use cel::parser::Parser;

/// Never in a Kubernetes CEL environment, though the `cel` crate offers
/// it (cel-go's strings extension from version 3; Kubernetes includes
/// version 2).
const NEVER: u32 = u32::MAX;

/// The minor release of Kubernetes 1 that introduced functions, and their
/// names, separated by spaces.
const INTRODUCED: &[(u32, &str)] = &[
    // cel-go ext.Strings version 0 (with CEL itself).
    (0, "charAt indexOf lastIndexOf lowerAscii upperAscii replace split substring trim join"),
    // ext.Strings version 2.
    (29, "format strings.quote"),
    (NEVER, "reverse"),
    // The Kubernetes list library, version 0.
    (0, "sum min max isSorted"),
    // The quantity library.
    (28, "quantity isQuantity sign isGreaterThan isLessThan compareTo add sub"),
    (28, "asInteger isInteger asApproximateFloat"),
    // The semver library.
    (33, "semver isSemver"),
    // cel-go ext.Lists version 3.
    (34, "flatten lists.range slice distinct sort sortBy"),
    // The MutatingAdmissionPolicy environment (alpha in 1.32).
    (32, "jsonpatch.escapeKey"),
];

/// The release that introduced `function`; None for CEL's standard
/// library and macros, which every release has.
pub fn introduced(function: &str) -> Option<u32> {
    let mut entries = INTRODUCED.iter();
    entries
        .find(|(_, names)| names.split(' ').any(|name| name == function))
        .map(|(minor, _)| *minor)
}

/// A function an API server refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refused {
    /// The function's name, namespaced (`lists.range`) where it is.
    pub function: String,
    /// The first minor release of Kubernetes 1 that accepts it; None when
    /// none does.
    pub accepted_from: Option<u32>,
}

impl std::fmt::Display for Refused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.accepted_from {
            Some(minor) => write!(f, "`{}` (from Kubernetes 1.{minor})", self.function),
            None => write!(f, "`{}` (not in Kubernetes' CEL)", self.function),
        }
    }
}

/// The functions of `expression` that the API server of Kubernetes
/// 1.`minor` refuses in a new policy, each once, outer calls before the
/// calls in their arguments; or the parse error.
///
/// An API server compiles a new expression with the libraries of the
/// release before its own (apiserver's `DefaultCompatibilityVersion` is
/// n-1), so a function introduced in 1.`n` is accepted from 1.`n+1`.
pub fn refused(expression: &str, minor: u32) -> Result<Vec<Refused>, String> {
    let mut refused: Vec<Refused> = Vec::new();
    for function in functions(expression)? {
        let Some(introduced_in) = introduced(&function) else {
            continue;
        };
        if introduced_in < minor || refused.iter().any(|r| r.function == function) {
            continue;
        }
        refused.push(Refused {
            function,
            accepted_from: (introduced_in != NEVER).then(|| introduced_in + 1),
        });
    }
    Ok(refused)
}

/// The names of the functions and operators (`_+_`) `expression` calls,
/// outer calls first, repeats included; or the parse error.
pub fn functions(expression: &str) -> Result<Vec<String>, String> {
    let ast = Parser::new()
        .enable_optional_syntax(true)
        .parse(expression)
        .map_err(|errors| errors.to_string())?;
    let mut called = Vec::new();
    calls(&ast, &mut called);
    Ok(called)
}

/// The names of the functions `expr` calls, outer calls first; `lists.range(n)` is
/// parsed as a method of an identifier `lists` and named as the namespaced
/// function it is. Iterative: a deep expression cannot exhaust the stack.
fn calls(expr: &IdedExpr, out: &mut Vec<String>) {
    let mut stack = vec![expr];
    while let Some(expr) = stack.pop() {
        if let Expr::Call(call) = &expr.expr {
            match call.target.as_deref().map(|t| &t.expr) {
                Some(Expr::Ident(ns))
                    if ["lists", "strings", "jsonpatch"].contains(&ns.as_str()) =>
                {
                    out.push(format!("{ns}.{}", call.func_name))
                }
                _ => out.push(call.func_name.clone()),
            }
        }
        stack.extend(super::children(expr).into_iter().rev());
    }
}

#[cfg(test)]
mod tests;
