//! A read-only view over the raw JSON of a pod, or of the pod template inside
//! a workload: containers with their kind and JSON pointer, GPU requests,
//! volumes and annotations.
//!
//! The view borrows from the object and never copies or re-encodes it, so
//! patches computed from it address the object exactly as the API server sent
//! it, including fields this program does not know. Only the fields the rules
//! read are checked for shape; a wrong shape there is an [`ObjectError`] that
//! names the field.
//!
//! Its containers are [`super::container`]'s type; while the view is read,
//! the sharing model marks the containers that hold a share
//! ([`super::sharing::mark`]).
//!
//! It is the one parsed view of a [`Subject`](super::Subject) under
//! evaluation: the rules, the mutations record and the registry lookups
//! read the object through it, and patches are addressed by the JSON
//! pointers it reports (`metadata_pointer`, `spec_pointer`, each
//! container's `pointer`, an env entry's `index`), not by the subtrees it
//! read them from.
//!
//! # Its backing
//!
//! Today the view borrows a `serde_json::Value` tree, the largest cost of
//! a request (docs/performance.md). To read a borrowed document lazily
//! instead, only [`PodView::parse`] and [`Container::parse`] change: what
//! they hand out is strings, counts and pointers, never a `Value`, except
//! where a rule still reads a raw map: `spec` (R3's `overhead`,
//! `nodeSelector`, `tolerations`; R4's affinity; the pod's platform for a
//! registry lookup), `metadata` and `annotations` (asked through
//! [`PodView::annotation`], [`PodView::has_metadata`] and
//! [`PodView::has_annotations`] outside the rules), and an env entry's
//! `raw` (the sharing schemes). Those few become methods of the view as
//! their rules move to them.

use super::message::json_type;
use json_patch::jsonptr::PointerBuf;
use serde_json::{Map, Value};

pub use super::container::{ClaimUse, Container, ContainerKind, EnvEntry, GpuResource};
use super::dra::claims::DraCount;
use super::quantity::GpuCount;
use super::sharing::{self, KaiFraction};
use crate::settings::{HAMI_CARDS, Settings};

/// Where the pod template sits inside an object, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A Pod: `metadata` and `spec` at the top.
    Pod,
    /// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job,
    /// ReplicationController: `spec.template`.
    Template,
    /// CronJob: `spec.jobTemplate.spec.template`.
    CronJob,
    /// PodTemplate: `template`.
    PodTemplate,
}

impl Shape {
    /// The path of the pod template (`metadata` + `spec`) inside the object.
    pub(super) fn template_path(self) -> &'static [&'static str] {
        match self {
            Shape::Pod => &[],
            Shape::Template => &["spec", "template"],
            Shape::CronJob => &["spec", "jobTemplate", "spec", "template"],
            Shape::PodTemplate => &["template"],
        }
    }
}

/// An object whose fields the rules read have the wrong shape.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{field}: {problem}")]
pub struct ObjectError {
    /// Dotted field path, e.g. `spec.containers[0].env`.
    pub field: String,
    pub problem: String,
}

/// Where a pod claim comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClaimSource<'a> {
    /// `resourceClaimTemplateName`: a claim made for the pod from a template.
    Template(&'a str),
    /// `resourceClaimName`: an existing claim, possibly shared.
    Claim(&'a str),
    /// Neither (the API server refuses such a pod).
    Missing,
}

/// One entry of the pod's `spec.resourceClaims[]`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PodClaim<'a> {
    pub name: &'a str,
    pub source: ClaimSource<'a>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Volume<'a> {
    pub name: &'a str,
    pub host_path: Option<&'a str>,
}

/// The read-only view the rules get.
#[derive(Debug, Clone)]
pub struct PodView<'a> {
    pub shape: Shape,
    /// JSON pointer of the pod template's `metadata` (for a Pod, `/metadata`).
    pub metadata_pointer: PointerBuf,
    /// JSON pointer of the pod spec (for a Pod, `/spec`).
    pub spec_pointer: PointerBuf,
    /// The pod template's `metadata` (raw), when present.
    pub metadata: Option<&'a Map<String, Value>>,
    /// The pod template's `metadata.annotations` (raw).
    pub annotations: Option<&'a Map<String, Value>>,
    /// The raw pod spec.
    pub spec: &'a Map<String, Value>,
    pub runtime_class_name: Option<&'a str>,
    /// `spec.schedulerName`.
    pub scheduler_name: Option<&'a str>,
    pub containers: Vec<Container<'a>>,
    pub volumes: Vec<Volume<'a>>,
    /// `spec.resourceClaims[]`.
    pub resource_claims: Vec<PodClaim<'a>>,
    /// The GPUs of every resolved GPU claim (or claim request) its
    /// containers use, each counted once: a claim is allocated for the
    /// whole pod, whichever containers share it.
    pub dra_gpus: Option<DraCount>,
}

