//! `gpu-policy manifests --admission-policies --cost`: every expression of
//! the generated policies, its worst case and its cost on a reference
//! object, against the limits the API server applies at run time.
//!
//! The worst case ([`Inputs::worst_case`]) is over any object the schema
//! admits, 3 MiB of lists without `maxItems`: every policy that loops over
//! the containers passes the per-call limit there, whatever the settings,
//! so it is shown but decides nothing (docs/policy.md, "Admission policy
//! cost", says why). The limits are held against the cost on a reference
//! object ([`Inputs::request`]): a Pod of [`REFERENCE_CONTAINERS`] sidecars
//! and as many containers, or a ResourceClaim of as many requests. That is
//! the same model over the object's own sizes, an upper bound of what the
//! API server charges for it: gpu-policy's CEL evaluator counts no cost,
//! so nothing here is measured.

use serde_json::{Value, json};

use super::cost::{
    Bounds, CostError, MATCH_CONDITIONS_COST_BUDGET, PER_CALL_LIMIT, RUNTIME_COST_BUDGET,
};
use super::cost_report::{Inputs, PolicyCost, Role, figure, policy_cost};
use super::{mutating_policies, validating_policies};
use crate::kubernetes_version::KubernetesVersion;
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

/// The costs of the policies `manifests --admission-policies` generates
/// from `settings` (with `mutating`, the MutatingAdmissionPolicies too).
pub fn check(settings: &Settings, mutating: bool) -> Vec<PolicyCheck> {
    let mut policies: Vec<Value> = validating_policies(settings, KubernetesVersion::default())
        .into_iter()
        .map(|p| p.object)
        .collect();
    if mutating {
        policies.extend(
            mutating_policies(settings, KubernetesVersion::default())
                .into_iter()
                .map(|p| p.object),
        );
    }
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

fn reads_claims(policy: &Value) -> bool {
    policy["spec"]["matchConstraints"]["resourceRules"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|rule| rule["resources"].as_array())
        .flatten()
        .any(|resource| resource == "resourceclaims")
}

/// A Pod of `n` sidecars and `n` containers, each with one GPU and 10
/// environment variables; quantities are strings, as the API server sends
/// them.
pub fn pod_of_containers(n: usize) -> Value {
    let container = |prefix: &str, i: usize, sidecar: bool| {
        let env: Vec<Value> = (0..10)
            .map(|j| json!({"name": format!("VAR_{j}"), "value": "some value"}))
            .collect();
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

/// One row: an expression or a total, its two costs and its limit.
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
        out.push_str(&row(
            &format!("{role}`{}`", e.name),
            &any.cost,
            &e.cost,
            PER_CALL_LIMIT,
        ));
    }
    if reference
        .expressions
        .iter()
        .any(|e| e.role == Role::MatchCondition)
    {
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

#[cfg(test)]
mod tests;
