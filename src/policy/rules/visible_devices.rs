//! R1 `visible-devices` (mutating): no card reaches a container through
//! `NVIDIA_VISIBLE_DEVICES` outside the device plugin's accounting.
//!
//! Reads: `env` of every init, sidecar, regular and (new) ephemeral
//! container; whether the container is a GPU container (a GPU resource, or
//! a resolved DRA claim with a GPU request).
//!
//! Changes, in pods that are not allowlisted:
//! - a container that is not a GPU container ends with exactly one
//!   `NVIDIA_VISIBLE_DEVICES` entry, the configured pin (default `void`):
//!   every other entry of that name (value or `valueFrom`, duplicates
//!   included) is removed and the pin appended. An explicit `env` entry
//!   overrides both the image's `ENV` (every official CUDA image says `all`)
//!   and `envFrom`, and `void` makes the nvidia runtime behave like runc: no
//!   device, no driver library. (`none` would still mount the driver.)
//! - a GPU container loses every `NVIDIA_VISIBLE_DEVICES` entry its author
//!   wrote: the device plugin decides which cards it sees. The container
//!   holding a KAI-Scheduler fraction keeps the one KAI's webhook wrote
//!   (from KAI's ConfigMap, `sharing::is_kai_visible_devices`): it carries
//!   the share. A share container whose scheme's webhook has not acted yet
//!   is pinned like a container without a GPU (`sharing::awaited_scheme`):
//!   that webhook replaces the pin, or the reinvocation after it removes
//!   it.
//!
//! This is per container: in a GPU pod, a sidecar without a GPU limit is
//! pinned too, because the pod's runtime class would otherwise hand it every
//! card through its image's `ENV`. Likewise the containers of a pod with a
//! GPU claim that do not name it: the DRA driver's CDI edit sets the
//! variable only where the claim is used.

use json_patch::jsonptr::Pointer;
use json_patch::{PatchOperation, RemoveOperation};
use serde_json::{Map, Value};

use super::reapply;
use super::rule::{ApiServer, Coverage, Findings, Mutation, RuleInput};
use crate::policy::container::{Container, EnvEntry};
use crate::policy::message::containers_phrase;
use crate::policy::patch::{Step, add};
use crate::policy::sharing::{KAI_CONFIGMAP, awaited_scheme, is_kai_visible_devices};

/// `NVIDIA_VISIBLE_DEVICES`.
pub use crate::policy::sharing::VISIBLE_DEVICES as VARIABLE;

pub const API_SERVER: ApiServer = ApiServer::Mutating(Coverage {
    enforced: "the pin in every container that asks for no GPU resource, and removal of \
        hand-written entries in those that do; the [GPU sharing](#gpu-sharing) schemes as the \
        webhook reads them (KAI's entry kept, a share pinned until its scheme has acted)",
    webhook_only: "containers whose GPUs come through a DRA claim are pinned by the policy (it \
        cannot resolve the claim); the `gpu-policy.io/mutations` annotation; warnings in warn \
        mode",
});

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
    for container in input
        .view
        .containers
        .iter()
        .filter(|c| input.scope.includes(c))
    {
        let entries: Vec<&EnvEntry<'_>> = container
            .env
            .iter()
            .flatten()
            .filter(|entry| entry.name == VARIABLE)
            .collect();
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
        let names = containers_phrase(group.iter().map(|(c, _)| c.name));
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
            PatchOperation::Remove(RemoveOperation { path })
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
        // Built as it is rather than with `json!`, which copies the entry
        // through serde.
        add(path, Value::Array(vec![Value::Object(entry)]))
    }
}

#[cfg(test)]
mod tests;
