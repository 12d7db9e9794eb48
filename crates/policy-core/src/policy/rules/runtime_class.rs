//! R3 `runtime-class` (mutating + validating): GPU pods run under the nvidia runtime, and only
//! GPU pods do (docs/policy.md, "R3 runtime-class").
//!
//! Reads: `spec.runtimeClassName`; whether the pod is a GPU pod; the configured
//! `runtimeClassName` (default `nvidia`) and `gpuRuntimeClasses`.
//!
//! Changes: a GPU pod without `runtimeClassName` gets the configured one (none when `""`: CDI,
//! or `nvidia` the node's default); where nvidia is not containerd's default (the safer
//! setup) it would otherwise start under runc and see no card. A pod whose only GPUs come
//! through DRA claims gets none: the runtime injects those through CDI, and the class would
//! hand its other containers whatever their image's `ENV` says.
//!
//! Denies: a GPU pod whose class is not in `gpuRuntimeClasses`; a pod neither GPU nor
//! allowlisted naming one of them: such a class hands every card to whatever the image's `ENV`
//! says, so it is reserved for pods the device plugin accounts for.

use json_patch::PatchOperation;
use serde_json::Value;

use super::reapply;
use super::rule::{
    ApiServer, Check, Coverage, Entry, Findings, Mutation, Rule, RuleInput, Severity,
};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::cluster::RuntimeClassInfo;
use crate::policy::fields::member;
use crate::policy::message::{MessageTemplate, Notice, NoticeKind};
use crate::policy::patch::{Step, add, pointer_below};
use crate::policy::pod::PodView;
use crate::policy::rules::cel::{Action, CelPolicy, Resources, Validation, Variable};
use crate::policy::rules::cel_sharing as sharing;
use crate::policy::rules::cel_text::{self as cel, Fill};
use crate::settings::{Settings, same_toleration};

pub const RULE: Rule = Rule {
    name: "runtime-class",
    severity: Severity::Medium,
    entries: &[Entry {
        check: Check::Pod(check),
        api_server: ApiServer::Policies {
            coverage: Coverage {
                enforced: "a GPU pod with a class outside `gpuRuntimeClasses`; the reserved class on a pod \
        that asks for no GPU, names no claim and is not allowlisted; the injection of \
        `runtimeClassName` (mutating policy; none is generated when it is `\"\"`)",
                webhook_only: "a pod whose GPUs come only through a claim (a pod naming a claim is never \
        denied the reserved class, as the webhook does while a claim is unresolved); whether \
        the RuntimeClass exists; its overhead and scheduling (other objects)",
            },
            policies,
        },
    }],
};

/// `{class}`: the class, quoted; `{allowed}`: [`allowed_phrase`].
pub const NOT_GPU_CLASS: MessageTemplate = MessageTemplate::new(
    "runtimeClassName {class} is not a GPU runtime class; use {allowed} or remove the field",
);
pub const RESERVED_CLASS: MessageTemplate = MessageTemplate::new(
    "runtimeClassName {class} is reserved for pods that request a GPU; \
     remove it, or request nvidia.com/gpu in limits",
);

