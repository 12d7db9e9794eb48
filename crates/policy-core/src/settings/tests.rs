use super::*;
use rstest::rstest;

#[test]
fn defaults_are_valid() {
    let settings = Settings::from_config(Config::default()).map(|s| s.config().clone());
    assert_eq!(settings.ok(), Some(Config::default()));
}

/// The example lists every field at its default, so it must be the
/// defaults.
#[test]
fn the_example_config_is_the_defaults() {
    let example = include_str!("../../../../examples/config.yaml");
    let settings = Settings::from_yaml(example, "examples/config.yaml");
    assert_eq!(
        settings.map(|s| s.config().clone()).map_err(|e| e.to_string()),
        Ok(Config::default())
    );
}

#[test]
fn empty_file_gives_defaults() {
    let settings = Settings::from_yaml("{}", "inline");
    assert_eq!(settings.ok().map(|s| s.config().clone()), Some(Config::default()));
}

#[test]
fn unknown_field_is_an_error() {
    let err = Settings::from_yaml("maxPerPods: 3", "c.yaml").err();
    let text = err.map(|e| e.to_string()).unwrap_or_default();
    assert!(text.contains("c.yaml") && text.contains("maxPerPods"), "{text}");
}

/// Why `yaml` is refused as a config file (empty when it is not).
pub(super) fn refusal(yaml: &str) -> String {
    Settings::from_yaml(yaml, "c.yaml").err().map(|e| e.to_string()).unwrap_or_default()
}

/// Found by the `config` fuzz target: the messages of the YAML parser
/// and of the regex compiler carry a multi-line snippet with a caret.
#[rstest]
#[case(".", "config file c.yaml: ")]
#[case("2\n8.0\n", "config file c.yaml: ")]
#[case("maxPerPod: [", "config file c.yaml: ")]
#[case("maxPerPod: -1", "config file c.yaml: ")]
#[case("gpuResources:\n  - a\n - b", "config file c.yaml: ")]
#[case(
    "imageComputeCapabilities: [{pattern: 'cud{}a', minimum: '7.0'}]",
    "config: imageComputeCapabilities: pattern "
)]
fn config_errors_fit_on_one_line(#[case] yaml: &str, #[case] prefix: &str) {
    let text = refusal(yaml);
    assert!(text.starts_with(prefix), "{text}");
    assert!(!text.contains('\n'), "{text}");
}

#[rstest]
#[case("visibleDevicesPin: all", "visibleDevicesPin")]
#[case("runtimeClassName: kata", "gpuRuntimeClasses")]
#[case("imageComputeCapabilities: [{pattern: '(', minimum: '7.0'}]", "pattern")]
#[case("gpuResources: ['']", "gpuResources")]
#[case("gpuDeviceClasses: [' ']", "gpuDeviceClasses")]
#[case("gpuSharing: {kaiScheduler: {schedulerName: ''}}", "gpuSharing.kaiScheduler.schedulerName")]
#[case("privilegedGpu: refuse", "privilegedGpu")]
#[case("computeAffinity: {whenNodesUnlabelled: never}", "never")]
#[case("computeAffinity: {whenNodesUnlabeled: skip}", "whenNodesUnlabeled")]
fn invalid_configs_are_refused(#[case] yaml: &str, #[case] names: &str) {
    let text = refusal(yaml);
    assert!(text.contains(names), "{text}");
}

#[rstest]
#[case("{}", WhenNodesUnlabelled::Skip)]
#[case("computeAffinity: {}", WhenNodesUnlabelled::Skip)]
#[case("computeAffinity: {whenNodesUnlabelled: skip}", WhenNodesUnlabelled::Skip)]
#[case("computeAffinity: {whenNodesUnlabelled: require}", WhenNodesUnlabelled::Require)]
fn when_nodes_unlabelled_is_read(#[case] yaml: &str, #[case] expected: WhenNodesUnlabelled) {
    let settings = Settings::from_yaml(yaml, "c.yaml");
    let read = settings.map(|s| s.config().compute_affinity.when_nodes_unlabelled);
    assert_eq!(read.map_err(|e| e.to_string()), Ok(expected));
}

/// `runtimeClassName: ""` injects nothing and needs no entry in
/// `gpuRuntimeClasses`, which stay reserved.
#[test]
fn an_empty_runtime_class_is_accepted() {
    let settings = Settings::from_yaml("runtimeClassName: ''", "c.yaml");
    let config = settings.map(|s| s.config().clone());
    assert_eq!(
        config
            .as_ref()
            .map(|c| (c.runtime_class_name.as_str(), c.gpu_runtime_classes.clone()))
            .ok(),
        Some(("", vec!["nvidia".to_owned()]))
    );
}

