//! The vocabulary of the generated policy objects: the API version, a
//! named CEL expression ([`Variable`]), a validation ([`Validation`]), a
//! generated policy and the rule it stands for ([`GeneratedPolicy`]), and
//! what each namespace mode does with a violation ([`MODE_ACTIONS`]).
//!
//! A leaf: the generators beside it (`claims.rs`, `mutating.rs`, ...) and
//! `mod.rs`, which builds the policies and bindings from them, use it.

use serde_json::{Value, json};

use crate::policy::RuleId;

pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// A named CEL expression: a variable or a match condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub expression: String,
}

impl Variable {
    pub fn new(name: &str, expression: &str) -> Self {
        Self {
            name: name.to_owned(),
            expression: expression.to_owned(),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        json!({"name": self.name, "expression": self.expression})
    }
}

/// One validation: an expression that must hold, and the message that
/// names what does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    pub expression: String,
    pub message_expression: String,
}

impl Validation {
    pub fn new(expression: &str, message_expression: &str) -> Self {
        Self {
            expression: expression.to_owned(),
            message_expression: message_expression.to_owned(),
        }
    }

    pub(super) fn to_json(&self) -> Value {
        json!({
            "expression": self.expression,
            "messageExpression": self.message_expression,
            "reason": "Forbidden",
        })
    }
}

/// A generated policy and the rule it stands for.
#[derive(Debug, Clone)]
pub struct GeneratedPolicy {
    pub rule: RuleId,
    pub name: String,
    pub object: Value,
}

/// What each namespace mode does with a violation.
pub const MODE_ACTIONS: [(&str, &str); 3] =
    [("enforce", "Deny"), ("warn", "Warn"), ("audit", "Audit")];

/// The CEL expressions of a policy object: every `expression`,
/// `messageExpression` and `valueExpression` string in it, at any depth
/// (validations, variables, match conditions, audit annotations,
/// mutations).
pub fn expressions(policy: &Value) -> Vec<&str> {
    const KEYS: [&str; 3] = ["expression", "messageExpression", "valueExpression"];
    let mut found = Vec::new();
    let mut stack = vec![policy];
    while let Some(value) = stack.pop() {
        match value {
            Value::Object(map) => {
                for (key, value) in map {
                    match value {
                        Value::String(text) if KEYS.contains(&key.as_str()) => {
                            found.push(text.as_str())
                        }
                        _ => stack.push(value),
                    }
                }
            }
            Value::Array(items) => stack.extend(items),
            _ => {}
        }
    }
    found
}
