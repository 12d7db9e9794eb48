//! The rules, each declared by its own file ([`Rule`]: name, severity, checks, CEL side), and
//! the registry: one line per rule.
//!
//! A rule is a pure function from a [`RuleInput`] (or a claim's [`ClaimInput`]) to
//! [`Findings`] ([`rule`]); [`crate::policy::Evaluator`] stamps each finding with the rule's
//! id and each message with `gpu-policy:`. Each [`Entry`] also says how the API server
//! evaluates the rule without the webhook ([`ApiServer`]): `admission_policy` iterates the
//! registry, with the rules' own [`crate::policy::message::MessageTemplate`]s as messages.
//!
//! How to add a rule: docs/architecture.md, "How to add a rule".

pub mod cel;
pub mod cel_sharing;
pub mod cel_text;
mod reapply;
pub mod rule;

pub use rule::{
    AllowlistInput, ApiServer, Check, ClaimInput, ClaimOwner, Coverage, Entry, Exemption, Findings,
    Mutation, OwnerInput, Rule, RuleInput, Severity,
};

// The rules' modules are declared here, not by `registry!`: rustfmt does
// not follow module declarations made inside a macro.
pub mod allowlist;
pub mod bounded_requests;
pub mod compute_affinity;
pub mod device_paths;
pub mod gpu_tolerations;
pub mod runtime_class;
pub mod visible_devices;
pub mod webhook_annotations;

/// Declares each rule's [`RuleId`] variant and its place in the registry. The order is the rules'
/// numbers (R1, R2, ...): the order the pod and claim entries run in (the allowlist stage runs
/// before them wherever it is listed), the generated policies come in, and the
/// `gpu-policy.io/mutations` annotation lists the rules in.
macro_rules! registry {
    ($($module:ident => $variant:ident,)+) => {
        /// Stable rule identifiers, one per line of the registry.
        #[derive(Debug, PartialOrd, Ord, Hash, enumset::EnumSetType)]
        pub enum RuleId {
            $($variant,)+
        }

        impl RuleId {
            pub const ALL: &[RuleId] = &[$(RuleId::$variant,)+];

            /// The rule's declaration, from its own file.
            pub fn rule(self) -> &'static Rule {
                match self {
                    $(RuleId::$variant => &$module::RULE,)+
                }
            }
        }
    };
}

registry! {
    visible_devices => VisibleDevices,
    bounded_requests => BoundedRequests,
    runtime_class => RuntimeClass,
    compute_affinity => ComputeAffinity,
    allowlist => Allowlist,
    device_paths => DevicePaths,
    webhook_annotations => WebhookAnnotations,
    gpu_tolerations => GpuTolerations,
}

impl RuleId {
    /// Its stable name, declared by the rule ([`Rule::name`]).
    pub fn as_str(self) -> &'static str {
        self.rule().name
    }
}

/// Every entry of every rule, in the registry's order.
pub fn entries() -> impl Iterator<Item = (RuleId, &'static Entry)> {
    RuleId::ALL.iter().flat_map(|&id| id.rule().entries.iter().map(move |entry| (id, entry)))
}

#[cfg(test)]
mod tests;
