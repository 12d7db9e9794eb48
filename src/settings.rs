//! The cluster-wide policy configuration (`--config FILE`) and the
//! per-namespace settings derived from it.
//!
//! Every field has a default, so no file is needed. Namespace annotations may
//! only tighten what the file says: a looser or unreadable value is ignored
//! and reported as a notice, never an error, because the namespace owner must
//! not be able to break admission for their own namespace by a typo.

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

use crate::policy::{Notice, NoticeKind};

mod allowlist;
mod image_table;
mod registries;
mod sharing;
pub use allowlist::{AllowlistEntry, MIN_NAME_PREFIX};
pub use image_table::{ImageEntry, ImageResolution, ImageTable, MAX_TIMEOUT, ResolutionMode};
pub use registries::{RegistryHosts, RegistryPattern, default_registries, split_authority};
pub use sharing::{
    GpuSharing, HAMI_CARDS, HAMI_CORES, HAMI_MEMORY, HAMI_MEMORY_PERCENTAGE, HAMI_RESOURCES, Hami,
    KaiScheduler, PrivilegedGpu,
};

use crate::policy::image_needs::ImageNeeds;

/// Namespace annotation that lowers `maxPerPod` for one namespace.
pub const MAX_GPUS_PER_POD_ANNOTATION: &str = "gpu-policy.io/max-gpus-per-pod";
/// Namespace and pod annotation that raises the minimum compute capability.
pub const MIN_COMPUTE_CAPABILITY_ANNOTATION: &str = "gpu-policy.io/min-compute-capability";
/// Pod annotation written by the webhook: the rules that changed the pod.
pub const MUTATIONS_ANNOTATION: &str = "gpu-policy.io/mutations";
/// Namespace label that opts a namespace in and selects its mode.
pub const MODE_LABEL: &str = "gpu-policy.io/mode";

/// A CUDA compute capability `major.minor`, as GFD publishes it in the
/// `nvidia.com/gpu.compute.major` / `.minor` node labels.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ComputeCapability {
    pub major: u32,
    pub minor: u32,
}

impl ComputeCapability {
    pub const fn new(major: u32, minor: u32) -> Self {
        Self { major, minor }
    }
}

impl fmt::Display for ComputeCapability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}", self.major, self.minor)
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?} is not a compute capability (expected MAJOR.MINOR, e.g. \"8.0\")")]
pub struct ComputeCapabilityError(String);

impl FromStr for ComputeCapability {
    type Err = ComputeCapabilityError;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let err = || ComputeCapabilityError(s.to_owned());
        let (major, minor) = match s.split_once('.') {
            Some((major, minor)) => (major, minor),
            None => (s, "0"),
        };
        let number = |part: &str| -> Result<u32, ComputeCapabilityError> {
            if part.is_empty() || part.len() > 3 || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(err());
            }
            part.parse().map_err(|_| err())
        };
        Ok(Self::new(number(major)?, number(minor)?))
    }
}

/// A version as text, written either as text (`"8.0"`) or as a YAML number
/// (`7.5`, which YAML reads as a float).
pub(crate) fn version_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Text(String),
        Integer(u64),
        Float(f64),
    }
    Ok(match Raw::deserialize(deserializer)? {
        Raw::Text(text) => text,
        Raw::Integer(n) => n.to_string(),
        Raw::Float(f) => f.to_string(),
    })
}

impl Serialize for ComputeCapability {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for ComputeCapability {
    /// Accepts `"8.0"` and also an unquoted YAML number (`7.5`), which YAML
    /// reads as a float.
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        version_text(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}

/// An entry of the older `imageComputeCapabilities` list: an image pattern
/// and the minimum compute capability it needs. Read as one more entry of
/// the image table (`imageResolution.table`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRule {
    /// A regular expression matched against the image reference with the
    /// Docker Hub prefixes removed (`docker.io/`, `library/`).
    pub pattern: String,
    pub minimum: ComputeCapability,
}

/// The configuration file, exactly as written. See `examples/config.yaml`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct Config {
    /// Resource names that count as GPUs; `*` matches any run of characters.
    pub gpu_resources: Vec<String>,
    /// Dynamic Resource Allocation device classes whose devices are GPUs:
    /// a container that names a claim with a request for one of them is a
    /// GPU container. Matched by exact name.
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
}

