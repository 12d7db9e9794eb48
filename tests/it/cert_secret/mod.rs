//! The --cert-secret route against the in-process fake API server: the
//! shared Secret, the files it is served from, caBundle injection, renewal
//! and the races between replicas.

use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::support::fake_api::{FakeApi, eventually, install_crypto_provider};
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use gpu_policy::certs::secret::{
    Outcome, RouteConfig, SecretAction, SecretError, SecretRef, SecretRoute, WebhookKind,
    WebhookOutcome, WebhookStatus,
};
use gpu_policy::certs::{
    self, CertificateResolver, DEFAULT_DNS_NAMES, PemPair, Reload, generate_ca, issue,
};
use rustls::RootCertStore;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use x509_parser::extensions::GeneralName;

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
    tokio::time::timeout(STEP, future)
        .await
        .unwrap_or_else(|_| panic!("{what} timed out"))
}

async fn once(route: &SecretRoute) -> Outcome {
    within("ensure_once", route.ensure_once())
        .await
        .expect("ensure_once")
}

async fn once_err(route: &SecretRoute) -> SecretError {
    within("ensure_once", route.ensure_once())
        .await
        .expect_err("ensure_once must fail")
}

fn now() -> i64 {
    let secs = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .expect("clock")
        .as_secs();
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
        (
            self.ca_crt.clone(),
            self.tls_crt.clone(),
            self.tls_key.clone(),
        )
    }
}

fn stored_secret(api: &FakeApi) -> Value {
    api.get("v1", "Secret", Some(NS), NAME)
        .expect("the Secret exists")
}

fn stored_tls(api: &FakeApi) -> Tls {
    Tls::from_secret(&stored_secret(api))
}

fn resource_version(object: &Value) -> String {
    object["metadata"]["resourceVersion"]
        .as_str()
        .expect("resourceVersion")
        .to_owned()
}

fn writes(api: &FakeApi) -> Vec<(String, String)> {
    api.requests()
        .into_iter()
        .filter(|(method, _)| method != "GET")
        .collect()
}

struct Leaf {
    dns: Vec<String>,
    ips: Vec<IpAddr>,
    issuer: String,
    not_before: i64,
    not_after: i64,
}

fn leaf(cert_pem: &str) -> Leaf {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
    let mut dns = Vec::new();
    let mut ips = Vec::new();
    let san = cert
        .subject_alternative_name()
        .expect("san ext")
        .expect("san present");
    for name in &san.value.general_names {
        match name {
            GeneralName::DNSName(name) => dns.push((*name).to_owned()),
            GeneralName::IPAddress(bytes) => {
                let octets: [u8; 4] = (*bytes).try_into().expect("ipv4");
                ips.push(IpAddr::from(octets));
            }
            other => panic!("unexpected SAN {other:?}"),
        }
    }
    Leaf {
        dns,
        ips,
        issuer: cert.issuer().to_string(),
        not_before: cert.validity().not_before.timestamp(),
        not_after: cert.validity().not_after.timestamp(),
    }
}

fn subject(cert_pem: &str) -> (String, bool) {
    let der = CertificateDer::from_pem_slice(cert_pem.as_bytes()).expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
    (cert.subject().to_string(), cert.is_ca())
}

/// A TLS handshake with the pair in `dir`, as the API server makes it:
/// trusting only `ca_pem`, for the name `sni`. Returns the presented leaf.
async fn handshake(dir: &Path, ca_pem: &str, sni: &str) -> Result<Vec<u8>, String> {
    let resolver = CertificateResolver::load(&dir.join("tls.crt"), &dir.join("tls.key"))
        .map_err(|e| e.to_string())?;
    let config = Arc::new(certs::server_config(Arc::new(resolver)).map_err(|e| e.to_string())?);
    let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let addr = listener.local_addr().expect("addr");
    let server = tokio::spawn(async move {
        let (stream, _) = listener.accept().await.expect("accept");
        let _ = TlsAcceptor::from(config).accept(stream).await;
    });
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("ca pem"))
        .expect("root");
    let client = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("versions")
    .with_root_certificates(roots)
    .with_no_client_auth();
    let tcp = TcpStream::connect(addr).await.expect("connect");
    let name = ServerName::try_from(sni.to_owned()).expect("server name");
    let result = within(
        "handshake",
        TlsConnector::from(Arc::new(client)).connect(name, tcp),
    )
    .await;
    let _ = server.await;
    let tls = result.map_err(|e| e.to_string())?;
    let (_, connection) = tls.get_ref();
    let chain = connection.peer_certificates().unwrap_or_default();
    Ok(chain
        .first()
        .map(|c| c.as_ref().to_vec())
        .unwrap_or_default())
}

