//! End-to-end tests of `gpu-policy serve`: the built binary as a child
//! process, spoken to exactly as the API server does: HTTP/1.1 over TLS
//! (rustls, ring), the server certificate verified against the CA the
//! server generated (or the test made) as the only root, SNI
//! `gpu-policy.gpu-policy.svc` on a socket to 127.0.0.1, ALPN `http/1.1`,
//! keep-alive, AdmissionReview v1 bodies POSTed as `application/json` to
//! `/mutate?timeout=10s` and `/validate/<mode>?timeout=10s`.
//!
//! Every server runs on free loopback ports with its own directories, and
//! is killed by a drop guard, so a failing test leaves no process behind.
//! Logs (JSON, on stderr) go to a file the tests read.

use std::net::{SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    Issuer, KeyPair, KeyUsagePurpose, SerialNumber,
};
use rustls::client::Resumption;
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, RootCertStore};
use serde_json::{Value, json};
use crate::support::fake_api::FakeApi;
use crate::support::workloads;
use tempfile::TempDir;
use tokio::net::TcpStream;
use tokio::time::{Instant, sleep, timeout};
use tokio_rustls::TlsConnector;

/// The name the API server uses for the in-cluster Service.
const SERVER_NAME: &str = "gpu-policy.gpu-policy.svc";
/// How long a server may take to become ready.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// A bound on every single network operation, so no test hangs.
const IO_TIMEOUT: Duration = Duration::from_secs(15);
/// Short pause between polls.
const POLL: Duration = Duration::from_millis(50);
/// The namespace of objects whose manifest names none.
const NAMESPACE: &str = "ml";
const MUTATE: &str = "/mutate?timeout=10s";
const ENFORCE: &str = "/validate/enforce?timeout=10s";
const WARN: &str = "/validate/warn?timeout=10s";
const AUDIT: &str = "/validate/audit?timeout=10s";

// ---------------------------------------------------------------------------
// Fixtures and AdmissionReview bodies.

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures")
}

/// Every object of every fixture, labelled with its file's stem.
fn fixture_objects() -> Vec<(String, Value)> {
    let mut files: Vec<PathBuf> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures is readable")
        .map(|entry| entry.expect("directory entry").path())
        .filter(|path| path.extension().is_some_and(|e| e == "yaml"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 12, "the 12 shared fixtures: {files:?}");
    let mut objects = Vec::new();
    for path in files {
        let stem = path
            .file_stem()
            .and_then(|s| s.to_str())
            .expect("UTF-8 name")
            .to_owned();
        let text = std::fs::read_to_string(&path).expect("fixture is readable");
        let documents: Vec<Value> = serde_saphyr::from_multiple(&text)
            .unwrap_or_else(|err| panic!("{}: {err}", path.display()));
        for document in documents {
            if !document.is_null() {
                objects.push((stem.clone(), document));
            }
        }
    }
    objects
}

/// The first object of the fixture whose file name starts with `prefix`.
fn fixture(prefix: &str) -> Value {
    fixture_objects()
        .into_iter()
        .find(|(stem, _)| stem.starts_with(prefix))
        .map(|(_, object)| object)
        .unwrap_or_else(|| panic!("no fixture {prefix}"))
}

fn is_pod(object: &Value) -> bool {
    object["apiVersion"] == "v1" && object["kind"] == "Pod"
}

/// A pod as the workload's controller creates it, in the test namespace
/// when the workload names none.
fn pod_of_workload(workload: &Value) -> Option<Value> {
    let mut pod =
        workloads::pod_of_workload(workload, "e2e01", "5f0c8a52-2f5e-4b8e-9d59-1d1b0c3c0001")?;
    pod["metadata"]["namespace"] = json!(namespace_of(workload));
    Some(pod)
}

/// The pods of test 1: the Pod fixtures and one pod per workload template.
fn fixture_pods() -> Vec<(String, Value)> {
    let mut pods = Vec::new();
    for (stem, object) in fixture_objects() {
        if is_pod(&object) {
            pods.push((stem, object));
        } else if let Some(pod) = pod_of_workload(&object) {
            pods.push((format!("{stem} template"), pod));
        }
    }
    assert_eq!(pods.len(), 12, "3 pods and 9 workload templates");
    pods
}

fn namespace_of(object: &Value) -> String {
    object
        .pointer("/metadata/namespace")
        .and_then(Value::as_str)
        .unwrap_or(NAMESPACE)
        .to_owned()
}

/// A fresh request uid, unique within this test process.
fn next_uid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:08x}-e2e0-4000-8000-{n:012x}", std::process::id())
}

/// A CREATE AdmissionReview v1 of `object`, as the API server sends it.
fn review(object: &Value, uid: &str, dry_run: bool) -> Value {
    let api_version = object["apiVersion"].as_str().expect("apiVersion");
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let kind = object["kind"].as_str().expect("kind");
    let resource = format!("{}s", kind.to_lowercase());
    let gvk = json!({"group": group, "version": version, "kind": kind});
    let gvr = json!({"group": group, "version": version, "resource": resource});
    json!({
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": uid,
            "kind": gvk,
            "resource": gvr,
            "requestKind": gvk,
            "requestResource": gvr,
            "name": object.pointer("/metadata/name").cloned().unwrap_or(json!("")),
            "namespace": namespace_of(object),
            "operation": "CREATE",
            "userInfo": {
                "username": "e2e@example.com",
                "groups": ["system:authenticated"],
            },
            "object": object,
            "oldObject": null,
            "dryRun": dry_run,
            "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        }
    })
}

fn body_of(review: &Value) -> Vec<u8> {
    serde_json::to_vec(review).expect("a review serialises")
}

/// The fixture pod 11 with `gpus` cards in its only container's limits.
fn pod_with_gpus(gpus: u64) -> Value {
    let mut pod = fixture("11");
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!(gpus);
    pod
}

// ---------------------------------------------------------------------------
// HTTP over TLS (admission) and plain HTTP (operations).

/// One HTTP answer, body read to its end.
#[derive(Debug)]
struct Reply {
    status: u16,
    content_type: Option<String>,
    body: Bytes,
}

impl Reply {
    fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `response` of a 200 AdmissionReview for request `uid`.
    fn admission(&self, uid: &str) -> Value {
        assert_eq!(self.status, 200, "body: {}", self.text());
        assert_eq!(self.content_type.as_deref(), Some("application/json"));
        let review: Value = serde_json::from_slice(&self.body)
            .unwrap_or_else(|err| panic!("not JSON ({err}): {}", self.text()));
        assert_eq!(review["apiVersion"], "admission.k8s.io/v1", "{review}");
        assert_eq!(review["kind"], "AdmissionReview", "{review}");
        let response = review["response"].clone();
        assert_eq!(response["uid"], uid, "the uid is echoed: {review}");
        response
    }
}

/// A keep-alive HTTP/1.1 connection.
struct Connection {
    sender: SendRequest<Full<Bytes>>,
    /// The leaf certificate the server presented (empty over plain HTTP).
    peer_certificate: Vec<u8>,
}

/// The client side of the API server: the given CA as the only root, ALPN
/// http/1.1, ring as the provider.
fn client_config(ca_pem: &[u8]) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem) {
        roots
            .add(cert.expect("CA PEM parses"))
            .expect("CA is a valid root");
    }
    assert!(!roots.is_empty(), "no certificate in the CA file");
    let mut config =
        ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
            .with_safe_default_protocol_versions()
            .expect("ring supports the default versions")
            .with_root_certificates(roots)
            .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    // Like the API server (Go's transport has no session cache by default):
    // every connection makes a full handshake, so it sees the certificate
    // being served now rather than the one of a resumed session.
    config.resumption = Resumption::disabled();
    Arc::new(config)
}

