//! The per-object report of the offline `check`: decision, violations,
//! changes, warnings, and the object after mutation.

use std::collections::BTreeMap;

use json_patch::PatchOperation;
use serde::Serialize;
use serde_json::Value;

use crate::admission::{Mode, ObjectKind, Subject, decide, evaluate_object, unreadable};
use crate::policy::input_claims::InputClaims;
use crate::policy::{ClaimFacts, ClusterFacts, Evaluator, ImageFacts, RuleId, Violation};
use crate::registry::Platform;
use crate::settings::Settings;

/// One element of `check -o json`.
#[derive(Debug, Clone, PartialEq, Serialize)]
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
    /// Why the object could not be read (a field of the wrong shape); only
    /// present then.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// For people: the changes, each with its rule. For a workload these
    /// are the changes its pods will get when they are created.
    #[serde(skip)]
    pub changes: Vec<(RuleId, String)>,
    /// The denial message, when denied.
    #[serde(skip)]
    pub denial: Option<String>,
}

impl ObjectReport {
    /// The report of an object nothing was found in yet: allowed, no
    /// changes; its names read from the manifest (`default_namespace` when
    /// it names none).
    pub fn allowed(object: &Value, default_namespace: &str) -> Self {
        let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
        ObjectReport {
            api_version: text("/apiVersion").unwrap_or("").to_owned(),
            kind: text("/kind").unwrap_or("").to_owned(),
            namespace: text("/metadata/namespace")
                .unwrap_or(default_namespace)
                .to_owned(),
            name: text("/metadata/name")
                .or_else(|| text("/metadata/generateName"))
                .unwrap_or("")
                .to_owned(),
            allowed: true,
            ignored: false,
            violations: Vec::new(),
            warnings: Vec::new(),
            patch: Vec::new(),
            error: None,
            changes: Vec::new(),
            denial: None,
        }
    }
}

/// Evaluates one manifest object as the webhook would admit its creation in
/// a namespace of the given mode. The object is the whole input: the claims
/// its pods use cannot be resolved unless it is one of them.
pub fn check_object(
    object: &Value,
    default_namespace: &str,
    mode: Mode,
    settings: &Settings,
    namespace_annotations: &BTreeMap<String, String>,
) -> ObjectReport {
    let claims = InputClaims::collect(&[object], default_namespace, settings);
    evaluate_report(
        object,
        default_namespace,
        mode,
        settings,
        namespace_annotations,
        (None, Some(&claims)),
        None,
    )
}

/// Evaluates the objects of one input (`check -f`): the DRA claims their
/// pods use are resolved from the ResourceClaimTemplates, ResourceClaims and
/// DeviceClasses among them.
pub fn check_objects(
    objects: &[&Value],
    default_namespace: &str,
    mode: Mode,
    settings: &Settings,
    namespace_annotations: &BTreeMap<String, String>,
) -> Vec<ObjectReport> {
    check_objects_with_images(
        objects,
        default_namespace,
        mode,
        settings,
        namespace_annotations,
        &[],
    )
}

/// [`check_objects`] with what registries said of each object's images
/// (`images[i]` for `objects[i]`; missing entries: the table alone).
pub fn check_objects_with_images(
    objects: &[&Value],
    default_namespace: &str,
    mode: Mode,
    settings: &Settings,
    namespace_annotations: &BTreeMap<String, String>,
    images: &[Option<&dyn ImageFacts>],
) -> Vec<ObjectReport> {
    let claims = InputClaims::collect(objects, default_namespace, settings);
    objects
        .iter()
        .enumerate()
        .map(|(index, object)| {
            evaluate_report(
                object,
                default_namespace,
                mode,
                settings,
                namespace_annotations,
                (None, Some(&claims)),
                images.get(index).copied().flatten(),
            )
        })
        .collect()
}

/// The images of each object's GPU containers and the platform its pods
/// run on, as the webhook looks them up (None: nothing to look up).
pub fn images_to_resolve(
    objects: &[&Value],
    default_namespace: &str,
    settings: &Settings,
) -> Vec<Option<(Vec<String>, Platform)>> {
    let claims = InputClaims::collect(objects, default_namespace, settings);
    let namespace_settings = settings.for_namespace(&BTreeMap::new());
    let evaluator = Evaluator {
        settings,
        namespace: &namespace_settings,
        cluster: None,
        claims: Some(&claims),
        images: None,
    };
    objects
        .iter()
        .map(|object| {
            let text = |pointer: &str| object.pointer(pointer).and_then(Value::as_str);
            let kind = ObjectKind::of_manifest(
                text("/apiVersion").unwrap_or(""),
                text("/kind").unwrap_or(""),
            );
            let namespace = text("/metadata/namespace").unwrap_or(default_namespace);
            let target = Subject::created(object, kind, namespace).target()?;
            let (images, spec) = evaluator.gpu_images(&target).ok()??;
            let images = images.into_iter().map(str::to_owned).collect();
            Some((images, Platform::of_spec_fields(spec)))
        })
        .collect()
}

/// [`check_object`] with what the cluster knows (the `audit` command).
pub fn check_object_in(
    object: &Value,
    default_namespace: &str,
    mode: Mode,
    settings: &Settings,
    namespace_annotations: &BTreeMap<String, String>,
    cluster: Option<&dyn ClusterFacts>,
) -> ObjectReport {
    evaluate_report(
        object,
        default_namespace,
        mode,
        settings,
        namespace_annotations,
        (cluster, cluster.map(|c| -> &dyn ClaimFacts { c })),
        None,
    )
}

fn evaluate_report(
    object: &Value,
    default_namespace: &str,
    mode: Mode,
    settings: &Settings,
    namespace_annotations: &BTreeMap<String, String>,
    (cluster, claims): (Option<&dyn ClusterFacts>, Option<&dyn ClaimFacts>),
    images: Option<&dyn ImageFacts>,
) -> ObjectReport {
    let mut report = ObjectReport::allowed(object, default_namespace);
    let kind = ObjectKind::of_manifest(&report.api_version, &report.kind);
    let namespace_settings = settings.for_namespace(namespace_annotations);
    let evaluator = Evaluator {
        settings,
        namespace: &namespace_settings,
        cluster,
        claims,
        images,
    };
    let evaluated = evaluate_object(
        &evaluator,
        &Subject::created(object, kind, &report.namespace),
    );
    let decision = match evaluated {
        Ok(None) => {
            report.ignored = true;
            return report;
        }
        Ok(Some(evaluation)) => {
            let decision = decide(mode, kind, &evaluation);
            report.violations = evaluation.violations;
            report.changes = evaluation
                .changes
                .into_iter()
                .map(|change| (change.rule, change.summary))
                .collect();
            decision
        }
        Err(error) => {
            let decision = unreadable(&report.kind, &error);
            report.error = decision.denial.clone();
            decision
        }
    };
    report.allowed = decision.allowed;
    report.denial = decision.denial;
    report.warnings = decision.warnings;
    report.patch = decision.patch;
    report
}

/// The object after the report's patch, as the API server would store it.
pub fn mutated(object: &Value, report: &ObjectReport) -> Result<Value, json_patch::PatchError> {
    let mut patched = object.clone();
    json_patch::patch(&mut patched, &report.patch)?;
    Ok(patched)
}