/// HAMi's share values are never cards, even when a pattern names them.
#[test]
fn hami_share_resources_are_never_cards() {
    let yaml = "gpuResources: ['nvidia.com/gpu*']";
    let on = Settings::from_yaml(yaml, "c.yaml").map_err(|e| e.to_string());
    let off =
        Settings::from_yaml(&format!("{yaml}\ngpuSharing: {{hami: {{enabled: false}}}}"), "c.yaml")
            .map_err(|e| e.to_string());
    for name in HAMI_RESOURCES {
        assert_eq!(
            on.as_ref().map(|s| (s.is_gpu_resource(name), s.is_share_resource(name))),
            Ok((false, true))
        );
        assert_eq!(
            off.as_ref().map(|s| (s.is_gpu_resource(name), s.is_share_resource(name))),
            Ok((true, false))
        );
    }
    assert_eq!(on.map(|s| s.is_gpu_resource("nvidia.com/gpu")), Ok(true));
}

#[test]
fn unquoted_yaml_capability_is_read() {
    let settings = Settings::from_yaml("minComputeCapability: 7.5", "c.yaml");
    let min = settings.ok().and_then(|s| s.config().min_compute_capability);
    assert_eq!(min, Some(ComputeCapability::new(7, 5)));
}

#[rstest]
#[case("8.0", Some((8, 0)))]
#[case("7.5", Some((7, 5)))]
#[case("9", Some((9, 0)))]
#[case("12.1", Some((12, 1)))]
#[case("", None)]
#[case("8.", None)]
#[case(".5", None)]
#[case("8.0.1", None)]
#[case("-1.0", None)]
#[case("eight", None)]
fn compute_capability_parses(#[case] text: &str, #[case] expected: Option<(u32, u32)>) {
    let parsed = text.parse::<ComputeCapability>().ok();
    assert_eq!(parsed, expected.map(|(a, b)| ComputeCapability::new(a, b)));
}

#[rstest]
#[case("nvidia.com/gpu", true)]
#[case("nvidia.com/gpu.shared", true)]
#[case("nvidia.com/mig-1g.5gb", true)]
#[case("nvidia.com/mig-", true)]
#[case("nvidia.com/gpus", false)]
#[case("amd.com/gpu", false)]
#[case("cpu", false)]
fn default_gpu_resources(#[case] name: &str, #[case] expected: bool) {
    assert_eq!(Settings::default().is_gpu_resource(name), expected);
}

#[rstest]
#[case("a*b*c", "abc", true)]
#[case("a*b*c", "axxbyyc", true)]
#[case("a*b*c", "acb", false)]
#[case("*", "", true)]
#[case("ab*ba", "aba", false)]
#[case("exact", "exact", true)]
#[case("exact", "exactly", false)]
#[case("a.c", "abc", false)]
#[case("a*", "a\nb", true)]
fn resource_patterns(#[case] pattern: &str, #[case] name: &str, #[case] expected: bool) {
    let patterns = super::resource_patterns(&[pattern.to_owned()]).expect("compiles");
    assert_eq!(patterns.is_match(name), expected);
}

/// Each pattern answers for itself, in the order of `gpuResources`: the
/// generated policies ask which HAMi share names one pattern matches.
#[test]
fn each_resource_pattern_answers_by_its_place() {
    let settings = Settings::from_yaml(
        "gpuResources: [\"example.com/gpu\", \"nvidia.com/gpu*\"]\n",
        "config.yaml",
    )
    .expect("valid");
    assert!(!settings.gpu_resource_pattern_matches(0, "nvidia.com/gpumem"));
    assert!(settings.gpu_resource_pattern_matches(1, "nvidia.com/gpumem"));
    assert!(settings.gpu_resource_pattern_matches(0, "example.com/gpu"));
    assert!(!settings.gpu_resource_pattern_matches(2, "example.com/gpu"));
}

fn annotations(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
}

#[rstest]
#[case(&[], 8, None, 0)]
#[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "4")], 4, None, 0)]
#[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "0")], 0, None, 0)]
#[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "16")], 8, None, 1)]
#[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "four")], 8, None, 1)]
#[case(&[(MAX_GPUS_PER_POD_ANNOTATION, "-1")], 8, None, 1)]
#[case(&[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "8.0")], 8, Some((8, 0)), 0)]
#[case(&[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "ampere")], 8, None, 1)]
fn namespace_annotations_only_tighten(
    #[case] pairs: &[(&str, &str)],
    #[case] max_per_pod: u64,
    #[case] min: Option<(u32, u32)>,
    #[case] notices: usize,
) {
    let ns = Settings::default().for_namespace(&annotations(pairs));
    assert_eq!(ns.max_per_pod, max_per_pod);
    assert_eq!(ns.min_compute_capability, min.map(|(a, b)| ComputeCapability::new(a, b)));
    assert_eq!(ns.ignored.len(), notices, "{:?}", ns.ignored);
    assert!(ns.ignored.iter().all(|n| n.to_string().starts_with("namespace annotation ")));
}

#[test]
fn namespace_capability_below_cluster_minimum_is_ignored() {
    let settings = Settings::from_yaml("minComputeCapability: '7.0'", "c").ok();
    let ns = settings
        .map(|s| s.for_namespace(&annotations(&[(MIN_COMPUTE_CAPABILITY_ANNOTATION, "6.1")])));
    let ns = ns.unwrap_or_else(|| Settings::default().for_namespace(&BTreeMap::new()));
    assert_eq!(ns.min_compute_capability, Some(ComputeCapability::new(7, 0)));
    assert_eq!(ns.ignored.len(), 1);
}
