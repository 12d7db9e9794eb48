//! An in-memory Kubernetes API server for tests of the cluster client.
//!
//! It speaks the real protocol over plain HTTP/1.1 on `127.0.0.1:<random port>`
//! so the real `kube::Client`, `kube::runtime::watcher` and `reflector` can run
//! against it:
//!
//! * URL layout of the real server: `/api/v1/{plural}`,
//!   `/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]`,
//!   `/apis/{group}/{version}/...`, plus `/version` and the discovery of
//!   one group, `/apis/{group}` (the versions of its registered kinds, in
//!   the order registered; 404 when none).
//! * One global, monotonically increasing `resourceVersion` (a decimal
//!   string); `uid`, `creationTimestamp` and `generation` maintained.
//! * LIST with `labelSelector` (`k=v`, `k==v`, `k!=v`, `k`, `!k`,
//!   `k in (a,b)`, `k notin (a,b)`) and `fieldSelector` (`path=v`,
//!   `path!=v` on any dotted field such as `metadata.name`, `spec.nodeName`).
//!   `limit` pages the list like the real server: a page of at most
//!   `limit` objects and, when more follow, a `metadata.continue` token;
//!   every page carries the resourceVersion of the first, and a token from
//!   before the last [`FakeApi::compact`] is answered 410 `Expired`.
//! * WATCH (`watch=true|1`): newline-delimited JSON events in a chunked 200
//!   response. From `resourceVersion=N` the history after N is replayed, then
//!   live events follow. `resourceVersion` unset or `0` starts with a
//!   synthetic `ADDED` per existing object; `sendInitialEvents=true` then adds
//!   the `k8s.io/initial-events-end` bookmark (streaming lists work).
//!   A resourceVersion older than the last [`FakeApi::compact`] yields one
//!   `ERROR` event carrying a 410 `Expired` Status, like the real server.
//!   `allowWatchBookmarks=true` gets a `BOOKMARK` every
//!   [`FakeApi::set_bookmark_interval`] (1 s by default); `timeoutSeconds`
//!   ends the stream cleanly. Label-selector watches turn a MODIFIED that
//!   moves an object in or out of the selection into ADDED/DELETED.
//! * GET / POST (201; 409 `AlreadyExists`) / PUT (409 `Conflict` on a stale
//!   `metadata.resourceVersion`) / PATCH (`application/merge-patch+json`,
//!   `application/json-patch+json`, and server-side apply as one field
//!   manager sees it, `apply.rs`; strategic merge is answered 415) /
//!   DELETE (returns the deleted object; honours `preconditions`) / DELETE on a collection. The `status` subresource
//!   exists (GET, and PUT/PATCH that change only `.status`). `dryRun` is
//!   honoured. Metadata-only requests
//!   (`Accept: application/json;as=PartialObjectMetadata...`) get
//!   `PartialObjectMetadata[List]`.
//! * Not modelled: the rest of discovery, authentication, admission, finalizers,
//!   garbage collection, namespace existence checks, status protection on
//!   the main resource, `remainingItemCount`.
//!
//! Faults: [`FakeApi::fail_next`], [`FakeApi::hang_next`] (no answer until
//! [`FakeApi::release_hangs`]), for one Pod's GET [`FakeApi::fail_pod_get`]
//! and [`FakeApi::hang_pod_get`], [`FakeApi::compact`],
//! [`FakeApi::drop_watches`], [`FakeApi::stop`]/[`FakeApi::restart`].
//! Every request is recorded, see [`FakeApi::requests`] (and
//! [`FakeApi::metadata_requests`], those that asked for metadata only, and
//! [`FakeApi::pod_gets`]).
//!
//! Note that kube's client retries 429, 503 and 504 answers by itself (up to
//! 15 times), so a `fail_next` with one of those codes is invisible to the
//! caller unless it outnumbers the retries.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
use std::ops::Bound;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::{Query, Request, State};
use axum::http::{HeaderMap, Method, header};
use axum::response::Response;
use serde_json::{Value, json};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::{broadcast, oneshot, watch};
use tokio::task::{JoinHandle, JoinSet};
use tokio::time::{Instant, Interval};
use tower::ServiceExt;

