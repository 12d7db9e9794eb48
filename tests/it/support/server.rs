//! The server harness of the end-to-end tests: the built binary as a
//! child process on free loopback ports with its own directories, killed by
//! a drop guard (a failing test leaves no process behind), its JSON log in a
//! file the tests read; and the API server's side of the wire: HTTP/1.1
//! over TLS verified against the server's CA ([`super::tls`]), AdmissionReview
//! v1 bodies POSTed as `application/json`.

use std::net::{IpAddr, SocketAddr, TcpListener as StdTcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as BASE64;
use http_body_util::{BodyExt as _, Full};
use hyper::body::Bytes;
use hyper::client::conn::http1::SendRequest;
use hyper::header::{CONTENT_TYPE, HOST};
use hyper::{Method, Request};
use hyper_util::rt::TokioIo;
use rustls::ClientConfig;
use rustls::pki_types::ServerName;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio::net::{TcpSocket, TcpStream};
use tokio::time::{Instant, sleep, timeout};
use tokio_rustls::TlsConnector;
use tokio_rustls::client::TlsStream;

use super::fixtures::fixture;
use super::review::Review;
use super::tls::{SERVER_NAME, client_config};
use super::workloads::pod_of_workload;

/// How long a server may take to become ready.
pub const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// A bound on every single network operation, so no test hangs.
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);
/// Short pause between polls.
pub const POLL: Duration = Duration::from_millis(50);
/// Between polls of `/readyz` while a server starts.
pub const READY_POLL: Duration = Duration::from_millis(10);
/// The namespace of objects whose manifest names none.
pub const NAMESPACE: &str = "ml";
pub const MUTATE: &str = "/mutate?timeout=10s";
pub const ENFORCE: &str = "/validate/enforce?timeout=10s";
pub const WARN: &str = "/validate/warn?timeout=10s";
pub const AUDIT: &str = "/validate/audit?timeout=10s";

// ---------------------------------------------------------------------------
// AdmissionReview bodies.

/// A pod as the workload's controller creates it, in the test namespace
/// when the workload names none.
pub fn template_pod(workload: &Value) -> Option<Value> {
    let mut pod = pod_of_workload(workload, "e2e01", "5f0c8a52-2f5e-4b8e-9d59-1d1b0c3c0001")?;
    pod["metadata"]["namespace"] = json!(namespace_of(workload));
    Some(pod)
}

pub fn namespace_of(object: &Value) -> String {
    object.pointer("/metadata/namespace").and_then(Value::as_str).unwrap_or(NAMESPACE).to_owned()
}

/// The fixture pod 11 with `gpus` cards in its only container's limits.
pub fn pod_with_gpus(gpus: u64) -> Value {
    let mut pod = fixture("11");
    pod["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/gpu"] = json!(gpus);
    pod
}

/// A fresh request uid, unique within this test process.
pub fn next_uid() -> String {
    static COUNTER: AtomicU64 = AtomicU64::new(1);
    let n = COUNTER.fetch_add(1, Ordering::Relaxed);
    format!("{:08x}-e2e0-4000-8000-{n:012x}", std::process::id())
}

/// A CREATE AdmissionReview v1 of `object`, as the API server sends it,
/// in the object's namespace (else [`NAMESPACE`]).
pub fn review(object: &Value, uid: &str, dry_run: bool) -> Value {
    Review::create(object, &namespace_of(object))
        .uid(uid)
        .user("e2e@example.com", &["system:authenticated"])
        .dry_run(dry_run)
        .json()
}

/// The UPDATE AdmissionReview v1 that opts namespace `name` in (labels it
/// `gpu-policy.io/mode: <mode>`), as the API server sends it.
pub fn opt_in_review(name: &str, mode: &str, uid: &str) -> Value {
    let old = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}});
    let new = json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name,
        "labels": {"gpu-policy.io/mode": mode}}});
    let mut body = review(&new, uid, true);
    body["request"]["operation"] = json!("UPDATE");
    body["request"]["name"] = json!(name);
    body["request"]["oldObject"] = old;
    body
}

