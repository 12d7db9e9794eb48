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
pub mod coverage;
mod device_paths;
pub mod engine;
mod mutating;
mod object;
mod runtime_class;
mod sharing;

use serde_json::{Value, json};

use crate::install;
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::RuleId;
use crate::policy::rules::{Check, RULES, Rule};
use crate::settings::{MODE_LABEL, Settings};
use kubernetes_cel::releases;

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
    /// Moves the policies whose CEL `release` refuses to `left_out`.
    fn keep_accepted_by(&mut self, release: KubernetesVersion) {
        let left_out = &mut self.left_out;
        for (mutating, list) in [(false, &mut self.validating), (true, &mut self.mutating)] {
            list.retain(|policy| {
                let reason = match refused_functions(&policy.object, release) {
                    Ok(refused) if refused.is_empty() => return true,
                    Ok(refused) => format!(
                        "the CEL of Kubernetes {release} lacks {}",
                        refused
                            .iter()
                            .map(ToString::to_string)
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                    Err(error) => format!("its CEL does not parse: {error}"),
                };
                left_out.push(LeftOut {
                    policy: policy.name.clone(),
                    mutating,
                    reason,
                });
                false
            });
        }
    }
}

/// The functions of every expression of a policy that `release` refuses.
fn refused_functions(
    policy: &Value,
    release: KubernetesVersion,
) -> Result<Vec<releases::Refused>, String> {
    let mut refused: Vec<releases::Refused> = Vec::new();
    for expression in object::expressions(policy) {
        for function in releases::refused(expression, release.minor())? {
            if !refused.contains(&function) {
                refused.push(function);
            }
        }
    }
    Ok(refused)
}

/// The policies of one registry entry for `release`, as its `api_server`
/// declares them (a test holds the two together), without those whose CEL
/// the release refuses. The match names every rule, so a new rule does
/// not compile until its CEL side is decided.
pub fn generated(rule: &Rule, settings: &Settings, release: KubernetesVersion) -> Generated {
    let mut generated = generated_newest_cel(rule, settings, release);
    generated.keep_accepted_by(release);
    generated
}

fn generated_newest_cel(rule: &Rule, settings: &Settings, release: KubernetesVersion) -> Generated {
    let validating = |policy| Generated {
        validating: vec![policy],
        ..Generated::default()
    };
    match rule.id {
        RuleId::VisibleDevices => Generated {
            mutating: vec![mutating::visible_devices(settings)],
            ..Generated::default()
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
                        vec![install::claim_rules(release)],
                        claims::match_conditions(),
                        claims::variables(settings, release.dra()),
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
            ..Generated::default()
        },
        // Webhook only: see its `API_SERVER`.
        RuleId::ComputeAffinity => Generated::default(),
        // In the other policies' CEL (`cel_text::allowlisted`).
        RuleId::Allowlist => Generated::default(),
        RuleId::WebhookAnnotations => Generated {
            mutating: vec![mutating::webhook_annotations()],
            ..Generated::default()
        },
        RuleId::DevicePaths => validating(pod_policy(
            RuleId::DevicePaths,
            true,
            device_paths::variables(settings),
            device_paths::validations(settings),
        )),
    }
}

/// The policies of every registry entry, in its order, built from the
/// settings for `release`.
pub fn all_generated(settings: &Settings, release: KubernetesVersion) -> Generated {
    let mut all = Generated::default();
    for rule in RULES {
        let generated = generated(rule, settings, release);
        all.validating.extend(generated.validating);
        all.mutating.extend(generated.mutating);
        all.left_out.extend(generated.left_out);
    }
    all
}

/// The ValidatingAdmissionPolicies of the registry's rules, in its order,
/// built from the settings for `release`.
pub fn validating_policies(
    settings: &Settings,
    release: KubernetesVersion,
) -> Vec<GeneratedPolicy> {
    all_generated(settings, release).validating
}

/// The MutatingAdmissionPolicies of the registry's rules, in its order,
/// built from the settings for `release`.
pub fn mutating_policies(settings: &Settings, release: KubernetesVersion) -> Vec<GeneratedPolicy> {
    all_generated(settings, release).mutating
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

/// What `manifests --admission-policies` prints for a release, and what
/// it says of what it left out.
#[derive(Debug, Default)]
pub struct Rendered {
    pub objects: Vec<Value>,
    /// One line each: a policy left out, or an API the release serves only
    /// when turned on.
    pub notes: Vec<String>,
}

/// Every object `manifests --admission-policies` prints for `release`: the
/// policies, each followed by its bindings; with `mutating`, the
/// MutatingAdmissionPolicies too (bound in enforce namespaces only), in
/// the version the release serves, or none before 1.34.
pub fn manifests(settings: &Settings, mutating: bool, release: KubernetesVersion) -> Rendered {
    let mut rendered = Rendered::default();
    let all = all_generated(settings, release);
    for policy in all.validating {
        let bindings = bindings("ValidatingAdmissionPolicyBinding", &policy.name);
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
                objects.extend(bindings("MutatingAdmissionPolicyBinding", &policy.name));
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
        rendered.notes.push(format!(
            "{} left out: {}; {fallback}",
            policy.policy, policy.reason
        ));
    }
    rendered
}

#[cfg(test)]
mod tests;
