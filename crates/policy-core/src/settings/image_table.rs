//! `imageResolution`: where R4 learns what an image needs (the mode, the registry budget and
//! plain-HTTP registries), and the image table, of which every matching entry applies.

use std::path::PathBuf;
use std::time::Duration;

use regex::{Regex, RegexSet};
use serde::{Deserialize, Serialize};

use super::error::ConfigError;
use super::registries::{RegistryHosts, default_registries, split_authority};
use crate::cuda::ComputeCapability;
use crate::cuda::needs::ImageNeeds;
use crate::cuda::requirement::{CudaVersion, Requirement};

/// The longest registry budget: the API server waits 5 s for the webhook (the install's
/// `timeoutSeconds`), and the rest of the admission needs some of it.
pub const MAX_TIMEOUT: Duration = Duration::from_secs(4);

#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ResolutionMode {
    /// The image table only: needs no network, works air-gapped.
    #[default]
    Table,
    /// The image's config from its registry, within `timeout`, else the table.
    Registry,
    /// No image implies anything; only the configured and annotated minimums apply.
    Off,
}

/// One entry of the image table.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ImageEntry {
    /// A regular expression matched against the image reference with the
    /// Docker Hub prefixes removed (`docker.io/`, `library/`).
    pub pattern: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cuda_version: Option<CudaVersion>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub minimum: Option<ComputeCapability>,
    /// The image's `NVIDIA_REQUIRE_CUDA`, when it is not `cuda>=<cudaVersion>`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub require_cuda: Option<String>,
}

/// An entry of the older `imageComputeCapabilities` list, read as one more
/// entry of the image table: a pattern as [`ImageEntry::pattern`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageRule {
    pub pattern: String,
    pub minimum: ComputeCapability,
}

/// The `imageResolution` block.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields, default)]
pub struct ImageResolution {
    pub mode: ResolutionMode,
    /// The most one admission waits for registries, in total (`"1s"`, `"500ms"`).
    pub timeout: String,
    /// The registry hosts registry mode may contact (`host`, `host:port`, `*.suffix`); an image on
    /// any other host is left to the table without a connection.
    pub registries: Vec<String>,
    /// Which of `registries` are spoken to over plain HTTP (`host:port`).
    pub insecure_registries: Vec<String>,
    /// A dockerconfigjson file (`{"auths": {...}}`): the credentials for private registries, read
    /// again at every reload. Absent: anonymous pulls only.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub credentials_file: Option<PathBuf>,
    pub table: Vec<ImageEntry>,
}

impl Default for ImageResolution {
    fn default() -> Self {
        Self {
            mode: ResolutionMode::Table,
            timeout: "1s".to_owned(),
            registries: default_registries(),
            insecure_registries: Vec::new(),
            credentials_file: None,
            table: default_table(),
        }
    }
}

/// The NGC framework images whose tags carry the release month.
const NGC: &str = r"^nvcr\.io/nvidia/(pytorch|tensorflow|tritonserver|jax|tensorrt):";

/// What the NGC framework images declare: the driver check is left to their
/// entrypoint, which turns on forward compatibility on data center GPUs.
const NGC_REQUIRE: &str = "cuda>=9.0";

/// The forward-compatible branches of the `nvidia/cuda:12.8.1` and `13.0.2` images, abridged to one
/// brand (the brand is not on any node label, so the others say nothing more to the scheduler).
const CUDA_12_8_REQUIRE: &str = "cuda>=12.8 brand=tesla,driver>=470,driver<471 \
    brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551 \
    brand=tesla,driver>=560,driver<561 brand=tesla,driver>=565,driver<566";
const CUDA_13_0_REQUIRE: &str = "cuda>=13.0 brand=tesla,driver>=535,driver<536 \
    brand=tesla,driver>=550,driver<551 brand=tesla,driver>=565,driver<566 \
    brand=tesla,driver>=570,driver<571 brand=tesla,driver>=575,driver<576";

