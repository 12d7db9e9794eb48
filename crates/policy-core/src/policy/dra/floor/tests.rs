use rstest::rstest;
use serde_json::{Value, json};

use super::*;

/// What the NGC CUDA 13.1 images need: compute capability 7.5 and a driver
/// for CUDA 13.1 (or branch 535 and 550 with forward compatibility, as
/// their NVIDIA_REQUIRE_CUDA says).
fn cuda_13() -> GpuNeeds {
    let driver = Requirement::from_str(
        "cuda>=13.1 brand=tesla,driver>=535,driver<536 brand=tesla,driver>=550,driver<551",
    )
    .ok()
    .and_then(|r| r.driver_floor());
    GpuNeeds::new(
        Some(ComputeCapability::new(7, 5)),
        driver,
        vec!["nvcr.io/nvidia/pytorch:25.12-py3".to_owned()],
    )
    .unwrap_or_else(|| panic!("needs"))
}

fn compute_only(major: u32, minor: u32) -> GpuNeeds {
    GpuNeeds::new(Some(ComputeCapability::new(major, minor)), None, Vec::new())
        .unwrap_or_else(|| panic!("needs"))
}

/// A `spec.devices[]` entry of the NVIDIA DRA driver's ResourceSlice.
fn nvidia_device(name: &str, kind: &str, compute: &str, cuda: &str, driver: &str) -> Value {
    json!({"name": name, "attributes": {
        "architecture": {"string": "any"},
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": compute},
        "cudaDriverVersion": {"version": cuda},
        "driverVersion": {"version": driver},
        "productName": {"string": name},
        "type": {"string": kind},
        "uuid": {"string": format!("GPU-{name}")},
    }, "capacity": {"memory": {"value": "16Gi"}}})
}

fn vfio_device() -> Value {
    json!({"name": "gpu-0", "attributes": {
        "deviceID": {"string": "0x20b0"}, "productName": {"string": "NVIDIA A100-PCIE-40GB"},
        "type": {"string": "vfio"}, "vendorID": {"string": "0x10de"}},
        "capacity": {"addressableMemory": {"value": "40Gi"}}})
}

fn versions_of(device: &Value) -> DeviceVersions {
    let version = |name: &str| {
        device
            .pointer(&format!("/attributes/{name}/version"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    };
    DeviceVersions {
        compute_capability: version("cudaComputeCapability"),
        cuda_driver_version: version("cudaDriverVersion"),
        driver_version: version("driverVersion"),
        product_name: None,
    }
}

fn selected(needs: &GpuNeeds, driver: &str, device: &Value) -> Result<bool, String> {
    let selector = DeviceSelector::compile(&needs.selector())?;
    selector.matches(&Device::from_slice_device(driver, device))
}

#[test]
fn the_selector_is_written_once_and_for_all() {
    assert_eq!(
        compute_only(7, 5).selector(),
        "device.driver != \"gpu.nvidia.com\" || ((!(\"cudaComputeCapability\" in \
         device.attributes[\"gpu.nvidia.com\"]) || device.attributes[\"gpu.nvidia.com\"]\
         .cudaComputeCapability.compareTo(semver(\"7.5.0\")) >= 0))"
    );
    assert_eq!(
        cuda_13().selector(),
        "device.driver != \"gpu.nvidia.com\" || ((!(\"cudaComputeCapability\" in \
         device.attributes[\"gpu.nvidia.com\"]) || device.attributes[\"gpu.nvidia.com\"]\
         .cudaComputeCapability.compareTo(semver(\"7.5.0\")) >= 0) && (!(\"cudaDriverVersion\" \
         in device.attributes[\"gpu.nvidia.com\"] && \"driverVersion\" in \
         device.attributes[\"gpu.nvidia.com\"]) || (device.attributes[\"gpu.nvidia.com\"]\
         .cudaDriverVersion.compareTo(semver(\"13.1.0\")) >= 0) || \
         (device.attributes[\"gpu.nvidia.com\"].driverVersion.compareTo(semver(\"535.0.0\")) >= 0 \
         && device.attributes[\"gpu.nvidia.com\"].driverVersion.compareTo(semver(\"536.0.0\")) < 0) \
         || (device.attributes[\"gpu.nvidia.com\"].driverVersion.compareTo(semver(\"550.0.0\")) >= 0 \
         && device.attributes[\"gpu.nvidia.com\"].driverVersion.compareTo(semver(\"551.0.0\")) < 0)))"
    );
}

/// The selector on the devices of the driver's ResourceSlices, and on one of
/// another driver: always a boolean, never an error, and the same answer as
/// the judgement of an allocated device.
#[rstest]
#[case::p100("gpu.nvidia.com", nvidia_device("p100", "gpu", "6.0.0", "13.1.0", "590.44.1"), false)]
#[case::v100("gpu.nvidia.com", nvidia_device("v100", "gpu", "7.0.0", "13.1.0", "590.44.1"), false)]
#[case::t4("gpu.nvidia.com", nvidia_device("t4", "gpu", "7.5.0", "13.1.0", "590.44.1"), true)]
#[case::a100("gpu.nvidia.com", nvidia_device("a100", "gpu", "8.0.0", "13.1.0", "590.44.1"), true)]
#[case::a100_old_driver(
    "gpu.nvidia.com",
    nvidia_device("a100", "gpu", "8.0.0", "12.8.0", "570.195.3"),
    false
)]
#[case::a100_forward_compatible(
    "gpu.nvidia.com",
    nvidia_device("a100", "gpu", "8.0.0", "12.2.0", "535.247.1"),
    true
)]
#[case::mig_of_an_a100(
    "gpu.nvidia.com",
    nvidia_device("gpu-0-mig-1g.5gb-0", "mig", "8.0.0", "13.1.0", "590.44.1"),
    true
)]
#[case::mig_on_an_old_driver(
    "gpu.nvidia.com",
    nvidia_device("gpu-0-mig-1g.5gb-0", "mig", "8.0.0", "13.0.0", "580.126.20"),
    false
)]
#[case::vfio_publishes_no_versions("gpu.nvidia.com", vfio_device(), true)]
#[case::another_driver(
    "gpu.example.com",
    nvidia_device("x", "gpu", "3.0.0", "9.0.0", "384.81.0"),
    true
)]
fn the_selector_evaluates_to_a_boolean_on_every_device(
    #[case] driver: &str,
    #[case] device: Value,
    #[case] expected: bool,
) {
    let needs = cuda_13();
    assert_eq!(selected(&needs, driver, &device), Ok(expected));
    if driver == GPU_DRIVER {
        assert_eq!(
            needs.shortfall(&versions_of(&device)).is_none(),
            expected,
            "{:?}",
            needs.shortfall(&versions_of(&device))
        );
    }
}

