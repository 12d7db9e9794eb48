//! MutatingAdmissionPolicy (`admissionregistration.k8s.io/v1`) with
//! `patchType: JSONPatch`, and its binding.
//!
//! Reads `spec.failurePolicy`, `spec.matchConstraints`, `spec.matchConditions`,
//! `spec.variables`, `spec.reinvocationPolicy` (kept, not acted on) and
//! `spec.mutations[]` of `patchType: JSONPatch` (`jsonPatch.expression`); on
//! a binding `spec.policyName` and `spec.matchResources`. Allows the
//! expression to return a list of `JSONPatch{op, path, from, value}`, built
//! as in `k8s.io/apiserver/pkg/admission/plugin/policy/mutating/patch/
//! json_patch.go`, applied in order with the `json-patch` crate.
//! `ApplyConfiguration` mutations are refused when the policy is read.

use super::activation::{self, Expression, to_json};
use super::library::JSON_PATCH_TYPE;
use super::matching::BindingCore;
use super::validating::{ConditionResult, PolicyCore};
use super::{
    Attributes, FailurePolicy, PolicyError, Violation, ViolationCause, field_error, list_field,
    string_field,
};
use cel::{Context, Value};
use serde_json::Value as Json;

/// What a mutating policy did to one request's object.
#[derive(Debug, Clone, PartialEq)]
pub enum MutationOutcome {
    /// The request is outside the policy's match constraints, or a match
    /// condition is false.
    NotMatched,
    /// The policy applied: the object after its mutations, and the patch
    /// operations applied (empty when none changed anything).
    Patched {
        /// The patched object.
        object: Json,
        /// Every operation applied, in order.
        patch: json_patch::Patch,
    },
    /// A mutation failed under `failurePolicy: Fail`: the request is
    /// rejected with this violation.
    Failed(Violation),
}

/// A compiled MutatingAdmissionPolicy.
#[derive(Debug)]
pub struct MutatingPolicy {
    core: PolicyCore,
    reinvocation: String,
    mutations: Vec<Expression>,
}

impl MutatingPolicy {
    /// Reads and compiles a MutatingAdmissionPolicy object.
    pub fn from_object(object: &Json) -> Result<Self, PolicyError> {
        let (core, spec) = PolicyCore::read(object)?;
        let env = &core.env;
        let mut mutations = Vec::new();
        for (i, m) in list_field(spec, "mutations", "spec")?.iter().enumerate() {
            let path = format!("spec.mutations[{i}]");
            let patch_type = string_field(m, "patchType", &path)?;
            if patch_type != "JSONPatch" {
                return Err(field_error(
                    &format!("{path}.patchType"),
                    format!("{patch_type} is not supported, only JSONPatch"),
                ));
            }
            let patch = m
                .get("jsonPatch")
                .ok_or_else(|| field_error(&format!("{path}.jsonPatch"), "required"))?;
            let path = format!("{path}.jsonPatch");
            let source = string_field(patch, "expression", &path)?;
            mutations.push(Expression::compile(env, &source, &format!("{path}.expression"))?);
        }
        Ok(MutatingPolicy {
            reinvocation: spec
                .get("reinvocationPolicy")
                .and_then(Json::as_str)
                .unwrap_or("Never")
                .to_owned(),
            core,
            mutations,
        })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// `spec.reinvocationPolicy` (`Never` when unset); read, not acted on.
    pub fn reinvocation_policy(&self) -> &str {
        &self.reinvocation
    }

    /// Applies the policy's mutations to the request's object, in order,
    /// each seeing the object as the mutations before it left it, as
    /// `mutating/dispatcher.go` does. A mutation that fails under
    /// `failurePolicy: Ignore` is skipped and the next one runs; a patch
    /// whose `test` operation fails changes nothing and is no error. The API
    /// server's defaulting of the patched object is not reproduced.
    pub fn mutate(&self, attributes: &Attributes) -> MutationOutcome {
        if !self.core.constraints.matches(attributes) {
            return MutationOutcome::NotMatched;
        }
        let mut object = attributes.object.clone().unwrap_or(Json::Null);
        let mut applied = Vec::new();
        for (i, mutation) in self.mutations.iter().enumerate() {
            let mut current = attributes.clone();
            current.object = Some(object.clone());
            let values = self.core.variables.slots();
            let root = activation::request_context(&self.core.env, &current);
            let mut context = root.new_inner_scope();
            self.core.variables.bind(&root, &values, &mut context);
            if i == 0 {
                match self.core.conditions.evaluate(&context, self.core.failure) {
                    ConditionResult::Matches => {}
                    ConditionResult::NoMatch => return MutationOutcome::NotMatched,
                    ConditionResult::Failed(message) => return self.failed(message),
                }
            }
            match patch_of(mutation, &context) {
                // json_patch::patch applies all operations or none.
                Ok(patch) => match json_patch::patch(&mut object, &patch) {
                    Ok(()) => applied.extend(patch.0),
                    // A failed `test` leaves the object as it was, without
                    // an error (patch/json_patch.go).
                    Err(e) if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) => {}
                    Err(e) if self.core.failure == FailurePolicy::Fail => {
                        return self.failed(format!("JSONPath: {e}"));
                    }
                    Err(_) => {}
                },
                Err(message) if self.core.failure == FailurePolicy::Fail => {
                    return self.failed(message);
                }
                Err(_) => {}
            }
        }
        MutationOutcome::Patched { object, patch: json_patch::Patch(applied) }
    }

