//! The cluster-wide policy configuration (`--config FILE`) and the per-namespace settings from it.
//!
//! Every field has a default, so no file is needed. Namespace annotations may only tighten what the
//! file says: a looser or unreadable value is ignored with a notice, never an error, so that a
//! namespace owner's typo cannot break admission in their namespace.

use std::collections::BTreeMap;
use std::path::Path;

use regex::RegexSet;
use serde::{Deserialize, Serialize};

mod allowlist;
mod error;
mod image_table;
mod placement;
mod registries;
mod sharing;
pub use allowlist::{AllowlistEntry, MIN_NAME_PREFIX};
pub use error::ConfigError;
pub use image_table::{
    ImageEntry, ImageResolution, ImageRule, ImageTable, MAX_TIMEOUT, ResolutionMode,
};
pub use placement::{
    GPU_PRODUCTS_ANNOTATION, MAX_GPU_TOLERATIONS, MAX_PRODUCT_PATTERNS, PRODUCT_LABEL,
    ProductPattern, ProductSet, TaintEffect, Toleration, TolerationOperator, parse_patterns,
    same_toleration, tolerates,
};
pub use registries::{RegistryHosts, RegistryPattern, default_registries, split_authority};
pub use sharing::{
    GpuSharing, HAMI_CARDS, HAMI_CORES, HAMI_MEMORY, HAMI_MEMORY_PERCENTAGE, HAMI_RESOURCES, Hami,
    KaiScheduler, PrivilegedGpu,
};

use crate::cuda::{ComputeCapability, ImageNeeds};

/// Namespace annotation that lowers `maxPerPod` for one namespace.
pub const MAX_GPUS_PER_POD_ANNOTATION: &str = "gpu-policy.io/max-gpus-per-pod";
/// Namespace and pod annotation that raises the minimum compute capability.
pub const MIN_COMPUTE_CAPABILITY_ANNOTATION: &str = "gpu-policy.io/min-compute-capability";
/// Pod annotation written by the webhook: the rules that changed the pod.
pub const MUTATIONS_ANNOTATION: &str = "gpu-policy.io/mutations";
/// Pod annotation written by the webhook: what the pod's DRA GPU containers
/// need of a device, read back when a claim is made for the pod.
pub const GPU_NEEDS_ANNOTATION: &str = "gpu-policy.io/gpu-needs";
/// Namespace label that opts a namespace in and selects its mode.
pub const MODE_LABEL: &str = "gpu-policy.io/mode";

/// The configuration file, exactly as written. See `examples/config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Resource names that count as GPUs; `*` matches any run of characters.
    pub gpu_resources: Vec<String>,
    /// Dynamic Resource Allocation device classes whose devices are GPUs: a container that names a
    /// claim with a request for one of them is a GPU container. Matched by exact name.
    pub gpu_device_classes: Vec<String>,
    pub max_per_container: u64,
    pub max_per_pod: u64,
    /// The RuntimeClass injected into GPU pods that name none; empty:
    /// inject none (CDI clusters, or `nvidia` the node's default runtime).
    pub runtime_class_name: String,
    /// RuntimeClasses a GPU pod may use; reserved for GPU pods.
    pub gpu_runtime_classes: Vec<String>,
    /// The value pinned into `NVIDIA_VISIBLE_DEVICES` of non-GPU containers.
    pub visible_devices_pin: String,
    pub min_compute_capability: Option<ComputeCapability>,
    /// Where R4 learns what images need, and the image table.
    pub image_resolution: ImageResolution,
    /// More image table entries, in the older `{pattern, minimum}` form.
    pub image_compute_capabilities: Vec<ImageRule>,
    pub allowlist: Vec<AllowlistEntry>,
    pub policy_admins: Vec<String>,
    /// The GPU sharing schemes whose containers are GPU containers.
    pub gpu_sharing: GpuSharing,
    /// R6 on privileged GPU containers: warn (default) or deny.
    pub privileged_gpu: PrivilegedGpu,
    /// R4 for GPUs that come through DRA claims: floors written into the
    /// claims (default), onto node labels, or both.
    pub dra_compute_affinity: DraComputeAffinity,
    /// R4 when no GPU node carries the labels its node affinity names.
    pub compute_affinity: ComputeAffinity,
    /// The GPU products (GFD's `nvidia.com/gpu.product` values, `*` globs) GPU pods may use;
    /// empty: any. The namespace annotation `gpu-policy.io/gpu-products` tightens it.
    pub gpu_products: Vec<String>,
    /// Tolerations added to GPU pods (device plugin, DRA, sharing schemes), for the taints of
    /// the GPU nodes; a pod that asks for no GPU tolerating one of those taints is warned.
    pub gpu_tolerations: Vec<Toleration>,
    /// A pod that asks for no GPU and tolerates a taint of `gpuTolerations` is denied instead
    /// of warned.
    pub deny_cpu_pods_on_gpu_nodes: bool,
}

