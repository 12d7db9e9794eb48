//! Runs the registered rules over one object and assembles the result:
//! the pod entries of [`entries`] over a pod or pod template, the claim
//! entries over a ResourceClaim or ResourceClaimTemplate.

use crate::document::Json;
use json_patch::PatchOperation;

use super::claim_owner::{Context, PreparedOwner};
use super::cluster::{ClusterFacts, NodeFacts};
use super::dra::allocation::read_made_for;
use super::dra::claims::{ClaimKind, parse_object};
use super::dra::owner::OwnerPod;
use super::dra::{ClaimFacts, resolution as pod_claims};
use super::evaluation::Evaluation;
use super::images::ImageFacts;
use super::message::Notice;
use super::patch::{AnnotationsAt, adds_annotations, set_annotation};
use super::pod::{ObjectError, PodView};
use super::rule_id::RuleSet;
use super::rules::bounded_requests::claim_requests::EXTENDED_RESOURCE_CLAIM;
use super::rules::rule::{AllowlistInput, Check, ClaimInput, RuleInput};
use super::rules::{RuleId, entries};
use super::subject::{Form, Scope, Subject};
use crate::settings::{MUTATIONS_ANNOTATION, NamespaceSettings, Settings};

/// What the rules are run with: the settings in force in the object's
/// namespace and, when the webhook can read it, what the cluster knows.
#[derive(Clone, Copy)]
pub struct Evaluator<'a> {
    /// The cluster-wide configuration.
    pub settings: &'a Settings,
    /// What the namespace's annotations make of `settings`.
    pub namespace: &'a NamespaceSettings,
    pub cluster: Option<&'a dyn ClusterFacts>,
    /// What the nodes carry when no cluster is read: the Nodes given to
    /// `check --nodes`. With a cluster, the cluster's nodes answer instead.
    pub nodes: Option<&'a dyn NodeFacts>,
    /// Where the pod's DRA claims are resolved: the cluster, or the other
    /// objects of `check`'s input. None: no claim can be resolved.
    pub claims: Option<&'a dyn ClaimFacts>,
    /// What images need, as resolved from their registries. None: the image table alone.
    pub images: Option<&'a dyn ImageFacts>,
    /// For a ResourceClaim made for a pod: that pod, as read from the API
    /// server. None: not read (no cluster, or not a claim made for a pod).
    pub claim_owner: Option<&'a OwnerPod<'a>>,
}

impl<'a> Evaluator<'a> {
    /// The webhook's evaluator: the cluster (when it can be read) answers
    /// both the cluster questions and the claims; registry answers, if any.
    pub fn of_cluster(
        settings: &'a Settings,
        namespace: &'a NamespaceSettings,
        cluster: Option<&'a dyn ClusterFacts>,
        images: Option<&'a dyn ImageFacts>,
    ) -> Self {
        Self {
            settings,
            namespace,
            cluster,
            nodes: None,
            claims: cluster.map(|c| -> &dyn ClaimFacts { c }),
            images,
            claim_owner: None,
        }
    }
}

impl Evaluator<'_> {
    /// Runs every rule over the subject: the pod rules over a pod or pod template, R2 over a claim.
    pub fn evaluate(&self, subject: &Subject<'_>) -> Result<Evaluation, ObjectError> {
        let (shape, identity, scope) = match &subject.form {
            Form::Pod { shape, identity, scope } => (*shape, *identity, scope),
            Form::Claim(kind) => {
                return self.evaluate_claim(subject.object, *kind, subject.namespace);
            }
        };
        let Evaluator { settings, cluster, claims, .. } = *self;
        let nodes = cluster.map(|c| -> &dyn NodeFacts { c }).or(self.nodes);
        let mut evaluation =
            Evaluation { notices: Notice::of_ignored(self.namespace), ..Evaluation::default() };
        let Some(mut view) = PodView::parse(subject.object, shape, settings)? else {
            return Ok(evaluation);
        };
        // Only a whole pod gets GPUs: the ephemeral containers of an update
        // never do. An updated pod's claims are resolved as at creation: its
        // containers' GPUs tell which of them R1 pins.
        if scope.is_whole() || scope.is_update() {
            let unresolved = pod_claims::resolve(&mut view, claims, subject.namespace);
            if scope.is_whole() {
                evaluation.notices.extend(unresolved);
            }
        }
        let old_view = match (scope, subject.old) {
            (Scope::Update, Some(old)) => {
                let view = PodView::parse(old, shape, settings)?;
                view.map(|mut view| {
                    let _unresolved = pod_claims::resolve(&mut view, claims, subject.namespace);
                    view
                })
            }
            _ => None,
        };
        // The allowlist stage runs first: the rules read whom it exempts.
        let mut allowlisted = None;
        for (_, entry) in entries() {
            if let Check::Allowlist(exempt) = entry.check {
                let exemption = exempt(&AllowlistInput {
                    identity,
                    namespace: subject.namespace,
                    settings,
                    cluster,
                });
                evaluation.notices.extend(exemption.notices);
                allowlisted = exemption.entry;
            }
        }
        let input = RuleInput {
            view: &view,
            settings,
            namespace: self.namespace,
            scope,
            old: old_view.as_ref(),
            allowlisted,
            cluster,
            nodes,
            images: self.images,
            claims,
            namespace_name: subject.namespace,
        };
        for (id, entry) in entries() {
            let Check::Pod(check) = entry.check else {
                continue;
            };
            evaluation.record(id, check(&input));
        }
        evaluation.allowlisted = allowlisted.cloned();
        if !evaluation.changes.is_empty() {
            // The ephemeralcontainers subresource takes only the ephemeral
            // containers from the object; metadata is recorded at creation.
            if scope.is_whole() {
                let made = adds_annotations(&evaluation.patch, view.metadata_pointer());
                evaluation.patch.extend(record_mutations(&view, evaluation.changed_rules(), made));
            }
        }
        Ok(evaluation)
    }
}

