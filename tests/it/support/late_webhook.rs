//! A second mutating webhook for the `apiserver` suite, called after
//! gpu-policy's (webhook configurations run in name order): it adds a
//! container `late` whose env asks for every card, once, as a sidecar
//! injector does. gpu-policy is then called again
//! (`reinvocationPolicy: IfNeeded`) and must pin it without writing
//! anything twice (`tests/apiserver/pod_updates.rs`).
//!
//! HTTP/1.1 over TLS on loopback, with a certificate for 127.0.0.1 from a
//! CA of its own, which the configuration carries as its caBundle.

use std::convert::Infallible;
use std::sync::Arc;

use base64::Engine as _;
use http_body_util::{BodyExt as _, Full};
use hyper::body::{Bytes, Incoming};
use hyper::service::service_fn;
use hyper::{Request, Response};
use hyper_util::rt::TokioIo;
use rcgen::{CertificateParams, KeyPair};
use rustls::pki_types::pem::PemObject as _;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use serde_json::{Value, json};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;

use super::tls::test_ca;

/// The name of its configuration: after `gpu-policy`.
pub const CONFIGURATION: &str = "zz-late-sidecar";

/// The running webhook, on a thread and runtime of its own (the tests
/// that use it block theirs on kubectl); stopped when dropped.
pub struct LateWebhook {
    port: u16,
    ca_pem: String,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
}

impl Drop for LateWebhook {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl LateWebhook {
    pub fn start() -> Self {
        let (issuer, ca_pem) = test_ca();
        let params = CertificateParams::new(vec!["127.0.0.1".to_owned()]).expect("params");
        let key = KeyPair::generate().expect("key");
        let cert = params.signed_by(&key, &issuer).expect("certificate");
        let chain = vec![CertificateDer::from(cert.der().to_vec())];
        let key = PrivateKeyDer::from_pem_slice(key.serialize_pem().as_bytes()).expect("key PEM");
        let config = rustls::ServerConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .expect("protocol versions")
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .expect("server config");
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
        listener.set_nonblocking(true).expect("non-blocking");
        let port = listener.local_addr().expect("local address").port();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .expect("runtime");
            runtime.block_on(async move {
                let listener = TcpListener::from_std(listener).expect("listener");
                let serve = async {
                    while let Ok((socket, _)) = listener.accept().await {
                        let acceptor = acceptor.clone();
                        tokio::spawn(async move {
                            let Ok(tls) = acceptor.accept(socket).await else {
                                return;
                            };
                            let _ = hyper::server::conn::http1::Builder::new()
                                .serve_connection(TokioIo::new(tls), service_fn(answer))
                                .await;
                        });
                    }
                };
                tokio::select! {
                    () = serve => {}
                    _ = stopped => {}
                }
            });
        });
        Self { port, ca_pem, stop: Some(stop) }
    }

    /// Its MutatingWebhookConfiguration, for pods created in `namespace`.
    pub fn configuration(&self, namespace: &str) -> String {
        let ca = base64::engine::general_purpose::STANDARD.encode(&self.ca_pem);
        json!({
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingWebhookConfiguration",
            "metadata": {"name": CONFIGURATION},
            "webhooks": [{
                "name": "late.sidecar.example.com",
                "clientConfig": {"url": format!("https://127.0.0.1:{}/", self.port), "caBundle": ca},
                "rules": [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"],
                           "resources": ["pods"], "scope": "Namespaced"}],
                "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
                "sideEffects": "None",
                "admissionReviewVersions": ["v1"],
                "failurePolicy": "Fail",
                "reinvocationPolicy": "IfNeeded",
                "timeoutSeconds": 5,
            }],
        })
        .to_string()
    }
}

/// The container `late` added to a pod that has none.
async fn answer(request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let body = request.into_body().collect().await.map(|body| body.to_bytes()).unwrap_or_default();
    let review: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let request = &review["request"];
    let has_late = request["object"]["spec"]["containers"]
        .as_array()
        .is_some_and(|containers| containers.iter().any(|c| c["name"] == "late"));
    let mut response = json!({"uid": request["uid"], "allowed": true});
    if !has_late {
        let patch = json!([{"op": "add", "path": "/spec/containers/-", "value": {
            "name": "late", "image": "busybox",
            "env": [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}],
        }}]);
        response["patchType"] = json!("JSONPatch");
        response["patch"] =
            json!(base64::engine::general_purpose::STANDARD.encode(patch.to_string()));
    }
    let answer = json!({
        "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response,
    });
    Ok(Response::builder()
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from(answer.to_string())))
        .unwrap_or_default())
}
