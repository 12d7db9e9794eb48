use rstest::rstest;
use serde_json::json;

use crate::document::Document;

use super::*;

fn patterns(list: &[&str]) -> Vec<ProductPattern> {
    match parse_patterns(list.iter().copied()) {
        Ok(patterns) => patterns,
        Err(why) => panic!("{list:?}: {why}"),
    }
}

#[rstest]
#[case("NVIDIA-H100-80GB-HBM3", "NVIDIA-H100-80GB-HBM3", true)]
#[case("NVIDIA-H100*", "NVIDIA-H100-80GB-HBM3", true)]
#[case("NVIDIA-H100*", "NVIDIA-H200", false)]
#[case("*A10*", "NVIDIA-A10", true)]
#[case("*A10*", "NVIDIA-A100-SXM4-40GB", true)]
#[case("*-A10", "NVIDIA-A100", false)]
#[case("NVIDIA.A10", "NVIDIA-A10", false)]
#[case("*", "anything", true)]
fn a_pattern_matches_the_label_value(
    #[case] pattern: &str,
    #[case] product: &str,
    #[case] expected: bool,
) {
    assert_eq!(patterns(&[pattern])[0].matches(product), expected);
}

#[rstest]
#[case("")]
#[case("  ")]
#[case("NVIDIA H100")]
#[case("a,b")]
#[case("NVIDIA-H100[0-9]")]
#[case("xxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxxx")]
fn a_pattern_that_is_no_label_value_is_refused(#[case] text: &str) {
    assert!(ProductPattern::parse(text).is_err(), "{text:?}");
}

#[test]
fn the_device_regex_matches_both_the_label_form_and_the_driver_name() {
    let pattern = &patterns(&["NVIDIA-H100*"])[0];
    let regex = Regex::new(&pattern.device_regex()).unwrap();
    assert!(regex.is_match("NVIDIA H100 80GB HBM3"));
    assert!(regex.is_match("NVIDIA-H100-80GB-HBM3"));
    assert!(!regex.is_match("NVIDIA A100-SXM4-40GB"));
    // A dot is literal.
    let dotted = Regex::new(&patterns(&["A.B"])[0].device_regex()).unwrap();
    assert!(!dotted.is_match("AxB"));
}

#[test]
fn a_namespace_list_only_narrows_the_clusters() {
    let set = ProductSet::new([
        patterns(&["NVIDIA-H100*", "NVIDIA-A10"]),
        patterns(&["*H100*", "NVIDIA-L4"]),
    ]);
    assert!(set.allows("NVIDIA-H100-80GB-HBM3"));
    // The namespace allows L4; the cluster does not.
    assert!(!set.allows("NVIDIA-L4"));
    assert!(!set.allows("NVIDIA-A10"));
    assert_eq!(set.literals(), Vec::<&str>::new());
    let known =
        ["NVIDIA-A10".to_owned(), "NVIDIA-H100-80GB-HBM3".to_owned(), "NVIDIA-L4".to_owned()];
    assert_eq!(set.expand(&known), ["NVIDIA-H100-80GB-HBM3"]);
    assert_eq!(set.to_string(), "*H100*,NVIDIA-L4 within NVIDIA-H100*,NVIDIA-A10");
}

#[test]
fn no_list_allows_any_product_and_empty_lists_are_no_list() {
    let set = ProductSet::new([Vec::new(), Vec::new()]);
    assert!(set.is_any());
    assert!(set.allows("NVIDIA-B200"));
    assert_eq!(set.to_string(), "any product");
}

#[test]
fn literals_are_listed_without_known_products() {
    let set = ProductSet::new([patterns(&["NVIDIA-A10", "NVIDIA-L4", "NVIDIA-H*"])]);
    assert_eq!(set.literals(), ["NVIDIA-A10", "NVIDIA-L4"]);
    assert!(set.has_globs());
    assert_eq!(set.expand(&["NVIDIA-H200".to_owned()]), ["NVIDIA-A10", "NVIDIA-H200", "NVIDIA-L4"]);
}

#[test]
fn lists_past_the_bound_are_refused() {
    let many: Vec<String> = (0..=MAX_PRODUCT_PATTERNS).map(|i| format!("P{i}")).collect();
    assert!(parse_patterns(many.iter().map(String::as_str)).is_err());
    // Repeats count once.
    assert_eq!(parse_patterns(["A", "A", " A "]).map(|p| p.len()), Ok(1));
}

fn gpu_toleration(yaml: &str) -> Toleration {
    serde_saphyr::from_str(yaml).unwrap()
}

#[rstest]
#[case(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}), true)]
#[case(json!({"key": "nvidia.com/gpu", "operator": "Exists"}), true)]
#[case(json!({"key": "nvidia.com/gpu", "value": "present", "effect": "NoSchedule"}), true)]
#[case(json!({"key": "nvidia.com/gpu", "value": "other", "effect": "NoSchedule"}), false)]
#[case(json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoExecute"}), false)]
#[case(json!({"operator": "Exists"}), true)]
#[case(json!({"operator": "Equal"}), false)]
#[case(json!({"key": "dedicated", "operator": "Exists"}), false)]
fn a_pod_toleration_tolerates_the_gpu_taint(
    #[case] pod: serde_json::Value,
    #[case] expected: bool,
) {
    let gpu = gpu_toleration("{key: nvidia.com/gpu, value: present, effect: NoSchedule}");
    assert_eq!(tolerates(Document::from_value(&pod).root(), &gpu), expected, "{pod}");
}

#[rstest]
#[case("{operator: Exists}")]
#[case("{key: 'bad key', operator: Exists}")]
#[case("{key: nvidia.com/gpu, operator: Exists, value: x}")]
#[case("{key: nvidia.com/gpu, effect: NoSchedule, tolerationSeconds: 5}")]
#[case("{key: nvidia.com/gpu, value: '-x'}")]
fn a_toleration_kubernetes_refuses_is_refused(#[case] yaml: &str) {
    assert!(gpu_toleration(yaml).problem().is_some(), "{yaml}");
}

#[test]
fn a_toleration_is_written_as_the_pod_spec_writes_it() {
    let gpu = gpu_toleration("{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}");
    assert_eq!(gpu.problem(), None);
    assert_eq!(
        gpu.to_value(),
        json!({"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"})
    );
    assert_eq!(gpu.taint_text(), "nvidia.com/gpu:NoSchedule");
    assert!(serde_saphyr::from_str::<Toleration>("{key: a, operator: Maybe}").is_err());
}

#[test]
fn a_value_longer_than_any_product_is_no_allowed_product() {
    let set = ProductSet::new([patterns(&["*"])]);
    assert!(set.allows(&"x".repeat(64)));
    assert!(!set.allows(&"x".repeat(65)));
}
