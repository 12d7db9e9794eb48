//! The bounded lists of `doctor`'s read (`inventory.rs`, `install_read.rs`):
//! how many pages of each kind ([`LISTS`]), a list read an item at a time
//! ([`list`]), and a list's outcome as a part of the inventory ([`seen`]).

use kube::Client;
use kube::api::{ApiResource, DynamicObject, GroupVersionKind, ListParams};

use super::list::{Paged, list_url_pages};
use crate::doctor::Seen;

/// The page size and the most pages of each list: what a read costs at
/// most. A page of Nodes or Pods is some tens of KiB per object (images,
/// conditions, managedFields), so pages stay at 100 objects; ResourceSlices
/// hold up to 128 devices each, so their pages are smaller.
#[derive(Debug, Clone, Copy)]
pub struct Lists {
    /// 10,000 nodes.
    pub nodes: (u32, usize),
    /// 2,000 DaemonSets.
    pub daemon_sets: (u32, usize),
    /// 10,000 pods of each component DaemonSet.
    pub pods: (u32, usize),
    /// 500 of each.
    pub small: (u32, usize),
    /// 2,000 slices.
    pub slices: (u32, usize),
    /// 10,000 opted-in namespaces.
    pub namespaces: (u32, usize),
}

pub const LISTS: Lists = Lists {
    nodes: (100, 100),
    daemon_sets: (100, 20),
    pods: (100, 100),
    small: (100, 5),
    slices: (20, 100),
    namespaces: (500, 20),
};

/// A list's outcome as a part of the inventory: 403 and 404 are states,
/// other errors fail the read.
pub(super) fn seen<T>(
    listed: Result<(T, Paged), kube::Error>,
    rbac: &'static str,
) -> Result<Seen<T>, kube::Error> {
    match listed {
        Ok((items, Paged::Complete)) => Ok(Seen::Complete(items)),
        Ok((items, Paged::Truncated)) => Ok(Seen::Truncated(items)),
        Err(kube::Error::Api(status)) if status.code == 403 => Ok(Seen::Forbidden { rbac }),
        Err(kube::Error::Api(status)) if status.code == 404 => Ok(Seen::NotServed),
        Err(error) => Err(error),
    }
}

/// Lists `gvk` (in `namespace`, or everywhere) with `params`, each item
/// read by `keep`; an item `keep` cannot read is skipped.
pub(super) async fn list<T>(
    client: &Client,
    gvk: &GroupVersionKind,
    namespace: Option<&str>,
    params: ListParams,
    (size, max): (u32, usize),
    mut keep: impl FnMut(&str) -> Option<T>,
) -> Result<(Vec<T>, Paged), kube::Error> {
    let resource = ApiResource::from_gvk(gvk);
    let url = <DynamicObject as kube::Resource>::url_path(&resource, namespace);
    let mut items = Vec::new();
    let paged = list_url_pages(client, &url, params.limit(size), &gvk.kind, max, |text| {
        items.extend(keep(text));
    })
    .await?;
    Ok((items, paged))
}
