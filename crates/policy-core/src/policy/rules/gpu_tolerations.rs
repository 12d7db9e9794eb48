//! R8 `gpu-tolerations` (mutating + validating): GPU pods tolerate the taints of the GPU nodes,
//! and pods that ask for no GPU do not (docs/policy.md, "R8 gpu-tolerations").
//!
//! Reads: `spec.tolerations`; whether the pod is a GPU pod (device plugin, DRA, sharing
//! schemes); the configured `gpuTolerations` and `denyCpuPodsOnGpuNodes`.
//!
//! Changes: a GPU pod that is not allowlisted gets each toleration of `gpuTolerations` it does
//! not carry yet (compared as Kubernetes compares tolerations), so it can land on the tainted GPU
//! nodes without every author writing them.
//!
//! Warns, or with `denyCpuPodsOnGpuNodes` denies: a pod that asks for no GPU, holds no claim that
//! may give it one and is not allowlisted, one of whose tolerations tolerates a taint of
//! `gpuTolerations`: it could be scheduled on a GPU node and keep the node's cards from GPU pods.

use serde_json::Value;

use super::reapply;
use super::rule::{ApiServer, Check, Entry, Findings, Mutation, Rule, RuleInput, Severity};
use crate::document::Json;
use crate::policy::fields::member;
use crate::policy::message::{Notice, NoticeKind, quoted_list};
use crate::policy::patch::{Step, add, pointer_below};
use crate::settings::{Toleration, same_toleration, tolerates};

mod cel_side;
mod messages;

use messages::{CPU_POD_TOLERATES_GPU_TAINT, TAINT, TOLERATION};

pub const RULE: Rule = Rule {
    name: "gpu-tolerations",
    severity: Severity::Medium,
    entries: &[Entry {
        check: Check::Pod(check),
        api_server: ApiServer::Policies {
            coverage: cel_side::COVERAGE,
            policies: cel_side::policies,
        },
    }],
};

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    if input.scope.is_update() {
        // What this rule wrote at creation, put back where the update undid it.
        return reapply::made_again(input, check);
    }
    let mut findings = Findings::default();
    let config = input.settings.config();
    let gpu_tolerations = &config.gpu_tolerations;
    if !input.scope.is_whole() || gpu_tolerations.is_empty() || input.allowlisted.is_some() {
        return findings;
    }
    let tolerations = member(input.view.spec, "tolerations");
    if input.view.is_gpu_pod() {
        findings.changes.extend(added(input, tolerations, gpu_tolerations));
        return findings;
    }
    // A pod whose claim cannot be resolved yet may hold a GPU: the unresolved-claim warning says
    // so, and nothing here warns or denies it.
    if input.view.may_hold_unresolved_gpus() {
        return findings;
    }
    let Some(problem) = tolerated_taints(tolerations, gpu_tolerations) else {
        return findings;
    };
    match config.deny_cpu_pods_on_gpu_nodes {
        true => findings.violations.push(problem),
        false => findings.notices.push(Notice::new(NoticeKind::GpuTaintTolerated, problem)),
    }
    findings
}

/// The tolerations of `gpu` that the pod's `tolerations` lack, added; None when it has them all
/// or its `tolerations` is not a list (the API server refuses such a pod).
fn added(
    input: &RuleInput<'_, '_>,
    tolerations: Option<Json<'_>>,
    gpu: &[Toleration],
) -> Option<Mutation> {
    let existing = match tolerations {
        None => None,
        Some(list) => Some(list.as_array()?),
    };
    let missing: Vec<&Toleration> = gpu
        .iter()
        .filter(|wanted| {
            let wanted = wanted.to_value();
            !existing.into_iter().flatten().any(|have| same_toleration(have, &wanted))
        })
        .collect();
    if missing.is_empty() {
        return None;
    }
    let spec = input.view.spec_pointer();
    let operations = match existing {
        None => vec![add(
            pointer_below(spec, [Step::Key("tolerations")]),
            Value::Array(missing.iter().map(|t| t.to_value()).collect()),
        )],
        Some(_) => missing
            .iter()
            .map(|t| {
                add(pointer_below(spec, [Step::Key("tolerations"), Step::Key("-")]), t.to_value())
            })
            .collect(),
    };
    let taints: Vec<String> = missing.iter().map(|t| t.taint_text()).collect();
    Some(Mutation {
        summary: format!("add tolerations for the GPU taints: {}", taints.join(", ")),
        operations,
        overrides_author: false,
    })
}

/// The message naming the pod's tolerations that tolerate a taint of `gpu`, and those taints;
/// None when none does.
fn tolerated_taints(tolerations: Option<Json<'_>>, gpu: &[Toleration]) -> Option<String> {
    let list = tolerations?.as_array()?;
    // Each taint once, in the order of `gpuTolerations`, with the tolerations written for it.
    let mut taints: Vec<(String, Vec<&Toleration>)> = Vec::new();
    for toleration in gpu {
        let text = toleration.taint_text();
        match taints.iter_mut().find(|(known, _)| *known == text) {
            Some((_, written)) => written.push(toleration),
            None => taints.push((text, vec![toleration])),
        }
    }
    let mut tolerated = vec![false; taints.len()];
    let mut naming: Vec<String> = Vec::new();
    for pod_toleration in list {
        let mut any = false;
        for ((_, written), hit) in taints.iter().zip(tolerated.iter_mut()) {
            if written.iter().any(|gpu| tolerates(pod_toleration, gpu)) {
                *hit = true;
                any = true;
            }
        }
        if any {
            naming.push(toleration_text(pod_toleration));
        }
    }
    if naming.is_empty() {
        return None;
    }
    let taints = taints.iter().zip(&tolerated).filter(|(_, hit)| **hit).map(|((text, _), _)| text);
    Some(CPU_POD_TOLERATES_GPU_TAINT.format(&[
        ("taints", &quoted_list(TAINT.one, TAINT.many, taints.map(String::as_str))),
        (
            "tolerations",
            &quoted_list(TOLERATION.one, TOLERATION.many, naming.iter().map(String::as_str)),
        ),
    ]))
}

/// A pod's toleration for messages, as a taint it tolerates: `key=value:effect`, the value left
/// out when empty, `*` for an empty key (with `operator: Exists`, every key), the effect left out
/// when empty (every effect).
fn toleration_text(toleration: Json<'_>) -> String {
    let text = |key: &str| toleration.get(key).and_then(Json::as_str).unwrap_or("");
    let mut out = match text("key") {
        "" => "*".to_owned(),
        key => key.to_owned(),
    };
    if !text("value").is_empty() {
        out.push('=');
        out.push_str(text("value"));
    }
    if !text("effect").is_empty() {
        out.push(':');
        out.push_str(text("effect"));
    }
    out
}

#[cfg(test)]
mod tests;