pub fn body_of(review: &Value) -> Vec<u8> {
    serde_json::to_vec(review).expect("a review serialises")
}

// ---------------------------------------------------------------------------
// HTTP over TLS (admission) and plain HTTP (operations).

/// One HTTP answer, body read to its end.
#[derive(Debug)]
pub struct Reply {
    pub status: u16,
    pub content_type: Option<String>,
    pub body: Bytes,
}

impl Reply {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    /// The `response` of a 200 AdmissionReview for request `uid`.
    pub fn admission(&self, uid: &str) -> Value {
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
pub struct Connection {
    pub sender: SendRequest<Full<Bytes>>,
    /// The leaf certificate the server presented (empty over plain HTTP).
    pub peer_certificate: Vec<u8>,
}

/// TCP to `addr`, then a TLS handshake with SNI [`SERVER_NAME`], bounded
/// by [`IO_TIMEOUT`].
pub async fn handshake(
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> Result<TlsStream<TcpStream>, String> {
    handshake_from(None, addr, config).await
}

/// [`handshake`] from the local address `source` when given (a loopback
/// address other than 127.0.0.1 is another peer to the server's per-peer
/// budget), else from any.
pub async fn handshake_from(
    source: Option<IpAddr>,
    addr: SocketAddr,
    config: Arc<ClientConfig>,
) -> Result<TlsStream<TcpStream>, String> {
    let handshake = async {
        let tcp = match source {
            None => TcpStream::connect(addr).await,
            Some(source) => {
                let socket = match source {
                    IpAddr::V4(_) => TcpSocket::new_v4(),
                    IpAddr::V6(_) => TcpSocket::new_v6(),
                }
                .map_err(|e| format!("socket: {e}"))?;
                socket
                    .bind(SocketAddr::new(source, 0))
                    .map_err(|e| format!("bind {source}: {e}"))?;
                socket.connect(addr).await
            }
        }
        .map_err(|e| format!("connect: {e}"))?;
        let name = ServerName::try_from(SERVER_NAME).expect("valid DNS name");
        TlsConnector::from(config)
            .connect(name, tcp)
            .await
            .map_err(|e| format!("TLS handshake: {e}"))
    };
    timeout(IO_TIMEOUT, handshake).await.map_err(|_| "TLS handshake timed out".to_owned())?
}

impl Connection {
    /// TCP to `addr`, TLS with SNI [`SERVER_NAME`], then HTTP/1.1.
    pub async fn tls(addr: SocketAddr, config: Arc<ClientConfig>) -> Result<Self, String> {
        Self::tls_from(None, addr, config).await
    }

    /// [`Connection::tls`] from the local address `source` when given: a
    /// loopback address other than 127.0.0.1 is another caller to the
    /// server's per-caller budgets and limits.
    pub async fn tls_from(
        source: Option<IpAddr>,
        addr: SocketAddr,
        config: Arc<ClientConfig>,
    ) -> Result<Self, String> {
        let tls = handshake_from(source, addr, config).await?;
        let (_, session) = tls.get_ref();
        if session.alpn_protocol() != Some(b"http/1.1") {
            return Err(format!("ALPN: expected http/1.1, got {:?}", session.alpn_protocol()));
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

    pub async fn plain(addr: SocketAddr) -> Result<Self, String> {
        let tcp = timeout(IO_TIMEOUT, TcpStream::connect(addr))
            .await
            .map_err(|_| "connect timed out".to_owned())?
            .map_err(|e| format!("connect: {e}"))?;
        Self::http(TokioIo::new(tcp)).await
    }

    pub async fn http<T>(io: T) -> Result<Self, String>
    where
        T: hyper::rt::Read + hyper::rt::Write + Unpin + Send + 'static,
    {
        let (sender, driver) = hyper::client::conn::http1::handshake(io)
            .await
            .map_err(|e| format!("HTTP handshake: {e}"))?;
        tokio::spawn(async move {
            let _ = driver.await;
        });
        Ok(Self { sender, peer_certificate: Vec::new() })
    }

    pub async fn send(
        &mut self,
        method: Method,
        path: &str,
        content_type: Option<&str>,
        body: Vec<u8>,
    ) -> Result<Reply, String> {
        let exchange = async {
            self.sender.ready().await.map_err(|e| format!("connection not ready: {e}"))?;
            let mut request = Request::builder()
                .method(method)
                .uri(path)
                .header(HOST, format!("{SERVER_NAME}:443"));
            if let Some(content_type) = content_type {
                request = request.header(CONTENT_TYPE, content_type);
            }
            let request = request.body(Full::new(Bytes::from(body))).expect("a valid request");
            let response =
                self.sender.send_request(request).await.map_err(|e| format!("request: {e}"))?;
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
            Ok(Reply { status, content_type, body })
        };
        timeout(IO_TIMEOUT, exchange)
            .await
            .map_err(|_| format!("{path}: no answer within {IO_TIMEOUT:?}"))?
    }

    /// POSTs `body` as `application/json`.
    pub async fn post(&mut self, path: &str, body: Vec<u8>) -> Result<Reply, String> {
        self.send(Method::POST, path, Some("application/json"), body).await
    }

    /// POSTs a review of `object` with a fresh uid; the 200 response.
    pub async fn admit(&mut self, path: &str, object: &Value) -> Value {
        let uid = next_uid();
        let reply = self
            .post(path, body_of(&review(object, &uid, false)))
            .await
            .unwrap_or_else(|err| panic!("{path}: {err}"));
        reply.admission(&uid)
    }

    /// `pod` after `/mutate` (unchanged when no patch comes back).
    pub async fn mutated(&mut self, pod: &Value) -> Value {
        let response = self.admit(MUTATE, pod).await;
        assert_eq!(response["allowed"], true, "{response}");
        match patch_of(&response) {
            Some(patch) => patched(pod, &patch),
            None => pod.clone(),
        }
    }

    pub async fn get(&mut self, path: &str) -> Result<Reply, String> {
        self.send(Method::GET, path, None, Vec::new()).await
    }
}

/// The JSON Patch of an admission response, checked to be base64 JSON
/// Patch; `None` when the response carries none.
pub fn patch_of(response: &Value) -> Option<json_patch::Patch> {
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
                panic!("patch is not a JSON Patch ({err}): {}", String::from_utf8_lossy(&bytes))
            });
            Some(patch)
        }
        Some(other) => panic!("patch is neither absent nor a string: {other}"),
    }
}

/// `object` with `patch` applied; the patch must apply.
pub fn patched(object: &Value, patch: &json_patch::Patch) -> Value {
    let mut result = object.clone();
    json_patch::patch(&mut result, patch)
        .unwrap_or_else(|err| panic!("the patch does not apply ({err}): {patch:?}"));
    result
}

/// One review of a GPU pod to `/mutate` on a fresh connection: the
/// admission response, or why there is none (a refused client certificate
/// fails the handshake, or, in TLS 1.3, the first read after it).
pub async fn admit_as(server: &Server, config: Arc<ClientConfig>) -> Result<Value, String> {
    let mut connection = Connection::tls(server.admission, config).await?;
    let uid = next_uid();
    let reply = connection.post(MUTATE, body_of(&review(&pod_with_gpus(1), &uid, false))).await?;
    Ok(reply.admission(&uid))
}

// ---------------------------------------------------------------------------
// The server process.

pub fn free_port() -> u16 {
    StdTcpListener::bind("127.0.0.1:0")
        .and_then(|listener| listener.local_addr())
        .expect("a free loopback port")
        .port()
}

#[derive(Debug, Default)]
pub struct Options {
    /// `--certs-dir`; a fresh temporary directory when `None`.
    pub certs_dir: Option<PathBuf>,
    /// `--tls-cert` and `--tls-key`.
    pub tls: Option<(PathBuf, PathBuf)>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// `--kubeconfig`; `--no-cluster` when `None`.
    pub kubeconfig: Option<PathBuf>,
    /// `--client-ca` and a `--client-name` for each name.
    pub client_auth: Option<(PathBuf, Vec<String>)>,
    /// The CPUs the process may run on (`taskset -c` syntax).
    pub cpus: Option<String>,
    /// How long it may take to become ready; [`READY_TIMEOUT`] when `None`.
    pub ready_timeout: Option<Duration>,
    /// The admission port (`--listen 127.0.0.1:PORT`), for a caller that
    /// named it elsewhere already (a webhook URL); a free one when `None`.
    pub admission_port: Option<u16>,
    /// More flags of `serve`, after the others.
    pub extra_args: Vec<String>,
    /// Runs the release binary named by [`RELEASE_BINARY_VAR`] when it is
    /// set (`.ci/run` sets it to the release profile's build: the image's, without its
    /// profile-guided layout), else the test build: the attack suite judges what users run.
    pub release: bool,
}

/// The variable naming the release binary for [`Options::release`].
pub const RELEASE_BINARY_VAR: &str = "GPU_POLICY_RELEASE_BINARY";

/// A running `gpu-policy serve`, killed when dropped.
pub struct Server {
    pub child: Child,
    pub admission: SocketAddr,
    pub operations: SocketAddr,
    /// The CA the clients trust.
    pub ca_pem: Vec<u8>,
    pub log_path: PathBuf,
    pub certs_dir: PathBuf,
    /// From the spawn of the process to the first 200 of `/readyz` (to
    /// within one poll, 10 ms).
    pub ready_after: Duration,
    ready_timeout: Duration,
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
    /// The binary reading the cluster that `api` serves, through a
    /// kubeconfig written in the returned scratch directory (keep it alive).
    pub async fn start_in_cluster(
        api: &crate::support::fake_api::FakeApi,
    ) -> (Server, tempfile::TempDir) {
        Self::start_in_cluster_with(api, Options::default()).await
    }

