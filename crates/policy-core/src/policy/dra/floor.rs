//! What a pod's DRA GPU containers need of a device ([`GpuNeeds`]), as the pod annotation
//! `gpu-policy.io/gpu-needs` R4 writes and reads back, as the CEL selector added to a claim's GPU
//! requests, and as the judgement of an allocated device ([`GpuNeeds::shortfall`]; the tests hold
//! the selector and the judgement to the same answers).
//!
//! The selector reads the NVIDIA DRA driver's attributes `cudaComputeCapability` (the compute
//! floor), `cudaDriverVersion` and `driverVersion` (the driver floor). A CEL error aborts the whole
//! allocation, so every read is guarded: a device of another driver passes, and a device that does
//! not publish an attribute passes its part (VFIO passthrough devices publish none: the driver
//! inside the virtual machine runs CUDA there).

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

use super::allocation::DeviceVersions;
use super::tables::GPU_DRIVER;
use crate::cuda::requirement::DriverFloor;
use crate::cuda::{ComputeCapability, CudaVersion, Requirement};
use kubernetes_cel::{AttributeValue, Device, DeviceSelector, Quantity, Semver};

/// The longest annotation value read back: it is the webhook's own writing,
/// a few hundred bytes; anything longer was written by someone else.
pub const MAX_ANNOTATION_BYTES: usize = 16 * 1024;
/// The most images the annotation names.
pub const MAX_IMAGES: usize = 32;

const COMPUTE_ATTRIBUTE: &str = "cudaComputeCapability";
const CUDA_DRIVER_ATTRIBUTE: &str = "cudaDriverVersion";
const DRIVER_ATTRIBUTE: &str = "driverVersion";

/// What the GPU containers of a pod that get their GPUs through claims need
/// of the devices: a compute floor, a driver floor, or both.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GpuNeeds {
    pub compute_capability: Option<ComputeCapability>,
    pub driver: Option<DriverFloor>,
    /// The images the floors come from.
    pub images: Vec<String>,
}

/// The annotation's JSON.
#[derive(Debug, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct Recorded {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    compute_capability: Option<String>,
    /// The toolkit's requirement language: `cuda>=13.1`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    driver_version: Option<String>,
    #[serde(default)]
    images: Vec<String>,
}

impl GpuNeeds {
    /// None when nothing is needed.
    pub fn new(
        compute_capability: Option<ComputeCapability>,
        driver: Option<DriverFloor>,
        mut images: Vec<String>,
    ) -> Option<Self> {
        let compute_capability =
            compute_capability.filter(|floor| *floor != ComputeCapability::new(0, 0));
        if compute_capability.is_none() && driver.is_none() {
            return None;
        }
        images.sort();
        images.dedup();
        images.truncate(MAX_IMAGES);
        Some(GpuNeeds { compute_capability, driver, images })
    }

    /// The annotation value: `{"computeCapability":"7.5","driverVersion":"cuda>=13.1",...}`.
    pub fn annotation_value(&self) -> String {
        let recorded = Recorded {
            compute_capability: self.compute_capability.map(|c| c.to_string()),
            driver_version: self.driver.as_ref().map(DriverFloor::requirement_text),
            images: self.images.clone(),
        };
        serde_json::to_string(&recorded).unwrap_or_default()
    }

    /// Reads the annotation back. Err: why, on one line.
    pub fn from_annotation(text: &str) -> Result<Self, String> {
        if text.len() > MAX_ANNOTATION_BYTES {
            return Err(format!("longer than {MAX_ANNOTATION_BYTES} bytes"));
        }
        let recorded: Recorded =
            serde_json::from_str(text).map_err(|err| format!("not gpu-policy's JSON: {err}"))?;
        let compute_capability = recorded
            .compute_capability
            .map(|text| ComputeCapability::from_str(&text).map_err(|err| err.to_string()))
            .transpose()?;
        let driver = match recorded.driver_version {
            None => None,
            Some(text) => {
                let requirement = Requirement::from_str(&text).map_err(|err| err.to_string())?;
                Some(
                    requirement
                        .driver_floor()
                        .ok_or_else(|| format!("driverVersion {text:?} asks nothing"))?,
                )
            }
        };
        if recorded.images.len() > MAX_IMAGES {
            return Err(format!("names more than {MAX_IMAGES} images"));
        }
        GpuNeeds::new(compute_capability, driver, recorded.images)
            .ok_or_else(|| "asks nothing".to_owned())
    }

