//! `--cost` over the generated policies (every expression estimated;
//! the tests/it admission_policies::cost test holds docs/policy.md's tables
//! to `manifests --cost`), over real objects (the figures of docs/policy.md
//! the computed ones),
//! and its arithmetic on small policies whose costs are derived by hand.

use serde_json::json;

use super::*;
use crate::settings::Settings;

fn generated() -> Vec<Value> {
    let settings = Settings::default();
    policies(&settings, true)
}

fn worst_cases() -> Vec<PolicyCost> {
    generated().iter().map(|policy| policy_cost(policy, &Inputs::worst_case(policy))).collect()
}

#[test]
fn every_expression_of_every_generated_policy_is_estimated() {
    let costs = worst_cases();
    assert_eq!(costs.len(), 7);
    for policy in &costs {
        assert!(!policy.expressions.is_empty(), "{}", policy.name);
        for e in &policy.expressions {
            assert!(e.cost.is_ok(), "{} {}: {:?}", policy.name, e.name, e.cost);
        }
    }
}

/// The settings that change what the expressions say: each generates
/// policies whose every expression is estimated.
#[rstest::rstest]
#[case("runtimeClassName: ''", 6)]
#[case("privilegedGpu: deny", 7)]
#[case("gpuSharing: {kaiScheduler: {enabled: false}, hami: {enabled: false}}", 7)]
#[case("gpuSharing: {kaiScheduler: {enabled: false}}", 7)]
#[case("gpuSharing: {hami: {enabled: false}}", 7)]
#[case("{gpuResources: ['nvidia.com/gpu*'], gpuSharing: {kaiScheduler: {schedulerName: x}}}", 7)]
fn every_expression_is_estimated_under_other_settings(#[case] yaml: &str, #[case] count: usize) {
    let settings = Settings::from_yaml(yaml, "c.yaml").unwrap_or_else(|err| panic!("{err}"));
    let generated = policies(&settings, true);
    assert_eq!(generated.len(), count);
    for policy in &generated {
        let cost = policy_cost(policy, &Inputs::worst_case(policy));
        for e in &cost.expressions {
            assert!(e.cost.is_ok(), "{yaml}: {} {}: {:?}", cost.name, e.name, e.cost);
        }
    }
}

/// A table whose reference costs are the worst case's.
fn on_itself(cost: PolicyCost) -> PolicyCheck {
    PolicyCheck { worst: cost.clone(), reference_name: "itself".to_owned(), reference: cost }
}

/// A policy of one variable, one validation and its message.
fn small_policy(variable: &str, validation: &str, message: &str) -> Value {
    json!({
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": "small"},
        "spec": {
            "matchConstraints": {"resourceRules": [{"resources": ["pods"]}]},
            "matchConditions": [{"name": "is-pod", "expression": "object.kind == 'Pod'"}],
            "variables": [{"name": "names", "expression": variable}],
            "validations": [{"expression": validation, "messageExpression": message}],
        }
    })
}

#[test]
fn a_variable_has_the_shape_its_expression_computes() {
    // names: containers (object.spec.containers 3) map, start [] 10,
    // result 1; per container: condition 0, step @result + [c.name]
    // = 1 (@result) + (10 + 2) + 1 = 14: [14, 14 + N × 14] with N =
    // 241,978. The validation reads it: variables.names 2 + all over N
    // names: result 1, per name 2 + [1, 1 + (n 1 + ⌈min(S, 0) × 0.1⌉ = 0)]
    // = [3, 4]: [3, 3 + N × 4]. The message: a literal, 0.
    let policy = small_policy(
        "object.spec.containers.map(c, c.name)",
        "variables.names.all(n, n != '')",
        "'x'",
    );
    let cost = policy_cost(&policy, &Inputs::worst_case(&policy));
    let n = 241_978;
    let costs: Vec<_> = cost.expressions.iter().map(|e| e.cost.clone()).collect();
    assert_eq!(
        costs,
        vec![
            // object.kind 2, == ⌈3 × 0.1⌉ = 1.
            Ok(Bounds::fixed(3)),
            Ok(Bounds { min: 14, max: 14 + n * 14 }),
            Ok(Bounds { min: 3, max: 3 + n * 4 }),
            Ok(Bounds::fixed(0)),
        ]
    );
    assert_eq!(cost.match_conditions(), Ok(Bounds::fixed(3)));
    assert_eq!(cost.runtime(), Ok(Bounds { min: 17, max: 17 + n * 18 }));
    // names: 3,387,706 > 1,000,000; the total 4,355,621 within 10,000,000.
    assert!(!cost.expressions[1].cost.as_ref().is_ok_and(|c| c.within(PER_CALL_LIMIT)));
    assert!(cost.runtime().is_ok_and(|c| c.within(RUNTIME_COST_BUDGET)));
    assert!(!cost.within_limits());
    let table = markdown(&on_itself(cost));
    assert!(
        table.contains("| variable `names` | 3,387,706 | 3,387,706 | 1,000,000 | **over** |"),
        "{table}"
    );
    assert!(
        table.contains("| the rest together | 4,355,621 | 4,355,621 | 10,000,000 | within |"),
        "{table}"
    );
}

