//! The platform a pod will run on, and the entry of an image index that
//! serves it.

use std::fmt;

use super::IndexEntry;
use crate::document::{Json, Object};

/// The node label the scheduler matches a pod's architecture with.
pub const ARCH_LABEL: &str = "kubernetes.io/arch";

/// An OS and CPU architecture as image indexes name them (`linux/amd64`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Platform {
    pub os: String,
    pub architecture: String,
    /// The CPU variant (`v8`), when the pod's platform names one.
    pub variant: Option<String>,
}

impl Default for Platform {
    /// `linux/amd64`: what a pod without an architecture in its node
    /// selector runs on in most clusters.
    fn default() -> Self {
        Self::linux("amd64")
    }
}

impl fmt::Display for Platform {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.os, self.architecture)?;
        match &self.variant {
            Some(variant) => write!(f, "/{variant}"),
            None => Ok(()),
        }
    }
}

impl Platform {
    pub fn linux(architecture: &str) -> Self {
        Self {
            os: "linux".to_owned(),
            architecture: architecture.to_owned(),
            variant: None,
        }
    }

    /// The platform of a pod spec (raw JSON): `kubernetes.io/arch` from its
    /// `nodeSelector`, else amd64. Linux either way.
    pub fn of_pod_spec(spec: Json<'_>) -> Self {
        spec.as_object()
            .map_or_else(Self::default, Self::of_spec_fields)
    }

    /// [`Platform::of_pod_spec`] of a pod spec's fields.
    pub fn of_spec_fields(spec: Object<'_>) -> Self {
        match spec
            .get("nodeSelector")
            .and_then(|selector| selector.get(ARCH_LABEL))
            .and_then(Json::as_str)
            .map(str::trim)
        {
            Some(arch) if !arch.is_empty() => Self::linux(arch),
            _ => Self::default(),
        }
    }

    /// The index entry for this platform: OS and architecture equal, the
    /// variant too when this platform names one. The first match wins, as
    /// with containerd.
    pub fn choose<'a>(&self, entries: &'a [IndexEntry]) -> Option<&'a IndexEntry> {
        let mut candidates = entries.iter().filter(|entry| {
            entry.platform.as_ref().is_some_and(|platform| {
                platform.os == self.os && platform.architecture == self.architecture
            })
        });
        match &self.variant {
            None => candidates.next(),
            Some(variant) => candidates.find(|entry| {
                entry
                    .platform
                    .as_ref()
                    .and_then(|platform| platform.variant.as_ref())
                    == Some(variant)
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::document::Document;
    use serde_json::json;

    fn entries() -> Vec<IndexEntry> {
        let entry = |digest: &str, os: &str, arch: &str, variant: Option<&str>| {
            serde_json::from_value::<IndexEntry>(json!({
                "mediaType": "application/vnd.oci.image.manifest.v1+json",
                "digest": digest,
                "size": 1,
                "platform": {"os": os, "architecture": arch, "variant": variant},
            }))
        };
        [
            entry("sha256:amd", "linux", "amd64", None),
            entry("sha256:attestation", "unknown", "unknown", None),
            entry("sha256:arm-v8", "linux", "arm64", Some("v8")),
            entry("sha256:arm-v9", "linux", "arm64", Some("v9")),
        ]
        .into_iter()
        .filter_map(Result::ok)
        .collect()
    }

    fn chosen(platform: &Platform) -> Option<String> {
        platform
            .choose(&entries())
            .map(|entry| entry.digest.clone())
    }

    #[test]
    fn the_pods_node_selector_names_the_architecture() {
        assert_eq!(entries().len(), 4);
        let arm = json!({"nodeSelector": {"kubernetes.io/arch": "arm64"}});
        let arm = Platform::of_pod_spec(Document::from_value(&arm).root());
        assert_eq!(arm, Platform::linux("arm64"));
        assert_eq!(arm.to_string(), "linux/arm64");
        assert_eq!(chosen(&arm).as_deref(), Some("sha256:arm-v8"));
        for spec in [
            json!({}),
            json!({"nodeSelector": {"kubernetes.io/arch": ""}}),
            json!({"nodeSelector": {"zone": "a"}}),
        ] {
            let spec = Document::from_value(&spec);
            assert_eq!(Platform::of_pod_spec(spec.root()), Platform::default());
        }
        assert_eq!(chosen(&Platform::default()).as_deref(), Some("sha256:amd"));
    }

    #[test]
    fn a_variant_picks_its_entry_and_a_missing_platform_none() {
        let v9 = Platform {
            variant: Some("v9".to_owned()),
            ..Platform::linux("arm64")
        };
        assert_eq!(chosen(&v9).as_deref(), Some("sha256:arm-v9"));
        assert_eq!(chosen(&Platform::linux("s390x")), None);
    }
}
