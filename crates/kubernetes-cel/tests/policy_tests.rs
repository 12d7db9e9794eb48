//! ValidatingAdmissionPolicy and MutatingAdmissionPolicy evaluation on small
//! hand-written policies.

use kubernetes_cel::*;
use serde_json::Value as Json;
use serde_json::json;

fn pod_kind() -> GroupVersionKind {
    GroupVersionKind { group: String::new(), version: "v1".into(), kind: "Pod".into() }
}

fn pods() -> GroupVersionResource {
    GroupVersionResource { group: String::new(), version: "v1".into(), resource: "pods".into() }
}

fn pod(gpus: &str) -> Json {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml", "labels": {"app": "train"}},
        "spec": {"containers": [
            {"name": "main", "image": "cuda:12", "resources": {"limits": {"nvidia.com/gpu": gpus}}},
            {"name": "side", "image": "busybox"}
        ]}
    })
}

fn create(object: Json) -> Attributes {
    let mut a = Attributes::create(object, pod_kind(), pods());
    a.namespace_object =
        Some(json!({"metadata": {"name": "ml", "labels": {"example.com/mode": "enforce"}}}));
    a
}

fn bounded_requests_policy(failure: &str) -> ValidatingPolicy {
    ValidatingPolicy::from_object(&json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "bounded-requests"},
        "spec": {
            "failurePolicy": failure,
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"],
                "operations": ["CREATE", "UPDATE"], "resources": ["pods"]
            }]},
            "matchConditions": [{"name": "not-kube-system", "expression": "request.namespace != 'kube-system'"}],
            "variables": [
                {"name": "containers", "expression": "object.spec.containers"},
                {"name": "gpuContainers", "expression":
                    "variables.containers.filter(c, has(c.resources) && has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits)"},
                {"name": "tooMany", "expression":
                    "variables.gpuContainers.filter(c, quantity(c.resources.limits['nvidia.com/gpu']).isGreaterThan(quantity('4'))).map(c, c.name)"}
            ],
            "validations": [
                {"expression": "size(variables.tooMany) == 0",
                 "messageExpression": "'containers ' + variables.tooMany.join(', ') + ' request more than 4 GPUs'",
                 "reason": "Forbidden"},
                {"expression": "variables.gpuContainers.all(c, isQuantity(c.resources.limits['nvidia.com/gpu']))",
                 "message": "GPU limits must be quantities"},
                {"expression": "object.metadata.name != 'forbidden'"}
            ]
        }
    })).expect("policy compiles")
}

#[test]
fn a_pod_within_bounds_passes_and_one_beyond_is_denied_with_the_message_expression() {
    let policy = bounded_requests_policy("Fail");
    assert_eq!(policy.evaluate(&create(pod("2"))), PolicyOutcome::Evaluated { violations: vec![] });
    assert_eq!(
        policy.evaluate(&create(pod("8"))).violations(),
        [Violation {
            message: "containers main request more than 4 GPUs".into(),
            reason: "Forbidden".into(),
            cause: ViolationCause::Denied,
        }]
    );
}

#[test]
fn messages_fall_back_to_message_then_to_the_expression() {
    let mut object = pod("1");
    object["metadata"]["name"] = json!("forbidden");
    let outcome = bounded_requests_policy("Fail").evaluate(&create(object));
    assert_eq!(outcome.violations().len(), 1);
    assert_eq!(
        outcome.violations()[0].message,
        "failed expression: object.metadata.name != 'forbidden'"
    );
    assert_eq!(outcome.violations()[0].reason, "Invalid");
}

#[test]
fn evaluation_errors_follow_the_failure_policy() {
    // "lots" is no quantity: quantity() fails in the variable, so the first
    // validation errors; isQuantity() is false, so the second denies.
    let fail = bounded_requests_policy("Fail").evaluate(&create(pod("lots")));
    let causes: Vec<_> = fail.violations().iter().map(|v| v.cause).collect();
    assert_eq!(causes, [ViolationCause::EvaluationError, ViolationCause::Denied]);
    assert!(
        fail.violations()[0]
            .message
            .starts_with("expression 'size(variables.tooMany) == 0' resulted in error")
    );
    assert_eq!(fail.violations()[1].message, "GPU limits must be quantities");
    let ignore = bounded_requests_policy("Ignore").evaluate(&create(pod("lots")));
    assert_eq!(ignore.violations().len(), 1);
    assert_eq!(ignore.violations()[0].cause, ViolationCause::Denied);
}