fn der(cert_pem: &str) -> Vec<u8> {
    CertificateDer::from_pem_slice(cert_pem.as_bytes())
        .expect("pem")
        .as_ref()
        .to_vec()
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

#[tokio::test]
async fn creates_the_secret_when_absent_and_serves_it() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);

    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::Created);
    assert!(outcome.files_written);
    assert_eq!(api.count_requests("POST", &[SECRETS_PATH]), 1);

    let secret = stored_secret(&api);
    assert_eq!(secret["type"], "kubernetes.io/tls");
    assert_eq!(
        secret["metadata"]["labels"]["app.kubernetes.io/managed-by"],
        "gpu-policy"
    );
    let mut keys: Vec<&str> = secret["data"]
        .as_object()
        .expect("data")
        .keys()
        .map(String::as_str)
        .collect();
    keys.sort_unstable();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    let tls = Tls::from_secret(&secret);
    assert_eq!(Tls::from_dir(dir.path()), tls.files());
    assert!(
        !dir.path().join("ca.key").exists(),
        "the CA key stays in the Secret"
    );
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(dir.path().join("tls.key"))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The names: defaults, 127.0.0.1 and <service>.<ns>.svc.
    let served = leaf(&tls.tls_crt);
    for name in DEFAULT_DNS_NAMES.iter().copied().chain([SNI]) {
        assert!(
            served.dns.iter().any(|d| d == name),
            "{name}: {:?}",
            served.dns
        );
    }
    assert_eq!(served.ips, vec![IpAddr::from([127, 0, 0, 1])]);
    let (ca_subject, is_ca) = subject(&tls.ca_crt);
    assert!(is_ca);
    assert_eq!(served.issuer, ca_subject);
    let life = served.not_after - now();
    assert!((364 * DAY..=366 * DAY).contains(&life), "{life}");
    let ca_life = not_after(&tls.ca_crt) - now();
    assert!((3649 * DAY..=3651 * DAY).contains(&ca_life), "{ca_life}");

    // The API server's view: SNI gpu-policy.gpu-policy.svc, trusting ca.crt.
    let presented = handshake(dir.path(), &tls.ca_crt, SNI)
        .await
        .expect("verifies against ca.crt");
    assert_eq!(presented, der(&tls.tls_crt));
    let other = Tls::fresh(route.names(), 0, 365);
    let refused = handshake(dir.path(), &other.ca_crt, SNI)
        .await
        .expect_err("another CA must not verify");
    assert!(refused.contains("BadSignature"), "{refused}");

    // Second pass: nothing to do.
    api.clear_requests();
    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::Kept);
    assert!(!outcome.files_written);
    assert_eq!(writes(&api), Vec::<(String, String)>::new());
}

fn not_after(ca_pem: &str) -> i64 {
    let der = CertificateDer::from_pem_slice(ca_pem.as_bytes()).expect("pem");
    let (_, cert) = x509_parser::parse_x509_certificate(&der).expect("x509");
    cert.validity().not_after.timestamp()
}

#[tokio::test]
async fn reuses_a_present_secret_without_writing() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    let existing = Tls::fresh(route.names(), 10, 365);
    let inserted = api.insert(existing.secret_json());

    api.clear_requests();
    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::Kept);
    assert!(outcome.files_written);
    assert_eq!(writes(&api), Vec::<(String, String)>::new());
    assert_eq!(
        resource_version(&stored_secret(&api)),
        resource_version(&inserted)
    );
    assert_eq!(Tls::from_dir(dir.path()), existing.files());
}

