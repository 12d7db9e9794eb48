//! The readers of what a registry sends: an image manifest or index, and
//! an image config. They keep only what the lookup uses and skip the rest
//! without allocating it, so a document within the read bound costs about
//! its own size in memory, however it is shaped (a config of a million
//! tiny env entries, an index of annotations).

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::reason::error_text;
use crate::cuda::needs::{CUDA_VERSION_ENV, CUDA_VERSION_LABEL, REQUIRE_CUDA_ENV};
use crate::policy::message::thousands;

/// As written in the image's config.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ImageConfigFacts {
    pub cuda_version: Option<String>,
    pub require_cuda: Option<String>,
    pub cuda_label: Option<String>,
    /// The digest the reference names: the image index's when the tag
    /// names an index, else the image manifest's.
    pub digest: String,
    /// A value longer than [`MAX_VALUE_BYTES`], not kept: the config's
    /// CUDA values cannot be used (cut, a requirement would say something
    /// else).
    pub oversized: Option<OversizedValue>,
}

/// A CUDA env or label of an image config longer than a value may be.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct OversizedValue {
    pub name: &'static str,
    pub bytes: usize,
}

impl fmt::Display for OversizedValue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} is {} bytes long, more than the {} KiB an image config value may be",
            self.name,
            thousands(self.bytes),
            MAX_VALUE_BYTES >> 10
        )
    }
}

/// The longest CUDA env value or label kept from an image config, in
/// bytes. The longest real one is `NVIDIA_REQUIRE_CUDA`: some 1 KB on the
/// `nvidia/cuda` images (ten brands for each of three driver branches).
/// Past it the value is not kept: anyone may push an image whose config
/// carries megabytes there, and the caches keep what configs say.
pub const MAX_VALUE_BYTES: usize = 4 << 10;

/// A value of an image config as kept: its text, or its length alone when
/// it is longer than [`MAX_VALUE_BYTES`].
#[derive(Debug, Clone, PartialEq, Eq)]
enum Kept {
    Text(String),
    TooLong(usize),
}

impl Kept {
    fn of(value: &str) -> Self {
        if value.len() > MAX_VALUE_BYTES {
            Kept::TooLong(value.len())
        } else {
            Kept::Text(value.to_owned())
        }
    }
}

/// The media types of an image manifest (OCI, Docker v2) and of an index
/// (OCI, Docker manifest list).
const IMAGE_TYPES: [&str; 2] = [
    "application/vnd.oci.image.manifest.v1+json",
    "application/vnd.docker.distribution.manifest.v2+json",
];
const INDEX_TYPES: [&str; 2] = [
    "application/vnd.oci.image.index.v1+json",
    "application/vnd.docker.distribution.manifest.list.v2+json",
];

pub(super) const MANIFEST_ACCEPT: &str = "application/vnd.oci.image.manifest.v1+json, \
    application/vnd.docker.distribution.manifest.v2+json, \
    application/vnd.oci.image.index.v1+json, \
    application/vnd.docker.distribution.manifest.list.v2+json";

/// A content descriptor, as far as the lookup reads it.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct Descriptor {
    pub digest: String,
    /// The size the manifest declares; the read is bounded by it too.
    pub size: i64,
}

#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct EntryPlatform {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IndexEntry {
    pub digest: String,
    pub size: i64,
    #[serde(default)]
    pub platform: Option<EntryPlatform>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Manifest {
    Image { config: Descriptor },
    Index { manifests: Vec<IndexEntry> },
}

/// The fields of either document read; every other field is skipped.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct ManifestDocument {
    #[serde(default)]
    schema_version: Option<i64>,
    #[serde(default)]
    media_type: Option<String>,
    #[serde(default)]
    config: Option<Descriptor>,
    #[serde(default)]
    manifests: Option<BoundedEntries>,
}

/// The most entries an image index may have. Real ones have a few dozen
/// (platforms and attestations); the bound keeps a 4 MiB index of tiny
/// entries (serde reads `["",0]` as an entry) from costing many times its
/// size.
pub const MAX_INDEX_ENTRIES: usize = 1024;

/// An index's entries, at most [`MAX_INDEX_ENTRIES`].
struct BoundedEntries(Vec<IndexEntry>);

impl<'de> Deserialize<'de> for BoundedEntries {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EntriesVisitor;
        impl<'de> Visitor<'de> for EntriesVisitor {
            type Value = BoundedEntries;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of index entries, or null")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
                let mut entries = Vec::new();
                while let Some(entry) = seq.next_element::<IndexEntry>()? {
                    if entries.len() == MAX_INDEX_ENTRIES {
                        return Err(de::Error::custom(format!(
                            "an image index of more than {MAX_INDEX_ENTRIES} entries"
                        )));
                    }
                    entries.push(entry);
                }
                Ok(BoundedEntries(entries))
            }
        }
        deserializer.deserialize_seq(EntriesVisitor)
    }
}

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    #[error("not a manifest: {0}")]
    NotManifest(String),
    #[error("schema version {0} is not supported")]
    SchemaVersion(i64),
    #[error("media type {0:?} is not an image manifest or index")]
    MediaType(String),
    #[error("an image index without \"manifests\"")]
    IndexWithoutManifests,
    #[error("an image manifest without \"config\"")]
    ManifestWithoutConfig,
    #[error("image config is not JSON: {0}")]
    ConfigNotJson(String),
}

