//! The offline evaluation of manifests, for `check` and `audit`: each object
//! evaluated as the webhook would admit its creation, into an [`ObjectReport`]
//! ([`Checker`], built once per run, per namespace in `audit`).

use std::collections::BTreeMap;

use json_patch::PatchOperation;
use serde::Serialize;
use serde_json::Value;

use crate::document::{Document, Json};

use super::answer::{Mode, decide, unreadable};
use super::images;
use super::kinds::ObjectKind;
use crate::policy::dra::tables::{ClaimTables, GpuSettings};
use crate::policy::pod::ClaimSource;
use crate::policy::{
    ClaimFacts, ClusterFacts, Evaluation, Evaluator, Form, ImageFacts, NodeFacts, Notice, PodView,
    RuleId, Subject, Violation,
};
use crate::settings::{AllowlistEntry, GPU_NEEDS_ANNOTATION, NamespaceSettings, Settings};

/// One element of `check -o json`.
#[derive(Debug, Clone, Default, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ObjectReport {
    pub api_version: String,
    pub kind: String,
    pub namespace: String,
    /// `metadata.name`, else `metadata.generateName`.
    pub name: String,
    pub allowed: bool,
    /// Not a kind the policy looks at.
    pub ignored: bool,
    pub violations: Vec<Violation>,
    pub warnings: Vec<String>,
    /// RFC 6902 operations the webhook would return.
    pub patch: Vec<PatchOperation>,
    /// Why the object could not be read (a field of the wrong shape).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For people: the changes (of a workload, those its pods will get).
    #[serde(skip)]
    pub changes: Vec<(RuleId, String)>,
    #[serde(skip)]
    pub denial: Option<String>,
    /// `warnings`, not cut (the text output prints these).
    #[serde(skip)]
    pub warnings_in_full: Vec<String>,
    #[serde(skip)]
    pub facts: ObjectFacts,
}

/// What `audit`'s policy reports (`crate::reports`) show beside findings.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ObjectFacts {
    pub uid: Option<String>,
    pub allowlisted: Option<AllowlistEntry>,
    /// In every mode (`warnings` hold them only where the mode warns).
    pub notices: Vec<Notice>,
    /// Of the GPU containers, each once.
    pub gpu_images: Vec<String>,
    /// `gpu-policy.io/gpu-needs` as the pod (template) holds it after the
    /// changes: what R4 records of its DRA GPUs.
    pub gpu_needs: Option<String>,
    /// Those the pod spec names (and, of a Pod, those its status says were
    /// made from templates for it).
    pub resource_claims: Vec<String>,
    pub claim_templates: Vec<String>,
}

impl ObjectReport {
    /// An object nothing was found in yet, named as its manifest names it.
    pub fn allowed(object: &Value, default_namespace: &str) -> Self {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        ObjectReport {
            api_version: text("/apiVersion").unwrap_or("").to_owned(),
            kind: text("/kind").unwrap_or("").to_owned(),
            namespace: text("/metadata/namespace").unwrap_or(default_namespace).to_owned(),
            name: text("/metadata/name")
                .or_else(|| text("/metadata/generateName"))
                .unwrap_or("")
                .to_owned(),
            allowed: true,
            facts: ObjectFacts {
                uid: text("/metadata/uid").map(str::to_owned),
                ..ObjectFacts::default()
            },
            ..ObjectReport::default()
        }
    }
}

/// Evaluates manifest objects as the webhook would admit their creation in
/// a namespace of one mode.
///
/// ```no_run
/// # use gpu_policy::admission::{Checker, Mode};
/// # let (settings, objects) = (gpu_policy::settings::Settings::default(), Vec::new());
/// let checker = Checker::new(&settings, Mode::Enforce, "default").with_input(&objects);
/// let reports = checker.check_all(&objects);
/// ```
pub struct Checker<'a> {
    settings: &'a Settings,
    mode: Mode,
    /// Of the objects that name none.
    namespace: &'a str,
    namespace_settings: NamespaceSettings,
    claims: Claims<'a>,
    /// `check --nodes`.
    nodes: Option<&'a dyn NodeFacts>,
    /// `check --old`, by namespace and name.
    old_pods: BTreeMap<(String, String), &'a Value>,
}

