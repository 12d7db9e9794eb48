//! An in-process OCI registry for tests of the image registry client.
//!
//! It speaks the distribution protocol over plain HTTP/1.1 on
//! `127.0.0.1:<random port>` (list [`FakeRegistry::host`] as an insecure
//! registry):
//!
//! * `GET /v2/`, `GET|HEAD /v2/<name>/manifests/<tag or digest>`,
//!   `GET /v2/<name>/blobs/<digest>`, with `Docker-Content-Digest` and the
//!   content type of what is stored; unknown names, tags and digests are
//!   404 with the registry's error JSON.
//! * Content is stored by its real sha256 digest: [`FakeRegistry::push_image`]
//!   (a config blob, one layer, an OCI image manifest, a tag) and
//!   [`FakeRegistry::push_index`] (one image per platform under an OCI
//!   image index).
//! * Authentication ([`Auth`]): none; a bearer token from `GET /token`
//!   after a `401` with `WWW-Authenticate: Bearer realm=...,service=...`,
//!   for anyone or only for basic credentials; or basic authentication.
//! * Faults, per repository: [`FakeRegistry::set_delay`] (the answer comes
//!   after it), [`FakeRegistry::set_status`] (every answer is that
//!   status) and [`FakeRegistry::set_fault`] (a hostile registry's
//!   answers, [`hostile::Fault`]: never answering, endless bodies,
//!   redirects, content that is not its digest, a token realm elsewhere),
//!   until [`FakeRegistry::clear_faults`]; [`hostile::Tarpit`] counts the
//!   connections made where none may be.
//!
//! Every request is recorded ([`FakeRegistry::requests`]).
//! [`registry_config`] is the configuration of a server that speaks to
//! fake registries.

#![allow(dead_code)]

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{HeaderMap, Method, StatusCode, header};
use axum::response::Response;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub mod hostile;
use hostile::Fault;

pub const OCI_MANIFEST: &str = "application/vnd.oci.image.manifest.v1+json";
pub const OCI_INDEX: &str = "application/vnd.oci.image.index.v1+json";
pub const OCI_CONFIG: &str = "application/vnd.oci.image.config.v1+json";
pub const OCI_LAYER: &str = "application/vnd.oci.image.layer.v1.tar+gzip";

/// How the registry authenticates clients.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Auth {
    None,
    /// Docker Hub's flow: 401 with a bearer challenge, a token from
    /// `/token` for anyone.
    AnonymousBearer,
    /// The bearer flow, the token only for these basic credentials.
    Bearer {
        user: String,
        password: String,
    },
    /// Basic authentication on every request.
    Basic {
        user: String,
        password: String,
    },
}

/// One request as the registry saw it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Recorded {
    pub method: Method,
    pub path: String,
    pub authorization: Option<String>,
}

#[derive(Default)]
struct Store {
    /// digest -> (content type, bytes); manifests and blobs alike.
    content: HashMap<String, (String, Vec<u8>)>,
    /// (repository, tag) -> digest.
    tags: HashMap<(String, String), String>,
    delays: HashMap<String, Duration>,
    statuses: HashMap<String, StatusCode>,
    faults: HashMap<String, Fault>,
    requests: Vec<Recorded>,
    tokens_issued: u64,
}

struct Shared {
    auth: Auth,
    addr: SocketAddr,
    store: Mutex<Store>,
    /// Bytes of endless bodies sent so far.
    streamed: Arc<AtomicU64>,
}

pub struct FakeRegistry {
    shared: Arc<Shared>,
    task: JoinHandle<()>,
}

impl Drop for FakeRegistry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn sha256(bytes: &[u8]) -> String {
    let hash = Sha256::digest(bytes);
    let hex: String = hash.iter().map(|byte| format!("{byte:02x}")).collect();
    format!("sha256:{hex}")
}

/// An image config (OCI image spec) with these envs and labels.
pub fn image_config(env: &[&str], labels: &[(&str, &str)]) -> Value {
    let labels: serde_json::Map<String, Value> =
        labels.iter().map(|(key, value)| ((*key).to_owned(), json!(value))).collect();
    json!({
        "architecture": "amd64",
        "os": "linux",
        "config": {"Env": env, "Labels": labels},
        "rootfs": {"type": "layers", "diff_ids": []},
    })
}