/// `gpuRuntimeClasses` in a message: `nvidia or nvidia-cdi`.
pub fn allowed_phrase(allowed: &[String]) -> String {
    allowed.join(" or ")
}

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    if input.scope.is_update() {
        // What this rule wrote at creation, put back where the update
        // undid it (a second `kubectl apply`).
        return reapply::made_again(input, check);
    }
    let mut findings = Findings::default();
    if !input.scope.is_whole() {
        return findings;
    }
    let config = input.settings.config();
    let allowed = &config.gpu_runtime_classes;
    let class = input.view.runtime_class_name.filter(|name| !name.is_empty());
    // A pod with DRA GPUs is a GPU pod below, but only device-plugin GPUs need the nvidia runtime.
    let gpu_pod = input.view.is_gpu_pod();
    let needs_runtime = input.view.is_device_plugin_gpu_pod();
    match class {
        None if needs_runtime && !config.runtime_class_name.is_empty() => {
            let name = &config.runtime_class_name;
            let info = match input.cluster {
                None => None,
                Some(cluster) => match cluster.runtime_class(name) {
                    Some(info) => Some(info),
                    None => {
                        // The GPU Operator in CDI mode creates no class: injecting a missing one
                        // would make every GPU pod fail.
                        findings.notices.push(Notice::new(
                            NoticeKind::MissingRuntimeClass,
                            format!(
                                "runtime-class: RuntimeClass {name:?} does not exist; \
                                 runtimeClassName not set"
                            ),
                        ));
                        return findings;
                    }
                },
            };
            let path = pointer_below(input.view.spec_pointer(), [Step::Key("runtimeClassName")]);
            let mut operations = vec![add(path, Value::String(name.clone()))];
            if let Some(info) = info {
                match scheduling(input.view, &info) {
                    Ok(more) => operations.extend(more),
                    Err(message) => {
                        findings.violations.push(message);
                        return findings;
                    }
                }
            }
            findings.changes.push(Mutation {
                summary: format!("set runtimeClassName: {name} (GPU pod)"),
                operations,
                overrides_author: false,
            });
        }
        Some(class)
            if gpu_pod
                && allowed.iter().any(|a| a == class)
                && input.cluster.is_some_and(|c| c.runtime_class(class).is_none()) =>
        {
            findings.violations.push(format!(
                "RuntimeClass {class:?} does not exist in this cluster; \
                 install the NVIDIA runtime class or remove the field"
            ));
        }
        None => {}
        Some(class) if gpu_pod && !allowed.iter().any(|a| a == class) => {
            findings.violations.push(NOT_GPU_CLASS.format(&[
                ("class", &format!("{class:?}")),
                ("allowed", &allowed_phrase(allowed)),
            ]));
        }
        // A pod whose claim cannot be resolved yet may hold a GPU: the
        // unresolved-claim warning says so, and nothing denies it.
        Some(class)
            if !gpu_pod
                && !input.view.may_hold_unresolved_gpus()
                && input.allowlisted.is_none()
                && allowed.iter().any(|a| a == class) =>
        {
            findings.violations.push(RESERVED_CLASS.format(&[("class", &format!("{class:?}"))]));
        }
        Some(_) => {}
    }
    findings
}

/// What the built-in RuntimeClass admission plugin does to a pod that names the class: it runs
/// before mutating webhooks, so a class injected here never gets that treatment and later
/// validation would reject the pod (overhead missing) or schedule it wrongly. `Err` is the plugin's
/// rejection.
fn scheduling(view: &PodView<'_>, class: &RuntimeClassInfo) -> Result<Vec<PatchOperation>, String> {
    let mut operations = Vec::new();
    let at = |keys: &[&str]| pointer_below(view.spec_pointer(), keys.iter().map(|k| Step::Key(k)));
    if let Some(overhead) = &class.pod_fixed_overhead {
        match member(view.spec, "overhead") {
            None => operations.push(add(at(&["overhead"]), Value::Object(overhead.clone()))),
            Some(existing) if existing == Value::Object(overhead.clone()) => {}
            Some(_) => {
                return Err("spec.overhead differs from the overhead of the \
                     RuntimeClass it would get; remove spec.overhead"
                    .to_owned());
            }
        }
    }
    if !class.node_selector.is_empty() {
        match member(view.spec, "nodeSelector") {
            None => operations
                .push(add(at(&["nodeSelector"]), Value::Object(class.node_selector.clone()))),
            Some(existing) if existing.is_object() => {
                for (key, value) in &class.node_selector {
                    match existing.get(key) {
                        None => operations.push(add(at(&["nodeSelector", key]), value.clone())),
                        Some(current) if current == *value => {}
                        Some(current) => {
                            return Err(format!(
                                "spec.nodeSelector {key}={current} conflicts with \
                                 the RuntimeClass's {key}={value}"
                            ));
                        }
                    }
                }
            }
            Some(_) => return Err("spec.nodeSelector must be an object".to_owned()),
        }
    }
    if !class.tolerations.is_empty() {
        match member(view.spec, "tolerations") {
            None => {
                operations.push(add(at(&["tolerations"]), Value::Array(class.tolerations.clone())))
            }
            Some(existing) if existing.is_array() => {
                for toleration in &class.tolerations {
                    let mut existing = existing.as_array().into_iter().flatten();
                    if !existing.any(|t| same_toleration(t, toleration)) {
                        operations.push(add(at(&["tolerations", "-"]), toleration.clone()));
                    }
                }
            }
            Some(_) => return Err("spec.tolerations must be a list".to_owned()),
        }
    }
    Ok(operations)
}

