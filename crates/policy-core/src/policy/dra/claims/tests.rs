use super::*;
use crate::document::Document;
use crate::settings::Settings;
use rstest::rstest;
use serde_json::{Value, json};

fn summary(object: &Value, kind: ClaimKind) -> Result<ClaimSummary, String> {
    let settings = Settings::default();
    let object = Document::from_value(object);
    parse_object(object.root(), kind, &|class| settings.is_gpu_device_class(class))
        .map_err(|e| e.to_string())
}

fn claim(requests: Value) -> Value {
    json!({"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaim",
               "spec": {"devices": {"requests": requests}}})
}

/// (name, gpu, admin) of every request.
fn requests(object: &Value) -> Vec<(String, Option<DraCount>, bool)> {
    match summary(object, ClaimKind::Claim) {
        Ok(s) => s.requests.into_iter().map(|r| (r.name, r.gpu, r.admin_access)).collect(),
        Err(err) => panic!("{err}"),
    }
}

use DraCount::{All, Exactly};

#[rstest]
// v1 / v1beta2: `exactly`, count defaults to 1
#[case(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}}]), Some(Exactly(1)), false)]
#[case(json!([{"name": "gpu", "exactly": {"deviceClassName": "mig.nvidia.com", "allocationMode": "ExactCount", "count": 3}}]), Some(Exactly(3)), false)]
#[case(json!([{"name": "gpu", "exactly": {"deviceClassName": "vfio.gpu.nvidia.com", "allocationMode": "All"}}]), Some(All), false)]
#[case(json!([{"name": "gpu", "exactly": {"deviceClassName": "gpu.nvidia.com", "adminAccess": true}}]), Some(Exactly(1)), true)]
// not GPU classes
#[case(json!([{"name": "cd", "exactly": {"deviceClassName": "compute-domain-daemon.nvidia.com"}}]), None, false)]
#[case(json!([{"name": "nic", "exactly": {"deviceClassName": "rdma.example.com", "count": 4, "adminAccess": true}}]), None, false)]
// firstAvailable: the largest GPU alternative
#[case(json!([{"name": "gpu", "firstAvailable": [
        {"name": "big", "deviceClassName": "gpu.nvidia.com", "count": 2},
        {"name": "small", "deviceClassName": "mig.nvidia.com", "count": 4},
        {"name": "cpu", "deviceClassName": "cpu.example.com", "count": 64}]}]), Some(Exactly(4)), false)]