#[test]
fn an_expression_it_cannot_estimate_fails_the_policy() {
    let policy = small_policy("object.spec.containers", "true", "object.kind.reverse()");
    let cost = policy_cost(&policy, &Inputs::worst_case(&policy));
    assert_eq!(cost.expressions[3].cost, Err(CostError::UnsupportedFunction("reverse".to_owned())));
    assert!(cost.runtime().is_err());
    assert!(!cost.within_limits());
    assert!(markdown(&on_itself(cost)).contains("not estimated"));
}

#[test]
fn one_request_is_estimated_with_its_own_sizes() {
    // Two containers, the longest name 4 characters; no init containers.
    let pod = json!({"kind": "Pod", "spec": {"containers": [{"name": "a"}, {"name": "bcde"}]}});
    let policy = small_policy(
        "has(object.spec.initContainers) ? object.spec.initContainers : object.spec.containers",
        "variables.names.all(c, c.name != '')",
        "'x'",
    );
    let inputs = Inputs::request(&pod, &Value::Null, &Value::Null, &json!({"operation": "CREATE"}));
    let cost = policy_cost(&policy, &inputs);
    let costs: Vec<_> = cost.expressions.iter().map(|e| e.cost.clone()).collect();
    // The variable: has() 2, the branches 3 (the absent list) or 3.
    // The validation: 2 + result 1 + per container (of exactly 2)
    // 2 + [1, 1 + 2 + 0].
    assert_eq!(
        costs,
        vec![
            Ok(Bounds::fixed(3)),
            Ok(Bounds::fixed(5)),
            Ok(Bounds { min: 3 + 2 * 3, max: 3 + 2 * 5 }),
            Ok(Bounds::fixed(0)),
        ]
    );
    assert!(cost.within_limits());
}

/// The fixtures' objects and a few pods of many containers, each with
/// the policies that apply to its kind.
fn real_objects() -> Vec<(String, Value)> {
    let fixtures = [
        "05-device-plugin-readme-gpu-pod.yaml",
        "07-vllm-mistral-7b-deployment.yaml",
        "08-axolotl-training-job.yaml",
        "01-k8s-device-plugin-daemonset.yaml",
        "22-dra-gpu-test3-shared-resourceclaim.yaml",
        "23-dra-gpu-test5-two-requests-opaque-config.yaml",
    ];
    let mut objects = Vec::new();
    for fixture in fixtures {
        let path = format!("{}/tests/fixtures/{fixture}", env!("CARGO_MANIFEST_DIR"));
        let text = std::fs::read_to_string(&path).expect("fixture");
        for document in crate::manifest::parse(&text, &path, false).expect("parses") {
            let kind = document.object["kind"].as_str().unwrap_or_default().to_owned();
            if kind != "Namespace" && kind != "Service" {
                let mut object = document.object;
                quantities_as_strings(&mut object);
                objects.push((format!("{fixture} ({kind})"), object));
            }
        }
    }
    for n in [10, 50] {
        objects.push((format!("a Pod of {n} sidecars and {n} containers"), pod_of_containers(n)));
    }
    objects
}

/// The API server sends quantities as strings (`nvidia.com/gpu: 1` in
/// YAML is `"1"` in the request).
fn quantities_as_strings(value: &mut Value) {
    match value {
        Value::Object(fields) => {
            for (name, field) in fields.iter_mut() {
                match (name.as_str(), field) {
                    ("limits" | "requests", Value::Object(quantities)) => {
                        for quantity in quantities.values_mut() {
                            if let Value::Number(n) = quantity {
                                *quantity = Value::String(n.to_string());
                            }
                        }
                    }
                    (_, field) => quantities_as_strings(field),
                }
            }
        }
        Value::Array(items) => items.iter_mut().for_each(quantities_as_strings),
        _ => {}
    }
}