impl<'a> PodView<'a> {
    /// Reads the view. Returns `Ok(None)` for a workload without a pod
    /// template (a ReplicationController may omit it).
    pub fn parse(
        object: &'a Value,
        shape: Shape,
        settings: &Settings,
    ) -> Result<Option<Self>, ObjectError> {
        let template_path = shape.template_path();
        let mut template = as_object(object, &FieldPath::root())?;
        let mut pointer = PointerBuf::root();
        for (depth, key) in template_path.iter().enumerate() {
            pointer.push_back(*key);
            match template.get(*key) {
                None | Some(Value::Null) => return Ok(None),
                Some(value) => {
                    template = as_object(value, &FieldPath::Keys(&template_path[..=depth]))?;
                }
            }
        }
        let path = FieldPath::Keys(template_path);
        let metadata_path = path.key("metadata");
        let metadata = optional_object(template, "metadata", &path)?;
        let annotations = match metadata {
            Some(meta) => optional_object(meta, "annotations", &metadata_path)?,
            None => None,
        };
        if let Some(annotations) = annotations {
            let at = metadata_path.key("annotations");
            for (key, value) in annotations {
                if !value.is_string() {
                    return Err(at.key(key).error("must be a string"));
                }
            }
        }
        let spec_path = path.key("spec");
        let spec = match template.get("spec") {
            None | Some(Value::Null) if shape == Shape::Pod => {
                return Err(spec_path.error("is missing"));
            }
            None | Some(Value::Null) => return Ok(None),
            Some(value) => as_object(value, &spec_path)?,
        };
        let mut metadata_pointer = pointer.clone();
        metadata_pointer.push_back("metadata");
        let mut spec_pointer = pointer;
        spec_pointer.push_back("spec");

        let runtime_class_name = optional_str(spec, "runtimeClassName", &spec_path)?;
        let scheduler_name = optional_str(spec, "schedulerName", &spec_path)?;
        let mut containers = Vec::new();
        for (field, default_kind) in [
            ("initContainers", ContainerKind::Init),
            ("containers", ContainerKind::Regular),
            ("ephemeralContainers", ContainerKind::Ephemeral),
        ] {
            let list_path = spec_path.key(field);
            let Some(list) = optional_array(spec, field, &spec_path)? else {
                continue;
            };
            for (index, raw) in list.iter().enumerate() {
                let mut container_pointer = spec_pointer.clone();
                container_pointer.push_back(field);
                container_pointer.push_back(index.to_string());
                containers.push(Container::parse(
                    raw,
                    default_kind,
                    container_pointer,
                    &list_path.index(index),
                    settings,
                )?);
            }
        }
        let mut volumes = Vec::new();
        if let Some(list) = optional_array(spec, "volumes", &spec_path)? {
            let list_path = spec_path.key("volumes");
            for (index, raw) in list.iter().enumerate() {
                let at = list_path.index(index);
                let volume = as_object(raw, &at)?;
                let name = optional_str(volume, "name", &at)?.unwrap_or("");
                let host_path = match optional_object(volume, "hostPath", &at)? {
                    Some(host) => optional_str(host, "path", &at.key("hostPath"))?,
                    None => None,
                };
                volumes.push(Volume { name, host_path });
            }
        }
        let mut resource_claims = Vec::new();
        if let Some(list) = optional_array(spec, "resourceClaims", &spec_path)? {
            let list_path = spec_path.key("resourceClaims");
            for (index, raw) in list.iter().enumerate() {
                let at = list_path.index(index);
                let claim = as_object(raw, &at)?;
                let name = optional_str(claim, "name", &at)?.unwrap_or("");
                let source = match (
                    optional_str(claim, "resourceClaimTemplateName", &at)?,
                    optional_str(claim, "resourceClaimName", &at)?,
                ) {
                    (Some(template), _) => ClaimSource::Template(template),
                    (None, Some(claim)) => ClaimSource::Claim(claim),
                    (None, None) => ClaimSource::Missing,
                };
                resource_claims.push(PodClaim { name, source });
            }
        }
        let mut view = Self {
            shape,
            metadata_pointer,
            spec_pointer,
            metadata,
            annotations,
            spec,
            runtime_class_name,
            scheduler_name,
            containers,
            volumes,
            resource_claims,
            dra_gpus: None,
        };
        let kai = view.kai_fraction(settings);
        sharing::mark(&mut view.containers, kai.as_ref());
        Ok(Some(view))
    }

