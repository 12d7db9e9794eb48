//! The generated admission policies against the webhook's rules.
//!
//! - [`equivalence`]: on the property generator's pods (10,000 in CI) and
//!   their workloads, each generated ValidatingAdmissionPolicy denies
//!   exactly when the webhook's rule of the same id reports a violation,
//!   and each MutatingAdmissionPolicy leaves the pod exactly as the
//!   webhook's changes of its rule do;
//! - [`cost`]: `manifests --cost`, whose output docs/policy.md's cost
//!   tables are;
//! - [`manifests`]: the fixtures (the golden files' inputs and the sharing
//!   schemes' ones, in every mode) and the examples decided by `check
//!   --engine cel` as by `check`;
//! - [`pod_counts`]: R2's effective pod count, init containers and
//!   sidecars in every order, policy against webhook case by case;
//! - [`sharing_cases`]: the GPU sharing schemes case by case: every KAI
//!   annotation value the generator draws, and the cards shares add to the
//!   pod's count.
//!
//! The equivalence runs on the generator's pods with the sharing schemes
//! laid over some of them ([`sharing_pods`]) and the names other settings
//! care about ([`variant_pods`]), each under one of [`VARIANTS`]: the
//! default settings and the settings that change what the policies say (no
//! runtime class injected, privileged GPU containers denied, the sharing
//! schemes off, extra and wildcard GPU resources, lower maximums, extra
//! DRA device classes, another runtime class and pin, `namePrefix`
//! allowlist entries, GPU tolerations with CPU pods on GPU nodes denied).
//!
//! **Messages.** Every comparison holds the words too ([`same_messages`]):
//! per rule, the violation messages `check` prints against those `check
//! --engine cel` prints. One validation of a policy has one message, so
//! where the webhook reports several violations of one kind (two resources
//! above the container maximum) the policy's message is theirs joined with
//! `policy::message::SEPARATOR` (`; `), in any order (a map's keys come in
//! any order). The comparison takes each policy message apart into the
//! webhook's messages and needs all of them used, each once.
//!
//! Where the policies cannot decide as the webhook does, the case is
//! excluded by a named exception ([`Exception`]), each one listed in
//! docs/policy.md; the test counts them, so an exception that swallows
//! most cases shows.

mod cost;
mod coverage;
mod equivalence;
mod manifests;
mod pod_counts;
mod sharing_cases;
mod sharing_pods;
mod tolerations;
mod variant_pods;

use std::collections::{BTreeMap, BTreeSet};
use std::sync::LazyLock;

use gpu_policy::admission::ObjectKind;
use gpu_policy::admission_policy::engine::{PolicyEngine, create_attributes};
use gpu_policy::document::Document;
use gpu_policy::policy::message::{Message, Piece, SEPARATOR};
use gpu_policy::policy::rules::bounded_requests::ABOVE_POD_MAXIMUM;
use gpu_policy::policy::{Evaluation, Evaluator, RuleId};
use gpu_policy::settings::Settings;
use serde_json::Value;

pub static SETTINGS: LazyLock<Settings> = LazyLock::new(Settings::default);

pub static ENGINE: LazyLock<PolicyEngine> = LazyLock::new(|| engine(&SETTINGS));

fn engine(settings: &Settings) -> PolicyEngine {
    match PolicyEngine::new(settings) {
        Ok(engine) => engine,
        Err(err) => panic!("the generated policies must compile: {err}"),
    }
}

/// Settings the policies and the webhook are compared under, and the
/// policies generated from them.
pub struct Variant {
    pub name: &'static str,
    pub settings: Settings,
    pub engine: PolicyEngine,
}

/// The configurations of [`VARIANTS`], by name. The names the others
/// read are drawn by [`variant_pods`] (resources, runtime classes, owners)
/// and the claim generator (device classes).
const VARIANT_CONFIGS: [(&str, &str); 10] = [
    ("defaults", "{}"),
    ("runtimeClassName: \"\"", "runtimeClassName: ''"),
    ("privilegedGpu: deny", "privilegedGpu: deny"),
    ("gpuSharing off", "gpuSharing: {kaiScheduler: {enabled: false}, hami: {enabled: false}}"),
    (
        "gpuResources: extra and wildcard",
        "gpuResources: ['nvidia.com/gpu', 'nvidia.com/mig-*', 'example.com/gpu', \
         'example.com/*-accel']",
    ),
    ("maxPerContainer: 2, maxPerPod: 3", "{maxPerContainer: 2, maxPerPod: 3}"),
    (
        "gpuDeviceClasses: extra",
        "gpuDeviceClasses: ['gpu.nvidia.com', 'gpu.example.com', 'vfio.gpu.nvidia.com']",
    ),
    (
        "runtimeClassName: nvidia-cdi, pin none",
        "{runtimeClassName: nvidia-cdi, gpuRuntimeClasses: [nvidia, nvidia-cdi], \
         visibleDevicesPin: none}",
    ),
    (
        "allowlist: namePrefix entries",
        "allowlist: [{namespace: kube-system, kind: DaemonSet, namePrefix: nvidia-}, \
         {namespace: gpu-team, kind: ReplicaSet, namePrefix: dcgm-exporter-}, \
         {namespace: gpu-team, kind: Deployment, namePrefix: generated-}]",
    ),
    (
        "gpuTolerations, denyCpuPodsOnGpuNodes",
        "{gpuTolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}, \
         {key: dedicated, value: gpu, effect: NoExecute, tolerationSeconds: 60}], \
         denyCpuPodsOnGpuNodes: true}",
    ),
];

