//! What GPUs and CUDA images are, as values: a compute capability, a CUDA
//! version, the NVIDIA Container Toolkit's requirement language, and what
//! an image needs of a node. Nothing here knows of pods, requests or the
//! cluster.

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
        match numbers(s, 2, 3) {
            Some([major, minor, _]) => Ok(Self::new(major, minor)),
            None => Err(ComputeCapabilityError(s.to_owned())),
        }
    }
}

/// Up to `parts` dot-separated numbers of at most `digits` digits each:
/// the first three, 0 for those absent.
fn numbers(text: &str, parts: usize, digits: usize) -> Option<[u32; 3]> {
    let mut values = [0; 3];
    for (index, field) in text.split('.').enumerate() {
        if index >= parts
            || field.is_empty()
            || field.len() > digits
            || !field.bytes().all(|b| b.is_ascii_digit())
        {
            return None;
        }
        if let Some(value) = values.get_mut(index) {
            *value = field.parse().ok()?;
        }
    }
    Some(values)
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
    /// Accepts `"8.0"` and an unquoted YAML number (`7.5`).
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        version_text(deserializer)?
            .parse()
            .map_err(serde::de::Error::custom)
    }
}
