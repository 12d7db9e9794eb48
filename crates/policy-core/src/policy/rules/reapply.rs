//! What a rule wrote into a pod at creation, written again on an update that undid it
//! ([`Scope::Update`]; docs/policy.md, "Pod updates").
//!
//! A second `kubectl apply` sends the author's values of the fields gpu-policy changed
//! (`NVIDIA_VISIBLE_DEVICES=all` where it pinned `void`). A pod's spec is immutable but for
//! images, so the API server refuses that update unless the webhook makes the same change
//! again, which makes it a no-op. A change is made again only where the old pod shows it was
//! made (nothing to change in the old pod, something in the new); a pod created before its
//! namespace opted in gets nothing, as any spec change would be refused.
//!
//! Reads: what the rule reads, in the old pod and in the new one.

use super::rule::{Findings, RuleInput};
use crate::policy::subject::Scope;

/// A whole pod: both are read as created.
static WHOLE: Scope = Scope::Whole;

/// `check`'s changes to the new pod, when the old pod needs none: the
/// rule's own changes, its violations and notices left to creation.
pub(super) fn made_again(
    input: &RuleInput<'_, '_>,
    check: fn(&RuleInput<'_, '_>) -> Findings,
) -> Findings {
    let Some(old) = input.old else {
        return Findings::default();
    };
    let before = check(&RuleInput { view: old, scope: &WHOLE, old: None, ..*input });
    if !before.changes.is_empty() {
        return Findings::default();
    }
    let after = check(&RuleInput { scope: &WHOLE, old: None, ..*input });
    Findings { changes: after.changes, ..Findings::default() }
}
