use rstest::rstest;
use serde_json::{Value, json};

use super::*;
use crate::settings::{MAX_PRODUCT_PATTERNS, parse_patterns};
use kubernetes_cel::{Device, DeviceSelector};

/// The set of the lists (each a comma list of patterns), the cluster's first.
fn set(lists: &[&str]) -> ProductSet {
    ProductSet::new(
        lists
            .iter()
            .map(|list| parse_patterns(list.split(',')).unwrap_or_else(|e| panic!("{list}: {e}"))),
    )
}

/// A `spec.devices[]` entry of a ResourceSlice, with `productName` when given.
fn device(product: Option<&str>) -> Value {
    let mut attributes = json!({
        "brand": {"string": "Nvidia"},
        "cudaComputeCapability": {"version": "9.0.0"},
        "type": {"string": "gpu"},
    });
    if let Some(product) = product {
        attributes["productName"] = json!({"string": product});
    }
    json!({"name": "gpu-0", "attributes": attributes, "capacity": {"memory": {"value": "80Gi"}}})
}

fn selected(products: &ProductSet, driver: &str, device: &Value) -> bool {
    let text = selector(products).unwrap_or_else(|| panic!("no selector")).expect("short");
    let compiled = DeviceSelector::compile(&text).unwrap_or_else(|e| panic!("{text}: {e}"));
    compiled
        .matches(&Device::from_slice_device(driver, device))
        .unwrap_or_else(|e| panic!("{text} failed: {e}"))
}

#[test]
fn any_product_needs_no_selector() {
    assert_eq!(selector(&ProductSet::default()), None);
}

#[test]
fn the_selector_is_written_once_and_for_all() {
    assert_eq!(
        selector(&set(&["NVIDIA-H100-80GB-HBM3,NVIDIA-B200*"])),
        Some(Ok("device.driver != \"gpu.nvidia.com\" || !(\"productName\" in \
             device.attributes[\"gpu.nvidia.com\"]) || \
             (device.attributes[\"gpu.nvidia.com\"].productName.matches(\
             '^NVIDIA[- ]H100[- ]80GB[- ]HBM3$|^NVIDIA[- ]B200.*$'))"
            .to_owned()))
    );
}

#[rstest]
// The driver's form and GFD's form of an allowed product.
#[case::driver_form_allowed(Some("NVIDIA H100 80GB HBM3"), true)]
#[case::gfd_form_allowed(Some("NVIDIA-H100-80GB-HBM3"), true)]
#[case::glob_allowed(Some("NVIDIA B200 192GB"), true)]
#[case::other_product(Some("NVIDIA A100-SXM4-40GB"), false)]
#[case::a_prefix_only(Some("NVIDIA H100 80GB HBM3 NVL"), false)]
#[case::missing_attribute(None, true)]
fn the_selector_and_the_judgement_agree(#[case] product: Option<&str>, #[case] allowed: bool) {
    let products = set(&["NVIDIA-H100-80GB-HBM3,NVIDIA-B200*"]);
    assert_eq!(selected(&products, GPU_DRIVER, &device(product)), allowed, "{product:?}");
    if let Some(product) = product {
        assert_eq!(allows_device(&products, product), allowed, "{product}");
    }
}

/// The driver publishes `productName` as a string. The selector cannot test the type (the API
/// server refuses a claim whose selector compares `type()`), so any other value is an error.
#[test]
fn a_product_name_that_is_no_string_fails_the_selector() {
    let text = selector(&set(&["NVIDIA-H100*"])).expect("a set").expect("short");
    let mut published = device(Some("NVIDIA H100"));
    published["attributes"]["productName"] = json!({"int": 100});
    let compiled = DeviceSelector::compile(&text).expect("compiles");
    assert!(compiled.matches(&Device::from_slice_device(GPU_DRIVER, &published)).is_err());
}

#[test]
fn devices_of_other_drivers_pass() {
    let products = set(&["NVIDIA-H100*"]);
    assert!(selected(&products, "gpu.example.com", &device(Some("Other GPU"))));
    assert!(selected(&products, "gpu.example.com", &device(None)));
}

#[test]
fn every_list_is_required() {
    // The cluster allows H100s and A100s; the namespace narrows to 80GB cards.
    let products = set(&["NVIDIA-H100*,NVIDIA-A100*", "*-80GB*"]);
    for (product, allowed) in [
        ("NVIDIA H100 80GB HBM3", true),
        ("NVIDIA A100-SXM4-80GB", true),
        ("NVIDIA A100-SXM4-40GB", false),
        ("NVIDIA L40S-80GB", false),
    ] {
        assert_eq!(selected(&products, GPU_DRIVER, &device(Some(product))), allowed, "{product}");
        assert_eq!(allows_device(&products, product), allowed, "{product}");
    }
}

#[test]
fn a_dot_is_literal_in_both() {
    let products = set(&["NVIDIA-GH200-96.0GB"]);
    assert!(selected(&products, GPU_DRIVER, &device(Some("NVIDIA GH200 96.0GB"))));
    assert!(!selected(&products, GPU_DRIVER, &device(Some("NVIDIA GH200 96x0GB"))));
    assert!(!allows_device(&products, "NVIDIA GH200 96x0GB"));
}

#[test]
fn the_most_patterns_of_real_products_fit_the_limit() {
    let patterns: Vec<String> =
        (0..MAX_PRODUCT_PATTERNS).map(|n| format!("NVIDIA-H{n}-80GB-HBM3")).collect();
    let list = patterns.join(",");
    let products = set(&[&list, &list]);
    let text = selector(&products).unwrap_or_else(|| panic!("none")).expect("within the limit");
    assert!(text.len() <= MAX_SELECTOR_BYTES, "{}", text.len());
    assert!(selected(&products, GPU_DRIVER, &device(Some("NVIDIA H63 80GB HBM3"))));
    assert!(!selected(&products, GPU_DRIVER, &device(Some("NVIDIA H64 80GB HBM3"))));
}

#[test]
fn a_selector_past_the_api_servers_limit_is_not_written() {
    let long = |n: usize| format!("NVIDIA-{n:02}-{}", "A-".repeat(26));
    let list: Vec<String> = (0..MAX_PRODUCT_PATTERNS).map(long).collect();
    let list = list.join(",");
    match selector(&set(&[&list, &list])) {
        Some(Err(TooLong(length))) => assert!(length > MAX_SELECTOR_BYTES, "{length}"),
        other => panic!("{other:?}"),
    }
}

#[test]
fn a_message_names_ten_patterns_of_each_list() {
    assert_eq!(named(&ProductSet::default()), "any product");
    let products = set(&["NVIDIA-H100*,NVIDIA-A100*", "*-80GB*"]);
    assert_eq!(named(&products), products.to_string());
    let many: Vec<String> = (0..12).map(|n| format!("NVIDIA-H{n}")).collect();
    assert_eq!(
        named(&set(&[&many.join(","), "*-80GB*"])),
        "*-80GB* within NVIDIA-H0,NVIDIA-H1,NVIDIA-H2,NVIDIA-H3,NVIDIA-H4,NVIDIA-H5,NVIDIA-H6,\
         NVIDIA-H7,NVIDIA-H8,NVIDIA-H9 and 2 more"
    );
}
