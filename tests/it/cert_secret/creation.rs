//! The first start: the Secret created, reused, or adopted from the replica
//! that won the race.

use super::*;

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
