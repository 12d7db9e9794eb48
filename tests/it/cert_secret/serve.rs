//! `run` following the Secret, and `serve --cert-secret` as a process.

use super::*;
use crate::support::process;

#[tokio::test]
async fn run_follows_secret_changes_and_repairs_drift() {
    let api = FakeApi::start().await;
    api.insert(installed_secret());
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
    eventually("files follow the Secret", STEP, || Tls::from_dir(&dir_path) == rotated.files())
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
    let presented = handshake(&dir_path, &rotated.ca_crt, SNI).await.expect("verifies");
    assert_eq!(presented, der(&rotated.tls_crt));

    // Drift in a caBundle is put back.
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, Some("c3RhbGU=")]));
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
        .args(["serve", "--cert-secret", "gpu-policy/gpu-policy-tls", "--no-cluster"])
        .output()
        .expect("run gpu-policy");
    assert_eq!(output.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(stderr.contains("--cert-secret") && stderr.contains("--no-cluster"), "{stderr}");

    let output = std::process::Command::new(env!("CARGO_BIN_EXE_gpu-policy"))
        .args(["serve", "--webhook-config", "gpu-policy"])
        .output()
        .expect("run gpu-policy");
    assert_eq!(output.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&output.stderr).contains("--cert-secret"));
}

#[tokio::test]
async fn serve_with_cert_secret_fills_serves_and_injects() {
    let api = FakeApi::start().await;
    api.insert(installed_secret());
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, None]));
    api.insert(webhook_config(VALIDATING, "gpu-policy", [None, None]));
    let tmp = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(tmp.path());
    let certs_dir: PathBuf = tmp.path().join("certs");
    let port = free_port();
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
        api.get("v1", "Secret", Some(NS), NAME).is_some_and(|s| s["data"]["ca.crt"].is_string())
            && bundles(&api, VALIDATING, "gpu-policy").iter().all(Option::is_some)
            && bundles(&api, MUTATING, "gpu-policy").iter().all(Option::is_some)
    })
    .await;
    let tls = stored_tls(&api);
    let ca = STANDARD.encode(&tls.ca_crt);
    assert_eq!(bundles(&api, MUTATING, "gpu-policy"), vec![Some(ca.clone()); 2]);
    assert_eq!(bundles(&api, VALIDATING, "gpu-policy"), vec![Some(ca); 2]);
    assert_eq!(Tls::from_dir(&certs_dir), tls.files());

    // The running server presents the Secret's leaf for the Service name.
    let client = client_config(tls.ca_crt.as_bytes());
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

#[tokio::test]
async fn serve_without_its_secret_does_not_start_and_says_why() {
    let api = FakeApi::start().await;
    let tmp = tempfile::tempdir().expect("tempdir");
    let kubeconfig = api.write_kubeconfig(tmp.path());
    let args: Vec<String> = [
        "serve",
        "--kubeconfig",
        &kubeconfig.display().to_string(),
        "--cert-secret",
        "gpu-policy/gpu-policy-tls",
        "--certs-dir",
        &tmp.path().join("certs").display().to_string(),
        "--listen",
        "127.0.0.1:0",
        "--metrics-listen",
        "127.0.0.1:0",
    ]
    .map(str::to_owned)
    .to_vec();
    let run = within("serve exits", process::gpu_policy_beside(args)).await;
    assert_ne!(run.code, 0);
    assert!(
        run.stderr.contains(
            "Secret gpu-policy/gpu-policy-tls does not exist: the install creates it empty for \
             the server to fill; apply the install again or run `kubectl -n gpu-policy create \
             secret generic gpu-policy-tls`"
        ),
        "{}",
        run.stderr
    );
    assert_eq!(api.count_requests("POST", &[SECRETS_PATH]), 0);
}