/// The configuration (YAML) of registry mode speaking plain HTTP to
/// `hosts` (fake registries), within `timeout` per admission, with `extra`
/// YAML lines of the `imageResolution` block.
pub fn registry_config(hosts: &[String], timeout: &str, extra: &str) -> String {
    let hosts: Vec<String> = hosts.iter().map(|h| format!("{h:?}")).collect();
    format!(
        "imageResolution:\n  mode: registry\n  timeout: {timeout}\n  registries: [{list}]\n  insecureRegistries: [{list}]\n{extra}",
        list = hosts.join(", ")
    )
}

impl FakeRegistry {
    pub async fn start(auth: Auth) -> FakeRegistry {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(err) => panic!("fake registry: bind: {err}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(err) => panic!("fake registry: local_addr: {err}"),
        };
        let shared = Arc::new(Shared {
            auth,
            addr,
            store: Mutex::new(Store::default()),
            streamed: Arc::new(AtomicU64::new(0)),
        });
        let app = Router::new().fallback(handle).with_state(Arc::clone(&shared));
        let task = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeRegistry { shared, task }
    }

    /// `127.0.0.1:<port>`: the registry part of image references.
    pub fn host(&self) -> String {
        self.shared.addr.to_string()
    }

    fn store(&self) -> std::sync::MutexGuard<'_, Store> {
        self.shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    fn put(&self, content_type: &str, bytes: Vec<u8>) -> (String, usize) {
        let digest = sha256(&bytes);
        let size = bytes.len();
        self.store().content.insert(digest.clone(), (content_type.to_owned(), bytes));
        (digest, size)
    }

    /// Stores an image manifest for `config` (and one layer); its digest.
    fn put_image(&self, config: &Value) -> (String, usize) {
        let (config_digest, config_size) = self.put(OCI_CONFIG, config.to_string().into_bytes());
        let (layer_digest, layer_size) =
            self.put(OCI_LAYER, format!("layer of {config_digest}").into_bytes());
        let manifest = json!({
            "schemaVersion": 2,
            "mediaType": OCI_MANIFEST,
            "config": {"mediaType": OCI_CONFIG, "digest": config_digest, "size": config_size},
            "layers": [{"mediaType": OCI_LAYER, "digest": layer_digest, "size": layer_size}],
        });
        self.put(OCI_MANIFEST, manifest.to_string().into_bytes())
    }

    fn tag(&self, repository: &str, tag: &str, digest: &str) {
        self.store().tags.insert((repository.to_owned(), tag.to_owned()), digest.to_owned());
    }

    /// Pushes a single-platform image; returns its manifest digest.
    pub fn push_image(&self, repository: &str, tag: &str, config: &Value) -> String {
        let (digest, _) = self.put_image(config);
        self.tag(repository, tag, &digest);
        digest
    }

    /// Pushes one image per `(os, architecture, config)` under an image
    /// index (plus an attestation entry of platform unknown/unknown, as
    /// buildx writes); returns the index digest.
    pub fn push_index(
        &self,
        repository: &str,
        tag: &str,
        images: &[(&str, &str, Value)],
    ) -> String {
        let mut manifests: Vec<Value> = images
            .iter()
            .map(|(os, architecture, config)| {
                let (digest, size) = self.put_image(config);
                json!({
                    "mediaType": OCI_MANIFEST,
                    "digest": digest,
                    "size": size,
                    "platform": {"os": os, "architecture": architecture},
                })
            })
            .collect();
        let (attestation, size) = self.put_image(&json!({"attestation": true}));
        manifests.push(json!({
            "mediaType": OCI_MANIFEST,
            "digest": attestation,
            "size": size,
            "platform": {"os": "unknown", "architecture": "unknown"},
        }));
        let index = json!({"schemaVersion": 2, "mediaType": OCI_INDEX, "manifests": manifests});
        let (digest, _) = self.put(OCI_INDEX, index.to_string().into_bytes());
        self.tag(repository, tag, &digest);
        digest
    }