    /// [`Server::start_in_cluster`] with more options (`kubeconfig` is
    /// replaced).
    pub async fn start_in_cluster_with(
        api: &crate::support::fake_api::FakeApi,
        options: Options,
    ) -> (Server, tempfile::TempDir) {
        let scratch = tempfile::tempdir().expect("tempdir");
        let kubeconfig = api.write_kubeconfig(scratch.path());
        let options = Options { kubeconfig: Some(kubeconfig), ..options };
        (Server::start(options, None).await, scratch)
    }

    /// [`Server::start`] of the release binary ([`Options::release`]) with
    /// the other options at their defaults: the attack suite's server.
    #[allow(dead_code)]
    pub async fn start_release() -> Server {
        let options = Options { release: true, ..Default::default() };
        Self::start(options, None).await
    }

    /// POSTs each `(uid, body)` to `path` on a connection of its own, all
    /// connections open and every body built before the first byte is
    /// sent, so that the reviews reach the server together; the replies in
    /// the order of `requests`. The connections come from the loopback
    /// addresses of `from` in turn (none: from any), each of which is a
    /// caller with its own share of the server's budget. A request that
    /// got no reply panics with its uid and the server's log.
    pub async fn post_together(
        &self,
        path: &'static str,
        requests: Vec<(String, Vec<u8>)>,
        from: &[IpAddr],
    ) -> Vec<(String, Reply)> {
        let mut connections: Vec<Connection> = Vec::with_capacity(requests.len());
        for at in 0..requests.len() {
            let source = from.get(at.checked_rem(from.len()).unwrap_or(0)).copied();
            let connection = Connection::tls_from(source, self.admission, self.client_config())
                .await
                .unwrap_or_else(|err| panic!("{err}; log:\n{}", self.log()));
            connections.push(connection);
        }
        let exchanges: Vec<_> = connections
            .into_iter()
            .zip(requests)
            .map(|(mut connection, (uid, body))| {
                tokio::spawn(async move { (uid, connection.post(path, body).await) })
            })
            .collect();
        let mut replies = Vec::with_capacity(exchanges.len());
        for exchange in exchanges {
            let (uid, reply) = exchange.await.expect("the exchange's task completes");
            let reply = reply.unwrap_or_else(|err| panic!("{uid}: {err}; log:\n{}", self.log()));
            replies.push((uid, reply));
        }
        replies
    }