/// Where the DRA claims of the objects' pods resolve.
enum Claims<'a> {
    /// In the object itself, each object being the whole input; the
    /// settings are shared by every object's tables.
    Alone(GpuSettings),
    /// In the objects of one input (`check -f`).
    Input(ClaimTables),
    /// In the cluster, which also answers the rules' other questions.
    Cluster(&'a dyn ClusterFacts),
}

impl<'a> Checker<'a> {
    /// Objects that name no namespace are in `namespace` (no annotations);
    /// each is evaluated alone, without cluster or registry.
    pub fn new(settings: &'a Settings, mode: Mode, namespace: &'a str) -> Self {
        Self {
            settings,
            mode,
            namespace,
            namespace_settings: settings.for_namespace(&BTreeMap::new()),
            claims: Claims::Alone(GpuSettings::from(settings)),
            nodes: None,
            old_pods: BTreeMap::new(),
        }
    }

    /// The pods before an update (`check --old`): a Pod of the input with
    /// the namespace and name of one is evaluated as its update, as the
    /// webhook judges a second `kubectl apply`. Other kinds are ignored.
    pub fn with_old(mut self, objects: &[&'a Value]) -> Self {
        for object in objects {
            let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
            let kind = ObjectKind::of_manifest(
                text("/apiVersion").unwrap_or(""),
                text("/kind").unwrap_or(""),
            );
            if kind != ObjectKind::Pod {
                continue;
            }
            let namespace = text("/metadata/namespace").unwrap_or(self.namespace);
            let name = text("/metadata/name").unwrap_or("");
            self.old_pods.insert((namespace.to_owned(), name.to_owned()), object);
        }
        self
    }

    pub fn with_annotations(mut self, annotations: &BTreeMap<String, String>) -> Self {
        self.namespace_settings = self.settings.for_namespace(annotations);
        self
    }

    /// The objects of one input, whose pods' DRA claims resolve among them.
    pub fn with_input(mut self, objects: &[&Value]) -> Self {
        self.claims = Claims::Input(ClaimTables::collect(objects, self.namespace, self.settings));
        self
    }

    pub fn with_nodes(mut self, nodes: &'a dyn NodeFacts) -> Self {
        self.nodes = Some(nodes);
        self
    }

    pub fn with_cluster(mut self, cluster: &'a dyn ClusterFacts) -> Self {
        self.claims = Claims::Cluster(cluster);
        self
    }

    pub fn check(&self, object: &Value) -> ObjectReport {
        self.check_resolved(object, None)
    }

    pub fn check_all(&self, objects: &[&Value]) -> Vec<ObjectReport> {
        objects.iter().map(|object| self.check(object)).collect()
    }

    /// [`Checker::check`] with what registries said of the images (from
    /// [`Checker::images`]).
    pub fn check_resolved(&self, object: &Value, images: Option<&dyn ImageFacts>) -> ObjectReport {
        let mut report = ObjectReport::allowed(object, self.namespace);
        let document = Document::from_value(object);
        let old = self.old_of(object).map(Document::from_value);
        let old = old.as_ref().map(Document::root);
        let Some((kind, subject)) = self.subject(document.root(), old) else {
            report.ignored = true;
            return report;
        };
        let mut alone = None;
        let claims = self.claims_of(object, &mut alone);
        let cluster = match &self.claims {
            Claims::Cluster(cluster) => Some(*cluster),
            _ => None,
        };
        let evaluator = Evaluator {
            settings: self.settings,
            namespace: &self.namespace_settings,
            cluster,
            nodes: self.nodes,
            claims: Some(claims),
            images,
            claim_owner: None,
        };
        let answer = match evaluator.evaluate(&subject) {
            Ok(evaluation) => {
                let answer = decide(self.mode, kind, &evaluation);
                self.describe(&mut report.facts, object, &subject, &evaluation, Some(claims));
                report.violations = evaluation.violations;
                report.changes = evaluation
                    .changes
                    .into_iter()
                    .map(|change| (change.rule, change.summary))
                    .collect();
                if answer.carries_patch() {
                    report.patch = evaluation.patch;
                }
                answer
            }
            Err(error) => {
                let answer = unreadable(&report.kind, &error);
                report.error = answer.denial.clone();
                answer
            }
        };
        report.allowed = answer.allowed;
        report.denial = answer.denial;
        report.warnings = answer.warnings;
        report.warnings_in_full = answer.warnings_in_full;
        report
    }

    /// What the webhook would look up for each object, in order.
    pub fn images(&self, objects: &[&Value]) -> Vec<Option<images::Wanted>> {
        objects
            .iter()
            .map(|object| {
                let document = Document::from_value(object);
                let old = self.old_of(object).map(Document::from_value);
                let (_, subject) =
                    self.subject(document.root(), old.as_ref().map(Document::root))?;
                let mut alone = None;
                let claims = self.claims_of(object, &mut alone);
                images::wanted(&subject, self.settings, Some(claims))
            })
            .collect()
    }

    /// Where the claims of `object`'s pods resolve; `alone` holds the
    /// object's own.
    fn claims_of<'s>(
        &'s self,
        object: &Value,
        alone: &'s mut Option<ClaimTables>,
    ) -> &'s dyn ClaimFacts {
        match &self.claims {
            Claims::Alone(settings) => {
                alone.insert(ClaimTables::collect(&[object], self.namespace, settings.clone()))
            }
            Claims::Input(input) => input,
            Claims::Cluster(cluster) => *cluster,
        }
    }

    pub fn old_of(&self, object: &Value) -> Option<&'a Value> {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        let namespace = text("/metadata/namespace").unwrap_or(self.namespace);
        let name = text("/metadata/name")?;
        self.old_pods.get(&(namespace.to_owned(), name.to_owned())).copied()
    }

    /// What an object is evaluated as: created, or a Pod as an update from
    /// `old`. None for the kinds the policy ignores.
    fn subject<'o>(
        &'o self,
        object: Json<'o>,
        old: Option<Json<'o>>,
    ) -> Option<(ObjectKind, Subject<'o>)> {
        let text = |pointer: &str| object.pointer(pointer).and_then(Json::as_str);
        let kind =
            ObjectKind::of_manifest(text("/apiVersion").unwrap_or(""), text("/kind").unwrap_or(""));
        let namespace = text("/metadata/namespace").unwrap_or(self.namespace);
        match old {
            Some(old) if kind == ObjectKind::Pod => {
                Some((kind, Subject::pod_update(object, old, namespace)))
            }
            _ => Some((kind, kind.created(object, namespace)?)),
        }
    }
}