#[case(json!([{"name": "gpu", "firstAvailable": [
        {"name": "one", "deviceClassName": "gpu.nvidia.com"},
        {"name": "all", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All"}]}]), Some(All), false)]
#[case(json!([{"name": "x", "firstAvailable": [{"name": "a", "deviceClassName": "other.example.com"}]}]), None, false)]
// v1beta1: flat
#[case(json!([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "count": 2}]), Some(Exactly(2)), false)]
#[case(json!([{"name": "gpu", "deviceClassName": "gpu.nvidia.com", "allocationMode": "All", "adminAccess": true}]), Some(All), true)]
#[case(json!([{"name": "gpu", "firstAvailable": [{"name": "a", "deviceClassName": "gpu.nvidia.com", "count": 8}]}]), Some(Exactly(8)), false)]
// no class at all (the API server would refuse it): not a GPU
#[case(json!([{"name": "x"}]), None, false)]
fn requests_are_read_in_every_shape(
    #[case] list: Value,
    #[case] gpu: Option<DraCount>,
    #[case] admin: bool,
) {
    let found = requests(&claim(list));
    assert_eq!(found.len(), 1, "{found:?}");
    assert_eq!((found[0].1, found[0].2), (gpu, admin));
}

#[test]
fn a_template_reads_spec_spec_and_totals_its_requests() {
    // Fixture 23's template: two GPU requests of one card each.
    let template = json!({"kind": "ResourceClaimTemplate", "spec": {"spec": {"devices": {
        "requests": [
            {"name": "ts-gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
            {"name": "mps-gpu", "exactly": {"deviceClassName": "gpu.nvidia.com"}},
        ],
        "config": [{"requests": ["ts-gpu"], "opaque": {"driver": "gpu.nvidia.com",
                    "parameters": {"kind": "GpuConfig"}}}],
    }}}});
    let summary = summary(&template, ClaimKind::Template).unwrap_or_default();
    assert!(summary.is_gpu());
    assert_eq!(summary.gpu_total(), Some(Exactly(2)));
    assert_eq!(summary.request("mps-gpu").and_then(|r| r.gpu), Some(Exactly(1)));
    assert_eq!(summary.request("other"), None);
}

#[test]
fn an_empty_claim_is_no_gpu_claim() {
    let empty = json!({"spec": {}});
    let summary = summary(&empty, ClaimKind::Claim).unwrap_or_default();
    assert!(!summary.is_gpu());
    assert_eq!(summary.gpu_total(), None);
}

#[test]
fn totals_saturate_and_all_absorbs() {
    assert_eq!(Exactly(u64::MAX).plus(Exactly(1)), Exactly(u64::MAX));
    assert_eq!(Exactly(1).plus(All), All);
    assert!(All > Exactly(u64::MAX));
}

#[rstest]
#[case(json!({"kind": "ResourceClaim"}), ClaimKind::Claim, "spec: is missing")]
#[case(json!({"spec": {}}), ClaimKind::Template, "spec.spec: is missing")]
#[case(json!({"spec": []}), ClaimKind::Claim, "spec: must be an object, not a list")]
#[case(json!({"spec": {"devices": "gpu"}}), ClaimKind::Claim, "spec.devices: must be an object, not a string")]
#[case(json!({"spec": {"devices": {"requests": {}}}}), ClaimKind::Claim, "spec.devices.requests: must be a list, not an object")]
#[case(json!({"spec": {"spec": {"devices": {"requests": [7]}}}}), ClaimKind::Template, "spec.spec.devices.requests[0]: must be an object, not a number")]
#[case(json!({"spec": {"devices": {"requests": [{"name": 1}]}}}), ClaimKind::Claim, "spec.devices.requests[0].name: must be a string, not a number")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": "gpu"}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly: must be an object, not a string")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"deviceClassName": 5}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly.deviceClassName: must be a string, not a number")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"count": "2"}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly.count: must be a whole number above 0, not a string")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"count": -1}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly.count: must be a whole number above 0, not -1")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"count": 1.5}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly.count: must be a whole number above 0, not 1.5")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"count": 0}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly.count: must be a whole number above 0, not 0")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "count": 1e300}]}}}), ClaimKind::Claim, "spec.devices.requests[0].count: must be a whole number above 0, not 1e+300")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"allocationMode": "Some"}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly.allocationMode: must be ExactCount or All, not \"Some\"")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "exactly": {"adminAccess": "yes"}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].exactly.adminAccess: must be a boolean, not a string")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "firstAvailable": {}}]}}}), ClaimKind::Claim, "spec.devices.requests[0].firstAvailable: must be a list, not an object")]
#[case(json!({"spec": {"devices": {"requests": [{"name": "g", "firstAvailable": [{"name": "a", "count": true}]}]}}}), ClaimKind::Claim, "spec.devices.requests[0].firstAvailable[0].count: must be a whole number above 0, not a boolean")]
fn wrong_shapes_name_the_field(
    #[case] object: Value,
    #[case] kind: ClaimKind,
    #[case] message: &str,
) {
    assert_eq!(summary(&object, kind).err().as_deref(), Some(message));
}

#[test]
fn ten_thousand_requests_are_read() {
    let list: Vec<Value> = (0..10_000)
            .map(|i| json!({"name": format!("r{i}"), "exactly": {"deviceClassName": "gpu.nvidia.com", "count": u64::MAX}}))
            .collect();
    let summary = summary(&claim(Value::Array(list)), ClaimKind::Claim).unwrap_or_default();
    assert_eq!(summary.requests.len(), 10_000);
    assert_eq!(summary.gpu_total(), Some(Exactly(u64::MAX)));
}

/// Counts at the ends of i64 and u64, from JSON text as the webhook and
/// `check` read it: integers as written up to u64::MAX; past it
/// serde_json has a float, refused like every float.
#[rstest]
#[case("9223372036854775807", Ok(Exactly(9_223_372_036_854_775_807)))]
#[case("9223372036854775808", Ok(Exactly(9_223_372_036_854_775_808)))]
#[case("18446744073709551615", Ok(Exactly(u64::MAX)))]
#[case("18446744073709551616", Err("1.8446744073709552e+19"))]
#[case("99999999999999999999999", Err("1e+23"))]
#[case("-9223372036854775808", Err("-9223372036854775808"))]
#[case("2.0", Err("2.0"))]
#[case("1e300", Err("1e+300"))]
fn counts_at_the_ends_of_64_bits(#[case] count: &str, #[case] read: Result<DraCount, &str>) {
    let text = format!(
        r#"{{"spec": {{"devices": {{"requests": [{{"name": "g",
                "exactly": {{"deviceClassName": "gpu.nvidia.com", "count": {count}}}}}]}}}}}}"#
    );
    let object: Value = serde_json::from_str(&text).unwrap_or_default();
    let found = summary(&object, ClaimKind::Claim).map(|s| s.gpu_total());
    let wanted = match read {
        Ok(count) => Ok(Some(count)),
        Err(shown) => Err(format!(
            "spec.devices.requests[0].exactly.count: must be a whole number above 0, not {shown}"
        )),
    };
    assert_eq!(found, wanted);
}

