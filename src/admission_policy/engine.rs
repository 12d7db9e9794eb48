//! The generated policies evaluated offline: `check --engine cel`, and the
//! equivalence tests that hold them to the webhook's rules.
//!
//! Objects are made what the API server hands a policy ([`as_admitted`]);
//! in enforce mode the mutating policies run first, in the order generated,
//! as the API server runs mutating admission before validating admission.

use std::collections::BTreeMap;

use serde_json::{Map, Value, json};

use super::{GeneratedPolicy, all_generated};
use crate::admission::Mode;
use crate::admission::ObjectKind;
use crate::admission::ObjectReport;
use crate::kubernetes_version::KubernetesVersion;
use crate::policy::dra::claims::CLAIM_GROUP;
use crate::policy::{Message, RuleId, Violation};
use crate::settings::Settings;
use kubernetes_cel::{
    Attributes, GroupVersionKind, GroupVersionResource, MutatingPolicy, MutationOutcome,
    PolicyError, Quantity, ValidatingPolicy,
};

/// The generated policies, compiled once.
pub struct PolicyEngine {
    validating: Vec<(RuleId, ValidatingPolicy)>,
    /// The policies that warn in every mode ([`GeneratedPolicy::warn_only`]).
    warning: Vec<(RuleId, ValidatingPolicy)>,
    mutating: Vec<(RuleId, MutatingPolicy)>,
}

/// What the policies decided for one object.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyVerdict {
    /// Each violation with the rule of the policy that found it, and the
    /// policy's name.
    pub violations: Vec<(RuleId, String, String)>,
    /// The object after the mutating policies (enforce mode), if any
    /// changed it.
    pub mutated: Option<Value>,
    /// The operations the mutating policies applied, by rule.
    pub patches: Vec<(RuleId, json_patch::Patch)>,
}

impl PolicyEngine {
    /// For the newest supported release.
    pub fn new(settings: &Settings) -> Result<Self, PolicyError> {
        Self::for_release(settings, KubernetesVersion::default())
    }

    pub fn for_release(
        settings: &Settings,
        release: KubernetesVersion,
    ) -> Result<Self, PolicyError> {
        let compile_v =
            |p: GeneratedPolicy| Ok((p.rule, ValidatingPolicy::from_object(&p.object)?));
        let compile_vs = |list: Vec<GeneratedPolicy>| {
            list.into_iter().map(compile_v).collect::<Result<Vec<_>, PolicyError>>()
        };
        let compile_m = |p: GeneratedPolicy| Ok((p.rule, MutatingPolicy::from_object(&p.object)?));
        let generated = all_generated(settings, release);
        // A release that serves no MutatingAdmissionPolicy (before 1.34)
        // runs none.
        let mutating = match release.mutating_policies() {
            Some(_) => generated.mutating,
            None => Vec::new(),
        };
        let (warning, validating): (Vec<_>, Vec<_>) =
            generated.validating.into_iter().partition(|policy| policy.warn_only);
        Ok(Self {
            validating: compile_vs(validating)?,
            warning: compile_vs(warning)?,
            mutating: mutating.into_iter().map(compile_m).collect::<Result<_, PolicyError>>()?,
        })
    }

    /// Validates the object as the policies would on its creation: its
    /// violations, by rule (not the warnings of the policies that only warn).
    pub fn validate(&self, attributes: &Attributes) -> Vec<(RuleId, String, String)> {
        Self::violations_of(&self.validating, attributes)
    }

    /// What the policies that only warn find, by rule, as [`Self::validate`].
    pub fn warnings(&self, attributes: &Attributes) -> Vec<(RuleId, String, String)> {
        Self::violations_of(&self.warning, attributes)
    }

    fn violations_of(
        policies: &[(RuleId, ValidatingPolicy)],
        attributes: &Attributes,
    ) -> Vec<(RuleId, String, String)> {
        let mut violations = Vec::new();
        for (rule, policy) in policies {
            for violation in policy.evaluate(attributes).violations() {
                violations.push((*rule, policy.name().to_owned(), violation.message.clone()));
            }
        }
        violations
    }

