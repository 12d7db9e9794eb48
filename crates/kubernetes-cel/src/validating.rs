//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`) and its
//! binding, evaluated as `k8s.io/apiserver/pkg/admission/plugin/policy/
//! validating/validator.go` does.
//!
//! Reads `spec.failurePolicy`, `spec.matchConstraints`, `spec.matchConditions`,
//! `spec.variables`, `spec.validations[]` (`expression`, `message`,
//! `messageExpression`, `reason`); on a binding `spec.policyName`,
//! `spec.validationActions`, `spec.matchResources`. Ignores params,
//! auditAnnotations and authorizer checks.

use super::activation::{self, Expression, Variables};
use super::matching::{MatchResources, PolicyBinding};
use super::{
    Attributes, FailurePolicy, PolicyError, PolicyOutcome, Violation, ViolationCause, field_error,
    list_field, name_and_spec, string_field,
};
use cel::{Context, Env, Value};
use serde_json::Value as Json;
use std::sync::Arc;

/// What both kinds of policy read alike: the name, the CEL environment,
/// `failurePolicy`, `matchConstraints`, `matchConditions` and `variables`.
pub(super) struct PolicyCore {
    pub(super) name: String,
    pub(super) env: Arc<Env>,
    pub(super) failure: FailurePolicy,
    constraints: MatchResources,
    /// `spec.matchConditions`.
    conditions: Vec<(String, Expression)>,
    variables: Variables,
}

/// All but the environment.
impl std::fmt::Debug for PolicyCore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let mut core = f.debug_struct("PolicyCore");
        core.field("name", &self.name).field("failure", &self.failure);
        core.field("constraints", &self.constraints).field("conditions", &self.conditions);
        core.field("variables", &self.variables).finish_non_exhaustive()
    }
}

impl PolicyCore {
    /// Reads the common part of a policy object, and returns its `spec`
    /// for the rest.
    pub(super) fn read(object: &Json) -> Result<(Self, &Json), PolicyError> {
        let env = activation::environment()?;
        let (name, spec) = name_and_spec(object)?;
        let core = PolicyCore {
            name,
            failure: FailurePolicy::read(spec)?,
            constraints: MatchResources::read(
                spec.get("matchConstraints"),
                "spec.matchConstraints",
            )?
            .require_rules("spec.matchConstraints")?,
            conditions: activation::named_expressions(&env, spec, "matchConditions")?,
            variables: Variables::read(&env, spec)?,
            env,
        };
        Ok((core, spec))
    }

    /// Whether the policy's constraints, and `binding`'s when given, select
    /// the request.
    pub(super) fn selects(&self, binding: Option<&PolicyBinding>, attributes: &Attributes) -> bool {
        binding.is_none_or(|b| b.selects(&self.name, attributes))
            && self.constraints.matches(attributes)
    }

    /// Runs `f` in the request's context, its variables bound.
    pub(super) fn run<T>(
        &self,
        attributes: &Attributes,
        f: impl FnOnce(&Context<'_, '_>) -> T,
    ) -> T {
        let values = self.variables.slots();
        let root = activation::request_context(&self.env, attributes);
        let mut context = root.new_inner_scope();
        self.variables.bind(&root, &values, &mut context);
        f(&context)
    }

    /// What the match conditions decide in `context`, as
    /// `matchconditions.Matcher.Match`: any false condition means no match,
    /// whatever errors the others had; errors alone follow the policy.
    pub(super) fn conditions(&self, context: &Context<'_, '_>) -> ConditionResult {
        let mut errors = Vec::new();
        for (_, condition) in &self.conditions {
            match condition.evaluate_bool(context) {
                Ok(true) => {}
                Ok(false) => return ConditionResult::NoMatch,
                Err(e) => errors.push(e),
            }
        }
        match (errors.is_empty(), self.failure) {
            (true, _) => ConditionResult::Matches,
            (false, FailurePolicy::Ignore) => ConditionResult::NoMatch,
            // utilerrors.NewAggregate's rendering: one error alone, or a list.
            (false, FailurePolicy::Fail) if errors.len() == 1 => {
                ConditionResult::Failed(errors.concat())
            }
            (false, FailurePolicy::Fail) => {
                ConditionResult::Failed(format!("[{}]", errors.join(", ")))
            }
        }
    }

    /// The violation of an evaluation error: none under `Ignore`.
    pub(super) fn error(&self, message: String) -> Option<Violation> {
        (self.failure == FailurePolicy::Fail).then(|| Violation::evaluation_error(message))
    }
}

/// Longest message a `messageExpression` may produce
/// (`celconfig.MaxEvaluatedMessageExpressionSizeBytes`).
const MAX_MESSAGE_BYTES: usize = 5 * 1024;

/// One `spec.validations[]` entry.
#[derive(Debug)]
struct Validation {
    expression: Expression,
    message: Option<String>,
    message_expression: Option<Expression>,
    reason: Option<String>,
}

/// What the match conditions decided.
pub(crate) enum ConditionResult {
    Matches,
    NoMatch,
    /// Errors and no false condition, under `failurePolicy: Fail`.
    Failed(String),
}

/// A compiled ValidatingAdmissionPolicy.
#[derive(Debug)]
pub struct ValidatingPolicy {
    core: PolicyCore,
    validations: Vec<Validation>,
}

