//! R1 `visible-devices` (mutating): no card reaches a container through `NVIDIA_VISIBLE_DEVICES`
//! outside the device plugin's accounting (docs/policy.md, "R1 visible-devices").
//!
//! Reads: `env` of every init, sidecar, regular and (new) ephemeral container; whether it is
//! a GPU container (a GPU resource, or a resolved DRA claim with a GPU request).
//!
//! Changes, in pods that are not allowlisted:
//! - a container that is not a GPU container ends with exactly one `NVIDIA_VISIBLE_DEVICES`
//!   entry, the pin (default `void`): every other entry of the name (value or `valueFrom`,
//!   duplicates too) is removed and the pin appended. An `env` entry overrides the image's
//!   `ENV` (official CUDA images say `all`) and `envFrom`; `void` makes the nvidia runtime
//!   act like runc, no device and no driver library (`none` would still mount the driver).
//! - a GPU container loses every entry its author wrote: the device plugin decides its
//!   cards. A KAI fraction's container keeps the one KAI's webhook wrote
//!   (`sharing::is_kai_visible_devices`): it carries the share. A share container whose
//!   scheme's webhook has not acted yet is pinned (`sharing::awaited_scheme`) until that
//!   webhook replaces the pin or the reinvocation after it removes it.
//!
//! Per container: a GPU pod's sidecar without a GPU is pinned, as the pod's runtime class
//! would hand it every card through its image's `ENV`; so are the containers of a pod with a
//! GPU claim that do not name it (the DRA driver's CDI edit sets the variable only there).

use json_patch::PatchOperation;
use json_patch::jsonptr::Pointer;
use serde_json::{Map, Value};

use super::reapply;
use super::rule::{
    ApiServer, Check, Coverage, Entry, Findings, Mutation, Rule, RuleInput, Severity,
};
use crate::policy::container::{Container, EnvEntry};
use crate::policy::message::CONTAINER;
use crate::policy::patch::{Step, add, remove};
use crate::policy::sharing::{KAI_CONFIGMAP, awaited_scheme, is_kai_visible_devices};

use crate::kubernetes_version::KubernetesVersion;
use crate::policy::rules::cel::{Action, CelPolicy, Resources, Variable};
use crate::policy::rules::{cel_sharing as sharing, cel_text as cel};
/// `NVIDIA_VISIBLE_DEVICES`.
use crate::policy::sharing::VISIBLE_DEVICES as VARIABLE;
use crate::settings::Settings;

