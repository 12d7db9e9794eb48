use super::*;
use crate::policy::testing::leaked;
use json_patch::jsonptr::PointerBuf;
use rstest::rstest;
use serde_json::{Value, json};

fn view(object: &Value) -> PodView<'static> {
    match PodView::parse(leaked(object), Shape::Pod, &Settings::default()) {
        Ok(Some(view)) => view,
        other => panic!("not a pod view: {other:?}"),
    }
}

/// The pod's effective count of one resource, one resource at a time: the
/// check of [`PodView::effective_counts`].
fn effective_count(view: &PodView<'_>, resource: &str) -> u64 {
    let mut tally = Tally::default();
    for container in &view.containers {
        tally.add(container.kind, container.count_of(resource));
    }
    tally.count()
}

fn gpu(name: &str, count: u64) -> Value {
    json!({"name": name, "resources": {"limits": {"nvidia.com/gpu": count}}})
}

fn sidecar(name: &str, count: u64) -> Value {
    let mut c = gpu(name, count);
    c["restartPolicy"] = json!("Always");
    c
}

#[rstest]
// regular containers add up
#[case(vec![], vec![gpu("a", 1), gpu("b", 2)], 3)]
// a plain init container bigger than the steady state sets the count
#[case(vec![gpu("init", 4)], vec![gpu("a", 1)], 4)]
// plain init containers run one at a time: the max, not the sum
#[case(vec![gpu("i1", 2), gpu("i2", 3)], vec![gpu("a", 1)], 3)]
// a sidecar counts in the steady state
#[case(vec![sidecar("s", 1)], vec![gpu("a", 2)], 3)]
// a plain init container after a sidecar runs beside it
#[case(vec![sidecar("s", 2), gpu("i", 3)], vec![gpu("a", 1)], 5)]
// a plain init container before the sidecar does not
#[case(vec![gpu("i", 3), sidecar("s", 2)], vec![gpu("a", 1)], 3)]
#[case(vec![], vec![], 0)]
fn effective_count_follows_kubernetes(
    #[case] init: Vec<Value>,
    #[case] regular: Vec<Value>,
    #[case] expected: u64,
) {
    let pod = json!({"spec": {"initContainers": init, "containers": regular}});
    assert_eq!(effective_count(&view(&pod), "nvidia.com/gpu"), expected);
}

#[test]
fn containers_carry_kind_and_pointer() {
    let pod = json!({"spec": {
        "initContainers": [{"name": "i"}, {"name": "s", "restartPolicy": "Always"}],
        "containers": [{"name": "c"}],
        "ephemeralContainers": [{"name": "e"}],
    }});
    let view = view(&pod);
    let seen: Vec<(&str, ContainerKind, String)> = view
        .containers
        .iter()
        .map(|c| (c.name, c.kind, c.pointer_to(view.spec_pointer(), &[]).to_string()))
        .collect();
    assert_eq!(
        seen,
        vec![
            ("i", ContainerKind::Init, "/spec/initContainers/0".to_owned()),
            ("s", ContainerKind::Sidecar, "/spec/initContainers/1".to_owned()),
            ("c", ContainerKind::Regular, "/spec/containers/0".to_owned()),
            ("e", ContainerKind::Ephemeral, "/spec/ephemeralContainers/0".to_owned()),
        ]
    );
}

#[rstest]
#[case(Shape::Template, json!({"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}), "/spec/template/spec/containers/0")]
#[case(Shape::CronJob, json!({"spec": {"jobTemplate": {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}}}), "/spec/jobTemplate/spec/template/spec/containers/0")]
#[case(Shape::PodTemplate, json!({"template": {"spec": {"containers": [{"name": "c"}]}}}), "/template/spec/containers/0")]
fn templates_are_found_by_shape(
    #[case] shape: Shape,
    #[case] object: Value,
    #[case] pointer: &str,
) {
    let view = PodView::parse(leaked(&object), shape, &Settings::default());
    let found =
        view.ok().flatten().map(|v| v.containers[0].pointer_to(v.spec_pointer(), &[]).to_string());
    assert_eq!(found.as_deref(), Some(pointer));
}

#[test]
fn workload_without_template_has_no_view() {
    let rc = json!({"spec": {"replicas": 1}});
    assert!(matches!(PodView::parse(leaked(&rc), Shape::Template, &Settings::default()), Ok(None)));
}