impl ValidatingPolicy {
    /// Reads and compiles a ValidatingAdmissionPolicy object: every
    /// expression is compiled here, once.
    pub fn from_object(object: &Json) -> Result<Self, PolicyError> {
        let (core, spec) = PolicyCore::read(object)?;
        let env = &core.env;
        let mut validations = Vec::new();
        for (i, v) in list_field(spec, "validations", "spec")?.iter().enumerate() {
            let path = format!("spec.validations[{i}]");
            let source = string_field(v, "expression", &path)?;
            let text = |key: &str| v.get(key).and_then(Json::as_str).map(str::to_owned);
            let message_expression = text("messageExpression")
                .map(|m| Expression::compile(env, &m, &format!("{path}.messageExpression")))
                .transpose()?;
            validations.push(Validation {
                expression: Expression::compile(env, &source, &format!("{path}.expression"))?,
                message: text("message"),
                message_expression,
                reason: text("reason"),
            });
        }
        Ok(ValidatingPolicy { core, validations })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// Evaluates the policy on one request, with no binding's narrowing.
    pub fn evaluate(&self, attributes: &Attributes) -> PolicyOutcome {
        self.evaluate_as(None, attributes)
    }

    /// Evaluates the policy as `binding` binds it: the binding's match
    /// resources narrow the policy's constraints.
    pub fn evaluate_bound(
        &self,
        binding: &ValidatingPolicyBinding,
        attributes: &Attributes,
    ) -> PolicyOutcome {
        self.evaluate_as(Some(binding), attributes)
    }

    fn evaluate_as(
        &self,
        binding: Option<&PolicyBinding>,
        attributes: &Attributes,
    ) -> PolicyOutcome {
        if !self.core.selects(binding, attributes) {
            return PolicyOutcome::NotMatched;
        }
        self.core.run(attributes, |context| {
            let violations = match self.core.conditions(context) {
                ConditionResult::Matches => {
                    self.validations.iter().filter_map(|v| self.validate(v, context)).collect()
                }
                ConditionResult::NoMatch => return PolicyOutcome::NotMatched,
                ConditionResult::Failed(message) => vec![Violation::evaluation_error(message)],
            };
            PolicyOutcome::Evaluated { violations }
        })
    }

    fn validate(&self, v: &Validation, context: &Context<'_, '_>) -> Option<Violation> {
        match v.expression.evaluate_bool(context) {
            Ok(true) => None,
            Ok(false) => Some(Violation {
                message: self.message(v, context),
                reason: v.reason.clone().unwrap_or_else(|| "Invalid".to_owned()),
                cause: ViolationCause::Denied,
            }),
            Err(message) => self.core.error(message),
        }
    }

    /// The message of a denial, chosen as `validator.go` chooses it.
    fn message(&self, v: &Validation, context: &Context<'_, '_>) -> String {
        let evaluated = v
            .message_expression
            .as_ref()
            .and_then(|m| match m.evaluate(context) {
                Ok(Value::String(s)) => Some(s.trim().to_owned()),
                _ => None,
            })
            .filter(|m| m.len() <= MAX_MESSAGE_BYTES && !m.contains('\n'))
            .filter(|m| !m.is_empty());
        evaluated
            .or_else(|| {
                v.message.as_deref().map(str::trim).filter(|m| !m.is_empty()).map(str::to_owned)
            })
            .unwrap_or_else(|| format!("failed expression: {}", v.expression.source.trim()))
    }
}

/// `spec.validationActions` of a binding.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ValidationAction {
    /// Reject the request.
    Deny,
    /// Return a warning.
    Warn,
    /// Record an audit annotation.
    Audit,
}

/// A ValidatingAdmissionPolicyBinding: a [`PolicyBinding`] with its
/// `spec.validationActions`.
#[derive(Debug, Clone)]
pub struct ValidatingPolicyBinding {
    binding: PolicyBinding,
    actions: Vec<ValidationAction>,
}

impl ValidatingPolicyBinding {
    /// Reads a ValidatingAdmissionPolicyBinding object.
    pub fn from_object(object: &Json) -> Result<Self, PolicyError> {
        let binding = PolicyBinding::from_object(object)?;
        let actions = list_field(&object["spec"], "validationActions", "spec")?
            .iter()
            .map(|a| match a.as_str() {
                Some("Deny") => Ok(ValidationAction::Deny),
                Some("Warn") => Ok(ValidationAction::Warn),
                Some("Audit") => Ok(ValidationAction::Audit),
                _ => Err(field_error("spec.validationActions", format!("unsupported {a}"))),
            })
            .collect::<Result<Vec<_>, _>>()?;
        if actions.is_empty() {
            return Err(field_error("spec.validationActions", "required"));
        }
        Ok(ValidatingPolicyBinding { binding, actions })
    }

    /// `spec.validationActions`.
    pub fn validation_actions(&self) -> &[ValidationAction] {
        &self.actions
    }
}

/// The name, `spec.policyName` and `matches`.
impl std::ops::Deref for ValidatingPolicyBinding {
    type Target = PolicyBinding;
    fn deref(&self) -> &PolicyBinding {
        &self.binding
    }
}