#[rstest]
#[case(ComputeCapability::new(7, 0), "6.0.0", false)]
#[case(ComputeCapability::new(7, 0), "7.0.0", true)]
#[case(ComputeCapability::new(7, 0), "7.5.0", true)]
#[case(ComputeCapability::new(8, 9), "8.6.0", false)]
#[case(ComputeCapability::new(8, 9), "9.0.0", true)]
#[case(ComputeCapability::new(10, 0), "9.0.0", false)]
fn compute_floors_compare_as_versions(
    #[case] floor: ComputeCapability,
    #[case] card: &str,
    #[case] expected: bool,
) {
    let needs = GpuNeeds::new(Some(floor), None, Vec::new()).unwrap_or_else(|| panic!("needs"));
    let device = nvidia_device("card", "gpu", card, "13.1.0", "590.44.1");
    assert_eq!(selected(&needs, GPU_DRIVER, &device), Ok(expected));
    assert_eq!(needs.shortfall(&versions_of(&device)).is_none(), expected);
}

#[test]
fn a_device_with_only_some_attributes_is_judged_on_those() {
    let needs = cuda_13();
    let device = json!({"name": "partial", "attributes": {
        "cudaComputeCapability": {"version": "6.0.0"}, "driverVersion": {"version": "470.1.0"}}});
    assert_eq!(selected(&needs, GPU_DRIVER, &device), Ok(false));
    let device = json!({"name": "partial", "attributes": {
        "cudaComputeCapability": {"version": "8.0.0"}, "driverVersion": {"version": "470.1.0"}}});
    assert_eq!(selected(&needs, GPU_DRIVER, &device), Ok(true));
    assert_eq!(needs.shortfall(&versions_of(&device)), None);
}

#[test]
fn a_shortfall_names_what_the_device_lacks() {
    let needs = cuda_13();
    let p100_old = nvidia_device("p100", "gpu", "6.0.0", "12.8.0", "570.195.3");
    assert_eq!(
        needs.shortfall(&versions_of(&p100_old)).as_deref(),
        Some("compute capability 6.0 and driver 570.195 (CUDA 12.8)")
    );
}

