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

use super::activation::{Expression, to_json};
use super::library::JSON_PATCH_TYPE;
use super::matching::PolicyBinding;
use super::validating::{ConditionResult, PolicyCore};
use super::{
    Attributes, FailurePolicy, PolicyError, Violation, field_error, list_field, string_field,
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
        self.mutate_as(None, attributes)
    }

    /// As [`MutatingPolicy::mutate`], as `binding` binds the policy.
    pub fn mutate_bound(
        &self,
        binding: &MutatingPolicyBinding,
        attributes: &Attributes,
    ) -> MutationOutcome {
        self.mutate_as(Some(binding), attributes)
    }

    fn mutate_as(
        &self,
        binding: Option<&PolicyBinding>,
        attributes: &Attributes,
    ) -> MutationOutcome {
        if !self.core.selects(binding, attributes) {
            return MutationOutcome::NotMatched;
        }
        let mut object = attributes.object.clone().unwrap_or(Json::Null);
        let mut applied = Vec::new();
        for (i, mutation) in self.mutations.iter().enumerate() {
            let mut current = attributes.clone();
            current.object = Some(object.clone());
            let patch = self.core.run(&current, |context| {
                if i == 0 {
                    match self.core.conditions(context) {
                        ConditionResult::Matches => {}
                        ConditionResult::NoMatch => return None,
                        ConditionResult::Failed(message) => return Some(Err(message)),
                    }
                }
                Some(patch_of(mutation, context))
            });
            let error = match patch {
                None => return MutationOutcome::NotMatched,
                // json_patch::patch applies all operations or none.
                Some(Ok(patch)) => match json_patch::patch(&mut object, &patch) {
                    Ok(()) => {
                        applied.extend(patch.0);
                        continue;
                    }
                    // A failed `test` leaves the object as it was, without
                    // an error (patch/json_patch.go).
                    Err(e) if matches!(e.kind, json_patch::PatchErrorKind::TestFailed) => continue,
                    Err(e) => format!("JSONPath: {e}"),
                },
                Some(Err(message)) => message,
            };
            // Match conditions fail only under `Fail`.
            if self.core.failure == FailurePolicy::Fail {
                return MutationOutcome::Failed(Violation::evaluation_error(error));
            }
        }
        MutationOutcome::Patched { object, patch: json_patch::Patch(applied) }
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
    let operations = items.iter().map(operation).collect::<Result<_, _>>()?;
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
pub type MutatingPolicyBinding = PolicyBinding;
