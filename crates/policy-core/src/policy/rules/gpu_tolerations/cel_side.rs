//! R8's CEL side: `gpu-policy-gpu-tolerations`, a ValidatingAdmissionPolicy on pods and workloads
//! that asks for no GPU, names no claim and tolerates a GPU taint (a warning in every mode, or a
//! denial with `denyCpuPodsOnGpuNodes`), and a MutatingAdmissionPolicy adding `gpuTolerations` to
//! pods that ask for a GPU resource or hold a share. None without `gpuTolerations`.
//!
//! The policies cannot resolve a claim: a pod whose GPUs come only through one gets nothing from
//! the mutating policy, and a pod naming a claim is never warned.

use super::messages::{CPU_POD_TOLERATES_GPU_TAINT, TAINT, TOLERATION};
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::message::{LIST_SEPARATOR, Noun};
use crate::policy::rules::cel::{Action, CelPolicy, Resources, Validation, Variable};
use crate::policy::rules::cel_sharing as sharing;
use crate::policy::rules::cel_text::{self as cel, Fill, string};
use crate::policy::rules::rule::Coverage;
use crate::settings::{Settings, Toleration, TolerationOperator};

pub const COVERAGE: Coverage = Coverage {
    enforced: "with `gpuTolerations`: a pod that asks for no GPU, names no claim and is not \
        allowlisted tolerating a GPU taint (warned in every mode, denied with \
        `denyCpuPodsOnGpuNodes`); the tolerations added to a pod that asks for a GPU resource or \
        holds a share (mutating policy)",
    webhook_only: "a pod whose GPUs come only through a claim (it gets no toleration from the \
        policy, and a pod naming a claim is never warned or denied); tolerations a pod update \
        removes, made again",
};

/// A field of the toleration `t`, `''` when it has none.
fn field(name: &str) -> String {
    format!("(has(t.{name}) ? t.{name} : '')")
}

const OPERATOR: &str = "(has(t.operator) ? t.operator : 'Equal')";

/// The pod's toleration `t` tolerates the taint `gpu` is written for, as
/// [`tolerates`](crate::settings::tolerates) decides.
fn tolerates(gpu: &Toleration) -> String {
    let key = format!(
        "({k} == '' ? {OPERATOR} == 'Exists' : {k} == {})",
        string(&gpu.key),
        k = field("key")
    );
    let value = match gpu.operator {
        Some(TolerationOperator::Exists) => None,
        _ => Some(format!(
            "({OPERATOR} == 'Exists' || {} == {})",
            field("value"),
            string(&gpu.value)
        )),
    };
    let effect = gpu.effect.map(|effect| {
        format!("({e} == '' || {e} == {})", string(effect.as_str()), e = field("effect"))
    });
    [Some(key), value, effect].into_iter().flatten().collect::<Vec<_>>().join(" && ")
}

/// The pod's toleration `t` is `gpu`, as [`same_toleration`](crate::settings::same_toleration)
/// compares them.
fn same(gpu: &Toleration) -> String {
    let operator = match gpu.operator {
        Some(TolerationOperator::Exists) => "Exists",
        Some(TolerationOperator::Equal) | None => "Equal",
    };
    let seconds = match gpu.toleration_seconds {
        Some(seconds) => format!("has(t.tolerationSeconds) && t.tolerationSeconds == {seconds}"),
        None => "!has(t.tolerationSeconds)".to_owned(),
    };
    format!(
        "{} == {} && {OPERATOR} == {} && {} == {} && {} == {} && {seconds}",
        field("key"),
        string(&gpu.key),
        string(operator),
        field("value"),
        string(&gpu.value),
        field("effect"),
        string(gpu.effect.map_or("", |effect| effect.as_str())),
    )
}

/// The toleration as a CEL map, the fields [`Toleration::to_value`] writes.
fn literal(gpu: &Toleration) -> String {
    let mut fields = Vec::new();
    let mut text = |name: &str, value: &str| {
        if !value.is_empty() {
            fields.push(format!("{}: {}", string(name), string(value)));
        }
    };
    text("key", &gpu.key);
    text(
        "operator",
        gpu.operator.map_or("", |operator| match operator {
            TolerationOperator::Exists => "Exists",
            TolerationOperator::Equal => "Equal",
        }),
    );
    text("value", &gpu.value);
    text("effect", gpu.effect.map_or("", |effect| effect.as_str()));
    if let Some(seconds) = gpu.toleration_seconds {
        fields.push(format!("'tolerationSeconds': {seconds}"));
    }
    format!("{{{}}}", fields.join(", "))
}

/// [`quoted_list`](crate::policy::message::quoted_list) of a CEL list of strings.
fn quoted_strings(noun: Noun, list: &str) -> String {
    format!(
        "(size({list}) == 1 ? {} : {}) + {list}.map(s, '\"' + s + '\"').join({})",
        string(&format!("{} ", noun.one)),
        string(&format!("{} ", noun.many)),
        string(LIST_SEPARATOR)
    )
}