impl Connection {
    /// TCP to `addr`, TLS with SNI [`SERVER_NAME`], then HTTP/1.1.
    async fn tls(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<Self, String> {
        let handshake = async {
            let tcp = TcpStream::connect(addr)
                .await
                .map_err(|e| format!("connect: {e}"))?;
            let name = ServerName::try_from(SERVER_NAME).expect("valid DNS name");
            TlsConnector::from(config)
                .connect(name, tcp)
                .await
                .map_err(|e| format!("TLS handshake: {e}"))
        };
        let tls = timeout(IO_TIMEOUT, handshake)
            .await
            .map_err(|_| "TLS handshake timed out".to_owned())??;
        let (_, session) = tls.get_ref();
        if session.alpn_protocol() != Some(b"http/1.1") {
            return Err(format!(
                "ALPN: expected http/1.1, got {:?}",
                session.alpn_protocol()
            ));
        }
        let peer_certificate = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .map(|leaf| leaf.as_ref().to_vec())
            .ok_or("no peer certificate")?;
        let mut connection = Self::http(TokioIo::new(tls)).await?;
        connection.peer_certificate = peer_certificate;
        Ok(connection)
    }

    async fn plain(addr: SocketAddr) -> Result<Self, String> {
        let tcp = timeout(IO_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|e| format!("connect: {e}"))?;
        Self::http(TokioIo::new(tcp)).await
    }

    async fn http<T>(io: T) -> Result<Self, String>
    where
        T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (sender, driver) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = driver.await;
        });
        Ok(Self {
            sender,
            peer_certificate: Vec::new(),
        })
    }

    async fn send(
        &mut self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<Reply, String> {
        let exchange = async {
            self.sender
                .ready()
                .await
                .map_err(|e| format!("connection not ready: {e}"))?;
            let mut request = Request::builder()
                .method(method)
                .uri(path)
                .header(HOST, format!("{SERVER_NAME}:443"));
            if let Some(content_type) = content_type {
                request = request.header(CONTENT_TYPE, content_type);
            }
            let request = request
                .body(Full::new(Bytes::from(body)))
                .expect("a valid request");
            let response = self
                .sender
                .send_request(request)
                .await
                .map_err(|e| format!("request: {e}"))?;
            let status = response.status().as_u16();
            let content_type = response
                .headers()
                .get(CONTENT_TYPE)
                .and_then(|v| v.to_str().ok())
                .map(str::to_owned);
            let body = response
                .into_body()
                .collect()
                .await
                .map_err(|e| format!("response body: {e}"))?
                .to_bytes();
            Ok(Reply {
                status,
                content_type,
                body,
            })
        };
        timeout(IO_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{path}: no answer within {IO_TIMEOUT:?}"))?
    }

    /// POSTs `body` as `application/json`.
    async fn post(&mut self, path: &str, body: Vec<u8>) -> Result<Reply, String> {
        self.send(Method::POST, path, Some("application/json"), body)
            .await
    }

    /// POSTs a review of `object` with a fresh uid; the 200 response.
    async fn admit(&mut self, path: &str, object: &Value) -> Value {
        let uid = next_uid();
        let reply = self
            .post(path, body_of(&review(object, &uid, false)))
            .await
            .unwrap_or_else(|err| panic!("{path}: {err}"));
        reply.admission(&uid)
    }

    /// `pod` after `/mutate` (unchanged when no patch comes back).
    async fn mutated(&mut self, pod: &Value) -> Value {
        let response = self.admit(MUTATE, pod).await;
        assert_eq!(response["allowed"], true, "{response}");
        match patch_of(&response) {
            Some(patch) => patched(pod, &patch),
            None => pod.clone(),
        }
    }

    async fn get(&mut self, path: &str) -> Result<Reply, String> {
        self.send(Method::GET, path, None, Vec::new()).await
    }
}

/// The JSON Patch of an admission response, checked to be base64 JSON
/// Patch; `None` when the response carries none.
fn patch_of(response: &Value) -> Option<json_patch::Patch> {
    match response.get("patch") {
        None | Some(Value::Null) => {
            assert!(
                response.get("patchType").is_none_or(Value::is_null),
                "patchType without a patch: {response}"
            );
            None
        }
        Some(Value::String(encoded)) => {
            assert_eq!(response["patchType"], "JSONPatch", "{response}");
            let bytes = BASE64
                .decode(encoded)
                .unwrap_or_else(|err| panic!("patch is not base64 ({err}): {encoded}"));
            let patch: json_patch::Patch = serde_json::from_slice(&bytes).unwrap_or_else(|err| {
                panic!(
                    "patch is not a JSON Patch ({err}): {}",
                    String::from_utf8_lossy(&bytes)
                )
            });
            Some(patch)
        }
        Some(other) => panic!("patch is neither absent nor a string: {other}"),
    }
}

/// `object` with `patch` applied; the patch must apply.
fn patched(object: &Value, patch: &json_patch::Patch) -> Value {
    let mut result = object.clone();
    json_patch::patch(&mut result, patch)
        .unwrap_or_else(|err| panic!("the patch does not apply ({err}): {patch:?}"));
    result
}

// ---------------------------------------------------------------------------
// The server process.

fn free_port() -> u16 {
    StdTcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

#[derive(Debug, Default)]
struct Options {
    /// `--certs-dir`; a fresh temporary directory when `None`.
    certs_dir: Option<PathBuf>,
    /// `--tls-cert` and `--tls-key`.
    tls: Option<(PathBuf, PathBuf)>,
    /// `--config`.
    config: Option<PathBuf>,
    /// `--kubeconfig`; `--no-cluster` when `None`.
    kubeconfig: Option<PathBuf>,
}

/// A running `gpu-policy serve`, killed when dropped.
struct Server {
    child: Child,
    admission: SocketAddr,
    operations: SocketAddr,
    /// The CA the clients trust.
    ca_pem: Vec<u8>,
    log_path: PathBuf,
    certs_dir: PathBuf,
    _scratch: TempDir,
}

impl Drop for Server {
    fn drop(&mut self) {
        if matches!(self.child.try_wait(), Ok(None)) {
            let _ = self.child.kill();
        }
        let _ = self.child.wait();
    }
}

impl Server {
    /// Starts the binary on free ports and waits for `/readyz`. Retries with
    /// other ports when one was taken in between. `ca_pem` is the CA the
    /// clients trust; `None` reads the generated `ca.crt`.
    async fn start(options: Options, ca_pem: Option<Vec<u8>>) -> Server {
        let mut last_log = String::new();
        for _attempt in 0..5 {
            let scratch = tempfile::tempdir().expect("tempdir");
            let certs_dir = options
                .certs_dir
                .clone()
                .unwrap_or_else(|| scratch.path().join("certs"));
            let admission = SocketAddr::from(([127, 0, 0, 1], free_port()));
            let mut operations = SocketAddr::from(([127, 0, 0, 1], free_port()));
            while operations.port() == admission.port() {
                operations.set_port(free_port());
            }
            let log_path = scratch.path().join("server.log");
            let log = std::fs::File::create(&log_path).expect("log file");
            let mut command = Command::new(env!("CARGO_BIN_EXE_gpu-policy"));
            command
                .arg("serve")
                .args(["--listen", &admission.to_string()])
                .args(["--metrics-listen", &operations.to_string()])
                .arg("--certs-dir")
                .arg(&certs_dir)
                .args(["--log-format", "json", "--reload-interval", "1"]);
            if let Some((cert, key)) = &options.tls {
                command
                    .arg("--tls-cert")
                    .arg(cert)
                    .arg("--tls-key")
                    .arg(key);
            }
            if let Some(config) = &options.config {
                command.arg("--config").arg(config);
            }
            match &options.kubeconfig {
                Some(kubeconfig) => command.arg("--kubeconfig").arg(kubeconfig),
                None => command.arg("--no-cluster"),
            };
            let child = command
                // E2E_SERVER_LOG=hyper=trace,info shows the server's internals.
                .env(
                    "RUST_LOG",
                    std::env::var("E2E_SERVER_LOG").unwrap_or_else(|_| "info".to_owned()),
                )
                .stdin(Stdio::null())
                .stdout(log.try_clone().expect("log file"))
                .stderr(log)
                .spawn()
                .expect("the binary starts");
            let mut server = Server {
                child,
                admission,
                operations,
                ca_pem: Vec::new(),
                log_path,
                certs_dir,
                _scratch: scratch,
            };
            match server.wait_ready().await {
                Ok(()) => {
                    server.ca_pem = match &ca_pem {
                        Some(pem) => pem.clone(),
                        None => std::fs::read(server.certs_dir.join("ca.crt"))
                            .expect("the server wrote ca.crt"),
                    };
                    return server;
                }
                Err(log) if log.contains("cannot listen on") => {
                    // A port was taken between the probe and the bind.
                    last_log = log;
                }
                Err(log) => panic!("the server did not become ready; its log:\n{log}"),
            }
        }
        panic!("the server could not bind free ports five times; last log:\n{last_log}");
    }

    /// Ok when `/readyz` answers 200; Err(log) when the process exited.
    async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return Err(format!("exited with {status}\n{}", self.log()));
            }
            if let Ok(reply) = self.operations_get("/readyz").await
                && reply.status == 200
            {
                assert_eq!(reply.text(), "ready");
                return Ok(());
            }
            assert!(
                Instant::now() < deadline,
                "/readyz not 200 within {READY_TIMEOUT:?}; log:\n{}",
                self.log()
            );
            sleep(POLL).await;
        }
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    fn client_config(&self) -> Arc<ClientConfig> {
        client_config(&self.ca_pem)
    }

    async fn connect(&self) -> Connection {
        Connection::tls(self.admission, self.client_config())
            .await
            .unwrap_or_else(|err| panic!("{err}; log:\n{}", self.log()))
    }

    async fn operations_get(&self, path: &str) -> Result<Reply, String> {
        Connection::plain(self.operations).await?.get(path).await
    }

    async fn metrics(&self) -> String {
        let reply = self
            .operations_get("/metrics")
            .await
            .unwrap_or_else(|err| panic!("/metrics: {err}"));
        assert_eq!(reply.status, 200);
        reply.text()
    }

    /// Polls `/metrics` until it has a line equal to `line`.
    async fn wait_for_metric_line(&self, line: &str) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let metrics = self.metrics().await;
            if metrics.lines().any(|l| l == line) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "no line {line:?} in /metrics within 10 s:\n{metrics}\nlog:\n{}",
                self.log()
            );
            sleep(Duration::from_millis(100)).await;
        }
    }

    /// Polls the log until it contains `text`.
    async fn wait_for_log(&self, text: &str, limit: Duration) {
        let deadline = Instant::now() + limit;
        while !self.log().contains(text) {
            assert!(
                Instant::now() < deadline,
                "no {text:?} in the log within {limit:?}:\n{}",
                self.log()
            );
            sleep(Duration::from_millis(20)).await;
        }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
    }

    /// Waits (bounded) for the process to exit.
    async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("try_wait") {
                return status;
            }
            assert!(
                Instant::now() < deadline,
                "the server did not exit within {limit:?}; log:\n{}",
                self.log()
            );
            sleep(POLL).await;
        }
    }
}

