//! An in-memory Kubernetes API server for tests of the cluster client.
//!
//! It speaks the real protocol over plain HTTP/1.1 on `127.0.0.1:<random port>`
//! so the real `kube::Client`, `kube::runtime::watcher` and `reflector` can run
//! against it:
//!
//! * URL layout of the real server: `/api/v1/{plural}`,
//!   `/api/v1/namespaces/{ns}/{plural}[/{name}[/status]]`,
//!   `/apis/{group}/{version}/...`, plus `/version`.
//! * One global, monotonically increasing `resourceVersion` (a decimal
//!   string); `uid`, `creationTimestamp` and `generation` maintained.
//! * LIST with `labelSelector` (`k=v`, `k==v`, `k!=v`, `k`, `!k`,
//!   `k in (a,b)`, `k notin (a,b)`) and `fieldSelector` (`path=v`,
//!   `path!=v` on any dotted field such as `metadata.name`, `spec.nodeName`).
//!   `limit`/`continue` are ignored: everything comes back in one page.
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
//!   `application/json-patch+json`; strategic merge and server-side apply are
//!   answered 415) / DELETE (returns the deleted object; honours
//!   `preconditions`) / DELETE on a collection. The `status` subresource
//!   exists (GET, and PUT/PATCH that change only `.status`). `dryRun` is
//!   honoured. Metadata-only requests
//!   (`Accept: application/json;as=PartialObjectMetadata...`) get
//!   `PartialObjectMetadata[List]`.
//! * Not modelled: discovery, authentication, admission, finalizers,
//!   garbage collection, namespace existence checks, status protection on
//!   the main resource, pagination.
//!
//! Faults: [`FakeApi::fail_next`], [`FakeApi::compact`],
//! [`FakeApi::drop_watches`], [`FakeApi::stop`]/[`FakeApi::restart`].
//! Every request is recorded, see [`FakeApi::requests`].
//!
//! Note that kube's client retries 429, 503 and 504 answers by itself (up to
//! 15 times), so a `fail_next` with one of those codes is invisible to the
//! caller unless it outnumbers the retries.

#![allow(dead_code)]

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::io;
use std::net::SocketAddr;
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

/// How a kind is served: `kind` lives at `/apis/{group}/{version}/.../{plural}`
/// (`/api/{version}/...` for the core group, whose `group` is empty).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KindInfo {
    pub kind: String,
    pub group: String,
    pub version: String,
    pub plural: String,
    pub namespaced: bool,
}

impl KindInfo {
    pub fn new(kind: &str, group: &str, version: &str, plural: &str, namespaced: bool) -> Self {
        Self {
            kind: kind.to_owned(),
            group: group.to_owned(),
            version: version.to_owned(),
            plural: plural.to_owned(),
            namespaced,
        }
    }

    /// `v1` for the core group, `group/version` otherwise.
    pub fn api_version(&self) -> String {
        if self.group.is_empty() {
            self.version.clone()
        } else {
            format!("{}/{}", self.group, self.version)
        }
    }

    fn same_resource(&self, other: &KindInfo) -> bool {
        self.group == other.group && self.version == other.version && self.plural == other.plural
    }
}

/// The kinds served from the start: (kind, group, version, plural, namespaced).
const KINDS: &[(&str, &str, &str, &str, bool)] = &[
    ("Namespace", "", "v1", "namespaces", false),
    ("Node", "", "v1", "nodes", false),
    ("Pod", "", "v1", "pods", true),
    ("Secret", "", "v1", "secrets", true),
    ("ConfigMap", "", "v1", "configmaps", true),
    (
        "ReplicationController",
        "",
        "v1",
        "replicationcontrollers",
        true,
    ),
    ("PodTemplate", "", "v1", "podtemplates", true),
    ("Service", "", "v1", "services", true),
    ("ServiceAccount", "", "v1", "serviceaccounts", true),
    ("Event", "", "v1", "events", true),
    ("RuntimeClass", "node.k8s.io", "v1", "runtimeclasses", false),
    ("DaemonSet", "apps", "v1", "daemonsets", true),
    ("Deployment", "apps", "v1", "deployments", true),
    ("ReplicaSet", "apps", "v1", "replicasets", true),
    ("StatefulSet", "apps", "v1", "statefulsets", true),
    ("Job", "batch", "v1", "jobs", true),
    ("CronJob", "batch", "v1", "cronjobs", true),
    ("Lease", "coordination.k8s.io", "v1", "leases", true),
    (
        "MutatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        false,
    ),
    (
        "ValidatingWebhookConfiguration",
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        false,
    ),
];

/// (group, version, plural, namespace or "", name)
type Key = (String, String, String, String, String);