    /// The CEL selector a device must meet: true for a device of another
    /// driver and for a part whose attributes the device does not publish.
    pub fn selector(&self) -> String {
        let mut parts = Vec::new();
        if let Some(floor) = self.compute_capability {
            let version = format!("{}.{}.0", floor.major, floor.minor);
            parts.push(format!(
                "(!({}) || {})",
                has(COMPUTE_ATTRIBUTE),
                at_least(COMPUTE_ATTRIBUTE, &version)
            ));
        }
        if let Some(floor) = &self.driver {
            parts.push(driver_part(floor));
        }
        format!("device.driver != \"{GPU_DRIVER}\" || ({})", parts.join(" && "))
    }

    /// What a device of `versions` lacks, for people (`compute capability
    /// 6.0`); None when it meets the needs, or publishes too little to tell.
    pub fn shortfall(&self, versions: &DeviceVersions) -> Option<String> {
        let mut short = Vec::new();
        if let (Some(floor), Some(have)) =
            (self.compute_capability, versions.compute_capability.as_deref().and_then(numbers))
        {
            let have = ComputeCapability::new(have.0, have.1);
            if have < floor {
                short.push(format!("compute capability {have}"));
            }
        }
        if let (Some(floor), Some(cuda), Some(driver)) = (
            &self.driver,
            versions.cuda_driver_version.as_deref().and_then(numbers),
            versions.driver_version.as_deref().and_then(numbers),
        ) {
            let cuda = CudaVersion::new(cuda.0, cuda.1);
            if !floor.met_by(cuda, (driver.0, driver.1)) {
                short.push(format!("driver {}.{} (CUDA {cuda})", driver.0, driver.1));
            }
        }
        (!short.is_empty()).then(|| short.join(" and "))
    }

    /// Whether `selectors` (ANDed, as a request's are) refuse every device the NVIDIA driver could
    /// publish below these needs. A selector that does not compile guarantees nothing; one that
    /// fails on a device refuses it (the scheduler aborts the allocation).
    pub fn guaranteed_by(&self, selectors: &[String]) -> bool {
        let mut compiled = Vec::with_capacity(selectors.len());
        for selector in selectors {
            match DeviceSelector::compile(selector) {
                Ok(selector) => compiled.push(selector),
                Err(_) => return false,
            }
        }
        self.probes_below().iter().all(|device| {
            compiled.iter().any(|selector| !matches!(selector.matches(device), Ok(true)))
        })
    }

    /// Devices of the NVIDIA driver that fall short of these needs in one respect only.
    fn probes_below(&self) -> Vec<Device> {
        let meets_driver = |cuda: CudaVersion, driver: (u32, u32)| {
            self.driver.as_ref().is_none_or(|floor| floor.met_by(cuda, driver))
        };
        let good_driver =
            DRIVERS.iter().rev().copied().find(|&(cuda, driver)| meets_driver(cuda, driver));
        let good_card = self
            .compute_capability
            .unwrap_or(ComputeCapability::new(12, 0))
            .max(ComputeCapability::new(12, 0));
        let mut probes = Vec::new();
        if let (Some(floor), Some((cuda, driver))) = (self.compute_capability, good_driver) {
            let cards =
                COMPUTE_CAPABILITIES.iter().map(|cc| ComputeCapability::new(cc / 10, cc % 10));
            for card in cards.filter(|card| *card < floor) {
                probes.push(probe(card, cuda, driver));
            }
        }
        for &(cuda, driver) in DRIVERS {
            if !meets_driver(cuda, driver) {
                probes.push(probe(good_card, cuda, driver));
            }
        }
        probes
    }
}

impl fmt::Display for GpuNeeds {
    /// `compute capability >= 7.5 and a driver for CUDA 13.1`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut words = Vec::new();
        if let Some(floor) = self.compute_capability {
            words.push(format!("compute capability >= {floor}"));
        }
        if let Some(floor) = &self.driver {
            words.push(format!("a driver for {floor}"));
        }
        f.write_str(&words.join(" and "))
    }
}

/// The compute capabilities of NVIDIA's cards, Kepler to Blackwell, as `10 * major + minor`.
const COMPUTE_CAPABILITIES: &[u32] =
    &[30, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 89, 90, 100, 103, 110, 120, 121];