    /// The config blob's digest of the image manifest `repository:tag`
    /// names.
    pub fn config_digest(&self, repository: &str, tag: &str) -> Option<String> {
        let store = self.store();
        let digest = store.tags.get(&(repository.to_owned(), tag.to_owned()))?;
        let (_, bytes) = store.content.get(digest)?;
        let manifest: Value = serde_json::from_slice(bytes).ok()?;
        manifest["config"]["digest"].as_str().map(str::to_owned)
    }

    /// Every answer about `repository` comes after `delay`.
    pub fn set_delay(&self, repository: &str, delay: Duration) {
        self.store().delays.insert(repository.to_owned(), delay);
    }

    /// Every answer about `repository` is `status` (with an error body).
    pub fn set_status(&self, repository: &str, status: u16) {
        let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        self.store().statuses.insert(repository.to_owned(), status);
    }

    /// `repository` answers as `fault` says.
    pub fn set_fault(&self, repository: &str, fault: Fault) {
        self.store().faults.insert(repository.to_owned(), fault);
    }

    /// Ends the delay, the status and the fault set for `repository`.
    pub fn clear_faults(&self, repository: &str) {
        let mut store = self.store();
        store.delays.remove(repository);
        store.statuses.remove(repository);
        store.faults.remove(repository);
    }

    /// Bytes the endless bodies have sent, before their clients hung up.
    pub fn streamed(&self) -> u64 {
        self.shared.streamed.load(Ordering::Relaxed)
    }

    pub fn requests(&self) -> Vec<Recorded> {
        self.store().requests.clone()
    }

    /// How many `method` requests went to `/v2/<repository>/<kind>/...`
    /// (`kind`: `manifests` or `blobs`).
    pub fn count(&self, method: Method, repository: &str, kind: &str) -> usize {
        let prefix = format!("/v2/{repository}/{kind}/");
        self.store()
            .requests
            .iter()
            .filter(|request| request.method == method && request.path.starts_with(&prefix))
            .count()
    }

    /// Config and layer blob downloads of `repository`.
    pub fn blob_gets(&self, repository: &str) -> usize {
        self.count(Method::GET, repository, "blobs")
    }

    pub fn manifest_gets(&self, repository: &str) -> usize {
        self.count(Method::GET, repository, "manifests")
    }

    pub fn manifest_heads(&self, repository: &str) -> usize {
        self.count(Method::HEAD, repository, "manifests")
    }

    pub fn tokens_issued(&self) -> u64 {
        self.store().tokens_issued
    }
}

fn error(status: StatusCode, code: &str, message: &str) -> Response {
    let body = json!({"errors": [{"code": code, "message": message}]}).to_string();
    let mut response = Response::new(Body::from(body));
    *response.status_mut() = status;
    response
        .headers_mut()
        .insert(header::CONTENT_TYPE, header::HeaderValue::from_static("application/json"));
    response
}

fn unauthorized(shared: &Shared) -> Response {
    let mut response = error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "authentication required");
    let challenge = match shared.auth {
        Auth::Basic { .. } => "Basic realm=\"fake-registry\"".to_owned(),
        _ => format!("Bearer realm=\"http://{}/token\",service=\"fake-registry\"", shared.addr),
    };
    if let Ok(value) = header::HeaderValue::from_str(&challenge) {
        response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
    }
    response
}

fn basic_matches(authorization: Option<&str>, user: &str, password: &str) -> bool {
    let expected = format!("Basic {}", STANDARD.encode(format!("{user}:{password}")));
    authorization == Some(expected.as_str())
}

fn authorized(shared: &Shared, authorization: Option<&str>) -> bool {
    match &shared.auth {
        Auth::None => true,
        Auth::AnonymousBearer | Auth::Bearer { .. } => {
            authorization.is_some_and(|value| value.starts_with("Bearer fake-token-"))
        }
        Auth::Basic { user, password } => basic_matches(authorization, user, password),
    }
}

