//! Tests of the fake Kubernetes API server itself, driven by the real kube
//! client, watcher and reflector: if these pass, the fake speaks enough of the
//! protocol for tests of the cluster client.

use std::collections::BTreeSet;
use std::pin::pin;
use std::time::Duration;

use crate::support::fake_api::{FakeApi, eventually};
use futures::StreamExt;
use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{Namespace, Pod, Secret};
use kube::api::{
    Api, DeleteParams, ListParams, PartialObjectMeta, Patch, PatchParams, PostParams, WatchEvent,
    WatchParams,
};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, ResourceExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

mod object_reads;
mod pagination;

/// Every await that could hang is bounded by this.
const LIMIT: Duration = Duration::from_secs(10);

async fn within<F: Future>(what: &str, future: F) -> F::Output {
    tokio::time::timeout(LIMIT, future)
        .await
        .unwrap_or_else(|_| panic!("timed out after {LIMIT:?}: {what}"))
}

fn namespace(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
}

fn api_error(result: Result<impl std::fmt::Debug, kube::Error>) -> (u16, String) {
    match result {
        Err(kube::Error::Api(status)) => (status.code, status.reason.clone()),
        other => panic!("expected an API error, got {other:?}"),
    }
}

/// A reflector over Namespaces, driven in the background with kube's
/// default backoff. Watcher events (errors dropped) go to `events`.
struct Reflected {
    store: Store<Namespace>,
    events: mpsc::UnboundedReceiver<watcher::Event<Namespace>>,
    task: JoinHandle<()>,
}

impl Reflected {
    fn start(client: Client, config: watcher::Config) -> Self {
        let (store, writer) = reflector::store();
        let (tx, events) = mpsc::unbounded_channel();
        let stream = reflector::reflector(writer, watcher(Api::<Namespace>::all(client), config))
            .default_backoff();
        let task = tokio::spawn(async move {
            let mut stream = pin!(stream);
            while let Some(event) = stream.next().await {
                if let Ok(event) = event {
                    let _ = tx.send(event);
                }
            }
        });
        Reflected { store, events, task }
    }

    fn names(&self) -> BTreeSet<String> {
        self.store.state().iter().map(|ns| ns.name_any()).collect()
    }

    async fn converges_to(&self, expected: &[&str]) {
        let expected: BTreeSet<String> = expected.iter().map(|s| (*s).to_owned()).collect();
        eventually(&format!("reflector store == {expected:?}"), LIMIT, || self.names() == expected)
            .await;
    }

    /// Waits for a watcher event matching `wanted`, skipping others.
    async fn next_event_where(
        &mut self,
        what: &str,
        wanted: impl Fn(&watcher::Event<Namespace>) -> bool,
    ) {
        within(what, async {
            loop {
                let event = self.events.recv().await.expect("watcher task ended");
                if wanted(&event) {
                    return;
                }
            }
        })
        .await;
    }
}