fn write_atomically(path: &Path, bytes: &[u8]) {
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .expect("file name");
    let temporary = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&temporary, bytes).expect("write temporary file");
    std::fs::rename(&temporary, path).expect("rename into place");
}

// ---------------------------------------------------------------------------
// 1. Every pod through /mutate, the patch applied, then idempotence and
//    validation over the wire.

/// What each pod's mutation must write into `gpu-policy.io/mutations`;
/// `None`: the pod is left alone (allowlisted).
fn expected_mutations(label: &str) -> Option<&'static str> {
    let prefix = &label[..2];
    match prefix {
        // kube-system DaemonSets on the default allowlist.
        "00" | "01" => None,
        // Non-GPU pods, not allowlisted: void pins.
        "02" | "03" | "04" | "09" => Some("visible-devices"),
        // GPU pods whose image implies no minimum compute capability.
        "05" | "06" | "07" | "08" | "10" => Some("runtime-class"),
        "11" => Some("runtime-class,compute-affinity"),
        other => panic!("unknown fixture {other}"),
    }
}

fn all_containers(pod: &Value) -> Vec<&Value> {
    ["initContainers", "containers"]
        .iter()
        .filter_map(|field| pod["spec"][field].as_array())
        .flatten()
        .collect()
}

fn visible_devices(container: &Value) -> Vec<&Value> {
    container["env"]
        .as_array()
        .map(|env| {
            env.iter()
                .filter(|e| e["name"] == "NVIDIA_VISIBLE_DEVICES")
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread")]
async fn every_fixture_pod_is_mutated_idempotently_and_then_admitted() {
    let server = Server::start(Options::default(), None).await;
    // One keep-alive connection for all of them, as the API server does.
    let mut connection = server.connect().await;
    for (label, mut pod) in fixture_pods() {
        if label.starts_with("04") {
            // runtimeClassName: nvidia without a GPU request, outside the
            // allowlist (namespace ml): a violation. The mutating webhook
            // only mutates (allowed, and no patch for a pod that will be
            // denied); /validate/enforce denies it.
            let mutated = connection.admit(MUTATE, &pod).await;
            assert_eq!(mutated["allowed"], true, "{label}: {mutated}");
            assert!(patch_of(&mutated).is_none(), "{mutated}");
            let denied = connection.admit(ENFORCE, &pod).await;
            assert_eq!(denied["allowed"], false, "{label}: {denied}");
            assert_eq!(denied["status"]["code"], 403, "{denied}");
            let message = denied["status"]["message"].as_str().expect("message");
            assert!(message.contains("runtimeClassName"), "{message}");
            // The author's fix: no runtime class. Then only R1 applies.
            pod["spec"]
                .as_object_mut()
                .expect("spec")
                .remove("runtimeClassName");
        }
        let response = connection.admit(MUTATE, &pod).await;
        assert_eq!(response["allowed"], true, "{label}: {response}");
        let after = match (patch_of(&response), expected_mutations(&label)) {
            (None, None) => pod.clone(),
            (Some(patch), Some(rules)) => {
                let after = patched(&pod, &patch);
                assert_eq!(
                    after["metadata"]["annotations"]["gpu-policy.io/mutations"], rules,
                    "{label}: {after}"
                );
                after
            }
            (patch, rules) => panic!("{label}: expected mutations {rules:?}, got patch {patch:?}"),
        };

        // Rule by rule, what the patched pod must look like.
        match expected_mutations(&label) {
            Some("visible-devices") => {
                for container in all_containers(&after) {
                    assert_eq!(
                        visible_devices(container),
                        vec![&json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})],
                        "{label}: container {}",
                        container["name"]
                    );
                }
                assert_eq!(
                    after["spec"].get("runtimeClassName"),
                    pod["spec"].get("runtimeClassName"),
                    "{label}: no runtime class is injected into a non-GPU pod"
                );
            }
            Some(_) => {
                assert_eq!(after["spec"]["runtimeClassName"], "nvidia", "{label}");
            }
            None => {}
        }
        if label.starts_with("11") {
            assert_eq!(
                after["spec"]["affinity"],
                json!({"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [{"matchExpressions": [{
                        "key": "nvidia.com/gpu.compute.major",
                        "operator": "Gt",
                        "values": ["4"],
                    }]}]
                }}})
            );
        }
        if label.starts_with("09") {
            let vllm = all_containers(&after)
                .into_iter()
                .find(|c| c["name"] == "vllm")
                .expect("container vllm");
            assert_eq!(
                visible_devices(vllm),
                vec![&json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": "void"})]
            );
        }
        if label.starts_with("04") || label.starts_with("00") {
            // The exporter's explicit `all`: replaced by the pin, except in
            // the allowlisted kube-system DaemonSet.
            let exporter = &after["spec"]["containers"][0];
            let expected = if label.starts_with("00") {
                "all"
            } else {
                "void"
            };
            assert_eq!(
                visible_devices(exporter),
                vec![&json!({"name": "NVIDIA_VISIBLE_DEVICES", "value": expected})],
                "{label}: {exporter}"
            );
        }

        // Re-invocation (reinvocationPolicy: IfNeeded): nothing more to do.
        let again = connection.admit(MUTATE, &after).await;
        assert_eq!(again["allowed"], true, "{label}: {again}");
        assert!(
            patch_of(&again).is_none(),
            "{label}: second /mutate patched again: {again}"
        );

        // The validating webhook sees the mutated pod.
        let validated = connection.admit(ENFORCE, &after).await;
        assert_eq!(validated["allowed"], true, "{label}: {validated}");
    }
}

