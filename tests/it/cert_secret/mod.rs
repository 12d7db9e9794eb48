//! The --cert-secret route against the in-process fake API server: the
//! shared Secret, the files it is served from, caBundle injection, renewal
//! and the races between replicas.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::fake_api::{FakeApi, eventually, install_crypto_provider};
use crate::support::server::free_port;
use crate::support::tls::client_config;
use crate::support::x509::{sans, with_certificate};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gpu_policy::certs::secret::{
    Outcome, RouteConfig, SecretAction, SecretError, SecretRef, SecretRoute, WebhookKind,
    WebhookOutcome, WebhookStatus,
};
use gpu_policy::certs::{
    self, CertificateResolver, DEFAULT_DNS_NAMES, PemPair, Reload, generate_ca, issue,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};

mod ca_bundle;
mod creation;
mod refusals;
mod renewal;
mod serve;

const NS: &str = "gpu-policy";
const NAME: &str = "gpu-policy-tls";
const SECRET_PATH: &str = "/api/v1/namespaces/gpu-policy/secrets/gpu-policy-tls";
const SECRETS_PATH: &str = "/api/v1/namespaces/gpu-policy/secrets";
const SNI: &str = "gpu-policy.gpu-policy.svc";
const DAY: i64 = 24 * 60 * 60;
const STEP: Duration = Duration::from_secs(30);
const ADMISSION: &str = "admissionregistration.k8s.io/v1";
const MUTATING: &str = "MutatingWebhookConfiguration";
const VALIDATING: &str = "ValidatingWebhookConfiguration";

/// The Secret as the install creates it: Opaque, no data.
fn installed_secret() -> Value {
    json!({
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": NAME, "namespace": NS},
        "type": "Opaque",
    })
}

fn secret_ref() -> SecretRef {
    format!("{NS}/{NAME}").parse().expect("secret ref")
}

fn route(client: kube::Client, dir: &Path, webhooks: &[&str]) -> SecretRoute {
    let config = RouteConfig {
        webhook_configs: webhooks.iter().map(|w| (*w).to_owned()).collect(),
        ..RouteConfig::new(secret_ref(), dir)
    };
    SecretRoute::new(client, config)
}

async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(STEP, future).await.unwrap_or_else(|_| panic!("{what} timed out"))
}

async fn once(route: &SecretRoute) -> Outcome {
    within("ensure_once", route.ensure_once()).await.expect("ensure_once")
}

async fn once_err(route: &SecretRoute) -> SecretError {
    within("ensure_once", route.ensure_once()).await.expect_err("ensure_once must fail")
}

fn now() -> i64 {
    let secs = SystemTime::now().duration_since(UNIX_EPOCH).expect("clock").as_secs();
    i64::try_from(secs).expect("time")
}

/// The four PEM entries of a Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Tls {
    ca_crt: String,
    ca_key: String,
    tls_crt: String,
    tls_key: String,
}

impl Tls {
    fn new(ca: &PemPair, leaf: &PemPair) -> Self {
        Self {
            ca_crt: ca.cert.clone(),
            ca_key: ca.key.clone(),
            tls_crt: leaf.cert.clone(),
            tls_key: leaf.key.clone(),
        }
    }

    /// A new CA and a leaf for `names`, `days` long, issued `age_days` ago.
    fn fresh(names: &[String], age_days: i64, days: i64) -> Self {
        let ca = generate_ca(now(), 3650).expect("ca");
        let leaf = issue(&ca.cert, &ca.key, names, now() - age_days * DAY, days).expect("leaf");
        Self::new(&ca, &leaf)
    }

    fn secret_json(&self) -> Value {
        let b64 = |pem: &str| STANDARD.encode(pem.as_bytes());
        json!({
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": NAME, "namespace": NS},
            "type": "kubernetes.io/tls",
            "data": {
                "ca.crt": b64(&self.ca_crt),
                "ca.key": b64(&self.ca_key),
                "tls.crt": b64(&self.tls_crt),
                "tls.key": b64(&self.tls_key),
            },
        })
    }

    fn from_secret(secret: &Value) -> Self {
        let get = |key: &str| {
            let encoded = secret["data"][key]
                .as_str()
                .unwrap_or_else(|| panic!("Secret has no {key}: {secret}"));
            String::from_utf8(STANDARD.decode(encoded).expect("base64")).expect("utf-8")
        };
        Self {
            ca_crt: get("ca.crt"),
            ca_key: get("ca.key"),
            tls_crt: get("tls.crt"),
            tls_key: get("tls.key"),
        }
    }

    /// What the route serves from `dir` (`ca_key` is never written there).
    fn from_dir(dir: &Path) -> (String, String, String) {
        let read = |file: &str| std::fs::read_to_string(dir.join(file)).expect("read file");
        (read("ca.crt"), read("tls.crt"), read("tls.key"))
    }

    fn files(&self) -> (String, String, String) {
        (self.ca_crt.clone(), self.tls_crt.clone(), self.tls_key.clone())
    }
}

fn stored_secret(api: &FakeApi) -> Value {
    api.get("v1", "Secret", Some(NS), NAME).expect("the Secret exists")
}

fn stored_tls(api: &FakeApi) -> Tls {
    Tls::from_secret(&stored_secret(api))
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"].as_str().expect("resourceVersion").to_owned()
}

fn writes(api: &FakeApi) -> Vec<(String, String)> {
    api.requests().into_iter().filter(|(method, _)| method != "GET").collect()
}