/// `computeAffinity`: R4's node affinity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ComputeAffinity {
    pub when_nodes_unlabelled: WhenNodesUnlabelled,
}

/// What R4 does with a floor (compute capability, or driver) when nodes
/// offer GPUs and none of them carries GPU Feature Discovery's labels for
/// it: an affinity on those labels is one no node can meet.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WhenNodesUnlabelled {
    /// The floor is not written, and the pod is warned that it is not enforced.
    #[default]
    Skip,
    /// The floor is written all the same, and the pod is warned that no node can meet it.
    Require,
}

/// Where R4 puts the compute and driver floors of GPU containers whose GPUs come only through
/// Dynamic Resource Allocation claims. Device-plugin GPU containers always get node affinity.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DraComputeAffinity {
    /// A selector in every GPU request of the claims made for the pod: the device the claim gets
    /// meets the floor, on nodes with or without GPU Feature Discovery's labels.
    #[default]
    Claims,
    /// Node affinity on GPU Feature Discovery's labels, as for device-plugin
    /// GPUs (nodes without those labels never run the pod).
    NodeLabels,
    Both,
}

impl DraComputeAffinity {
    /// The floors go into the claims made for the pod.
    pub fn claims(self) -> bool {
        matches!(self, DraComputeAffinity::Claims | DraComputeAffinity::Both)
    }

    /// The floors go onto node labels.
    pub fn node_labels(self) -> bool {
        matches!(self, DraComputeAffinity::NodeLabels | DraComputeAffinity::Both)
    }
}

impl Config {
    /// The namespaces the allowlist names, sorted, each once.
    pub fn allowlist_namespaces(&self) -> Vec<&str> {
        let mut namespaces: Vec<&str> =
            self.allowlist.iter().map(|e| e.namespace.as_str()).collect();
        namespaces.sort_unstable();
        namespaces.dedup();
        namespaces
    }
}

impl Default for Config {
    fn default() -> Self {
        let allow = |name: &str| AllowlistEntry::exact("kube-system", "DaemonSet", name);
        Self {
            gpu_resources: vec![
                "nvidia.com/gpu".to_owned(),
                "nvidia.com/gpu.shared".to_owned(),
                "nvidia.com/mig-*".to_owned(),
            ],
            // The NVIDIA DRA driver's classes. Its `compute-domain-*`
            // classes hand out IMEX channels, not GPUs.
            gpu_device_classes: vec![
                "gpu.nvidia.com".to_owned(),
                "mig.nvidia.com".to_owned(),
                "vfio.gpu.nvidia.com".to_owned(),
            ],
            max_per_container: 8,
            max_per_pod: 8,
            runtime_class_name: "nvidia".to_owned(),
            gpu_runtime_classes: vec!["nvidia".to_owned()],
            visible_devices_pin: "void".to_owned(),
            min_compute_capability: None,
            image_resolution: ImageResolution::default(),
            image_compute_capabilities: Vec::new(),
            allowlist: vec![
                allow("nvidia-gpu-exporter"),
                allow("nvidia-device-plugin-daemonset"),
                allow("gpu-feature-discovery"),
            ],
            policy_admins: vec!["system:masters".to_owned()],
            gpu_sharing: GpuSharing::default(),
            dra_compute_affinity: DraComputeAffinity::default(),
            compute_affinity: ComputeAffinity::default(),
            privileged_gpu: PrivilegedGpu::Warn,
            gpu_products: Vec::new(),
            gpu_tolerations: Vec::new(),
            deny_cpu_pods_on_gpu_nodes: false,
        }
    }
}

/// The `gpuResources` patterns as one set: `*` matches any run of characters, anything else itself.
fn resource_patterns(patterns: &[String]) -> Result<RegexSet, regex::Error> {
    RegexSet::new(patterns.iter().map(|pattern| {
        let parts: Vec<String> = pattern.split('*').map(regex::escape).collect();
        format!("(?s)^{}$", parts.join(".*"))
    }))
}

/// The validated, compiled configuration the rules read.
#[derive(Debug, Clone)]
pub struct Settings {
    config: Config,
    resource_patterns: RegexSet,
    image_table: ImageTable,
    image_timeout: std::time::Duration,
    gpu_products: Vec<ProductPattern>,
}