// ---------------------------------------------------------------------------
// 2. Workloads on the validating endpoints.

#[tokio::test(flavor = "multi_thread")]
async fn workloads_are_validated_per_mode() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let exporter_elsewhere = fixture("04");
    let exporter_allowlisted = fixture("00");
    assert_eq!(namespace_of(&exporter_elsewhere), NAMESPACE);
    assert_eq!(namespace_of(&exporter_allowlisted), "kube-system");

    let denied = connection.admit(ENFORCE, &exporter_elsewhere).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    assert_eq!(denied["status"]["status"], "Failure", "{denied}");
    assert_eq!(denied["status"]["reason"], "Forbidden", "{denied}");
    let message = denied["status"]["message"].as_str().expect("a message");
    assert!(
        message.starts_with("gpu-policy: ") && message.contains("runtimeClassName"),
        "{message}"
    );
    assert!(patch_of(&denied).is_none(), "templates are never patched");

    let allowed = connection.admit(ENFORCE, &exporter_allowlisted).await;
    assert_eq!(allowed["allowed"], true, "{allowed}");
    assert!(patch_of(&allowed).is_none(), "{allowed}");
    assert!(
        allowed.get("warnings").is_none_or(Value::is_null),
        "the allowlisted exporter raises nothing: {allowed}"
    );

    let warned = connection.admit(WARN, &exporter_elsewhere).await;
    assert_eq!(warned["allowed"], true, "{warned}");
    assert!(patch_of(&warned).is_none(), "{warned}");
    let warnings = warned["warnings"].as_array().expect("warnings");
    assert!(!warnings.is_empty(), "{warned}");
    for warning in warnings {
        let warning = warning.as_str().expect("a string");
        assert!(warning.starts_with("gpu-policy:"), "{warning}");
    }
    assert!(
        warnings
            .iter()
            .any(|w| w.as_str().is_some_and(|w| w.contains("runtimeClassName"))),
        "the would-be denial is among the warnings: {warnings:?}"
    );

    let audited = connection.admit(AUDIT, &exporter_elsewhere).await;
    assert_eq!(audited["allowed"], true, "{audited}");
    assert!(patch_of(&audited).is_none(), "{audited}");
    assert!(
        audited.get("warnings").is_none_or(Value::is_null),
        "audit mode does not warn: {audited}"
    );
    let annotations = audited["auditAnnotations"]
        .as_object()
        .expect("auditAnnotations");
    assert!(!annotations.is_empty(), "{audited}");
    assert!(
        annotations
            .get("violations")
            .and_then(Value::as_str)
            .is_some_and(|v| v.contains("runtime-class")),
        "{annotations:?}"
    );
}

// ---------------------------------------------------------------------------
// 3. dryRun changes nothing in the answer (sideEffects: None).

#[tokio::test(flavor = "multi_thread")]
async fn dry_run_gets_the_same_bytes_as_the_real_request() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let pod = fixture("11");
    let exporter = fixture("04");
    // A pod that both changes and violates, so audit mode writes two
    // annotations.
    let violating = pod_of_workload(&exporter).expect("a template");
    let cases = [
        (MUTATE, &pod),
        (ENFORCE, &pod),
        (ENFORCE, &exporter),
        (WARN, &exporter),
        (AUDIT, &exporter),
        (AUDIT, &violating),
    ];
    for (path, object) in cases.iter().cycle().take(cases.len() * 5) {
        let uid = next_uid();
        let real = connection
            .post(path, body_of(&review(object, &uid, false)))
            .await
            .expect("real request");
        let dry = connection
            .post(path, body_of(&review(object, &uid, true)))
            .await
            .expect("dry-run request");
        // Both are well-formed answers to the same uid...
        let response = real.admission(&uid);
        dry.admission(&uid);
        if *path == AUDIT && object["kind"] == "Pod" {
            // Two annotations: their order must not vary either.
            let annotations = response["auditAnnotations"].as_object().expect("map");
            assert_eq!(
                annotations.keys().collect::<Vec<_>>(),
                ["mutations", "violations"],
                "{response}"
            );
        }
        // ...and byte for byte the same.
        assert_eq!(
            real.body,
            dry.body,
            "{path} {}: real {} vs dry run {}",
            object["metadata"]["name"],
            real.text(),
            dry.text()
        );
    }
}

// ---------------------------------------------------------------------------
// 4. Bad input over the wire.

