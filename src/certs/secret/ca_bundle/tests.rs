use serde_json::json;

use super::*;

fn configuration(webhooks: Value) -> DynamicObject {
    serde_json::from_value(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "gpu-policy", "resourceVersion": "42", "labels": {"a": "b"}},
        "webhooks": webhooks,
    }))
    .unwrap_or_else(|error| panic!("{error}"))
}

#[test]
fn with_ca_bundle_sets_only_the_differing_entries_and_keeps_the_rest() {
    let encoded = STANDARD.encode(b"CA PEM");
    let object = configuration(json!([
        {"name": "a.io", "clientConfig": {"url": "https://a", "caBundle": encoded}, "futureField": 1},
        {"name": "b.io", "clientConfig": {"url": "https://b"}, "rules": [{"operations": ["CREATE"]}]},
        {"name": "c.io", "clientConfig": {"service": {"name": "s"}, "caBundle": "T0xE"}},
    ]));
    let mut expected = object.clone();
    let Some((updated, entries)) = with_ca_bundle(object, &encoded) else {
        panic!("two entries differ");
    };
    assert_eq!(entries, 2);
    expected.data["webhooks"][1]["clientConfig"]["caBundle"] = json!(encoded);
    expected.data["webhooks"][2]["clientConfig"]["caBundle"] = json!(encoded);
    // Everything else as read: the resourceVersion, the labels, a field
    // this build does not know.
    assert_eq!(updated, expected);
    assert_eq!(updated.metadata.resource_version.as_deref(), Some("42"));
}

#[test]
fn with_ca_bundle_sends_nothing_when_every_entry_is_current() {
    let encoded = STANDARD.encode(b"CA PEM");
    let current = configuration(json!([
        {"name": "a.io", "clientConfig": {"url": "https://a", "caBundle": encoded}},
    ]));
    assert_eq!(with_ca_bundle(current, &encoded), None);
    assert_eq!(with_ca_bundle(configuration(json!([])), &encoded), None);
}
