use std::collections::BTreeSet;

use super::*;

/// Each rule once per kind of object; the allowlist stage first and
/// alone of its kind; every rule id somewhere.
fn registry_problems(rules: &[Rule]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for rule in rules {
        if !seen.insert((rule.id, rule.check.target())) {
            problems.push(format!("{} twice for {}", rule.id, rule.check.target()));
        }
    }
    let allowlist: Vec<usize> = (0..rules.len())
        .filter(|&i| matches!(rules[i].check, Check::Allowlist(_)))
        .collect();
    if allowlist != [0] || rules[0].id != RuleId::Allowlist {
        problems.push(format!(
            "the allowlist stage is at {allowlist:?}, not first"
        ));
    }
    let ids: BTreeSet<RuleId> = rules.iter().map(|rule| rule.id).collect();
    for id in RuleId::ALL {
        if !ids.contains(id) {
            problems.push(format!("{id} is not registered"));
        }
    }
    problems
}

#[test]
fn every_rule_is_registered_once_per_kind_of_object() {
    assert_eq!(registry_problems(RULES), Vec::<String>::new());
    let pods: BTreeSet<RuleId> = RULES
        .iter()
        .filter(|rule| matches!(rule.check, Check::Pod(_)))
        .map(|rule| rule.id)
        .collect();
    let expected: BTreeSet<RuleId> = RuleId::ALL
        .iter()
        .copied()
        .filter(|id| *id != RuleId::Allowlist)
        .collect();
    assert_eq!(pods, expected);
}

#[test]
fn the_registry_test_fails_on_a_rule_twice_or_missing() {
    let twice = [RULES[0], RULES[1], RULES[1]];
    let problems = registry_problems(&twice);
    assert!(
        problems.contains(&"visible-devices twice for pods".to_owned()),
        "{problems:?}"
    );
    assert!(
        problems.contains(&"device-paths is not registered".to_owned()),
        "{problems:?}"
    );
    let late = [RULES[1], RULES[0]];
    assert!(
        registry_problems(&late)
            .iter()
            .any(|p| p.contains("not first"))
    );
}
