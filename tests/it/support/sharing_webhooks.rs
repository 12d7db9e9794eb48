//! What the sharing schemes' own mutating webhooks do to a pod, replayed
//! from their code so the tests can run them before and after gpu-policy:
//! KAI-Scheduler's `gpusharing` and `runtimeenforcement` plugins
//! (kai-scheduler/KAI-Scheduler, `pkg/admission/webhook/v1alpha2/`) and
//! HAMi's `MutateAdmission` (Project-HAMi/HAMi, `pkg/device/nvidia/device.go`,
//! `pkg/scheduler/webhook.go`). Both are idempotent, as theirs are.

use serde_json::{Value, json};

const VARIABLE: &str = "NVIDIA_VISIBLE_DEVICES";
/// KAI's stand-in for the 7 random characters of the ConfigMap prefix.
const RANDOM: &str = "x7k2b9q";

/// KAI's webhook: for a pod it schedules with `gpu-fraction` or
/// `gpu-memory`, names the ConfigMap prefix, gives the share container the
/// three variables from `<prefix>-<index>` (replacing entries of those
/// names) and its `envFrom`, adds the ConfigMap volume, and sets
/// `runtimeClassName: nvidia` when the pod names none.
pub fn kai_mutate(pod: &Value) -> Value {
    let mut pod = pod.clone();
    let annotations = pod["metadata"]["annotations"].clone();
    let is_fraction = pod["spec"]["schedulerName"] == "kai-scheduler"
        && (annotations.get("gpu-fraction").is_some() || annotations.get("gpu-memory").is_some());
    if !is_fraction {
        return pod;
    }
    let prefix = match annotations.get("runai/shared-gpu-configmap").and_then(Value::as_str) {
        Some(prefix) => prefix.to_owned(),
        None => {
            let name = pod["metadata"]["name"].as_str().unwrap_or("pod");
            let prefix = format!("{name}-{RANDOM}-shared-gpu");
            pod["metadata"]["annotations"]["runai/shared-gpu-configmap"] = json!(prefix);
            prefix
        }
    };
    let named = annotations.get("gpu-fraction-container-name").and_then(Value::as_str);
    let (field, index) = share_container(&pod, named).expect("KAI refuses a pod without one");
    let configmap = if field == "initContainers" {
        format!("{prefix}-i{index}")
    } else {
        format!("{prefix}-{index}")
    };
    let container = &mut pod["spec"][field][index];
    let mut env: Vec<Value> = container["env"].as_array().cloned().unwrap_or_default();
    let names = [VARIABLE, "RUNAI_NUM_OF_GPUS", "GPU_PORTION"];
    env.retain(|entry| !names.iter().any(|n| entry["name"] == *n));
    for name in names {
        env.push(json!({"name": name, "valueFrom": {"configMapKeyRef": {"name": configmap, "key": name}}}));
    }
    container["env"] = json!(env);
    let evar = json!({"configMapRef": {"name": format!("{configmap}-evar"), "optional": false}});
    let mut env_from = container["envFrom"].as_array().cloned().unwrap_or_default();
    if !env_from.contains(&evar) {
        env_from.push(evar);
    }
    container["envFrom"] = json!(env_from);
    let volume = json!({"name": format!("{configmap}-vol"), "configMap": {"name": configmap}});
    let mut volumes = pod["spec"]["volumes"].as_array().cloned().unwrap_or_default();
    if !volumes.contains(&volume) {
        volumes.push(volume);
    }
    pod["spec"]["volumes"] = json!(volumes);
    if pod["spec"]["runtimeClassName"].as_str().unwrap_or("").is_empty() {
        pod["spec"]["runtimeClassName"] = json!("nvidia");
    }
    pod
}

/// KAI's rule: the container the annotation names, init containers first,
/// else the first container.
fn share_container(pod: &Value, named: Option<&str>) -> Option<(&'static str, usize)> {
    let Some(name) = named else {
        return Some(("containers", 0));
    };
    ["initContainers", "containers"].into_iter().find_map(|field| {
        let list = pod["spec"][field].as_array()?;
        let index = list.iter().position(|c| c["name"] == name)?;
        Some((field, index))
    })
}

const HAMI_SHARES: [&str; 3] =
    ["nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage"];

/// HAMi's webhook (chart defaults): a container with a share in its limits
/// and no card count gets `nvidia.com/gpu: 1`; one with cards and no share
/// of memory or cores gets the whole card's cores (`gpucores: 100`); a pod
/// with either gets `schedulerName: hami-scheduler`.
pub fn hami_mutate(pod: &Value) -> Value {
    let mut pod = pod.clone();
    let mut any = false;
    for field in ["initContainers", "containers"] {
        let Some(list) = pod["spec"][field].as_array_mut() else {
            continue;
        };
        for container in list {
            let Some(limits) =
                container.pointer_mut("/resources/limits").and_then(Value::as_object_mut)
            else {
                continue;
            };
            let shares = HAMI_SHARES.iter().any(|name| limits.contains_key(*name));
            if shares && !limits.contains_key("nvidia.com/gpu") {
                limits.insert("nvidia.com/gpu".to_owned(), json!(1));
            }
            if !limits.contains_key("nvidia.com/gpu") {
                continue;
            }
            any = true;
            let percentage = limits.get("nvidia.com/gpumem-percentage").and_then(Value::as_i64);
            let exclusive =
                !limits.contains_key("nvidia.com/gpumem") && percentage.is_none_or(|p| p == 100);
            if exclusive && !limits.contains_key("nvidia.com/gpucores") {
                limits.insert("nvidia.com/gpucores".to_owned(), json!(100));
            }
        }
    }
    if any {
        pod["spec"]["schedulerName"] = json!("hami-scheduler");
    }
    pod
}
