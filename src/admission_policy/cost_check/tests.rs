use super::*;

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
    let policy = &validating_policies(&Settings::default(), KubernetesVersion::default())[0].object;
    let namespace = json!({"metadata": {"name": "gpu"}});
    let request = json!({"operation": "CREATE"});
    let inputs = Inputs::request(&pod_of_containers(50), &Value::Null, &namespace, &request);
    assert!(!policy_cost(policy, &inputs).within_limits());
}