#[test]
fn match_constraints_and_conditions_decide_whether_the_policy_applies() {
    let policy = bounded_requests_policy("Fail");
    let mut ephemeral = create(pod("8"));
    ephemeral.sub_resource = "ephemeralcontainers".into();
    assert_eq!(policy.evaluate(&ephemeral), PolicyOutcome::NotMatched);
    let mut delete = create(pod("8"));
    delete.operation = "DELETE".into();
    assert_eq!(policy.evaluate(&delete), PolicyOutcome::NotMatched);
    let mut system = create(pod("8"));
    system.namespace = "kube-system".into();
    assert_eq!(policy.evaluate(&system), PolicyOutcome::NotMatched);
}

#[test]
fn bindings_select_namespaces_by_labels() {
    let policy = bounded_requests_policy("Fail");
    let binding = |selector: Json| {
        ValidatingPolicyBinding::from_object(&json!({
            "metadata": {"name": "b"},
            "spec": {"policyName": "bounded-requests", "validationActions": ["Deny"],
                     "matchResources": {"namespaceSelector": selector}}
        }))
        .expect("binding")
    };
    let enforce = binding(json!({"matchLabels": {"example.com/mode": "enforce"}}));
    assert_eq!(enforce.validation_actions(), [ValidationAction::Deny]);
    let warn = binding(
        json!({"matchExpressions": [{"key": "example.com/mode", "operator": "In", "values": ["warn"]}]}),
    );
    let not_audit = binding(
        json!({"matchExpressions": [{"key": "example.com/mode", "operator": "NotIn", "values": ["audit"]}]}),
    );
    let unlabelled = binding(
        json!({"matchExpressions": [{"key": "example.com/mode", "operator": "DoesNotExist"}]}),
    );
    let labelled =
        binding(json!({"matchExpressions": [{"key": "example.com/mode", "operator": "Exists"}]}));
    let request = create(pod("8"));
    assert_eq!(policy.evaluate_bound(&enforce, &request).violations().len(), 1);
    assert_eq!(policy.evaluate_bound(&warn, &request), PolicyOutcome::NotMatched);
    assert_eq!(policy.evaluate_bound(&not_audit, &request).violations().len(), 1);
    assert_eq!(policy.evaluate_bound(&unlabelled, &request), PolicyOutcome::NotMatched);
    assert_eq!(policy.evaluate_bound(&labelled, &request).violations().len(), 1);
    let mut bare = create(pod("8"));
    bare.namespace_object = Some(json!({"metadata": {"name": "ml"}}));
    assert!(not_audit.matches(&bare) && unlabelled.matches(&bare) && !labelled.matches(&bare));
}

#[test]
fn policies_that_do_not_compile_or_lack_fields_are_refused() {
    let broken = json!({"metadata": {"name": "x"}, "spec": {
        "matchConstraints": {"resourceRules": []},
        "validations": [{"expression": "object.("}]}});
    assert!(matches!(ValidatingPolicy::from_object(&broken), Err(PolicyError::Compile { .. })));
    let no_rules = json!({"metadata": {"name": "x"}, "spec": {"validations": []}});
    assert!(matches!(ValidatingPolicy::from_object(&no_rules), Err(PolicyError::Field { .. })));
}

fn runtime_policy() -> MutatingPolicy {
    MutatingPolicy::from_object(&json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingAdmissionPolicy",
        "metadata": {"name": "runtime-class"},
        "spec": {
            "reinvocationPolicy": "IfNeeded",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]
            }]},
            "variables": [{"name": "gpu", "expression":
                "object.spec.containers.filter(c, has(c.resources) && has(c.resources.limits) && 'nvidia.com/gpu' in c.resources.limits).map(c, c.name)"}],
            "mutations": [
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "size(variables.gpu) == 0 ? [] : [JSONPatch{op: 'add', path: '/spec/runtimeClassName', value: 'nvidia'}]"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "object.spec.containers.map(c, c.name).filter(n, n in variables.gpu).map(n, JSONPatch{op: 'add', path: '/spec/containers/0/env', value: [{'name': 'NVIDIA_VISIBLE_DEVICES', 'value': 'void'}]})"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'add', path: '/metadata/annotations', value: {}}, JSONPatch{op: 'add', path: '/metadata/annotations/' + jsonpatch.escapeKey('example.com/runtime'), value: object.spec.runtimeClassName}]"}}
            ]
        }
    }))
    .expect("policy compiles")
}

#[test]
fn a_json_patch_mutation_sets_a_field_and_adds_an_env_var() {
    let policy = runtime_policy();
    assert_eq!(policy.reinvocation_policy(), "IfNeeded");
    let MutationOutcome::Patched { object, patch } = policy.mutate(&create(pod("1"))) else {
        panic!("expected a patch");
    };
    assert_eq!(object["spec"]["runtimeClassName"], "nvidia");
    assert_eq!(
        object["spec"]["containers"][0]["env"],
        json!([{"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"}])
    );
    assert_eq!(object["spec"]["containers"][1].get("env"), None);
    // Later mutations see the object as earlier ones left it.
    assert_eq!(object["metadata"]["annotations"], json!({"example.com/runtime": "nvidia"}));
    assert_eq!(patch.0.len(), 4);
}