#[test]
fn the_annotation_reads_back_into_the_same_needs() {
    let needs = cuda_13();
    let text = needs.annotation_value();
    assert_eq!(
        text,
        "{\"computeCapability\":\"7.5\",\"driverVersion\":\"cuda>=13.1 \
         driver>=535.0,driver<536.0 driver>=550.0,driver<551.0\",\
         \"images\":[\"nvcr.io/nvidia/pytorch:25.12-py3\"]}"
    );
    assert_eq!(GpuNeeds::from_annotation(&text), Ok(needs));
    let compute = compute_only(8, 0);
    assert_eq!(GpuNeeds::from_annotation(&compute.annotation_value()), Ok(compute));
}

#[rstest]
#[case("", "not gpu-policy's JSON")]
#[case("{\"computeCapability\": \"ampere\"}", "is not a compute capability")]
#[case("{\"driverVersion\": \"cuda>=8.0\"}", "asks nothing")]
#[case("{\"driverVersion\": \"gpu>=1\"}", "unknown constraint")]
#[case("{\"computeCapability\": \"7.5\", \"extra\": 1}", "unknown field")]
#[case("{}", "asks nothing")]
#[case("{\"computeCapability\": \"0.0\"}", "asks nothing")]
fn a_foreign_annotation_is_refused_on_one_line(#[case] text: &str, #[case] expected: &str) {
    let error = GpuNeeds::from_annotation(text).err().unwrap_or_default();
    assert!(error.contains(expected), "{error}");
    assert!(!error.contains('\n'), "{error}");
}

#[test]
fn an_oversized_annotation_is_not_parsed() {
    let long = format!(
        "{{\"computeCapability\":\"7.5\",\"images\":[\"{}\"]}}",
        "x".repeat(MAX_ANNOTATION_BYTES)
    );
    assert!(GpuNeeds::from_annotation(&long).err().is_some_and(|e| e.contains("longer than")));
}

#[test]
fn the_own_selector_guarantees_the_needs_and_weaker_ones_do_not() {
    let needs = cuda_13();
    assert!(needs.guaranteed_by(&[needs.selector()]));
    // A stricter card floor, with the same driver floor, guarantees it too.
    let stricter =
        GpuNeeds::new(Some(ComputeCapability::new(8, 0)), needs.driver.clone(), Vec::new())
            .unwrap_or_else(|| panic!("needs"));
    assert!(needs.guaranteed_by(&[stricter.selector()]));
    // The compute floor alone leaves the driver open.
    assert!(!needs.guaranteed_by(&[compute_only(7, 5).selector()]));
    assert!(!needs.guaranteed_by(&[]));
    assert!(!needs.guaranteed_by(&["device.driver == \"gpu.nvidia.com\"".to_owned()]));
    // A selector written by hand that says the same of the card.
    let compute = compute_only(7, 5);
    let by_hand = "device.attributes[\"gpu.nvidia.com\"].cudaComputeCapability\
                   .isGreaterThan(semver(\"7.4.99\"))";
    assert!(compute.guaranteed_by(&[by_hand.to_owned()]));
    let too_low = by_hand.replace("7.4.99", "6.9.99");
    assert!(!compute.guaranteed_by(&[too_low]));
    // A selector the evaluator cannot compile guarantees nothing.
    assert!(!compute.guaranteed_by(&["device.attributes[".to_owned()]));
}

#[test]
fn the_reference_shows_the_selectors_exactly() {
    let docs = include_str!("../../../../../../docs/policy.md");
    let driver = Requirement::from_str("cuda>=13.0 brand=tesla,driver>=535,driver<536")
        .ok()
        .and_then(|r| r.driver_floor());
    let cuda_13_0 = GpuNeeds::new(Some(ComputeCapability::new(7, 5)), driver, Vec::new())
        .unwrap_or_else(|| panic!("needs"));
    for needs in [compute_only(7, 5), cuda_13_0] {
        let selector = needs.selector();
        assert!(docs.contains(&selector), "docs/policy.md lacks {selector}");
    }
    assert!(docs.contains(
        "{\"computeCapability\":\"7.5\",\"driverVersion\":\"cuda>=13.0 driver>=535.0,driver<536.0\""
    ));
}

#[test]
fn selectors_on_other_attributes_are_judged_on_a_real_looking_card() {
    let needs = compute_only(7, 5);
    // These hold for every card the driver publishes: they guarantee nothing.
    for selector in [
        "device.attributes[\"gpu.nvidia.com\"].productName.startsWith(\"NVIDIA\")",
        "device.capacity[\"gpu.nvidia.com\"].memory.isGreaterThan(quantity(\"15Gi\"))",
        "device.attributes[\"gpu.nvidia.com\"].type == \"gpu\"",
    ] {
        assert!(!needs.guaranteed_by(&[selector.to_owned()]), "{selector}");
    }
}
