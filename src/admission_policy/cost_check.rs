//! `gpu-policy manifests --admission-policies --cost`: every expression of
//! the generated policies estimated in order, each variable counted once
//! as Kubernetes charges it, over any object and over a reference object,
//! which the limits are held against (docs/policy.md, "gpu-policy's estimate").

use serde_json::{Value, json};

use super::all_generated;
use super::cost::{
    Bounds, CostError, MATCH_CONDITIONS_COST_BUDGET, MissingFields, PER_CALL_LIMIT,
    RUNTIME_COST_BUDGET, Shape, Variables, claim_policy_variables, estimate_value, total,
    variables, workload_policy_variables,
};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::message::thousands;
use crate::settings::{MODE_LABEL, Settings};

/// The sidecars and containers of the reference Pod (each with one GPU
/// and 10 environment variables), and the requests of the reference
/// ResourceClaim: a large GPU pod, which the default policies keep within
/// every limit (50 and 50 are past the per-call limit).
pub const REFERENCE_CONTAINERS: usize = 10;

/// One policy's costs: over any object, and over its reference object.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyCheck {
    pub worst: PolicyCost,
    /// What the reference object is, for the table's title.
    pub reference_name: String,
    pub reference: PolicyCost,
}

impl PolicyCheck {
    /// Whether every expression and both totals stay within their limits
    /// on the reference object.
    pub fn within_limits(&self) -> bool {
        self.reference.within_limits()
    }
}

/// The policies `manifests --admission-policies` generates from `settings`
/// (with `mutating`, the MutatingAdmissionPolicies too).
pub fn policies(settings: &Settings, mutating: bool) -> Vec<Value> {
    let all = all_generated(settings, KubernetesVersion::default());
    let mutating = all.mutating.into_iter().filter(|_| mutating);
    all.validating.into_iter().chain(mutating).map(|p| p.object).collect()
}

pub fn check(settings: &Settings, mutating: bool) -> Vec<PolicyCheck> {
    let policies = policies(settings, mutating);
    let namespace = json!({"metadata": {"name": "gpu", "labels": {MODE_LABEL: "enforce"}}});
    let request = json!({"operation": "CREATE", "namespace": "gpu"});
    policies
        .iter()
        .map(|policy| {
            let (reference_name, object) = if reads_claims(policy) {
                (
                    format!("a ResourceClaim of {REFERENCE_CONTAINERS} requests"),
                    claim_of_requests(REFERENCE_CONTAINERS),
                )
            } else {
                (
                    format!(
                        "a Pod of {REFERENCE_CONTAINERS} sidecars and {REFERENCE_CONTAINERS} containers"
                    ),
                    pod_of_containers(REFERENCE_CONTAINERS),
                )
            };
            let inputs = Inputs::request(&object, &Value::Null, &namespace, &request);
            PolicyCheck {
                worst: policy_cost(policy, &Inputs::worst_case(policy)),
                reference_name,
                reference: policy_cost(policy, &inputs),
            }
        })
        .collect()
}

/// Whether the policy matches ResourceClaims (and reads claims and their
/// templates) rather than Pods and workloads.
fn reads_claims(policy: &Value) -> bool {
    array(&policy["spec"]["matchConstraints"]["resourceRules"])
        .iter()
        .flat_map(|rule| array(&rule["resources"]))
        .any(|resource| resource == "resourceclaims")
}

/// A Pod of `n` sidecars and `n` containers, each with one GPU and 10
/// environment variables; quantities are strings, as the API server sends
/// them.
pub fn pod_of_containers(n: usize) -> Value {
    let container = |prefix: &str, i: usize, sidecar: bool| {
        let env: Vec<Value> =
            (0..10).map(|j| json!({"name": format!("VAR_{j}"), "value": "some value"})).collect();
        let mut c = json!({
            "name": format!("{prefix}-{i}"),
            "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
            "env": env,
            "resources": {"limits": {"nvidia.com/gpu": "1"}, "requests": {"nvidia.com/gpu": "1"}},
        });
        if sidecar {
            c["restartPolicy"] = json!("Always");
        }
        c
    };
    json!({
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "many", "namespace": "gpu"},
        "spec": {
            "initContainers": (0..n).map(|i| container("sidecar", i, true)).collect::<Vec<_>>(),
            "containers": (0..n).map(|i| container("main", i, false)).collect::<Vec<_>>(),
        }
    })
}

/// A ResourceClaim of `n` requests, each of one GPU.
pub fn claim_of_requests(n: usize) -> Value {
    let requests: Vec<Value> = (0..n)
        .map(|i| {
            json!({"name": format!("gpu-{i}"), "exactly": {
                "deviceClassName": "gpu.nvidia.com", "allocationMode": "ExactCount", "count": 1}})
        })
        .collect();
    json!({
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaim",
        "metadata": {"name": "many", "namespace": "gpu"},
        "spec": {"devices": {"requests": requests}},
    })
}

fn worst(cost: &Result<Bounds, CostError>) -> String {
    match cost {
        Ok(bounds) => figure(bounds.max),
        Err(error) => format!("not estimated: {error}"),
    }
}

fn verdict(cost: &Result<Bounds, CostError>, limit: u64) -> &'static str {
    match cost {
        Ok(bounds) if bounds.within(limit) => "within",
        Ok(_) => "**over**",
        Err(_) => "unknown",
    }
}

