//! A read-only view over the raw JSON of a pod, or of the pod template inside a workload:
//! containers with their kind and JSON pointer, GPU requests, volumes and annotations.
//!
//! The view borrows the object and never re-encodes it, so patches addressed by the pointers it
//! reports (`metadata_pointer`, `spec_pointer`, each container's `pointer`, an env entry's `index`)
//! address the object as the API server sent it. Only the fields the rules read are checked for
//! shape; a wrong shape there is an [`ObjectError`] that names the field.

use std::collections::BTreeMap;

use crate::document::{Json, Object};
use json_patch::jsonptr::Pointer;

pub use super::container::{ClaimUse, Container, ContainerKind, EnvEntry, GpuResource};
use super::dra::claims::DraCount;
pub use super::fields::ObjectError;
use super::fields::{
    FieldPath, as_object, fields, member, object_field, objects, optional_bool, optional_object,
    optional_str, str_field,
};
use super::quantity::GpuCount;
use super::sharing::{self, KaiFraction};
use crate::settings::{HAMI_CARDS, Settings};

/// Where the pod template sits inside an object, by kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// A Pod: `metadata` and `spec` at the top.
    Pod,
    /// Deployment, ReplicaSet, StatefulSet, DaemonSet, Job, ReplicationController: `spec.template`.
    Template,
    /// CronJob: `spec.jobTemplate.spec.template`.
    CronJob,
    /// PodTemplate: `template`.
    PodTemplate,
}

impl Shape {
    /// Every shape (`admission::tests` holds it to the kinds admitted).
    pub const ALL: [Shape; 4] = [Shape::Pod, Shape::Template, Shape::CronJob, Shape::PodTemplate];

    /// The path of the pod template (`metadata` + `spec`) inside the object.
    pub(super) fn template_path(self) -> &'static [&'static str] {
        match self {
            Shape::Pod => &[],
            Shape::Template => &["spec", "template"],
            Shape::CronJob => &["spec", "jobTemplate", "spec", "template"],
            Shape::PodTemplate => &["template"],
        }
    }

    /// The JSON pointers of the template's `metadata` and `spec`.
    fn pointers(self) -> (&'static Pointer, &'static Pointer) {
        match self {
            Shape::Pod => (Pointer::from_static("/metadata"), Pointer::from_static("/spec")),
            Shape::Template => (
                Pointer::from_static("/spec/template/metadata"),
                Pointer::from_static("/spec/template/spec"),
            ),
            Shape::CronJob => (
                Pointer::from_static("/spec/jobTemplate/spec/template/metadata"),
                Pointer::from_static("/spec/jobTemplate/spec/template/spec"),
            ),
            Shape::PodTemplate => {
                (Pointer::from_static("/template/metadata"), Pointer::from_static("/template/spec"))
            }
        }
    }
}

/// Where a pod claim comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
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
    /// The pod template's `metadata` (raw), when present.
    pub metadata: Option<Object<'a>>,
    /// The pod template's `metadata.annotations` (raw).
    pub annotations: Option<Object<'a>>,
    /// The raw pod spec.
    pub spec: Object<'a>,
    pub runtime_class_name: Option<&'a str>,
    /// `spec.schedulerName`.
    pub scheduler_name: Option<&'a str>,
    pub containers: Vec<Container<'a>>,
    pub volumes: Vec<Volume<'a>>,
    /// `spec.resourceClaims[]`.
    pub resource_claims: Vec<PodClaim<'a>>,
    /// The GPUs of every resolved GPU claim (or claim request) its containers use, each counted
    /// once: a claim is allocated for the whole pod, whichever containers share it.
    pub dra_gpus: Option<DraCount>,
}

