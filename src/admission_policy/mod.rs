//! The policy without the webhook: the validating rules generated as
//! ValidatingAdmissionPolicies (admissionregistration.k8s.io/v1), which
//! the API server evaluates itself, in CEL, with no network hop.
//!
//! The policies come from iterating the rule registry
//! (`policy::rules::RULES`): each entry says what the API server does of
//! it, and [`generated`] makes that entry's policies. One policy per
//! validating rule, named `gpu-policy-<rule id>` (R2 has a second one for
//! DRA claims), and three bindings per policy selecting namespaces by
//! `gpu-policy.io/mode`: `enforce` denies, `warn` warns, `audit` writes
//! audit annotations. Their messages are the rules' own
//! `MessageTemplate`s, turned into CEL by `cel_text::message`, so the
//! policies and the webhook say a violation in the same words.
//!
//! The settings are baked into the expressions at generation rather than
//! passed as parameters: a parameter object is one more object whose
//! loss or edit changes the policy (a missing param makes a binding deny
//! or allow everything, by `parameterNotFoundAction`), and it would need
//! its own CRD or a ConfigMap everyone with write access to that namespace
//! can change. Generating from the same config file the webhook reads
//! keeps one source of truth: change the file, apply the output again.
//!
//! The namespace annotation `gpu-policy.io/max-gpus-per-pod` is read at
//! admission from `namespaceObject`, as the webhook reads it.
//!
//! The objects' vocabulary ([`Variable`], [`Validation`],
//! [`GeneratedPolicy`], [`API_VERSION`], [`MODE_ACTIONS`]) is in
//! `object.rs`, the CEL text the generators share in `cel_text.rs`; this
//! file builds the policies and bindings from the generators and defines
//! nothing they use.
//!
//! [`cost`]: the worst-case cost of their CEL expressions, against the
//! limits Kubernetes applies at run time; [`cost_check`]: the table
//! `manifests --admission-policies --cost` prints.

mod bounded_requests;
mod cel_text;
mod claims;
pub mod cost;
pub mod cost_check;
pub mod cost_report;
pub mod coverage;
mod device_paths;
pub mod engine;
mod mutating;
mod object;
mod runtime_class;
mod sharing;

use serde_json::{Value, json};

use crate::install;
use crate::policy::RuleId;
use crate::policy::rules::{Check, RULES, Rule};
use crate::settings::{MODE_LABEL, Settings};

pub use object::{API_VERSION, GeneratedPolicy, MODE_ACTIONS, Validation, Variable};

/// The pod-spec variables every pod policy starts with.
fn pod_variables() -> Vec<Variable> {
    vec![
        Variable::new("spec", cel_text::POD_SPEC),
        Variable::new("inits", cel_text::INITS),
        Variable::new("regulars", cel_text::REGULARS),
        Variable::new("containers", cel_text::CONTAINERS),
        Variable::new("controller", cel_text::CONTROLLER),
    ]
}

fn policy(
    name: &str,
    rules: Vec<Value>,
    match_conditions: Vec<Variable>,
    variables: Vec<Variable>,
    validations: Vec<Validation>,
) -> Value {
    json!({
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": name, "labels": install::labels()},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": rules},
            "matchConditions": match_conditions.iter().map(Variable::to_json).collect::<Vec<_>>(),
            "variables": variables.iter().map(Variable::to_json).collect::<Vec<_>>(),
            "validations": validations.iter().map(Validation::to_json).collect::<Vec<_>>(),
        }
    })
}

fn pod_policy(
    rule: RuleId,
    with_ephemeral: bool,
    variables: Vec<Variable>,
    validations: Vec<Validation>,
) -> GeneratedPolicy {
    let name = format!("{}-{}", install::NAME, rule.as_str());
    let mut rules = install::pod_rules();
    if !with_ephemeral {
        rules.retain(|r| r["resources"][0] == "pods");
    }
    rules.extend(install::workload_rules());
    let mut all_variables = pod_variables();
    all_variables.extend(variables);
    let conditions = vec![Variable::new("has-pod-spec", cel_text::HAS_SPEC)];
    GeneratedPolicy {
        rule,
        object: policy(&name, rules, conditions, all_variables, validations),
        name,
    }
}

/// The admission policies generated for one entry of the registry.
#[derive(Debug, Default)]
pub struct Generated {
    pub validating: Vec<GeneratedPolicy>,
    pub mutating: Vec<GeneratedPolicy>,
}

