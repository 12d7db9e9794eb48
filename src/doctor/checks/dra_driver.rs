//! `dra-driver-missing` and `dra-slice-versions-missing`: the NVIDIA DRA
//! driver (`gpu.nvidia.com`), quiet on a cluster that does not serve
//! `resource.k8s.io/v1`. The version attributes are the ones the DRA floors
//! select on (`policy::dra::floor`); docs/operations.md, "The findings".

use crate::doctor::finding::{Finding, FindingId, Severity, Subject, count};
use crate::doctor::inventory::Inventory;
use crate::policy::dra::allocation::GPU_DRIVER;

/// The attributes the floors read.
const COMPUTE_ATTRIBUTE: &str = "cudaComputeCapability";
const DRIVER_ATTRIBUTE: &str = "cudaDriverVersion";

pub fn check(inventory: &Inventory) -> Vec<Finding> {
    let Some(dra) = inventory.dra.items() else {
        return Vec::new();
    };
    let mut findings = Vec::new();
    if !dra.gpu_device_classes.is_empty() && dra.slices.is_empty() {
        findings.push(Finding::new(
            FindingId::DraDriverMissing,
            Severity::Error,
            format!(
                "{} {} but the NVIDIA DRA driver publishes no ResourceSlice: claims for them stay unallocated",
                count(dra.gpu_device_classes.len(), "GPU DeviceClass exists", "GPU DeviceClasses exist"),
                dra.gpu_device_classes.join(", ")
            ),
            dra.gpu_device_classes
                .iter()
                .map(|name| Subject::cluster("resource.k8s.io/v1", "DeviceClass", name))
                .collect(),
            vec![format!("no ResourceSlice of driver {GPU_DRIVER}")],
            "check the NVIDIA DRA driver's kubelet plugin pods (kubectl get pods -A -l app.kubernetes.io/name=nvidia-dra-driver-gpu) and their logs".to_owned(),
        ));
    }
    let lacking: Vec<_> = dra
        .slices
        .iter()
        .filter(|s| s.without_compute_capability > 0 || s.without_driver_version > 0)
        .collect();
    if !lacking.is_empty() {
        let evidence = lacking
            .iter()
            .map(|slice| {
                let mut missing = Vec::new();
                if slice.without_compute_capability > 0 {
                    missing.push(format!(
                        "{} without {COMPUTE_ATTRIBUTE}",
                        slice.without_compute_capability
                    ));
                }
                if slice.without_driver_version > 0 {
                    missing.push(format!(
                        "{} without {DRIVER_ATTRIBUTE}",
                        slice.without_driver_version
                    ));
                }
                format!(
                    "{} (node {}): {} devices, {}",
                    slice.name,
                    slice.node.as_deref().unwrap_or("none"),
                    slice.devices,
                    missing.join(", ")
                )
            })
            .collect();
        findings.push(Finding::new(
            FindingId::DraSliceVersionsMissing,
            Severity::Warning,
            format!(
                "{} of {GPU_DRIVER} {} devices without {COMPUTE_ATTRIBUTE} or {DRIVER_ATTRIBUTE}: claims with a compute or driver floor never get them",
                count(lacking.len(), "ResourceSlice", "ResourceSlices"),
                if lacking.len() == 1 { "has" } else { "have" }
            ),
            lacking
                .iter()
                .map(|s| Subject::cluster("resource.k8s.io/v1", "ResourceSlice", &s.name))
                .collect(),
            evidence,
            format!(
                "upgrade the NVIDIA DRA driver to a release that publishes {COMPUTE_ATTRIBUTE} and {DRIVER_ATTRIBUTE}, or set draComputeAffinity: nodeLabels in gpu-policy's config"
            ),
        ));
    }
    findings
}