#[tokio::test]
async fn losing_the_create_race_adopts_the_winner() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    // The winner's Secret is there, but this replica's GET came before it:
    // its create gets the real 409 AlreadyExists.
    let winner = Tls::fresh(route.names(), 0, 365);
    let inserted = api.insert(winner.secret_json());
    api.fail_next("GET", SECRET_PATH, 404, 1);

    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::AdoptedCreated);
    assert_eq!(api.count_requests("POST", &[SECRETS_PATH]), 1);
    assert_eq!(api.count_requests("PUT", &[SECRET_PATH]), 0);
    assert_eq!(stored_tls(&api), winner);
    assert_eq!(
        resource_version(&stored_secret(&api)),
        resource_version(&inserted)
    );
    assert_eq!(Tls::from_dir(dir.path()), winner.files());
}

#[tokio::test]
async fn replicas_starting_together_share_one_pair() {
    let api = FakeApi::start().await;
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let routes: Vec<_> = dirs
        .iter()
        .map(|dir| route(api.client(), dir.path(), &[]))
        .collect();
    let outcomes = within(
        "replicas",
        futures::future::join_all(routes.iter().map(SecretRoute::ensure_once)),
    )
    .await;
    let actions: Vec<SecretAction> = outcomes
        .into_iter()
        .map(|o| o.expect("ensure_once").action)
        .collect();
    assert_eq!(
        actions
            .iter()
            .filter(|a| **a == SecretAction::Created)
            .count(),
        1,
        "{actions:?}"
    );
    let stored = stored_tls(&api);
    for dir in &dirs {
        assert_eq!(Tls::from_dir(dir.path()), stored.files());
    }
}

#[tokio::test]
async fn ca_bundle_is_patched_once_then_left_alone_then_repaired() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let stale = STANDARD.encode("-----BEGIN CERTIFICATE-----\nstale\n");
    api.insert(webhook_config(
        MUTATING,
        "gpu-policy",
        [None, Some(stale.as_str())],
    ));
    api.insert(webhook_config(VALIDATING, "gpu-policy", [None, None]));
    api.insert(webhook_config(
        VALIDATING,
        "gpu-policy-guard",
        [Some(stale.as_str()), None],
    ));
    let route = route(
        api.client(),
        dir.path(),
        &["gpu-policy", "gpu-policy-guard", "absent"],
    );

    let outcome = once(&route).await;
    let ca = STANDARD.encode(stored_tls(&api).ca_crt);
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Mutating)),
        WebhookStatus::Patched { entries: 2 }
    );
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Validating)),
        WebhookStatus::Patched { entries: 2 }
    );
    assert_eq!(
        webhook(&outcome, "gpu-policy-guard", Some(WebhookKind::Validating)),
        WebhookStatus::Patched { entries: 2 }
    );
    assert_eq!(
        outcome
            .webhooks
            .iter()
            .filter(|w| w.name == "absent")
            .collect::<Vec<_>>(),
        vec![&WebhookOutcome {
            name: "absent".to_owned(),
            kind: None,
            status: WebhookStatus::Missing,
        }]
    );
    for (kind, name) in [
        (MUTATING, "gpu-policy"),
        (VALIDATING, "gpu-policy"),
        (VALIDATING, "gpu-policy-guard"),
    ] {
        assert_eq!(
            bundles(&api, kind, name),
            vec![Some(ca.clone()), Some(ca.clone())],
            "{kind} {name}"
        );
        // The rest of each entry is untouched.
        let object = api.get(ADMISSION, kind, None, name).expect("config");
        assert_eq!(object["webhooks"][1]["name"], "hook1.gpu-policy.io");
        assert_eq!(
            object["webhooks"][1]["clientConfig"]["service"]["path"],
            "/hook1"
        );
    }
    assert_eq!(api.count_requests("PATCH", &["webhookconfigurations"]), 3);

    // Second pass: everything is current, no PATCH at all.
    api.clear_requests();
    let outcome = once(&route).await;
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        assert_eq!(
            webhook(&outcome, "gpu-policy", Some(kind)),
            WebhookStatus::UpToDate
        );
    }
    assert_eq!(writes(&api), Vec::<(String, String)>::new());

    // Drift: someone resets one entry; the next pass puts the CA back.
    api.insert(webhook_config(
        VALIDATING,
        "gpu-policy",
        [Some(ca.as_str()), Some(stale.as_str())],
    ));
    api.clear_requests();
    let outcome = once(&route).await;
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Validating)),
        WebhookStatus::Patched { entries: 1 }
    );
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Mutating)),
        WebhookStatus::UpToDate
    );
    assert_eq!(
        bundles(&api, VALIDATING, "gpu-policy"),
        vec![Some(ca.clone()), Some(ca.clone())]
    );
    assert_eq!(writes(&api).len(), 1, "{:?}", writes(&api));
    assert_eq!(
        api.count_requests(
            "PATCH",
            &["/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpu-policy"]
        ),
        1
    );
}

