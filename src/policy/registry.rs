//! The rules, listed once.
//!
//! A rule is a pure function from a [`RuleInput`] to [`Findings`]. It
//! writes what it changes, denies or ignores; [`super::Evaluator`] stamps
//! each finding with the rule's id from [`RULES`] and each message with the
//! `gpu-policy:` prefix.

use json_patch::PatchOperation;

use super::message::Notice;
use super::{
    ClusterFacts, ImageFacts, PodView, RuleId, Scope, bounded_requests, compute_affinity,
    device_paths, runtime_class, visible_devices,
};
use crate::settings::{AllowlistEntry, NamespaceSettings, Settings};

/// What every rule gets.
#[derive(Clone, Copy)]
pub struct RuleInput<'a, 'v> {
    pub view: &'a PodView<'v>,
    pub settings: &'a Settings,
    pub namespace: &'a NamespaceSettings,
    pub scope: &'a Scope,
    /// Set when rule 5 matched: the entry that exempts the pod.
    pub allowlisted: Option<&'a AllowlistEntry>,
    /// What the cluster knows, when the webhook can read it.
    pub cluster: Option<&'a dyn ClusterFacts>,
    /// Images resolved from their registries; the table covers the rest.
    pub images: Option<&'a dyn ImageFacts>,
}

/// A change a rule makes to the object.
#[derive(Debug, Clone, PartialEq)]
pub struct Mutation {
    /// What the change does, for people (`pin NVIDIA_VISIBLE_DEVICES=void in
    /// container "app"`).
    pub summary: String,
    pub operations: Vec<PatchOperation>,
    /// The change removes or replaces something the author wrote (as opposed
    /// to adding what they did not write). Templates are warned about these.
    pub overrides_author: bool,
}

/// What a rule returns.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Findings {
    pub changes: Vec<Mutation>,
    /// What the object must fix, as message bodies: name the containers or
    /// fields and say how to fix them.
    pub violations: Vec<String>,
    /// Inputs the rule ignored, and why (an unreadable annotation, say).
    pub notices: Vec<Notice>,
}

/// One entry of the registry.
pub struct Rule {
    pub id: RuleId,
    pub check: fn(&RuleInput<'_, '_>) -> Findings,
}

/// The rules that look at a pod view, in the order they run. Rule 5
/// (allowlist) runs first and separately: it decides who the others exempt.
///
/// To add a rule:
/// 1. write `src/policy/<name>.rs`: a header comment saying what it reads,
///    changes and denies, `pub fn check(input: &RuleInput) -> Findings`,
///    and its table tests (`policy::testing`);
/// 2. declare the module in `src/policy/mod.rs`;
/// 3. add its id and name to `rule_ids!` in `src/policy/mod.rs` (the name
///    is what output, metrics, logs and the mutations annotation show);
/// 4. add one line below;
/// 5. describe it in docs/policy.md ("Rules") and give it a golden fixture.
pub static RULES: &[Rule] = &[
    Rule {
        id: RuleId::VisibleDevices,
        check: visible_devices::check,
    },
    Rule {
        id: RuleId::BoundedRequests,
        check: bounded_requests::check,
    },
    Rule {
        id: RuleId::RuntimeClass,
        check: runtime_class::check,
    },
    Rule {
        id: RuleId::ComputeAffinity,
        check: compute_affinity::check,
    },
    Rule {
        id: RuleId::DevicePaths,
        check: device_paths::check,
    },
];

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;

    #[test]
    fn every_rule_but_the_allowlist_is_registered_once() {
        let registered: Vec<RuleId> = RULES.iter().map(|rule| rule.id).collect();
        let unique: BTreeSet<RuleId> = registered.iter().copied().collect();
        assert_eq!(unique.len(), registered.len(), "{registered:?}");
        let expected: BTreeSet<RuleId> = RuleId::ALL
            .iter()
            .copied()
            .filter(|id| *id != RuleId::Allowlist)
            .collect();
        assert_eq!(unique, expected);
    }
}
