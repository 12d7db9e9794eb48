//! What the cluster says a claim got, and for whom.
//!
//! Reads, of a ResourceClaim: `metadata.ownerReferences[]` (the controller of `kind: Pod`,
//! `apiVersion: v1`: its `name` and `uid`),
//! `metadata.annotations["resource.kubernetes.io/pod-claim-name"]`,
//! `status.allocation.devices.results[].{request, driver, pool, device}`. Of a ResourceSlice of the
//! driver `gpu.nvidia.com` (slices of other drivers are not kept): `spec.pool.name`,
//! `spec.devices[].name`, the version attributes `cudaComputeCapability`, `cudaDriverVersion`
//! and `driverVersion`, and the string attribute `productName`.
//!
//! Bounded: at most [`MAX_RESULTS`] results of a claim and [`MAX_SLICE_DEVICES`] devices of a slice
//! are kept (what the API server allows), and names longer than the API allows are dropped.

use serde_json::Value;

use crate::document::Json;

/// The NVIDIA DRA driver's name for its GPU devices (and the domain of their attributes).
pub const GPU_DRIVER: &str = "gpu.nvidia.com";

/// The annotation the resource claim controller puts on a claim it makes
/// from a pod's ResourceClaimTemplate: the pod claim's name.
pub const POD_CLAIM_NAME_ANNOTATION: &str = "resource.kubernetes.io/pod-claim-name";

/// The most allocation results kept of one claim.
pub const MAX_RESULTS: usize = 32;
/// The most devices kept of one ResourceSlice.
pub const MAX_SLICE_DEVICES: usize = 128;
/// Longer names are not names the API server accepts: not kept.
const MAX_NAME_BYTES: usize = 253;
/// Longer version texts are not versions: not kept.
const MAX_VERSION_BYTES: usize = 64;
/// A product name is a label value on the node (GFD's `nvidia.com/gpu.product`): longer, not kept.
const MAX_PRODUCT_BYTES: usize = 63;

/// One device allocated to a claim.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct AllocatedDevice {
    /// The request it was allocated for (`request` or `request/subrequest`).
    pub request: String,
    pub driver: String,
    pub pool: String,
    pub device: String,
}

/// The Pod a claim was made for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MadeFor {
    /// The owner Pod's name and UID.
    pub pod: String,
    pub pod_uid: String,
    /// The pod claim (`spec.resourceClaims[].name`) it was made from, if the controller says so.
    pub pod_claim: Option<String>,
}

/// What the NVIDIA DRA driver publishes of a device's CUDA versions, as written (semver: `8.0.0`,
/// `13.0.0`, `580.126.20`), and its product. None: not published (VFIO passthrough devices publish
/// no versions).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DeviceVersions {
    pub compute_capability: Option<String>,
    pub cuda_driver_version: Option<String>,
    pub driver_version: Option<String>,
    /// `productName`, the driver's form (`NVIDIA H100 80GB HBM3`); at most a label value's length
    /// (what GFD labels the node with), a longer one is not kept.
    pub product_name: Option<String>,
}

/// One device of a kept ResourceSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SliceDevice {
    pub name: String,
    pub versions: DeviceVersions,
}

/// A ResourceSlice of the driver `gpu.nvidia.com`, as kept.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct KeptSlice {
    pub pool: String,
    pub devices: Vec<SliceDevice>,
}

/// The devices allocated to a ResourceClaim; None when it is not allocated.
pub fn read_allocation(claim: &Value) -> Option<Vec<AllocatedDevice>> {
    let results = claim.pointer("/status/allocation/devices/results")?.as_array()?;
    let devices = results
        .iter()
        .filter_map(|result| {
            let text = |key: &str| name(result.get(key)?.as_str());
            Some(AllocatedDevice {
                request: text("request")?,
                driver: text("driver")?,
                pool: text("pool")?,
                device: text("device")?,
            })
        })
        .take(MAX_RESULTS)
        .collect();
    Some(devices)
}

/// The Pod a ResourceClaim was made for: its controller owner of kind Pod.
pub fn read_made_for(claim: Json<'_>) -> Option<MadeFor> {
    let metadata = claim.get("metadata")?;
    let owner = metadata.get("ownerReferences")?.as_array()?.iter().find(|owner| {
        owner.get("kind").and_then(Json::as_str) == Some("Pod")
            && owner.get("apiVersion").and_then(Json::as_str) == Some("v1")
            && owner.get("controller").and_then(Json::as_bool) == Some(true)
    })?;
    let text = |value: Option<Json<'_>>| name(value?.as_str());
    let pod_claim =
        text(metadata.get("annotations").and_then(|a| a.get(POD_CLAIM_NAME_ANNOTATION)));
    Some(MadeFor { pod: text(owner.get("name"))?, pod_uid: text(owner.get("uid"))?, pod_claim })
}

/// A ResourceSlice device's attributes: `attributes` (v1, v1beta2) or `basic.attributes` (v1beta1).
pub fn device_attributes(device: &Value) -> Option<&Value> {
    device.get("attributes").or_else(|| device.get("basic")?.get("attributes"))
}

/// A ResourceSlice of the driver `gpu.nvidia.com`; None for other drivers and pool-less slices.
pub fn read_slice(slice: &Value) -> Option<KeptSlice> {
    let spec = slice.get("spec")?;
    if spec.get("driver").and_then(Value::as_str) != Some(GPU_DRIVER) {
        return None;
    }
    let pool = name(spec.pointer("/pool/name")?.as_str())?;
    let devices = spec
        .get("devices")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|device| {
            let attributes = device_attributes(device);
            let version = |attribute: &str| {
                let text = attributes?.get(attribute)?.get("version")?.as_str()?;
                (text.len() <= MAX_VERSION_BYTES).then(|| text.to_owned())
            };
            let product = attributes
                .and_then(|a| a.get("productName")?.get("string")?.as_str())
                .filter(|text| text.len() <= MAX_PRODUCT_BYTES)
                .map(str::to_owned);
            Some(SliceDevice {
                name: name(device.get("name")?.as_str())?,
                versions: DeviceVersions {
                    compute_capability: version("cudaComputeCapability"),
                    cuda_driver_version: version("cudaDriverVersion"),
                    driver_version: version("driverVersion"),
                    product_name: product,
                },
            })
        })
        .take(MAX_SLICE_DEVICES)
        .collect();
    Some(KeptSlice { pool, devices })
}

/// A name as the API server accepts one: not empty, at most [`MAX_NAME_BYTES`].
fn name(text: Option<&str>) -> Option<String> {
    text.filter(|text| !text.is_empty() && text.len() <= MAX_NAME_BYTES).map(str::to_owned)
}

#[cfg(test)]
mod tests;
