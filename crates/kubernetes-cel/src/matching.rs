//! Which requests a policy or binding applies to: `matchConstraints` /
//! `matchResources` (resource rules, exclusions, namespace and object
//! selectors).
//!
//! Reads `resourceRules` and `excludeResourceRules` (apiGroups, apiVersions,
//! resources with `res/sub`, `*`, `*/*`, `res/*`, `*/sub`, operations,
//! scope), `namespaceSelector` and `objectSelector` (matchLabels;
//! matchExpressions In, NotIn, Exists, DoesNotExist). Follows
//! `k8s.io/apiserver/pkg/admission/plugin/policy/matching/matching.go`,
//! `k8s.io/apiserver/pkg/admission/plugin/webhook/predicates/rules/rules.go`
//! and `k8s.io/apimachinery/pkg/labels/selector.go`.

use super::{
    Attributes, PolicyError, field_error, list_field, name_and_spec, string_field, string_list,
};
use serde_json::Value as Json;
use std::collections::BTreeMap;

/// A `metav1.LabelSelector`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    match_labels: BTreeMap<String, String>,
    expressions: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Requirement {
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
}

impl LabelSelector {
    /// Reads a selector; absent or `{}` selects everything.
    pub fn from_json(json: Option<&Json>, path: &str) -> Result<Self, PolicyError> {
        let Some(json) = json.filter(|j| !j.is_null()) else {
            return Ok(LabelSelector::default());
        };
        let mut match_labels = BTreeMap::new();
        if let Some(labels) = json.get("matchLabels").filter(|l| !l.is_null()) {
            let labels = labels
                .as_object()
                .ok_or_else(|| field_error(&format!("{path}.matchLabels"), "must be a map"))?;
            for (k, v) in labels {
                let v = v.as_str().ok_or_else(|| {
                    field_error(&format!("{path}.matchLabels.{k}"), "must be a string")
                })?;
                match_labels.insert(k.clone(), v.to_owned());
            }
        }
        let mut expressions = Vec::new();
        for (i, e) in list_field(json, "matchExpressions", path)?.iter().enumerate() {
            let at = format!("{path}.matchExpressions[{i}]");
            let key = string_field(e, "key", &at)?;
            let values = string_list(e, "values", &at)?;
            let requirement = match string_field(e, "operator", &at)?.as_str() {
                "In" => Requirement::In(key, values),
                "NotIn" => Requirement::NotIn(key, values),
                "Exists" => Requirement::Exists(key),
                "DoesNotExist" => Requirement::DoesNotExist(key),
                other => {
                    return Err(field_error(
                        &format!("{at}.operator"),
                        format!("unsupported operator {other:?}"),
                    ));
                }
            };
            expressions.push(requirement);
        }
        Ok(LabelSelector { match_labels, expressions })
    }

    /// Whether an object with these labels is selected.
    pub fn matches(&self, labels: &serde_json::Map<String, Json>) -> bool {
        let label = |k: &str| labels.get(k).and_then(Json::as_str);
        self.match_labels.iter().all(|(k, v)| label(k) == Some(v.as_str()))
            && self.expressions.iter().all(|r| match r {
                Requirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
                // NotIn also selects objects without the label.
                Requirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
                Requirement::Exists(k) => labels.contains_key(k),
                Requirement::DoesNotExist(k) => !labels.contains_key(k),
            })
    }
}

fn labels_of(object: Option<&Json>) -> serde_json::Map<String, Json> {
    object
        .and_then(|o| o.pointer("/metadata/labels"))
        .and_then(Json::as_object)
        .cloned()
        .unwrap_or_default()
}

/// One `NamedRuleWithOperations`.
#[derive(Debug, Clone)]
struct ResourceRule {
    api_groups: Vec<String>,
    api_versions: Vec<String>,
    resources: Vec<String>,
    operations: Vec<String>,
    scope: String,
}

impl ResourceRule {
    fn read(json: &Json, path: &str) -> Result<Self, PolicyError> {
        let strings = |key: &str| string_list(json, key, path);
        Ok(ResourceRule {
            api_groups: strings("apiGroups")?,
            api_versions: strings("apiVersions")?,
            resources: strings("resources")?,
            operations: strings("operations")?,
            scope: json.get("scope").and_then(Json::as_str).unwrap_or("*").to_owned(),
        })
    }