/// The pod's toleration `t` as the webhook's `toleration_text` writes it.
fn toleration_text() -> String {
    format!(
        "({k} != '' ? {k} : '*') + ({v} != '' ? '=' + {v} : '') + ({e} != '' ? ':' + {e} : '')",
        k = field("key"),
        v = field("value"),
        e = field("effect")
    )
}

/// Each taint text once, in the order of `gpuTolerations`, with the tolerations written for it.
fn taints(settings: &Settings) -> Vec<(String, Vec<&Toleration>)> {
    let mut taints: Vec<(String, Vec<&Toleration>)> = Vec::new();
    for toleration in &settings.config().gpu_tolerations {
        let text = toleration.taint_text();
        match taints.iter_mut().find(|(known, _)| *known == text) {
            Some((_, written)) => written.push(toleration),
            None => taints.push((text, vec![toleration])),
        }
    }
    taints
}

const TOLERATIONS: &str = "has(variables.spec.tolerations) ? variables.spec.tolerations : []";

fn gpu_pod(settings: &Settings) -> Variable {
    Variable::new(
        "gpuPod",
        &format!("variables.containers.exists(c, {})", sharing::asks_gpu(settings, "c")),
    )
}

fn validation(settings: &Settings) -> CelPolicy {
    let taints = taints(settings);
    let any_taint: Vec<String> = settings.config().gpu_tolerations.iter().map(tolerates).collect();
    let tolerated: Vec<String> = taints
        .iter()
        .map(|(text, written)| {
            let tests: Vec<String> = written.iter().map(|gpu| tolerates(gpu)).collect();
            format!(
                "(variables.tolerating.exists(t, {}) ? [{}] : [])",
                tests.join(" || "),
                string(text)
            )
        })
        .collect();
    let mut variables = sharing::variables(settings);
    variables.extend([
        gpu_pod(settings),
        Variable::new(
            "namesClaims",
            &format!("variables.containers.exists(c, {})", cel::uses_claims("c")),
        ),
        Variable::new("allowlisted", &cel::allowlisted(settings)),
        Variable::new("tolerations", TOLERATIONS),
        Variable::new(
            "tolerating",
            &format!("variables.tolerations.filter(t, {})", any_taint.join(" || ")),
        ),
        Variable::new("taints", &tolerated.join(" + ")),
    ]);
    let validations = vec![Validation::new(
        "!(size(variables.tolerating) > 0 && !variables.gpuPod && !variables.namesClaims \
         && !variables.allowlisted)",
        &cel::full_message(
            CPU_POD_TOLERATES_GPU_TAINT,
            &[
                ("taints", Fill::cel(quoted_strings(TAINT, "variables.taints"))),
                (
                    "tolerations",
                    Fill::cel(quoted_strings(
                        TOLERATION,
                        &format!("variables.tolerating.map(t, {})", toleration_text()),
                    )),
                ),
            ],
        ),
    )];
    let mut policy = CelPolicy::pod_validations(false, variables, Vec::new());
    policy.action = match settings.config().deny_cpu_pods_on_gpu_nodes {
        true => Action::Validate(validations),
        false => Action::Warn(validations),
    };
    policy
}

/// The tolerations added to a pod that asks for a GPU resource or holds a share and is not
/// allowlisted: those of `gpuTolerations` it lacks.
fn addition(settings: &Settings) -> CelPolicy {
    let missing: Vec<String> = settings
        .config()
        .gpu_tolerations
        .iter()
        .map(|gpu| {
            format!("(variables.tolerations.exists(t, {}) ? [] : [{}])", same(gpu), literal(gpu))
        })
        .collect();
    let mut variables = vec![
        Variable::new("spec", "object.spec"),
        Variable::new("inits", cel::INITS),
        Variable::new("regulars", cel::REGULARS),
        Variable::new("containers", cel::CONTAINERS),
        Variable::new("controller", cel::CONTROLLER),
    ];
    variables.extend(sharing::variables(settings));
    variables.extend([
        gpu_pod(settings),
        Variable::new("allowlisted", &cel::allowlisted(settings)),
        Variable::new("tolerations", TOLERATIONS),
        Variable::new("missing", &missing.join(" + ")),
    ]);
    let patch = "variables.gpuPod && !variables.allowlisted && size(variables.missing) > 0 \
         ? (has(object.spec.tolerations) \
            ? variables.missing.map(t, JSONPatch{op: 'add', path: '/spec/tolerations/-', value: t}) \
            : [JSONPatch{op: 'add', path: '/spec/tolerations', value: variables.missing}]) \
         : []";
    CelPolicy {
        resources: Resources::Pods { ephemeral: false, workloads: false },
        match_conditions: vec![Variable::new("has-pod-spec", "has(object.spec)")],
        variables,
        action: Action::Patch(patch.to_owned()),
    }
}

/// The validation and the addition; none without `gpuTolerations`.
pub fn policies(settings: &Settings, _: KubernetesVersion) -> Vec<CelPolicy> {
    if settings.config().gpu_tolerations.is_empty() {
        return Vec::new();
    }
    vec![validation(settings), addition(settings)]
}