/// The built-in table; `examples/config.yaml` gives the source of each entry.
///
/// Digits are `[0-9]`, not `\d`: image references are ASCII, and `\d` stands for every Unicode
/// digit, which made the compiled table several MiB larger in memory.
pub fn default_table() -> Vec<ImageEntry> {
    let minimum = |pattern: &str, major, minor| ImageEntry {
        pattern: pattern.to_owned(),
        cuda_version: None,
        minimum: Some(ComputeCapability::new(major, minor)),
        require_cuda: None,
    };
    let cuda = |pattern: String, major, minor, require: Option<&str>| ImageEntry {
        pattern,
        cuda_version: Some(CudaVersion::new(major, minor)),
        minimum: None,
        require_cuda: require.map(str::to_owned),
    };
    let ngc = |months: &str, major, minor| {
        cuda(format!("{NGC}{months}(-|$)"), major, minor, Some(NGC_REQUIRE))
    };
    vec![
        minimum(r"^(nvcr\.io/)?nvidia/cuda:13\.", 7, 5),
        minimum(r"^(nvcr\.io/)?nvidia/cuda:12\.", 5, 0),
        minimum(r"^(nvcr\.io/)?nvidia/cuda:11\.", 3, 5),
        minimum(r"^pytorch/pytorch:.*-cuda13\.[0-9]+-", 7, 5),
        minimum(r"^pytorch/pytorch:.*-cuda12\.[89]-", 7, 0),
        minimum(r"^pytorch/pytorch:.*-cuda12\.[0-7]-", 5, 0),
        ngc(r"23\.0[12]", 12, 0),
        ngc(r"23\.0[3-7]", 12, 1),
        ngc(r"23\.(08|09|10)", 12, 2),
        ngc(r"(23\.1[12]|24\.0[12])", 12, 3),
        ngc(r"24\.0[3-5]", 12, 4),
        ngc(r"24\.0[67]", 12, 5),
        ngc(r"24\.(08|09|1[0-2])", 12, 6),
        ngc(r"25\.0[1-3]", 12, 8),
        ngc(r"25\.0[4-7]", 12, 9),
        ngc(r"25\.(08|09|10|11)", 13, 0),
        ngc(r"25\.12", 13, 1),
        // Later releases: at least what 25.12 is built on.
        ngc(r"(2[6-9]|[3-9][0-9])\.[0-9][0-9]", 13, 1),
        cuda(r"^vllm/vllm-openai:.*-cu130$".to_owned(), 13, 0, Some(CUDA_13_0_REQUIRE)),
        cuda(r"^vllm/vllm-openai:.*-cu128$".to_owned(), 12, 8, Some(CUDA_12_8_REQUIRE)),
        minimum(r"^vllm/vllm-openai:.*-cu12[0-9]$", 5, 0),
        cuda(
            r"^ghcr\.io/huggingface/text-generation-inference:([0-9]+\.[0-9]+(\.[0-9]+)?|latest)$"
                .to_owned(),
            12,
            2,
            None,
        ),
    ]
}

/// The table, compiled: its patterns as one set, matched in one pass over
/// the image (rather than a pass per pattern, per GPU container).
#[derive(Debug, Clone)]
pub struct ImageTable {
    patterns: RegexSet,
    needs: Vec<ImageNeeds>,
}

impl Default for ImageTable {
    fn default() -> Self {
        Self { patterns: RegexSet::empty(), needs: Vec::new() }
    }
}

impl ImageTable {
    fn new(entries: Vec<(Regex, ImageNeeds)>) -> Result<Self, regex::Error> {
        let patterns = RegexSet::new(entries.iter().map(|(regex, _)| regex.as_str()))?;
        let needs = entries.into_iter().map(|(_, needs)| needs).collect();
        Ok(Self { patterns, needs })
    }

    /// The needs of every entry the image matches (already normalized), in the order of the table.
    pub fn lookup(&self, image: &str) -> Vec<&ImageNeeds> {
        self.patterns.matches(image).iter().filter_map(|index| self.needs.get(index)).collect()
    }
}

