//! R7 `webhook-annotations` (mutating): the annotations gpu-policy writes into a pod are its
//! record, not the author's (docs/policy.md, "R7 webhook-annotations").
//!
//! Reads: `metadata.annotations` `gpu-policy.io/mutations` (what the webhook changed at
//! creation, by rule) and `gpu-policy.io/gpu-needs` (what the pod's GPU claims need), before
//! and after an update ([`Scope::Update`](crate::policy::Scope::Update)).
//!
//! Changes, on an update that changes or removes either, or adds one the old pod lacks: each
//! put back as the old pod has it (`kubectl annotate --overwrite` changes nothing). Nothing
//! on creation (the webhook writes them then). Allowlisted pods too: the record says what was
//! done, whoever the pod is.

use super::rule::{
    ApiServer, Check, Coverage, Entry, Findings, Mutation, Rule, RuleInput, Severity,
};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::patch::{AnnotationsAt, Step, pointer_below, remove, set_annotation};
use crate::policy::rules::cel::{Action, CelPolicy, Resources, Variable};
use crate::policy::rules::cel_text as cel;
use crate::settings::{GPU_NEEDS_ANNOTATION, MUTATIONS_ANNOTATION, Settings};

/// The annotations only gpu-policy writes.
pub const OWNED: [&str; 2] = [MUTATIONS_ANNOTATION, GPU_NEEDS_ANNOTATION];

pub const RULE: Rule = Rule {
    name: "webhook-annotations",
    severity: Severity::Medium,
    entries: &[Entry {
        check: Check::Pod(check),
        api_server: ApiServer::Policies {
            coverage: Coverage {
                enforced: "both annotations put back on a pod's update, as the old pod has them",
                webhook_only: "warnings in warn mode and audit annotations in audit mode (the policy is \
        bound in enforce namespaces only)",
            },
            policies,
        },
    }],
};

pub fn check(input: &RuleInput<'_, '_>) -> Findings {
    let mut findings = Findings::default();
    let Some(old) = input.old else {
        return findings;
    };
    let view = input.view;
    let mut operations = Vec::new();
    let mut changed = Vec::new();
    // Once an operation made `metadata.annotations`, the next adds into it.
    let mut made = false;
    for key in OWNED {
        let (before, after) = (old.annotation(key), view.annotation(key));
        if before == after {
            continue;
        }
        changed.push(key);
        match before {
            Some(value) => {
                let at = AnnotationsAt {
                    metadata: view.metadata_pointer(),
                    has_metadata: view.has_metadata() || made,
                    has_annotations: view.has_annotations() || made,
                };
                operations.push(set_annotation(at, key, value.to_owned()));
                made = true;
            }
            None => operations.push(remove(pointer_below(
                view.metadata_pointer(),
                [Step::Key("annotations"), Step::Key(key)],
            ))),
        }
    }
    if operations.is_empty() {
        return findings;
    }
    findings.changes.push(Mutation {
        summary: format!(
            "put back {} as gpu-policy wrote {}: only gpu-policy writes {}",
            changed.join(" and "),
            if changed.len() == 1 { "it" } else { "them" },
            if changed.len() == 1 { "it" } else { "them" },
        ),
        operations,
        overrides_author: true,
    });
    findings
}

/// `gpu-policy-webhook-annotations`, a MutatingAdmissionPolicy: on a Pod's update, the annotations
/// only gpu-policy writes put back as the old pod has them: set again where the update changed or
/// removed one, removed where it added one. `metadata.annotations` is made first when the update
/// left none and one is to be set.
fn policies(_: &Settings, _: KubernetesVersion) -> Vec<CelPolicy> {
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
        sets.push(format!("(variables.{differs} && {quoted} in variables.before)"));
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
    vec![CelPolicy {
        resources: Resources::PodUpdates,
        match_conditions: conditions,
        variables,
        action: Action::Patch(patch),
    }]
}

#[cfg(test)]
mod tests;
