//! ValidatingAdmissionPolicy (`admissionregistration.k8s.io/v1`) and its
//! binding, evaluated as `k8s.io/apiserver/pkg/admission/plugin/policy/
//! validating/validator.go` does.
//!
//! Reads `spec.failurePolicy`, `spec.matchConstraints`, `spec.matchConditions`,
//! `spec.variables`, `spec.validations[]` (`expression`, `message`,
//! `messageExpression`, `reason`); on a binding `spec.policyName`,
//! `spec.validationActions`, `spec.matchResources`. Ignores params,
//! auditAnnotations and authorizer checks.

use super::activation::{self, Expression, SharedEnv, Variables};
use super::matching::{BindingCore, MatchResources};
use super::{
    Attributes, FailurePolicy, PolicyError, PolicyOutcome, Violation, ViolationCause, field_error,
    list_field, name_and_spec, string_field,
};
use cel::{Context, Env, Value};
use serde_json::Value as Json;

/// What both kinds of policy read alike: the name, the CEL environment,
/// `failurePolicy`, `matchConstraints`, `matchConditions` and `variables`.
#[derive(Debug)]
pub(super) struct PolicyCore {
    pub(super) name: String,
    pub(super) env: SharedEnv,
    pub(super) failure: FailurePolicy,
    pub(super) constraints: MatchResources,
    pub(super) conditions: MatchConditions,
    pub(super) variables: Variables,
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
            conditions: MatchConditions::read(&env, spec)?,
            variables: Variables::read(&env, spec)?,
            env,
        };
        Ok((core, spec))
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

/// `spec.matchConditions`, shared with MutatingAdmissionPolicy.
#[derive(Debug, Default)]
pub(crate) struct MatchConditions {
    conditions: Vec<(String, Expression)>,
}

/// What the match conditions decided.
pub(crate) enum ConditionResult {
    Matches,
    NoMatch,
    /// Errors and no false condition, under `failurePolicy: Fail`.
    Failed(String),
}

impl MatchConditions {
    pub fn read(env: &Env, spec: &Json) -> Result<Self, PolicyError> {
        let mut conditions = Vec::new();
        for (i, c) in list_field(spec, "matchConditions", "spec")?.iter().enumerate() {
            let path = format!("spec.matchConditions[{i}]");
            let name = string_field(c, "name", &path)?;
            let source = string_field(c, "expression", &path)?;
            conditions
                .push((name, Expression::compile(env, &source, &format!("{path}.expression"))?));
        }
        Ok(MatchConditions { conditions })
    }

    /// `matchconditions.Matcher.Match`: any false condition means no match,
    /// whatever errors the others had; errors alone follow the policy.
    pub fn evaluate(&self, context: &Context<'_, '_>, failure: FailurePolicy) -> ConditionResult {
        let mut errors = Vec::new();
        for (_, condition) in &self.conditions {
            match condition.evaluate(context) {
                Ok(Value::Bool(true)) => {}
                Ok(Value::Bool(false)) => return ConditionResult::NoMatch,
                Ok(other) => errors.push(format!(
                    "expression '{}' resulted in a {other:?}, not a bool",
                    condition.source
                )),
                Err(e) => errors.push(condition.error_message(&e)),
            }
        }
        match (errors.is_empty(), failure) {
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
        if !self.core.constraints.matches(attributes) {
            return PolicyOutcome::NotMatched;
        }
        let values = self.core.variables.slots();
        let root = activation::request_context(&self.core.env, attributes);
        let mut context = root.new_inner_scope();
        self.core.variables.bind(&root, &values, &mut context);
        match self.core.conditions.evaluate(&context, self.core.failure) {
            ConditionResult::Matches => {}
            ConditionResult::NoMatch => return PolicyOutcome::NotMatched,
            ConditionResult::Failed(message) => {
                return PolicyOutcome::Evaluated {
                    violations: vec![self.failure_violation(message)],
                };
            }
        }
        let violations =
            self.validations.iter().filter_map(|v| self.validate(v, &context)).collect();
        PolicyOutcome::Evaluated { violations }
    }

    /// Evaluates the policy as `binding` binds it: the binding's match
    /// resources narrow the policy's constraints.
    pub fn evaluate_bound(
        &self,
        binding: &ValidatingPolicyBinding,
        attributes: &Attributes,
    ) -> PolicyOutcome {
        if !binding.core.selects(&self.core.name, attributes) {
            return PolicyOutcome::NotMatched;
        }
        self.evaluate(attributes)
    }

    fn validate(&self, v: &Validation, context: &Context<'_, '_>) -> Option<Violation> {
        match v.expression.evaluate(context) {
            Ok(Value::Bool(true)) => None,
            Ok(Value::Bool(false)) => Some(Violation {
                message: self.message(v, context),
                reason: v.reason.clone().unwrap_or_else(|| "Invalid".to_owned()),
                cause: ViolationCause::Denied,
            }),
            // The API server's type check rejects non-bool validations at
            // compile time; here they are evaluation errors.
            Ok(other) => self.error_violation(format!(
                "expression '{}' resulted in a {other:?}, not a bool",
                v.expression.source
            )),
            Err(e) => self.error_violation(v.expression.error_message(&e)),
        }
    }

    fn error_violation(&self, message: String) -> Option<Violation> {
        match self.core.failure {
            FailurePolicy::Ignore => None,
            FailurePolicy::Fail => Some(self.failure_violation(message)),
        }
    }

    fn failure_violation(&self, message: String) -> Violation {
        Violation { message, reason: "Invalid".to_owned(), cause: ViolationCause::EvaluationError }
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

/// A ValidatingAdmissionPolicyBinding.
#[derive(Debug, Clone)]
pub struct ValidatingPolicyBinding {
    core: BindingCore,
    actions: Vec<ValidationAction>,
}

impl ValidatingPolicyBinding {
    /// Reads a ValidatingAdmissionPolicyBinding object.
    pub fn from_object(object: &Json) -> Result<Self, PolicyError> {
        let (core, spec) = BindingCore::read(object)?;
        let actions = list_field(spec, "validationActions", "spec")?
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
        Ok(ValidatingPolicyBinding { core, actions })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// `spec.policyName`.
    pub fn policy_name(&self) -> &str {
        &self.core.policy_name
    }

    /// `spec.validationActions`.
    pub fn validation_actions(&self) -> &[ValidationAction] {
        &self.actions
    }

    /// Whether the binding's `matchResources` select the request.
    pub fn matches(&self, attributes: &Attributes) -> bool {
        self.core.match_resources.matches(attributes)
    }
}
