//! The rules as ValidatingAdmissionPolicies and MutatingAdmissionPolicies
//! (admissionregistration.k8s.io), which the API server evaluates itself,
//! in CEL: each registry entry's CEL side ([`generated`]) named
//! `gpu-policy-<rule id>`, labelled, checked against a release, and bound
//! once per namespace mode. The settings are baked into the expressions,
//! not passed as parameters: docs/policy.md ("Settings are baked in") says
//! why.

pub mod cost;
pub mod cost_check;
pub mod coverage;
pub mod engine;

use serde_json::{Value, json};

use crate::install;
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::RuleId;
use crate::policy::rules::cel::{Action, CelPolicy, Resources, Variable};
use crate::policy::rules::{Entry, entries};
use crate::settings::{MODE_LABEL, Settings};
use kubernetes_cel::releases;

pub const API_VERSION: &str = "admissionregistration.k8s.io/v1";

/// What each namespace mode does with a violation.
pub const MODE_ACTIONS: [(&str, &str); 3] =
    [("enforce", "Deny"), ("warn", "Warn"), ("audit", "Audit")];

/// A generated policy and the rule it stands for.
#[derive(Debug, Clone)]
pub struct GeneratedPolicy {
    pub rule: RuleId,
    pub name: String,
    pub object: Value,
    /// Its violations warn in every namespace mode, never deny ([`Action::Warn`]).
    pub warn_only: bool,
}

fn named(variables: &[Variable]) -> Vec<Value> {
    variables.iter().map(|v| json!({"name": v.name, "expression": v.expression})).collect()
}

/// A rule's policy as the API server reads it: named
/// `gpu-policy-<rule id>` (`-claims` after it for claims), labelled as the
/// install, sent the requests its [`Resources`] name.
fn rendered(rule: RuleId, policy: CelPolicy, release: KubernetesVersion) -> GeneratedPolicy {
    let mut name = format!("{}-{}", install::NAME, rule.as_str());
    let rules = match policy.resources {
        Resources::Pods { ephemeral, workloads } => {
            let mut rules = install::pod_rules();
            if !ephemeral {
                rules.retain(|r| r["resources"][0] == "pods");
            }
            if workloads {
                rules.extend(install::workload_rules());
            }
            rules
        }
        Resources::PodUpdates => vec![install::pod_update_rule()],
        Resources::Claims => {
            name.push_str("-claims");
            vec![install::claim_rules(release)]
        }
    };
    let mut spec = json!({
        "failurePolicy": "Fail",
        "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": rules},
        "matchConditions": named(&policy.match_conditions),
        "variables": named(&policy.variables),
    });
    let warn_only = matches!(policy.action, Action::Warn(_));
    let kind = match policy.action {
        Action::Validate(validations) | Action::Warn(validations) => {
            spec["validations"] = (validations.iter())
                .map(|v| {
                    json!({
                        "expression": v.expression,
                        "messageExpression": v.message_expression,
                        "reason": "Forbidden",
                    })
                })
                .collect();
            "ValidatingAdmissionPolicy"
        }
        Action::Patch(patch) => {
            spec["reinvocationPolicy"] = json!("IfNeeded");
            spec["mutations"] =
                json!([{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}]);
            "MutatingAdmissionPolicy"
        }
    };
    let object = json!({
        "apiVersion": API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "labels": install::labels()},
        "spec": spec,
    });
    GeneratedPolicy { rule, name, object, warn_only }
}

/// The admission policies generated for one entry of the registry.
#[derive(Debug, Default)]
pub struct Generated {
    pub validating: Vec<GeneratedPolicy>,
    pub mutating: Vec<GeneratedPolicy>,
    /// The entry's policies the target release's API server would refuse.
    pub left_out: Vec<LeftOut>,
}

/// A policy not rendered for a release, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeftOut {
    pub policy: String,
    /// A MutatingAdmissionPolicy (else a ValidatingAdmissionPolicy).
    pub mutating: bool,
    pub reason: String,
}

impl Generated {
    fn keep_accepted_by(&mut self, release: KubernetesVersion) {
        let left_out = &mut self.left_out;
        for (mutating, list) in [(false, &mut self.validating), (true, &mut self.mutating)] {
            list.retain(|policy| {
                let reason = match refused_functions(&policy.object, release) {
                    Ok(refused) if refused.is_empty() => return true,
                    Ok(refused) => format!(
                        "the CEL of Kubernetes {release} lacks {}",
                        refused.iter().map(ToString::to_string).collect::<Vec<_>>().join(", ")
                    ),
                    Err(error) => format!("its CEL does not parse: {error}"),
                };
                left_out.push(LeftOut { policy: policy.name.clone(), mutating, reason });
                false
            });
        }
    }
}

