//! One-shot lists of a namespace's objects as raw JSON, for `audit` and
//! the namespace guard.

use std::time::Duration;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;

/// Lists the objects of one kind in a namespace as raw JSON.
pub async fn list_objects(
    client: &Client,
    namespace: &str,
    gvk: &GroupVersionKind,
) -> Result<Vec<Value>, kube::Error> {
    let resource = ApiResource::from_gvk(gvk);
    let api = Api::<DynamicObject>::namespaced_with(client.clone(), namespace, &resource);
    let mut objects = Vec::new();
    for mut object in api.list(&ListParams::default()).await? {
        // List items carry no apiVersion/kind.
        object.types = Some(kube::core::TypeMeta {
            api_version: resource.api_version.clone(),
            kind: resource.kind.clone(),
        });
        object.metadata.managed_fields = None;
        objects.push(serde_json::to_value(&object).unwrap_or(Value::Null));
    }
    Ok(objects)
}

/// Why the pods of a namespace could not be listed.
#[derive(Debug, thiserror::Error)]
pub enum PodListError {
    #[error("cannot list the pods of {namespace}: {source}")]
    Api {
        namespace: String,
        #[source]
        source: kube::Error,
    },
    #[error("listing the pods of {namespace} took more than {budget:?}")]
    TimedOut { namespace: String, budget: Duration },
}

/// The pods of a namespace as raw JSON, listed within `budget` (the
/// namespace guard's look at what already runs there).
pub async fn list_pods(
    client: &Client,
    namespace: &str,
    budget: Duration,
) -> Result<Vec<Value>, PodListError> {
    let gvk = GroupVersionKind::gvk("", "v1", "Pod");
    match tokio::time::timeout(budget, list_objects(client, namespace, &gvk)).await {
        Ok(Ok(pods)) => Ok(pods),
        Ok(Err(source)) => Err(PodListError::Api {
            namespace: namespace.to_owned(),
            source,
        }),
        Err(_) => Err(PodListError::TimedOut {
            namespace: namespace.to_owned(),
            budget,
        }),
    }
}