    /// Starts the binary on free ports and waits for `/readyz`. Retries with
    /// other ports when one was taken in between. `ca_pem` is the CA the
    /// clients trust; `None` reads the generated `ca.crt`.
    pub async fn start(options: Options, ca_pem: Option<Vec<u8>>) -> Server {
        let mut last_log = String::new();
        for _attempt in 0..5 {
            let scratch = tempfile::tempdir().expect("tempdir");
            let certs_dir =
                options.certs_dir.clone().unwrap_or_else(|| scratch.path().join("certs"));
            let admission_port = options.admission_port.unwrap_or_else(free_port);
            let admission = SocketAddr::from(([127, 0, 0, 1], admission_port));
            let mut operations = SocketAddr::from(([127, 0, 0, 1], free_port()));
            while operations.port() == admission.port() {
                operations.set_port(free_port());
            }
            let log_path = scratch.path().join("server.log");
            let log = std::fs::File::create(&log_path).expect("log file");
            let release = options.release.then(|| std::env::var(RELEASE_BINARY_VAR).ok()).flatten();
            let binary = release.as_deref().unwrap_or(env!("CARGO_BIN_EXE_gpu-policy"));
            // taskset execs the binary: the child's pid is the server's.
            let mut command = match &options.cpus {
                Some(cpus) => {
                    let mut taskset = Command::new("taskset");
                    taskset.args(["-c", cpus, binary]);
                    taskset
                }
                None => Command::new(binary),
            };
            command
                .arg("serve")
                .args(["--listen", &admission.to_string()])
                .args(["--metrics-listen", &operations.to_string()])
                .arg("--certs-dir")
                .arg(&certs_dir)
                .args(["--log-format", "json", "--reload-interval", "1"]);
            if let Some((cert, key)) = &options.tls {
                command.arg("--tls-cert").arg(cert).arg("--tls-key").arg(key);
            }
            if let Some(config) = &options.config {
                command.arg("--config").arg(config);
            }
            if let Some((ca, names)) = &options.client_auth {
                command.arg("--client-ca").arg(ca);
                for name in names {
                    command.args(["--client-name", name]);
                }
            }
            match &options.kubeconfig {
                Some(kubeconfig) => command.arg("--kubeconfig").arg(kubeconfig),
                None => command.arg("--no-cluster"),
            };
            command.args(&options.extra_args);
            let spawned = Instant::now();
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
                ready_after: Duration::ZERO,
                ready_timeout: options.ready_timeout.unwrap_or(READY_TIMEOUT),
                _scratch: scratch,
            };
            match server.wait_ready().await {
                Ok(()) => {
                    server.ready_after = spawned.elapsed();
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
    pub async fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + self.ready_timeout;
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
                "/readyz not 200 within {:?}; log:\n{}",
                self.ready_timeout,
                self.log()
            );
            sleep(READY_POLL).await;
        }
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log_path).unwrap_or_default()
    }