fn row(
    name: &str,
    any: &Result<Bounds, CostError>,
    one: &Result<Bounds, CostError>,
    limit: u64,
) -> String {
    format!(
        "| {name} | {} | {} | {} | {} |\n",
        worst(any),
        worst(one),
        figure(limit),
        verdict(one, limit)
    )
}

/// The Markdown table of a policy: each expression's worst case and its
/// cost on the reference object against the per-call limit, then the
/// totals against their budgets; the verdict is the reference object's.
pub fn markdown(check: &PolicyCheck) -> String {
    let (worst_case, reference) = (&check.worst, &check.reference);
    let mut out = format!(
        "`{}` ({}), on {}\n\n| Expression | Worst case | Reference | Limit | |\n|---|---:|---:|---:|---|\n",
        reference.name, reference.kind, check.reference_name
    );
    for (e, any) in reference.expressions.iter().zip(&worst_case.expressions) {
        let role = match e.role {
            Role::MatchCondition => "match condition ",
            Role::Variable => "variable ",
            _ => "",
        };
        out.push_str(&row(&format!("{role}`{}`", e.name), &any.cost, &e.cost, PER_CALL_LIMIT));
    }
    if reference.expressions.iter().any(|e| e.role == Role::MatchCondition) {
        out.push_str(&row(
            "match conditions together",
            &worst_case.match_conditions(),
            &reference.match_conditions(),
            MATCH_CONDITIONS_COST_BUDGET,
        ));
    }
    out.push_str(&row(
        "the rest together",
        &worst_case.runtime(),
        &reference.runtime(),
        RUNTIME_COST_BUDGET,
    ));
    out
}

/// What `--cost` prints: a legend, the table of each policy, and the
/// verdict.
pub fn report(checks: &[PolicyCheck]) -> String {
    let mut out = "\
The CEL cost of the generated policies' expressions, in cel-go units.
Worst case: on any object the schema admits (3 MiB of unbounded lists).
Reference: on the object named above the table; the limits are held
against it.
"
    .to_owned();
    for check in checks {
        out.push('\n');
        out.push_str(&markdown(check));
    }
    let over = checks.iter().filter(|c| !c.within_limits()).count();
    out.push('\n');
    out.push_str(&match over {
        0 => "Every policy is within the API server's limits on its reference object.\n".to_owned(),
        n => format!(
            "{n} of the policies are over the API server's limits on their reference object.\n"
        ),
    });
    out
}

/// What the expressions are estimated over.
#[derive(Debug, Clone)]
pub struct Inputs {
    variables: Variables,
    missing: MissingFields,
}

impl Inputs {
    /// The largest request the API server accepts: the worst case
    /// Kubernetes' estimator computes.
    pub fn worst_case(policy: &Value) -> Inputs {
        Inputs {
            variables: match reads_claims(policy) {
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
            variables: variables(
                shape(object),
                shape(old_object),
                shape(namespace),
                shape(request),
            ),
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
        self.sum(&[Role::Variable, Role::Validation, Role::Message, Role::Mutation])
    }

    /// Whether every expression and both totals stay within their limits
    /// (an expression that cannot be estimated does not).
    pub fn within_limits(&self) -> bool {
        self.expressions.iter().all(|e| e.cost.as_ref().is_ok_and(|c| c.within(PER_CALL_LIMIT)))
            && self.match_conditions().is_ok_and(|c| c.within(MATCH_CONDITIONS_COST_BUDGET))
            && self.runtime().is_ok_and(|c| c.within(RUNTIME_COST_BUDGET))
    }
}

pub fn policy_cost(policy: &Value, inputs: &Inputs) -> PolicyCost {
    let spec = &policy["spec"];
    let mut variables = inputs.variables.clone();
    let missing = inputs.missing;
    let mut expressions = Vec::new();
    let text = |value: &Value| value.as_str().unwrap_or_default().to_owned();
    for condition in array(&spec["matchConditions"]) {
        let (cost, _) = split(estimate_value(&text(&condition["expression"]), &variables, missing));
        expressions.push(ExpressionCost {
            role: Role::MatchCondition,
            name: text(&condition["name"]),
            cost,
        });
    }
    let mut declared = Vec::new();
    for variable in array(&spec["variables"]) {
        let name = text(&variable["name"]);
        let (cost, shape) =
            split(estimate_value(&text(&variable["expression"]), &variables, missing));
        declared.push((name.clone(), shape));
        set_variables(&mut variables, &declared);
        expressions.push(ExpressionCost { role: Role::Variable, name, cost });
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
    PolicyCost { name: text(&policy["metadata"]["name"]), kind: text(&policy["kind"]), expressions }
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
    let fields = declared.iter().map(|(name, shape)| (name.as_str(), shape.clone()));
    variables.insert("variables".to_owned(), Shape::object(fields));
}

/// A cost for people: thousands separated, `unbounded` past what 64 bits
/// hold.
pub fn figure(value: u64) -> String {
    match usize::try_from(value) {
        _ if value == u64::MAX => "unbounded".to_owned(),
        Ok(value) => thousands(value),
        Err(_) => value.to_string(),
    }
}

#[cfg(test)]
mod tests;
