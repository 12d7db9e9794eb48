//! [`ClusterCache`]: the lean snapshot the watch tasks write and the
//! handlers read, through [`ClusterFacts`] and [`ClaimFacts`].

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, RwLock, RwLockReadGuard, RwLockWriteGuard};
use std::time::{Duration, Instant};

use kube::runtime::watcher;

use super::node_summary::NodeSummary;
use crate::cuda::ComputeCapability;
use crate::policy::cluster::{ClusterSnapshot, GpuNodeLabels, NodeGpus, RuntimeClassInfo};
use crate::policy::dra::allocation::{AllocatedDevice, DeviceVersions};
use crate::policy::dra::{ClaimFacts, Resolved};
use crate::policy::{ClusterFacts, NodeFacts};
use crate::settings::Settings;

/// What a cache mirrors; also the `resource` label of the staleness metric.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Source {
    Namespaces,
    Nodes,
    RuntimeClasses,
    AllowlistedWorkloads,
    ResourceClaims,
    ResourceClaimTemplates,
    DeviceClasses,
    ResourceSlices,
}

const SOURCES: usize = 8;

impl Source {
    pub const ALL: [Source; SOURCES] = [
        Source::Namespaces,
        Source::Nodes,
        Source::RuntimeClasses,
        Source::AllowlistedWorkloads,
        Source::ResourceClaims,
        Source::ResourceClaimTemplates,
        Source::DeviceClasses,
        Source::ResourceSlices,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            Source::Namespaces => "namespaces",
            Source::Nodes => "nodes",
            Source::RuntimeClasses => "runtimeclasses",
            Source::AllowlistedWorkloads => "allowlisted-workloads",
            Source::ResourceClaims => "resourceclaims",
            Source::ResourceClaimTemplates => "resourceclaimtemplates",
            Source::DeviceClasses => "deviceclasses",
            Source::ResourceSlices => "resourceslices",
        }
    }

    /// Its place in [`Source::ALL`].
    fn index(self) -> usize {
        self as usize
    }
}

/// A source is *synced* once every watch it started with has listed:
/// readiness waits for that, once. A watch started later (a reload added an
/// allowlist entry, or changed the GPU resource patterns) marks its source
/// *stale* until it has listed, without taking the server out of service:
/// meanwhile the rules read what was known before the reload.
#[derive(Debug, Default)]
pub struct ClusterCache {
    snapshot: RwLock<ClusterSnapshot>,
    synced: [AtomicBool; SOURCES],
    stale: [AtomicBool; SOURCES],
    pending: [AtomicUsize; SOURCES],
    last_error: Mutex<[Option<Instant>; SOURCES]>,
    /// The settings whose GPU resource patterns the cached nodes were
    /// projected with (None before the first node list).
    node_projection: RwLock<Option<Arc<Settings>>>,
    /// Bumped by every write of the snapshot, under its write lock.
    generation: AtomicU64,
    /// The nodes summarised for the rules, as of some generation.
    summary: RwLock<Option<Arc<NodeSummary>>>,
    /// The version of `resource.k8s.io` watched, None when the API server
    /// serves none; unset until it said.
    dra_version: OnceLock<Option<&'static str>>,
}

/// How often the API server is asked whether it answers, to tell when a
/// stale cache is current again: a resumed watch brings no event when
/// nothing changed meanwhile.
pub(super) const PROBE_INTERVAL: Duration = Duration::from_secs(2);