#[tokio::test(flavor = "multi_thread")]
async fn bad_input_gets_4xx_and_the_server_keeps_serving() {
    let mut server = Server::start(Options::default(), None).await;
    let pod = fixture("11");
    let mut connection = server.connect().await;

    let malformed = connection
        .post(
            ENFORCE,
            br#"{"apiVersion": "admission.k8s.io/v1", "kind": "#.to_vec(),
        )
        .await
        .expect("an answer to malformed JSON");
    assert_eq!(malformed.status, 400, "{}", malformed.text());
    let reason = malformed.text();
    assert!(
        reason.starts_with("gpu-policy: ") && reason.trim_end().lines().count() == 1,
        "one line reason: {reason:?}"
    );

    let uid = next_uid();
    let wrong_type = connection
        .send(
            Method::POST,
            ENFORCE,
            Some("text/plain"),
            body_of(&review(&pod, &uid, false)),
        )
        .await
        .expect("an answer to a wrong content type");
    assert_eq!(wrong_type.status, 415, "{}", wrong_type.text());
    assert!(wrong_type.text().starts_with("gpu-policy: "));

    // Both bodies were read whole: the keep-alive connection still works.
    let response = connection.admit(ENFORCE, &pod).await;
    assert_eq!(response["allowed"], true, "{response}");

    // Over 3 MiB (the API server's object limit): a well-formed review,
    // padded with a large annotation.
    let mut big = pod.clone();
    big["metadata"]["annotations"] =
        json!({"example.com/padding": "x".repeat(3 * 1024 * 1024 + 1024)});
    let big_body = body_of(&review(&big, &next_uid(), false));
    assert!(big_body.len() > 3 * 1024 * 1024);
    let mut fresh = server.connect().await;
    let too_large = fresh
        .post(MUTATE, big_body)
        .await
        .expect("an answer to an oversized body");
    assert_eq!(too_large.status, 413, "{}", too_large.text());

    // A new connection is served normally.
    let mut after = server.connect().await;
    let uid = next_uid();
    let reply = after
        .post(MUTATE, body_of(&review(&pod, &uid, false)))
        .await
        .expect("a valid request after bad ones");
    let response = reply.admission(&uid);
    assert_eq!(response["allowed"], true, "{response}");
    assert!(patch_of(&response).is_some(), "{response}");
    assert!(
        server.child.try_wait().expect("try_wait").is_none(),
        "the server is still running"
    );
}

// ---------------------------------------------------------------------------
// 5. Certificate rotation while requests run.

fn distinguished_name(common_name: &str) -> DistinguishedName {
    let mut name = DistinguishedName::new();
    name.push(DnType::CommonName, common_name);
    name
}

/// A test CA: its issuer and its certificate (PEM).
fn test_ca() -> (Issuer<'static, KeyPair>, String) {
    let mut params = CertificateParams::new(Vec::<String>::new()).expect("params");
    params.distinguished_name = distinguished_name("gpu-policy e2e test CA");
    params.is_ca = IsCa::Ca(BasicConstraints::Constrained(0));
    params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
    let key = KeyPair::generate().expect("CA key");
    let cert = params.self_signed(&key).expect("CA certificate");
    (Issuer::new(params, key), cert.pem())
}

/// A serving certificate for [`SERVER_NAME`] signed by `issuer`: (cert
/// PEM, key PEM, cert DER).
fn test_leaf(issuer: &Issuer<'static, KeyPair>, serial: u64) -> (String, String, Vec<u8>) {
    let mut params = CertificateParams::new(vec![SERVER_NAME.to_owned()]).expect("params");
    params.distinguished_name = distinguished_name(SERVER_NAME);
    params.serial_number = Some(SerialNumber::from(serial));
    params.is_ca = IsCa::ExplicitNoCa;
    params.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let key = KeyPair::generate().expect("leaf key");
    let cert = params.signed_by(&key, issuer).expect("leaf certificate");
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

/// One request of the rotation client: which leaf the handshake presented,
/// or what failed.
type Outcome = Result<Vec<u8>, String>;

/// Sends requests, each on a fresh TLS connection, until `stop`.
fn spawn_fresh_connection_client(
    server: &Server,
    stop: Arc<AtomicBool>,
) -> tokio::task::JoinHandle<Vec<Outcome>> {
    let addr = server.admission;
    let config = server.client_config();
    let pod = fixture("11");
    tokio::spawn(async move {
        let mut outcomes = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let outcome = async {
                let mut connection = Connection::tls(addr, Arc::clone(&config)).await?;
                let uid = next_uid();
                let reply = connection
                    .post(MUTATE, body_of(&review(&pod, &uid, false)))
                    .await?;
                let review: Value = serde_json::from_slice(&reply.body)
                    .map_err(|e| format!("status {}: {e}: {}", reply.status, reply.text()))?;
                if reply.status != 200 || review["response"]["uid"] != uid.as_str() {
                    return Err(format!("status {}: {}", reply.status, reply.text()));
                }
                Ok(connection.peer_certificate)
            }
            .await;
            outcomes.push(outcome);
            sleep(Duration::from_millis(20)).await;
        }
        outcomes
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn certificate_rotation_is_seamless_and_a_broken_file_is_refused() {
    let tls_dir = tempfile::tempdir().expect("tempdir");
    let cert_path = tls_dir.path().join("tls.crt");
    let key_path = tls_dir.path().join("tls.key");
    let (issuer, ca_pem) = test_ca();
    let (cert1, key1, der1) = test_leaf(&issuer, 1);
    let (cert2, key2, der2) = test_leaf(&issuer, 2);
    assert_ne!(der1, der2);
    write_atomically(&key_path, key1.as_bytes());
    write_atomically(&cert_path, cert1.as_bytes());

    let server = Server::start(
        Options {
            tls: Some((cert_path.clone(), key_path.clone())),
            ..Options::default()
        },
        Some(ca_pem.into_bytes()),
    )
    .await;
    assert!(
        !server.certs_dir.join("ca.crt").exists(),
        "no self-signed CA is generated when --tls-cert is given"
    );

    let stop = Arc::new(AtomicBool::new(false));
    let client = spawn_fresh_connection_client(&server, Arc::clone(&stop));
    sleep(Duration::from_millis(1500)).await;

    // Rotate: the key first, then the certificate, each renamed into place
    // (a poll in between sees a mismatched pair and keeps the old one).
    write_atomically(&key_path, key2.as_bytes());
    write_atomically(&cert_path, cert2.as_bytes());
    // Wait until a fresh handshake presents leaf 2, then keep the load on.
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let connection = server.connect().await;
        if connection.peer_certificate == der2 {
            break;
        }
        assert_eq!(connection.peer_certificate, der1, "an unknown leaf");
        assert!(
            Instant::now() < deadline,
            "leaf 2 not served within 10 s; log:\n{}",
            server.log()
        );
        sleep(Duration::from_millis(100)).await;
    }
    sleep(Duration::from_millis(1500)).await;
    stop.store(true, Ordering::Relaxed);
    let outcomes = client.await.expect("client task");

    let failures: Vec<&String> = outcomes.iter().filter_map(|o| o.as_ref().err()).collect();
    assert!(failures.is_empty(), "failed requests: {failures:?}");
    let leaves: Vec<u8> = outcomes
        .iter()
        .map(|o| {
            let der = o.as_ref().expect("no failure");
            if *der == der1 {
                1
            } else if *der == der2 {
                2
            } else {
                panic!("a leaf that is neither 1 nor 2")
            }
        })
        .collect();
    assert_eq!(leaves.first(), Some(&1), "leaf 1 served first: {leaves:?}");
    assert_eq!(leaves.last(), Some(&2), "leaf 2 served last: {leaves:?}");
    let switch = leaves.iter().position(|&l| l == 2).expect("leaf 2 seen");
    assert!(
        leaves[switch..].iter().all(|&l| l == 2),
        "once leaf 2 is served, leaf 1 never comes back: {leaves:?}"
    );
    assert!(server.log().contains("serving certificate reloaded"));

    // A broken certificate file is refused; leaf 2 keeps serving.
    let stop = Arc::new(AtomicBool::new(false));
    let client = spawn_fresh_connection_client(&server, Arc::clone(&stop));
    write_atomically(&cert_path, b"garbage\n");
    server
        .wait_for_metric_line(r#"gpu_policy_reload_success{source="certificate"} 0"#)
        .await;
    // One more poll interval with the broken file in place.
    sleep(Duration::from_millis(1200)).await;
    stop.store(true, Ordering::Relaxed);
    let outcomes = client.await.expect("client task");
    assert!(!outcomes.is_empty());
    for outcome in &outcomes {
        let der = outcome
            .as_ref()
            .unwrap_or_else(|err| panic!("a request failed with a broken tls.crt: {err}"));
        assert!(*der == der2, "the old pair (leaf 2) keeps serving");
    }
    assert!(
        server.log().contains("new certificate refused"),
        "{}",
        server.log()
    );
}

// ---------------------------------------------------------------------------
// 6. SIGTERM while requests run.

/// What became of one request sent by hand on a fresh connection.
#[derive(Debug)]
enum Exchange {
    /// TCP connect or TLS handshake failed: the server did not take the
    /// connection.
    NotAccepted(String),
    /// Writing the request failed: it was not fully sent.
    NotSent(String),
    /// The request was fully written (and flushed); then the complete
    /// response (status, body), or why there is none.
    Sent(Result<(u16, Vec<u8>), String>),
}

/// One POST on a fresh TLS connection, written and read by hand so that
/// "fully written" is known exactly.
async fn exchange_once(addr: SocketAddr, config: Arc<ClientConfig>, body: &[u8]) -> Exchange {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let handshake = async {
        let tcp = TcpStream::connect(addr)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        let name = ServerName::try_from(SERVER_NAME).expect("valid DNS name");
        TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))
    };
    let mut tls = match timeout(IO_TIMEOUT, handshake).await {
        Ok(Ok(tls)) => tls,
        Ok(Err(err)) => return Exchange::NotAccepted(err),
        Err(_) => return Exchange::NotAccepted("handshake timed out".to_owned()),
    };
    let head = format!(
        "POST {MUTATE} HTTP/1.1\r\nHost: {SERVER_NAME}:443\r\n\
         Content-Type: application/json\r\nAccept: application/json, */*\r\n\
         Content-Length: {}\r\n\r\n",
        body.len()
    );
    let write = async {
        tls.write_all(head.as_bytes()).await?;
        tls.write_all(body).await?;
        tls.flush().await
    };
    match timeout(IO_TIMEOUT, write).await {
        Ok(Ok(())) => {}
        Ok(Err(err)) => return Exchange::NotSent(err.to_string()),
        Err(_) => return Exchange::NotSent("write timed out".to_owned()),
    }
    let read = async {
        let mut received = Vec::new();
        let mut chunk = [0u8; 8192];
        loop {
            if let Some(end) = received.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&received[..end]).into_owned();
                let status: u16 = head
                    .split_whitespace()
                    .nth(1)
                    .and_then(|s| s.parse().ok())
                    .ok_or_else(|| format!("bad status line: {head}"))?;
                let length: usize = head
                    .lines()
                    .filter_map(|line| line.split_once(':'))
                    .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
                    .and_then(|(_, value)| value.trim().parse().ok())
                    .ok_or_else(|| format!("no Content-Length: {head}"))?;
                let start = end + 4;
                if received.len() >= start + length {
                    return Ok((status, received[start..start + length].to_vec()));
                }
            }
            let n = tls
                .read(&mut chunk)
                .await
                .map_err(|e| format!("read after {} response bytes: {e}", received.len()))?;
            if n == 0 {
                return Err(format!(
                    "connection closed after {} response bytes",
                    received.len()
                ));
            }
            received.extend_from_slice(&chunk[..n]);
        }
    };
    Exchange::Sent(
        timeout(IO_TIMEOUT, read)
            .await
            .unwrap_or_else(|_| Err("no response in time".to_owned())),
    )
}

