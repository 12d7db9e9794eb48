//! The mutations simple enough for the API server to make itself, as
//! MutatingAdmissionPolicies (admissionregistration.k8s.io/v1, GA since
//! Kubernetes 1.36), with JSON Patch mutations:
//!
//! - `gpu-policy-visible-devices` (R1): every init, sidecar, regular and
//!   (new) ephemeral container that asks for no GPU ends with exactly one
//!   `NVIDIA_VISIBLE_DEVICES` entry, the configured pin; a container that
//!   asks for one loses the entries its author wrote. A container holding
//!   a share of a card (`sharing.rs`) is a GPU container: the KAI holder
//!   keeps the entry KAI's webhook wrote; until that entry is there, and
//!   while a HAMi share names no `nvidia.com/gpu`, the scheme's webhook has
//!   yet to act and the container is pinned like one without a GPU.
//!   Allowlisted pods are left alone.
//! - `gpu-policy-runtime-class` (R3): a pod that asks for a GPU resource
//!   or holds a share and names no runtime class gets the configured one;
//!   with `runtimeClassName: ""` the policy is not generated (nothing is
//!   injected).
//!
//! - `gpu-policy-webhook-annotations` (R7): on a Pod's update, the
//!   annotations only gpu-policy writes (`gpu-policy.io/mutations`,
//!   `gpu-policy.io/gpu-needs`) put back as the old pod has them.
//!
//! Each container's entries are removed by index and the pin appended, as
//! the webhook's own patch does (see [`env_patches`] for why the env is
//! never written whole).
//!
//! Not here: a container whose GPUs come through a DRA claim is pinned
//! like any other (the policy cannot resolve the claim; the webhook does;
//! so a HAMi share beside a claim is taken as awaiting HAMi's webhook),
//! the RuntimeClass's existence, overhead and scheduling are not checked
//! or applied, the compute-capability affinity (R4) stays the webhook's,
//! and no `gpu-policy.io/mutations` annotation is written. Only enforce
//! namespaces are bound: warn and audit namespaces get no change.

use serde_json::{Value, json};

use super::cel_text::{self as cel};
use super::object::{API_VERSION, GeneratedPolicy, Variable};
use super::sharing;
use crate::install;
use crate::policy::RuleId;
use crate::policy::rules::visible_devices::VARIABLE;
use crate::policy::rules::webhook_annotations::OWNED;
use crate::settings::Settings;

fn policy(
    name: &str,
    rules: Vec<Value>,
    match_conditions: Vec<Variable>,
    variables: Vec<Variable>,
    patch: &str,
) -> Value {
    let to_json = |v: &Variable| json!({"name": v.name, "expression": v.expression});
    json!({
        "apiVersion": API_VERSION,
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": name, "labels": install::labels()},
        "spec": {
            "failurePolicy": "Fail",
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {"matchPolicy": "Equivalent", "resourceRules": rules},
            "matchConditions": match_conditions.iter().map(to_json).collect::<Vec<_>>(),
            "variables": variables.iter().map(to_json).collect::<Vec<_>>(),
            "mutations": [{"patchType": "JSONPatch", "jsonPatch": {"expression": patch}}],
        }
    })
}

/// The JSON Patch operations for the containers of one list (`field` of
/// the pod spec), those in scope given by `scoped`. Ephemeral containers
/// (`can_hold_gpu` false) are pinned whatever they ask for.
///
/// Entries are removed one by one, from the last back so that each index
/// holds, and the pin is appended: the env is never written whole,
/// because the API server cannot turn the entries it reads back into JSON
/// (`JSONPath valueExpression evaluated to a type that could not marshal
/// to JSON`). This takes `lists.range` and `flatten`, cel-go's `ext.Lists`,
/// in every API server that serves MutatingAdmissionPolicy (1.34+).
fn env_patches(
    settings: &Settings,
    field: &str,
    list: &str,
    scoped: &str,
    can_hold_gpu: bool,
) -> String {
    let pin = cel::string(&settings.config().visible_devices_pin);
    let name = cel::string(VARIABLE);
    let env = "(has(c.env) ? c.env : [])";
    let ours = |e: &str| format!("(has({e}.name) && {e}.name == {name})");
    let pinned = format!(
        "[{env}.filter(e, {})].exists(o, size(o) == 1 && !has(o[0].valueFrom) \
         && has(o[0].value) && o[0].value == {pin})",
        ours("e")
    );
    // A share whose scheme's webhook has not acted yet is pinned meanwhile.
    let gpu = match can_hold_gpu {
        true => format!(
            "({} && !{})",
            sharing::asks_gpu(settings, "c"),
            sharing::awaited(settings, "c")
        ),
        false => "false".to_owned(),
    };
    // A GPU container keeps the entries its scheme wrote (KAI's in the
    // holder of the fraction) and loses the others of that name.
    let authored = |e: &str| match sharing::keeps_entry(settings, "c", e) {
        Some(keeps) => format!("({} && !{keeps})", ours(e)),
        None => ours(e),
    };
    let path = format!("'/spec/{field}/' + string({list}.map(x, x.name).indexOf(c.name)) + '/env'");
    let removals = |test: &str| {
        format!(
            "[{env}].map(v, lists.range(size(v)).map(j, size(v) - 1 - j).filter(i, {test})\
             .map(i, JSONPatch{{op: 'remove', path: {path} + '/' + string(i)}}))[0]"
        )
    };
    let append = format!(
        "[has(c.env) \
         ? JSONPatch{{op: 'add', path: {path} + '/-', value: {{'name': {name}, 'value': {pin}}}}} \
         : JSONPatch{{op: 'add', path: {path}, value: [{{'name': {name}, 'value': {pin}}}]}}]"
    );
    format!(
        "{scoped}.filter(c, {gpu} ? {env}.exists(e, {authored_e}) : !{pinned})\
         .map(c, {gpu} ? {gpu_removals} : {removals} + {append}).flatten()",
        authored_e = authored("e"),
        gpu_removals = removals(&authored("v[i]")),
        removals = removals(&ours("v[i]")),
    )
}

