//! The allowlist entries of the configuration: a workload by name, or the
//! workloads of one kind in one namespace by a name prefix.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One entry of the allowlist: a workload that may see every card without
/// requesting one (the GPU exporter, the device plugin, GFD). It names one
/// workload by `name`, or, for workloads whose names end in a generated
/// suffix (a Deployment's ReplicaSets, the DRA driver's MPS control
/// daemons), the workloads of one kind in one namespace whose names start
/// with `namePrefix`.
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
mod tests {
    use super::*;
    use crate::settings::Settings;
    use rstest::rstest;

    #[rstest]
    #[case(
        "{namespace: ns, kind: ReplicaSet, namePrefix: mps-control-daemon-}",
        None
    )]
    #[case("{namespace: ns, kind: ReplicaSet, namePrefix: abcd-}", None)]
    #[case("{namespace: ns, kind: DaemonSet, name: plugin}", None)]
    #[case(
        "{namespace: ns, kind: ReplicaSet, namePrefix: \"\"}",
        Some("namePrefix \"\" must be at least 5")
    )]
    #[case(
        "{namespace: ns, kind: ReplicaSet, namePrefix: abc-}",
        Some("must be at least 5 characters")
    )]
    #[case(
        "{namespace: ns, kind: ReplicaSet, namePrefix: mps-control-daemon}",
        Some("end with '-'")
    )]
    #[case(
        "{namespace: ns, kind: ReplicaSet, namePrefix: \"mps-*-\"}",
        Some("(a-z, 0-9, '-', '.')")
    )]
    #[case(
        "{namespace: ns, kind: ReplicaSet, namePrefix: MPS-control-}",
        Some("(a-z, 0-9, '-', '.')")
    )]
    #[case(
        "{namespace: ns, kind: ReplicaSet, name: a, namePrefix: mps-control-}",
        Some("has both name and namePrefix")
    )]
    #[case(
        "{namespace: ns, kind: ReplicaSet}",
        Some("needs a name or a namePrefix")
    )]
    #[case(
        "{namespace: \"\", kind: ReplicaSet, namePrefix: mps-control-}",
        Some("namespace and kind must not be empty")
    )]
    #[case(
        "{namespace: ns, kind: \"\", name: a}",
        Some("namespace and kind must not be empty")
    )]
    fn allowlist_entries_are_validated(#[case] entry: &str, #[case] problem: Option<&str>) {
        let result = Settings::from_yaml(&format!("allowlist: [{entry}]"), "c.yaml");
        match (result, problem) {
            (Ok(_), None) => {}
            (Err(err), Some(problem)) => {
                let text = err.to_string();
                assert!(text.starts_with("config: allowlist entry "), "{text}");
                assert!(text.contains(problem), "{text}");
            }
            (result, _) => panic!(
                "{entry}: {:?}",
                result.map(|s| s.config().allowlist.clone())
            ),
        }
    }

    #[rstest]
    #[case("ns", "ReplicaSet", "mps-control-daemon-5f2c-7d9f8b6c4", true)]
    // the prefix alone is no generated name
    #[case("ns", "ReplicaSet", "mps-control-daemon-", false)]
    #[case("ns", "ReplicaSet", "mps-control-daemo", false)]
    #[case("ns", "ReplicaSet", "other-mps-control-daemon-1", false)]
    // one namespace, one kind
    #[case("other", "ReplicaSet", "mps-control-daemon-1", false)]
    #[case("ns", "Deployment", "mps-control-daemon-1", false)]
    fn name_prefixes_match_one_kind_in_one_namespace(
        #[case] namespace: &str,
        #[case] kind: &str,
        #[case] name: &str,
        #[case] matches: bool,
    ) {
        let entry = AllowlistEntry {
            name: String::new(),
            name_prefix: Some("mps-control-daemon-".into()),
            ..AllowlistEntry::exact("ns", "ReplicaSet", "")
        };
        assert_eq!(entry.matches(namespace, kind, name), matches);
        assert_eq!(entry.to_string(), "ns/ReplicaSet/mps-control-daemon-*");
    }

    #[test]
    fn name_prefix_entries_round_trip() {
        let yaml = "allowlist:\n- {namespace: ns, kind: DaemonSet, name: plugin}\n\
                    - {namespace: ns, kind: ReplicaSet, namePrefix: mps-control-daemon-}\n";
        let settings = match Settings::from_yaml(yaml, "c.yaml") {
            Ok(settings) => settings,
            Err(err) => panic!("{err}"),
        };
        let written = serde_saphyr::to_string(settings.config()).unwrap_or_default();
        assert!(
            written.contains("namePrefix: mps-control-daemon-"),
            "{written}"
        );
        let again = Settings::from_yaml(&written, "again.yaml").map(|s| s.config().clone());
        assert_eq!(again.ok().as_ref(), Some(settings.config()));
    }
}