/// Consumable capacity does not change how many devices a request
/// takes, and no capacity, however large or malformed, is an error.
#[rstest]
#[case(json!({"requests": {"memory": "10Gi"}}))]
#[case(json!({"requests": {"memory": "9999999999999999999999Ei", "cores": "-1", "bw": "1e400"}}))]
#[case(json!({"requests": {"memory": 1e300, "cores": -1}}))]
#[case(json!({"requests": "10Gi"}))]
#[case(json!([{"requests": {"memory": "1Gi"}}]))]
#[case(json!("lots"))]
fn capacity_requests_do_not_change_the_count(#[case] capacity: Value) {
    let list = json!([
        {"name": "exact", "exactly": {"deviceClassName": "gpu.nvidia.com", "count": 2,
                                      "capacity": capacity}},
        {"name": "first", "firstAvailable": [
            {"name": "a", "deviceClassName": "mig.nvidia.com", "count": 3, "capacity": capacity},
            {"name": "b", "deviceClassName": "gpu.nvidia.com", "capacity": capacity}]},
        {"name": "every", "exactly": {"deviceClassName": "gpu.nvidia.com",
                                      "allocationMode": "All", "capacity": capacity}},
        {"name": "flat", "deviceClassName": "gpu.nvidia.com", "count": 4, "capacity": capacity},
    ]);
    let gpus: Vec<Option<DraCount>> =
        requests(&claim(list)).into_iter().map(|(_, gpu, _)| gpu).collect();
    assert_eq!(gpus, vec![Some(Exactly(2)), Some(Exactly(3)), Some(All), Some(Exactly(4))]);
}

#[test]
fn a_long_allocation_mode_is_cut_in_the_message() {
    let object = claim(json!([{"name": "g", "exactly": {"allocationMode": "é".repeat(1 << 20)}}]));
    assert_eq!(
        summary(&object, ClaimKind::Claim).err(),
        Some(format!(
            "spec.devices.requests[0].exactly.allocationMode: must be ExactCount or All, not \"{}\"…",
            "é".repeat(32)
        ))
    );
}
