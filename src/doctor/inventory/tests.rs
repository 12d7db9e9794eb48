use super::*;

#[test]
fn daemon_sets_are_known_by_name_or_label() {
    let labels = |pairs: &[(&str, &str)]| -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    };
    let table = [
        ("nvidia-device-plugin-daemonset", labels(&[]), Some(Component::DevicePlugin)),
        ("nvdp-nvidia-device-plugin", labels(&[]), Some(Component::DevicePlugin)),
        (
            "plugin",
            labels(&[("app.kubernetes.io/name", "nvidia-device-plugin")]),
            Some(Component::DevicePlugin),
        ),
        (
            "nvdp-nvidia-device-plugin-mps-control-daemon",
            labels(&[("app.kubernetes.io/name", "nvidia-device-plugin")]),
            None,
        ),
        (
            "nvdp-nvidia-device-plugin-gpu-feature-discovery",
            labels(&[("app.kubernetes.io/name", "nvidia-device-plugin")]),
            Some(Component::FeatureDiscovery),
        ),
        ("gpu-feature-discovery", labels(&[]), Some(Component::FeatureDiscovery)),
        ("gfd", labels(&[("app", "gpu-feature-discovery")]), Some(Component::FeatureDiscovery)),
        ("dcgm-exporter", labels(&[("app", "nvidia-dcgm-exporter")]), None),
    ];
    for (name, labels, expected) in table {
        assert_eq!(Component::of_daemon_set(name, &labels), expected, "{name}");
    }
}