fn refused_functions(
    policy: &Value,
    release: KubernetesVersion,
) -> Result<Vec<releases::Refused>, String> {
    let mut refused: Vec<releases::Refused> = Vec::new();
    for expression in expressions(policy) {
        for function in releases::refused(expression, release.minor())? {
            if !refused.contains(&function) {
                refused.push(function);
            }
        }
    }
    Ok(refused)
}

/// The policies of one registry entry for `release`, as its `api_server`
/// declares them, without those whose CEL the release refuses.
pub fn generated(
    rule: RuleId,
    entry: &Entry,
    settings: &Settings,
    release: KubernetesVersion,
) -> Generated {
    let mut generated = Generated::default();
    for policy in entry.api_server.policies(settings, release) {
        let list = match policy.is_mutating() {
            true => &mut generated.mutating,
            false => &mut generated.validating,
        };
        list.push(rendered(rule, policy, release));
    }
    generated.keep_accepted_by(release);
    generated
}

/// In the registry's order.
pub fn all_generated(settings: &Settings, release: KubernetesVersion) -> Generated {
    let mut all = Generated::default();
    for (rule, entry) in entries() {
        let generated = generated(rule, entry, settings, release);
        all.validating.extend(generated.validating);
        all.mutating.extend(generated.mutating);
        all.left_out.extend(generated.left_out);
    }
    all
}

/// The three bindings of a policy: one per namespace mode; with `warn_only`, enforce namespaces
/// warn as warn namespaces do.
pub fn bindings(kind: &str, policy_name: &str, warn_only: bool) -> Vec<Value> {
    let actions_field = match kind {
        "MutatingAdmissionPolicyBinding" => None,
        _ => Some("validationActions"),
    };
    MODE_ACTIONS
        .iter()
        .filter(|(mode, _)| actions_field.is_some() || *mode == "enforce")
        .map(|(mode, action)| {
            let mut spec = json!({
                "policyName": policy_name,
                "matchResources": {
                    "namespaceSelector": {"matchLabels": {MODE_LABEL: mode}}
                },
            });
            if let Some(field) = actions_field {
                let action = match (warn_only, *action) {
                    (true, "Deny") => "Warn",
                    (_, action) => action,
                };
                spec[field] = json!([action]);
            }
            json!({
                "apiVersion": API_VERSION,
                "kind": kind,
                "metadata": {"name": format!("{policy_name}-{mode}"), "labels": install::labels()},
                "spec": spec,
            })
        })
        .collect()
}

/// What `manifests --admission-policies` prints for a release.
#[derive(Debug, Default)]
pub struct Rendered {
    pub objects: Vec<Value>,
    /// One line each: a policy left out, or an API the release serves only
    /// when turned on.
    pub notes: Vec<String>,
}

/// Every object `manifests --admission-policies` prints for `release`: each
/// policy followed by its bindings; with `mutating`, the MutatingAdmissionPolicies
/// too (bound in enforce namespaces only; none before 1.34).
pub fn manifests(settings: &Settings, mutating: bool, release: KubernetesVersion) -> Rendered {
    let mut rendered = Rendered::default();
    let all = all_generated(settings, release);
    for policy in all.validating {
        let bindings = bindings("ValidatingAdmissionPolicyBinding", &policy.name, policy.warn_only);
        rendered.objects.push(policy.object);
        rendered.objects.extend(bindings);
    }
    let api = release.mutating_policies();
    match (mutating, api) {
        (false, _) => {}
        (true, None) => rendered.notes.push(format!(
            "no MutatingAdmissionPolicies: Kubernetes {release} does not serve them \
             (v1beta1 from 1.34, when turned on; v1 from 1.36); the webhook makes their changes"
        )),
        (true, Some(api)) => {
            let api_version = format!("admissionregistration.k8s.io/{}", api.version);
            for policy in all.mutating {
                let mut objects = vec![policy.object];
                objects.extend(bindings("MutatingAdmissionPolicyBinding", &policy.name, false));
                for mut object in objects {
                    object["apiVersion"] = Value::String(api_version.clone());
                    rendered.objects.push(object);
                }
            }
            if api.opt_in {
                rendered.notes.push(format!(
                    "MutatingAdmissionPolicies as {api_version}: Kubernetes {release} serves \
                     them only with the feature gate MutatingAdmissionPolicy=true and \
                     --runtime-config={api_version}=true on the API server"
                ));
            }
        }
    }
    for policy in all.left_out {
        if policy.mutating && !(mutating && api.is_some()) {
            continue;
        }
        let fallback = if policy.mutating {
            "the webhook makes its changes"
        } else {
            "the webhook enforces it"
        };
        rendered.notes.push(format!("{} left out: {}; {fallback}", policy.policy, policy.reason));
    }
    rendered
}

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

#[cfg(test)]
mod tests;