/// Schema version 2.
pub fn read_manifest(bytes: &[u8]) -> Result<Manifest, DocumentError> {
    let document: ManifestDocument = serde_json::from_slice(bytes)
        .map_err(|err| DocumentError::NotManifest(error_text(&err)))?;
    match document.schema_version {
        Some(2) => {}
        Some(other) => return Err(DocumentError::SchemaVersion(other)),
        None => return Err(DocumentError::NotManifest("no schemaVersion".to_owned())),
    }
    let is_index = match document.media_type.as_deref() {
        Some(kind) if INDEX_TYPES.contains(&kind) => true,
        Some(kind) if IMAGE_TYPES.contains(&kind) => false,
        Some(kind) => return Err(DocumentError::MediaType(kind.chars().take(100).collect())),
        // The OCI types may leave mediaType out: the fields tell.
        None => document.manifests.is_some() && document.config.is_none(),
    };
    if is_index {
        let manifests = document.manifests.ok_or(DocumentError::IndexWithoutManifests)?;
        Ok(Manifest::Index { manifests: manifests.0 })
    } else {
        let config = document.config.ok_or(DocumentError::ManifestWithoutConfig)?;
        Ok(Manifest::Image { config })
    }
}

/// The parts of an image config (OCI image spec, `config` section) read.
#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    config: Option<ConfigSection>,
}

#[derive(Deserialize)]
struct ConfigSection {
    #[serde(rename = "Env", default)]
    env: Option<CudaEnv>,
    #[serde(rename = "Labels", default)]
    labels: Option<CudaLabel>,
}

/// The two CUDA envs of an `Env` list, the last definition of each (as in
/// the container); the other entries are read and dropped one by one.
#[derive(Default)]
struct CudaEnv {
    cuda_version: Option<Kept>,
    require_cuda: Option<Kept>,
}

impl<'de> Deserialize<'de> for CudaEnv {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct EnvVisitor;
        impl<'de> Visitor<'de> for EnvVisitor {
            type Value = CudaEnv;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a list of NAME=value strings, or null")
            }

            fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<CudaEnv, A::Error> {
                let mut env = CudaEnv::default();
                while let Some(entry) = seq.next_element::<String>()? {
                    let Some((name, value)) = entry.split_once('=') else {
                        continue;
                    };
                    if name == CUDA_VERSION_ENV {
                        env.cuda_version = Some(Kept::of(value));
                    } else if name == REQUIRE_CUDA_ENV {
                        env.require_cuda = Some(Kept::of(value));
                    }
                }
                Ok(env)
            }
        }
        deserializer.deserialize_seq(EnvVisitor)
    }
}

/// The CUDA label of a `Labels` map; the other labels are skipped.
struct CudaLabel(Option<Kept>);

impl<'de> Deserialize<'de> for CudaLabel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = CudaLabel;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of labels, or null")
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CudaLabel, A::Error> {
                let mut label = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == CUDA_VERSION_LABEL {
                        label = Some(Kept::of(&map.next_value::<String>()?));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(CudaLabel(label))
            }
        }
        deserializer.deserialize_map(LabelsVisitor)
    }
}

/// What an image config says of CUDA; `digest` is the reference's. A
/// value too long to keep leaves the three unknown, and says which it was.
pub fn facts_of_config(bytes: &[u8], digest: String) -> Result<ImageConfigFacts, DocumentError> {
    let config: ConfigFile = serde_json::from_slice(bytes)
        .map_err(|err| DocumentError::ConfigNotJson(error_text(&err)))?;
    let (env, label) = match config.config {
        Some(section) => {
            (section.env.unwrap_or_default(), section.labels.and_then(|labels| labels.0))
        }
        None => (CudaEnv::default(), None),
    };
    let kept = [
        (env.cuda_version, CUDA_VERSION_ENV),
        (env.require_cuda, REQUIRE_CUDA_ENV),
        (label, CUDA_VERSION_LABEL),
    ];
    let oversized = kept.iter().find_map(|(kept, name)| match kept {
        Some(Kept::TooLong(bytes)) => Some(OversizedValue { name, bytes: *bytes }),
        _ => None,
    });
    let [cuda_version, require_cuda, cuda_label] = kept.map(|(kept, _)| match kept {
        Some(Kept::Text(text)) if oversized.is_none() => Some(text),
        _ => None,
    });
    Ok(ImageConfigFacts { cuda_version, require_cuda, cuda_label, digest, oversized })
}

#[cfg(test)]
mod tests;