mod apply;
pub mod dra;
mod http;
pub mod reports;
mod responses;
mod selectors;
mod store;
mod watches;

use http::*;
use responses::*;
use selectors::*;
use watches::*;

pub use store::KindInfo;
use store::*;

/// What a faulty request gets instead of its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FaultAnswer {
    /// A Status of this code.
    Status(u16),
    /// Nothing until [`FakeApi::release_hangs`] (or [`HANG_LIMIT`], or the
    /// server stops); then the usual answer.
    Hang,
}

/// The longest a hung request waits for [`FakeApi::release_hangs`].
pub const HANG_LIMIT: Duration = Duration::from_secs(60);

pub struct Fault {
    pub method: String,
    /// The path (or path and query) starts with this; with `exact`, the
    /// path is this.
    pub path_prefix: String,
    pub exact: bool,
    pub answer: FaultAnswer,
    pub remaining: usize,
}

pub struct Shared {
    pub store: Mutex<Store>,
    pub changes: broadcast::Sender<Arc<Change>>,
    /// Bumped by `drop_watches`; every open watch ends abruptly.
    pub kill: watch::Sender<u64>,
    /// Bumped by `release_hangs`; every hung request is answered.
    pub release: watch::Sender<u64>,
    pub faults: Mutex<Vec<Fault>>,
    pub requests: Mutex<Vec<(String, String)>>,
    /// The requests that asked for `PartialObjectMetadata`.
    pub metadata_requests: Mutex<Vec<(String, String)>>,
    pub bookmark_interval: Mutex<Duration>,
}

impl Shared {
    pub fn take_fault(
        &self,
        method: &str,
        path: &str,
        path_and_query: &str,
    ) -> Option<FaultAnswer> {
        let mut faults = self.faults.lock().unwrap();
        let index = faults.iter().position(|f| {
            f.method.eq_ignore_ascii_case(method)
                && if f.exact {
                    path == f.path_prefix
                } else {
                    path.starts_with(&f.path_prefix) || path_and_query.starts_with(&f.path_prefix)
                }
        })?;
        let fault = &mut faults[index];
        let answer = fault.answer;
        fault.remaining -= 1;
        if fault.remaining == 0 {
            faults.remove(index);
        }
        Some(answer)
    }

    fn add_fault(&self, fault: Fault) {
        if fault.remaining > 0 {
            self.faults.lock().unwrap().push(fault);
        }
    }
}

/// The path of one Pod: `/api/v1/namespaces/{namespace}/pods/{name}`.
pub fn pod_path(namespace: &str, name: &str) -> String {
    format!("/api/v1/namespaces/{namespace}/pods/{name}")
}

/// The fake API server. Dropping it shuts the server down.
pub struct FakeApi {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Mutex<Option<Server>>,
}

pub struct Server {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl FakeApi {
    /// Starts serving on `127.0.0.1` at a free port.
    pub async fn start() -> FakeApi {
        let (changes, _) = broadcast::channel(16 * 1024);
        let (kill, _) = watch::channel(0);
        let (release, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            changes,
            kill,
            release,
            faults: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            metadata_requests: Mutex::new(Vec::new()),
            bookmark_interval: Mutex::new(Duration::from_secs(1)),
        });
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let server = spawn_server(listener, shared.clone());
        FakeApi { shared, addr, server: Mutex::new(Some(server)) }
    }

    /// `http://127.0.0.1:<port>`
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// A real kube client for this server, default namespace `default`.
    pub fn client(&self) -> kube::Client {
        install_crypto_provider();
        let mut config = kube::Config::new(self.url().parse().expect("server URL"));
        config.default_namespace = "default".into();
        kube::Client::try_from(config).expect("kube client for the fake API")
    }