    /// Applies the mutating policies in order; each sees what the ones
    /// before it left. A policy that fails is a violation.
    pub fn mutate(&self, attributes: &Attributes) -> PolicyVerdict {
        let mut verdict = PolicyVerdict::default();
        let mut current = attributes.clone();
        for (rule, policy) in &self.mutating {
            match policy.mutate(&current) {
                MutationOutcome::NotMatched => {}
                MutationOutcome::Patched { object, patch } => {
                    if !patch.0.is_empty() {
                        verdict.patches.push((*rule, patch));
                        verdict.mutated = Some(object.clone());
                        current.object = Some(object);
                    }
                }
                MutationOutcome::Failed(violation) => {
                    verdict.violations.push((*rule, policy.name().to_owned(), violation.message));
                }
            }
        }
        verdict
    }

    /// The mutating policy of one rule alone, on `attributes`.
    pub fn mutate_rule(&self, rule: RuleId, attributes: &Attributes) -> Option<MutationOutcome> {
        self.mutating.iter().find(|(r, _)| *r == rule).map(|(_, policy)| policy.mutate(attributes))
    }

    /// `check --engine cel`: what the policies alone decide for the
    /// object's creation (with `old`, its update) in a namespace of `mode`,
    /// in `check`'s report shape, as the modes decide at admission.
    pub fn report(
        &self,
        object: &Value,
        old: Option<&Value>,
        default_namespace: &str,
        mode: Mode,
        annotations: &BTreeMap<String, String>,
    ) -> ObjectReport {
        let mut report = ObjectReport::allowed(object, default_namespace);
        let namespace = report.namespace.clone();
        let Some(mut attributes) =
            create_attributes(object, &namespace, mode.as_str(), annotations)
        else {
            report.ignored = true;
            return report;
        };
        if let Some(old) = old {
            attributes.operation = "UPDATE".to_owned();
            attributes.old_object = Some(as_admitted(old));
        }
        let mut violations = Vec::new();
        if mode == Mode::Enforce {
            let verdict = self.mutate(&attributes);
            for (rule, patch) in verdict.patches {
                for operation in &patch.0 {
                    report.changes.push((rule, describe(operation)));
                }
                report.patch.extend(patch.0);
            }
            violations.extend(verdict.violations);
            if let Some(mutated) = verdict.mutated {
                attributes.object = Some(mutated);
            }
        }
        violations.extend(self.validate(&attributes));
        let messages = violations.into_iter().map(|(rule, _, message)| Violation {
            rule,
            message: Message::new(message.strip_prefix(Message::PREFIX).unwrap_or(&message)),
        });
        report.violations = messages.collect();
        match mode {
            Mode::Enforce if !report.violations.is_empty() => {
                report.allowed = false;
                report.patch.clear();
                let bodies: Vec<&str> =
                    report.violations.iter().map(|v| v.message.body()).collect();
                report.denial = Some(Message::new(bodies.join("; ")).into_string());
            }
            Mode::Warn => {
                report.warnings = report.violations.iter().map(|v| v.message.to_string()).collect();
            }
            _ => {}
        }
        if mode != Mode::Audit {
            let warnings: Vec<String> =
                self.warnings(&attributes).into_iter().map(|(_, _, message)| message).collect();
            report.warnings.extend(warnings.iter().cloned());
            // What `check` prints.
            report.warnings_in_full.extend(warnings);
        }
        report
    }
}

/// A JSON Patch operation for people: `add /spec/runtimeClassName`.
fn describe(operation: &json_patch::PatchOperation) -> String {
    let value = serde_json::to_value(operation).unwrap_or_default();
    let op = value.get("op").and_then(Value::as_str).unwrap_or("");
    let path = value.get("path").and_then(Value::as_str).unwrap_or("");
    format!("{op} {path}")
}