fn key_of(kind: &KindInfo, namespace: &str, name: &str) -> Key {
    (
        kind.group.clone(),
        kind.version.clone(),
        kind.plural.clone(),
        if kind.namespaced {
            namespace.to_owned()
        } else {
            String::new()
        },
        name.to_owned(),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One write, kept in the history log and broadcast to open watches.
#[derive(Debug)]
struct Change {
    rv: u64,
    kind: KindInfo,
    change: ChangeType,
    object: Value,
    /// The object before a modification (to turn MODIFIED into ADDED or
    /// DELETED for label-selector watches).
    previous: Option<Value>,
}

struct Store {
    /// The current (last handed out) resourceVersion.
    rv: u64,
    /// Watches from a resourceVersion below this get 410 Expired.
    floor: u64,
    next_uid: u64,
    kinds: Vec<KindInfo>,
    objects: BTreeMap<Key, Value>,
    history: Vec<Arc<Change>>,
}

impl Store {
    fn new() -> Self {
        Self {
            rv: 1,
            floor: 0,
            next_uid: 1,
            kinds: KINDS
                .iter()
                .map(|(k, g, v, p, n)| KindInfo::new(k, g, v, p, *n))
                .collect(),
            objects: BTreeMap::new(),
            history: Vec::new(),
        }
    }

    fn kind_by_api_version(&self, api_version: &str, kind: &str) -> Option<KindInfo> {
        self.kinds
            .iter()
            .find(|k| k.kind == kind && k.api_version() == api_version)
            .cloned()
    }

    fn kind_by_name(&self, kind: &str) -> Option<KindInfo> {
        self.kinds.iter().find(|k| k.kind == kind).cloned()
    }

    fn kind_by_plural(&self, group: &str, version: &str, plural: &str) -> Option<KindInfo> {
        self.kinds
            .iter()
            .find(|k| k.group == group && k.version == version && k.plural == plural)
            .cloned()
    }

    fn new_uid(&mut self) -> String {
        let n = self.next_uid;
        self.next_uid += 1;
        format!("fa4e0000-0000-4000-8000-{n:012x}")
    }

    fn record(&mut self, changes: &broadcast::Sender<Arc<Change>>, change: Change) {
        let change = Arc::new(change);
        self.history.push(change.clone());
        // No receiver is not an error: nobody is watching.
        let _ = changes.send(change);
    }

    /// Creates or replaces `obj` (whose namespace and name must be set),
    /// assigning a new resourceVersion, and records the change. `trusted`
    /// writes (from the test itself) keep a given uid, creationTimestamp and
    /// generation; writes over HTTP get them from the server like the real one.
    fn commit(
        &mut self,
        changes: &broadcast::Sender<Arc<Change>>,
        kind: &KindInfo,
        mut obj: Value,
        trusted: bool,
    ) -> Value {
        let namespace = if kind.namespaced {
            meta_str(&obj, "namespace")
        } else {
            String::new()
        };
        let name = meta_str(&obj, "name");
        let key = key_of(kind, &namespace, &name);
        let previous = self.objects.get(&key).cloned();

        let given = |field: &str| {
            Some(obj["metadata"][field].clone()).filter(|v| trusted && !v.is_null() && *v != "")
        };
        let (uid, created, generation) = match &previous {
            Some(prev) => {
                let prev_generation = prev["metadata"]["generation"].as_i64().unwrap_or(1);
                let generation = if spec_of(prev) == spec_of(&obj) {
                    prev_generation
                } else {
                    prev_generation + 1
                };
                (
                    given("uid").unwrap_or_else(|| prev["metadata"]["uid"].clone()),
                    given("creationTimestamp")
                        .unwrap_or_else(|| prev["metadata"]["creationTimestamp"].clone()),
                    given("generation").unwrap_or_else(|| generation.into()),
                )
            }
            None => (
                given("uid").unwrap_or_else(|| self.new_uid().into()),
                given("creationTimestamp").unwrap_or_else(|| now_rfc3339().into()),
                given("generation").unwrap_or_else(|| 1.into()),
            ),
        };

        self.rv += 1;
        let body = obj
            .as_object_mut()
            .expect("a Kubernetes object is a JSON object");
        body.insert("apiVersion".into(), kind.api_version().into());
        body.insert("kind".into(), kind.kind.clone().into());
        let meta = body
            .entry("metadata")
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("metadata is a JSON object");
        if !kind.namespaced {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), uid);
        meta.insert("creationTimestamp".into(), created);
        meta.insert("generation".into(), generation);
        meta.insert("resourceVersion".into(), self.rv.to_string().into());

        self.objects.insert(key, obj.clone());
        let change = if previous.is_some() {
            ChangeType::Modified
        } else {
            ChangeType::Added
        };
        self.record(
            changes,
            Change {
                rv: self.rv,
                kind: kind.clone(),
                change,
                object: obj.clone(),
                previous,
            },
        );
        obj
    }

    /// Deletes an object, recording a DELETED change at a new resourceVersion.
    fn erase(
        &mut self,
        changes: &broadcast::Sender<Arc<Change>>,
        kind: &KindInfo,
        namespace: &str,
        name: &str,
    ) -> Option<Value> {
        let mut obj = self.objects.remove(&key_of(kind, namespace, name))?;
        self.rv += 1;
        obj["metadata"]["resourceVersion"] = self.rv.to_string().into();
        self.record(
            changes,
            Change {
                rv: self.rv,
                kind: kind.clone(),
                change: ChangeType::Deleted,
                object: obj.clone(),
                previous: None,
            },
        );
        Some(obj)
    }

    fn select(&self, filter: &Filter) -> Vec<Value> {
        self.objects
            .iter()
            .filter(|((g, v, p, _, _), obj)| {
                *g == filter.kind.group
                    && *v == filter.kind.version
                    && *p == filter.kind.plural
                    && filter.matches(obj)
            })
            .map(|(_, obj)| obj.clone())
            .collect()
    }
}

/// Everything but the bookkeeping, to tell whether a write bumps `generation`.
fn spec_of(obj: &Value) -> Value {
    let mut spec = obj.clone();
    if let Some(map) = spec.as_object_mut() {
        for field in ["metadata", "status", "apiVersion", "kind"] {
            map.remove(field);
        }
    }
    spec
}

fn meta_str(obj: &Value, field: &str) -> String {
    obj["metadata"][field]
        .as_str()
        .unwrap_or_default()
        .to_owned()
}

struct Fault {
    method: String,
    path_prefix: String,
    status: u16,
    remaining: usize,
}

struct Shared {
    store: Mutex<Store>,
    changes: broadcast::Sender<Arc<Change>>,
    /// Bumped by `drop_watches`; every open watch ends abruptly.
    kill: watch::Sender<u64>,
    faults: Mutex<Vec<Fault>>,
    requests: Mutex<Vec<(String, String)>>,
    bookmark_interval: Mutex<Duration>,
}

impl Shared {
    fn take_fault(&self, method: &str, path: &str, path_and_query: &str) -> Option<u16> {
        let mut faults = self.faults.lock().unwrap();
        let index = faults.iter().position(|f| {
            f.method.eq_ignore_ascii_case(method)
                && (path.starts_with(&f.path_prefix) || path_and_query.starts_with(&f.path_prefix))
        })?;
        let fault = &mut faults[index];
        let status = fault.status;
        fault.remaining -= 1;
        if fault.remaining == 0 {
            faults.remove(index);
        }
        Some(status)
    }
}

/// The fake API server. Dropping it shuts the server down.
pub struct FakeApi {
    shared: Arc<Shared>,
    addr: SocketAddr,
    server: Mutex<Option<Server>>,
}

struct Server {
    stop: oneshot::Sender<()>,
    task: JoinHandle<()>,
}

impl FakeApi {
    /// Starts serving on `127.0.0.1` at a free port.
    pub async fn start() -> FakeApi {
        let (changes, _) = broadcast::channel(16 * 1024);
        let (kill, _) = watch::channel(0);
        let shared = Arc::new(Shared {
            store: Mutex::new(Store::new()),
            changes,
            kill,
            faults: Mutex::new(Vec::new()),
            requests: Mutex::new(Vec::new()),
            bookmark_interval: Mutex::new(Duration::from_secs(1)),
        });
        let listener = bind(SocketAddr::from(([127, 0, 0, 1], 0))).expect("bind 127.0.0.1:0");
        let addr = listener.local_addr().expect("local address");
        let server = spawn_server(listener, shared.clone());
        FakeApi {
            shared,
            addr,
            server: Mutex::new(Some(server)),
        }
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

    /// Creates or replaces an object given with `apiVersion`, `kind` and
    /// `metadata.name` (namespaced kinds default to namespace `default`).
    /// Open watches see ADDED or MODIFIED. Returns the stored object.
    pub fn insert(&self, mut object: Value) -> Value {
        let api_version = object["apiVersion"]
            .as_str()
            .expect("object has apiVersion")
            .to_owned();
        let kind_name = object["kind"].as_str().expect("object has kind").to_owned();
        assert!(
            !meta_str(&object, "name").is_empty(),
            "object has metadata.name"
        );
        let mut store = self.shared.store.lock().unwrap();
        let kind = store
            .kind_by_api_version(&api_version, &kind_name)
            .unwrap_or_else(|| {
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
        store.erase(
            &self.shared.changes,
            &kind,
            namespace.unwrap_or_default(),
            name,
        )
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
        store
            .objects
            .get(&key_of(&kind, namespace.unwrap_or_default(), name))
            .cloned()
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
        if times == 0 {
            return;
        }
        self.shared.faults.lock().unwrap().push(Fault {
            method: method.to_owned(),
            path_prefix: path_prefix.to_owned(),
            status,
            remaining: times,
        });
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
        assert!(
            Instant::now() < deadline,
            "timed out after {timeout:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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

// ---------------------------------------------------------------------------
// HTTP handling

/// Where a request points.
struct Target {
    kind: KindInfo,
    /// `None` for cluster-scoped kinds and all-namespaces collections.
    namespace: Option<String>,
    name: Option<String>,
    subresource: Option<String>,
}

fn parse_target(store: &Store, path: &str) -> Option<Target> {
    let segments: Vec<&str> = path.trim_matches('/').split('/').collect();
    let (group, version, rest) = match segments.as_slice() {
        ["api", version, rest @ ..] => ("", *version, rest),
        ["apis", group, version, rest @ ..] => (*group, *version, rest),
        _ => return None,
    };
    let target =
        |kind: KindInfo, namespace: Option<&str>, name: Option<&str>, sub: Option<&str>| Target {
            kind,
            namespace: namespace.map(str::to_owned),
            name: name.map(str::to_owned),
            subresource: sub.map(str::to_owned),
        };
    if let ["namespaces", namespace, plural, tail @ ..] = rest
        && let Some(kind) = store
            .kind_by_plural(group, version, plural)
            .filter(|k| k.namespaced)
    {
        return match tail {
            [] => Some(target(kind, Some(namespace), None, None)),
            [name] => Some(target(kind, Some(namespace), Some(name), None)),
            [name, sub] => Some(target(kind, Some(namespace), Some(name), Some(sub))),
            _ => None,
        };
    }
    let (plural, name, sub) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    let kind = store.kind_by_plural(group, version, plural)?;
    if kind.namespaced && name.is_some() {
        return None;
    }
    Some(target(kind, None, name, sub))
}

async fn handle(State(shared): State<Arc<Shared>>, req: Request) -> Response {
    let method = req.method().clone();
    let uri = req.uri().clone();
    let path = uri.path().to_owned();
    let path_and_query = uri
        .path_and_query()
        .map_or_else(|| path.clone(), |p| p.as_str().to_owned());
    shared
        .requests
        .lock()
        .unwrap()
        .push((method.to_string(), path_and_query.clone()));

    if let Some(code) = shared.take_fault(method.as_str(), &path, &path_and_query) {
        return status_response(&status(
            code,
            reason_for(code),
            format!("injected by FakeApi::fail_next: {method} {path_and_query}"),
        ));
    }

    let query: HashMap<String, String> = Query::try_from_uri(&uri).map(|q| q.0).unwrap_or_default();
    let headers = req.headers().clone();
    let body = match axum::body::to_bytes(req.into_body(), 64 << 20).await {
        Ok(body) => body,
        Err(err) => {
            return status_response(&status(400, "BadRequest", format!("reading body: {err}")));
        }
    };

    match path.as_str() {
        "/version" => return json_response(200, &version_info()),
        "/healthz" | "/livez" | "/readyz" => {
            return Response::builder()
                .header(header::CONTENT_TYPE, "text/plain")
                .body(Body::from("ok"))
                .unwrap();
        }
        "/api" => {
            return json_response(
                200,
                &json!({"kind": "APIVersions", "versions": ["v1"], "serverAddressByClientCIDRs": []}),
            );
        }
        _ => {}
    }

    let target = parse_target(&shared.store.lock().unwrap(), &path);
    let Some(target) = target else {
        return status_response(&status(
            404,
            "NotFound",
            "the server could not find the requested resource",
        ));
    };
    let meta_only = headers
        .get(header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.contains("as=PartialObjectMetadata"));
    let dry_run = query.contains_key("dryRun");
    let is_watch = matches!(query.get("watch").map(String::as_str), Some("true" | "1"));

    if let Some(sub) = &target.subresource
        && sub != "status"
    {
        return status_response(&status(
            404,
            "NotFound",
            format!("subresource {sub} is not served"),
        ));
    }

    let result = match (&method, target.name.is_some()) {
        (&Method::GET, _) if is_watch => return start_watch(&shared, &target, &query, meta_only),
        (&Method::GET, false) => list(&shared, &target, &query, meta_only),
        (&Method::GET, true) => get_one(&shared, &target).map(|obj| (200, obj)),
        (&Method::POST, false) if target.subresource.is_none() => {
            create(&shared, &target, &body, dry_run)
        }
        (&Method::PUT, true) => replace(&shared, &target, &body, dry_run),
        (&Method::PATCH, true) => patch(&shared, &target, &headers, &body, dry_run),
        (&Method::DELETE, true) if target.subresource.is_none() => {
            delete(&shared, &target, &body, dry_run)
        }
        (&Method::DELETE, false) => delete_collection(&shared, &target, &query, dry_run),
        _ => Err(status(
            405,
            "MethodNotAllowed",
            format!("{method} is not supported on {path}"),
        )),
    };
    match result {
        // Lists come back converted already.
        Ok((code, obj)) if meta_only && obj.get("items").is_none() => {
            json_response(code, &to_metadata(&obj))
        }
        Ok((code, obj)) => json_response(code, &obj),
        Err(status) => status_response(&status),
    }
}

type ApiResult = Result<(u16, Value), Value>;

fn not_found(target: &Target, name: &str) -> Value {
    with_details(
        status(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", target.kind.plural),
        ),
        target,
        name,
    )
}

fn conflict(target: &Target, name: &str) -> Value {
    with_details(
        status(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": the object has been modified; \
                 please apply your changes to the latest version and try again",
                target.kind.plural
            ),
        ),
        target,
        name,
    )
}

fn list(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    meta_only: bool,
) -> ApiResult {
    let filter = Filter::from_query(target, query)?;
    let store = shared.store.lock().unwrap();
    let mut items = store.select(&filter);
    if meta_only {
        items = items.iter().map(to_metadata).collect();
    }
    let (api_version, kind) = if meta_only {
        (
            "meta.k8s.io/v1".to_owned(),
            "PartialObjectMetadataList".to_owned(),
        )
    } else {
        (
            target.kind.api_version(),
            format!("{}List", target.kind.kind),
        )
    };
    Ok((
        200,
        json!({
            "apiVersion": api_version,
            "kind": kind,
            "metadata": {"resourceVersion": store.rv.to_string()},
            "items": items,
        }),
    ))
}

fn get_one(shared: &Shared, target: &Target) -> Result<Value, Value> {
    let name = target.name.as_deref().unwrap_or_default();
    let store = shared.store.lock().unwrap();
    store
        .objects
        .get(&key_of(
            &target.kind,
            target.namespace.as_deref().unwrap_or_default(),
            name,
        ))
        .cloned()
        .ok_or_else(|| not_found(target, name))
}

/// Parses a request body as an object of the target's kind.
fn parse_body(target: &Target, body: &[u8]) -> Result<Value, Value> {
    let obj: Value = serde_json::from_slice(body).map_err(|err| {
        status(
            400,
            "BadRequest",
            format!("the body is not a JSON object: {err}"),
        )
    })?;
    if !obj.is_object() {
        return Err(status(400, "BadRequest", "the body is not a JSON object"));
    }
    let kind = &target.kind;
    let given_kind = obj["kind"].as_str().unwrap_or_default();
    let given_api_version = obj["apiVersion"].as_str().unwrap_or_default();
    if (!given_kind.is_empty() && given_kind != kind.kind)
        || (!given_api_version.is_empty() && given_api_version != kind.api_version())
    {
        return Err(status(
            400,
            "BadRequest",
            format!(
                "the API version in the data ({given_api_version}) or kind ({given_kind}) does not match \
                 the expected {} {}",
                kind.api_version(),
                kind.kind
            ),
        ));
    }
    if let Some(namespace) = &target.namespace {
        let given = meta_str(&obj, "namespace");
        if !given.is_empty() && &given != namespace {
            return Err(status(
                400,
                "BadRequest",
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
    }
    Ok(obj)
}

fn create(shared: &Shared, target: &Target, body: &[u8], dry_run: bool) -> ApiResult {
    if target.kind.namespaced && target.namespace.is_none() {
        return Err(status(
            405,
            "MethodNotAllowed",
            "create needs a namespace in the path",
        ));
    }
    let mut obj = parse_body(target, body)?;
    let mut store = shared.store.lock().unwrap();
    if obj.get("metadata").is_none_or(|m| !m.is_object()) {
        obj["metadata"] = json!({});
    }
    if let Some(namespace) = &target.namespace {
        obj["metadata"]["namespace"] = namespace.clone().into();
    }
    let mut name = meta_str(&obj, "name");
    if name.is_empty() {
        let prefix = meta_str(&obj, "generateName");
        if prefix.is_empty() {
            return Err(status(
                422,
                "Invalid",
                "metadata.name: Required value: name or generateName is required",
            ));
        }
        name = format!("{prefix}{}", random_suffix(store.next_uid + store.rv));
        obj["metadata"]["name"] = name.clone().into();
    }
    let key = key_of(
        &target.kind,
        target.namespace.as_deref().unwrap_or_default(),
        &name,
    );
    if store.objects.contains_key(&key) {
        return Err(with_details(
            status(
                409,
                "AlreadyExists",
                format!("{} \"{name}\" already exists", target.kind.plural),
            ),
            target,
            &name,
        ));
    }
    for field in ["resourceVersion", "uid", "creationTimestamp", "generation"] {
        obj["metadata"]
            .as_object_mut()
            .expect("metadata")
            .remove(field);
    }
    if dry_run {
        return Ok((201, obj));
    }
    Ok((201, store.commit(&shared.changes, &target.kind, obj, false)))
}

/// Checks an update against the stored object: same name, and when the body
/// carries a resourceVersion it must be the current one.
fn check_update(target: &Target, stored: &Value, updated: &Value) -> Result<(), Value> {
    let name = target.name.as_deref().unwrap_or_default();
    if meta_str(updated, "name") != name {
        return Err(status(
            400,
            "BadRequest",
            "the name of the object does not match the name on the URL",
        ));
    }
    let rv = meta_str(updated, "resourceVersion");
    if !rv.is_empty() && rv != meta_str(stored, "resourceVersion") {
        return Err(conflict(target, name));
    }
    Ok(())
}

/// Stores an update, keeping everything but `.status` for the status subresource.
fn store_update(
    shared: &Shared,
    store: &mut Store,
    target: &Target,
    stored: Value,
    mut updated: Value,
    dry_run: bool,
) -> Value {
    if target.subresource.is_some() {
        let status = updated.get("status").cloned();
        updated = stored;
        match status {
            Some(status) => updated["status"] = status,
            None => {
                updated.as_object_mut().expect("object").remove("status");
            }
        }
    }
    if let Some(namespace) = &target.namespace {
        updated["metadata"]["namespace"] = namespace.clone().into();
    }
    if dry_run {
        return updated;
    }
    store.commit(&shared.changes, &target.kind, updated, false)
}

fn replace(shared: &Shared, target: &Target, body: &[u8], dry_run: bool) -> ApiResult {
    let updated = parse_body(target, body)?;
    let mut store = shared.store.lock().unwrap();
    let name = target.name.as_deref().unwrap_or_default();
    let key = key_of(
        &target.kind,
        target.namespace.as_deref().unwrap_or_default(),
        name,
    );
    let stored = store
        .objects
        .get(&key)
        .cloned()
        .ok_or_else(|| not_found(target, name))?;
    check_update(target, &stored, &updated)?;
    Ok((
        200,
        store_update(shared, &mut store, target, stored, updated, dry_run),
    ))
}

fn patch(
    shared: &Shared,
    target: &Target,
    headers: &HeaderMap,
    body: &[u8],
    dry_run: bool,
) -> ApiResult {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .unwrap_or_default()
        .trim()
        .to_owned();
    let mut store = shared.store.lock().unwrap();
    let name = target.name.as_deref().unwrap_or_default();
    let key = key_of(
        &target.kind,
        target.namespace.as_deref().unwrap_or_default(),
        name,
    );
    let stored = store
        .objects
        .get(&key)
        .cloned()
        .ok_or_else(|| not_found(target, name))?;
    let mut updated = stored.clone();
    match content_type.as_str() {
        "application/merge-patch+json" => {
            let patch: Value = serde_json::from_slice(body)
                .map_err(|err| status(400, "BadRequest", format!("invalid merge patch: {err}")))?;
            json_patch::merge(&mut updated, &patch);
        }
        "application/json-patch+json" => {
            let patch: json_patch::Patch = serde_json::from_slice(body)
                .map_err(|err| status(400, "BadRequest", format!("invalid JSON patch: {err}")))?;
            json_patch::patch(&mut updated, &patch.0).map_err(|err| {
                status(
                    422,
                    "Invalid",
                    format!("the JSON patch does not apply: {err}"),
                )
            })?;
        }
        other => {
            return Err(status(
                415,
                "UnsupportedMediaType",
                format!(
                    "the body of the request was in an unknown format ({other}) - accepted media types \
                     include: application/json-patch+json, application/merge-patch+json"
                ),
            ));
        }
    }
    if !updated.is_object() {
        return Err(status(
            422,
            "Invalid",
            "the patched object is not a JSON object",
        ));
    }
    if target
        .namespace
        .as_deref()
        .is_some_and(|ns| meta_str(&updated, "namespace") != ns)
    {
        return Err(status(
            400,
            "BadRequest",
            "a patch cannot change the namespace",
        ));
    }
    check_update(target, &stored, &updated)?;
    Ok((
        200,
        store_update(shared, &mut store, target, stored, updated, dry_run),
    ))
}

fn delete(shared: &Shared, target: &Target, body: &[u8], dry_run: bool) -> ApiResult {
    let options: Value = serde_json::from_slice(body).unwrap_or(Value::Null);
    let mut store = shared.store.lock().unwrap();
    let name = target.name.as_deref().unwrap_or_default();
    let namespace = target.namespace.as_deref().unwrap_or_default();
    let stored = store
        .objects
        .get(&key_of(&target.kind, namespace, name))
        .cloned()
        .ok_or_else(|| not_found(target, name))?;
    let preconditions = &options["preconditions"];
    for (field, precondition) in [
        ("uid", &preconditions["uid"]),
        ("resourceVersion", &preconditions["resourceVersion"]),
    ] {
        if let Some(expected) = precondition.as_str()
            && expected != meta_str(&stored, field)
        {
            return Err(conflict(target, name));
        }
    }
    if dry_run {
        return Ok((200, stored));
    }
    let deleted = store
        .erase(&shared.changes, &target.kind, namespace, name)
        .expect("present");
    Ok((200, deleted))
}

fn delete_collection(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    dry_run: bool,
) -> ApiResult {
    let filter = Filter::from_query(target, query)?;
    let mut store = shared.store.lock().unwrap();
    let mut deleted = store.select(&filter);
    if !dry_run {
        deleted = deleted
            .iter()
            .filter_map(|obj| {
                store.erase(
                    &shared.changes,
                    &target.kind,
                    &meta_str(obj, "namespace"),
                    &meta_str(obj, "name"),
                )
            })
            .collect();
    }
    Ok((
        200,
        json!({
            "apiVersion": target.kind.api_version(),
            "kind": format!("{}List", target.kind.kind),
            "metadata": {"resourceVersion": store.rv.to_string()},
            "items": deleted,
        }),
    ))
}

// ---------------------------------------------------------------------------
// Watch

fn start_watch(
    shared: &Shared,
    target: &Target,
    query: &HashMap<String, String>,
    meta_only: bool,
) -> Response {
    let mut filter = match Filter::from_query(target, query) {
        Ok(filter) => filter,
        Err(status) => return status_response(&status),
    };
    if let Some(name) = &target.name {
        // The old single-object watch: GET .../{name}?watch=true
        filter.fields.push(FieldRequirement {
            path: "metadata.name".into(),
            value: name.clone(),
            equal: true,
        });
    }
    let requested = query
        .get("resourceVersion")
        .map(String::as_str)
        .unwrap_or_default();
    let send_initial_events = query.get("sendInitialEvents").is_some_and(|v| v == "true");
    let bookmarks = query
        .get("allowWatchBookmarks")
        .is_some_and(|v| v == "true");
    let timeout = query
        .get("timeoutSeconds")
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&s| s > 0)
        .map(|s| Instant::now() + Duration::from_secs(s));

    // Under the store lock: the snapshot or replay and the subscription line
    // up exactly, and every later write arrives on `changes`.
    let store = shared.store.lock().unwrap();
    let mut cursor = WatchCursor {
        filter,
        meta_only,
        pending: VecDeque::new(),
        close_after_pending: false,
        finished: false,
        changes: shared.changes.subscribe(),
        kill: shared.kill.subscribe(),
        bookmarks: None,
        deadline: timeout,
        last_rv: store.rv,
    };
    {
        if send_initial_events || requested.is_empty() || requested == "0" {
            for obj in store.select(&cursor.filter) {
                let line = cursor.event_line("ADDED", &obj);
                cursor.pending.push_back(line);
            }
            if send_initial_events {
                let line = cursor.bookmark_line(true);
                cursor.pending.push_back(line);
            }
        } else {
            let Ok(from) = requested.parse::<u64>() else {
                return status_response(&status(
                    400,
                    "BadRequest",
                    format!("invalid resourceVersion {requested:?}"),
                ));
            };
            if from < store.floor {
                let expired = status(
                    410,
                    "Expired",
                    format!("too old resource version: {from} ({})", store.floor),
                );
                cursor
                    .pending
                    .push_back(line_of(&json!({"type": "ERROR", "object": expired})));
                cursor.close_after_pending = true;
            } else {
                for change in store.history.iter().filter(|c| c.rv > from) {
                    if let Some(line) = cursor.change_line(change) {
                        cursor.pending.push_back(line);
                    }
                }
            }
        }
    }
    drop(store);
    if bookmarks && !cursor.close_after_pending {
        let period = *shared.bookmark_interval.lock().unwrap();
        cursor.bookmarks = Some(tokio::time::interval_at(Instant::now() + period, period));
    }

    let stream = futures::stream::unfold(cursor, |mut cursor| async move {
        let item = cursor.next_item().await?;
        Some((item, cursor))
    });
    Response::builder()
        .status(200)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from_stream(stream))
        .unwrap()
}

struct WatchCursor {
    filter: Filter,
    meta_only: bool,
    /// Lines to send before live events (snapshot, replay, or the 410 error).
    pending: VecDeque<Bytes>,
    close_after_pending: bool,
    finished: bool,
    changes: broadcast::Receiver<Arc<Change>>,
    kill: watch::Receiver<u64>,
    bookmarks: Option<Interval>,
    deadline: Option<Instant>,
    /// Everything up to here has been sent (what bookmarks carry).
    last_rv: u64,
}

impl WatchCursor {
    async fn next_item(&mut self) -> Option<io::Result<Bytes>> {
        if self.finished {
            return None;
        }
        if let Some(line) = self.pending.pop_front() {
            return Some(Ok(line));
        }
        if self.close_after_pending {
            self.finished = true;
            return None;
        }
        loop {
            tokio::select! {
                changed = self.kill.changed() => {
                    self.finished = true;
                    return changed.is_ok().then(|| {
                        Err(io::Error::new(io::ErrorKind::ConnectionAborted, "FakeApi::drop_watches"))
                    });
                }
                () = sleep_until_opt(self.deadline) => {
                    self.finished = true;
                    return None;
                }
                received = self.changes.recv() => match received {
                    Ok(change) => {
                        self.last_rv = self.last_rv.max(change.rv);
                        if let Some(line) = self.change_line(&change) {
                            return Some(Ok(line));
                        }
                    }
                    Err(broadcast::error::RecvError::Lagged(_)) => {
                        self.finished = true;
                        let expired = status(410, "Expired", "the watch fell behind");
                        return Some(Ok(line_of(&json!({"type": "ERROR", "object": expired}))));
                    }
                    Err(broadcast::error::RecvError::Closed) => {
                        self.finished = true;
                        return None;
                    }
                },
                () = tick_opt(&mut self.bookmarks) => {
                    return Some(Ok(self.bookmark_line(false)));
                }
            }
        }
    }

    fn event_line(&self, event: &str, obj: &Value) -> Bytes {
        let obj = if self.meta_only {
            to_metadata(obj)
        } else {
            obj.clone()
        };
        line_of(&json!({"type": event, "object": obj}))
    }

    /// The event a watcher with this filter sees for a change, if any.
    fn change_line(&self, change: &Change) -> Option<Bytes> {
        if !change.kind.same_resource(&self.filter.kind) {
            return None;
        }
        let now = self.filter.matches(&change.object);
        let event = match change.change {
            ChangeType::Added => now.then_some("ADDED"),
            ChangeType::Deleted => now.then_some("DELETED"),
            ChangeType::Modified => {
                let before = change
                    .previous
                    .as_ref()
                    .is_some_and(|prev| self.filter.matches(prev));
                match (before, now) {
                    (true, true) => Some("MODIFIED"),
                    (false, true) => Some("ADDED"),
                    (true, false) => Some("DELETED"),
                    (false, false) => None,
                }
            }
        }?;
        Some(self.event_line(event, &change.object))
    }

    fn bookmark_line(&self, initial_events_end: bool) -> Bytes {
        let (api_version, kind) = if self.meta_only {
            (
                "meta.k8s.io/v1".to_owned(),
                "PartialObjectMetadata".to_owned(),
            )
        } else {
            (
                self.filter.kind.api_version(),
                self.filter.kind.kind.clone(),
            )
        };
        let mut metadata = json!({"resourceVersion": self.last_rv.to_string()});
        if initial_events_end {
            metadata["annotations"] = json!({"k8s.io/initial-events-end": "true"});
        }
        line_of(&json!({
            "type": "BOOKMARK",
            "object": {"apiVersion": api_version, "kind": kind, "metadata": metadata},
        }))
    }
}

async fn sleep_until_opt(deadline: Option<Instant>) {
    match deadline {
        Some(deadline) => tokio::time::sleep_until(deadline).await,
        None => std::future::pending().await,
    }
}

async fn tick_opt(interval: &mut Option<Interval>) {
    match interval {
        Some(interval) => {
            interval.tick().await;
        }
        None => std::future::pending().await,
    }
}

fn line_of(value: &Value) -> Bytes {
    let mut line = serde_json::to_vec(value).expect("JSON");
    line.push(b'\n');
    Bytes::from(line)
}

// ---------------------------------------------------------------------------
// Selectors

#[derive(Clone, Debug)]
enum LabelRequirement {
    Exists(String),
    NotExists(String),
    Equal(String, String),
    NotEqual(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Clone, Debug)]
struct FieldRequirement {
    /// Dotted path, e.g. `metadata.name` or `spec.nodeName`.
    path: String,
    value: String,
    equal: bool,
}

#[derive(Clone, Debug)]
struct Filter {
    kind: KindInfo,
    namespace: Option<String>,
    labels: Vec<LabelRequirement>,
    fields: Vec<FieldRequirement>,
}

impl Filter {
    fn all(kind: KindInfo) -> Self {
        Self {
            kind,
            namespace: None,
            labels: Vec::new(),
            fields: Vec::new(),
        }
    }

    fn from_query(target: &Target, query: &HashMap<String, String>) -> Result<Self, Value> {
        let labels = parse_label_selector(
            query
                .get("labelSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .map_err(|err| {
            status(
                400,
                "BadRequest",
                format!("unable to parse requirement: {err}"),
            )
        })?;
        let fields = parse_field_selector(
            query
                .get("fieldSelector")
                .map(String::as_str)
                .unwrap_or_default(),
        )
        .map_err(|err| status(400, "BadRequest", format!("invalid field selector: {err}")))?;
        Ok(Self {
            kind: target.kind.clone(),
            namespace: target.namespace.clone(),
            labels,
            fields,
        })
    }

    fn matches(&self, obj: &Value) -> bool {
        if let Some(namespace) = &self.namespace
            && &meta_str(obj, "namespace") != namespace
        {
            return false;
        }
        let labels = obj["metadata"]["labels"].as_object();
        let label = |key: &str| labels.and_then(|l| l.get(key)).and_then(Value::as_str);
        let labels_match = self.labels.iter().all(|req| match req {
            LabelRequirement::Exists(k) => label(k).is_some(),
            LabelRequirement::NotExists(k) => label(k).is_none(),
            LabelRequirement::Equal(k, v) => label(k) == Some(v.as_str()),
            LabelRequirement::NotEqual(k, v) => label(k) != Some(v.as_str()),
            LabelRequirement::In(k, vs) => label(k).is_some_and(|l| vs.iter().any(|v| v == l)),
            LabelRequirement::NotIn(k, vs) => label(k).is_none_or(|l| vs.iter().all(|v| v != l)),
        });
        labels_match
            && self.fields.iter().all(|req| {
                let pointer = format!("/{}", req.path.replace('.', "/"));
                let actual = match obj.pointer(&pointer) {
                    None | Some(Value::Null) => String::new(),
                    Some(Value::String(s)) => s.clone(),
                    Some(other) => other.to_string(),
                };
                (actual == req.value) == req.equal
            })
    }
}

/// Splits at commas outside parentheses.
fn split_top_level(selector: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&selector[start..]);
    parts
}

fn parse_label_selector(selector: &str) -> Result<Vec<LabelRequirement>, String> {
    let mut requirements = Vec::new();
    for part in split_top_level(selector) {
        let part = part.trim();
        if part.is_empty() {
            continue;
        }
        let requirement = if let Some(key) = part.strip_prefix('!') {
            LabelRequirement::NotExists(key.trim().to_owned())
        } else if let Some((k, v)) = part.split_once("!=") {
            LabelRequirement::NotEqual(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some((k, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            LabelRequirement::Equal(k.trim().to_owned(), v.trim().to_owned())
        } else if let Some(open) = part.find('(') {
            let close = part
                .rfind(')')
                .filter(|&c| c > open)
                .ok_or_else(|| format!("{part:?}: missing )"))?;
            let values: Vec<String> = part[open + 1..close]
                .split(',')
                .map(|v| v.trim().to_owned())
                .filter(|v| !v.is_empty())
                .collect();
            match part[..open]
                .split_whitespace()
                .collect::<Vec<_>>()
                .as_slice()
            {
                [key, "in"] => LabelRequirement::In((*key).to_owned(), values),
                [key, "notin"] => LabelRequirement::NotIn((*key).to_owned(), values),
                _ => return Err(format!("{part:?}: unknown operator")),
            }
        } else if part.contains(|c: char| c.is_whitespace() || c == '<' || c == '>') {
            return Err(format!("{part:?}: unsupported requirement"));
        } else {
            LabelRequirement::Exists(part.to_owned())
        };
        requirements.push(requirement);
    }
    Ok(requirements)
}

fn parse_field_selector(selector: &str) -> Result<Vec<FieldRequirement>, String> {
    let mut requirements = Vec::new();
    for part in selector.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (path, value, equal) = if let Some((p, v)) = part.split_once("!=") {
            (p, v, false)
        } else if let Some((p, v)) = part.split_once("==").or_else(|| part.split_once('=')) {
            (p, v, true)
        } else {
            return Err(format!("{part:?}: expected field=value or field!=value"));
        };
        requirements.push(FieldRequirement {
            path: path.trim().to_owned(),
            value: value.trim().to_owned(),
            equal,
        });
    }
    Ok(requirements)
}

// ---------------------------------------------------------------------------
// Responses

fn status(code: u16, reason: &str, message: impl Into<String>) -> Value {
    json!({
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message.into(),
        "reason": reason,
        "code": code,
    })
}

fn with_details(mut status: Value, target: &Target, name: &str) -> Value {
    let mut details = json!({"name": name, "kind": target.kind.plural});
    if !target.kind.group.is_empty() {
        details["group"] = target.kind.group.clone().into();
    }
    status["details"] = details;
    status
}

fn reason_for(code: u16) -> &'static str {
    match code {
        400 => "BadRequest",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "NotFound",
        405 => "MethodNotAllowed",
        406 => "NotAcceptable",
        409 => "Conflict",
        410 => "Expired",
        413 => "RequestEntityTooLarge",
        415 => "UnsupportedMediaType",
        422 => "Invalid",
        429 => "TooManyRequests",
        500 => "InternalError",
        503 => "ServiceUnavailable",
        504 => "Timeout",
        _ => "Unknown",
    }
}

fn json_response(code: u16, body: &Value) -> Response {
    Response::builder()
        .status(code)
        .header(header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(body).expect("JSON")))
        .unwrap()
}

fn status_response(status: &Value) -> Response {
    let code = status["code"]
        .as_u64()
        .and_then(|c| u16::try_from(c).ok())
        .unwrap_or(500);
    json_response(code, status)
}

fn to_metadata(obj: &Value) -> Value {
    json!({
        "apiVersion": "meta.k8s.io/v1",
        "kind": "PartialObjectMetadata",
        "metadata": obj["metadata"].clone(),
    })
}

fn version_info() -> Value {
    json!({
        "major": "1",
        "minor": "33",
        "emulationMajor": "1",
        "emulationMinor": "33",
        "minCompatibilityMajor": "1",
        "minCompatibilityMinor": "32",
        "gitVersion": "v1.33.1",
        "gitCommit": "8adc0f041b8e7ad1d30e29cc59c6ae7a15e19828",
        "gitTreeState": "clean",
        "buildDate": "2025-05-15T08:19:08Z",
        "goVersion": "go1.24.2",
        "compiler": "gc",
        "platform": "linux/amd64",
    })
}

/// Five characters in the style of generateName suffixes.
fn random_suffix(seed: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut n = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) ^ u64::from(std::process::id());
    (0..5)
        .map(|_| {
            let c = ALPHABET[(n % ALPHABET.len() as u64) as usize] as char;
            n /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

fn now_rfc3339() -> String {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let secs = i64::try_from(secs).unwrap_or(0);
    let (days, rem) = (secs.div_euclid(86_400), secs.rem_euclid(86_400));
    let (y, m, d) = civil_from_days(days);
    format!(
        "{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}Z",
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}

/// Days since 1970-01-01 to (year, month, day), after Howard Hinnant.
fn civil_from_days(days: i64) -> (i64, i64, i64) {
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    (yoe + era * 400 + i64::from(m <= 2), m, d)
}