impl ClusterCache {
    /// A writer panicking mid-update is impossible here (plain map
    /// operations): the data is recovered rather than the poison spread.
    pub(super) fn read(&self) -> RwLockReadGuard<'_, ClusterSnapshot> {
        self.snapshot.read().unwrap_or_else(|e| e.into_inner())
    }

    pub(super) fn write(&self) -> RwLockWriteGuard<'_, ClusterSnapshot> {
        let snapshot = self.snapshot.write().unwrap_or_else(|e| e.into_inner());
        // While no reader holds the snapshot: see `ClusterCache::node_summary`.
        self.generation.fetch_add(1, Ordering::AcqRel);
        snapshot
    }

    /// The API server said which version of `resource.k8s.io` it serves
    /// (None: none); the first answer holds until a restart.
    pub(super) fn set_dra_version(&self, version: Option<&'static str>) {
        let _ = self.dra_version.set(version);
    }

    /// The version of `resource.k8s.io` the DRA sources watch: None until
    /// the API server said, `Some(None)` when it serves none.
    pub fn dra_version(&self) -> Option<Option<&'static str>> {
        self.dra_version.get().copied()
    }

    /// Whether the API server serves what `source` watches (unknown until
    /// it said: true), and in which version.
    pub fn watched(&self, source: Source) -> (bool, &'static str) {
        match source {
            Source::ResourceClaims
            | Source::ResourceClaimTemplates
            | Source::DeviceClasses
            | Source::ResourceSlices => match self.dra_version() {
                Some(None) => (false, ""),
                Some(Some(version)) => (true, version),
                None => (true, ""),
            },
            _ => (true, "v1"),
        }
    }

    /// Every cache has completed its first full list.
    pub fn is_synced(&self) -> bool {
        self.synced.iter().all(|s| s.load(Ordering::Acquire))
    }

    /// The source's watches failed lately, or one of them has not listed
    /// yet: decisions use what was known before.
    pub fn is_stale(&self, source: Source) -> bool {
        self.stale[source.index()].load(Ordering::Acquire)
    }

    pub fn snapshot(&self) -> ClusterSnapshot {
        self.read().clone()
    }

    pub(super) fn mark_fresh(&self, source: Source) {
        if self.pending[source.index()].load(Ordering::Acquire) > 0 {
            return;
        }
        if self.stale[source.index()].swap(false, Ordering::AcqRel) {
            tracing::info!(resource = source.as_str(), "cluster cache is current again");
        }
    }

    /// A watch of `source` starts; it has to list before the source is
    /// synced (at start) or current (after a reload).
    pub(super) fn watch_started(&self, source: Source) {
        self.pending[source.index()].fetch_add(1, Ordering::AcqRel);
        if self.synced[source.index()].load(Ordering::Acquire)
            && !self.stale[source.index()].swap(true, Ordering::AcqRel)
        {
            tracing::info!(
                resource = source.as_str(),
                "cluster cache is catching up with the reloaded configuration"
            );
        }
    }

    pub(super) fn watch_listed(&self, source: Source) {
        if self.pending[source.index()].fetch_sub(1, Ordering::AcqRel) == 1 {
            self.synced[source.index()].store(true, Ordering::Release);
            self.mark_fresh(source);
        }
    }

    pub(super) fn watch_stopped(&self, source: Source) {
        self.pending[source.index()].fetch_sub(1, Ordering::AcqRel);
    }

    /// The watches of `source` are being started or stopped: until
    /// [`ClusterCache::release`], none of them makes the source synced or
    /// current, whatever it lists. A source fed by several watches (one per
    /// allowlist entry) would otherwise count as listed as soon as the
    /// first one had listed, before the next one was even started.
    pub(super) fn hold(&self, source: Source) {
        self.pending[source.index()].fetch_add(1, Ordering::AcqRel);
    }

    /// The watches of `source` are in place: it is synced (and current)
    /// once every one of them has listed, which may be now (an empty
    /// allowlist has no watch at all).
    pub(super) fn release(&self, source: Source) {
        self.watch_listed(source);
    }

    /// The API server answered: every watch that has not failed for a probe
    /// interval has reconnected (kube-runtime retries within its backoff).
    pub(super) fn api_answered(&self) {
        let now = Instant::now();
        let last_error = *self.last_error.lock().unwrap_or_else(|e| e.into_inner());
        for source in Source::ALL {
            let quiet = last_error[source.index()]
                .is_none_or(|at| now.duration_since(at) >= PROBE_INTERVAL);
            if quiet && self.synced[source.index()].load(Ordering::Acquire) {
                self.mark_fresh(source);
            }
        }
    }

    pub(super) fn mark_stale(&self, source: Source, error: &watcher::Error) {
        self.last_error.lock().unwrap_or_else(|e| e.into_inner())[source.index()] =
            Some(Instant::now());
        if !self.stale[source.index()].swap(true, Ordering::AcqRel) {
            tracing::warn!(
                resource = source.as_str(),
                %error,
                "cluster cache is stale: decisions use the last known state"
            );
        }
    }

    /// The node table now holds projections made with `settings`' GPU
    /// resource patterns.
    pub(super) fn nodes_projected_with(&self, settings: Arc<Settings>) {
        *self.node_projection.write().unwrap_or_else(|e| e.into_inner()) = Some(settings);
    }

    /// Whether the cached nodes carry `resource` (a GPU resource of the
    /// settings they were projected with).
    fn nodes_carry(&self, resource: &str) -> bool {
        self.node_projection
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .is_some_and(|settings| settings.is_gpu_resource(resource))
    }

    /// Writers bump the generation under the snapshot's write lock, so the
    /// generation read here under the read lock is that of the data
    /// summarised: an older summary is never taken for a newer one.
    fn node_summary(&self) -> Arc<NodeSummary> {
        let snapshot = self.read();
        let generation = self.generation.load(Ordering::Acquire);
        let current = |summary: &Option<Arc<NodeSummary>>| {
            summary.as_ref().filter(|summary| summary.generation() == generation).map(Arc::clone)
        };
        let cached = self.summary.read().unwrap_or_else(|e| e.into_inner());
        if let Some(summary) = current(&cached) {
            return summary;
        }
        drop(cached);
        let mut cached = self.summary.write().unwrap_or_else(|e| e.into_inner());
        // Another reader may have made it meanwhile.
        if let Some(summary) = current(&cached) {
            return summary;
        }
        let summary = Arc::new(NodeSummary::of(&snapshot.nodes, generation));
        *cached = Some(Arc::clone(&summary));
        summary
    }
}

