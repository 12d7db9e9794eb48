//! The worst-case cost of every expression of the generated admission
//! policies, per policy, against the limits Kubernetes applies at run time.
//!
//! Reads a generated ValidatingAdmissionPolicy or MutatingAdmissionPolicy
//! (its `matchConditions`, `variables`, `validations` with their
//! `messageExpression`s, and `mutations`) and estimates each expression
//! with [`cost`](super::cost): a variable's value has the shape its
//! expression computes, for the expressions after it. A policy on
//! ResourceClaims reads claims and their templates; any other reads a Pod
//! or a workload template.
//!
//! Kubernetes evaluates a variable once per request, when an expression
//! first reads it, and charges its cost to the budget of that evaluation
//! (`k8s.io/apiserver/pkg/admission/plugin/cel/activation.go`): the total
//! of a policy counts each variable once, with the validations and their
//! messages (or the mutations), against [`RUNTIME_COST_BUDGET`]; the match
//! conditions against [`MATCH_CONDITIONS_COST_BUDGET`]. Each expression,
//! a variable's included, is also held to [`PER_CALL_LIMIT`] on its own.

use serde_json::Value;

use super::cost::{
    Bounds, CostError, MATCH_CONDITIONS_COST_BUDGET, MissingFields, PER_CALL_LIMIT,
    RUNTIME_COST_BUDGET, Shape, Variables, claim_policy_variables, estimate_value, total,
    workload_policy_variables,
};

/// What the expressions are estimated over.
#[derive(Debug, Clone)]
pub struct Inputs {
    variables: Variables,
    missing: MissingFields,
}

impl Inputs {
    /// The largest request the API server accepts: the worst case
    /// Kubernetes' estimator computes. A policy on ResourceClaims reads
    /// claims and their templates; any other a Pod or a workload.
    pub fn worst_case(policy: &Value) -> Inputs {
        let reads_claims = array(&policy["spec"]["matchConstraints"]["resourceRules"])
            .iter()
            .flat_map(|rule| array(&rule["resources"]))
            .any(|resource| resource == "resourceclaims");
        Inputs {
            variables: match reads_claims {
                true => claim_policy_variables(),
                false => workload_policy_variables(),
            },
            missing: MissingFields::Unknown,
        }
    }

    /// One request: `object`, `oldObject` (null on a create), the
    /// namespace and the request's attributes, each with its own sizes.
    /// The estimate bounds what evaluating the policy on it costs.
    pub fn request(
        object: &Value,
        old_object: &Value,
        namespace: &Value,
        request: &Value,
    ) -> Inputs {
        // A null reads as an object without fields: `x != null && has(x.f)`
        // is costed on both sides.
        let shape = |value: &Value| match value {
            Value::Null => Shape::Object(Default::default()),
            value => Shape::of_value(value),
        };
        Inputs {
            variables: [
                ("object", shape(object)),
                ("oldObject", shape(old_object)),
                ("namespaceObject", shape(namespace)),
                ("request", shape(request)),
            ]
            .into_iter()
            .map(|(name, shape)| (name.to_owned(), shape))
            .collect(),
            missing: MissingFields::Absent,
        }
    }
}

/// Where an expression sits in its policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    MatchCondition,
    Variable,
    Validation,
    Message,
    Mutation,
}

/// One expression's worst case, or why it has none.
#[derive(Debug, Clone, PartialEq)]
pub struct ExpressionCost {
    pub role: Role,
    /// The variable's or match condition's name; `validation 2`,
    /// `message 2` or `mutation 1` for the others.
    pub name: String,
    pub cost: Result<Bounds, CostError>,
}

impl ExpressionCost {
    /// Whether its worst case stays within the per-call limit (an
    /// expression that cannot be estimated does not).
    pub fn within_per_call_limit(&self) -> bool {
        self.cost.as_ref().is_ok_and(|c| c.within(PER_CALL_LIMIT))
    }
}

/// The expressions of one policy and their worst cases.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCost {
    pub name: String,
    /// `ValidatingAdmissionPolicy` or `MutatingAdmissionPolicy`.
    pub kind: String,
    pub expressions: Vec<ExpressionCost>,
}

