//! The rules' stable identifiers: [`RuleId`], with the name output,
//! metrics, logs and the `gpu-policy.io/mutations` annotation show.

use std::fmt;

use serde::{Serialize, Serializer};

/// Declares [`RuleId`]: each variant with the name output, metrics, logs and
/// the `gpu-policy.io/mutations` annotation show.
macro_rules! rule_ids {
    ($($variant:ident => $name:literal,)+) => {
        /// Stable rule identifiers. Their order is the order in which the
        /// `gpu-policy.io/mutations` annotation lists them.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum RuleId {
            $($variant,)+
        }

        impl RuleId {
            pub const ALL: &[RuleId] = &[$(RuleId::$variant,)+];

            pub fn as_str(self) -> &'static str {
                match self {
                    $(RuleId::$variant => $name,)+
                }
            }
        }
    };
}

rule_ids! {
    VisibleDevices => "visible-devices",
    BoundedRequests => "bounded-requests",
    RuntimeClass => "runtime-class",
    ComputeAffinity => "compute-affinity",
    Allowlist => "allowlist",
    DevicePaths => "device-paths",
}

impl RuleId {
    pub fn parse(text: &str) -> Option<RuleId> {
        Self::ALL.iter().copied().find(|rule| rule.as_str() == text)
    }
}

impl fmt::Display for RuleId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl Serialize for RuleId {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}
