use super::*;
use crate::settings::Settings;
use rstest::rstest;

#[rstest]
#[case("{namespace: ns, kind: ReplicaSet, namePrefix: mps-control-daemon-}", None)]
#[case("{namespace: ns, kind: ReplicaSet, namePrefix: abcd-}", None)]
#[case("{namespace: ns, kind: DaemonSet, name: plugin}", None)]
#[case(
    "{namespace: ns, kind: ReplicaSet, namePrefix: \"\"}",
    Some("namePrefix \"\" must be at least 5")
)]
#[case(
    "{namespace: ns, kind: ReplicaSet, namePrefix: abc-}",
    Some("must be at least 5 characters")
)]
#[case("{namespace: ns, kind: ReplicaSet, namePrefix: mps-control-daemon}", Some("end with '-'"))]
#[case("{namespace: ns, kind: ReplicaSet, namePrefix: \"mps-*-\"}", Some("(a-z, 0-9, '-', '.')"))]
#[case("{namespace: ns, kind: ReplicaSet, namePrefix: MPS-control-}", Some("(a-z, 0-9, '-', '.')"))]
#[case(
    "{namespace: ns, kind: ReplicaSet, name: a, namePrefix: mps-control-}",
    Some("has both name and namePrefix")
)]
#[case("{namespace: ns, kind: ReplicaSet}", Some("needs a name or a namePrefix"))]
#[case(
    "{namespace: \"\", kind: ReplicaSet, namePrefix: mps-control-}",
    Some("namespace and kind must not be empty")
)]
#[case("{namespace: ns, kind: \"\", name: a}", Some("namespace and kind must not be empty"))]
fn allowlist_entries_are_validated(#[case] entry: &str, #[case] problem: Option<&str>) {
    let result = Settings::from_yaml(&format!("allowlist: [{entry}]"), "c.yaml");
    match (result, problem) {
        (Ok(_), None) => {}
        (Err(err), Some(problem)) => {
            let text = err.to_string();
            assert!(text.starts_with("config: allowlist entry "), "{text}");
            assert!(text.contains(problem), "{text}");
        }
        (result, _) => panic!("{entry}: {:?}", result.map(|s| s.config().allowlist.clone())),
    }
}

#[rstest]
#[case("ns", "ReplicaSet", "mps-control-daemon-5f2c-7d9f8b6c4", true)]
// the prefix alone is no generated name
#[case("ns", "ReplicaSet", "mps-control-daemon-", false)]
#[case("ns", "ReplicaSet", "mps-control-daemo", false)]
#[case("ns", "ReplicaSet", "other-mps-control-daemon-1", false)]
// one namespace, one kind
#[case("other", "ReplicaSet", "mps-control-daemon-1", false)]
#[case("ns", "Deployment", "mps-control-daemon-1", false)]
fn name_prefixes_match_one_kind_in_one_namespace(
    #[case] namespace: &str,
    #[case] kind: &str,
    #[case] name: &str,
    #[case] matches: bool,
) {
    let entry = AllowlistEntry {
        name: String::new(),
        name_prefix: Some("mps-control-daemon-".into()),
        ..AllowlistEntry::exact("ns", "ReplicaSet", "")
    };
    assert_eq!(entry.matches(namespace, kind, name), matches);
    assert_eq!(entry.to_string(), "ns/ReplicaSet/mps-control-daemon-*");
}

#[test]
fn name_prefix_entries_round_trip() {
    let yaml = "allowlist:\n- {namespace: ns, kind: DaemonSet, name: plugin}\n\
                    - {namespace: ns, kind: ReplicaSet, namePrefix: mps-control-daemon-}\n";
    let settings = match Settings::from_yaml(yaml, "c.yaml") {
        Ok(settings) => settings,
        Err(err) => panic!("{err}"),
    };
    let written = serde_saphyr::to_string(settings.config()).unwrap_or_default();
    assert!(written.contains("namePrefix: mps-control-daemon-"), "{written}");
    let again = Settings::from_yaml(&written, "again.yaml").map(|s| s.config().clone());
    assert_eq!(again.ok().as_ref(), Some(settings.config()));
}