    /// The pod's KAI-Scheduler fraction request, when KAI sharing is on and
    /// KAI schedules the pod ([`sharing::kai_fraction`]).
    pub fn kai_fraction(&self, settings: &Settings) -> Option<KaiFraction<'a>> {
        sharing::kai_fraction(|key| self.annotation(key), self.scheduler_name, settings)
    }

    pub fn annotation(&self, key: &str) -> Option<&'a str> {
        self.annotations?.get(key)?.as_str()
    }

    /// The pod template has `metadata` (not null).
    pub fn has_metadata(&self) -> bool {
        self.metadata.is_some()
    }

    /// The pod template has `metadata.annotations` (not null).
    pub fn has_annotations(&self) -> bool {
        self.annotations.is_some()
    }

    /// A GPU pod: at least one GPU container.
    pub fn is_gpu_pod(&self) -> bool {
        self.containers.iter().any(Container::is_gpu)
    }

    /// A container uses a claim that cannot be resolved: the pod may be a
    /// GPU pod, so checks that need it to be none do not deny it.
    pub fn may_hold_unresolved_gpus(&self) -> bool {
        self.containers.iter().any(|c| c.unresolved_claim)
    }

    /// A pod with at least one GPU container through the device plugin.
    pub fn is_device_plugin_gpu_pod(&self) -> bool {
        self.containers.iter().any(Container::is_device_plugin_gpu)
    }

    /// Names of the GPU resources any container mentions (or a sharing
    /// scheme implies), in first-seen order.
    pub fn gpu_resource_names(&self) -> Vec<&'a str> {
        let mut names: Vec<&str> = Vec::new();
        for container in &self.containers {
            let implied = (container.implied_cards > 0).then_some(HAMI_CARDS);
            for name in container
                .gpu_resources
                .iter()
                .map(|r| r.name)
                .chain(implied)
            {
                if !names.contains(&name) {
                    names.push(name);
                }
            }
        }
        names
    }

    /// The pod's effective count of one resource, by Kubernetes' own formula:
    /// the larger of what runs side by side (regular containers plus sidecar
    /// init containers) and the peak during initialisation (each plain init
    /// container plus the sidecars started before it).
    pub fn effective_count(&self, resource: &str) -> u64 {
        let mut steady = 0u64;
        let mut sidecars_so_far = 0u64;
        let mut init_peak = 0u64;
        for container in &self.containers {
            let count = container.count_of(resource);
            match container.kind {
                ContainerKind::Regular => steady = steady.saturating_add(count),
                ContainerKind::Sidecar => {
                    steady = steady.saturating_add(count);
                    sidecars_so_far = sidecars_so_far.saturating_add(count);
                    init_peak = init_peak.max(sidecars_so_far);
                }
                ContainerKind::Init => {
                    init_peak = init_peak.max(count.saturating_add(sidecars_so_far));
                }
                ContainerKind::Ephemeral => {}
            }
        }
        steady.max(init_peak)
    }
}

impl<'a> Container<'a> {
    fn parse(
        raw: &'a Value,
        default_kind: ContainerKind,
        pointer: PointerBuf,
        path: &FieldPath<'_>,
        settings: &Settings,
    ) -> Result<Self, ObjectError> {
        let container = as_object(raw, path)?;
        let name = optional_str(container, "name", path)?.unwrap_or("");
        let kind = match (
            default_kind,
            optional_str(container, "restartPolicy", path)?,
        ) {
            (ContainerKind::Init, Some("Always")) => ContainerKind::Sidecar,
            (kind, _) => kind,
        };
        let image = optional_str(container, "image", path)?;
        let env = match optional_array(container, "env", path)? {
            None => None,
            Some(list) => {
                let list_path = path.key("env");
                let mut entries = Vec::with_capacity(list.len());
                for (index, raw) in list.iter().enumerate() {
                    let at = list_path.index(index);
                    let entry = as_object(raw, &at)?;
                    let name = optional_str(entry, "name", &at)?.unwrap_or("");
                    entries.push(EnvEntry {
                        index,
                        name,
                        raw: entry,
                    });
                }
                Some(entries)
            }
        };
        let mut gpu_resources: Vec<GpuResource> = Vec::new();
        let mut shares: Vec<GpuResource> = Vec::new();
        let mut claims = Vec::new();
        if let Some(resources) = optional_object(container, "resources", path)? {
            let at = path.key("resources");
            if let Some(list) = optional_array(resources, "claims", &at)? {
                let list_path = at.key("claims");
                for (index, raw) in list.iter().enumerate() {
                    let at = list_path.index(index);
                    let entry = as_object(raw, &at)?;
                    claims.push(ClaimUse {
                        name: optional_str(entry, "name", &at)?.unwrap_or(""),
                        request: optional_str(entry, "request", &at)?.filter(|r| !r.is_empty()),
                    });
                }
            }
            for (field, is_limit) in [("requests", false), ("limits", true)] {
                let Some(map) = optional_object(resources, field, &at)? else {
                    continue;
                };
                for (resource, value) in map {
                    let list = if settings.is_gpu_resource(resource) {
                        &mut gpu_resources
                    } else if settings.is_share_resource(resource) {
                        &mut shares
                    } else {
                        continue;
                    };
                    let count = GpuCount::from_json(value);
                    let entry = match list.iter().position(|r| r.name == resource) {
                        Some(at) => &mut list[at],
                        None => {
                            list.push(GpuResource {
                                name: resource,
                                request: None,
                                limit: None,
                            });
                            match list.last_mut() {
                                Some(entry) => entry,
                                None => continue,
                            }
                        }
                    };
                    if is_limit {
                        entry.limit = Some(count);
                    } else {
                        entry.request = Some(count);
                    }
                }
            }
        }
        let mut mount_paths = Vec::new();
        if let Some(list) = optional_array(container, "volumeMounts", path)? {
            let list_path = path.key("volumeMounts");
            for (index, raw) in list.iter().enumerate() {
                let at = list_path.index(index);
                let mount = as_object(raw, &at)?;
                if let Some(mount_path) = optional_str(mount, "mountPath", &at)? {
                    mount_paths.push(mount_path);
                }
            }
        }
        let privileged = match optional_object(container, "securityContext", path)? {
            Some(context) => {
                optional_bool(context, "privileged", &path.key("securityContext"))?.unwrap_or(false)
            }
            None => false,
        };
        Ok(Self {
            name,
            kind,
            pointer,
            image,
            env,
            gpu_resources,
            mount_paths,
            claims,
            dra_gpus: None,
            unresolved_claim: false,
            privileged,
            shares,
            kai_share: false,
            implied_cards: 0,
        })
    }
}