#[derive(Default)]
struct Tally {
    /// Complete 200 answers.
    ok: AtomicUsize,
    /// Complete 200 answers to requests started after SIGTERM.
    ok_after_term: AtomicUsize,
    /// Connections refused or requests not fully written after SIGTERM
    /// (acceptable: the server had stopped taking them).
    not_taken_after_term: AtomicUsize,
    /// Fully written requests without a complete 200 answer, and any
    /// failure before SIGTERM.
    failures: Mutex<Vec<String>>,
}

#[tokio::test(flavor = "multi_thread")]
async fn sigterm_finishes_requests_in_flight_and_exits_0() {
    const CLIENTS: usize = 16;
    let mut server = Server::start(Options::default(), None).await;
    let tally = Arc::new(Tally::default());
    let term_sent = Arc::new(AtomicBool::new(false));
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for _ in 0..CLIENTS {
        let addr = server.admission;
        let config = server.client_config();
        let tally = Arc::clone(&tally);
        let term_sent = Arc::clone(&term_sent);
        let stop = Arc::clone(&stop);
        let pod = fixture("11");
        clients.push(tokio::spawn(async move {
            while !stop.load(Ordering::Relaxed) {
                let after_term = term_sent.load(Ordering::SeqCst);
                let uid = next_uid();
                let body = body_of(&review(&pod, &uid, false));
                // One request per connection, as a fresh client would.
                let exchange = exchange_once(addr, Arc::clone(&config), &body).await;
                let fail = |message: String| {
                    tally
                        .failures
                        .lock()
                        .expect("lock")
                        .push(format!("{uid}: {message}"));
                };
                match exchange {
                    Exchange::NotAccepted(_) | Exchange::NotSent(_)
                        if term_sent.load(Ordering::SeqCst) =>
                    {
                        tally.not_taken_after_term.fetch_add(1, Ordering::Relaxed);
                        break;
                    }
                    Exchange::NotAccepted(err) | Exchange::NotSent(err) => {
                        fail(format!("before SIGTERM: {err}"));
                        break;
                    }
                    Exchange::Sent(Ok((200, answer))) => {
                        let review: Value = serde_json::from_slice(&answer).unwrap_or_default();
                        if review["response"]["uid"] == uid.as_str()
                            && review["response"]["allowed"] == true
                        {
                            tally.ok.fetch_add(1, Ordering::Relaxed);
                            if after_term {
                                tally.ok_after_term.fetch_add(1, Ordering::Relaxed);
                            }
                        } else {
                            fail(format!("unexpected answer: {review}"));
                        }
                    }
                    Exchange::Sent(Ok((status, answer))) => fail(format!(
                        "status {status}: {}",
                        String::from_utf8_lossy(&answer)
                    )),
                    Exchange::Sent(Err(err)) => fail(format!("fully written, then {err}")),
                }
            }
        }));
    }

    // Load is on: the clients have had answers.
    let deadline = Instant::now() + Duration::from_secs(20);
    while tally.ok.load(Ordering::Relaxed) < 4 * CLIENTS {
        assert!(
            Instant::now() < deadline,
            "the clients got no answers; failures: {:?}",
            tally.failures.lock().expect("lock")
        );
        sleep(Duration::from_millis(20)).await;
    }
    term_sent.store(true, Ordering::SeqCst);
    server.terminate();
    let status = server.wait_exit(Duration::from_secs(20)).await;
    stop.store(true, Ordering::Relaxed);
    for client in clients {
        timeout(Duration::from_secs(20), client)
            .await
            .expect("clients finish")
            .expect("client task");
    }

    let log = server.log();
    assert_eq!(status.code(), Some(0), "exit status {status}; log:\n{log}");
    assert!(
        log.contains("shutting down: no new connections"),
        "log:\n{log}"
    );
    assert!(log.contains("gpu-policy stopped"), "log:\n{log}");
    assert!(
        !log.contains("connections still open after the drain timeout"),
        "the drain completed: {log}"
    );
    let failures = tally.failures.lock().expect("lock");
    assert!(
        failures.is_empty(),
        "{} fully written request(s) got no complete 200 answer \
         ({} ok, {} of them started after SIGTERM, {} not taken after SIGTERM):\n{}\n\
         server log from SIGTERM on:\n{}",
        failures.len(),
        tally.ok.load(Ordering::Relaxed),
        tally.ok_after_term.load(Ordering::Relaxed),
        tally.not_taken_after_term.load(Ordering::Relaxed),
        failures.join("\n"),
        log.find("shutting down").map_or("", |at| &log[at..]),
    );
}

