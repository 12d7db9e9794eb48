//! What a hostile registry does, per repository ([`super::FakeRegistry::set_fault`]),
//! and a listener that only counts who connects to it ([`Tarpit`]): the
//! address a refused redirect or token realm points at, or a registry
//! nobody listed.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use axum::body::{Body, Bytes};
use axum::http::{Method, StatusCode, header};
use axum::response::Response;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use super::{OCI_CONFIG, OCI_MANIFEST};

/// One misbehaviour of a repository's answers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Fault {
    /// Every request is read and never answered.
    Silent,
    /// A manifest request gets a body that never ends (chunked, no
    /// length).
    EndlessManifest,
    /// The config blob comes as its manifest declares it and then goes on
    /// without end (chunked, no length).
    EndlessConfig,
    /// Blob requests are redirected (307) to this URL.
    RedirectBlobs(String),
    /// Manifests and blobs come with one byte changed: they no longer hash
    /// to their digest (a manifest keeps its `Docker-Content-Digest`).
    WrongContent,
    /// A request without credentials gets a 401 whose bearer realm is this
    /// URL.
    RealmElsewhere(String),
}

/// The most an endless body sends, should a client never hang up.
const ENDLESS_CAP: u64 = 4 << 30;
const CHUNK: usize = 64 << 10;

/// `prefix`, then spaces without end, counted into `streamed` as they
/// leave.
fn endless(prefix: Vec<u8>, streamed: Arc<AtomicU64>) -> Body {
    let filler = Bytes::from(vec![b' '; CHUNK]);
    let head = futures::stream::once(futures::future::ready(Ok::<Bytes, std::io::Error>(
        Bytes::from(prefix),
    )));
    let tail = futures::stream::unfold((filler, streamed), |(filler, streamed)| async move {
        let sent = streamed.fetch_add(filler.len() as u64, Ordering::Relaxed);
        (sent < ENDLESS_CAP).then(|| (Ok(filler.clone()), (filler, streamed)))
    });
    Body::from_stream(futures::StreamExt::chain(head, tail))
}

/// `bytes` with the first ASCII letter below `z` moved up by one: the same
/// length, still JSON, another digest.
pub fn tamper(mut bytes: Vec<u8>) -> Vec<u8> {
    if let Some(byte) = bytes.iter_mut().find(|b| (b'a'..=b'y').contains(*b)) {
        *byte += 1;
    }
    bytes
}

fn with_type(mut response: Response, content_type: &str) -> Response {
    if let Ok(value) = header::HeaderValue::from_str(content_type) {
        response.headers_mut().insert(header::CONTENT_TYPE, value);
    }
    response
}

/// The faulty answer to a request for stored content, when the fault
/// changes it: `kind` is `manifests` or `blobs`.
pub fn answer(
    fault: &Fault,
    method: &Method,
    kind: &str,
    digest: &str,
    content_type: &str,
    bytes: &[u8],
    streamed: &Arc<AtomicU64>,
) -> Option<Response> {
    match fault {
        Fault::EndlessManifest if kind == "manifests" && method == Method::GET => {
            let prefix = format!(
                "{{\"schemaVersion\":2,\"mediaType\":\"{OCI_MANIFEST}\",\"annotations\":{{\"x\":\""
            );
            let body = endless(prefix.into_bytes(), Arc::clone(streamed));
            Some(with_type(Response::new(body), OCI_MANIFEST))
        }
        Fault::EndlessConfig if kind == "blobs" && content_type == OCI_CONFIG => {
            let body = endless(bytes.to_vec(), Arc::clone(streamed));
            Some(with_type(Response::new(body), content_type))
        }
        Fault::RedirectBlobs(location) if kind == "blobs" => {
            let mut response = Response::new(Body::empty());
            *response.status_mut() = StatusCode::TEMPORARY_REDIRECT;
            if let Ok(value) = header::HeaderValue::from_str(location) {
                response.headers_mut().insert(header::LOCATION, value);
            }
            Some(response)
        }
        Fault::WrongContent => {
            let mut response = Response::new(Body::from(tamper(bytes.to_vec())));
            if let Ok(value) = header::HeaderValue::from_str(digest) {
                response.headers_mut().insert("docker-content-digest", value);
            }
            Some(with_type(response, content_type))
        }
        _ => None,
    }
}

/// A loopback listener that counts the connections made to it and drops
/// each at once.
pub struct Tarpit {
    addr: SocketAddr,
    connections: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl Drop for Tarpit {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Tarpit {
    pub async fn start() -> Tarpit {
        let listener = match TcpListener::bind("127.0.0.1:0").await {
            Ok(listener) => listener,
            Err(err) => panic!("tarpit: bind: {err}"),
        };
        let addr = match listener.local_addr() {
            Ok(addr) => addr,
            Err(err) => panic!("tarpit: local_addr: {err}"),
        };
        let connections = Arc::new(AtomicUsize::new(0));
        let counter = Arc::clone(&connections);
        let task = tokio::spawn(async move {
            while listener.accept().await.is_ok() {
                counter.fetch_add(1, Ordering::SeqCst);
            }
        });
        Tarpit { addr, connections, task }
    }

    /// `127.0.0.1:<port>`.
    pub fn host(&self) -> String {
        self.addr.to_string()
    }

    pub fn connections(&self) -> usize {
        self.connections.load(Ordering::SeqCst)
    }
}
