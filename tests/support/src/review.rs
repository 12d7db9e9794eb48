//! AdmissionReview v1 requests as the API server sends them.

use serde_json::{Map, Value, json};

/// A request of an AdmissionReview, built field by field:
/// `Review::create(&pod, "ml").uid(uid).dry_run(true).body()`.
#[derive(Debug, Clone)]
pub struct Review {
    request: Map<String, Value>,
}

impl Review {
    /// A CREATE of `object` in `namespace`: kind and resource from its
    /// `apiVersion` and `kind` (the resource is the kind's plural), its
    /// name (empty without one), user `alice`, not a dry run.
    pub fn create(object: &Value, namespace: &str) -> Self {
        let api_version = object["apiVersion"].as_str().unwrap_or("v1");
        let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
        let kind = object["kind"].as_str().unwrap_or("Pod");
        let resource = format!("{}s", kind.to_lowercase());
        let gvk = json!({"group": group, "version": version, "kind": kind});
        let gvr = json!({"group": group, "version": version, "resource": resource});
        let request = json!({
            "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
            "namespace": namespace,
            "operation": "CREATE",
            "userInfo": {"username": "alice", "groups": ["system:authenticated"]},
            "object": object,
            "oldObject": null,
            "dryRun": false,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        });
        let Value::Object(request) = request else { unreachable!("a JSON object literal") };
        Self { request }
    }

    /// An UPDATE of `object`, which was `old`.
    pub fn update(object: &Value, old: &Value, namespace: &str) -> Self {
        Self::create(object, namespace)
            .set("operation", json!("UPDATE"))
            .set("oldObject", old.clone())
            .set("options", json!({"apiVersion": "meta.k8s.io/v1", "kind": "UpdateOptions"}))
    }

    /// The request's uid, which the response echoes.
    pub fn uid(self, uid: &str) -> Self {
        self.set("uid", json!(uid))
    }

    pub fn dry_run(self, dry_run: bool) -> Self {
        self.set("dryRun", json!(dry_run))
    }

    /// The requesting user: a name and its groups.
    pub fn user(self, username: &str, groups: &[&str]) -> Self {
        self.set("userInfo", json!({"username": username, "groups": groups}))
    }

    /// The request of a subresource, e.g. `ephemeralcontainers`.
    pub fn sub_resource(self, sub_resource: &str) -> Self {
        self.set("subResource", json!(sub_resource)).set("requestSubResource", json!(sub_resource))
    }

    /// Any other field of the request, set or replaced.
    pub fn set(mut self, key: &str, value: Value) -> Self {
        self.request.insert(key.to_owned(), value);
        self
    }

    /// The whole AdmissionReview.
    pub fn json(self) -> Value {
        json!({
            "apiVersion": "admission.k8s.io/v1",
            "kind": "AdmissionReview",
            "request": self.request,
        })
    }

    /// The AdmissionReview as the bytes of a request body.
    pub fn body(self) -> Vec<u8> {
        serde_json::to_vec(&self.json()).expect("a review serialises")
    }
}
