//! Lists of objects as raw JSON: whole for `audit`, a bounded number of
//! pages for the namespace guard (which anyone may make list any
//! namespace, by forging a review) and for `doctor`'s read.

use std::collections::BTreeMap;

use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use serde::Deserialize;
use serde::de::{DeserializeOwned, IgnoredAny};
use serde_json::Value;
use sonic_rs::JsonValueTrait;

use super::api_status::{is_forbidden, is_not_served};
use super::names::is_dns_label;
use crate::doctor::Seen;

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

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Paged {
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

/// Lists the objects of one kind in a namespace a page at a time, as
/// `list_paged` does, with no selector; a name no namespace may have is
/// listed as empty, without a request (it would change the path).
pub async fn list_pages(
    client: &Client,
    namespace: &str,
    gvk: &GroupVersionKind,
    pages: Pages,
    on_item: impl FnMut(&str),
) -> Result<Paged, kube::Error> {
    if !is_dns_label(namespace) {
        return Ok(Paged::Complete);
    }
    let params = ListParams::default();
    list_paged(client, gvk, Some(namespace), params, pages, on_item).await
}

/// Hands each object's JSON text to `on_item` as sent (no apiVersion and
/// kind). A page is kept as text and read one item at a time: what is held
/// at once is one page's text and what `on_item` makes of one object,
/// never a decoded page.
pub(super) async fn list_paged(
    client: &Client,
    gvk: &GroupVersionKind,
    namespace: Option<&str>,
    params: ListParams,
    pages: Pages,
    mut on_item: impl FnMut(&str),
) -> Result<Paged, kube::Error> {
    let resource = ApiResource::from_gvk(gvk);
    let url = <DynamicObject as kube::Resource>::url_path(&resource, namespace);
    let mut params = params.limit(pages.size);
    for _ in 0..pages.max {
        let request =
            kube::core::Request::new(&url).list(&params).map_err(kube::Error::BuildRequest)?;
        let text = client.request_text(request).await?;
        let unreadable = |error: sonic_rs::Error| {
            let kind = &gvk.kind;
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

/// [`list_paged`] as a part of `doctor`'s inventory: each item decoded
/// as `W` and read by `keep` (an item either cannot read is skipped); 403
/// and 404 are states, other errors fail the read.
pub(super) async fn list_seen<W: DeserializeOwned, T>(
    client: &Client,
    gvk: &GroupVersionKind,
    namespace: Option<&str>,
    params: ListParams,
    pages: Pages,
    rbac: &'static str,
    mut keep: impl FnMut(W) -> Option<T>,
) -> Result<Seen<Vec<T>>, kube::Error> {
    let mut items = Vec::new();
    let listed = list_paged(client, gvk, namespace, params, pages, |text| {
        items.extend(serde_json::from_str(text).ok().and_then(&mut keep));
    })
    .await;
    match listed {
        Ok(Paged::Complete) => Ok(Seen::Complete(items)),
        Ok(Paged::Truncated) => Ok(Seen::Truncated(items)),
        Err(error) if is_forbidden(&error) => Ok(Seen::Forbidden { rbac }),
        Err(error) if is_not_served(&error) => Ok(Seen::NotServed),
        Err(error) => Err(error),
    }
}

/// An object of `doctor`'s lists: the metadata and the parts a reader
/// declares; the rest is skipped as it is read. `Labels` is [`WithLabels`]
/// for the readers of labels, else they are skipped too.
#[derive(Deserialize)]
pub(super) struct Wire<Spec = IgnoredAny, Status = IgnoredAny, Labels = IgnoredAny> {
    #[serde(default)]
    pub(super) metadata: Meta<Labels>,
    #[serde(default)]
    pub(super) spec: Spec,
    #[serde(default)]
    pub(super) status: Status,
}

#[derive(Deserialize, Default)]
pub(super) struct Meta<Labels = IgnoredAny> {
    #[serde(default)]
    pub(super) name: String,
    #[serde(default)]
    pub(super) namespace: String,
    #[serde(default)]
    pub(super) labels: Labels,
}

pub(super) type WithLabels = BTreeMap<String, String>;

/// The pages of each list of `doctor`'s read: what a read costs at most.
/// A page of Nodes or Pods is some tens of KiB per object (images,
/// conditions, managedFields), so pages stay at 100 objects;
/// ResourceSlices hold up to 128 devices each, so their pages are smaller.
#[derive(Debug, Clone, Copy)]
pub(super) struct InventoryPages {
    /// 10,000 nodes.
    pub(super) nodes: Pages,
    /// 2,000 DaemonSets.
    pub(super) daemon_sets: Pages,
    /// 10,000 pods of each component DaemonSet.
    pub(super) pods: Pages,
    /// 500 of each.
    pub(super) small: Pages,
    /// 2,000 slices.
    pub(super) slices: Pages,
    /// 10,000 opted-in namespaces.
    pub(super) namespaces: Pages,
}

pub(super) const INVENTORY_PAGES: InventoryPages = InventoryPages {
    nodes: Pages { size: 100, max: 100 },
    daemon_sets: Pages { size: 100, max: 20 },
    pods: Pages { size: 100, max: 100 },
    small: Pages { size: 100, max: 5 },
    slices: Pages { size: 20, max: 100 },
    namespaces: Pages { size: 500, max: 20 },
};

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