impl ClusterFacts for ClusterCache {
    fn runtime_class(&self, name: &str) -> Option<RuntimeClassInfo> {
        self.read().runtime_class(name)
    }

    fn workload_uid(&self, namespace: &str, kind: &str, name: &str) -> Option<String> {
        self.read().workload_uid(namespace, kind, name)
    }

    /// None ("nothing can be concluded") for a resource the cached nodes
    /// were not projected with: a pattern added at reload until the nodes
    /// are listed again.
    fn largest_allocatable(&self, resource: &str) -> Option<u64> {
        if !self.nodes_carry(resource) {
            return None;
        }
        self.node_summary().largest_allocatable(resource)
    }

    fn namespace_annotations(&self, namespace: &str) -> BTreeMap<String, String> {
        self.read().namespace_annotations(namespace)
    }
}

/// From the summary of the nodes, made once per change of the caches: a
/// node labelled or unlabelled is seen at the next admission.
impl NodeFacts for ClusterCache {
    fn compute_capabilities(&self) -> Vec<ComputeCapability> {
        self.node_summary().compute_capabilities()
    }

    fn gpu_node_labels(&self) -> GpuNodeLabels {
        self.node_summary().gpu_node_labels()
    }

    fn gpu_products(&self) -> Vec<String> {
        self.node_summary().gpu_products()
    }

    fn node(&self, name: &str) -> Option<NodeGpus> {
        self.read().nodes.get(name).cloned()
    }
}

/// Claims resolve from the watched tables; one not (yet) seen is unknown.
impl ClaimFacts for ClusterCache {
    fn resource_claim_template(&self, namespace: &str, name: &str) -> Resolved {
        self.read().dra.resource_claim_template(namespace, name)
    }

    fn resource_claim(&self, namespace: &str, name: &str) -> Resolved {
        self.read().dra.resource_claim(namespace, name)
    }

    fn is_gpu_device_class(&self, class: &str) -> bool {
        self.read().dra.is_gpu_device_class(class)
    }

    fn allocation(&self, namespace: &str, name: &str) -> Option<Vec<AllocatedDevice>> {
        self.read().dra.allocation(namespace, name)
    }

    fn device_versions(&self, driver: &str, pool: &str, device: &str) -> Option<DeviceVersions> {
        self.read().dra.device_versions(driver, pool, device)
    }

    fn claims_made_for(&self, namespace: &str, pod_uid: &str) -> Option<BTreeMap<String, String>> {
        self.read().dra.claims_made_for(namespace, pod_uid)
    }

    fn serves_extended_resource(&self, resource: &str) -> bool {
        self.read().dra.serves_extended_resource(resource)
    }
}

#[cfg(test)]
mod tests;
