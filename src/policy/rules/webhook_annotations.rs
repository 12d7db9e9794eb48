//! R7 `webhook-annotations` (mutating): the annotations gpu-policy writes
//! into a pod are its record, not the author's.
//!
//! Reads: `metadata.annotations` `gpu-policy.io/mutations` (what the
//! webhook changed at creation, by rule) and `gpu-policy.io/gpu-needs`
//! (what the pod's GPU claims need) of the pod before and after an update
//! ([`Scope::Update`](crate::policy::Scope::Update)).
//!
//! Changes, on an update that changes or removes either of them, or adds
//! one the old pod does not carry: each put back as the old pod has it
//! (`kubectl annotate --overwrite pod/x gpu-policy.io/mutations=` changes
//! nothing). On creation nothing: the webhook writes them then. Allowlisted
//! pods too: the annotations say what was done, whoever the pod is.

use json_patch::{PatchOperation, RemoveOperation};

use super::rule::{ApiServer, Coverage, Findings, Mutation, RuleInput};
use crate::policy::patch::{AnnotationsAt, set_annotation};
use crate::settings::{GPU_NEEDS_ANNOTATION, MUTATIONS_ANNOTATION};

/// The annotations only gpu-policy writes.
pub const OWNED: [&str; 2] = [MUTATIONS_ANNOTATION, GPU_NEEDS_ANNOTATION];

pub const API_SERVER: ApiServer = ApiServer::Mutating(Coverage {
    enforced: "both annotations put back on a pod's update, as the old pod has them",
    webhook_only: "warnings in warn mode and audit annotations in audit mode (the policy is \
        bound in enforce namespaces only)",
});

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
            None => {
                let mut path = view.metadata_pointer().to_buf();
                path.push_back("annotations");
                path.push_back(key);
                operations.push(PatchOperation::Remove(RemoveOperation { path }));
            }
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

#[cfg(test)]
mod tests;