/// Where a field is, for error messages (`spec.containers[0].env`): a
/// chain of borrowed links, spelled out only when there is an error to
/// report (most objects have none).
#[derive(Debug, Clone, Copy)]
enum FieldPath<'p> {
    /// Keys from the object's root (a pod template's place in its workload).
    Keys(&'p [&'p str]),
    Key(&'p FieldPath<'p>, &'p str),
    Index(&'p FieldPath<'p>, usize),
}

impl FieldPath<'_> {
    fn root() -> Self {
        FieldPath::Keys(&[])
    }

    fn key<'a>(&'a self, key: &'a str) -> FieldPath<'a> {
        FieldPath::Key(self, key)
    }

    fn index(&self, index: usize) -> FieldPath<'_> {
        FieldPath::Index(self, index)
    }

    fn write_to(&self, out: &mut String) {
        let push_key = |out: &mut String, key: &str| {
            if !out.is_empty() {
                out.push('.');
            }
            out.push_str(key);
        };
        match self {
            FieldPath::Keys(keys) => keys.iter().for_each(|key| push_key(out, key)),
            FieldPath::Key(parent, key) => {
                parent.write_to(out);
                push_key(out, key);
            }
            FieldPath::Index(parent, index) => {
                parent.write_to(out);
                out.push('[');
                out.push_str(&index.to_string());
                out.push(']');
            }
        }
    }

    fn error(&self, problem: &str) -> ObjectError {
        let mut field = String::new();
        self.write_to(&mut field);
        if field.is_empty() {
            field.push_str("object");
        }
        ObjectError {
            field,
            problem: problem.to_owned(),
        }
    }
}

fn as_object<'a>(
    value: &'a Value,
    path: &FieldPath<'_>,
) -> Result<&'a Map<String, Value>, ObjectError> {
    value
        .as_object()
        .ok_or_else(|| path.error(&format!("must be an object, not {}", json_type(value))))
}

fn optional_object<'a>(
    parent: &'a Map<String, Value>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<&'a Map<String, Value>>, ObjectError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => as_object(value, &path.key(key)).map(Some),
    }
}

fn optional_array<'a>(
    parent: &'a Map<String, Value>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<&'a Vec<Value>>, ObjectError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(list)) => Ok(Some(list)),
        Some(value) => Err(path
            .key(key)
            .error(&format!("must be a list, not {}", json_type(value)))),
    }
}

fn optional_bool(
    parent: &Map<String, Value>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<bool>, ObjectError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Bool(flag)) => Ok(Some(*flag)),
        Some(value) => Err(path
            .key(key)
            .error(&format!("must be a boolean, not {}", json_type(value)))),
    }
}

fn optional_str<'a>(
    parent: &'a Map<String, Value>,
    key: &str,
    path: &FieldPath<'_>,
) -> Result<Option<&'a str>, ObjectError> {
    match parent.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(text)) => Ok(Some(text)),
        Some(value) => Err(path
            .key(key)
            .error(&format!("must be a string, not {}", json_type(value)))),
    }
}

#[cfg(test)]
#[path = "pod_tests.rs"]
mod tests;
