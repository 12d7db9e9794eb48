//! A rule's CEL side: the admission policies the API server evaluates for it without the webhook,
//! as parts ([`CelPolicy`]) that `admission_policy` names, labels and binds.

use crate::policy::rules::cel_text as cel;

/// A named CEL expression: a variable or a match condition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Variable {
    pub name: String,
    pub expression: String,
}

impl Variable {
    pub fn new(name: &str, expression: &str) -> Self {
        Self { name: name.to_owned(), expression: expression.to_owned() }
    }
}

/// One validation: an expression that must hold, and the message that names what does not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Validation {
    pub expression: String,
    pub message_expression: String,
}

impl Validation {
    pub fn new(expression: &str, message_expression: &str) -> Self {
        Self {
            expression: expression.to_owned(),
            message_expression: message_expression.to_owned(),
        }
    }
}

/// The requests a policy is sent, which `admission_policy` writes as the install's resource rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resources {
    /// Pods on CREATE; with `ephemeral`, updates of `pods/ephemeralcontainers` too; with
    /// `workloads`, the workloads' templates.
    Pods { ephemeral: bool, workloads: bool },
    /// Updates of Pods themselves.
    PodUpdates,
    /// ResourceClaims and ResourceClaimTemplates; the policy's name ends in `-claims`.
    Claims,
}

/// What a policy does with the object.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A ValidatingAdmissionPolicy's validations, bound to each namespace mode's action (deny in
    /// enforce namespaces).
    Validate(Vec<Validation>),
    /// A ValidatingAdmissionPolicy's validations that never deny: bound to warn in enforce
    /// namespaces too, as the webhook warns of what they find.
    Warn(Vec<Validation>),
    /// A MutatingAdmissionPolicy's JSON Patch expression.
    Patch(String),
}

/// One admission policy of a rule, before it is named and labelled.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CelPolicy {
    pub resources: Resources,
    pub match_conditions: Vec<Variable>,
    pub variables: Vec<Variable>,
    pub action: Action,
}

impl CelPolicy {
    /// A validating policy on pods and workloads (with `ephemeral`, updates of ephemeral containers
    /// too): the pod spec's variables (`spec`, `inits`, `regulars`, `containers`, `controller`)
    /// first, then `variables`; objects without a pod spec are left out.
    pub fn pod_validations(
        ephemeral: bool,
        variables: Vec<Variable>,
        validations: Vec<Validation>,
    ) -> Self {
        let mut all = vec![
            Variable::new("spec", cel::POD_SPEC),
            Variable::new("inits", cel::INITS),
            Variable::new("regulars", cel::REGULARS),
            Variable::new("containers", cel::CONTAINERS),
            Variable::new("controller", cel::CONTROLLER),
        ];
        all.extend(variables);
        Self {
            resources: Resources::Pods { ephemeral, workloads: true },
            match_conditions: vec![Variable::new("has-pod-spec", cel::HAS_SPEC)],
            variables: all,
            action: Action::Validate(validations),
        }
    }

    pub fn is_mutating(&self) -> bool {
        matches!(self.action, Action::Patch(_))
    }
}