fn applies(policy: &Value, kind: &str) -> bool {
    let resources: Vec<&Value> = array(&policy["spec"]["matchConstraints"]["resourceRules"])
        .iter()
        .flat_map(|rule| array(&rule["resources"]))
        .collect();
    let resource = match kind {
        "Pod" => "pods",
        "ResourceClaim" => "resourceclaims",
        "ResourceClaimTemplate" => "resourceclaimtemplates",
        "Deployment" => "deployments",
        "Job" => "jobs",
        "DaemonSet" => "daemonsets",
        _ => return false,
    };
    resources.iter().any(|r| *r == resource)
}

/// Each real object with each policy that applies to it: the costliest
/// expression's and the total's upper bound.
fn real_request_costs() -> Vec<(String, PolicyCost)> {
    let namespace =
        json!({"metadata": {"name": "gpu", "labels": {"gpu-policy.io/mode": "enforce"}}});
    let request = json!({"operation": "CREATE", "namespace": "gpu"});
    let mut costs = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, object) in real_objects() {
        if !seen.insert(name.clone()) {
            continue;
        }
        let kind = object["kind"].as_str().unwrap_or_default().to_owned();
        let inputs = Inputs::request(&object, &Value::Null, &namespace, &request);
        for policy in generated().iter().filter(|p| applies(p, &kind)) {
            costs.push((name.clone(), policy_cost(policy, &inputs)));
        }
    }
    costs
}

fn real_requests_table(costs: &[(String, PolicyCost)]) -> String {
    let mut out =
        "| Object | Policy | Costliest expression | All together |\n|---|---|---:|---:|\n"
            .to_owned();
    for (object, cost) in costs {
        let costliest = cost
            .expressions
            .iter()
            .filter_map(|e| e.cost.as_ref().ok().map(|c| (c.max, e.name.as_str())))
            .max()
            .map_or("-".to_owned(), |(max, name)| format!("{} (`{name}`)", figure(max)));
        let all = cost.runtime().map_or("-".to_owned(), |c| figure(c.max));
        let kind = match cost.kind.as_str() {
            "MutatingAdmissionPolicy" => " (mutating)",
            _ => "",
        };
        out.push_str(&format!("| {object} | `{}`{kind} | {costliest} | {all} |\n", cost.name));
    }
    out
}

#[test]
fn real_objects_cost_little() {
    let costs = real_request_costs();
    assert!(costs.len() >= 20, "{}", costs.len());
    for (object, cost) in &costs {
        assert!(
            cost.expressions.iter().all(|e| e.cost.is_ok()),
            "{object} {}: {:?}",
            cost.name,
            cost.expressions
        );
        // The fixtures: far below every limit; the pods of many
        // containers are reported as they come.
        if !object.starts_with("a Pod of") {
            assert!(cost.within_limits(), "{object} {}", cost.name);
            // Most of the bound is the messages, which the API server
            // evaluates only for a validation that fails.
            assert!(cost.runtime().is_ok_and(|c| c.max < 50_000), "{object} {}", cost.name);
        }
    }
    let docs = include_str!("../../../docs/policy.md");
    let table = real_requests_table(&costs);
    assert!(docs.contains(&table), "docs/policy.md lacks the table of real objects:\n{table}");
}

#[test]
fn the_default_policies_are_within_the_limits_on_their_reference_objects() {
    let checks = check(&Settings::default(), true);
    assert_eq!(checks.len(), 7);
    for c in &checks {
        assert!(c.within_limits(), "{}", markdown(c));
        assert_eq!(c.worst.expressions.len(), c.reference.expressions.len());
    }
    assert!(report(&checks).ends_with("on its reference object.\n"));
}

#[test]
fn fifty_containers_pass_the_per_call_limit() {
    // docs/policy.md: at 50 sidecars and 50 containers the pod count of
    // bounded-requests is past the per-call limit.
    let policy = &policies(&Settings::default(), false)[0];
    let namespace = json!({"metadata": {"name": "gpu"}});
    let request = json!({"operation": "CREATE"});
    let inputs = Inputs::request(&pod_of_containers(50), &Value::Null, &namespace, &request);
    assert!(!policy_cost(policy, &inputs).within_limits());
}
