//! The Dynamic Resource Allocation caches: ResourceClaims,
//! ResourceClaimTemplates, DeviceClasses and the ResourceSlices of
//! `gpu.nvidia.com`, kept lean in the snapshot's
//! [`ClaimTables`](crate::policy::dra::tables::ClaimTables) so the webhook
//! resolves a pod's claims, and judges the devices allocated to them,
//! without an API call.
//!
//! Why claims are watched in every namespace, and what DRA off does:
//! docs/policy.md, "DRA resource claims"; docs/architecture.md, "Where
//! cluster facts enter". A kept claim is about 350 bytes for a one-request
//! claim, 700 once made for a pod and allocated: 10,000 claims stay within
//! a few MB. Without DRA every claim stays unknown: never a denial.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::APIGroup;
use kube::api::{Api, ApiResource, DynamicObject, GroupVersionKind, ListParams};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};

use super::api_status::is_not_served;
use super::cache::{ClusterCache, Source};
use super::list::{Paged, Pages, list_pages};
use super::watch::{FirstList, by_name, mirror};
use crate::document::Document;
use crate::policy::cluster::ClusterSnapshot;
use crate::policy::dra::allocation::{POD_CLAIM_NAME_ANNOTATION, read_made_for, read_slice};
use crate::policy::dra::claims::ClaimKind;
use crate::policy::dra::tables::{ClaimKey, DeviceClassInfo, GpuSettings, KeptClaim};
use crate::settings::Settings;

pub const DRA_GROUP: &str = "resource.k8s.io";
/// The versions of [`DRA_GROUP`] read, preferred first: `v1` is GA from
/// Kubernetes 1.34; `v1beta2` (1.33) and `v1beta1` (1.32, 1.33) are served
/// when DRA is turned on.
pub const DRA_VERSIONS: [&str; 3] = ["v1", "v1beta2", "v1beta1"];

pub fn dra_gvk(version: &str, kind: &str) -> GroupVersionKind {
    GroupVersionKind::gvk(DRA_GROUP, version, kind)
}

/// The newest of [`DRA_VERSIONS`] the API server serves, from one read of
/// its discovery of the group; None when it serves none of them.
pub async fn served_dra_version(client: &Client) -> Result<Option<&'static str>, kube::Error> {
    let request = axum::http::Request::get(format!("/apis/{DRA_GROUP}"))
        .body(Vec::new())
        .map_err(kube::Error::HttpError)?;
    match client.request::<APIGroup>(request).await {
        Ok(group) => Ok(preferred(group.versions.iter().map(|v| v.version.as_str()))),
        Err(error) if is_not_served(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

fn preferred<'a>(served: impl Iterator<Item = &'a str> + Clone) -> Option<&'static str> {
    DRA_VERSIONS.into_iter().find(|version| served.clone().any(|served| served == *version))
}

/// GPU classes are judged with `settings` from now on (at start and at
/// every reload).
pub(super) fn follow_settings(cache: &ClusterCache, settings: &Settings) {
    cache.write().dra.settings = GpuSettings::new(Arc::new(settings.clone()));
}

/// Starts the DRA watches once the API server says which version of
/// `resource.k8s.io` it serves. The four sources hold readiness until then.
pub(super) fn spawn(client: &Client, settings: &Settings, cache: &Arc<ClusterCache>) {
    follow_settings(cache, settings);
    let holds = [
        FirstList::new(cache, Source::DeviceClasses),
        FirstList::new(cache, Source::ResourceClaims),
        FirstList::new(cache, Source::ResourceClaimTemplates),
        FirstList::new(cache, Source::ResourceSlices),
    ];
    let client = client.clone();
    let cache = Arc::clone(cache);
    tokio::spawn(async move {
        let served = served(&client).await;
        cache.set_dra_version(served);
        let Some(version) = served else {
            tracing::info!(
                group = DRA_GROUP,
                not_watched =
                    "deviceclasses, resourceclaims, resourceclaimtemplates, resourceslices",
                "the API server does not serve Dynamic Resource Allocation \
                 (Kubernetes before 1.34 with DRA off): pods' claims stay unresolved \
                 (warned, pinned, never denied for it)"
            );
            for mut hold in holds {
                hold.done();
            }
            return;
        };
        tracing::info!(api = %format!("{DRA_GROUP}/{version}"), "watching Dynamic Resource Allocation");
        let [classes, claims, templates, slices] = holds;
        tokio::spawn(mirror(
            Api::<DynamicObject>::all_with(client.clone(), &resource(version, "DeviceClass")),
            classes,
            |snapshot| &mut snapshot.dra.device_classes,
            by_name(|class: &DynamicObject| Some(DeviceClassInfo::of(&class.data))),
            || {},
        ));
        // Only the slices of gpu.nvidia.com are kept (`read_slice`).
        tokio::spawn(mirror(
            Api::<DynamicObject>::all_with(client.clone(), &resource(version, "ResourceSlice")),
            slices,
            |snapshot| &mut snapshot.dra.slices,
            by_name(|slice: &DynamicObject| read_slice(&slice.data)),
            || {},
        ));
        // The claims (or templates) of every namespace, each one's requests
        // as written.
        for (kind, hold) in [(ClaimKind::Claim, claims), (ClaimKind::Template, templates)] {
            let api =
                Api::<DynamicObject>::all_with(client.clone(), &resource(version, kind.as_str()));
            let entry = move |object: &DynamicObject| Some(kept(object, kind));
            tokio::spawn(mirror(api, hold, table(kind), entry, || {}));
        }
    });
}