/// The policies of one registry entry, as its `api_server` declares them
/// (a test holds the two together). The match names every rule, so a new
/// rule does not compile until its CEL side is decided.
pub fn generated(rule: &Rule, settings: &Settings) -> Generated {
    let validating = |policy| Generated {
        validating: vec![policy],
        mutating: Vec::new(),
    };
    match rule.id {
        RuleId::VisibleDevices => Generated {
            validating: Vec::new(),
            mutating: vec![mutating::visible_devices(settings)],
        },
        RuleId::BoundedRequests => match rule.check {
            Check::Claim(_) => {
                let name = format!(
                    "{}-{}-claims",
                    install::NAME,
                    RuleId::BoundedRequests.as_str()
                );
                validating(GeneratedPolicy {
                    rule: RuleId::BoundedRequests,
                    object: policy(
                        &name,
                        vec![install::claim_rules()],
                        claims::match_conditions(),
                        claims::variables(settings),
                        claims::validations(settings),
                    ),
                    name,
                })
            }
            Check::Pod(_) | Check::Allowlist(_) => validating(pod_policy(
                RuleId::BoundedRequests,
                false,
                bounded_requests::variables(settings),
                bounded_requests::validations(settings),
            )),
        },
        RuleId::RuntimeClass => Generated {
            validating: vec![pod_policy(
                RuleId::RuntimeClass,
                false,
                runtime_class::variables(settings),
                runtime_class::validations(settings),
            )],
            // None with `runtimeClassName: ""`: nothing to inject.
            mutating: mutating::runtime_class(settings).into_iter().collect(),
        },
        // Webhook only: see its `API_SERVER`.
        RuleId::ComputeAffinity => Generated::default(),
        // In the other policies' CEL (`cel_text::allowlisted`).
        RuleId::Allowlist => Generated::default(),
        RuleId::WebhookAnnotations => Generated {
            validating: Vec::new(),
            mutating: vec![mutating::webhook_annotations()],
        },
        RuleId::DevicePaths => validating(pod_policy(
            RuleId::DevicePaths,
            true,
            device_paths::variables(settings),
            device_paths::validations(settings),
        )),
    }
}

/// The ValidatingAdmissionPolicies of the registry's rules, in its order,
/// built from the settings.
pub fn validating_policies(settings: &Settings) -> Vec<GeneratedPolicy> {
    RULES
        .iter()
        .flat_map(|rule| generated(rule, settings).validating)
        .collect()
}

/// The MutatingAdmissionPolicies of the registry's rules, in its order,
/// built from the settings.
pub fn mutating_policies(settings: &Settings) -> Vec<GeneratedPolicy> {
    RULES
        .iter()
        .flat_map(|rule| generated(rule, settings).mutating)
        .collect()
}

/// The three bindings of a policy: one per namespace mode.
pub fn bindings(kind: &str, policy_name: &str) -> Vec<Value> {
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

/// Every object `manifests --admission-policies` prints: the policies,
/// each followed by its bindings; with `mutating`, the
/// MutatingAdmissionPolicies too (bound in enforce namespaces only).
pub fn manifests(settings: &Settings, mutating: bool) -> Vec<Value> {
    let mut objects = Vec::new();
    for policy in validating_policies(settings) {
        let bindings = bindings("ValidatingAdmissionPolicyBinding", &policy.name);
        objects.push(policy.object);
        objects.extend(bindings);
    }
    if mutating {
        for policy in mutating_policies(settings) {
            let bindings = bindings("MutatingAdmissionPolicyBinding", &policy.name);
            objects.push(policy.object);
            objects.extend(bindings);
        }
    }
    objects
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A rule declared validating (mutating) in the registry has a
    /// validating (mutating) policy, and only then.
    #[test]
    fn the_generated_policies_are_the_ones_the_registry_declares() {
        let settings = Settings::default();
        for rule in RULES {
            let policies = generated(rule, &settings);
            let name = format!("{} ({})", rule.id, rule.check.target());
            assert_eq!(
                !policies.validating.is_empty(),
                rule.api_server.validating(),
                "{name}"
            );
            assert_eq!(
                !policies.mutating.is_empty(),
                rule.api_server.mutating(),
                "{name}"
            );
            let all = policies.validating.iter().chain(&policies.mutating);
            assert!(all.clone().all(|p| p.rule == rule.id), "{name}");
            assert!(all.clone().count() <= 2, "{name}");
        }
    }

    /// Settings may leave a declared mutation out (`runtimeClassName: ""`),
    /// never add an undeclared policy.
    #[test]
    fn settings_never_add_an_undeclared_policy() {
        let settings = match Settings::from_yaml("runtimeClassName: ''", "test") {
            Ok(settings) => settings,
            Err(err) => panic!("{err}"),
        };
        for rule in RULES {
            let policies = generated(rule, &settings);
            assert!(policies.validating.is_empty() || rule.api_server.validating());
            assert!(policies.mutating.is_empty() || rule.api_server.mutating());
        }
        assert!(
            mutating_policies(&settings)
                .iter()
                .all(|p| p.rule != RuleId::RuntimeClass)
        );
    }
}
