//! What GPUs and CUDA images are, as values: a compute capability, a CUDA
//! version, the NVIDIA Container Toolkit's requirement language, and what
//! an image needs of a node.
//!
//! The bottom of the layering: the configuration (`settings`) is written
//! in these words, and the policy, the registry client and the output read
//! them. Nothing here knows of pods, requests or the cluster.

pub mod needs;
pub mod requirement;

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize};

pub use needs::{DISABLE_REQUIRE_ENV, ImageNeeds, REQUIRE_CUDA_ENV};
pub use requirement::{CudaVersion, DriverFloor, Requirement};

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
pub fn version_text<'de, D: Deserializer<'de>>(deserializer: D) -> Result<String, D::Error> {
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