impl Checker<'_> {
    /// The pod or pod template is read after the patch, as it would be stored.
    fn describe(
        &self,
        facts: &mut ObjectFacts,
        object: &Value,
        subject: &Subject<'_>,
        evaluation: &Evaluation,
        claims: Option<&dyn ClaimFacts>,
    ) {
        facts.allowlisted = evaluation.allowlisted.clone();
        facts.notices = evaluation.notices.clone();
        let Form::Pod { shape, .. } = subject.form else {
            return;
        };
        if let Some((images, _)) = subject.gpu_images(self.settings, claims) {
            facts.gpu_images = images.into_iter().map(str::to_owned).collect();
        }
        let patched = (!evaluation.patch.is_empty())
            .then(|| patched(object, &evaluation.patch).ok())
            .flatten();
        let after = patched.as_ref().unwrap_or(object);
        let document = Document::from_value(after);
        let Ok(Some(view)) = PodView::parse(document.root(), shape, self.settings) else {
            return;
        };
        facts.gpu_needs = view.annotation(GPU_NEEDS_ANNOTATION).map(str::to_owned);
        // Of a Pod, the claims made from templates, by the pod claim's name.
        let made = after.pointer("/status/resourceClaimStatuses").and_then(Value::as_array);
        for claim in &view.resource_claims {
            match claim.source {
                ClaimSource::Claim(name) => facts.resource_claims.push(name.to_owned()),
                ClaimSource::Template(template) => {
                    facts.claim_templates.push(template.to_owned());
                    let generated = made
                        .into_iter()
                        .flatten()
                        .filter(|status| {
                            status.get("name").and_then(Value::as_str) == Some(claim.name)
                        })
                        .find_map(|status| status.get("resourceClaimName").and_then(Value::as_str));
                    facts.resource_claims.extend(generated.map(str::to_owned));
                }
                ClaimSource::Missing => {}
            }
        }
    }
}

pub fn mutated(object: &Value, report: &ObjectReport) -> Result<Value, json_patch::PatchError> {
    patched(object, &report.patch)
}

fn patched(
    object: &Value,
    patch: &[json_patch::PatchOperation],
) -> Result<Value, json_patch::PatchError> {
    let mut after = object.clone();
    json_patch::patch(&mut after, patch)?;
    Ok(after)
}
