//! R3 `runtime-class` (mutating + validating): GPU pods run under the
//! nvidia runtime, and only GPU pods do.
//!
//! Reads: `spec.runtimeClassName`; whether the pod is a GPU pod; the
//! configured `runtimeClassName` (default `nvidia`) and `gpuRuntimeClasses`.
//!
//! Changes: a GPU pod without `runtimeClassName` gets the configured one.
//! When the nvidia runtime is not containerd's default (the safer setup), a
//! GPU pod without it would start under runc and see no card.
//!
//! Denies:
//! - a GPU pod whose runtime class is not one of `gpuRuntimeClasses`;
//! - a pod that is neither a GPU pod nor allowlisted but names a class from
//!   `gpuRuntimeClasses`: that class hands every card to whatever the image's
//!   `ENV` says, so it is reserved for pods the device plugin accounts for.

use serde_json::Value;

use super::{Change, Outcome, RuleId, RuleInput, Violation, add};

pub const ID: RuleId = RuleId::RuntimeClass;

pub fn check(input: &RuleInput<'_, '_>) -> Outcome {
    let mut outcome = Outcome::default();
    if !input.scope.is_whole() {
        return outcome;
    }
    let config = input.settings.config();
    let allowed = &config.gpu_runtime_classes;
    let class = input
        .view
        .runtime_class_name
        .filter(|name| !name.is_empty());
    let gpu_pod = input.view.is_gpu_pod();
    match class {
        None if gpu_pod => {
            let mut path = input.view.spec_pointer.clone();
            path.push_back("runtimeClassName");
            outcome.changes.push(Change {
                rule: ID,
                summary: format!(
                    "set runtimeClassName: {} (GPU pod)",
                    config.runtime_class_name
                ),
                operations: vec![add(path, Value::String(config.runtime_class_name.clone()))],
                overrides_author: false,
            });
        }
        None => {}
        Some(class) if gpu_pod && !allowed.iter().any(|a| a == class) => {
            outcome.violations.push(Violation {
                rule: ID,
                message: format!(
                    "gpu-policy: runtimeClassName {class:?} is not a GPU runtime class; \
                     use {} or remove the field",
                    allowed.join(" or ")
                ),
            });
        }
        Some(class)
            if !gpu_pod && input.allowlisted.is_none() && allowed.iter().any(|a| a == class) =>
        {
            outcome.violations.push(Violation {
                rule: ID,
                message: format!(
                    "gpu-policy: runtimeClassName {class:?} is reserved for pods that request \
                     a GPU; remove it, or request nvidia.com/gpu in limits"
                ),
            });
        }
        Some(_) => {}
    }
    outcome
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::testing::{apply, evaluate_pod, evaluate_with};
    use crate::settings::Settings;
    use rstest::rstest;
    use serde_json::json;

    fn pod(runtime_class: Option<&str>, gpus: u64) -> Value {
        let mut pod = json!({"spec": {"containers": [
            {"name": "c", "resources": {"limits": {"nvidia.com/gpu": gpus}}}]}});
        if let Some(class) = runtime_class {
            pod["spec"]["runtimeClassName"] = json!(class);
        }
        pod
    }

    #[rstest]
    // GPU pod without a class: injected
    #[case(pod(None, 1), Some("nvidia"), 0)]
    #[case(pod(Some(""), 1), Some("nvidia"), 0)]
    // GPU pod with the GPU class: nothing to do
    #[case(pod(Some("nvidia"), 1), None, 0)]
    // GPU pod with another class: denied
    #[case(pod(Some("kata"), 1), None, 1)]
    // non-GPU pod with the GPU class: denied
    #[case(pod(Some("nvidia"), 0), None, 1)]
    // non-GPU pod with another class, or none: fine
    #[case(pod(Some("gvisor"), 0), None, 0)]
    #[case(pod(None, 0), None, 0)]
    fn runtime_class_table(
        #[case] pod: Value,
        #[case] injected: Option<&str>,
        #[case] violations: usize,
    ) {
        let evaluation = evaluate_pod(&pod);
        let changes = evaluation.changes.iter().filter(|c| c.rule == ID).count();
        assert_eq!(changes, usize::from(injected.is_some()));
        let patched = apply(&pod, &evaluation.patch);
        if let Some(class) = injected {
            assert_eq!(patched["spec"]["runtimeClassName"], json!(class));
        }
        let found: Vec<_> = evaluation
            .violations
            .iter()
            .filter(|v| v.rule == ID)
            .collect();
        assert_eq!(found.len(), violations, "{found:?}");
    }

    #[test]
    fn messages_say_what_to_do() {
        let wrong = evaluate_pod(&pod(Some("kata"), 1));
        assert_eq!(
            wrong.violations[0].message,
            "gpu-policy: runtimeClassName \"kata\" is not a GPU runtime class; use nvidia or remove the field"
        );
        let reserved = evaluate_pod(&pod(Some("nvidia"), 0));
        assert!(
            reserved.violations[0]
                .message
                .contains("reserved for pods that request a GPU")
        );
    }

    #[test]
    fn allowlisted_pods_may_use_the_gpu_class_without_requesting() {
        let mut exporter = pod(Some("nvidia"), 0);
        exporter["metadata"] = json!({"namespace": "kube-system", "ownerReferences": [
            {"kind": "DaemonSet", "name": "nvidia-gpu-exporter", "controller": true}]});
        assert!(evaluate_pod(&exporter).violations.is_empty());
    }

    #[test]
    fn configured_class_is_injected() {
        let settings = Settings::from_yaml(
            "runtimeClassName: nvidia-cdi\ngpuRuntimeClasses: [nvidia, nvidia-cdi]",
            "t",
        )
        .unwrap_or_default();
        let pod = pod(None, 2);
        let patched = apply(&pod, &evaluate_with(&pod, &settings).patch);
        assert_eq!(patched["spec"]["runtimeClassName"], json!("nvidia-cdi"));
    }
}
