//! What a container image needs of a GPU node, as a value.
//!
//! Two sources fill it: the image table of the configuration (an entry gives
//! a CUDA version, a minimum compute capability, and optionally the image's
//! `NVIDIA_REQUIRE_CUDA`), and the image's own config in its registry, read
//! by [`ImageNeeds::from_image_config`]: the env `CUDA_VERSION` and
//! `NVIDIA_REQUIRE_CUDA` (what the NVIDIA Container Toolkit checks when the
//! container starts), `NVIDIA_DISABLE_REQUIRE`, and the label
//! `com.nvidia.cuda.version` when `CUDA_VERSION` is absent.
//!
//! What R4 makes of it: the compute floor of the CUDA version (CUDA 13
//! needs compute capability 7.5, CUDA 12 needs 5.0, CUDA 11 needs 3.5),
//! raised by an explicit minimum; and a driver floor, from the declared
//! requirement, else `cuda>=X.Y` for an image built on CUDA X.Y.
//!
//! Where registry answers enter the policy: `policy::images::ImageFacts`.

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

/// The compute capability a CUDA major version needs at least: CUDA 13
/// dropped Maxwell, Pascal and Volta (7.5), CUDA 12 dropped Kepler (5.0),
/// CUDA 11 starts at sm_35. Later majors keep the highest known floor.
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
    matches!(
        value.trim().to_ascii_lowercase().as_str(),
        "1" | "true" | "yes" | "on"
    )
}

impl ImageNeeds {
    /// From an image config's `Env` (`NAME=value` strings, the last one of a
    /// name wins, as in a container) and `Labels`.
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
        let cuda = match (cuda_env, label) {
            (Some(value), _) => Some((CUDA_VERSION_ENV, value)),
            (None, Some(value)) => Some((CUDA_VERSION_LABEL, value)),
            (None, None) => None,
        };
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

    /// What it holds on the heap (its requirement's text and
    /// alternatives), for caches that count what they keep.
    pub fn heap_bytes(&self) -> usize {
        self.require_cuda
            .as_ref()
            .map_or(0, Requirement::heap_bytes)
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
        self.require_cuda
            .clone()
            .or_else(|| self.cuda.map(Requirement::at_least))
    }

    /// What the image needs of the node's driver, in node-label terms.
    pub fn driver_floor(&self) -> Option<DriverFloor> {
        self.requirement()?.driver_floor()
    }

    /// The container's own env overrides the image's, as it does when the
    /// container starts: a literal `NVIDIA_REQUIRE_CUDA` replaces the
    /// declared requirement, `NVIDIA_DISABLE_REQUIRE` turns it off. An
    /// unreadable requirement in the pod leaves the image's in force.
    /// `env` is the container's literal entries, name and value.
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
mod tests {
    use super::*;
    use rstest::rstest;

    fn needs(env: &[&str], labels: &[(&str, &str)]) -> ImageNeeds {
        match ImageNeeds::from_image_config(env.iter().copied(), labels.iter().copied()) {
            Ok(needs) => needs,
            Err(err) => panic!("{err}"),
        }
    }

    fn floor(needs: &ImageNeeds) -> String {
        needs
            .driver_floor()
            .map(|f| f.to_string())
            .unwrap_or_default()
    }

