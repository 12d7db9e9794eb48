//! Helpers for the rules' table tests.

use std::collections::BTreeMap;

use json_patch::PatchOperation;
use serde_json::Value;

use crate::document::{Document, Json};

use super::cluster::{ClusterFacts, ClusterSnapshot, NodeFacts};
use super::dra::ClaimFacts;
use super::dra::claims::ClaimKind;
use super::dra::owner::{GeneratedClaim, OwnerPod, ReadClaim, ReadPod};
use super::dra::tables::ClaimTables;
use super::{Evaluation, Evaluator, ImageFacts, RuleId, Scope, Subject, scope_for_update};
use crate::settings::Settings;

fn namespace_of(pod: &Value) -> &str {
    pod.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or("default")
}

/// Evaluates a pod whose claims resolve from `objects` (ResourceClaims,
/// ResourceClaimTemplates, DeviceClasses), as `check` resolves them.
pub fn evaluate_with_claims(pod: &Value, objects: &[Value], settings: &Settings) -> Evaluation {
    evaluate_with_claims_in(pod, objects, settings, &[])
}

/// [`evaluate_with_claims`] in a namespace annotated `namespace_annotations`.
pub fn evaluate_with_claims_in(
    pod: &Value,
    objects: &[Value],
    settings: &Settings,
    namespace_annotations: &[(&str, &str)],
) -> Evaluation {
    let refs: Vec<&Value> = objects.iter().collect();
    let claims = ClaimTables::collect(&refs, namespace_of(pod), settings);
    run_in(pod, &Scope::Whole, settings, namespace_annotations, None, None, Some(&claims))
}

/// Evaluates a pod with what a cluster snapshot knows.
pub fn evaluate_in_cluster(pod: &Value, cluster: &ClusterSnapshot) -> Evaluation {
    run_in(pod, &Scope::Whole, &Settings::default(), &[], Some(cluster), None, Some(cluster))
}

/// Evaluates a pod without a cluster, with what the nodes carry, as `check --nodes` does.
pub fn evaluate_on_nodes(pod: &Value, nodes: &dyn NodeFacts, settings: &Settings) -> Evaluation {
    run_in(pod, &Scope::Whole, settings, &[], None, Some(nodes), None)
}

/// Evaluates a pod in a namespace with `namespace_annotations`, with what the nodes carry (None:
/// no node is known, as `check` without `--nodes`).
pub fn evaluate_on_nodes_in(
    pod: &Value,
    nodes: Option<&dyn NodeFacts>,
    settings: &Settings,
    namespace_annotations: &[(&str, &str)],
) -> Evaluation {
    run_in(pod, &Scope::Whole, settings, namespace_annotations, None, nodes, None)
}

/// Evaluates a pod whose images may have been resolved from registries.
pub fn evaluate_with_images(pod: &Value, images: &dyn ImageFacts) -> Evaluation {
    let settings = Settings::default();
    let namespace_settings = settings.for_namespace(&BTreeMap::new());
    let evaluator = Evaluator::of_cluster(&settings, &namespace_settings, None, Some(images));
    let document = Document::from_value(pod);
    evaluated(&evaluator, &Subject::pod(document.root(), namespace_of(pod), Scope::Whole))
}

/// The evaluation of `subject`, failing the test when it does not parse.
fn evaluated(evaluator: &Evaluator<'_>, subject: &Subject<'_>) -> Evaluation {
    evaluator.evaluate(subject).unwrap_or_else(|err| panic!("test pod does not parse: {err}"))
}

fn annotation_map(annotations: &[(&str, &str)]) -> BTreeMap<String, String> {
    annotations.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
}

fn run_in(
    pod: &Value,
    scope: &Scope,
    settings: &Settings,
    annotations: &[(&str, &str)],
    cluster: Option<&dyn ClusterFacts>,
    nodes: Option<&dyn NodeFacts>,
    claims: Option<&dyn ClaimFacts>,
) -> Evaluation {
    let namespace_settings = settings.for_namespace(&annotation_map(annotations));
    let evaluator = Evaluator {
        nodes,
        claims,
        ..Evaluator::of_cluster(settings, &namespace_settings, cluster, None)
    };
    let document = Document::from_value(pod);
    let subject = Subject::pod(document.root(), namespace_of(pod), scope.clone());
    evaluated(&evaluator, &subject)
}

/// `value` as a document living as long as the test, for a view to borrow (test values leak).
pub fn leaked(value: &Value) -> Json<'static> {
    let value: &'static Value = Box::leak(Box::new(value.clone()));
    Box::leak(Box::new(Document::from_value(value))).root()
}