impl<'a> PodView<'a> {
    /// Reads the view; `Ok(None)` for a workload without a pod template (a ReplicationController).
    pub fn parse(
        object: Json<'a>,
        shape: Shape,
        settings: &Settings,
    ) -> Result<Option<Self>, ObjectError> {
        let template_path = shape.template_path();
        let mut template = as_object(object, &FieldPath::root())?;
        for (depth, key) in template_path.iter().enumerate() {
            match member(template, key) {
                None => return Ok(None),
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
        let spec = match member(template, "spec") {
            None if shape == Shape::Pod => return Err(spec_path.error("is missing")),
            None => return Ok(None),
            Some(value) => as_object(value, &spec_path)?,
        };

        // Read in one pass over the spec's fields.
        let [
            runtime_class_name,
            scheduler_name,
            init_containers,
            regular_containers,
            ephemeral_containers,
            volume_list,
            claim_list,
        ] = fields(
            spec,
            [
                "runtimeClassName",
                "schedulerName",
                "initContainers",
                "containers",
                "ephemeralContainers",
                "volumes",
                "resourceClaims",
            ],
        );
        let runtime_class_name = str_field(runtime_class_name, "runtimeClassName", &spec_path)?;
        let scheduler_name = str_field(scheduler_name, "schedulerName", &spec_path)?;
        let mut containers = Vec::new();
        for (field, list, default_kind) in [
            ("initContainers", init_containers, ContainerKind::Init),
            ("containers", regular_containers, ContainerKind::Regular),
            ("ephemeralContainers", ephemeral_containers, ContainerKind::Ephemeral),
        ] {
            let read = objects(list, field, &spec_path, |index, raw, at| {
                Container::parse(raw, default_kind, (field, index), at, settings).map(Some)
            })?;
            containers.extend(read.into_iter().flatten());
        }
        let volumes = objects(volume_list, "volumes", &spec_path, |_, volume, at| {
            let name = optional_str(volume, "name", at)?.unwrap_or("");
            let host_path = match optional_object(volume, "hostPath", at)? {
                Some(host) => optional_str(host, "path", &at.key("hostPath"))?,
                None => None,
            };
            Ok(Some(Volume { name, host_path }))
        })?;
        let resource_claims = objects(claim_list, "resourceClaims", &spec_path, |_, claim, at| {
            let name = optional_str(claim, "name", at)?.unwrap_or("");
            let source = match (
                optional_str(claim, "resourceClaimTemplateName", at)?,
                optional_str(claim, "resourceClaimName", at)?,
            ) {
                (Some(template), _) => ClaimSource::Template(template),
                (None, Some(claim)) => ClaimSource::Claim(claim),
                (None, None) => ClaimSource::Missing,
            };
            Ok(Some(PodClaim { name, source }))
        })?;
        let mut view = Self {
            shape,
            metadata,
            annotations,
            spec,
            runtime_class_name,
            scheduler_name,
            containers,
            volumes: volumes.unwrap_or_default(),
            resource_claims: resource_claims.unwrap_or_default(),
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

    /// JSON pointer of the pod template's `metadata` (for a Pod, `/metadata`).
    pub fn metadata_pointer(&self) -> &'static Pointer {
        self.shape.pointers().0
    }

    /// JSON pointer of the pod spec (for a Pod, `/spec`).
    pub fn spec_pointer(&self) -> &'static Pointer {
        self.shape.pointers().1
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

    /// The effective count of each GPU resource any container mentions (or a sharing scheme
    /// implies), in first-seen order, by Kubernetes' formula: the larger of what runs side by side
    /// (regular containers plus sidecar init containers) and the peak during initialisation (each
    /// plain init container plus the sidecars started before it).
    pub fn effective_counts(&self) -> Vec<(&'a str, u64)> {
        let mut at: BTreeMap<&'a str, usize> = BTreeMap::new();
        let mut tallies: Vec<(&'a str, Tally)> = Vec::new();
        for container in &self.containers {
            let mut counts: BTreeMap<usize, u64> = BTreeMap::new();
            let implied =
                (container.implied_cards > 0).then_some((HAMI_CARDS, container.implied_cards));
            let named = container.gpu_resources.iter().map(|r| (r.name, r.count()));
            for (name, count) in named.chain(implied) {
                let index = *at.entry(name).or_insert_with(|| {
                    tallies.push((name, Tally::default()));
                    tallies.len().saturating_sub(1)
                });
                let sum = counts.entry(index).or_insert(0);
                *sum = sum.saturating_add(count);
            }
            for (index, count) in counts {
                if let Some((_, tally)) = tallies.get_mut(index) {
                    tally.add(container.kind, count);
                }
            }
        }
        tallies.into_iter().map(|(name, tally)| (name, tally.count())).collect()
    }
}

/// One resource's running count over the containers, in their order.
#[derive(Debug, Clone, Copy, Default)]
struct Tally {
    /// Regular containers and sidecars, side by side.
    steady: u64,
    sidecars_so_far: u64,
    /// The peak while the init containers run.
    init_peak: u64,
}

impl Tally {
    fn add(&mut self, kind: ContainerKind, count: u64) {
        match kind {
            ContainerKind::Regular => self.steady = self.steady.saturating_add(count),
            ContainerKind::Sidecar => {
                self.steady = self.steady.saturating_add(count);
                self.sidecars_so_far = self.sidecars_so_far.saturating_add(count);
                self.init_peak = self.init_peak.max(self.sidecars_so_far);
            }
            ContainerKind::Init => {
                self.init_peak = self.init_peak.max(count.saturating_add(self.sidecars_so_far));
            }
            ContainerKind::Ephemeral => {}
        }
    }

    fn count(self) -> u64 {
        self.steady.max(self.init_peak)
    }
}

impl<'a> Container<'a> {
    fn parse(
        container: Object<'a>,
        default_kind: ContainerKind,
        place: (&'static str, usize),
        path: &FieldPath<'_>,
        settings: &Settings,
    ) -> Result<Self, ObjectError> {
        // Read in one pass over the container's fields.
        let [name, restart_policy, image, env, resources, mounts, security] = fields(
            container,
            [
                "name",
                "restartPolicy",
                "image",
                "env",
                "resources",
                "volumeMounts",
                "securityContext",
            ],
        );
        let name = str_field(name, "name", path)?.unwrap_or("");
        let kind = match (default_kind, str_field(restart_policy, "restartPolicy", path)?) {
            (ContainerKind::Init, Some("Always")) => ContainerKind::Sidecar,
            (kind, _) => kind,
        };
        let image = str_field(image, "image", path)?;
        let env = objects(env, "env", path, |index, entry, at| {
            let name = optional_str(entry, "name", at)?.unwrap_or("");
            Ok(Some(EnvEntry { index, name, raw: entry }))
        })?;
        let mut gpu_resources: Vec<GpuResource> = Vec::new();
        let mut shares: Vec<GpuResource> = Vec::new();
        // Resource name -> its index in `gpu_resources` or `shares`.
        let mut entries: BTreeMap<&str, usize> = BTreeMap::new();
        let mut claims = Vec::new();
        if let Some(resources) = object_field(resources, "resources", path)? {
            let at = path.key("resources");
            let uses = objects(member(resources, "claims"), "claims", &at, |_, entry, at| {
                let name = optional_str(entry, "name", at)?.unwrap_or("");
                let request = optional_str(entry, "request", at)?.filter(|r| !r.is_empty());
                Ok(Some(ClaimUse { name, request }))
            })?;
            claims = uses.unwrap_or_default();
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
                    let at = *entries.entry(resource).or_insert_with(|| {
                        list.push(GpuResource { name: resource, request: None, limit: None });
                        list.len().saturating_sub(1)
                    });
                    let Some(entry) = list.get_mut(at) else {
                        continue;
                    };
                    if is_limit {
                        entry.limit = Some(count);
                    } else {
                        entry.request = Some(count);
                    }
                }
            }
        }
        let mount_paths = objects(mounts, "volumeMounts", path, |_, mount, at| {
            optional_str(mount, "mountPath", at)
        })?;
        let privileged = match object_field(security, "securityContext", path)? {
            Some(context) => {
                optional_bool(context, "privileged", &path.key("securityContext"))?.unwrap_or(false)
            }
            None => false,
        };
        Ok(Self {
            name,
            kind,
            list: place.0,
            index: place.1,
            image,
            env,
            gpu_resources,
            mount_paths: mount_paths.unwrap_or_default(),
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

#[cfg(test)]
mod tests;