pub static VARIANTS: LazyLock<Vec<Variant>> = LazyLock::new(|| {
    VARIANT_CONFIGS
        .iter()
        .map(|(name, yaml)| {
            let settings = match Settings::from_yaml(yaml, name) {
                Ok(settings) => settings,
                Err(err) => panic!("{name}: {err}"),
            };
            Variant { name, engine: engine(&settings), settings }
        })
        .collect()
});

/// Why a case is left out of the comparison. Each is a documented limit of
/// the policies or something the API server refuses before admission.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Exception {
    /// Two containers share a name: pod validation rejects it before any
    /// validating admission, and the policies find containers by name.
    DuplicateContainerNames,
    /// A hostPath or mount path with a `..` segment: the webhook resolves
    /// it, the policies read it as written (the API server rejects `..` in
    /// a hostPath).
    DotDotPath,
}

/// The webhook's verdict on one object in a namespace with these
/// annotations: its evaluation, without cluster or claims. None when it
/// cannot read the object (a field of the wrong shape), which the API
/// server's decoding rejects before admission: such cases are not compared.
pub fn webhook(
    object: &Value,
    kind: ObjectKind,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Option<Evaluation> {
    webhook_under(&SETTINGS, object, kind, namespace, annotations)
}

/// [`webhook`] under other settings.
pub fn webhook_under(
    settings: &Settings,
    object: &Value,
    kind: ObjectKind,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Option<Evaluation> {
    let namespace_settings = settings.for_namespace(annotations);
    let evaluator = Evaluator::of_cluster(settings, &namespace_settings, None, None);
    let document = Document::from_value(object);
    let subject = kind.created(document.root(), namespace)?;
    evaluator.evaluate(&subject).ok()
}

/// The rules the webhook reports violations of.
pub fn webhook_rules(evaluation: &Evaluation) -> BTreeSet<RuleId> {
    evaluation.violations.iter().map(|v| v.rule).collect()
}

/// The violation messages of each rule, as `check` prints them (without
/// the `gpu-policy: ` prefix).
pub type Messages = BTreeMap<RuleId, Vec<String>>;

/// The webhook's messages, by rule.
pub fn webhook_messages(evaluation: &Evaluation) -> Messages {
    let mut messages = Messages::new();
    for violation in &evaluation.violations {
        messages.entry(violation.rule).or_default().push(violation.message.body().to_owned());
    }
    messages
}

/// The messages of the generated policies that deny the object's creation,
/// by rule; none for an object they do not match.
pub fn policy_messages(
    engine: &PolicyEngine,
    object: &Value,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> Messages {
    let mut messages = Messages::new();
    let Some(attributes) = create_attributes(object, namespace, "enforce", annotations) else {
        return messages;
    };
    for (rule, _, message) in engine.validate(&attributes) {
        let body = message.strip_prefix(Message::PREFIX).unwrap_or(&message);
        messages.entry(rule).or_default().push(body.to_owned());
    }
    messages
}

/// Whether the policies' messages are the webhook's: each policy message
/// is one or more of the webhook's messages of its rule joined with
/// [`SEPARATOR`], in any order, and every webhook message is used once.
/// `Err` says which are not.
pub fn same_messages(webhook: &Messages, policies: &Messages) -> Result<(), String> {
    let rules: BTreeSet<RuleId> = webhook.keys().chain(policies.keys()).copied().collect();
    let mut problems = Vec::new();
    for rule in rules {
        let mut left: Vec<&str> =
            webhook.get(&rule).into_iter().flatten().map(String::as_str).collect();
        for message in policies.get(&rule).into_iter().flatten() {
            if !take_apart(message, &mut left) {
                problems.push(format!("{rule}: the policies say {message:?}"));
            }
        }
        for message in left {
            problems.push(format!("{rule}: only the webhook says {message:?}"));
        }
    }
    match problems.is_empty() {
        true => Ok(()),
        false => {
            Err(format!("{}\nwebhook: {webhook:#?}\npolicies: {policies:#?}", problems.join("\n")))
        }
    }
}

/// Takes `message` apart into messages of `left` joined with
/// [`SEPARATOR`], removing them from `left`; false (and `left` as it was)
/// when it cannot.
fn take_apart(message: &str, left: &mut Vec<&str>) -> bool {
    for at in 0..left.len() {
        let part = left[at];
        let Some(rest) = message.strip_prefix(part) else {
            continue;
        };
        let rest = match rest.is_empty() {
            true => Some(""),
            false => rest.strip_prefix(SEPARATOR).filter(|r| !r.is_empty()),
        };
        let Some(rest) = rest else {
            continue;
        };
        left.remove(at);
        if rest.is_empty() || take_apart(rest, left) {
            return true;
        }
        left.insert(at, part);
    }
    false
}

/// The rules whose generated policies deny the object's creation, with
/// their messages.
pub fn policy_rules(
    object: &Value,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> (BTreeSet<RuleId>, Vec<String>) {
    policy_rules_of(&ENGINE, object, namespace, annotations)
}

/// [`policy_rules`] of the policies of other settings.
pub fn policy_rules_of(
    engine: &PolicyEngine,
    object: &Value,
    namespace: &str,
    annotations: &BTreeMap<String, String>,
) -> (BTreeSet<RuleId>, Vec<String>) {
    let Some(attributes) = create_attributes(object, namespace, "enforce", annotations) else {
        return (BTreeSet::new(), Vec::new());
    };
    let violations = engine.validate(&attributes);
    let rules = violations.iter().map(|(rule, _, _)| *rule).collect();
    let messages =
        violations.into_iter().map(|(_, policy, message)| format!("{policy}: {message}")).collect();
    (rules, messages)
}

/// The pod specs of an object's kinds, for the exceptions.
fn pod_spec(object: &Value) -> Option<&Value> {
    match object.get("kind").and_then(Value::as_str) {
        Some("Pod") => object.get("spec"),
        Some("CronJob") => object.pointer("/spec/jobTemplate/spec/template/spec"),
        Some("PodTemplate") => object.pointer("/template/spec"),
        _ => object.pointer("/spec/template/spec"),
    }
}

/// The exceptions that apply to an object, if any.
pub fn exception(object: &Value) -> Option<Exception> {
    let spec = pod_spec(object)?;
    let mut names = BTreeSet::new();
    for list in ["initContainers", "containers", "ephemeralContainers"] {
        for container in spec.get(list).and_then(Value::as_array).into_iter().flatten() {
            let name = container.get("name").and_then(Value::as_str).unwrap_or("");
            if !names.insert(name.to_owned()) {
                return Some(Exception::DuplicateContainerNames);
            }
            let mounts = container.get("volumeMounts").and_then(Value::as_array);
            for mount in mounts.into_iter().flatten() {
                if mount.get("mountPath").and_then(Value::as_str).is_some_and(has_dot_dot) {
                    return Some(Exception::DotDotPath);
                }
            }
        }
    }
    let volumes = spec.get("volumes").and_then(Value::as_array);
    for volume in volumes.into_iter().flatten() {
        if volume.pointer("/hostPath/path").and_then(Value::as_str).is_some_and(has_dot_dot) {
            return Some(Exception::DotDotPath);
        }
    }
    None
}

fn has_dot_dot(path: &str) -> bool {
    path.split('/').any(|segment| segment == "..")
}

/// A KAI device count of more significant digits than `int()` holds: the
/// policy counts such a share as 1 card in the pod's count (the pod is
/// denied for the count itself either way), so the pod-count messages
/// differ and are left out of the comparison.
fn beyond_int_devices(object: &Value) -> bool {
    let annotations = match object.get("kind").and_then(Value::as_str) {
        Some("Pod") => object.pointer("/metadata/annotations"),
        _ => object.pointer("/spec/template/metadata/annotations"),
    };
    annotations.and_then(|a| a.get("gpu-fraction-num-devices")).and_then(Value::as_str).is_some_and(
        |v| v.bytes().all(|b| b.is_ascii_digit()) && v.trim_start_matches('0').len() > 18,
    )
}

/// [`same_messages`] of the webhook's evaluation of `object` and the
/// policies' messages, but for what [`beyond_int_devices`] leaves out.
pub fn messages_agree(
    object: &Value,
    evaluation: &Evaluation,
    mut policies: Messages,
) -> Result<(), String> {
    let mut webhook = webhook_messages(evaluation);
    if beyond_int_devices(object) {
        let counts = match ABOVE_POD_MAXIMUM.pieces().first() {
            Some(Piece::Words(words)) => *words,
            _ => "the pod needs ",
        };
        for messages in [&mut webhook, &mut policies] {
            if let Some(list) = messages.get_mut(&RuleId::BoundedRequests) {
                list.retain(|m| !m.starts_with(counts));
            }
        }
    }
    same_messages(&webhook, &policies)
}

#[test]
fn policy_messages_are_taken_apart_into_the_webhooks() {
    let messages = |list: &[&str]| -> Messages {
        BTreeMap::from([(RuleId::BoundedRequests, list.iter().map(|m| m.to_string()).collect())])
    };
    let webhook = messages(&["a; with a separator", "b", "c"]);
    assert_eq!(same_messages(&webhook, &messages(&["b; a; with a separator", "c"])), Ok(()));
    // A word changed, a message left over, one used twice.
    assert!(same_messages(&webhook, &messages(&["b; a; with a separator", "C"])).is_err());
    assert!(same_messages(&webhook, &messages(&["b; a; with a separator"])).is_err());
    assert!(same_messages(&webhook, &messages(&["b; b", "a; with a separator", "c"])).is_err());
    assert!(same_messages(&messages(&[]), &Messages::new()).is_ok());
}