impl Evaluator<'_> {
    /// Checks one ResourceClaim or ResourceClaimTemplate in `namespace`:
    /// the claim entries of [`entries`] (R2's
    /// [`claim_requests::check`](super::rules::bounded_requests::claim_requests::check), with
    /// the pod's other claims on a claim made for a pod the webhook read,
    /// and R4's [`claim_entry::check`](super::rules::compute_affinity::claim_entry::check):
    /// the floors on such a claim, the namespace's GPU products on every claim).
    pub fn evaluate_claim(
        &self,
        object: Json<'_>,
        kind: ClaimKind,
        namespace: &str,
    ) -> Result<Evaluation, ObjectError> {
        let mut evaluation =
            Evaluation { notices: Notice::of_ignored(self.namespace), ..Evaluation::default() };
        let settings = self.settings;
        let claims = self.claims;
        let is_gpu_class = |class: &str| {
            settings.is_gpu_device_class(class)
                || claims.is_some_and(|c| c.is_gpu_device_class(class))
        };
        let extended_resource = object
            .get("metadata")
            .and_then(|m| m.get("annotations"))
            .and_then(|a| a.get(EXTENDED_RESOURCE_CLAIM))
            .and_then(Json::as_str)
            == Some("true");
        let summary = match parse_object(object, kind, &is_gpu_class) {
            Ok(summary) => summary,
            // The scheduler's own claims are never denied (their pod was checked).
            Err(_) if extended_resource => return Ok(evaluation),
            Err(err) => {
                return Err(ObjectError { field: err.field, problem: err.problem });
            }
        };
        let context = Context {
            settings,
            namespace: self.namespace,
            cluster: self.cluster,
            images: self.images,
            cache: claims,
            namespace_name: namespace,
        };
        let made_for = read_made_for(object);
        let prepared = match (self.claim_owner, &made_for) {
            (Some(owner), Some(made_for)) => {
                Some(PreparedOwner::new(owner, made_for, &summary, &context, &is_gpu_class))
            }
            _ => None,
        };
        let owner = prepared.as_ref().map(|prepared| prepared.input(&context));
        let input = ClaimInput {
            object,
            kind,
            summary: &summary,
            is_gpu_class: &is_gpu_class,
            extended_resource,
            owner: owner.as_ref(),
            settings,
            namespace: self.namespace,
            namespace_name: namespace,
        };
        for (id, entry) in entries() {
            let Check::Claim(check) = entry.check else {
                continue;
            };
            evaluation.record(id, check(&input));
        }
        Ok(evaluation)
    }
}

/// The operation that records the changing rules in the `gpu-policy.io/mutations` annotation,
/// merged with what an earlier invocation recorded. None when the annotation already says it all.
/// `made_annotations`: an earlier operation of the patch made `metadata.annotations`.
fn record_mutations(
    view: &PodView<'_>,
    rules: RuleSet,
    made_annotations: bool,
) -> Option<PatchOperation> {
    let existing = view.annotation(MUTATIONS_ANNOTATION);
    let mut all = rules;
    let mut unknown: Vec<&str> = Vec::new();
    for item in existing.unwrap_or("").split(',').map(str::trim) {
        match RuleId::parse(item) {
            Some(rule) => {
                all.insert(rule);
            }
            None if !item.is_empty() => unknown.push(item),
            None => {}
        }
    }
    let value = all.iter().map(|rule| rule.as_str()).chain(unknown).collect::<Vec<_>>().join(",");
    if existing == Some(value.as_str()) {
        return None;
    }
    let at = AnnotationsAt {
        metadata: view.metadata_pointer(),
        has_metadata: view.has_metadata() || made_annotations,
        has_annotations: view.has_annotations() || made_annotations,
    };
    let operation = set_annotation(at, MUTATIONS_ANNOTATION, value);
    Some(operation)
}

#[cfg(test)]
mod tests;