impl Default for Settings {
    fn default() -> Self {
        // The defaults are validated by a unit test; this cannot fail.
        match Self::from_config(Config::default()) {
            Ok(settings) => settings,
            Err(err) => unreachable!("default config is invalid: {err}"),
        }
    }
}

impl Settings {
    pub fn from_config(config: Config) -> Result<Self, ConfigError> {
        let invalid = |msg: String| Err(ConfigError::Invalid(msg));
        if config.gpu_resources.iter().any(|p| p.trim().is_empty()) {
            return invalid("gpuResources: empty pattern".into());
        }
        if config.gpu_device_classes.iter().any(|c| c.trim().is_empty()) {
            return invalid("gpuDeviceClasses: empty name".into());
        }
        if config.visible_devices_pin.is_empty()
            || config.visible_devices_pin.eq_ignore_ascii_case("all")
        {
            return invalid(format!(
                "visibleDevicesPin: {:?} would not hide the cards (use \"void\")",
                config.visible_devices_pin
            ));
        }
        if !config.runtime_class_name.is_empty()
            && !config.gpu_runtime_classes.contains(&config.runtime_class_name)
        {
            return invalid(format!(
                "gpuRuntimeClasses must include runtimeClassName {:?}",
                config.runtime_class_name
            ));
        }
        if let Some(problem) = config.gpu_sharing.problem() {
            return invalid(problem);
        }
        for entry in &config.allowlist {
            if let Some(problem) = entry.problem() {
                return invalid(format!("allowlist entry {entry}: {problem}"));
            }
        }
        let gpu_products = parse_patterns(config.gpu_products.iter().map(String::as_str))
            .map_err(|why| ConfigError::Invalid(format!("gpuProducts: {why}")))?;
        if config.gpu_tolerations.len() > MAX_GPU_TOLERATIONS {
            return invalid(format!("gpuTolerations: more than {MAX_GPU_TOLERATIONS}"));
        }
        for toleration in &config.gpu_tolerations {
            if let Some(problem) = toleration.problem() {
                return invalid(format!("gpuTolerations: {problem}"));
            }
        }
        let (image_table, image_timeout) =
            config.image_resolution.compile(&config.image_compute_capabilities)?;
        let resource_patterns = resource_patterns(&config.gpu_resources).map_err(|err| {
            let message = crate::manifest::one_line(&err.to_string());
            ConfigError::Invalid(format!("gpuResources: {message}"))
        })?;
        Ok(Self { config, resource_patterns, image_table, image_timeout, gpu_products })
    }

    /// Parses a YAML (or JSON) config document.
    pub fn from_yaml(text: &str, path: &str) -> Result<Self, ConfigError> {
        // The message goes into one log line (`serve`'s reload) or after
        // `gpu-policy:` on stderr: the parser's snippet is kept on one line.
        let config: Config = serde_saphyr::from_str(text).map_err(|err| ConfigError::Parse {
            path: path.to_owned(),
            message: crate::manifest::one_line(&err.to_string()),
        })?;
        Self::from_config(config)
    }

