//! The allowlist entries of the configuration: a workload by name, or the
//! workloads of one kind in one namespace by a name prefix.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One entry of the allowlist: a workload that may see every card without requesting one (the GPU
/// exporter, the device plugin, GFD). It names one workload by `name`, or, for workloads whose
/// names end in a generated suffix (a Deployment's ReplicaSets, the DRA driver's MPS control
/// daemons), the workloads of one kind in one namespace whose names start with `namePrefix`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct AllowlistEntry {
    pub namespace: String,
    pub kind: String,
    /// The exact name; empty when `name_prefix` is set.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// A name prefix that ends in `-`; `None` for an exact name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name_prefix: Option<String>,
}

/// The shortest `namePrefix`, its trailing `-` included: a prefix of a
/// letter or two would match far more than one application's workloads.
pub const MIN_NAME_PREFIX: usize = 5;

impl AllowlistEntry {
    /// An entry naming one workload exactly.
    pub fn exact(namespace: &str, kind: &str, name: &str) -> Self {
        AllowlistEntry {
            namespace: namespace.to_owned(),
            kind: kind.to_owned(),
            name: name.to_owned(),
            name_prefix: None,
        }
    }

    /// Whether the workload `namespace`/`kind`/`name` is the one this entry
    /// names, or one whose name starts with its prefix.
    pub fn matches(&self, namespace: &str, kind: &str, name: &str) -> bool {
        self.namespace == namespace
            && self.kind == kind
            && match &self.name_prefix {
                Some(prefix) => name.starts_with(prefix.as_str()) && name.len() > prefix.len(),
                None => self.name == name,
            }
    }

    /// Why the entry cannot be used, if it cannot.
    pub(super) fn problem(&self) -> Option<String> {
        if self.namespace.is_empty() || self.kind.is_empty() {
            return Some("namespace and kind must not be empty".into());
        }
        let prefix = match (&self.name_prefix, self.name.is_empty()) {
            (None, false) => return None,
            (None, true) => return Some("needs a name or a namePrefix".into()),
            (Some(_), false) => return Some("has both name and namePrefix; keep one".into()),
            (Some(prefix), true) => prefix,
        };
        let valid_chars = prefix
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.');
        if !valid_chars || !prefix.ends_with('-') || prefix.len() < MIN_NAME_PREFIX {
            return Some(format!(
                "namePrefix {prefix:?} must be at least {MIN_NAME_PREFIX} characters of a \
                 Kubernetes name (a-z, 0-9, '-', '.') and end with '-'"
            ));
        }
        None
    }
}

impl fmt::Display for AllowlistEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.name_prefix {
            Some(prefix) => write!(f, "{}/{}/{prefix}*", self.namespace, self.kind),
            None => write!(f, "{}/{}/{}", self.namespace, self.kind, self.name),
        }
    }
}

#[cfg(test)]
mod tests;
