//! Runs the registered rules over one object and assembles the result.

use std::collections::BTreeSet;

use json_patch::PatchOperation;
use serde_json::{Map, Value};

use super::{
    Change, ClaimFacts, ClusterFacts, Evaluation, Identity, ImageFacts, Message, ObjectError,
    PodView, RULES, RuleId, RuleInput, Scope, Shape, Violation, add, allowlist, pod_claims,
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
    /// Where the pod's DRA claims are resolved: the cluster, or the other
    /// objects of `check`'s input. None: no claim can be resolved.
    pub claims: Option<&'a dyn ClaimFacts>,
    /// What images need, as resolved from their registries. None: the image
    /// table alone.
    pub images: Option<&'a dyn ImageFacts>,
}

/// The images of an object's GPU containers, each once, and the raw pod
/// spec they run in.
pub type GpuImages<'t> = (Vec<&'t str>, &'t Map<String, Value>);

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
            claims: cluster.map(|c| -> &dyn ClaimFacts { c }),
            images,
        }
    }
}

impl Evaluator<'_> {
    /// The images of the target's GPU containers, each once, and the pod
    /// spec they run in: what is looked up in registries before the rules
    /// run. None for an object without a GPU container (or a pod template),
    /// and for an update of ephemeral containers (they never hold GPUs).
    pub fn gpu_images<'t>(
        &self,
        target: &Target<'t>,
    ) -> Result<Option<GpuImages<'t>>, ObjectError> {
        if !target.scope.is_whole() {
            return Ok(None);
        }
        view_gpu_images(
            target.object,
            target.shape,
            target.namespace,
            self.settings,
            self.claims,
        )
    }

    /// Runs every rule over the target.
    pub fn evaluate(&self, target: &Target<'_>) -> Result<Evaluation, ObjectError> {
        let Evaluator {
            settings,
            namespace: namespace_settings,
            cluster,
            claims,
            images,
        } = *self;
        let mut evaluation = Evaluation {
            notices: namespace_settings.notices.clone(),
            ..Evaluation::default()
        };
        let Some(mut view) = PodView::parse(target.object, target.shape, settings)? else {
            return Ok(evaluation);
        };
        // Only a whole pod gets GPUs: the ephemeral containers of an update
        // never do.
        if target.scope.is_whole() {
            let unresolved = pod_claims::resolve(&mut view, claims, target.namespace);
            evaluation.notices.extend(unresolved);
        }
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
            images,
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

/// [`Evaluator::gpu_images`] of an object being created, read through the
/// whole [`PodView`] (its DRA claims resolved from `claims`).
pub fn view_gpu_images<'t>(
    object: &'t Value,
    shape: Shape,
    namespace: &str,
    settings: &Settings,
    claims: Option<&dyn ClaimFacts>,
) -> Result<Option<GpuImages<'t>>, ObjectError> {
    let Some(mut view) = PodView::parse(object, shape, settings)? else {
        return Ok(None);
    };
    let _unresolved = pod_claims::resolve(&mut view, claims, namespace);
    let mut images: Vec<&'t str> = Vec::new();
    for image in view
        .containers
        .iter()
        .filter(|c| c.is_gpu())
        .filter_map(|c| c.image)
    {
        if !images.contains(&image) {
            images.push(image);
        }
    }
    Ok((!images.is_empty()).then_some((images, view.spec)))
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

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::policy::NoticeKind;
    use crate::policy::cluster::{ClusterSnapshot, NodeGpus};
    use crate::policy::testing::evaluate_in_cluster;
    use crate::settings::ComputeCapability;

    #[test]
    fn notices_keep_their_kind_and_the_order_the_rules_run_in() {
        let node = NodeGpus {
            allocatable: [("nvidia.com/gpu".to_owned(), 8)].into_iter().collect(),
            compute_capability: Some(ComputeCapability::new(6, 1)),
        };
        let cluster = ClusterSnapshot {
            nodes: [("node-0".to_owned(), node)].into_iter().collect(),
            ..ClusterSnapshot::default()
        };
        let pod = json!({
            "metadata": {
                "namespace": "kube-system",
                "annotations": {"gpu-policy.io/min-compute-capability": "junk"},
                "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-gpu-exporter",
                                     "uid": "u-1", "controller": true}],
            },
            "spec": {"containers": [{"name": "c", "image": "nvidia/cuda:13.0.0-runtime-ubuntu24.04",
                                     "resources": {"limits": {"nvidia.com/gpu": 1}}}]},
        });
        let evaluation = evaluate_in_cluster(&pod, &cluster);
        let kinds: Vec<NoticeKind> = evaluation.notices.iter().map(|n| n.kind).collect();
        assert_eq!(
            kinds,
            vec![
                NoticeKind::UnverifiedOwner,
                NoticeKind::MissingRuntimeClass,
                NoticeKind::IgnoredAnnotation,
                NoticeKind::UnmetComputeCapability,
            ],
            "{:?}",
            evaluation.notices
        );
        assert!(
            evaluation
                .notices
                .iter()
                .all(|n| n.message.starts_with("gpu-policy: "))
        );
    }
}
