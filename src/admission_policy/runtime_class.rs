//! `gpu-policy-runtime-class`: the validating half of R3 in CEL.
//!
//! Reads `spec.runtimeClassName`, whether a container asks for a GPU
//! resource or holds a share of a card (KAI's fraction, a HAMi share:
//! `sharing.rs`), whether a container names a DRA claim, and the allowlist.
//!
//! Denies a GPU pod whose runtime class is not one of `gpuRuntimeClasses`,
//! and a pod that asks for no GPU, holds no share, names no claim and is
//! not allowlisted but uses one of those classes (they are reserved for GPU
//! pods, also with `runtimeClassName: ""`, which only stops the injection).
//!
//! Not here: a pod whose GPUs come only through DRA claims (the policy
//! cannot resolve a claim, so a pod naming one is never denied the reserved
//! class, as the webhook does while a claim is unresolved), and whether the
//! RuntimeClass exists.

use super::cel_text::{self as cel, Fill};
use super::object::{Validation, Variable};
use super::sharing;
use crate::policy::rules::runtime_class::{NOT_GPU_CLASS, RESERVED_CLASS, allowed_phrase};
use crate::settings::Settings;

pub fn variables(settings: &Settings) -> Vec<Variable> {
    let mut variables = sharing::variables(settings);
    variables.extend([
        Variable::new(
            "runtimeClass",
            "has(variables.spec.runtimeClassName) ? variables.spec.runtimeClassName : ''",
        ),
        Variable::new(
            "gpuPod",
            &format!(
                "variables.containers.exists(c, {})",
                sharing::asks_gpu(settings, "c")
            ),
        ),
        Variable::new(
            "namesClaims",
            &format!("variables.containers.exists(c, {})", cel::uses_claims("c")),
        ),
        Variable::new("allowlisted", &cel::allowlisted(settings)),
    ]);
    variables
}

pub fn validations(settings: &Settings) -> Vec<Validation> {
    let allowed = &settings.config().gpu_runtime_classes;
    let list = cel::string_list(allowed.iter().map(String::as_str));
    let class = || {
        (
            "class",
            Fill::cel(cel::quoted_name("variables.runtimeClass")),
        )
    };
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