#[tokio::test]
async fn ca_bundle_patch_that_races_is_retried_next_pass() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, None]));
    let route = route(api.client(), dir.path(), &["gpu-policy"]);
    // The resourceVersion `test` fails as when another writer got there
    // between our read and our patch.
    api.fail_next("PATCH", "/apis/admissionregistration.k8s.io", 422, 1);
    let outcome = once(&route).await;
    assert!(
        matches!(
            webhook(&outcome, "gpu-policy", Some(WebhookKind::Mutating)),
            WebhookStatus::Raced { .. }
        ),
        "{outcome:?}"
    );
    let outcome = once(&route).await;
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Mutating)),
        WebhookStatus::Patched { entries: 2 }
    );
}

#[tokio::test]
async fn renews_a_leaf_two_thirds_expired_from_the_same_ca() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    // 30 days long, 20 days (and the one-hour backdate) in.
    let old = Tls::fresh(route.names(), 20, 30);
    let inserted = api.insert(old.secret_json());

    let outcome = once(&route).await;
    let SecretAction::Renewed { reason } = &outcome.action else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains("third"), "{reason}");
    assert_eq!(api.count_requests("PUT", &[SECRET_PATH]), 1);

    let renewed = stored_tls(&api);
    assert_ne!(renewed.tls_crt, old.tls_crt);
    assert_ne!(renewed.tls_key, old.tls_key);
    assert_eq!(renewed.ca_crt, old.ca_crt, "same CA");
    assert_eq!(renewed.ca_key, old.ca_key, "same CA key");
    assert_ne!(
        resource_version(&stored_secret(&api)),
        resource_version(&inserted)
    );
    let new_leaf = leaf(&renewed.tls_crt);
    assert_eq!(new_leaf.issuer, subject(&old.ca_crt).0);
    assert!(new_leaf.not_before <= now());
    let life = new_leaf.not_after - now();
    assert!((364 * DAY..=366 * DAY).contains(&life), "{life}");
    assert_eq!(Tls::from_dir(dir.path()), renewed.files());
    // Signed by the same CA: the old ca.crt (already in caBundle) verifies it.
    let presented = handshake(dir.path(), &old.ca_crt, SNI)
        .await
        .expect("verifies against the unchanged CA");
    assert_eq!(presented, der(&renewed.tls_crt));

    // Renewed once: the next pass keeps it.
    assert_eq!(once(&route).await.action, SecretAction::Kept);
}

#[tokio::test]
async fn reissues_when_the_names_are_not_covered() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let plain = route(api.client(), dir.path(), &[]);
    let old = Tls::fresh(plain.names(), 0, 365);
    api.insert(old.secret_json());

    let config = RouteConfig {
        dns_names: vec!["webhook.example.com".to_owned()],
        service: "hook".to_owned(),
        service_namespace: "ops".to_owned(),
        ..RouteConfig::new(secret_ref(), dir.path())
    };
    let wider = SecretRoute::new(api.client(), config);
    let outcome = once(&wider).await;
    let SecretAction::Renewed { reason } = &outcome.action else {
        panic!("{outcome:?}");
    };
    assert!(reason.contains("webhook.example.com"), "{reason}");
    let renewed = stored_tls(&api);
    assert_eq!(renewed.ca_crt, old.ca_crt);
    let names = leaf(&renewed.tls_crt).dns;
    for name in ["webhook.example.com", "hook.ops.svc", SNI, "localhost"] {
        assert!(names.iter().any(|n| n == name), "{name}: {names:?}");
    }
    // The narrower replica is covered by the wider pair: no ping-pong.
    api.clear_requests();
    assert_eq!(once(&plain).await.action, SecretAction::Kept);
    assert_eq!(once(&wider).await.action, SecretAction::Kept);
    assert_eq!(writes(&api), Vec::<(String, String)>::new());
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