impl PolicyCost {
    fn sum(&self, roles: &[Role]) -> Result<Bounds, CostError> {
        let costs = self
            .expressions
            .iter()
            .filter(|e| roles.contains(&e.role))
            .map(|e| e.cost.clone())
            .collect::<Result<Vec<_>, _>>()?;
        Ok(total(&costs))
    }

    /// The match conditions together, against
    /// [`MATCH_CONDITIONS_COST_BUDGET`].
    pub fn match_conditions(&self) -> Result<Bounds, CostError> {
        self.sum(&[Role::MatchCondition])
    }

    /// Variables, validations, messages and mutations together, against
    /// [`RUNTIME_COST_BUDGET`].
    pub fn runtime(&self) -> Result<Bounds, CostError> {
        self.sum(&[
            Role::Variable,
            Role::Validation,
            Role::Message,
            Role::Mutation,
        ])
    }

    /// Whether the worst case of every expression and both totals stay
    /// within their limits.
    pub fn within_limits(&self) -> bool {
        self.expressions
            .iter()
            .all(ExpressionCost::within_per_call_limit)
            && self
                .match_conditions()
                .is_ok_and(|c| c.within(MATCH_CONDITIONS_COST_BUDGET))
            && self.runtime().is_ok_and(|c| c.within(RUNTIME_COST_BUDGET))
    }
}

/// The cost ranges of a generated policy's expressions over `inputs`.
pub fn policy_cost(policy: &Value, inputs: &Inputs) -> PolicyCost {
    let spec = &policy["spec"];
    let mut variables = inputs.variables.clone();
    let missing = inputs.missing;
    let mut expressions = Vec::new();
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    for condition in array(&spec["matchConditions"]) {
        let (cost, _) = split(estimate_value(
            &text(&condition["expression"]),
            &variables,
            missing,
        ));
        expressions.push(ExpressionCost {
            role: Role::MatchCondition,
            name: text(&condition["name"]),
            cost,
        });
    }
    let mut declared = Vec::new();
    for variable in array(&spec["variables"]) {
        let name = text(&variable["name"]);
        let (cost, shape) = split(estimate_value(
            &text(&variable["expression"]),
            &variables,
            missing,
        ));
        declared.push((name.clone(), shape));
        set_variables(&mut variables, &declared);
        expressions.push(ExpressionCost {
            role: Role::Variable,
            name,
            cost,
        });
    }
    set_variables(&mut variables, &declared);
    for (i, validation) in array(&spec["validations"]).iter().enumerate() {
        let n = i + 1;
        for (role, field, name) in [
            (Role::Validation, "expression", format!("validation {n}")),
            (Role::Message, "messageExpression", format!("message {n}")),
        ] {
            if let Some(expression) = validation[field].as_str() {
                let (cost, _) = split(estimate_value(expression, &variables, missing));
                expressions.push(ExpressionCost { role, name, cost });
            }
        }
    }
    for (i, mutation) in array(&spec["mutations"]).iter().enumerate() {
        let patch = mutation["jsonPatch"]["expression"]
            .as_str()
            .or_else(|| mutation["applyConfiguration"]["expression"].as_str())
            .unwrap_or_default();
        let (cost, _) = split(estimate_value(patch, &variables, missing));
        expressions.push(ExpressionCost {
            role: Role::Mutation,
            name: format!("mutation {}", i + 1),
            cost,
        });
    }
    PolicyCost {
        name: text(&policy["metadata"]["name"]),
        kind: text(&policy["kind"]),
        expressions,
    }
}

fn array(value: &Value) -> &[Value] {
    value.as_array().map_or(&[], Vec::as_slice)
}

/// The cost, and the shape the next expressions see (unknown when the
/// expression has no estimate).
fn split(estimated: Result<(Bounds, Shape), CostError>) -> (Result<Bounds, CostError>, Shape) {
    match estimated {
        Ok((cost, shape)) => (Ok(cost), shape),
        Err(error) => (Err(error), Shape::Dyn),
    }
}

fn set_variables(variables: &mut Variables, declared: &[(String, Shape)]) {
    let fields = declared
        .iter()
        .map(|(name, shape)| (name.as_str(), shape.clone()));
    variables.insert("variables".to_owned(), Shape::object(fields));
}

/// A cost for people: thousands separated, `unbounded` past what 64 bits
/// hold.
pub fn figure(value: u64) -> String {
    if value == u64::MAX {
        return "unbounded".to_owned();
    }
    let digits = value.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests;