fn invalid<T>(message: String) -> Result<T, ConfigError> {
    Err(ConfigError::Invalid(message))
}

fn compile(field: &str, pattern: &str) -> Result<Regex, ConfigError> {
    Regex::new(pattern).or_else(|err| {
        invalid(format!(
            "{field}: pattern {pattern:?}: {}",
            crate::manifest::one_line(&err.to_string())
        ))
    })
}

impl ImageResolution {
    /// The `registries` and `insecureRegistries` lists, parsed; every
    /// plain-HTTP registry must be one of `registries`.
    pub fn registry_hosts(&self) -> Result<(RegistryHosts, RegistryHosts), ConfigError> {
        let registries = RegistryHosts::parse("imageResolution.registries", &self.registries, true)
            .map_err(ConfigError::Invalid)?;
        let insecure = RegistryHosts::parse(
            "imageResolution.insecureRegistries",
            &self.insecure_registries,
            false,
        )
        .map_err(ConfigError::Invalid)?;
        for entry in &self.insecure_registries {
            let permitted = split_authority(entry.trim())
                .is_some_and(|(host, port)| registries.permits_host(&host, port));
            if !permitted {
                return invalid(format!(
                    "imageResolution.insecureRegistries: {entry:?} is not in \
                     imageResolution.registries; list it there too"
                ));
            }
        }
        Ok((registries, insecure))
    }

    /// Checks the block and compiles the table, older `imageComputeCapabilities` entries last.
    pub fn compile(&self, legacy: &[ImageRule]) -> Result<(ImageTable, Duration), ConfigError> {
        let timeout = match crate::duration::parse_seconds(&self.timeout) {
            Some(timeout) if !timeout.is_zero() && timeout <= MAX_TIMEOUT => timeout,
            _ => {
                return invalid(format!(
                    "imageResolution.timeout: {:?} is not a duration between 1ms and {}s \
                     (e.g. \"1s\", \"500ms\")",
                    self.timeout,
                    MAX_TIMEOUT.as_secs()
                ));
            }
        };
        self.registry_hosts()?;
        if self.credentials_file.as_ref().is_some_and(|path| path.as_os_str().is_empty()) {
            return invalid("imageResolution.credentialsFile: empty path".to_owned());
        }
        let mut entries = Vec::with_capacity(self.table.len() + legacy.len());
        for entry in &self.table {
            let field = "imageResolution.table";
            let regex = compile(field, &entry.pattern)?;
            if entry.cuda_version.is_none() && entry.minimum.is_none() {
                return invalid(format!(
                    "{field}: pattern {:?}: give cudaVersion or minimum",
                    entry.pattern
                ));
            }
            if entry.require_cuda.is_some() && entry.cuda_version.is_none() {
                return invalid(format!(
                    "{field}: pattern {:?}: requireCuda needs cudaVersion",
                    entry.pattern
                ));
            }
            let require_cuda =
                entry.require_cuda.as_deref().map(str::parse::<Requirement>).transpose().or_else(
                    |err| invalid(format!("{field}: pattern {:?}: {err}", entry.pattern)),
                )?;
            let needs = ImageNeeds {
                cuda: entry.cuda_version,
                require_cuda,
                require_disabled: false,
                minimum: entry.minimum,
            };
            entries.push((regex, needs));
        }
        for rule in legacy {
            let regex = compile("imageComputeCapabilities", &rule.pattern)?;
            let needs = ImageNeeds { minimum: Some(rule.minimum), ..ImageNeeds::default() };
            entries.push((regex, needs));
        }
        if self.mode == ResolutionMode::Off {
            entries.clear();
        }
        // Every pattern compiled on its own above; together they can only
        // exceed the size limit of one compiled set.
        let table = ImageTable::new(entries).map_err(|err| {
            let first = err.to_string().lines().next().unwrap_or_default().to_owned();
            ConfigError::Invalid(format!("imageResolution.table: {first}"))
        })?;
        Ok((table, timeout))
    }
}

#[cfg(test)]
mod tests;