    /// Writes `dir/kubeconfig` pointing at this server (for `--kubeconfig`).
    pub fn write_kubeconfig(&self, dir: &Path) -> PathBuf {
        let path = dir.join("kubeconfig");
        let yaml = format!(
            "apiVersion: v1\n\
             kind: Config\n\
             clusters:\n\
             - name: fake\n  cluster:\n    server: {url}\n\
             users:\n\
             - name: fake\n  user: {{}}\n\
             contexts:\n\
             - name: fake\n  context:\n    cluster: fake\n    user: fake\n    namespace: default\n\
             current-context: fake\n",
            url = self.url()
        );
        std::fs::write(&path, yaml).expect("write kubeconfig");
        path
    }

    /// Serves one more kind (e.g. a custom resource).
    pub fn register_kind(&self, kind: KindInfo) {
        let mut store = self.shared.store.lock().unwrap();
        store.kinds.retain(|k| !k.same_resource(&kind));
        store.kinds.push(kind);
    }

    /// Stops serving every kind of `group`/`version` (e.g.
    /// `resource.k8s.io/v1`, to play a cluster older than 1.34): its URLs
    /// answer 404 like an API server that does not know them.
    pub fn unregister_group_version(&self, group: &str, version: &str) {
        let mut store = self.shared.store.lock().unwrap();
        store.kinds.retain(|k| !(k.group == group && k.version == version));
    }

    /// Serves Dynamic Resource Allocation as `resource.k8s.io/<version>`
    /// only (`v1beta1` plays Kubernetes 1.32, or 1.33 with DRA on).
    pub fn serve_dra_as(&self, version: &str) {
        self.unregister_group_version("resource.k8s.io", "v1");
        for (kind, plural, namespaced) in [
            ("ResourceClaim", "resourceclaims", true),
            ("ResourceClaimTemplate", "resourceclaimtemplates", true),
            ("DeviceClass", "deviceclasses", false),
            ("ResourceSlice", "resourceslices", false),
        ] {
            self.register_kind(KindInfo::new(kind, "resource.k8s.io", version, plural, namespaced));
        }
    }

    /// Creates or replaces an object given with `apiVersion`, `kind` and
    /// `metadata.name` (namespaced kinds default to namespace `default`).
    /// Open watches see ADDED or MODIFIED. Returns the stored object.
    pub fn insert(&self, mut object: Value) -> Value {
        let api_version = object["apiVersion"].as_str().expect("object has apiVersion").to_owned();
        let kind_name = object["kind"].as_str().expect("object has kind").to_owned();
        assert!(!meta_str(&object, "name").is_empty(), "object has metadata.name");
        let mut store = self.shared.store.lock().unwrap();
        let kind = store.kind_by_api_version(&api_version, &kind_name).unwrap_or_else(|| {
            panic!("FakeApi does not serve {api_version} {kind_name}; see register_kind")
        });
        if kind.namespaced && meta_str(&object, "namespace").is_empty() {
            object["metadata"]["namespace"] = "default".into();
        }
        store.commit(&self.shared.changes, &kind, object, true)
    }

    /// Deletes an object; open watches see DELETED. Returns it if it existed.
    pub fn remove(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let mut store = self.shared.store.lock().unwrap();
        let kind = store.kind_by_api_version(api_version, kind)?;
        store.erase(&self.shared.changes, &kind, namespace.unwrap_or_default(), name)
    }

    pub fn get(
        &self,
        api_version: &str,
        kind: &str,
        namespace: Option<&str>,
        name: &str,
    ) -> Option<Value> {
        let store = self.shared.store.lock().unwrap();
        let kind = store.kind_by_api_version(api_version, kind)?;
        store.objects.get(&key_of(&kind, namespace.unwrap_or_default(), name)).cloned()
    }

    /// All stored objects of a kind (by kind name, e.g. `"Pod"`), sorted by
    /// namespace and name.
    pub fn objects(&self, kind: &str) -> Vec<Value> {
        let store = self.shared.store.lock().unwrap();
        let Some(kind) = store.kind_by_name(kind) else {
            return Vec::new();
        };
        store.select(&Filter::all(kind))
    }