#[rstest]
#[case(json!({"spec": {"containers": "app"}}), "spec.containers: must be a list, not a string")]
#[case(json!({"spec": {"containers": [{"name": "a", "resources": []}]}}), "spec.containers[0].resources: must be an object, not a list")]
#[case(json!({"spec": {"containers": [{"name": "a", "env": {"A": "1"}}]}}), "spec.containers[0].env: must be a list, not an object")]
#[case(json!({"spec": {"containers": [{"name": "a", "env": [7]}]}}), "spec.containers[0].env[0]: must be an object, not a number")]
#[case(json!({"spec": {"containers": [{"name": 7}]}}), "spec.containers[0].name: must be a string, not a number")]
#[case(json!({"spec": {"runtimeClassName": false}}), "spec.runtimeClassName: must be a string, not a boolean")]
#[case(json!({"spec": {"volumes": [{"name": "v", "hostPath": {"path": 1}}]}}), "spec.volumes[0].hostPath.path: must be a string, not a number")]
#[case(json!({"spec": {"containers": [{"name": "a", "securityContext": true}]}}), "spec.containers[0].securityContext: must be an object, not a boolean")]
#[case(json!({"spec": {"containers": [{"name": "a", "securityContext": {"privileged": "true"}}]}}), "spec.containers[0].securityContext.privileged: must be a boolean, not a string")]
#[case(json!({"metadata": {"annotations": {"a": 1}}, "spec": {}}), "metadata.annotations.a: must be a string")]
#[case(json!({"spec": {"resourceClaims": {"gpu": "t"}}}), "spec.resourceClaims: must be a list, not an object")]
#[case(json!({"spec": {"resourceClaims": [{"name": "g", "resourceClaimTemplateName": 1}]}}), "spec.resourceClaims[0].resourceClaimTemplateName: must be a string, not a number")]
#[case(json!({"spec": {"containers": [{"name": "a", "resources": {"claims": [{"name": ["g"]}]}}]}}), "spec.containers[0].resources.claims[0].name: must be a string, not a list")]
#[case(json!({"metadata": []}), "metadata: must be an object, not a list")]
#[case(json!({"metadata": {}}), "spec: is missing")]
#[case(json!([1]), "object: must be an object, not a list")]
fn wrong_shapes_name_the_field(#[case] object: Value, #[case] message: &str) {
    let err = PodView::parse(leaked(&object), Shape::Pod, &Settings::default()).err();
    assert_eq!(err.map(|e| e.to_string()).as_deref(), Some(message));
}

#[test]
fn zero_limit_is_not_a_gpu_request_but_garbage_is() {
    let pod = json!({"spec": {"containers": [
        {"name": "zero", "resources": {"limits": {"nvidia.com/gpu": "0"}}},
        {"name": "bad", "resources": {"limits": {"nvidia.com/gpu": "lots"}}},
        {"name": "cpu", "resources": {"limits": {"cpu": "2"}}},
    ]}});
    let gpu: Vec<bool> = view(&pod).containers.iter().map(Container::is_gpu).collect();
    assert_eq!(gpu, vec![false, true, false]);
}

/// The constant pointers of each shape are its template path's, with
/// `metadata` and `spec` below it.
#[test]
fn each_shapes_pointers_are_its_template_paths() {
    for shape in Shape::ALL {
        let template = PointerBuf::from_tokens(shape.template_path().iter().copied());
        let (metadata, spec) = shape.pointers();
        let mut expected = template.clone();
        expected.push_back("metadata");
        assert_eq!(metadata, &*expected, "{shape:?}");
        let mut expected = template;
        expected.push_back("spec");
        assert_eq!(spec, &*expected, "{shape:?}");
    }
}

/// The effective counts of all resources at once are each resource's
/// effective count, in first-seen order, sidecars and init containers
/// included, however many names the containers list.
#[test]
fn effective_counts_are_the_effective_count_of_each_resource() {
    let names: Vec<String> = (0..300).map(|i| format!("nvidia.com/mig-{i}g.5gb")).collect();
    let limits = |from: usize, count: u64| -> Value {
        let map: serde_json::Map<String, Value> =
            names.iter().skip(from).step_by(3).map(|name| (name.clone(), json!(count))).collect();
        json!({"limits": map})
    };
    let pod = json!({"spec": {
        "initContainers": [
            {"name": "i1", "resources": limits(0, 3)},
            {"name": "s", "restartPolicy": "Always", "resources": limits(1, 2)},
            {"name": "i2", "resources": limits(2, 4)},
        ],
        "containers": [
            {"name": "a", "resources": limits(0, 1)},
            {"name": "b", "resources": limits(1, 1)},
        ],
        "ephemeralContainers": [{"name": "e", "resources": limits(2, 5)}],
    }});
    let view = view(&pod);
    let each: Vec<(&str, u64)> = view
        .effective_counts()
        .into_iter()
        .map(|(name, _)| (name, effective_count(&view, name)))
        .collect();
    assert_eq!(each.len(), 300);
    assert_eq!(view.effective_counts(), each);
    // mig-0g: 3 in init container i1, 1 in container a.
    assert_eq!(each.first(), Some(&("nvidia.com/mig-0g.5gb", 3)));
    // mig-1g: 2 in sidecar s beside 1 in b.
    assert!(each.contains(&("nvidia.com/mig-1g.5gb", 3)), "{each:?}");
    // mig-2g: 4 in init container i2 after sidecar s (which has none of it).
    assert!(each.contains(&("nvidia.com/mig-2g.5gb", 4)), "{each:?}");
}
