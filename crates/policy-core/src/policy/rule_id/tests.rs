use std::collections::BTreeSet;

use proptest::prelude::*;

use super::{RuleId, RuleSet};

fn any_rules() -> impl Strategy<Value = Vec<RuleId>> {
    proptest::collection::vec(proptest::sample::select(RuleId::ALL), 0..12)
}

proptest! {
    /// A rule set holds and lists what a `BTreeSet` of the same
    /// rules does, in the same order.
    #[test]
    fn a_rule_set_is_a_btree_set_of_rules(rules in any_rules(), probe in proptest::sample::select(RuleId::ALL)) {
        let mut set = RuleSet::new();
        let mut expected = BTreeSet::new();
        for &rule in &rules {
            prop_assert_eq!(set.insert(rule), expected.insert(rule));
        }
        prop_assert_eq!(set.iter().collect::<Vec<_>>(), expected.iter().copied().collect::<Vec<_>>());
        prop_assert_eq!(set.len(), expected.len());
        prop_assert_eq!(set.is_empty(), expected.is_empty());
        prop_assert_eq!(set.contains(probe), expected.contains(&probe));
        prop_assert_eq!(rules.iter().copied().collect::<RuleSet>(), set);
    }
}
