use super::*;
use crate::cli::{Cli, Command};
use clap::Parser as _;

fn options(flags: &[&str]) -> server::Options {
    let args = ["gpu-policy", "serve"].iter().chain(flags);
    match Cli::try_parse_from(args).expect("flags parse").command {
        Command::Serve(args) => args.options(),
        other => panic!("not serve: {other:?}"),
    }
}

#[test]
fn defaults_are_a_self_signed_certificate_and_the_default_cluster() {
    let options = options(&[]);
    assert!(
        matches!(
            &options.certificates,
            Certificates::SelfSigned { dir, dns_names }
                if dir.as_path() == std::path::Path::new("certs") && dns_names.is_empty()
        ),
        "{options:?}"
    );
    assert_eq!(options.cluster, ClusterAccess::Default);
    assert_eq!(options.config, None);
    assert_eq!(options.reload_interval, Duration::from_secs(5));
    assert_eq!(options.client_auth, None);
    assert_eq!(options.budget, Limits::DEFAULT);
    assert_eq!(options.listen, SocketAddr::from(([0, 0, 0, 0], 8443)));
    assert_eq!(options.metrics_listen, SocketAddr::from(([0, 0, 0, 0], 8080)));
}

#[test]
fn certificate_flags_choose_the_source() {
    let files = options(&["--tls-cert", "a.crt", "--tls-key", "a.key", "--no-cluster"]);
    assert!(
        matches!(
            &files.certificates,
            Certificates::Files { cert, key }
                if cert.as_path() == std::path::Path::new("a.crt")
                    && key.as_path() == std::path::Path::new("a.key")
        ),
        "{files:?}"
    );
    assert_eq!(files.cluster, ClusterAccess::Disabled);

    let secret = options(&[
        "--cert-secret",
        "ops/hook-tls",
        "--webhook-config",
        "hook",
        "--dns-name",
        "hook.example.com",
        "--service-name",
        "hook",
        "--service-namespace",
        "ops",
        "--certs-dir",
        "/run/certs",
        "--kubeconfig",
        "kube.yaml",
    ]);
    let Certificates::Secret(route) = &secret.certificates else {
        panic!("{secret:?}");
    };
    assert_eq!(route.secret.to_string(), "ops/hook-tls");
    assert_eq!(route.webhook_configs, ["hook"]);
    assert_eq!(route.dns_names, ["hook.example.com"]);
    assert_eq!((route.service.as_str(), route.service_namespace.as_str()), ("hook", "ops"));
    assert_eq!(route.certs_dir, PathBuf::from("/run/certs"));
    assert_eq!(secret.cluster, ClusterAccess::Kubeconfig(PathBuf::from("kube.yaml")));
}

#[test]
fn client_certificate_flags_require_a_ca() {
    let options = options(&[
        "--client-ca",
        "clients.crt",
        "--client-name",
        "kube-apiserver",
        "--client-name",
        "apiserver.example",
    ]);
    assert_eq!(
        options.client_auth,
        Some(ClientAuthOptions {
            ca: PathBuf::from("clients.crt"),
            names: vec!["kube-apiserver".to_owned(), "apiserver.example".to_owned()],
        })
    );
    let without_ca = Cli::try_parse_from(["gpu-policy", "serve", "--client-name", "x"]);
    assert!(without_ca.is_err(), "--client-name needs --client-ca");
}

#[test]
fn budget_flags_set_the_limits() {
    let options = options(&[
        "--max-connections",
        "100",
        "--max-connections-per-peer",
        "10",
        "--max-inflight-mib",
        "40",
        "--max-inflight-mib-per-peer",
        "8",
        "--request-deadline",
        "5",
        "--idle-timeout",
        "60",
    ]);
    assert_eq!(
        options.budget,
        Limits {
            connections: 100,
            connections_per_peer: 10,
            body_bytes: 40 << 20,
            body_bytes_per_peer: 8 << 20,
            request_deadline: Duration::from_secs(5),
            idle_timeout: Duration::from_secs(60),
        }
    );
    for refused in [
        ["--max-inflight-mib-per-peer", "2"],
        ["--max-connections", "0"],
        ["--request-deadline", "0"],
    ] {
        let args = ["gpu-policy", "serve"].into_iter().chain(refused);
        assert!(Cli::try_parse_from(args).is_err(), "{refused:?}");
    }
}
