use std::collections::BTreeSet;

use super::*;
use crate::kubernetes_version::KubernetesVersion;
use crate::settings::Settings;

/// Each rule once per kind of object, at most one allowlist stage, and
/// every rule but the allowlist runs on pods.
#[test]
fn every_rule_runs_once_per_kind_of_object() {
    let mut seen = BTreeSet::new();
    for (id, entry) in entries() {
        assert!(seen.insert((id, entry.check.target())), "{id} twice for {}", entry.check.target());
    }
    let stages: Vec<RuleId> = entries()
        .filter(|(_, entry)| matches!(entry.check, Check::Allowlist(_)))
        .map(|(id, _)| id)
        .collect();
    assert_eq!(stages, [RuleId::Allowlist]);
    let pods: BTreeSet<RuleId> = entries()
        .filter(|(_, entry)| matches!(entry.check, Check::Pod(_)))
        .map(|(id, _)| id)
        .collect();
    let expected: BTreeSet<RuleId> =
        RuleId::ALL.iter().copied().filter(|id| *id != RuleId::Allowlist).collect();
    assert_eq!(pods, expected);
}

/// A rule's name is its own, and reads back as its id.
#[test]
fn every_rule_has_a_name_of_its_own() {
    let names: BTreeSet<&str> = RuleId::ALL.iter().map(|id| id.as_str()).collect();
    assert_eq!(names.len(), RuleId::ALL.len());
    for &id in RuleId::ALL {
        assert_eq!(RuleId::parse(id.as_str()), Some(id));
        assert!(!id.rule().entries.is_empty(), "{id}");
    }
}

/// An entry that declares policies of its own generates at least one on
/// the default settings with a GPU toleration (R8 has nothing to do without one).
#[test]
fn an_entry_with_policies_of_its_own_makes_some() {
    let yaml = "gpuTolerations: [{key: nvidia.com/gpu, operator: Exists, effect: NoSchedule}]";
    let settings = Settings::from_yaml(yaml, "test").unwrap();
    for (id, entry) in entries() {
        let policies = entry.api_server.policies(&settings, KubernetesVersion::default());
        let declared = matches!(entry.api_server, ApiServer::Policies { .. });
        assert_eq!(!policies.is_empty(), declared, "{id}");
    }
}