/// A kept-alive connection that is idle when SIGTERM comes still gets an
/// answer to the next request (the API server writes on an idle connection
/// whenever it likes and does not resend a POST it wrote); the connection
/// closes after that answer.
#[tokio::test(flavor = "multi_thread")]
async fn sigterm_answers_the_next_request_of_an_idle_connection() {
    let mut server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let pod = fixture("11");
    let first = connection.admit(MUTATE, &pod).await;
    assert_eq!(first["allowed"], true, "{first}");
    server.terminate();
    // Long enough for the server to have begun shutting down (its log says
    // so), well inside its grace period for idle connections.
    server
        .wait_for_log("shutting down", Duration::from_secs(5))
        .await;
    sleep(Duration::from_millis(200)).await;
    let second = connection.admit(MUTATE, &pod).await;
    assert_eq!(second["allowed"], true, "{second}");
    let after = connection
        .post(MUTATE, body_of(&review(&pod, &next_uid(), false)))
        .await;
    assert!(after.is_err(), "the connection stayed open after shutdown");
    let status = server.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "exit status {status}");
}

// ---------------------------------------------------------------------------
// 7. The generated certificate survives a restart.

#[tokio::test(flavor = "multi_thread")]
async fn generated_certificate_is_reused_on_restart() {
    let certs = tempfile::tempdir().expect("tempdir");
    let options = || Options {
        certs_dir: Some(certs.path().to_path_buf()),
        ..Options::default()
    };
    let mut first = Server::start(options(), None).await;
    let ca = std::fs::read(certs.path().join("ca.crt")).expect("ca.crt");
    let cert = std::fs::read(certs.path().join("tls.crt")).expect("tls.crt");
    let key = std::fs::read(certs.path().join("tls.key")).expect("tls.key");
    let served_first = first.connect().await.peer_certificate;
    first.terminate();
    let status = first.wait_exit(Duration::from_secs(20)).await;
    assert_eq!(status.code(), Some(0), "log:\n{}", first.log());
    drop(first);

    // The second server is trusted with the CA bytes of the first run.
    let second = Server::start(options(), Some(ca.clone())).await;
    assert_eq!(
        std::fs::read(certs.path().join("ca.crt")).expect("ca.crt"),
        ca,
        "ca.crt unchanged"
    );
    assert_eq!(
        std::fs::read(certs.path().join("tls.crt")).expect("tls.crt"),
        cert
    );
    assert_eq!(
        std::fs::read(certs.path().join("tls.key")).expect("tls.key"),
        key
    );
    let mut connection = second.connect().await;
    assert_eq!(connection.peer_certificate, served_first);
    let response = connection.admit(MUTATE, &fixture("11")).await;
    assert_eq!(response["allowed"], true);
    assert!(
        second.log().contains(r#""reused":true"#),
        "{}",
        second.log()
    );
}

// ---------------------------------------------------------------------------
// 8. Metrics.

/// The value of the sample line whose name and labels are `series`.
fn sample(metrics: &str, series: &str) -> Option<f64> {
    metrics.lines().find_map(|line| {
        let (name, value) = line.rsplit_once(' ')?;
        (name == series).then(|| value.parse().ok())?
    })
}

/// Audit mode changes nothing and warns nobody: its record is the audit
/// annotations, the metrics and one JSON log line per decision, written by
/// the log thread and all there once the request is answered and the log
/// drained.
#[tokio::test(flavor = "multi_thread")]
async fn every_decision_is_one_json_log_line() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let exporter = fixture("04");
    let violating = pod_of_workload(&exporter).expect("a template");
    let uid = next_uid();
    let reply = connection
        .post(AUDIT, body_of(&review(&violating, &uid, true)))
        .await
        .expect("answer");
    reply.admission(&uid);
    server.wait_for_log(&uid, Duration::from_secs(5)).await;
    let log = server.log();
    let lines: Vec<Value> = log
        .lines()
        .filter(|line| line.contains(&uid))
        .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
        .collect();
    assert_eq!(lines.len(), 1, "{log}");
    let line = &lines[0];
    assert_eq!(line["message"], "admission decision", "{line}");
    assert_eq!(line["level"], "INFO", "{line}");
    assert_eq!(line["kind"], "Pod", "{line}");
    assert_eq!(line["namespace"], namespace_of(&violating), "{line}");
    assert_eq!(line["operation"], "CREATE", "{line}");
    assert_eq!(line["endpoint"], "/validate/audit", "{line}");
    assert_eq!(line["dry_run"], true, "{line}");
    assert_eq!(line["decision"], "allowed", "{line}");
    let name = line["name"].as_str().unwrap_or_default();
    assert!(
        !name.is_empty(),
        "a pod of a controller is named by generateName: {line}"
    );
    let rules: Vec<&str> = line["rules"]
        .as_str()
        .unwrap_or_default()
        .split(',')
        .collect();
    assert!(rules.contains(&"visible-devices"), "{line}");
    assert!(rules.contains(&"runtime-class"), "{line}");
    assert!(line["duration_us"].is_u64(), "{line}");
}