    #[rstest]
    // nvcr.io/nvidia/pytorch:23.10-py3 (its env, as `collect_env` prints it)
    #[case(&["CUDA_VERSION=12.2.2.009", "NVIDIA_REQUIRE_CUDA=cuda>=9.0", "NVIDIA_PRODUCT_NAME=PyTorch"], Some((12, 2)), Some((5, 0)), "")]
    // nvcr.io/nvidia/tritonserver:23.12-py3
    #[case(&["NVIDIA_REQUIRE_CUDA=cuda>=9.0", "CUDA_VERSION=12.3.2.001", "NVIDIA_TRITON_SERVER_VERSION=23.12"], Some((12, 3)), Some((5, 0)), "")]
    // vllm/vllm-openai:v0.23.0, built on nvidia/cuda:13.0.2 (abridged to the tesla brand)
    #[case(&["CUDA_VERSION=13.0.2", "NVIDIA_REQUIRE_CUDA=cuda>=13.0 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551 brand=tesla,driver>=570,driver<571"], Some((13, 0)), Some((7, 5)), "CUDA 13.0 or branch 535, 550, 570")]
    // An image that declares its CUDA version only: it needs a driver for it.
    #[case(&["CUDA_VERSION=13.1.0"], Some((13, 1)), Some((7, 5)), "CUDA 13.1")]
    // Disabled requirements: the toolkit checks nothing.
    #[case(&["CUDA_VERSION=13.1.0", "NVIDIA_REQUIRE_CUDA=cuda>=13.1", "NVIDIA_DISABLE_REQUIRE=true"], Some((13, 1)), Some((7, 5)), "")]
    // The last entry of a name wins.
    #[case(&["CUDA_VERSION=11.8.0", "CUDA_VERSION=12.6.3"], Some((12, 6)), Some((5, 0)), "CUDA 12.6")]
    // Not a CUDA image.
    #[case(&["PATH=/usr/bin", "HOME"], None, None, "")]
    fn from_image_env(
        #[case] env: &[&str],
        #[case] cuda: Option<(u32, u32)>,
        #[case] compute: Option<(u32, u32)>,
        #[case] driver: &str,
    ) {
        let needs = needs(env, &[]);
        assert_eq!(needs.cuda, cuda.map(|(a, b)| CudaVersion::new(a, b)));
        assert_eq!(
            needs.compute_floor(),
            compute.map(|(a, b)| ComputeCapability::new(a, b))
        );
        assert_eq!(floor(&needs), driver);
    }

    #[test]
    fn the_label_stands_in_for_a_missing_env() {
        let labeled = needs(&[], &[("maintainer", "x"), (CUDA_VERSION_LABEL, "12.8.1")]);
        assert_eq!(labeled.cuda, Some(CudaVersion::new(12, 8)));
        let both = needs(&["CUDA_VERSION=13.0.2"], &[(CUDA_VERSION_LABEL, "12.8.1")]);
        assert_eq!(both.cuda, Some(CudaVersion::new(13, 0)));
    }

    #[rstest]
    #[case(&["CUDA_VERSION=thirteen"], "CUDA_VERSION=\"thirteen\" is not a CUDA version")]
    #[case(&["NVIDIA_REQUIRE_CUDA=cuda=>13"], "NVIDIA_REQUIRE_CUDA \"cuda=>13\": ")]
    fn unreadable_configs_say_what(#[case] env: &[&str], #[case] start: &str) {
        let err = ImageNeeds::from_image_config(env.iter().copied(), [])
            .err()
            .map(|e| e.to_string())
            .unwrap_or_default();
        assert!(err.starts_with(start), "{err}");
    }

    #[rstest]
    #[case(9, None)]
    #[case(11, Some((3, 5)))]
    #[case(12, Some((5, 0)))]
    #[case(13, Some((7, 5)))]
    #[case(14, Some((7, 5)))]
    fn compute_floors_by_major(#[case] major: u32, #[case] expected: Option<(u32, u32)>) {
        assert_eq!(
            cuda_compute_floor(CudaVersion::new(major, 1)),
            expected.map(|(a, b)| ComputeCapability::new(a, b))
        );
    }

    #[test]
    fn an_explicit_minimum_only_raises() {
        let mut needs = needs(&["CUDA_VERSION=12.9.1"], &[]);
        needs.minimum = Some(ComputeCapability::new(7, 0));
        assert_eq!(needs.compute_floor(), Some(ComputeCapability::new(7, 0)));
        needs.minimum = Some(ComputeCapability::new(3, 0));
        assert_eq!(needs.compute_floor(), Some(ComputeCapability::new(5, 0)));
    }
}