    /// The current (last handed out) resourceVersion.
    pub fn resource_version(&self) -> u64 {
        self.shared.store.lock().unwrap().rv
    }

    /// The next `times` requests whose method is `method` and whose path (or
    /// path and query) starts with `path_prefix` are answered with a Status
    /// of that code (`403` → `Forbidden`, `409` → `Conflict`, `500` →
    /// `InternalError`, ...). Faults are checked in the order they were added.
    pub fn fail_next(&self, method: &str, path_prefix: &str, status: u16, times: usize) {
        self.shared.add_fault(Fault {
            method: method.to_owned(),
            path_prefix: path_prefix.to_owned(),
            exact: false,
            answer: FaultAnswer::Status(status),
            remaining: times,
        });
    }

    /// The next `times` requests whose method is `method` and whose path (or
    /// path and query) starts with `path_prefix` get no answer until
    /// [`FakeApi::release_hangs`] ([`HANG_LIMIT`] at most), then their usual
    /// one: a client that gives up first sees a server that does not answer.
    pub fn hang_next(&self, method: &str, path_prefix: &str, times: usize) {
        self.shared.add_fault(Fault {
            method: method.to_owned(),
            path_prefix: path_prefix.to_owned(),
            exact: false,
            answer: FaultAnswer::Hang,
            remaining: times,
        });
    }

    /// Answers every request hung by [`FakeApi::hang_next`] or
    /// [`FakeApi::hang_pod_get`] so far.
    pub fn release_hangs(&self) {
        self.shared.release.send_modify(|generation| *generation += 1);
    }

    /// The next `times` GETs of the Pod `namespace/name` (that one path,
    /// full or metadata-only) are answered with a Status of that code, as
    /// [`FakeApi::fail_next`]. kube retries 429, 503 and 504 by itself.
    pub fn fail_pod_get(&self, namespace: &str, name: &str, status: u16, times: usize) {
        self.shared.add_fault(Fault {
            method: "GET".to_owned(),
            path_prefix: pod_path(namespace, name),
            exact: true,
            answer: FaultAnswer::Status(status),
            remaining: times,
        });
    }

    /// The next `times` GETs of the Pod `namespace/name` hang, as
    /// [`FakeApi::hang_next`].
    pub fn hang_pod_get(&self, namespace: &str, name: &str, times: usize) {
        self.shared.add_fault(Fault {
            method: "GET".to_owned(),
            path_prefix: pod_path(namespace, name),
            exact: true,
            answer: FaultAnswer::Hang,
            remaining: times,
        });
    }

    /// How many GETs of the Pod `namespace/name` were received (watches
    /// excluded, faulty ones included).
    pub fn pod_gets(&self, namespace: &str, name: &str) -> usize {
        let path = pod_path(namespace, name);
        self.requests()
            .iter()
            .filter(|(method, sent)| {
                method == "GET" && sent.split('?').next() == Some(path.as_str())
            })
            .filter(|(_, sent)| !sent.contains("watch="))
            .count()
    }

    /// Forgets the change history, like an etcd compaction. The compaction
    /// takes a resourceVersion of its own, so every resourceVersion handed
    /// out before is now too old to watch from: such watches get a 410
    /// `Expired` ERROR event and a client has to LIST again.
    pub fn compact(&self) {
        let mut store = self.shared.store.lock().unwrap();
        store.rv += 1;
        store.floor = store.rv;
        store.history.clear();
    }

    /// Ends every open watch stream abruptly (no final chunk), as when the
    /// server goes away mid-watch.
    pub fn drop_watches(&self) {
        self.shared.kill.send_modify(|generation| *generation += 1);
    }

    /// How often watches with `allowWatchBookmarks=true` get a BOOKMARK
    /// (applies to watches opened afterwards).
    pub fn set_bookmark_interval(&self, interval: Duration) {
        *self.shared.bookmark_interval.lock().unwrap() = interval;
    }