    /// As [`MutatingPolicy::mutate`], as `binding` binds the policy.
    pub fn mutate_bound(
        &self,
        binding: &MutatingPolicyBinding,
        attributes: &Attributes,
    ) -> MutationOutcome {
        if !binding.core.selects(&self.core.name, attributes) {
            return MutationOutcome::NotMatched;
        }
        self.mutate(attributes)
    }

    fn failed(&self, message: String) -> MutationOutcome {
        MutationOutcome::Failed(Violation {
            message,
            reason: "Invalid".to_owned(),
            cause: ViolationCause::EvaluationError,
        })
    }
}

/// The JSON Patch a mutation's expression returns.
fn patch_of(mutation: &Expression, context: &Context<'_, '_>) -> Result<json_patch::Patch, String> {
    let result = mutation.evaluate(context).map_err(|e| mutation.error_message(&e))?;
    let Value::List(items) = result else {
        return Err(format!(
            "expression '{}' must return a list of JSONPatch, not {result:?}",
            mutation.source
        ));
    };
    let mut operations = Vec::with_capacity(items.len());
    for item in items.iter() {
        operations.push(operation(item)?);
    }
    serde_json::from_value(Json::Array(operations)).map_err(|e| format!("invalid JSONPatch: {e}"))
}

/// One `JSONPatch` object as a JSON Patch operation.
fn operation(item: &Value) -> Result<Json, String> {
    let Value::Struct(patch) = item else {
        return Err(format!("{item:?} is not a JSONPatch"));
    };
    if patch.name() != JSON_PATCH_TYPE.name() {
        return Err(format!("{} is not a JSONPatch", patch.name()));
    }
    let mut operation = serde_json::Map::new();
    for (field, value) in patch.field_values() {
        let value = Value::try_from(&*value).map_err(|e| format!("JSONPatch.{field}: {e}"))?;
        // An empty `from` is left out, as upstream does.
        if field == "from" && matches!(&value, Value::String(from) if from.is_empty()) {
            continue;
        }
        operation.insert(field, to_json(&value).map_err(|e| format!("JSONPatch value: {e}"))?);
    }
    Ok(Json::Object(operation))
}

/// A MutatingAdmissionPolicyBinding.
#[derive(Debug, Clone)]
pub struct MutatingPolicyBinding {
    core: BindingCore,
}

impl MutatingPolicyBinding {
    /// Reads a MutatingAdmissionPolicyBinding object.
    pub fn from_object(object: &Json) -> Result<Self, PolicyError> {
        let (core, _) = BindingCore::read(object)?;
        Ok(MutatingPolicyBinding { core })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.core.name
    }

    /// `spec.policyName`.
    pub fn policy_name(&self) -> &str {
        &self.core.policy_name
    }

    /// Whether the binding's `matchResources` select the request.
    pub fn matches(&self, attributes: &Attributes) -> bool {
        self.core.match_resources.matches(attributes)
    }
}