#[tokio::test]
async fn renewal_conflict_adopts_the_other_writers_pair() {
    let api = Arc::new(FakeApi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let names = route(api.client(), dir.path(), &[]).names().to_vec();
    let old = Tls::fresh(&names, 20, 30);
    api.insert(old.secret_json());

    // Another replica renews between this one's read and its write: the
    // replace carries the stale resourceVersion and gets a real 409.
    let ca = PemPair {
        cert: old.ca_crt.clone(),
        key: old.ca_key.clone(),
    };
    let theirs = Tls::new(
        &ca,
        &issue(&old.ca_crt, &old.ca_key, &names, now(), 365).expect("their leaf"),
    );
    let hook = {
        let api = Arc::clone(&api);
        let theirs = theirs.clone();
        Box::new(move || {
            api.insert(theirs.secret_json());
        })
    };
    let proxy = hook_proxy(
        api.addr(),
        "PUT /api/v1/namespaces/gpu-policy/secrets/",
        hook,
    )
    .await;
    let route = route(client_via(proxy), dir.path(), &[]);

    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::AdoptedConflict);
    assert_eq!(api.count_requests("PUT", &[SECRET_PATH]), 1);
    assert_eq!(stored_tls(&api), theirs, "their pair is not overwritten");
    assert_eq!(Tls::from_dir(dir.path()), theirs.files());
    assert_eq!(once(&route).await.action, SecretAction::Kept);
}

#[tokio::test]
async fn injected_renewal_conflict_rereads_and_adopts() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    let old = Tls::fresh(route.names(), 20, 30);
    api.insert(old.secret_json());
    api.fail_next("PUT", SECRET_PATH, 409, 1);

    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::AdoptedConflict);
    // Nothing was written: what is stored (and served) is what was re-read.
    assert_eq!(stored_tls(&api), old);
    assert_eq!(Tls::from_dir(dir.path()), old.files());
    assert_eq!(
        api.count_requests("GET", &[SECRET_PATH]),
        2,
        "{:?}",
        api.requests()
    );
    // The next pass renews for real.
    assert!(matches!(
        once(&route).await.action,
        SecretAction::Renewed { .. }
    ));
}

#[tokio::test]
async fn replicas_renewing_together_agree() {
    let api = FakeApi::start().await;
    let dirs: Vec<_> = (0..3)
        .map(|_| tempfile::tempdir().expect("tempdir"))
        .collect();
    let routes: Vec<_> = dirs
        .iter()
        .map(|dir| route(api.client(), dir.path(), &[]))
        .collect();
    let old = Tls::fresh(routes[0].names(), 20, 30);
    api.insert(old.secret_json());
    let outcomes = within(
        "replicas",
        futures::future::join_all(routes.iter().map(SecretRoute::ensure_once)),
    )
    .await;
    for outcome in outcomes {
        let action = outcome.expect("ensure_once").action;
        assert!(
            matches!(
                action,
                SecretAction::Renewed { .. } | SecretAction::AdoptedConflict | SecretAction::Kept
            ),
            "{action:?}"
        );
    }
    let stored = stored_tls(&api);
    assert_ne!(stored.tls_crt, old.tls_crt);
    for dir in &dirs {
        assert_eq!(Tls::from_dir(dir.path()), stored.files());
    }
}