    /// Stops listening and drops every connection; the store is kept.
    pub async fn stop(&self) {
        let server = self.server.lock().unwrap().take();
        if let Some(server) = server {
            let _ = server.stop.send(());
            let _ = server.task.await;
        }
    }

    /// Listens again on the same port (stopping first if running).
    pub async fn restart(&self) {
        self.stop().await;
        let deadline = Instant::now() + Duration::from_secs(10);
        let listener = loop {
            match bind(self.addr) {
                Ok(listener) => break listener,
                Err(_) if Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(err) => panic!("rebind {}: {err}", self.addr),
            }
        };
        *self.server.lock().unwrap() = Some(spawn_server(listener, self.shared.clone()));
    }

    pub fn is_running(&self) -> bool {
        self.server.lock().unwrap().is_some()
    }

    /// Every request so far: (method, path and query as sent).
    pub fn requests(&self) -> Vec<(String, String)> {
        self.shared.requests.lock().unwrap().clone()
    }

    /// The requests so far that asked for metadata only (`Accept:
    /// application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1`, or
    /// the List form): (method, path and query as sent).
    pub fn metadata_requests(&self) -> Vec<(String, String)> {
        self.shared.metadata_requests.lock().unwrap().clone()
    }

    /// How many recorded requests have this method and a path (and query)
    /// containing all of `parts`.
    pub fn count_requests(&self, method: &str, parts: &[&str]) -> usize {
        self.shared
            .requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(m, p)| m == method && parts.iter().all(|part| p.contains(part)))
            .count()
    }

    pub fn clear_requests(&self) {
        self.shared.requests.lock().unwrap().clear();
        self.shared.metadata_requests.lock().unwrap().clear();
    }
}

impl Drop for FakeApi {
    fn drop(&mut self) {
        if let Some(server) = self.server.get_mut().map(Option::take).ok().flatten() {
            server.task.abort();
        }
    }
}

/// Polls `condition` every 20 ms until it holds; panics after `timeout`.
pub async fn eventually(what: &str, timeout: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + timeout;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Starts the webhook's cluster watches against `api` with `settings`, and
/// waits for their first full list.
pub async fn watching(
    api: &FakeApi,
    settings: &gpu_policy::settings::Settings,
) -> (Arc<gpu_policy::cluster::ClusterCache>, gpu_policy::cluster::Watches) {
    install_crypto_provider();
    let cache = Arc::new(gpu_policy::cluster::ClusterCache::default());
    let watches = gpu_policy::cluster::Watches::start(api.client(), settings, Arc::clone(&cache));
    eventually("the first full list", Duration::from_secs(15), || cache.is_synced()).await;
    (cache, watches)
}

/// kube's rustls client needs a process-wide crypto provider.
pub fn install_crypto_provider() {
    // Fails only when one is installed already, which is fine.
    let _ = rustls::crypto::ring::default_provider().install_default();
}

fn bind(addr: SocketAddr) -> io::Result<TcpListener> {
    let socket = TcpSocket::new_v4()?;
    socket.set_reuseaddr(true)?;
    socket.bind(addr)?;
    socket.listen(1024)
}

fn spawn_server(listener: TcpListener, shared: Arc<Shared>) -> Server {
    let (stop, stop_rx) = oneshot::channel();
    let app = Router::new().fallback(handle).with_state(shared);
    let task = tokio::spawn(serve(listener, app, stop_rx));
    Server { stop, task }
}

/// Accept loop. Connections live in a JoinSet so that stopping aborts them
/// all, watch streams included.
async fn serve(listener: TcpListener, app: Router, mut stop: oneshot::Receiver<()>) {
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            _ = &mut stop => break,
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else { continue };
                let app = app.clone();
                connections.spawn(async move {
                    let service = hyper::service::service_fn(
                        move |req: hyper::Request<hyper::body::Incoming>| app.clone().oneshot(req),
                    );
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
    drop(listener);
    connections.shutdown().await;
}