impl Config {
    /// The namespaces the allowlist names, sorted, each once.
    pub fn allowlist_namespaces(&self) -> Vec<&str> {
        let mut namespaces: Vec<&str> = self
            .allowlist
            .iter()
            .map(|e| e.namespace.as_str())
            .collect();
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
            privileged_gpu: PrivilegedGpu::Warn,
        }
    }
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read {
        path: String,
        source: std::io::Error,
    },
    #[error("config file {path}: {message}")]
    Parse { path: String, message: String },
    #[error("config: {0}")]
    Invalid(String),
}

/// A resource-name pattern with `*` wildcards.
#[derive(Debug, Clone)]
struct ResourcePattern {
    parts: Vec<String>,
}

impl ResourcePattern {
    fn new(pattern: &str) -> Self {
        Self {
            parts: pattern.split('*').map(str::to_owned).collect(),
        }
    }

    fn matches(&self, name: &str) -> bool {
        let Some((first, rest)) = self.parts.split_first() else {
            return false;
        };
        let Some(mut remaining) = name.strip_prefix(first.as_str()) else {
            return false;
        };
        let Some((last, middle)) = rest.split_last() else {
            return remaining.is_empty();
        };
        for part in middle {
            match remaining.find(part.as_str()) {
                Some(at) => remaining = &remaining[at + part.len()..],
                None => return false,
            }
        }
        remaining.len() >= last.len() && remaining.ends_with(last.as_str())
    }
}

