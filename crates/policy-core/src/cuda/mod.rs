//! What GPUs and CUDA images are, as values: a compute capability, a CUDA version, the NVIDIA
//! Container Toolkit's requirement language, and what an image needs of a node. Nothing here knows
//! of pods, requests or the cluster.

pub mod needs;
pub mod requirement;

use serde::{Deserialize, Deserializer};

pub use needs::{DISABLE_REQUIRE_ENV, ImageNeeds, REQUIRE_CUDA_ENV};
pub use requirement::{CudaVersion, DriverFloor, Requirement};

/// A `major.minor` version type, read from text by `$read` (which gives the first numbers, see
/// [`numbers`]), written as `major.minor`, and deserialized from text or a YAML number (`7.5`).
macro_rules! major_minor {
    ($(#[$doc:meta])* $name:ident, $error:ident, $what:literal, $example:literal, $read:expr) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub struct $name {
            pub major: u32,
            pub minor: u32,
        }

        impl $name {
            pub const fn new(major: u32, minor: u32) -> Self {
                Self { major, minor }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                write!(f, "{}.{}", self.major, self.minor)
            }
        }

        #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
        #[error("{0:?} is not {what} (expected MAJOR.MINOR, e.g. \"{example}\")", what = $what, example = $example)]
        pub struct $error(String);

        impl std::str::FromStr for $name {
            type Err = $error;

            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let read: fn(&str) -> Option<[u32; 3]> = $read;
                match read(s) {
                    Some([major, minor, _]) => Ok(Self::new(major, minor)),
                    None => Err($error(s.to_owned())),
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                serializer.collect_str(self)
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                $crate::cuda::version_text(deserializer)?
                    .parse()
                    .map_err(serde::de::Error::custom)
            }
        }
    };
}
pub(crate) use major_minor;

major_minor!(
    /// A CUDA compute capability `major.minor`, as GFD publishes it in the
    /// `nvidia.com/gpu.compute.major` / `.minor` node labels.
    ComputeCapability,
    ComputeCapabilityError,
    "a compute capability",
    "8.0",
    |text| numbers(text, 2, 3)
);

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
