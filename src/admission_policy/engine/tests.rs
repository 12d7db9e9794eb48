use super::*;

#[test]
fn objects_are_read_as_the_api_server_writes_them() {
    let pod = json!({"spec": {"runtimeClassName": null, "containers": [{
        "name": "a", "resources": {"limits": {"nvidia.com/gpu": 1, "cpu": 1.5}}
    }]}});
    assert_eq!(
        as_admitted(&pod),
        json!({"spec": {"containers": [{
            "name": "a", "resources": {"limits": {"nvidia.com/gpu": "1", "cpu": "1.5"}}
        }]}})
    );
}

#[test]
fn every_generated_policy_compiles() {
    if let Err(err) = PolicyEngine::new(&Settings::default()) {
        panic!("{err}");
    }
}
