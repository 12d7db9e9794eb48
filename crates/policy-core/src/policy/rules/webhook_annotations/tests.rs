use rstest::rstest;
use serde_json::{Value, json};

use crate::policy::RuleId;
use crate::policy::testing::{apply, evaluate_update};

fn pod(annotations: Option<Value>) -> Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "p", "namespace": "ml"},
        "spec": {"containers": [{"name": "app", "image": "busybox"}]},
    });
    if let Some(annotations) = annotations {
        pod["metadata"]["annotations"] = annotations;
    }
    pod
}

/// Each update of the two annotations is undone, whatever else the pod
/// carries, and the patch applied to the new pod gives the old one's.
#[rstest]
#[case::overwritten(
        Some(json!({"gpu-policy.io/mutations": "visible-devices", "team": "a"})),
        Some(json!({"gpu-policy.io/mutations": "", "team": "a"}))
    )]
#[case::removed(
        Some(json!({"gpu-policy.io/mutations": "visible-devices", "gpu-policy.io/gpu-needs": "cc>=8.0"})),
        Some(json!({"gpu-policy.io/mutations": "visible-devices"}))
    )]
#[case::every_annotation_removed(
        Some(json!({"gpu-policy.io/mutations": "visible-devices", "gpu-policy.io/gpu-needs": "cc>=8.0"})),
        None
    )]
#[case::added(
        Some(json!({"team": "a"})),
        Some(json!({"team": "a", "gpu-policy.io/gpu-needs": "cc>=5.0"}))
    )]
#[case::added_to_a_pod_without_annotations(None, Some(json!({"gpu-policy.io/mutations": "x"})))]
fn updates_of_the_webhooks_annotations_are_undone(
    #[case] before: Option<Value>,
    #[case] after: Option<Value>,
) {
    let (old, new) = (pod(before), pod(after));
    let evaluation = evaluate_update(&new, &old);
    assert_eq!(evaluation.changed_rules().iter().collect::<Vec<_>>(), [RuleId::WebhookAnnotations]);
    let restored = apply(&new, &evaluation.patch);
    let owned =
        |pod: &Value| super::OWNED.map(|key| pod["metadata"]["annotations"].get(key).cloned());
    assert_eq!(owned(&restored), owned(&old), "{restored}");
    assert_eq!(
        restored["metadata"]["annotations"].get("team"),
        new["metadata"]["annotations"].get("team"),
        "other annotations are the update's"
    );
    // Once put back, nothing is left to do.
    assert!(evaluate_update(&restored, &old).patch.is_empty());
}

#[test]
fn other_annotations_and_creation_are_left_alone() {
    let old = pod(Some(json!({"gpu-policy.io/mutations": "visible-devices"})));
    let new = pod(Some(json!({"gpu-policy.io/mutations": "visible-devices", "team": "b"})));
    assert!(evaluate_update(&new, &old).changes.is_empty());
    let created = crate::policy::testing::evaluate_pod(&pod(Some(
        json!({"gpu-policy.io/gpu-needs": "cc>=5.0"}),
    )));
    assert!(!created.changed_rules().contains(RuleId::WebhookAnnotations));
}