/// The validated, compiled configuration the rules read.
#[derive(Debug, Clone)]
pub struct Settings {
    config: Config,
    resource_patterns: Vec<ResourcePattern>,
    image_table: ImageTable,
    image_timeout: std::time::Duration,
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
        if config
            .gpu_device_classes
            .iter()
            .any(|c| c.trim().is_empty())
        {
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
            && !config
                .gpu_runtime_classes
                .contains(&config.runtime_class_name)
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
        let (image_table, image_timeout) = config
            .image_resolution
            .compile(&config.image_compute_capabilities)?;
        let resource_patterns = config
            .gpu_resources
            .iter()
            .map(|p| ResourcePattern::new(p))
            .collect();
        Ok(Self {
            config,
            resource_patterns,
            image_table,
            image_timeout,
        })
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
        let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
            path: shown.clone(),
            source,
        })?;
        Self::from_yaml(&text, &shown)
    }

    pub fn config(&self) -> &Config {
        &self.config
    }

    /// A resource counted in cards. HAMi's share values never are, even
    /// when a pattern of `gpuResources` matches them.
    pub fn is_gpu_resource(&self, name: &str) -> bool {
        !self.config.gpu_sharing.is_share_resource(name)
            && self.resource_patterns.iter().any(|p| p.matches(name))
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
        let mut notices = Vec::new();
        let mut max_per_pod = self.config.max_per_pod;
        if let Some(raw) = annotations.get(MAX_GPUS_PER_POD_ANNOTATION) {
            match raw.trim().parse::<u64>() {
                Ok(value) if value <= self.config.max_per_pod => max_per_pod = value,
                Ok(value) => notices.push(Notice::new(
                    NoticeKind::IgnoredAnnotation,
                    format!(
                        "namespace annotation {MAX_GPUS_PER_POD_ANNOTATION}={value} \
                         ignored: it may only lower the cluster maximum {}",
                        self.config.max_per_pod
                    ),
                )),
                Err(_) => notices.push(Notice::new(
                    NoticeKind::IgnoredAnnotation,
                    format!(
                        "namespace annotation {MAX_GPUS_PER_POD_ANNOTATION}={raw:?} \
                         ignored: not a whole number"
                    ),
                )),
            }
        }
        let mut min_compute_capability = self.config.min_compute_capability;
        if let Some(raw) = annotations.get(MIN_COMPUTE_CAPABILITY_ANNOTATION) {
            match tighter_capability(raw, min_compute_capability) {
                Ok(value) => min_compute_capability = Some(value),
                Err(reason) => notices.push(Notice::new(
                    NoticeKind::IgnoredAnnotation,
                    format!(
                        "namespace annotation {MIN_COMPUTE_CAPABILITY_ANNOTATION}={raw:?} \
                         ignored: {reason}"
                    ),
                )),
            }
        }
        NamespaceSettings {
            max_per_pod,
            min_compute_capability,
            notices,
        }
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

/// Removes the Docker Hub prefixes so that `docker.io/library/x`, `library/x`
/// and `x` match the same rule.
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
    /// Annotations that were ignored, and why.
    pub notices: Vec<Notice>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[test]
    fn defaults_are_valid() {
        let settings = Settings::from_config(Config::default()).map(|s| s.config().clone());
        assert_eq!(settings.ok(), Some(Config::default()));
    }

    /// The example lists every field at its default, so it must be the
    /// defaults.
    #[test]
    fn the_example_config_is_the_defaults() {
        let example = include_str!("../examples/config.yaml");
        let settings = Settings::from_yaml(example, "examples/config.yaml");
        assert_eq!(
            settings
                .map(|s| s.config().clone())
                .map_err(|e| e.to_string()),
            Ok(Config::default())
        );
    }

    #[test]
    fn empty_file_gives_defaults() {
        let settings = Settings::from_yaml("{}", "inline");
        assert_eq!(
            settings.ok().map(|s| s.config().clone()),
            Some(Config::default())
        );
    }

    #[test]
    fn unknown_field_is_an_error() {
        let err = Settings::from_yaml("maxPerPods: 3", "c.yaml").err();
        let text = err.map(|e| e.to_string()).unwrap_or_default();
        assert!(
            text.contains("c.yaml") && text.contains("maxPerPods"),
            "{text}"
        );
    }

    /// Why `yaml` is refused as a config file (empty when it is not).
    fn refusal(yaml: &str) -> String {
        Settings::from_yaml(yaml, "c.yaml")
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default()
    }

    /// Found by the `config` fuzz target: the messages of the YAML parser
    /// and of the regex compiler carry a multi-line snippet with a caret.
    #[rstest]
    #[case(".", "config file c.yaml: ")]
    #[case("2\n8.0\n", "config file c.yaml: ")]
    #[case("maxPerPod: [", "config file c.yaml: ")]
    #[case("maxPerPod: -1", "config file c.yaml: ")]
    #[case("gpuResources:\n  - a\n - b", "config file c.yaml: ")]
    #[case(
        "imageComputeCapabilities: [{pattern: 'cud{}a', minimum: '7.0'}]",
        "config: imageComputeCapabilities: pattern "
    )]
    fn config_errors_fit_on_one_line(#[case] yaml: &str, #[case] prefix: &str) {
        let text = refusal(yaml);
        assert!(text.starts_with(prefix), "{text}");
        assert!(!text.contains('\n'), "{text}");
    }

    #[rstest]
    #[case("visibleDevicesPin: all", "visibleDevicesPin")]
    #[case("runtimeClassName: kata", "gpuRuntimeClasses")]
    #[case(
        "imageComputeCapabilities: [{pattern: '(', minimum: '7.0'}]",
        "pattern"
    )]
    #[case("gpuResources: ['']", "gpuResources")]
    #[case("gpuDeviceClasses: [' ']", "gpuDeviceClasses")]
    #[case(
        "gpuSharing: {kaiScheduler: {schedulerName: ''}}",
        "gpuSharing.kaiScheduler.schedulerName"
    )]
    #[case("privilegedGpu: refuse", "privilegedGpu")]
    fn invalid_configs_are_refused(#[case] yaml: &str, #[case] names: &str) {
        let text = refusal(yaml);
        assert!(text.contains(names), "{text}");
    }

    /// `runtimeClassName: ""` injects nothing and needs no entry in
    /// `gpuRuntimeClasses`, which stay reserved.
    #[test]
    fn an_empty_runtime_class_is_accepted() {
        let settings = Settings::from_yaml("runtimeClassName: ''", "c.yaml");
        let config = settings.map(|s| s.config().clone());
        assert_eq!(
            config
                .as_ref()
                .map(|c| (c.runtime_class_name.as_str(), c.gpu_runtime_classes.clone()))
                .ok(),
            Some(("", vec!["nvidia".to_owned()]))
        );
    }

    /// HAMi's share values are never cards, even when a pattern names them.
    #[test]
    fn hami_share_resources_are_never_cards() {
        let yaml = "gpuResources: ['nvidia.com/gpu*']";
        let on = Settings::from_yaml(yaml, "c.yaml").map_err(|e| e.to_string());
        let off = Settings::from_yaml(
            &format!("{yaml}\ngpuSharing: {{hami: {{enabled: false}}}}"),
            "c.yaml",
        )
        .map_err(|e| e.to_string());
        for name in HAMI_RESOURCES {
            assert_eq!(
                on.as_ref()
                    .map(|s| (s.is_gpu_resource(name), s.is_share_resource(name))),
                Ok((false, true))
            );
            assert_eq!(
                off.as_ref()
                    .map(|s| (s.is_gpu_resource(name), s.is_share_resource(name))),
                Ok((true, false))
            );
        }
        assert_eq!(on.map(|s| s.is_gpu_resource("nvidia.com/gpu")), Ok(true));
    }

    #[test]
    fn unquoted_yaml_capability_is_read() {
        let settings = Settings::from_yaml("minComputeCapability: 7.5", "c.yaml");
        let min = settings
            .ok()
            .and_then(|s| s.config().min_compute_capability);
        assert_eq!(min, Some(ComputeCapability::new(7, 5)));
    }

    #[rstest]
    #[case("8.0", Some((8, 0)))]
    #[case("7.5", Some((7, 5)))]
    #[case("9", Some((9, 0)))]
    #[case("12.1", Some((12, 1)))]
    #[case("", None)]
    #[case("8.", None)]
    #[case(".5", None)]
    #[case("8.0.1", None)]
    #[case("-1.0", None)]
    #[case("eight", None)]
    fn compute_capability_parses(#[case] text: &str, #[case] expected: Option<(u32, u32)>) {
        let parsed = text.parse::<ComputeCapability>().ok();
        assert_eq!(parsed, expected.map(|(a, b)| ComputeCapability::new(a, b)));
    }

    #[rstest]
    #[case("nvidia.com/gpu", true)]
    #[case("nvidia.com/gpu.shared", true)]
    #[case("nvidia.com/mig-1g.5gb", true)]
    #[case("nvidia.com/mig-", true)]
    #[case("nvidia.com/gpus", false)]
    #[case("amd.com/gpu", false)]
    #[case("cpu", false)]
    fn default_gpu_resources(#[case] name: &str, #[case] expected: bool) {
        assert_eq!(Settings::default().is_gpu_resource(name), expected);
    }

    #[rstest]
    #[case("a*b*c", "abc", true)]
    #[case("a*b*c", "axxbyyc", true)]
    #[case("a*b*c", "acb", false)]
    #[case("*", "", true)]
    #[case("ab*ba", "aba", false)]
    #[case("exact", "exact", true)]
    #[case("exact", "exactly", false)]
    fn resource_patterns(#[case] pattern: &str, #[case] name: &str, #[case] expected: bool) {
        assert_eq!(ResourcePattern::new(pattern).matches(name), expected);
    }

    fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    #[rstest]
    #[case(&[], 8, None, 0)]
    #[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "4")], 4, None, 0)]
    #[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "0")], 0, None, 0)]
    #[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "16")], 8, None, 1)]
    #[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "four")], 8, None, 1)]
    #[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "-1")], 8, None, 1)]
    #[case(&[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "8.0")], 8, Some((8, 0)), 0)]
    #[case(&[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "ampere")], 8, None, 1)]
    fn namespace_annotations_only_tighten(
        #[case] pairs: &[(&str, &str)],
        #[case] max_per_pod: u64,
        #[case] min: Option<(u32, u32)>,
        #[case] notices: usize,
    ) {
        let ns = Settings::default().for_namespace(&annotations(pairs));
        assert_eq!(ns.max_per_pod, max_per_pod);
        assert_eq!(
            ns.min_compute_capability,
            min.map(|(a, b)| ComputeCapability::new(a, b))
        );
        assert_eq!(ns.notices.len(), notices, "{:?}", ns.notices);
        assert!(
            ns.notices
                .iter()
                .all(|n| n.message.starts_with("gpu-policy: "))
        );
    }

    #[test]
    fn namespace_capability_below_cluster_minimum_is_ignored() {
        let settings = Settings::from_yaml("minComputeCapability: '7.0'", "c").ok();
        let ns = settings
            .map(|s| s.for_namespace(&annotations(&[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "6.1")])));
        let ns = ns.unwrap_or_else(|| Settings::default().for_namespace(&BTreeMap::new()));
        assert_eq!(
            ns.min_compute_capability,
            Some(ComputeCapability::new(7, 0))
        );
        assert_eq!(ns.notices.len(), 1);
    }
}