fn resource(version: &str, kind: &str) -> ApiResource {
    ApiResource::from_gvk(&dra_gvk(version, kind))
}

/// [`served_dra_version`], asked again (1 s, doubling to 30 s) until the
/// API server answers either way.
async fn served(client: &Client) -> Option<&'static str> {
    let mut delay = Duration::from_secs(1);
    let mut reported = false;
    loop {
        match served_dra_version(client).await {
            Ok(served) => return served,
            Err(error) => {
                if !std::mem::replace(&mut reported, true) {
                    tracing::warn!(
                        %error,
                        "cannot tell whether the API server serves Dynamic Resource \
                         Allocation; asking again"
                    );
                }
                tokio::time::sleep(delay).await;
                delay = (delay * 2).min(Duration::from_secs(30));
            }
        }
    }
}

fn table(
    kind: ClaimKind,
) -> fn(&mut ClusterSnapshot) -> &mut std::collections::BTreeMap<ClaimKey, KeptClaim> {
    match kind {
        ClaimKind::Claim => |snapshot| &mut snapshot.dra.claims,
        ClaimKind::Template => |snapshot| &mut snapshot.dra.templates,
    }
}

fn kept(object: &DynamicObject, kind: ClaimKind) -> (ClaimKey, KeptClaim) {
    let name = object.name_any();
    let namespace = object.namespace().unwrap_or_default();
    // `data` is the object but its metadata (spec and status, as the watch
    // gives them); who the claim was made for is read from the metadata.
    let mut claim = KeptClaim::of(&name, &object.data, kind);
    if let ClaimKind::Claim = kind {
        let owners = owners(object);
        claim.made_for = read_made_for(Document::from_value(&owners).root());
    }
    ((namespace, name), claim)
}

/// What `read_made_for` reads of a claim's metadata: its owner references
/// and the pod claim annotation, nothing else copied.
fn owners(object: &DynamicObject) -> Value {
    let references = serde_json::to_value(&object.metadata.owner_references).unwrap_or(Value::Null);
    let pod_claim = object.annotations().get(POD_CLAIM_NAME_ANNOTATION);
    json!({"metadata": {
        "ownerReferences": references,
        "annotations": {POD_CLAIM_NAME_ANNOTATION: pod_claim},
    }})
}

/// Lists the DRA objects for `audit`'s snapshot, cluster-wide (the
/// ResourceSlices of `gpu.nvidia.com` among them): nothing when the API
/// server does not serve them.
pub(super) async fn snapshot_into(
    client: &Client,
    settings: &Settings,
    snapshot: &mut ClusterSnapshot,
) -> Result<(), kube::Error> {
    snapshot.dra.settings = GpuSettings::new(Arc::new(settings.clone()));
    let Some(version) = served_dra_version(client).await? else {
        return Ok(());
    };
    let list = ListParams::default();
    let api = |kind: &str| Api::<DynamicObject>::all_with(client.clone(), &resource(version, kind));
    let classes = api("DeviceClass").list(&list).await?;
    let class = |class: &DynamicObject| (class.name_any(), DeviceClassInfo::of(&class.data));
    snapshot.dra.device_classes.extend(classes.iter().map(class));
    let slices = api("ResourceSlice").list(&list).await?;
    let slice = by_name(|slice: &DynamicObject| read_slice(&slice.data));
    snapshot.dra.slices.extend(slices.iter().filter_map(slice));
    for kind in [ClaimKind::Claim, ClaimKind::Template] {
        let objects = api(kind.as_str()).list(&list).await?;
        table(kind)(snapshot).extend(objects.iter().map(|object| kept(object, kind)));
    }
    Ok(())
}

/// The ResourceClaims and ResourceClaimTemplates of a namespace in
/// `resource.k8s.io/<version>`, each object's JSON text with its kind, a
/// page at a time ([`list_pages`], `pages` of each kind): the namespace
/// guard's look at what is already there; none where DRA is not served.
pub async fn claims_in_pages(
    client: &Client,
    version: &str,
    namespace: &str,
    pages: Pages,
    mut on_claim: impl FnMut(ClaimKind, &str),
) -> Result<Paged, kube::Error> {
    let mut paged = Paged::Complete;
    for kind in [ClaimKind::Claim, ClaimKind::Template] {
        let gvk = dra_gvk(version, kind.as_str());
        let on_item = |text: &str| on_claim(kind, text);
        match list_pages(client, namespace, &gvk, pages, on_item).await {
            Ok(this) => paged = paged.and(this),
            Err(error) if is_not_served(&error) => {}
            Err(error) => return Err(error),
        }
    }
    Ok(paged)
}

#[cfg(test)]
mod tests;