/// The object as the API server hands it to admission policies: decoded
/// into its type and encoded again, which writes every quantity as a
/// string and drops `null` fields.
pub fn as_admitted(object: &Value) -> Value {
    let mut object = object.clone();
    drop_nulls(&mut object);
    quantities_as_strings(&mut object);
    object
}

fn drop_nulls(value: &mut Value) {
    match value {
        Value::Object(map) => {
            map.retain(|_, v| !v.is_null());
            map.values_mut().for_each(drop_nulls);
        }
        Value::Array(items) => items.iter_mut().for_each(drop_nulls),
        _ => {}
    }
}

/// `resources.limits`/`requests` values as the API server writes them:
/// strings (a JSON number `1` is `"1"`), and a whole value as the integer
/// it is (`2000m` is `"2"`), wherever a container sits. Values that are no
/// quantity stay as written (the API server would refuse the object).
fn quantities_as_strings(value: &mut Value) {
    match value {
        Value::Object(map) => {
            if let Some(Value::Object(resources)) = map.get_mut("resources") {
                for field in ["limits", "requests"] {
                    if let Some(Value::Object(values)) = resources.get_mut(field) {
                        for v in values.values_mut() {
                            if let Value::Number(n) = v {
                                *v = Value::String(n.to_string());
                            }
                            if let Value::String(text) = v
                                && let Some(whole) =
                                    Quantity::parse(text).ok().and_then(|q| q.whole_value())
                            {
                                *text = whole.to_string();
                            }
                        }
                    }
                }
            }
            map.values_mut().for_each(quantities_as_strings);
        }
        Value::Array(items) => items.iter_mut().for_each(quantities_as_strings),
        _ => {}
    }
}

/// The group, version and resource of a manifest's kind, for the kinds the
/// policies match; None for the others.
pub fn resource_of(
    kind: ObjectKind,
    api_version: &str,
) -> Option<(GroupVersionKind, GroupVersionResource)> {
    let (group, kind, resource): (&str, &str, &str) = match kind {
        ObjectKind::Pod => ("", "Pod", "pods"),
        ObjectKind::Workload(workload) => (workload.group(), workload.kind(), workload.resource()),
        ObjectKind::Claim(claim) => (CLAIM_GROUP, claim.as_str(), claim.resource()),
        _ => return None,
    };
    // `resource.k8s.io/v1beta1` is `v1beta1`; the core group's `v1` is `v1`.
    let version = api_version.rsplit('/').next().unwrap_or(api_version).to_owned();
    Some((
        GroupVersionKind {
            group: group.to_owned(),
            version: version.clone(),
            kind: kind.to_owned(),
        },
        GroupVersionResource { group: group.to_owned(), version, resource: resource.to_owned() },
    ))
}
/// A CREATE of `object` in `namespace`, whose Namespace carries
/// `annotations` and the mode label; None for a kind the policies ignore.
/// do not match.
pub fn create_attributes(
    object: &Value,
    namespace: &str,
    mode: &str,
    annotations: &BTreeMap<String, String>,
) -> Option<Attributes> {
    let api_version = object.get("apiVersion").and_then(Value::as_str)?;
    let kind = object.get("kind").and_then(Value::as_str)?;
    let (gvk, gvr) = resource_of(ObjectKind::of_manifest(api_version, kind), api_version)?;
    let mut attributes = Attributes::create(as_admitted(object), gvk, gvr);
    attributes.namespace = namespace.to_owned();
    attributes.namespace_object = Some(namespace_object(namespace, mode, annotations));
    attributes.user_info.username = "gpu-policy-check".to_owned();
    Some(attributes)
}

pub fn namespace_object(
    namespace: &str,
    mode: &str,
    annotations: &BTreeMap<String, String>,
) -> Value {
    let annotations: Map<String, Value> =
        annotations.iter().map(|(k, v)| (k.clone(), Value::String(v.clone()))).collect();
    json!({
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {
            "name": namespace,
            "labels": {crate::settings::MODE_LABEL: mode},
            "annotations": annotations,
        }
    })
}

#[cfg(test)]
mod tests;
