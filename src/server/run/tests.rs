use super::*;

fn options(certificates: Certificates, cluster: ClusterAccess) -> Options {
    Options {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        metrics_listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        config: None,
        certificates,
        cluster,
        client_auth: None,
        reload_interval: Duration::from_secs(1),
        budget: budget::Limits::DEFAULT,
    }
}

#[test]
fn config_reload_swaps_the_settings_or_keeps_them() {
    let state = AppState::new(Settings::default());
    let path = Path::new("config.yaml");
    let max_per_pod = || state.settings.load().config().max_per_pod;
    let reload_ok = |ok: u8| {
        let line = format!("gpu_policy_reload_success{{source=\"config\"}} {ok}");
        state.metrics.encode().lines().any(|l| l == line)
    };
    assert_ne!(max_per_pod(), 3);

    reload_config(&state, path, b"maxPerPod: 3\n");
    assert_eq!(max_per_pod(), 3);
    assert!(reload_ok(1), "{}", state.metrics.encode());

    for refused in [&b"maxPerPods: 4\n"[..], b"maxPerPod: \xff\n"] {
        reload_config(&state, path, refused);
        assert_eq!(max_per_pod(), 3);
        assert!(reload_ok(0), "{}", state.metrics.encode());
    }
}

#[test]
fn name_prefix_entries_are_reloaded_when_reading_the_cluster() {
    let config =
        b"allowlist:\n- {namespace: ns, kind: ReplicaSet, namePrefix: mps-control-daemon-}\n";
    let state = AppState::new(Settings::default());
    let _ = state.cluster.set(Arc::new(ClusterCache::default()));
    assert!(reload_config(&state, Path::new("config.yaml"), config).is_some());
    let allowlist = state.settings.load().config().allowlist.clone();
    assert_eq!(allowlist.len(), 1);
    assert_eq!(allowlist[0].to_string(), "ns/ReplicaSet/mps-control-daemon-*");
}

#[tokio::test]
async fn cert_secret_without_a_cluster_does_not_start() {
    let secret: SecretRef = "gpu-policy/gpu-policy-tls".parse().expect("secret");
    let config = RouteConfig::new(secret, "certs");
    let error = run(options(Certificates::Secret(config), ClusterAccess::Disabled))
        .await
        .expect_err("no cluster");
    assert!(
        matches!(&error, ServeError::SecretWithoutCluster { secret } if secret.name == "gpu-policy-tls"),
        "{error:?}"
    );
    assert_eq!(
        error.to_string(),
        "--cert-secret gpu-policy/gpu-policy-tls needs the API server, which is not \
             configured or does not answer"
    );
}

#[tokio::test]
async fn an_address_in_use_is_named() {
    let taken = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = taken.local_addr().expect("addr");
    let dir = tempfile::tempdir().expect("tempdir");
    let mut options = options(
        Certificates::SelfSigned { dir: dir.path().to_path_buf(), dns_names: Vec::new() },
        ClusterAccess::Disabled,
    );
    options.listen = addr;
    let error = run(options).await.expect_err("address in use");
    assert!(matches!(&error, ServeError::Listen { addr: a, .. } if *a == addr), "{error:?}");
    assert!(error.to_string().starts_with(&format!("cannot listen on {addr}: ")), "{error}");
}