#[tokio::test]
async fn forbidden_or_unreachable_api_leaves_the_files_alone() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, None]));
    let route = route(api.client(), dir.path(), &["gpu-policy"]);
    once(&route).await;
    let before = Tls::from_dir(dir.path());
    let resolver = CertificateResolver::load(&route.cert_path(), &route.key_path()).expect("load");

    // Someone rotates the Secret, but this replica may not read it.
    api.insert(Tls::fresh(route.names(), 0, 365).secret_json());
    api.fail_next("GET", SECRET_PATH, 403, 1);
    api.clear_requests();
    let error = once_err(&route).await;
    assert!(error.is_forbidden(), "{error:?}");
    let message = error.to_string();
    for part in ["forbidden", "RBAC", "get", "secrets", NS, NAME] {
        assert!(message.contains(part), "{part:?} not in {message}");
    }
    assert_eq!(Tls::from_dir(dir.path()), before);
    assert!(matches!(resolver.reload_if_changed(), Reload::Unchanged));
    assert_eq!(writes(&api), Vec::<(String, String)>::new());

    // API server down.
    api.stop().await;
    let error = once_err(&route).await;
    assert!(!error.is_forbidden());
    assert!(error.to_string().contains("did not answer"), "{error}");
    assert_eq!(Tls::from_dir(dir.path()), before);

    // Back: the next pass picks up the rotated Secret.
    api.restart().await;
    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::Kept);
    assert!(outcome.files_written);
    assert_eq!(Tls::from_dir(dir.path()), stored_tls(&api).files());
    assert!(matches!(resolver.reload_if_changed(), Reload::Reloaded));
}

#[tokio::test]
async fn forbidden_patch_is_reported_per_configuration() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    api.insert(webhook_config(VALIDATING, "gpu-policy", [None, None]));
    let route = route(api.client(), dir.path(), &["gpu-policy"]);
    api.fail_next(
        "PATCH",
        "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpu-policy",
        403,
        1,
    );
    let outcome = once(&route).await;
    assert!(outcome.files_written, "the Secret part still happens");
    let WebhookStatus::Failed { reason } =
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Validating))
    else {
        panic!("{outcome:?}");
    };
    assert!(
        reason.contains("RBAC")
            && reason.contains("patch")
            && reason.contains("validatingwebhookconfigurations"),
        "{reason}"
    );
}

#[tokio::test]
async fn refuses_a_secret_it_did_not_make() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    let mut foreign = Tls::fresh(route.names(), 0, 365).secret_json();
    foreign["data"]
        .as_object_mut()
        .expect("data")
        .remove("ca.key");
    api.insert(foreign);
    let error = once_err(&route).await;
    assert!(error.to_string().contains("ca.key"), "{error}");
    assert!(!route.cert_path().exists());
    assert_eq!(writes(&api), Vec::<(String, String)>::new());
}

#[tokio::test]
async fn run_follows_secret_changes_and_repairs_drift() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, None]));
    let route = route(api.client(), dir.path(), &["gpu-policy"]);
    once(&route).await;
    let resolver =
        Arc::new(CertificateResolver::load(&route.cert_path(), &route.key_path()).expect("load"));
    let reloads = Arc::new(Mutex::new(0usize));
    let poller = {
        let reloads = Arc::clone(&reloads);
        Arc::clone(&resolver).spawn_poller(Duration::from_millis(20), move |reload| {
            if matches!(reload, Reload::Reloaded) {
                *reloads.lock().expect("lock") += 1;
            }
        })
    };
    let names = route.names().to_vec();
    let task = tokio::spawn(route.run(Duration::from_millis(50)));

    // Another replica (or an operator) rotates the whole Secret.
    let rotated = Tls::fresh(&names, 0, 365);
    api.insert(rotated.secret_json());
    let dir_path = dir.path().to_path_buf();
    eventually("files follow the Secret", STEP, || {
        Tls::from_dir(&dir_path) == rotated.files()
    })
    .await;
    eventually("caBundle follows the CA", STEP, || {
        bundles(&api, MUTATING, "gpu-policy") == vec![Some(STANDARD.encode(&rotated.ca_crt)); 2]
    })
    .await;
    eventually("the resolver reloads", STEP, || {
        *reloads.lock().expect("lock") > 0
            && resolver.not_after() == leaf(&rotated.tls_crt).not_after
    })
    .await;
    let presented = handshake(&dir_path, &rotated.ca_crt, SNI)
        .await
        .expect("verifies");
    assert_eq!(presented, der(&rotated.tls_crt));

    // Drift in a caBundle is put back.
    api.insert(webhook_config(
        MUTATING,
        "gpu-policy",
        [None, Some("c3RhbGU=")],
    ));
    eventually("caBundle repaired", STEP, || {
        bundles(&api, MUTATING, "gpu-policy") == vec![Some(STANDARD.encode(&rotated.ca_crt)); 2]
    })
    .await;
    task.abort();
    poller.abort();
}

