//! The platform a pod will run on, and the entry of an image index that
//! serves it.

use std::fmt;

use super::oci::IndexEntry;
use super::pod_strings::{LabelValueError, check_label_value};
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
        Self { os: "linux".to_owned(), architecture: architecture.to_owned(), variant: None }
    }

    /// The platform of a pod spec (raw JSON): `kubernetes.io/arch` from its
    /// `nodeSelector`, else amd64. Linux either way. A value that is not a
    /// label value Kubernetes accepts is refused (one line, quoting a
    /// prefix of it) before anything is copied from it.
    pub fn of_pod_spec(spec: Json<'_>) -> Result<Self, LabelValueError> {
        spec.as_object().map_or_else(|| Ok(Self::default()), Self::of_spec_fields)
    }

    pub fn of_spec_fields(spec: Object<'_>) -> Result<Self, LabelValueError> {
        match spec
            .get("nodeSelector")
            .and_then(|selector| selector.get(ARCH_LABEL))
            .and_then(Json::as_str)
        {
            None | Some("") => Ok(Self::default()),
            Some(arch) => {
                check_label_value(&format!("nodeSelector {ARCH_LABEL}"), arch)?;
                Ok(Self::linux(arch))
            }
        }
    }

    /// Whether the OS, the architecture and the variant are label values
    /// Kubernetes accepts, as a pod's node selector must give them: the
    /// resolver looks up no platform that is not.
    pub fn check(&self) -> Result<(), LabelValueError> {
        check_label_value("platform OS", &self.os)?;
        check_label_value("platform architecture", &self.architecture)?;
        match &self.variant {
            Some(variant) => check_label_value("platform variant", variant),
            None => Ok(()),
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
                entry.platform.as_ref().and_then(|platform| platform.variant.as_ref())
                    == Some(variant)
            }),
        }
    }
}

#[cfg(test)]
mod tests;
