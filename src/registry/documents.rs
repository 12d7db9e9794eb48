//! The readers of what a registry sends: an image manifest or index, and
//! an image config. They keep only what the lookup uses and skip the rest
//! without allocating it, so a document within the read bound costs about
//! its own size in memory, however it is shaped (a config of a million
//! tiny env entries, an index of annotations). What they keep is bounded
//! too: a CUDA value longer than [`MAX_VALUE_BYTES`] is kept as its
//! length only. Pure functions of bytes.

use std::fmt;

use serde::Deserialize;
use serde::de::{self, Deserializer, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::{ImageConfigFacts, OversizedValue, error_text};

/// The env of the CUDA version the image is built on.
pub const CUDA_VERSION_ENV: &str = "CUDA_VERSION";
/// The env the NVIDIA Container Toolkit checks the node's driver against.
pub const REQUIRE_CUDA_ENV: &str = "NVIDIA_REQUIRE_CUDA";
/// The label of the CUDA version, on NVIDIA's images.
pub const CUDA_LABEL: &str = "com.nvidia.cuda.version";

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

    /// The text, or the [`OversizedValue`] of `name`.
    fn text(kept: Option<Kept>, name: &'static str) -> Result<Option<String>, OversizedValue> {
        match kept {
            None => Ok(None),
            Some(Kept::Text(text)) => Ok(Some(text)),
            Some(Kept::TooLong(bytes)) => Err(OversizedValue { name, bytes }),
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

/// The `Accept` of a manifest request: the four types above.
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

/// The platform of an index entry.
#[derive(Debug, Clone, PartialEq, Eq, Default, Deserialize)]
pub struct EntryPlatform {
    #[serde(default)]
    pub os: String,
    #[serde(default)]
    pub architecture: String,
    #[serde(default)]
    pub variant: Option<String>,
}

/// One entry of an image index.
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
pub struct IndexEntry {
    pub digest: String,
    pub size: i64,
    #[serde(default)]
    pub platform: Option<EntryPlatform>,
}

/// An image manifest (its config's descriptor) or an image index (its
/// entries).
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
    #[serde(default, deserialize_with = "bounded_entries")]
    manifests: Option<Vec<IndexEntry>>,
}

/// The most entries an image index may have. Real ones have a few dozen
/// (platforms and attestations); the bound keeps a 4 MiB index of tiny
/// entries (serde reads `["",0]` as an entry) from costing many times its
/// size.
pub const MAX_INDEX_ENTRIES: usize = 1024;

fn bounded_entries<'de, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<Vec<IndexEntry>>, D::Error> {
    struct EntriesVisitor;
    impl<'de> Visitor<'de> for EntriesVisitor {
        type Value = Option<Vec<IndexEntry>>;

        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a list of index entries, or null")
        }

        fn visit_unit<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_none<E: de::Error>(self) -> Result<Self::Value, E> {
            Ok(None)
        }

        fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<Self::Value, D::Error> {
            inner.deserialize_seq(self)
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
            Ok(Some(entries))
        }
    }
    deserializer.deserialize_option(EntriesVisitor)
}

/// Reads a manifest or an index (schema version 2). The error is one line.
pub fn read_manifest(bytes: &[u8]) -> Result<Manifest, String> {
    let document: ManifestDocument = serde_json::from_slice(bytes)
        .map_err(|err| format!("not a manifest: {}", error_text(&err)))?;
    match document.schema_version {
        Some(2) => {}
        Some(other) => return Err(format!("schema version {other} is not supported")),
        None => return Err("not a manifest: no schemaVersion".to_owned()),
    }
    let media_type = document.media_type.as_deref();
    let is_index = match media_type {
        Some(kind) if INDEX_TYPES.contains(&kind) => true,
        Some(kind) if IMAGE_TYPES.contains(&kind) => false,
        Some(kind) => {
            let kind: String = kind.chars().take(100).collect();
            return Err(format!(
                "media type {kind:?} is not an image manifest or index"
            ));
        }
        // The OCI types may leave mediaType out: the fields tell.
        None => document.manifests.is_some() && document.config.is_none(),
    };
    if is_index {
        let manifests = document
            .manifests
            .ok_or("an image index without \"manifests\"")?;
        Ok(Manifest::Index { manifests })
    } else {
        let config = document
            .config
            .ok_or("an image manifest without \"config\"")?;
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
    env: CudaEnv,
    #[serde(rename = "Labels", default)]
    labels: CudaLabel,
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

            fn visit_unit<E: de::Error>(self) -> Result<CudaEnv, E> {
                Ok(CudaEnv::default())
            }

            fn visit_none<E: de::Error>(self) -> Result<CudaEnv, E> {
                Ok(CudaEnv::default())
            }

            fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<CudaEnv, D::Error> {
                inner.deserialize_any(self)
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
        deserializer.deserialize_option(EnvVisitor)
    }
}

/// The CUDA label of a `Labels` map; the other labels are skipped.
#[derive(Default)]
struct CudaLabel(Option<Kept>);

impl<'de> Deserialize<'de> for CudaLabel {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        struct LabelsVisitor;
        impl<'de> Visitor<'de> for LabelsVisitor {
            type Value = CudaLabel;

            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a map of labels, or null")
            }

            fn visit_unit<E: de::Error>(self) -> Result<CudaLabel, E> {
                Ok(CudaLabel(None))
            }

            fn visit_none<E: de::Error>(self) -> Result<CudaLabel, E> {
                Ok(CudaLabel(None))
            }

            fn visit_some<D: Deserializer<'de>>(self, inner: D) -> Result<CudaLabel, D::Error> {
                inner.deserialize_any(self)
            }

            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<CudaLabel, A::Error> {
                let mut label = None;
                while let Some(key) = map.next_key::<String>()? {
                    if key == CUDA_LABEL {
                        label = Some(Kept::of(&map.next_value::<String>()?));
                    } else {
                        map.next_value::<IgnoredAny>()?;
                    }
                }
                Ok(CudaLabel(label))
            }
        }
        deserializer.deserialize_option(LabelsVisitor)
    }
}

/// What an image config says of CUDA; `digest` is the reference's. A
/// value too long to keep leaves the three unknown, and says which it was.
pub fn facts_of_config(bytes: &[u8], digest: String) -> Result<ImageConfigFacts, String> {
    let config: ConfigFile = serde_json::from_slice(bytes)
        .map_err(|err| format!("image config is not JSON: {}", error_text(&err)))?;
    let (env, label) = match config.config {
        Some(section) => (section.env, section.labels.0),
        None => (CudaEnv::default(), None),
    };
    let values = Kept::text(env.cuda_version, CUDA_VERSION_ENV).and_then(|cuda_version| {
        let require_cuda = Kept::text(env.require_cuda, REQUIRE_CUDA_ENV)?;
        let cuda_label = Kept::text(label, CUDA_LABEL)?;
        Ok((cuda_version, require_cuda, cuda_label))
    });
    Ok(match values {
        Ok((cuda_version, require_cuda, cuda_label)) => ImageConfigFacts {
            cuda_version,
            require_cuda,
            cuda_label,
            digest,
            oversized: None,
        },
        Err(oversized) => ImageConfigFacts {
            cuda_version: None,
            require_cuda: None,
            cuda_label: None,
            digest,
            oversized: Some(oversized),
        },
    })
}

#[cfg(test)]
mod tests;