pub const RULE: Rule = Rule {
    name: "visible-devices",
    severity: Severity::High,
    entries: &[Entry {
        check: Check::Pod(check),
        api_server: ApiServer::Policies {
            coverage: Coverage {
                enforced: "the pin in every container that asks for no GPU resource, and removal of \
        hand-written entries in those that do; the [GPU sharing](#gpu-sharing) schemes as the \
        webhook reads them (KAI's entry kept, a share pinned until its scheme has acted)",
                webhook_only: "containers whose GPUs come through a DRA claim are pinned by the policy (it \
        cannot resolve the claim); the `gpu-policy.io/mutations` annotation; warnings in warn \
        mode",
            },
            policies,
        },
    }],
};

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    if input.scope.is_update() {
        // What this rule wrote at creation, put back where the update
        // undid it (a second `kubectl apply`).
        return reapply::made_again(input, check);
    }
    if input.allowlisted.is_some() {
        return Findings::default();
    }
    let pin = input.settings.config().visible_devices_pin.as_str();
    let mut pinned: Vec<(&Container<'_>, Vec<PatchOperation>)> = Vec::new();
    let mut replaced: Vec<(&Container<'_>, Vec<PatchOperation>)> = Vec::new();
    let mut cleared: Vec<(&Container<'_>, Vec<PatchOperation>)> = Vec::new();
    let mut awaiting: Vec<(&Container<'_>, Vec<PatchOperation>)> = Vec::new();
    let mut schemes: Vec<&str> = Vec::new();
    let kai_configmap = input.view.annotation(KAI_CONFIGMAP);
    let spec = input.view.spec_pointer();
    for container in input.view.containers.iter().filter(|c| input.scope.includes(c)) {
        let entries: Vec<&EnvEntry<'_>> =
            container.env.iter().flatten().filter(|entry| entry.name == VARIABLE).collect();
        let awaited = awaited_scheme(container, kai_configmap);
        if container.is_gpu() && awaited.is_none() {
            // A KAI fraction's share arrives in the variable KAI wrote.
            let authored: Vec<&EnvEntry<'_>> = entries
                .iter()
                .copied()
                .filter(|e| !(container.kai_share && is_kai_visible_devices(e, kai_configmap)))
                .collect();
            if !authored.is_empty() {
                cleared.push((container, removals(spec, container, &authored)));
            }
            continue;
        }
        if let [only] = entries.as_slice()
            && only.literal() == Some(pin)
        {
            continue;
        }
        let mut operations = removals(spec, container, &entries);
        operations.push(append_pin(spec, container, pin));
        if let Some(scheme) = awaited {
            if !schemes.contains(&scheme) {
                schemes.push(scheme);
            }
            awaiting.push((container, operations));
        } else if entries.iter().any(|entry| entry.literal() != Some(pin)) {
            replaced.push((container, operations));
        } else {
            pinned.push((container, operations));
        }
    }

    let mut findings = Findings::default();
    let mut push = |group: Vec<(&Container<'_>, Vec<PatchOperation>)>,
                    overrides_author: bool,
                    summary: &dyn Fn(&str) -> String| {
        if group.is_empty() {
            return;
        }
        let names = CONTAINER.list(group.iter().map(|(c, _)| c.name));
        findings.changes.push(Mutation {
            summary: summary(&names),
            operations: group.into_iter().flat_map(|(_, ops)| ops).collect(),
            overrides_author,
        });
    };
    // Joined rather than formatted: this summary is made for most pods, and
    // `format!` costs several times a join of the same pieces.
    push(pinned, false, &|names| {
        ["pin ", VARIABLE, "=", pin, " in ", names, " (no GPU limit)"].concat()
    });
    push(replaced, true, &|names| {
        format!("replace {VARIABLE} with {pin} in {names} (no GPU limit)")
    });
    let schemes = schemes.join(" and ");
    push(awaiting, false, &|names| {
        format!("pin {VARIABLE}={pin} in {names} until {schemes} sets its GPU share")
    });
    push(cleared, true, &|names| {
        format!("remove {VARIABLE} from GPU {names} (the device plugin picks the cards)")
    });
    findings
}

/// Removes the given entries, last first, so earlier indices stay valid.
fn removals(
    spec: &Pointer,
    container: &Container<'_>,
    entries: &[&EnvEntry<'_>],
) -> Vec<PatchOperation> {
    entries
        .iter()
        .rev()
        .map(|entry| {
            let path = container.pointer_to(spec, &[Step::Key("env"), Step::Index(entry.index)]);
            remove(path)
        })
        .collect()
}

fn append_pin(spec: &Pointer, container: &Container<'_>, pin: &str) -> PatchOperation {
    let mut entry = Map::new();
    entry.insert("name".to_owned(), Value::String(VARIABLE.to_owned()));
    entry.insert("value".to_owned(), Value::String(pin.to_owned()));
    if container.env.is_some() {
        let path = container.pointer_to(spec, &[Step::Key("env"), Step::Key("-")]);
        add(path, Value::Object(entry))
    } else {
        let path = container.pointer_to(spec, &[Step::Key("env")]);
        // Built as it is rather than with `json!`, which copies the entry through serde.
        add(path, Value::Array(vec![Value::Object(entry)]))
    }
}

/// The JSON Patch operations for the containers of one list (`field` of
/// the pod spec), those in scope given by `scoped`. Ephemeral containers
/// (`can_hold_gpu` false) are pinned whatever they ask for.
///
/// Entries are removed one by one, from the last back so that each index holds, and the pin is
/// appended: the env is never written whole, because the API server cannot turn the entries it
/// reads back into JSON (`JSONPath valueExpression evaluated to a type that could not marshal to
/// JSON`). This takes `lists.range` and `flatten`, cel-go's `ext.Lists`, in every API server that
/// serves MutatingAdmissionPolicy (1.34+).
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

/// `gpu-policy-visible-devices`, a MutatingAdmissionPolicy doing what
/// [`check`] does; a share's holder is a GPU container (`cel_sharing.rs`).
fn policies(settings: &Settings, _: KubernetesVersion) -> Vec<CelPolicy> {
    let mut variables = vec![
        Variable::new("controller", cel::CONTROLLER),
        Variable::new("spec", "object.spec"),
        Variable::new("inits", cel::INITS),
        Variable::new("regulars", cel::REGULARS),
        Variable::new("ephemerals", cel::EPHEMERALS),
        Variable::new("ephemeralUpdate", cel::EPHEMERAL_UPDATE),
        Variable::new("oldEphemeralNames", cel::OLD_EPHEMERAL_NAMES),
    ];
    variables.extend(sharing::variables(settings));
    variables.extend(sharing::written_variables(settings));
    let patch = format!(
        "variables.allowlisted ? [] \
         : (variables.ephemeralUpdate ? [] : {inits} + {regulars}) + {ephemerals}",
        inits = env_patches(settings, "initContainers", "variables.inits", "variables.inits", true),
        regulars =
            env_patches(settings, "containers", "variables.regulars", "variables.regulars", true),
        ephemerals = env_patches(
            settings,
            "ephemeralContainers",
            "variables.ephemerals",
            &format!("({})", cel::NEW_EPHEMERALS),
            false
        ),
    );
    variables.push(Variable::new("allowlisted", &cel::allowlisted(settings)));
    let conditions = vec![Variable::new("has-pod-spec", "has(object.spec)")];
    vec![CelPolicy {
        resources: Resources::Pods { ephemeral: true, workloads: false },
        match_conditions: conditions,
        variables,
        action: Action::Patch(patch),
    }]
}

#[cfg(test)]
mod tests;
