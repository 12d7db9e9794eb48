//! Runs the registered rules over one object and assembles the result.

use std::collections::BTreeSet;

use json_patch::PatchOperation;
use serde_json::{Map, Value};

use super::{
    Change, ClusterFacts, Evaluation, Identity, Message, ObjectError, PodView, RULES, RuleId,
    RuleInput, Scope, Shape, Violation, add, allowlist,
};
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
}

/// The object under evaluation.
#[derive(Debug, Clone)]
pub struct Target<'a> {
    /// A Pod or a workload, as `shape` says.
    pub object: &'a Value,
    pub shape: Shape,
    pub identity: Identity<'a>,
    /// The namespace the object lives in.
    pub namespace: &'a str,
    pub scope: Scope,
}

impl Evaluator<'_> {
    /// Runs every rule over the target.
    pub fn evaluate(&self, target: &Target<'_>) -> Result<Evaluation, ObjectError> {
        let Evaluator {
            settings,
            namespace: namespace_settings,
            cluster,
        } = *self;
        let mut evaluation = Evaluation {
            notices: namespace_settings.notices.clone(),
            ..Evaluation::default()
        };
        let Some(view) = PodView::parse(target.object, target.shape, settings)? else {
            return Ok(evaluation);
        };
        let identity = target.identity;
        let mut allowlisted =
            allowlist::matching_entry(identity, target.namespace, &settings.config().allowlist);
        if let (Some(entry), Identity::Pod { owner: Some(owner) }, Some(cluster)) =
            (allowlisted, identity, cluster)
            && let Err(notice) = allowlist::verify_owner(entry, owner, cluster)
        {
            evaluation.notices.push(notice);
            allowlisted = None;
        }
        let input = RuleInput {
            view: &view,
            settings,
            namespace: namespace_settings,
            scope: &target.scope,
            allowlisted,
            cluster,
        };
        for rule in RULES {
            let findings = (rule.check)(&input);
            evaluation.changes.extend(
                findings
                    .changes
                    .into_iter()
                    .map(|mutation| Change::new(rule.id, mutation)),
            );
            evaluation
                .violations
                .extend(findings.violations.into_iter().map(|body| Violation {
                    rule: rule.id,
                    message: Message::new(body),
                }));
            evaluation.notices.extend(findings.notices);
        }
        evaluation.allowlisted = allowlisted.cloned();
        if !evaluation.changes.is_empty() {
            evaluation.patch = evaluation
                .changes
                .iter()
                .flat_map(|change| change.operations.iter().cloned())
                .collect();
            // The ephemeralcontainers subresource takes only the ephemeral
            // containers from the object; metadata is recorded at creation.
            if target.scope.is_whole() {
                evaluation
                    .patch
                    .extend(record_mutations(&view, &evaluation.changed_rules()));
            }
        }
        Ok(evaluation)
    }
}

/// The operation that records the changing rules in the
/// `gpu-policy.io/mutations` annotation, merged with what an earlier
/// invocation recorded. None when the annotation already says it all.
fn record_mutations(view: &PodView<'_>, rules: &BTreeSet<RuleId>) -> Option<PatchOperation> {
    let existing = view.annotation(MUTATIONS_ANNOTATION);
    let mut all: BTreeSet<RuleId> = rules.clone();
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
    let value = all
        .iter()
        .map(|rule| rule.as_str())
        .chain(unknown)
        .collect::<Vec<_>>()
        .join(",");
    if existing == Some(value.as_str()) {
        return None;
    }
    let mut path = view.metadata_pointer.clone();
    let operation = if view.annotations.is_some() {
        path.push_back("annotations");
        path.push_back(MUTATIONS_ANNOTATION);
        add(path, Value::String(value))
    } else {
        let mut annotations = Map::new();
        annotations.insert(MUTATIONS_ANNOTATION.to_owned(), Value::String(value));
        let mut annotations = Value::Object(annotations);
        if view.metadata.is_some() {
            path.push_back("annotations");
        } else {
            let mut metadata = Map::new();
            metadata.insert("annotations".to_owned(), annotations);
            annotations = Value::Object(metadata);
        }
        add(path, annotations)
    };
    Some(operation)
}
