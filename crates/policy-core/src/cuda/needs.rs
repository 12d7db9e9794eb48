//! What a container image needs of a GPU node, as a value: from the image
//! table of the configuration, or from the image's own config in its
//! registry ([`ImageNeeds::from_image_config`]).

use super::ComputeCapability;
use super::requirement::{CudaVersion, DriverFloor, Requirement, RequirementError};

pub const CUDA_VERSION_ENV: &str = "CUDA_VERSION";
pub const REQUIRE_CUDA_ENV: &str = "NVIDIA_REQUIRE_CUDA";
pub const DISABLE_REQUIRE_ENV: &str = "NVIDIA_DISABLE_REQUIRE";
/// The label the CUDA images carry besides `CUDA_VERSION`.
pub const CUDA_VERSION_LABEL: &str = "com.nvidia.cuda.version";

/// What one image needs. Empty (the default) when nothing is known.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ImageNeeds {
    /// The CUDA version the image is built on.
    pub cuda: Option<CudaVersion>,
    /// The image's `NVIDIA_REQUIRE_CUDA`, when it declares one.
    pub require_cuda: Option<Requirement>,
    /// `NVIDIA_DISABLE_REQUIRE` is set: the toolkit checks no requirement.
    pub require_disabled: bool,
    /// A minimum compute capability beyond what the CUDA version implies.
    pub minimum: Option<ComputeCapability>,
}

/// Why an image's config could not be read: one line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ImageConfigError {
    #[error("{name}={value:?} is not a CUDA version")]
    CudaVersion { name: &'static str, value: String },
    #[error(transparent)]
    Requirement(#[from] RequirementError),
}

/// The least compute capability a CUDA major needs: CUDA 13 dropped Maxwell, Pascal and Volta
/// (7.5), CUDA 12 Kepler (5.0), CUDA 11 starts at sm_35. Later majors keep the highest known floor.
pub fn cuda_compute_floor(cuda: CudaVersion) -> Option<ComputeCapability> {
    match cuda.major {
        13.. => Some(ComputeCapability::new(7, 5)),
        12 => Some(ComputeCapability::new(5, 0)),
        11 => Some(ComputeCapability::new(3, 5)),
        _ => None,
    }
}

/// The toolkit's reading of a boolean env value.
fn is_true(value: &str) -> bool {
    matches!(value.trim().to_ascii_lowercase().as_str(), "1" | "true" | "yes" | "on")
}

impl ImageNeeds {
    /// From an image config's `Env` (`NAME=value` strings, the last one of a name wins, as in a
    /// container) and `Labels`: `CUDA_VERSION` (else the label `com.nvidia.cuda.version`),
    /// `NVIDIA_REQUIRE_CUDA` (what the NVIDIA Container Toolkit checks when the container starts)
    /// and `NVIDIA_DISABLE_REQUIRE`.
    pub fn from_image_config<'a>(
        env: impl IntoIterator<Item = &'a str>,
        labels: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, ImageConfigError> {
        let mut cuda_env = None;
        let mut require = None;
        let mut disabled = None;
        for entry in env {
            let Some((name, value)) = entry.split_once('=') else {
                continue;
            };
            match name {
                CUDA_VERSION_ENV => cuda_env = Some(value),
                REQUIRE_CUDA_ENV => require = Some(value),
                DISABLE_REQUIRE_ENV => disabled = Some(value),
                _ => {}
            }
        }
        let label = labels
            .into_iter()
            .filter(|(name, _)| *name == CUDA_VERSION_LABEL)
            .map(|(_, value)| value)
            .last();
        let cuda = cuda_env
            .map(|value| (CUDA_VERSION_ENV, value))
            .or(label.map(|value| (CUDA_VERSION_LABEL, value)));
        let cuda = match cuda {
            Some((name, value)) if !value.trim().is_empty() => {
                Some(value.parse().map_err(|_| ImageConfigError::CudaVersion {
                    name,
                    value: value.chars().take(64).collect(),
                })?)
            }
            _ => None,
        };
        let require_cuda = match require {
            Some(text) if !text.trim().is_empty() => Some(text.parse()?),
            _ => None,
        };
        Ok(Self {
            cuda,
            require_cuda,
            require_disabled: disabled.is_some_and(is_true),
            minimum: None,
        })
    }

    /// What it holds on the heap, for caches that count what they keep.
    pub fn heap_bytes(&self) -> usize {
        self.require_cuda.as_ref().map_or(0, Requirement::heap_bytes)
    }

    /// Nothing known: the image adds no constraint.
    pub fn is_empty(&self) -> bool {
        self.cuda.is_none() && self.require_cuda.is_none() && self.minimum.is_none()
    }

    /// The lowest compute capability the image runs on.
    pub fn compute_floor(&self) -> Option<ComputeCapability> {
        self.cuda.and_then(cuda_compute_floor).max(self.minimum)
    }

    /// The requirement the toolkit will check: the declared one, else
    /// `cuda>=X.Y` for an image built on CUDA X.Y. None when disabled.
    pub fn requirement(&self) -> Option<Requirement> {
        if self.require_disabled {
            return None;
        }
        self.require_cuda.clone().or_else(|| self.cuda.map(Requirement::at_least))
    }

    /// What the image needs of the node's driver, in node-label terms.
    pub fn driver_floor(&self) -> Option<DriverFloor> {
        self.requirement()?.driver_floor()
    }

    /// The container's own env overrides the image's, as it does when the container starts: a
    /// literal `NVIDIA_REQUIRE_CUDA` replaces the declared requirement, `NVIDIA_DISABLE_REQUIRE`
    /// turns it off. An unreadable requirement in the pod leaves the image's in force. `env` is the
    /// container's literal entries, name and value.
    pub fn with_container_env<'a>(
        mut self,
        env: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Self {
        for (name, value) in env {
            match name {
                REQUIRE_CUDA_ENV => {
                    if let Ok(requirement) = value.parse() {
                        self.require_cuda = Some(requirement);
                    }
                }
                DISABLE_REQUIRE_ENV => self.require_disabled = is_true(value),
                _ => {}
            }
        }
        self
    }
}

#[cfg(test)]
mod tests;