struct Leaf {
    dns: Vec<String>,
    ips: Vec<IpAddr>,
    issuer: String,
    not_before: i64,
    not_after: i64,
}

fn leaf(cert_pem: &str) -> Leaf {
    with_certificate(cert_pem.as_bytes(), |cert| {
        let (dns, ips) = sans(cert);
        Leaf {
            dns,
            ips,
            issuer: cert.issuer().to_string(),
            not_before: cert.validity().not_before.timestamp(),
            not_after: cert.validity().not_after.timestamp(),
        }
    })
}

fn subject(cert_pem: &str) -> (String, bool) {
    with_certificate(cert_pem.as_bytes(), |cert| (cert.subject().to_string(), cert.is_ca()))
}

/// A TLS handshake with the pair in `dir`, as the API server makes it:
/// trusting only `ca_pem`, for the name `sni`. Returns the presented leaf.
async fn handshake(dir: &Path, ca_pem: &str, sni: &str) -> Result<Vec<u8>, String> {
    let resolver = CertificateResolver::load(&dir.join("tls.crt"), &dir.join("tls.key"))
        .map_err(|e| e.to_string())?;
    let config =
        Arc::new(certs::server_config(Arc::new(resolver), None).map_err(|e| e.to_string())?);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let _ = TlsAcceptor::from(config).accept(stream).await;
    });
    let client = client_config(ca_pem.as_bytes());
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(sni.to_owned()).expect("server name");
    let result = within("handshake", TlsConnector::from(client).connect(name, tcp)).await;
    let _ = server.await;
    let tls = result.map_err(|e| e.to_string())?;
    let (_, connection) = tls.get_ref();
    let chain = connection.peer_certificates().unwrap_or_default();
    Ok(chain.first().map(|c| c.as_ref().to_vec()).unwrap_or_default())
}

fn der(cert_pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("pem").as_ref().to_vec()
}

fn webhook_config(kind: &str, name: &str, bundles: [Option<&str>; 2]) -> Value {
    let entries: Vec<Value> = bundles
        .iter()
        .enumerate()
        .map(|(i, bundle)| {
            let mut client_config = json!({
                "service": {"namespace": NS, "name": "gpu-policy", "path": format!("/hook{i}"), "port": 443},
            });
            if let Some(bundle) = bundle {
                client_config["caBundle"] = (*bundle).into();
            }
            json!({
                "name": format!("hook{i}.gpu-policy.io"),
                "clientConfig": client_config,
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
            })
        })
        .collect();
    json!({
        "apiVersion": ADMISSION,
        "kind": kind,
        "metadata": {"name": name},
        "webhooks": entries,
    })
}

fn bundles(api: &FakeApi, kind: &str, name: &str) -> Vec<Option<String>> {
    let object = api.get(ADMISSION, kind, None, name).expect("config exists");
    object["webhooks"]
        .as_array()
        .expect("webhooks")
        .iter()
        .map(|w| w["clientConfig"]["caBundle"].as_str().map(str::to_owned))
        .collect()
}

fn webhook(outcome: &Outcome, name: &str, kind: Option<WebhookKind>) -> WebhookStatus {
    outcome
        .webhooks
        .iter()
        .find(|w| w.name == name && w.kind == kind)
        .map(|w| w.status.clone())
        .unwrap_or_else(|| panic!("no outcome for {name} {kind:?}: {:?}", outcome.webhooks))
}

fn not_after(ca_pem: &str) -> i64 {
    let der = CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
    cert.validity().not_after.timestamp()
}

/// A TCP proxy in front of `target` that runs `hook` once, just before it
/// forwards the first request containing `needle`.
async fn hook_proxy(
    target: SocketAddr,
    needle: &'static str,
    hook: Box<dyn FnOnce() + Send>,
) -> SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let hook = Arc::new(Mutex::new(Some(hook)));
    tokio::spawn(async move {
        while let Ok((inbound, _)) = listener.accept().await {
            let hook = Arc::clone(&hook);
            tokio::spawn(async move {
                let Ok(outbound) = TcpStream::connect(target).await else {
                    return;
                };
                let (mut from_client, mut to_client) = inbound.into_split();
                let (mut from_server, mut to_server) = outbound.into_split();
                let upstream = async move {
                    let mut buf = vec![0u8; 64 * 1024];
                    let mut window: Vec<u8> = Vec::new();
                    loop {
                        let n = match from_client.read(&mut buf).await {
                            Ok(0) | Err(_) => break,
                            Ok(n) => n,
                        };
                        window.extend_from_slice(&buf[..n]);
                        if window.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                            let hook = hook.lock().expect("hook lock").take();
                            if let Some(hook) = hook {
                                hook();
                            }
                        }
                        let keep = window.len().saturating_sub(needle.len());
                        window.drain(..keep);
                        if to_server.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                    let _ = to_server.shutdown().await;
                };
                let downstream = async move {
                    let _ = tokio::io::copy(&mut from_server, &mut to_client).await;
                    let _ = to_client.shutdown().await;
                };
                tokio::join!(upstream, downstream);
            });
        }
    });
    addr
}

fn client_via(addr: SocketAddr) -> kube::Client {
    install_crypto_provider();
    let mut config = kube::Config::new(format!("http://{addr}").parse().expect("url"));
    config.default_namespace = "default".into();
    kube::Client::try_from(config).expect("client")
}