pub fn visible_devices(settings: &Settings) -> GeneratedPolicy {
    let name = format!("{}-{}", install::NAME, RuleId::VisibleDevices.as_str());
    let mut variables = vec![
        Variable::new("controller", cel::CONTROLLER),
        Variable::new("spec", "object.spec"),
        Variable::new("inits", cel::INITS),
        Variable::new("regulars", cel::REGULARS),
        Variable::new("ephemerals", cel::EPHEMERALS),
        Variable::new("ephemeralUpdate", cel::EPHEMERAL_UPDATE),
        Variable::new(
            "oldEphemeralNames",
            "oldObject != null && has(oldObject.spec) && has(oldObject.spec.ephemeralContainers) \
             ? oldObject.spec.ephemeralContainers.map(e, e.name) : []",
        ),
    ];
    variables.extend(sharing::variables(settings));
    variables.extend(sharing::written_variables(settings));
    let patch = format!(
        "variables.allowlisted ? [] \
         : (variables.ephemeralUpdate ? [] : {inits} + {regulars}) + {ephemerals}",
        inits = env_patches(
            settings,
            "initContainers",
            "variables.inits",
            "variables.inits",
            true
        ),
        regulars = env_patches(
            settings,
            "containers",
            "variables.regulars",
            "variables.regulars",
            true
        ),
        ephemerals = env_patches(
            settings,
            "ephemeralContainers",
            "variables.ephemerals",
            "(variables.ephemeralUpdate \
              ? variables.ephemerals.filter(e, !(e.name in variables.oldEphemeralNames)) \
              : variables.ephemerals)",
            false
        ),
    );
    variables.push(Variable::new("allowlisted", &cel::allowlisted(settings)));
    let conditions = vec![Variable::new("has-pod-spec", "has(object.spec)")];
    GeneratedPolicy {
        rule: RuleId::VisibleDevices,
        object: policy(&name, install::pod_rules(), conditions, variables, &patch),
        name,
    }
}

/// The injection of `runtimeClassName`; none when it is `""` (nothing is
/// injected).
pub fn runtime_class(settings: &Settings) -> Option<GeneratedPolicy> {
    let name = format!("{}-{}", install::NAME, RuleId::RuntimeClass.as_str());
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
        &format!(
            "variables.containers.exists(c, {})",
            sharing::asks_gpu(settings, "c")
        ),
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
    let mut rules = install::pod_rules();
    rules.retain(|r| r["resources"][0] == "pods");
    Some(GeneratedPolicy {
        rule: RuleId::RuntimeClass,
        object: policy(&name, rules, conditions, variables, &patch),
        name,
    })
}

/// `gpu-policy-webhook-annotations` (R7): on a Pod's update, the
/// annotations only gpu-policy writes put back as the old pod has them:
/// set again where the update changed or removed one, removed where it
/// added one. `metadata.annotations` is made first when the update left
/// none and one is to be set.
pub fn webhook_annotations() -> GeneratedPolicy {
    let name = format!("{}-{}", install::NAME, RuleId::WebhookAnnotations.as_str());
    let mut variables = vec![
        Variable::new(
            "before",
            "has(oldObject.metadata.annotations) ? oldObject.metadata.annotations : {}",
        ),
        Variable::new(
            "after",
            "has(object.metadata.annotations) ? object.metadata.annotations : {}",
        ),
    ];
    let mut sets = Vec::new();
    let mut patches = Vec::new();
    for (index, key) in OWNED.iter().enumerate() {
        let quoted = cel::string(key);
        let path = cel::string(&format!("/metadata/annotations/{}", key.replace('/', "~1")));
        let differs = format!("differs{index}");
        variables.push(Variable::new(
            &differs,
            &format!(
                "({quoted} in variables.before) != ({quoted} in variables.after) \
                 || ({quoted} in variables.before \
                     && variables.before[{quoted}] != variables.after[{quoted}])"
            ),
        ));
        sets.push(format!(
            "(variables.{differs} && {quoted} in variables.before)"
        ));
        patches.push(format!(
            "(variables.{differs} \
              ? ({quoted} in variables.before \
                 ? [JSONPatch{{op: 'add', path: {path}, value: variables.before[{quoted}]}}] \
                 : [JSONPatch{{op: 'remove', path: {path}}}]) \
              : [])"
        ));
    }
    let patch = format!(
        "(!has(object.metadata.annotations) && ({sets}) \
          ? [JSONPatch{{op: 'add', path: '/metadata/annotations', value: {{}}}}] : []) + {patches}",
        sets = sets.join(" || "),
        patches = patches.join(" + "),
    );
    let conditions = vec![Variable::new(
        "pod-update",
        "request.operation == 'UPDATE' && oldObject != null && has(object.metadata)",
    )];
    let rules = vec![install::pod_update_rule()];
    GeneratedPolicy {
        rule: RuleId::WebhookAnnotations,
        object: policy(&name, rules, conditions, variables, &patch),
        name,
    }
}