#[tokio::test(flavor = "multi_thread")]
async fn metrics_count_decisions_and_show_certificate_expiry() {
    let server = Server::start(Options::default(), None).await;
    let mut connection = server.connect().await;
    let pod = fixture("11");
    let exporter = fixture("04");
    for _ in 0..2 {
        connection.admit(MUTATE, &pod).await;
    }
    connection.admit(ENFORCE, &exporter).await;
    connection.admit(WARN, &exporter).await;
    let bad = connection
        .post(ENFORCE, b"not json".to_vec())
        .await
        .expect("answer");
    assert_eq!(bad.status, 400);

    let metrics = server.metrics().await;
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/mutate",kind="Pod",operation="CREATE",decision="mutated"}"#
        ),
        Some(2.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/validate/enforce",kind="DaemonSet",operation="CREATE",decision="denied"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/validate/warn",kind="DaemonSet",operation="CREATE",decision="warned"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_admission_requests_total{endpoint="/validate/enforce",kind="",operation="",decision="bad_request"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    let expiry = sample(&metrics, "gpu_policy_certificate_expiry_timestamp_seconds")
        .unwrap_or_else(|| panic!("no certificate expiry gauge:\n{metrics}"));
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock")
        .as_secs_f64();
    // The generated serving certificate is valid for 365 days.
    let days = (expiry - now) / 86_400.0;
    assert!((364.0..=366.0).contains(&days), "expires in {days} days");
    assert_eq!(
        sample(
            &metrics,
            r#"gpu_policy_reload_success{source="certificate"}"#
        ),
        Some(1.0),
        "{metrics}"
    );
    assert!(metrics.trim_end().ends_with("# EOF"), "OpenMetrics text");
}

// ---------------------------------------------------------------------------
// 9. Config reload.

#[tokio::test(flavor = "multi_thread")]
async fn config_is_reloaded_and_a_bad_one_is_refused() {
    let dir = tempfile::tempdir().expect("tempdir");
    let config = dir.path().join("config.yaml");
    write_atomically(&config, b"maxPerContainer: 8\n");
    let server = Server::start(
        Options {
            config: Some(config.clone()),
            ..Options::default()
        },
        None,
    )
    .await;
    let mut connection = server.connect().await;

    // The pod as the validating webhook sees it: after /mutate.
    let pod = connection.mutated(&pod_with_gpus(4)).await;
    let allowed = connection.admit(ENFORCE, &pod).await;
    assert_eq!(allowed["allowed"], true, "4 <= 8: {allowed}");

    write_atomically(&config, b"maxPerContainer: 2\n");
    let deadline = Instant::now() + Duration::from_secs(10);
    let denied = loop {
        let response = connection.admit(ENFORCE, &pod).await;
        if response["allowed"] == false {
            break response;
        }
        assert!(
            Instant::now() < deadline,
            "the new config was not applied within 10 s; log:\n{}",
            server.log()
        );
        sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(denied["status"]["code"], 403, "{denied}");
    let message = denied["status"]["message"]
        .as_str()
        .expect("a message")
        .to_owned();
    assert!(
        message.starts_with("gpu-policy: ") && message.contains("train"),
        "names the container: {message}"
    );
    server
        .wait_for_metric_line(r#"gpu_policy_reload_success{source="config"} 1"#)
        .await;

    // An invalid config is refused; the last good one (2) stays in force.
    write_atomically(&config, b"maxPerContainer: lots\n");
    server
        .wait_for_metric_line(r#"gpu_policy_reload_success{source="config"} 0"#)
        .await;
    let still = connection.admit(ENFORCE, &pod).await;
    assert_eq!(still["allowed"], false, "{still}");
    assert_eq!(still["status"]["message"], message.as_str());
    let two = connection.mutated(&pod_with_gpus(2)).await;
    let two = connection.admit(ENFORCE, &two).await;
    assert_eq!(two["allowed"], true, "2 <= 2 is allowed: {two}");
    assert!(server.log().contains("new config refused"));
    // Still ready and serving.
    let ready = server.operations_get("/readyz").await.expect("readyz");
    assert_eq!(ready.status, 200);
}

/// `serve --kubeconfig` against the fake API server: namespace annotations,
/// RuntimeClass scheduling, forged owners and the opt-in warning come from
/// the cluster.
#[tokio::test(flavor = "multi_thread")]
async fn cluster_mode_uses_what_the_cluster_knows() {
    let api = FakeApi::start().await;
    api.insert(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE,
        "annotations": {"gpu-policy.io/max-gpus-per-pod": "1"}}}),
    );
    api.insert(
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "kube-system"}}),
    );
    api.insert(
        json!({"apiVersion": "v1", "kind": "Node", "metadata": {"name": "t4",
        "labels": {"nvidia.com/gpu.compute.major": "7", "nvidia.com/gpu.compute.minor": "5"}},
        "status": {"allocatable": {"nvidia.com/gpu": "4"}}}),
    );
    api.insert(
        json!({"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass",
        "metadata": {"name": "nvidia"}, "handler": "nvidia",
        "overhead": {"podFixed": {"cpu": "100m"}},
        "scheduling": {"nodeSelector": {"nvidia.com/gpu.present": "true"}}}),
    );
    api.insert(json!({"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {
        "name": "nvidia-gpu-exporter", "namespace": "kube-system", "uid": "real-uid"},
        "spec": {"selector": {"matchLabels": {"a": "b"}}, "template": {"metadata": {"labels": {"a": "b"}},
            "spec": {"containers": [{"name": "e", "image": "x"}]}}}}));
    api.insert(json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "half-card", "namespace": "lab"},
        "spec": {"containers": [{"name": "c", "image": "x",
            "resources": {"limits": {"nvidia.com/gpu": "500m"}}}]}}));
    let scratch = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(scratch.path());
    let server = Server::start(
        Options {
            kubeconfig: Some(kubeconfig),
            ..Options::default()
        },
        None,
    )
    .await;
    let mut connection = server.connect().await;

    // The namespace annotation lowers the pod maximum to 1.
    let mut two = pod_with_gpus(2);
    two["metadata"]["namespace"] = json!(NAMESPACE);
    let denied = connection.admit(ENFORCE, &two).await;
    assert_eq!(denied["allowed"], false, "{denied}");
    let message = denied["status"]["message"].as_str().unwrap_or("");
    assert!(message.contains("maximum of 1 per pod"), "{message}");

    // The injected RuntimeClass brings its overhead and node selector.
    let mut one = pod_with_gpus(1);
    one["metadata"]["namespace"] = json!(NAMESPACE);
    let after = connection.mutated(&one).await;
    assert_eq!(after["spec"]["runtimeClassName"], "nvidia");
    assert_eq!(after["spec"]["overhead"], json!({"cpu": "100m"}));
    assert_eq!(
        after["spec"]["nodeSelector"],
        json!({"nvidia.com/gpu.present": "true"})
    );

    // A forged owner reference to the exporter gets no exemption.
    let forged = json!({"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "forged",
        "namespace": "kube-system", "ownerReferences": [{"apiVersion": "apps/v1", "kind": "DaemonSet",
        "name": "nvidia-gpu-exporter", "uid": "forged-uid", "controller": true}]},
        "spec": {"containers": [{"name": "c", "image": "x",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]}]}});
    let response = connection.admit(MUTATE, &forged).await;
    assert!(patch_of(&response).is_some(), "{response}");
    let warned = connection
        .admit("/validate/warn?timeout=10s", &forged)
        .await;
    let warnings = warned["warnings"].to_string();
    assert!(warnings.contains("no exemption"), "{warnings}");

    // Opting a namespace in warns about the pods already running there.
    let uid = next_uid();
    let old = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab"}});
    let new = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "lab",
        "labels": {"gpu-policy.io/mode": "enforce"}}});
    let mut body = review(&new, &uid, true);
    body["request"]["operation"] = json!("UPDATE");
    body["request"]["name"] = json!("lab");
    body["request"]["oldObject"] = old;
    let reply = connection
        .post("/validate/namespace?timeout=10s", body_of(&body))
        .await
        .unwrap_or_else(|err| panic!("{err}"));
    let response = reply.admission(&uid);
    assert_eq!(response["allowed"], true, "{response}");
    let warnings = response["warnings"].to_string();
    assert!(warnings.contains("half-card"), "{warnings}");

    let metrics = server.metrics().await;
    for resource in [
        "namespaces",
        "nodes",
        "runtimeclasses",
        "allowlisted-workloads",
    ] {
        let line = format!("gpu_policy_cluster_cache_stale{{resource=\"{resource}\"}} 0");
        assert!(metrics.contains(&line), "{line} missing:\n{metrics}");
    }
}