// The CEL side: `gpu-policy-runtime-class` validates as the checks above, except for a pod whose
// GPUs come only through DRA claims (the policy cannot resolve a claim, so a pod naming one is
// never denied the reserved class); the injection is a MutatingAdmissionPolicy.

fn variables(settings: &Settings) -> Vec<Variable> {
    let mut variables = sharing::variables(settings);
    variables.extend([
        Variable::new(
            "runtimeClass",
            "has(variables.spec.runtimeClassName) ? variables.spec.runtimeClassName : ''",
        ),
        Variable::new(
            "gpuPod",
            &format!("variables.containers.exists(c, {})", sharing::asks_gpu(settings, "c")),
        ),
        Variable::new(
            "namesClaims",
            &format!("variables.containers.exists(c, {})", cel::uses_claims("c")),
        ),
        Variable::new("allowlisted", &cel::allowlisted(settings)),
    ]);
    variables
}

fn validations(settings: &Settings) -> Vec<Validation> {
    let allowed = &settings.config().gpu_runtime_classes;
    let list = cel::string_list(allowed.iter().map(String::as_str));
    let class = || ("class", Fill::cel(cel::quoted_name("variables.runtimeClass")));
    vec![
        Validation::new(
            &format!(
                "!(variables.runtimeClass != '' && variables.gpuPod \
                 && !(variables.runtimeClass in {list}))"
            ),
            &cel::full_message(
                NOT_GPU_CLASS,
                &[class(), ("allowed", Fill::words(allowed_phrase(allowed)))],
            ),
        ),
        Validation::new(
            &format!(
                "!(variables.runtimeClass in {list} && !variables.gpuPod \
                 && !variables.namesClaims && !variables.allowlisted)"
            ),
            &cel::full_message(RESERVED_CLASS, &[class()]),
        ),
    ]
}

/// The injection of `runtimeClassName` into a pod that asks for a GPU resource or holds a share and
/// names no class, a MutatingAdmissionPolicy; none with `runtimeClassName: ""`.
fn injection(settings: &Settings) -> Option<CelPolicy> {
    let class = &settings.config().runtime_class_name;
    if class.is_empty() {
        return None;
    }
    let class = cel::string(class);
    let mut variables = vec![
        Variable::new("spec", "object.spec"),
        Variable::new("inits", cel::INITS),
        Variable::new("regulars", cel::REGULARS),
        Variable::new("containers", cel::CONTAINERS),
    ];
    variables.extend(sharing::variables(settings));
    variables.push(Variable::new(
        "gpuPod",
        &format!("variables.containers.exists(c, {})", sharing::asks_gpu(settings, "c")),
    ));
    let conditions = vec![
        Variable::new("has-pod-spec", "has(object.spec)"),
        Variable::new(
            "no-runtime-class",
            "!has(object.spec.runtimeClassName) || object.spec.runtimeClassName == ''",
        ),
    ];
    let patch = format!(
        "variables.gpuPod \
         ? [JSONPatch{{op: 'add', path: '/spec/runtimeClassName', value: {class}}}] : []"
    );
    Some(CelPolicy {
        resources: Resources::Pods { ephemeral: false, workloads: false },
        match_conditions: conditions,
        variables,
        action: Action::Patch(patch),
    })
}

/// The validations, and the injection unless `runtimeClassName` is `""`.
fn policies(settings: &Settings, _: KubernetesVersion) -> Vec<CelPolicy> {
    let mut all =
        vec![CelPolicy::pod_validations(false, variables(settings), validations(settings))];
    all.extend(injection(settings));
    all
}

#[cfg(test)]
mod tests;