/// A ResourceClaimTemplate `default/<name>` with one request `r` of one device of `class`.
pub fn claim_template(name: &str, class: &str) -> Value {
    serde_json::json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"spec": {"devices": {"requests": [
            {"name": "r", "exactly": {"deviceClassName": class}}]}}}})
}

pub fn evaluate_pod(pod: &Value) -> Evaluation {
    evaluate_with(pod, &Settings::default())
}

pub fn evaluate_pod_in(pod: &Value, namespace_annotations: &[(&str, &str)]) -> Evaluation {
    let settings = Settings::default();
    run_in(pod, &Scope::Whole, &settings, namespace_annotations, None, None, None)
}

pub fn evaluate_with(pod: &Value, settings: &Settings) -> Evaluation {
    run_in(pod, &Scope::Whole, settings, &[], None, None, None)
}

pub fn evaluate_pod_update(new: &Value, old: &Value) -> Evaluation {
    let old = Document::from_value(old);
    let scope = scope_for_update(old.root());
    run_in(new, &scope, &Settings::default(), &[], None, None, None)
}

/// An update of a Pod itself ([`Scope::Update`]): `new` judged against `old`, default settings.
pub fn evaluate_update(new: &Value, old: &Value) -> Evaluation {
    evaluate_update_in(new, old, &Settings::default(), None)
}

/// [`evaluate_update`] with `settings` and what the cluster knows.
pub fn evaluate_update_in(
    new: &Value,
    old: &Value,
    settings: &Settings,
    cluster: Option<&dyn ClusterFacts>,
) -> Evaluation {
    let namespace_settings = settings.for_namespace(&BTreeMap::new());
    let evaluator = Evaluator::of_cluster(settings, &namespace_settings, cluster, None);
    let (new_document, old_document) = (Document::from_value(new), Document::from_value(old));
    let subject = Subject::pod_update(new_document.root(), old_document.root(), namespace_of(new));
    evaluated(&evaluator, &subject)
}

/// The messages of one rule's violations for a pod.
pub fn violation_messages(pod: &Value, rule: RuleId) -> Vec<String> {
    messages_of(&evaluate_pod(pod), rule)
}

/// The messages of one rule's violations in an evaluation.
pub fn messages_of(evaluation: &Evaluation, rule: RuleId) -> Vec<String> {
    evaluation.violations.iter().filter(|v| v.rule == rule).map(|v| v.message.to_string()).collect()
}

/// The `env` of the container `name` (init, regular or ephemeral) of `pod`; empty when it has none.
pub fn env_of(pod: &Value, name: &str) -> Vec<Value> {
    ["initContainers", "containers", "ephemeralContainers"]
        .iter()
        .filter_map(|field| pod["spec"][field].as_array())
        .flatten()
        .find(|c| c["name"] == name)
        .and_then(|c| c["env"].as_array().cloned())
        .unwrap_or_default()
}

/// Applies a patch, failing the test when it does not apply.
pub fn apply(object: &Value, patch: &[PatchOperation]) -> Value {
    let mut patched = object.clone();
    if let Err(err) = json_patch::patch(&mut patched, patch) {
        panic!("patch does not apply: {err}\npatch: {patch:?}\nobject: {object}");
    }
    patched
}

/// The pod `pod` as the webhook read it for a claim made for it: `claims` read beside it, its
/// status naming `generated` (leaked, as [`leaked`]).
pub fn owner_read(
    pod: &Value,
    generated: Vec<GeneratedClaim>,
    claims: Vec<ReadClaim>,
) -> OwnerPod<'static> {
    OwnerPod::Read(ReadPod {
        pod: leaked(pod),
        generated: Box::leak(generated.into_boxed_slice()),
        claims: Box::leak(claims.into_boxed_slice()),
    })
}

/// Evaluates a ResourceClaim as the webhook does once it read the pod the claim is made for
/// (`owner`); the claims, templates and DeviceClasses of `objects` stand for the cluster's caches,
/// `namespace_annotations` for its namespace's.
pub fn evaluate_claim_for(
    claim: &Value,
    owner: Option<&OwnerPod<'_>>,
    objects: &[Value],
    namespace_annotations: &[(&str, &str)],
    settings: &Settings,
) -> Evaluation {
    let namespace = namespace_of(claim);
    let refs: Vec<&Value> = objects.iter().collect();
    let claims = ClaimTables::collect(&refs, namespace, settings);
    let namespace_settings = settings.for_namespace(&annotation_map(namespace_annotations));
    let evaluator = Evaluator {
        claims: Some(&claims),
        claim_owner: owner,
        ..Evaluator::of_cluster(settings, &namespace_settings, None, None)
    };
    let document = Document::from_value(claim);
    evaluator
        .evaluate_claim(document.root(), ClaimKind::Claim, namespace)
        .unwrap_or_else(|e| panic!("test claim does not parse: {e}"))
}