/// Data center driver branches and the CUDA version each supports, oldest first.
const DRIVERS: &[(CudaVersion, (u32, u32))] = &[
    (CudaVersion::new(11, 0), (450, 248)),
    (CudaVersion::new(11, 4), (470, 256)),
    (CudaVersion::new(12, 0), (525, 147)),
    (CudaVersion::new(12, 2), (535, 247)),
    (CudaVersion::new(12, 4), (550, 163)),
    (CudaVersion::new(12, 6), (560, 35)),
    (CudaVersion::new(12, 8), (570, 195)),
    (CudaVersion::new(13, 0), (580, 126)),
    (CudaVersion::new(13, 1), (590, 44)),
];

/// A full GPU as the NVIDIA driver's ResourceSlice publishes one, so a selector reading other
/// attributes (`productName`, `memory`) judges it as a real card.
fn probe(card: ComputeCapability, cuda: CudaVersion, driver: (u32, u32)) -> Device {
    let version = |text: String| AttributeValue::Version(text);
    let text = |text: &str| AttributeValue::String(text.to_owned());
    let attributes = [
        (COMPUTE_ATTRIBUTE, version(format!("{}.{}.0", card.major, card.minor))),
        (CUDA_DRIVER_ATTRIBUTE, version(format!("{}.{}.0", cuda.major, cuda.minor))),
        (DRIVER_ATTRIBUTE, version(format!("{}.{}.0", driver.0, driver.1))),
        ("architecture", text("probe")),
        ("brand", text("Nvidia")),
        ("productName", text("NVIDIA probe")),
        ("type", text("gpu")),
        ("uuid", text("GPU-probe")),
    ]
    .into_iter()
    .map(|(name, value)| (name.to_owned(), value))
    .collect();
    let memory = Quantity::parse("80Gi").into_iter().map(|q| ("memory".to_owned(), q)).collect();
    Device {
        driver: GPU_DRIVER.to_owned(),
        attributes: [(GPU_DRIVER.to_owned(), attributes)].into_iter().collect(),
        capacity: [(GPU_DRIVER.to_owned(), memory)].into_iter().collect(),
        allow_multiple_allocations: false,
    }
}

/// `device.attributes["gpu.nvidia.com"]`
fn attributes() -> String {
    format!("device.attributes[\"{GPU_DRIVER}\"]")
}

/// `"name" in device.attributes["gpu.nvidia.com"]`
fn has(attribute: &str) -> String {
    format!("\"{attribute}\" in {}", attributes())
}

fn compare(attribute: &str, version: &str, operator: &str) -> String {
    format!("{}.{attribute}.compareTo(semver(\"{version}\")) {operator} 0", attributes())
}

fn at_least(attribute: &str, version: &str) -> String {
    compare(attribute, version, ">=")
}

/// `(!(both attributes published) || alternative || ...)`, each alternative its comparisons ANDed.
fn driver_part(floor: &DriverFloor) -> String {
    let alternatives: Vec<String> = floor
        .atoms()
        .map(|atom| {
            let mut comparisons = Vec::new();
            if let Some(cuda) = atom.cuda {
                comparisons.push(at_least(
                    CUDA_DRIVER_ATTRIBUTE,
                    &format!("{}.{}.0", cuda.major, cuda.minor),
                ));
            }
            if let Some(from) = atom.driver_from {
                comparisons
                    .push(at_least(DRIVER_ATTRIBUTE, &format!("{}.{}.0", from.major, from.minor)));
            }
            if let Some(below) = atom.driver_below {
                comparisons.push(compare(DRIVER_ATTRIBUTE, &format!("{}.0.0", below.major), "<"));
            }
            format!("({})", comparisons.join(" && "))
        })
        .collect();
    format!(
        "(!({} && {}) || {})",
        has(CUDA_DRIVER_ATTRIBUTE),
        has(DRIVER_ATTRIBUTE),
        alternatives.join(" || ")
    )
}

/// `8.0.0` -> (8, 0): the major and minor of a version attribute, read as
/// the selector's `semver()` reads it; None for one it would refuse.
fn numbers(text: &str) -> Option<(u32, u32)> {
    let version = Semver::parse(text).ok()?;
    Some((u32::try_from(version.major()).ok()?, u32::try_from(version.minor()).ok()?))
}

#[cfg(test)]
mod tests;