/// A child process killed when the test ends.
struct Child(std::process::Child);

impl Drop for Child {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn cert_secret_with_no_cluster_is_a_usage_error() {
    let output = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .args([
            "serve",
            "--cert-secret",
            "gpu-policy/gpu-policy-tls",
            "--no-cluster",
        ])
        .output()
        .expect("run gpu-policy");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("--cert-secret") && stderr.contains("--no-cluster"),
        "{stderr}"
    );

    let output = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .args(["serve", "--webhook-config", "gpu-policy"])
        .output()
        .expect("run gpu-policy");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--cert-secret"));
}

#[tokio::test]
async fn serve_with_cert_secret_creates_serves_and_injects() {
    let api = FakeApi::start().await;
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, None]));
    api.insert(webhook_config(VALIDATING, "gpu-policy", [None, None]));
    let tmp = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(tmp.path());
    let certs_dir: PathBuf = tmp.path().join("certs");
    let port = {
        let probe = std::net::TcpListener::bind("127.0.0.1:0").expect("probe");
        probe.local_addr().expect("addr").port()
    };
    let _child = Child(
        std::process::Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
            .args(["serve", "--log-format", "json", "--kubeconfig"])
            .arg(&kubeconfig)
            .args(["--cert-secret", "gpu-policy/gpu-policy-tls"])
            .args(["--webhook-config", "gpu-policy", "--certs-dir"])
            .arg(&certs_dir)
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--metrics-listen", "127.0.0.1:0", "--reload-interval", "1"])
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("start gpu-policy serve"),
    );
    eventually("the Secret and caBundles", STEP, || {
        api.get("v1", "Secret", Some(NS), NAME).is_some()
            && bundles(&api, VALIDATING, "gpu-policy")
                .iter()
                .all(Option::is_some)
            && bundles(&api, MUTATING, "gpu-policy")
                .iter()
                .all(Option::is_some)
    })
    .await;
    let tls = stored_tls(&api);
    let ca = STANDARD.encode(&tls.ca_crt);
    assert_eq!(
        bundles(&api, MUTATING, "gpu-policy"),
        vec![Some(ca.clone()); 2]
    );
    assert_eq!(bundles(&api, VALIDATING, "gpu-policy"), vec![Some(ca); 2]);
    assert_eq!(Tls::from_dir(&certs_dir), tls.files());

    // The running server presents the Secret's leaf for the Service name.
    let mut roots = RootCertStore::empty();
    roots
        .add(CertificateDer::from_pem_slice(tls.ca_crt.as_bytes()).expect("pem"))
        .expect("root");
    let client = Arc::new(
        rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("versions")
        .with_root_certificates(roots)
        .with_no_client_auth(),
    );
    let mut presented = None;
    let deadline = tokio::time::Instant::now() + STEP;
    while presented.is_none() && tokio::time::Instant::now() < deadline {
        if let Ok(tcp) = TcpStream::connect(("127.0.0.1", port)).await {
            let name = ServerName::try_from(SNI).expect("name");
            if let Ok(Ok(tls_stream)) = tokio::time::timeout(
                Duration::from_secs(5),
                TlsConnector::from(Arc::clone(&client)).connect(name, tcp),
            )
            .await
            {
                presented = tls_stream
                    .get_ref()
                    .1
                    .peer_certificates()
                    .and_then(|chain| chain.first())
                    .map(|c| c.as_ref().to_vec());
            }
        }
        if presented.is_none() {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    assert_eq!(presented, Some(der(&tls.tls_crt)));
}