    /// `rules.Matcher.Matches`.
    fn matches(&self, a: &Attributes) -> bool {
        let any = |list: &[String], value: &str| list.iter().any(|x| x == "*" || x == value);
        let resource = self.resources.iter().any(|r| {
            let (res, sub) = r.split_once('/').unwrap_or((r, ""));
            (res == "*" || res == a.resource.resource) && (sub == "*" || sub == a.sub_resource)
        });
        let scope = match self.scope.as_str() {
            "Cluster" => a.namespace.is_empty(),
            "Namespaced" => !a.namespace.is_empty() || a.resource.resource == "namespaces",
            _ => true,
        };
        any(&self.operations, &a.operation)
            && any(&self.api_groups, &a.resource.group)
            && any(&self.api_versions, &a.resource.version)
            && resource
            && scope
    }
}

/// `MatchResources`: what a policy's `matchConstraints` or a binding's
/// `matchResources` selects.
#[derive(Debug, Clone, Default)]
pub(crate) struct MatchResources {
    /// Absent on a binding: the policy's constraints alone decide.
    rules: Option<Vec<ResourceRule>>,
    excluded: Vec<ResourceRule>,
    namespace_selector: LabelSelector,
    object_selector: LabelSelector,
}

impl MatchResources {
    pub fn read(json: Option<&Json>, path: &str) -> Result<Self, PolicyError> {
        let Some(json) = json.filter(|j| !j.is_null()) else {
            return Ok(MatchResources::default());
        };
        let rules = |key: &str| -> Result<Vec<ResourceRule>, PolicyError> {
            list_field(json, key, path)?
                .iter()
                .enumerate()
                .map(|(i, r)| ResourceRule::read(r, &format!("{path}.{key}[{i}]")))
                .collect()
        };
        let selector =
            |key: &str| LabelSelector::from_json(json.get(key), &format!("{path}.{key}"));
        Ok(MatchResources {
            rules: json.get("resourceRules").map(|_| rules("resourceRules")).transpose()?,
            excluded: rules("excludeResourceRules")?,
            namespace_selector: selector("namespaceSelector")?,
            object_selector: selector("objectSelector")?,
        })
    }

    /// `matching.Matcher.Matches` (without the equivalent-resource lookup:
    /// a request matches on the resource it names).
    pub fn matches(&self, a: &Attributes) -> bool {
        // The namespace selector: a Namespace matches on its own labels, a
        // cluster-scoped object always, a namespaced one on its namespace's.
        let namespace_labels = if a.resource.resource == "namespaces" && a.sub_resource.is_empty() {
            Some(labels_of(a.object.as_ref().or(a.old_object.as_ref())))
        } else if a.namespace.is_empty() {
            None
        } else {
            Some(labels_of(a.namespace_object.as_ref()))
        };
        let namespace = namespace_labels.is_none_or(|l| self.namespace_selector.matches(&l));
        // The object selector matches the object or the old object.
        let object = [a.object.as_ref(), a.old_object.as_ref()]
            .into_iter()
            .flatten()
            .any(|o| self.object_selector.matches(&labels_of(Some(o))))
            || (a.object.is_none()
                && a.old_object.is_none()
                && self.object_selector.matches(&serde_json::Map::new()));
        let included = self.rules.as_ref().is_none_or(|rules| rules.iter().any(|r| r.matches(a)));
        let excluded = self.excluded.iter().any(|r| r.matches(a));
        namespace && object && included && !excluded
    }

    /// For a policy's `matchConstraints`, which must name resource rules.
    pub fn require_rules(self, path: &str) -> Result<Self, PolicyError> {
        match self.rules {
            Some(_) => Ok(self),
            None => Err(field_error(&format!("{path}.resourceRules"), "required")),
        }
    }
}

/// A MutatingAdmissionPolicyBinding, and what a
/// ValidatingAdmissionPolicyBinding reads besides its actions: the name,
/// `spec.policyName` and `spec.matchResources`.
#[derive(Debug, Clone)]
pub struct PolicyBinding {
    name: String,
    policy_name: String,
    match_resources: MatchResources,
}

impl PolicyBinding {
    /// Reads a binding object.
    pub fn from_object(object: &Json) -> Result<Self, PolicyError> {
        let (name, spec) = name_and_spec(object)?;
        Ok(PolicyBinding {
            name,
            policy_name: string_field(spec, "policyName", "spec")?,
            match_resources: MatchResources::read(
                spec.get("matchResources"),
                "spec.matchResources",
            )?,
        })
    }

    /// `metadata.name`.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// `spec.policyName`.
    pub fn policy_name(&self) -> &str {
        &self.policy_name
    }

    /// Whether the binding's `matchResources` select the request.
    pub fn matches(&self, attributes: &Attributes) -> bool {
        self.match_resources.matches(attributes)
    }

    /// Whether it binds the policy `policy` and selects the request.
    pub(super) fn selects(&self, policy: &str, attributes: &Attributes) -> bool {
        self.policy_name == policy && self.matches(attributes)
    }
}