    pub fn load(path: &Path) -> Result<Self, ConfigError> {
        let shown = path.display().to_string();
        let text = std::fs::read_to_string(path)
            .map_err(|source| ConfigError::Read { path: shown.clone(), source })?;
        Self::from_yaml(&text, &shown)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A resource counted in cards. HAMi's share values never are, even
    /// when a pattern of `gpuResources` matches them.
    pub fn is_gpu_resource(&self, name: &str) -> bool {
        !self.config.gpu_sharing.is_share_resource(name) && self.resource_patterns.is_match(name)
    }

    /// Whether the `gpuResources` pattern at `index` (in the order of [`Config::gpu_resources`])
    /// matches `name`, as [`Self::is_gpu_resource`] matches it.
    pub fn gpu_resource_pattern_matches(&self, index: usize, name: &str) -> bool {
        index < self.resource_patterns.len() && self.resource_patterns.matches(name).matched(index)
    }

    /// A HAMi share resource (`nvidia.com/gpumem`, ...), when HAMi is on.
    pub fn is_share_resource(&self, name: &str) -> bool {
        self.config.gpu_sharing.is_share_resource(name)
    }

    /// Whether a DRA device class hands out GPUs (by name).
    pub fn is_gpu_device_class(&self, name: &str) -> bool {
        self.config.gpu_device_classes.iter().any(|c| c == name)
    }

    /// What the image table says the image needs: one value per matching
    /// entry (none in `imageResolution.mode: off`).
    pub fn image_needs(&self, image: &str) -> Vec<&ImageNeeds> {
        self.image_table.lookup(normalize_image(image))
    }

    /// The most one admission waits for registries (`imageResolution.timeout`).
    pub fn image_timeout(&self) -> std::time::Duration {
        self.image_timeout
    }

    /// What a namespace's annotations make of the cluster settings.
    pub fn for_namespace(&self, annotations: &BTreeMap<String, String>) -> NamespaceSettings {
        let mut ignored = Vec::new();
        let mut ignore =
            |key, value, reason| ignored.push(IgnoredAnnotation { key, value, reason });
        let mut max_per_pod = self.config.max_per_pod;
        if let Some(raw) = annotations.get(MAX_GPUS_PER_POD_ANNOTATION) {
            match raw.trim().parse::<u64>() {
                Ok(value) if value <= self.config.max_per_pod => max_per_pod = value,
                Ok(value) => ignore(
                    MAX_GPUS_PER_POD_ANNOTATION,
                    value.to_string(),
                    format!("it may only lower the cluster maximum {}", self.config.max_per_pod),
                ),
                Err(_) => ignore(
                    MAX_GPUS_PER_POD_ANNOTATION,
                    format!("{raw:?}"),
                    "not a whole number".to_owned(),
                ),
            }
        }
        let mut min_compute_capability = self.config.min_compute_capability;
        if let Some(raw) = annotations.get(MIN_COMPUTE_CAPABILITY_ANNOTATION) {
            match tighter_capability(raw, min_compute_capability) {
                Ok(value) => min_compute_capability = Some(value),
                Err(reason) => {
                    ignore(MIN_COMPUTE_CAPABILITY_ANNOTATION, format!("{raw:?}"), reason)
                }
            }
        }
        let mut namespace_products = Vec::new();
        if let Some(raw) = annotations.get(GPU_PRODUCTS_ANNOTATION) {
            match parse_patterns(raw.split(',')) {
                Ok(patterns) if patterns.is_empty() => {
                    ignore(GPU_PRODUCTS_ANNOTATION, format!("{raw:?}"), "names no product".into())
                }
                Ok(patterns) => namespace_products = patterns,
                Err(reason) => ignore(GPU_PRODUCTS_ANNOTATION, format!("{raw:?}"), reason),
            }
        }
        let gpu_products = ProductSet::new([self.gpu_products.clone(), namespace_products]);
        NamespaceSettings { max_per_pod, min_compute_capability, gpu_products, ignored }
    }

    /// The cluster's `gpuProducts`, compiled.
    pub fn gpu_products(&self) -> &[ProductPattern] {
        &self.gpu_products
    }
}

/// Reads a minimum compute capability that may only raise `current`.
pub fn tighter_capability(
    raw: &str,
    current: Option<ComputeCapability>,
) -> Result<ComputeCapability, String> {
    let value: ComputeCapability = raw
        .trim()
        .parse()
        .map_err(|_| "not a compute capability (expected MAJOR.MINOR, e.g. \"8.0\")".to_owned())?;
    match current {
        Some(current) if value < current => Err(format!("it may only raise the minimum {current}")),
        _ => Ok(value),
    }
}

/// Removes Docker Hub prefixes so that `docker.io/library/x`, `library/x` and `x` match one rule.
fn normalize_image(image: &str) -> &str {
    let image = image
        .strip_prefix("docker.io/")
        .or_else(|| image.strip_prefix("index.docker.io/"))
        .or_else(|| image.strip_prefix("registry-1.docker.io/"))
        .unwrap_or(image);
    image.strip_prefix("library/").unwrap_or(image)
}

/// The settings in force for one namespace.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NamespaceSettings {
    pub max_per_pod: u64,
    pub min_compute_capability: Option<ComputeCapability>,
    /// The GPU products its GPU pods may use: `gpuProducts` within the annotation's list.
    pub gpu_products: ProductSet,
    /// Annotations that were ignored, and why: the evaluation turns each
    /// into a notice for the person who submitted the object.
    pub ignored: Vec<IgnoredAnnotation>,
}

/// A namespace annotation that could not tighten the policy, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgnoredAnnotation {
    pub key: &'static str,
    /// The value as the message shows it.
    pub value: String,
    pub reason: String,
}

impl std::fmt::Display for IgnoredAnnotation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let IgnoredAnnotation { key, value, reason } = self;
        write!(f, "namespace annotation {key}={value} ignored: {reason}")
    }
}

#[cfg(test)]
mod tests;