impl Drop for Reflected {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn applied(event: &watcher::Event<Namespace>, name: &str) -> bool {
    matches!(event, watcher::Event::Apply(ns) if ns.name_any() == name)
}

/// LIST requests for namespaces (as opposed to watches).
fn namespace_lists(fake: &FakeApi) -> usize {
    fake.requests()
        .iter()
        .filter(|(method, path)| {
            method == "GET" && path.starts_with("/api/v1/namespaces?") && !path.contains("watch=")
        })
        .count()
}

fn namespace_watches(fake: &FakeApi) -> usize {
    fake.count_requests("GET", &["/api/v1/namespaces?", "watch=true"])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn list_returns_inserted_namespaces() {
    let fake = FakeApi::start().await;
    fake.insert(namespace("alpha"));
    fake.insert(namespace("beta"));
    let api = Api::<Namespace>::all(fake.client());

    let list = within("list", api.list(&ListParams::default())).await.unwrap();
    let names: Vec<String> = list.items.iter().map(ResourceExt::name_any).collect();
    assert_eq!(names, ["alpha", "beta"]);
    assert_eq!(list.metadata.resource_version, Some(fake.resource_version().to_string()));
    let alpha = &list.items[0];
    assert!(alpha.metadata.uid.is_some());
    assert!(alpha.metadata.creation_timestamp.is_some());
    assert_eq!(alpha.metadata.resource_version.as_deref(), Some("2"));

    let meta = within("list_metadata", api.list_metadata(&ListParams::default())).await.unwrap();
    assert_eq!(meta.items.len(), 2);
    assert_eq!(meta.items[1].name_any(), "beta");

    let version = within("version", fake.client().apiserver_version()).await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "33"));
    assert!(fake.requests().iter().any(|(m, p)| m == "GET" && p.starts_with("/api/v1/namespaces")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn selectors_scopes_and_group_paths() {
    let fake = FakeApi::start().await;
    for (ns, name, app, node) in
        [("a", "p1", "x", "n1"), ("a", "p2", "y", "n2"), ("b", "p3", "x", "n1")]
    {
        fake.insert(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": app}},
            "spec": {"nodeName": node, "containers": [{"name": "c", "image": "busybox"}]},
        }));
    }
    let client = fake.client();
    let names = |pods: Vec<Pod>| pods.iter().map(ResourceExt::name_any).collect::<Vec<_>>();
    let all = Api::<Pod>::all(client.clone());
    let list = |api: &Api<Pod>, lp: ListParams| {
        let api = api.clone();
        async move { within("list pods", api.list(&lp)).await.unwrap().items }
    };

    assert_eq!(names(list(&all, ListParams::default()).await), ["p1", "p2", "p3"]);
    assert_eq!(
        names(list(&Api::namespaced(client.clone(), "a"), ListParams::default()).await),
        ["p1", "p2"]
    );
    assert_eq!(names(list(&all, ListParams::default().labels("app=x")).await), ["p1", "p3"]);
    assert_eq!(names(list(&all, ListParams::default().labels("app!=x")).await), ["p2"]);
    assert_eq!(names(list(&all, ListParams::default().labels("app in (y, z)")).await), ["p2"]);
    assert_eq!(names(list(&all, ListParams::default().labels("!app")).await), Vec::<String>::new());
    assert_eq!(names(list(&all, ListParams::default().labels("app,app=x")).await), ["p1", "p3"]);
    assert_eq!(names(list(&all, ListParams::default().fields("metadata.name=p2")).await), ["p2"]);
    assert_eq!(
        names(list(&all, ListParams::default().fields("metadata.namespace=b")).await),
        ["p3"]
    );
    assert_eq!(
        names(
            list(&all, ListParams::default().fields("spec.nodeName=n1,metadata.namespace=a")).await
        ),
        ["p1"]
    );
    assert!(fake.requests().iter().any(|(_, p)| p.starts_with("/api/v1/pods?")));
    assert!(fake.requests().iter().any(|(_, p)| p.starts_with("/api/v1/namespaces/a/pods?")));

    // A group/version kind under /apis.
    let deployments = Api::<Deployment>::namespaced(client, "apps-ns");
    let deployment: Deployment = serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "selector": {"matchLabels": {"app": "web"}},
            "template": {"metadata": {"labels": {"app": "web"}}, "spec": {"containers": [{"name": "c", "image": "nginx"}]}},
        },
    }))
    .unwrap();
    within("create deployment", deployments.create(&PostParams::default(), &deployment))
        .await
        .unwrap();
    let got = within("get deployment", deployments.get("web")).await.unwrap();
    assert_eq!(got.metadata.namespace.as_deref(), Some("apps-ns"));
    assert!(
        fake.requests()
            .iter()
            .any(|(m, p)| m == "GET" && p == "/apis/apps/v1/namespaces/apps-ns/deployments/web")
    );
    assert!(fake.get("apps/v1", "Deployment", Some("apps-ns"), "web").is_some());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reflector_converges_and_follows_changes() {
    let fake = FakeApi::start().await;
    fake.insert(namespace("a"));
    fake.insert(namespace("b"));
    let mut reflected = Reflected::start(fake.client(), watcher::Config::default());
    reflected.converges_to(&["a", "b"]).await;
    eventually("a watch request", LIMIT, || namespace_watches(&fake) >= 1).await;

    fake.insert(namespace("c"));
    reflected.next_event_where("ADDED c", |e| applied(e, "c")).await;
    reflected.converges_to(&["a", "b", "c"]).await;

    let mut a = namespace("a");
    a["metadata"]["labels"] = json!({"gpu": "yes"});
    fake.insert(a);
    reflected
        .next_event_where("MODIFIED a", |e| {
            applied(e, "a")
                && matches!(e, watcher::Event::Apply(ns) if ns.labels().get("gpu").is_some())
        })
        .await;
    let stored = reflected.store.get(&reflector::ObjectRef::new("a")).unwrap();
    assert_eq!(stored.labels().get("gpu").map(String::as_str), Some("yes"));

    fake.remove("v1", "Namespace", None, "b");
    reflected
        .next_event_where(
            "DELETED b",
            |e| matches!(e, watcher::Event::Delete(ns) if ns.name_any() == "b"),
        )
        .await;
    reflected.converges_to(&["a", "c"]).await;

    // The default watcher: one LIST, then watches (no streaming list).
    assert_eq!(namespace_lists(&fake), 1);
    assert!(!fake.requests().iter().any(|(_, p)| p.contains("sendInitialEvents")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_relists_after_compaction_and_dropped_watches() {
    let fake = FakeApi::start().await;
    fake.insert(namespace("a"));
    let mut reflected = Reflected::start(fake.client(), watcher::Config::default());
    reflected.converges_to(&["a"]).await;
    eventually("a watch request", LIMIT, || namespace_watches(&fake) >= 1).await;
    fake.insert(namespace("b"));
    reflected.converges_to(&["a", "b"]).await;
    assert_eq!(namespace_lists(&fake), 1);

    fake.compact();
    fake.drop_watches();
    // The resumed watch gets 410 Expired, so the watcher starts over.
    reflected.next_event_where("a new Init", |e| matches!(e, watcher::Event::Init)).await;
    eventually("a second LIST", LIMIT, || namespace_lists(&fake) >= 2).await;
    reflected.next_event_where("InitDone", |e| matches!(e, watcher::Event::InitDone)).await;
    reflected.converges_to(&["a", "b"]).await;

    fake.insert(namespace("c"));
    fake.remove("v1", "Namespace", None, "a");
    reflected.converges_to(&["b", "c"]).await;
    assert_eq!(namespace_lists(&fake), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watcher_recovers_from_server_restart() {
    let fake = FakeApi::start().await;
    fake.insert(namespace("a"));
    let reflected = Reflected::start(fake.client(), watcher::Config::default());
    reflected.converges_to(&["a"]).await;
    eventually("a watch request", LIMIT, || namespace_watches(&fake) >= 1).await;

    fake.stop().await;
    assert!(!fake.is_running());
    let refused =
        within("connect while stopped", tokio::net::TcpStream::connect(fake.addr())).await;
    assert!(refused.is_err(), "the port is closed while stopped");
    fake.insert(namespace("b"));
    tokio::time::sleep(Duration::from_millis(300)).await;
    fake.restart().await;

    reflected.converges_to(&["a", "b"]).await;
    fake.insert(namespace("c"));
    reflected.converges_to(&["a", "b", "c"]).await;
    // History survived the restart: the watch resumed without a relist.
    assert_eq!(namespace_lists(&fake), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streaming_list_watcher_converges() {
    let fake = FakeApi::start().await;
    fake.insert(namespace("a"));
    fake.insert(namespace("b"));
    let reflected = Reflected::start(fake.client(), watcher::Config::default().streaming_lists());
    reflected.converges_to(&["a", "b"]).await;
    fake.insert(namespace("c"));
    reflected.converges_to(&["a", "b", "c"]).await;
    assert_eq!(namespace_lists(&fake), 0);
    assert_eq!(fake.count_requests("GET", &["/api/v1/namespaces?", "sendInitialEvents=true"]), 1);
}

type EventStream = futures::stream::BoxStream<'static, kube::Result<WatchEvent<Namespace>>>;

async fn next_event(stream: &mut EventStream) -> Option<kube::Result<WatchEvent<Namespace>>> {
    within("watch event", stream.next()).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn raw_watch_replays_bookmarks_expires_and_drops() {
    let fake = FakeApi::start().await;
    fake.set_bookmark_interval(Duration::from_millis(100));
    let first = fake.insert(namespace("a"));
    let from = first["metadata"]["resourceVersion"].as_str().unwrap().to_owned();
    fake.insert(namespace("b"));
    let api = Api::<Namespace>::all(fake.client());

    let mut stream =
        within("watch", api.watch(&WatchParams::default(), &from)).await.unwrap().boxed();
    // Replayed from history: only what came after `from`.
    match next_event(&mut stream).await {
        Some(Ok(WatchEvent::Added(ns))) => assert_eq!(ns.name_any(), "b"),
        other => panic!("expected ADDED b, got {other:?}"),
    }
    match next_event(&mut stream).await {
        Some(Ok(WatchEvent::Bookmark(bookmark))) => {
            assert_eq!(bookmark.metadata.resource_version, fake.resource_version().to_string());
        }
        other => panic!("expected a BOOKMARK, got {other:?}"),
    }
    fake.insert(namespace("c"));
    loop {
        match next_event(&mut stream).await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            Some(Ok(WatchEvent::Added(ns))) => {
                assert_eq!(ns.name_any(), "c");
                break;
            }
            other => panic!("expected ADDED c, got {other:?}"),
        }
    }
    fake.drop_watches();
    loop {
        match next_event(&mut stream).await {
            Some(Ok(WatchEvent::Bookmark(_))) => continue,
            None => break,
            other => panic!("expected the stream to end, got {other:?}"),
        }
    }

    fake.compact();
    let mut stream =
        within("watch", api.watch(&WatchParams::default(), &from)).await.unwrap().boxed();
    match next_event(&mut stream).await {
        Some(Ok(WatchEvent::Error(status))) => {
            assert_eq!(status.code, 410);
            assert_eq!(status.reason, "Expired");
        }
        other => panic!("expected a 410 ERROR event, got {other:?}"),
    }
    assert!(next_event(&mut stream).await.is_none());

    // timeoutSeconds ends the stream cleanly.
    let now = fake.resource_version().to_string();
    let mut stream =
        within("watch", api.watch(&WatchParams::default().timeout(1).disable_bookmarks(), &now))
            .await
            .unwrap()
            .boxed();
    assert!(next_event(&mut stream).await.is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn create_replace_delete_and_conflicts() {
    let fake = FakeApi::start().await;
    let secrets = Api::<Secret>::namespaced(fake.client(), "x");
    let secret: Secret = serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "s"},
        "stringData": {"k": "v"},
    }))
    .unwrap();

    let created = within("create", secrets.create(&PostParams::default(), &secret)).await.unwrap();
    assert_eq!(created.metadata.namespace.as_deref(), Some("x"));
    assert!(created.metadata.uid.is_some());
    let again = within("create again", secrets.create(&PostParams::default(), &secret)).await;
    assert_eq!(api_error(again), (409, "AlreadyExists".into()));

    let mut update = created.clone();
    update.labels_mut().insert("rotated".into(), "1".into());
    let replaced =
        within("replace", secrets.replace("s", &PostParams::default(), &update)).await.unwrap();
    assert_ne!(replaced.metadata.resource_version, created.metadata.resource_version);
    assert_eq!(replaced.metadata.uid, created.metadata.uid);
    // `update` still carries the old resourceVersion.
    let stale =
        within("stale replace", secrets.replace("s", &PostParams::default(), &update)).await;
    assert_eq!(api_error(stale), (409, "Conflict".into()));

    let deleted = within("delete", secrets.delete("s", &DeleteParams::default())).await.unwrap();
    assert_eq!(deleted.left().map(|s| s.name_any()).as_deref(), Some("s"));
    let missing = within("get deleted", secrets.get("s")).await;
    assert_eq!(api_error(missing), (404, "NotFound".into()));
    assert!(within("get_opt", secrets.get_opt("s")).await.unwrap().is_none());
    assert!(fake.get("v1", "Secret", Some("x"), "s").is_none());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn injected_faults() {
    let fake = FakeApi::start().await;
    let secrets = Api::<Secret>::namespaced(fake.client(), "x");

    fake.fail_next("GET", "/api/v1/namespaces/x/secrets", 403, 1);
    let forbidden = within("list", secrets.list(&ListParams::default())).await;
    assert_eq!(api_error(forbidden), (403, "Forbidden".into()));
    within("list", secrets.list(&ListParams::default())).await.unwrap();

    fake.fail_next("GET", "/api/v1/namespaces/x/secrets", 500, 1);
    let internal = within("list", secrets.list(&ListParams::default())).await;
    assert_eq!(api_error(internal), (500, "InternalError".into()));

    // kube's client retries 503 on its own: the caller never sees it.
    fake.clear_requests();
    fake.fail_next("GET", "/api/v1/namespaces/x/secrets", 503, 1);
    within("list", secrets.list(&ListParams::default())).await.unwrap();
    assert_eq!(fake.count_requests("GET", &["/api/v1/namespaces/x/secrets"]), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn merge_and_json_patch_a_webhook_configuration() {
    let fake = FakeApi::start().await;
    fake.insert(json!({
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": "gpu-policy"},
        "webhooks": [{
            "name": "gpu-policy.example.com",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "clientConfig": {"service": {"namespace": "gpu-policy", "name": "gpu-policy"}},
        }],
    }));
    let api = Api::<ValidatingWebhookConfiguration>::all(fake.client());
    let params = PatchParams::default();

    let merged = within(
        "merge patch",
        api.patch(
            "gpu-policy",
            &params,
            &Patch::Merge(json!({"metadata": {"labels": {"managed": "yes"}}})),
        ),
    )
    .await
    .unwrap();
    assert_eq!(merged.labels().get("managed").map(String::as_str), Some("yes"));
    assert_eq!(merged.metadata.generation, Some(1), "labels do not bump generation");

    let ops: json_patch::Patch = serde_json::from_value(json!([
        {"op": "add", "path": "/webhooks/0/clientConfig/caBundle", "value": "Q0E="},
        {"op": "replace", "path": "/webhooks/0/sideEffects", "value": "NoneOnDryRun"},
    ]))
    .unwrap();
    let patched = within("json patch", api.patch("gpu-policy", &params, &Patch::Json::<()>(ops)))
        .await
        .unwrap();
    let webhook = &patched.webhooks.as_ref().unwrap()[0];
    assert_eq!(webhook.client_config.ca_bundle.as_ref().map(|b| b.0.clone()), Some(b"CA".to_vec()));
    assert_eq!(webhook.side_effects, "NoneOnDryRun");
    assert_eq!(patched.metadata.generation, Some(2));
    assert_eq!(
        fake.get(
            "admissionregistration.k8s.io/v1",
            "ValidatingWebhookConfiguration",
            None,
            "gpu-policy"
        )
        .unwrap()["webhooks"][0]["clientConfig"]["caBundle"],
        "Q0E="
    );

    let failing: json_patch::Patch = serde_json::from_value(
        json!([{"op": "test", "path": "/webhooks/0/sideEffects", "value": "None"}]),
    )
    .unwrap();
    let rejected =
        within("failing json patch", api.patch("gpu-policy", &params, &Patch::Json::<()>(failing)))
            .await;
    assert_eq!(api_error(rejected).0, 422);

    // Server-side apply is served (tests/it/reports.rs); strategic merge
    // is not.
    let strategic = Patch::Strategic(json!({"metadata": {"labels": {"a": "b"}}}));
    let unsupported =
        within("strategic merge patch", api.patch("gpu-policy", &params, &strategic)).await;
    assert_eq!(api_error(unsupported), (415, "UnsupportedMediaType".into()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn kubeconfig_points_at_the_fake() {
    let fake = FakeApi::start().await;
    fake.insert(namespace("from-kubeconfig"));
    let dir = tempfile::tempdir().unwrap();
    let path = fake.write_kubeconfig(dir.path());

    let kubeconfig = kube::config::Kubeconfig::read_from(&path).unwrap();
    let config = within(
        "config from kubeconfig",
        kube::Config::from_custom_kubeconfig(
            kubeconfig,
            &kube::config::KubeConfigOptions::default(),
        ),
    )
    .await
    .unwrap();
    assert_eq!(config.default_namespace, "default");
    let client = Client::try_from(config).unwrap();
    let list =
        within("list", Api::<Namespace>::all(client).list(&ListParams::default())).await.unwrap();
    assert_eq!(list.items[0].name_any(), "from-kubeconfig");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_dry_run_collections_and_selector_watches() {
    let fake = FakeApi::start().await;
    for name in ["p1", "p2"] {
        fake.insert(json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": name, "namespace": "a", "labels": {"app": "x"}},
            "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            "status": {"phase": "Pending"},
        }));
    }
    let pods = Api::<Pod>::namespaced(fake.client(), "a");

    // The status subresource changes only .status.
    let patch = Patch::Merge(
        json!({"metadata": {"labels": {"sneaky": "1"}}, "status": {"phase": "Running"}}),
    );
    let patched = within("patch_status", pods.patch_status("p1", &PatchParams::default(), &patch))
        .await
        .unwrap();
    assert_eq!(patched.status.as_ref().unwrap().phase.as_deref(), Some("Running"));
    assert!(!patched.labels().contains_key("sneaky"));
    assert!(fake.count_requests("PATCH", &["/api/v1/namespaces/a/pods/p1/status"]) == 1);

    // dryRun answers without storing.
    let before = fake.resource_version();
    let dry = PatchParams { dry_run: true, ..PatchParams::default() };
    let answer = within(
        "dry-run patch",
        pods.patch("p2", &dry, &Patch::Merge(json!({"metadata": {"labels": {"dry": "run"}}}))),
    )
    .await
    .unwrap();
    assert!(answer.labels().contains_key("dry"));
    assert_eq!(fake.resource_version(), before);
    assert!(
        fake.get("v1", "Pod", Some("a"), "p2").unwrap()["metadata"]["labels"].get("dry").is_none()
    );

    // A label-selector watch sees objects leave and enter the selection.
    let now = fake.resource_version().to_string();
    let mut stream = within(
        "watch",
        pods.watch(&WatchParams::default().labels("app=x").disable_bookmarks(), &now),
    )
    .await
    .unwrap()
    .boxed();
    let mut p1 = fake.get("v1", "Pod", Some("a"), "p1").unwrap();
    p1["metadata"]["labels"]["app"] = "y".into();
    fake.insert(p1.clone());
    match within("watch event", stream.next()).await {
        Some(Ok(WatchEvent::Deleted(pod))) => assert_eq!(pod.name_any(), "p1"),
        other => panic!("expected DELETED p1, got {other:?}"),
    }
    p1["metadata"]["labels"]["app"] = "x".into();
    fake.insert(p1);
    match within("watch event", stream.next()).await {
        Some(Ok(WatchEvent::Added(pod))) => assert_eq!(pod.name_any(), "p1"),
        other => panic!("expected ADDED p1, got {other:?}"),
    }

    // A metadata watcher gets PartialObjectMetadata.
    let meta_api = Api::<PartialObjectMeta<Pod>>::namespaced(fake.client(), "a");
    let mut meta = pin!(watcher(meta_api, watcher::Config::default()));
    let mut initial = Vec::new();
    loop {
        match within("metadata watcher", meta.next()).await {
            Some(Ok(watcher::Event::InitApply(pod))) => initial.push(pod.name_any()),
            Some(Ok(watcher::Event::InitDone)) => break,
            Some(Ok(_)) => {}
            other => panic!("metadata watcher: {other:?}"),
        }
    }
    assert_eq!(initial, ["p1", "p2"]);

    // DELETE on the collection, by selector.
    let deleted = within(
        "delete_collection",
        pods.delete_collection(&DeleteParams::default(), &ListParams::default().labels("app=x")),
    )
    .await
    .unwrap();
    assert_eq!(deleted.left().map(|list| list.items.len()), Some(2));
    assert!(fake.objects("Pod").is_empty());
}