async fn handle(State(shared): State<Arc<Shared>>, request: Request) -> Response {
    let method = request.method().clone();
    let path = request.uri().path().to_owned();
    let headers: HeaderMap = request.headers().clone();
    let authorization =
        headers.get(header::AUTHORIZATION).and_then(|value| value.to_str().ok()).map(str::to_owned);
    let (delay, status, fault) = {
        let mut store = shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        store.requests.push(Recorded {
            method: method.clone(),
            path: path.clone(),
            authorization: authorization.clone(),
        });
        let repository = repository_of(&path);
        (
            repository.and_then(|r| store.delays.get(r).copied()),
            repository.and_then(|r| store.statuses.get(r).copied()),
            repository.and_then(|r| store.faults.get(r).cloned()),
        )
    };
    if let Some(delay) = delay {
        tokio::time::sleep(delay).await;
    }
    if fault == Some(Fault::Silent) {
        std::future::pending::<()>().await;
    }
    if let Some(Fault::RealmElsewhere(realm)) = &fault
        && authorization.is_none()
    {
        let mut response =
            error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "authentication required");
        if let Ok(value) = header::HeaderValue::from_str(&format!(
            "Bearer realm=\"{realm}\",service=\"elsewhere\""
        )) {
            response.headers_mut().insert(header::WWW_AUTHENTICATE, value);
        }
        return response;
    }

    if path == "/token" {
        if let Auth::Bearer { user, password } = &shared.auth
            && !basic_matches(authorization.as_deref(), user, password)
        {
            return error(StatusCode::UNAUTHORIZED, "UNAUTHORIZED", "bad credentials");
        }
        let mut store = shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        store.tokens_issued += 1;
        let token = format!("fake-token-{}", store.tokens_issued);
        let body = json!({"token": token, "access_token": token, "expires_in": 300});
        return Response::new(Body::from(body.to_string()));
    }
    if !authorized(&shared, authorization.as_deref()) {
        return unauthorized(&shared);
    }
    if path == "/v2/" || path == "/v2" {
        return Response::new(Body::from("{}"));
    }
    if let Some(status) = status {
        return error(status, "UNKNOWN", "the fake registry was told to fail");
    }
    let Some(rest) = path.strip_prefix("/v2/") else {
        return error(StatusCode::NOT_FOUND, "NOT_FOUND", "not a registry path");
    };
    let (repository, reference, kind) =
        if let Some((repository, reference)) = rest.rsplit_once("/manifests/") {
            (repository, reference, "manifests")
        } else if let Some((repository, reference)) = rest.rsplit_once("/blobs/") {
            (repository, reference, "blobs")
        } else {
            return error(StatusCode::NOT_FOUND, "NOT_FOUND", "not a registry path");
        };
    if method != Method::GET && method != Method::HEAD {
        return error(StatusCode::METHOD_NOT_ALLOWED, "UNSUPPORTED", "read only");
    }
    let store = shared.store.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let digest = if reference.starts_with("sha256:") {
        Some(reference.to_owned())
    } else if kind == "manifests" {
        store.tags.get(&(repository.to_owned(), reference.to_owned())).cloned()
    } else {
        None
    };
    let known_repository = store.tags.keys().any(|(r, _)| r == repository);
    let Some((content_type, bytes)) = digest
        .as_ref()
        .filter(|_| known_repository)
        .and_then(|digest| store.content.get(digest))
        .cloned()
    else {
        let code = if kind == "manifests" { "MANIFEST_UNKNOWN" } else { "BLOB_UNKNOWN" };
        return error(StatusCode::NOT_FOUND, code, "unknown to the fake registry");
    };
    drop(store);
    if let Some(fault) = &fault
        && let Some(digest) = &digest
        && let Some(response) =
            hostile::answer(fault, &method, kind, digest, &content_type, &bytes, &shared.streamed)
    {
        return response;
    }
    let length = bytes.len();
    let body = if method == Method::HEAD { Body::empty() } else { Body::from(bytes) };
    let mut response = Response::new(body);
    let headers = response.headers_mut();
    if let Ok(value) = header::HeaderValue::from_str(&content_type) {
        headers.insert(header::CONTENT_TYPE, value);
    }
    if let Some(digest) = digest.and_then(|digest| header::HeaderValue::from_str(&digest).ok()) {
        headers.insert("docker-content-digest", digest);
    }
    headers.insert(header::CONTENT_LENGTH, header::HeaderValue::from(length));
    response
}

/// The repository a `/v2/<name>/{manifests,blobs}/...` path is about.
fn repository_of(path: &str) -> Option<&str> {
    let rest = path.strip_prefix("/v2/")?;
    rest.rsplit_once("/manifests/")
        .or_else(|| rest.rsplit_once("/blobs/"))
        .map(|(repository, _)| repository)
}