#[test]
fn a_failing_mutation_follows_the_failure_policy() {
    // A pod without GPUs has no runtimeClassName: the third mutation's value
    // fails (no such key).
    let mut no_gpu = pod("1");
    no_gpu["spec"]["containers"][0]["resources"] = json!({});
    assert!(matches!(runtime_policy().mutate(&create(no_gpu)), MutationOutcome::Failed(_)));
}

#[test]
fn mutating_bindings_select_by_policy_name_and_namespace() {
    let policy = runtime_policy();
    let binding = MutatingPolicyBinding::from_object(&json!({"metadata": {"name": "b"}, "spec": {
        "policyName": "runtime-class",
        "matchResources": {"namespaceSelector": {"matchLabels": {"example.com/mode": "warn"}}}}}))
    .expect("binding");
    assert_eq!(policy.mutate_bound(&binding, &create(pod("1"))), MutationOutcome::NotMatched);
    let mut warn = create(pod("1"));
    warn.namespace_object = Some(json!({"metadata": {"labels": {"example.com/mode": "warn"}}}));
    assert!(matches!(policy.mutate_bound(&binding, &warn), MutationOutcome::Patched { .. }));
}

#[test]
fn a_failed_test_operation_leaves_the_object_unchanged_without_error() {
    let policy = MutatingPolicy::from_object(&json!({
        "metadata": {"name": "guarded"},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {"resourceRules": [{
                "apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]
            }]},
            "mutations": [
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'test', path: '/metadata/name', value: 'other'}, JSONPatch{op: 'add', path: '/metadata/labels/x', value: 'y'}]"}},
                {"patchType": "JSONPatch", "jsonPatch": {"expression":
                    "[JSONPatch{op: 'copy', from: '/metadata/name', path: '/metadata/labels/copied'}]"}}
            ]
        }
    }))
    .expect("policy compiles");
    let MutationOutcome::Patched { object, patch } = policy.mutate(&create(pod("1"))) else {
        panic!("expected a patch");
    };
    assert_eq!(object["metadata"]["labels"], json!({"app": "train", "copied": "p"}));
    assert_eq!(patch.0.len(), 1);
}

#[test]
fn variables_hold_quantities_and_values_of_every_json_type() {
    let policy = ValidatingPolicy::from_object(&json!({
        "metadata": {"name": "kinds"},
        "spec": {
            "matchConstraints": {"resourceRules": [{
                "apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]
            }]},
            "variables": [
                {"name": "limit", "expression": "quantity('4')"},
                {"name": "first", "expression": "object.spec.containers[0]"},
                {"name": "scalars", "expression": "[1, 2.5, true, null, 'x']"}
            ],
            "validations": [
                {"expression": "quantity(variables.first.resources.limits['nvidia.com/gpu']).isLessThan(variables.limit)"},
                {"expression": "variables.scalars == [1, 2.5, true, null, 'x'] && variables.first.name == 'main'"}
            ]
        }
    }))
    .expect("policy compiles");
    assert_eq!(policy.evaluate(&create(pod("2"))).violations(), []);
    assert_eq!(policy.evaluate(&create(pod("5"))).violations().len(), 1);
}

#[test]
fn the_request_variable_leaves_out_empty_fields() {
    let validation = |expression: &str| {
        let policy = ValidatingPolicy::from_object(&json!({
            "metadata": {"name": "request"},
            "spec": {
                "matchConstraints": {"resourceRules": [{
                    "apiGroups": ["*"], "apiVersions": ["*"], "operations": ["*"], "resources": ["*"]
                }]},
                "validations": [{"expression": expression}]
            }
        }))
        .expect("policy compiles");
        policy.evaluate(&create(pod("1"))).violations().to_vec()
    };
    let present = "request.kind.kind == 'Pod' && request.requestResource.resource == 'pods' \
         && request.operation == 'CREATE' && request.name == 'p' && request.namespace == 'ml' \
         && request.uid == '' && !request.dryRun";
    assert_eq!(validation(present), []);
    let absent = "!has(request.subResource) && !has(request.requestSubResource) \
         && !has(request.userInfo.username) && !has(request.userInfo.groups)";
    assert_eq!(validation(absent), []);
    let failed = validation("request.userInfo.username == ''");
    assert_eq!(failed.len(), 1);
    assert_eq!(failed[0].cause, ViolationCause::EvaluationError);
}
