//! Lists of a namespace's objects as raw JSON: whole for `audit`, a
//! bounded number of pages for the namespace guard (which anyone may make
//! list any namespace, by forging a review).

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde_json::Value;
use sonic_rs::JsonValueTrait;

use super::names::is_dns_label;

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

/// How much of a namespace a paged list reads: `size` objects per request,
/// `max` requests at most.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pages {
    pub size: u32,
    pub max: usize,
}

/// How a paged list ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paged {
    /// Every object was listed.
    Complete,
    /// The namespace holds more than `size * max` objects of the kind:
    /// the rest were not listed.
    Truncated,
}

impl Paged {
    /// Truncated when either is.
    pub fn and(self, other: Paged) -> Paged {
        match (self, other) {
            (Paged::Complete, Paged::Complete) => Paged::Complete,
            _ => Paged::Truncated,
        }
    }
}

/// Lists the objects of one kind in a namespace, a page at a time (limit
/// and continue, as kubectl pages), and hands each object's JSON text to
/// `on_item`, as the API server sent it (list items carry no apiVersion
/// and kind). A page is kept as its text only and read one item at a time,
/// so what is held at once is one page's text and whatever `on_item` makes
/// of one object, never a decoded page; at most `pages.max` requests are
/// made.
pub async fn list_pages(
    client: &Client,
    namespace: &str,
    gvk: &GroupVersionKind,
    pages: Pages,
    on_item: impl FnMut(&str),
) -> Result<Paged, kube::Error> {
    if !is_dns_label(namespace) {
        // No namespace has that name (and it would change the path).
        return Ok(Paged::Complete);
    }
    let resource = ApiResource::from_gvk(gvk);
    let url = <DynamicObject as kube::Resource>::url_path(&resource, Some(namespace));
    let params = ListParams::default().limit(pages.size);
    list_url_pages(client, &url, params, &gvk.kind, pages.max, on_item).await
}

/// [`list_pages`] of any list URL (a namespace's, all namespaces', a
/// cluster-scoped kind's) with `params` (its selectors and page size):
/// each item's text to `on_item`, at most `max` requests; `kind` names
/// the kind in errors.
pub(super) async fn list_url_pages(
    client: &Client,
    url: &str,
    mut params: ListParams,
    kind: &str,
    max: usize,
    mut on_item: impl FnMut(&str),
) -> Result<Paged, kube::Error> {
    for _ in 0..max {
        let request = kube::core::Request::new(url)
            .list(&params)
            .map_err(kube::Error::BuildRequest)?;
        let text = client.request_text(request).await?;
        let unreadable = |error: sonic_rs::Error| {
            kube::Error::Service(format!("a list of {kind} is not JSON: {error}").into())
        };
        // An empty list may come without items.
        if let Ok(items) = sonic_rs::get(text.as_str(), ["items"]) {
            for item in sonic_rs::to_array_iter(items.as_raw_str()) {
                on_item(item.map_err(unreadable)?.as_raw_str());
            }
        }
        let next = sonic_rs::get(text.as_str(), ["metadata", "continue"])
            .ok()
            .and_then(|token| token.as_str().map(str::to_owned))
            .filter(|token| !token.is_empty());
        match next {
            Some(token) => params = params.continue_token(&token),
            None => return Ok(Paged::Complete),
        }
    }
    Ok(Paged::Truncated)
}

/// The pods of a namespace, a page at a time ([`list_pages`]): the
/// namespace guard's look at what already runs there.
pub async fn pods_in_pages(
    client: &Client,
    namespace: &str,
    pages: Pages,
    on_pod: impl FnMut(&str),
) -> Result<Paged, kube::Error> {
    let gvk = GroupVersionKind::gvk("", "v1", "Pod");
    list_pages(client, namespace, &gvk, pages, on_pod).await
}