    pub fn client_config(&self) -> Arc<ClientConfig> {
        client_config(&self.ca_pem)
    }

    pub async fn connect(&self) -> Connection {
        Connection::tls(self.admission, self.client_config())
            .await
            .unwrap_or_else(|err| panic!("{err}; log:\n{}", self.log()))
    }

    /// [`Server::connect`] from the loopback address `source`: another
    /// caller to the server's per-caller budgets and limits. Used by the
    /// attack suite (tests/attack/), which shares this module.
    #[allow(dead_code)]
    pub async fn connect_from(&self, source: IpAddr) -> Connection {
        Connection::tls_from(Some(source), self.admission, self.client_config())
            .await
            .unwrap_or_else(|err| panic!("{err}; log:\n{}", self.log()))
    }

    pub async fn operations_get(&self, path: &str) -> Result<Reply, String> {
        Connection::plain(self.operations).await?.get(path).await
    }

    pub async fn metrics(&self) -> String {
        let reply =
            self.operations_get("/metrics").await.unwrap_or_else(|err| panic!("/metrics: {err}"));
        assert_eq!(reply.status, 200);
        reply.text()
    }

    /// Polls `/metrics` until it has a line equal to `line`.
    pub async fn wait_for_metric_line(&self, line: &str) {
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
    pub async fn wait_for_log(&self, text: &str, limit: Duration) {
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

    /// The log once at least `count` of its lines are `wanted` (the log is
    /// written by a thread of its own, a few milliseconds after the
    /// answers); panics with the log past `limit`.
    #[allow(dead_code)]
    pub async fn log_with_lines(
        &self,
        count: usize,
        limit: Duration,
        wanted: impl Fn(&str) -> bool,
    ) -> String {
        let deadline = Instant::now() + limit;
        loop {
            let log = self.log();
            let seen = log.lines().filter(|line| wanted(line)).count();
            if seen >= count {
                return log;
            }
            assert!(
                Instant::now() < deadline,
                "{seen} of {count} lines wanted in the log within {limit:?}:\n{log}"
            );
            sleep(Duration::from_millis(20)).await;
        }
    }

    /// The log lines of the admission request `uid`, parsed, once its
    /// decision line (the request's last) is written; bounded by
    /// [`IO_TIMEOUT`].
    pub async fn request_log(&self, uid: &str) -> Vec<Value> {
        let deadline = Instant::now() + IO_TIMEOUT;
        loop {
            let log = self.log();
            let lines: Vec<Value> = log
                .lines()
                .filter(|line| line.contains(uid))
                .map(|line| serde_json::from_str(line).unwrap_or_else(|e| panic!("{e}: {line}")))
                .collect();
            if lines.iter().any(|l| l["message"] == "admission decision") {
                return lines;
            }
            assert!(
                Instant::now() < deadline,
                "no decision line of {uid} within {IO_TIMEOUT:?}:\n{log}"
            );
            sleep(POLL).await;
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// A `kB` field of `/proc/<pid>/status` (`VmRSS`, `VmHWM`), in bytes.
    pub fn memory(&self, field: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.pid()))
            .unwrap_or_else(|err| panic!("/proc/{}/status: {err}", self.pid()));
        status
            .lines()
            .find_map(|line| line.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|value| value.trim().strip_suffix("kB")?.trim().parse::<u64>().ok())
            .map(|kib| kib * 1024)
            .unwrap_or_else(|| panic!("no {field} in /proc/{}/status", self.pid()))
    }

    pub fn terminate(&self) {
        let status = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status()
            .expect("kill runs");
        assert!(status.success(), "kill -TERM {} failed", self.pid());
    }

    /// Waits (bounded) for the process to exit.
    pub async fn wait_exit(&mut self, limit: Duration) -> ExitStatus {
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

pub fn write_atomically(path: &Path, bytes: &[u8]) {
    let name = path.file_name().and_then(|n| n.to_str()).expect("file name");
    let temporary = path.with_file_name(format!(".{name}.tmp"));
    std::fs::write(&temporary, bytes).expect("write temporary file");
    std::fs::rename(&temporary, path).expect("rename into place");
}

// ---------------------------------------------------------------------------
// One request by hand.

/// What became of one request sent by hand on a fresh connection.
#[derive(Debug)]
pub enum Exchange {
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
pub async fn exchange_once(addr: SocketAddr, config: Arc<ClientConfig>, body: &[u8]) -> Exchange {
    use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
    let mut tls = match handshake(addr, config).await {
        Ok(tls) => tls,
        Err(err) => return Exchange::NotAccepted(err),
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
                return Err(format!("connection closed after {} response bytes", received.len()));
            }
            received.extend_from_slice(&chunk[..n]);
        }
    };
    Exchange::Sent(
        timeout(IO_TIMEOUT, read).await.unwrap_or_else(|_| Err("no response in time".to_owned())),
    )
}
