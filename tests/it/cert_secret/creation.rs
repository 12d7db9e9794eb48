//! The first start: the Secret the install created empty filled, reused, or
//! adopted from the replica that won the race; a missing one is an error.

use super::*;

#[tokio::test]
async fn fills_the_empty_secret_of_the_install_and_serves_it() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    api.insert(installed_secret());

    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::Filled);
    assert!(outcome.files_written);
    // An update of the Secret as read: never a create.
    assert_eq!(writes(&api).len(), 1, "{:?}", writes(&api));
    assert_eq!(api.count_requests("PUT", &[SECRET_PATH]), 1);

    let secret = stored_secret(&api);
    assert_eq!(secret["type"], "Opaque");
    let mut keys: Vec<&str> =
        secret["data"].as_object().expect("data").keys().map(String::as_str).collect();
    keys.sort_unstable();
    assert_eq!(keys, ["ca.crt", "ca.key", "tls.crt", "tls.key"]);
    let tls = Tls::from_secret(&secret);
    assert_eq!(Tls::from_dir(dir.path()), tls.files());
    assert!(!dir.path().join("ca.key").exists(), "the CA key stays in the Secret");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode =
            std::fs::metadata(dir.path().join("tls.key")).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o600);
    }

    // The names: defaults, 127.0.0.1 and <service>.<ns>.svc.
    let served = leaf(&tls.tls_crt);
    for name in DEFAULT_DNS_NAMES.iter().copied().chain([SNI]) {
        assert!(served.dns.iter().any(|d| d == name), "{name}: {:?}", served.dns);
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
    let presented = handshake(dir.path(), &tls.ca_crt, SNI).await.expect("verifies against ca.crt");
    assert_eq!(presented, der(&tls.tls_crt));
    let other = Tls::fresh(route.names(), 0, 365);
    let refused =
        handshake(dir.path(), &other.ca_crt, SNI).await.expect_err("another CA must not verify");
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
    assert_eq!(resource_version(&stored_secret(&api)), resource_version(&inserted));
    assert_eq!(Tls::from_dir(dir.path()), existing.files());
}

#[tokio::test]
async fn a_missing_secret_is_an_error_that_says_how_to_make_it() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    let error = once_err(&route).await;
    assert!(matches!(error, SecretError::Missing { .. }), "{error:?}");
    assert_eq!(
        error.to_string(),
        "Secret gpu-policy/gpu-policy-tls does not exist: the install creates it empty for the \
         server to fill; apply the install again or run `kubectl -n gpu-policy create secret \
         generic gpu-policy-tls`"
    );
    assert_eq!(writes(&api), Vec::<(String, String)>::new());
    assert!(!route.cert_path().exists());
    // Made as the message says (`kubectl create secret generic`: Opaque,
    // no data), it is filled.
    api.insert(installed_secret());
    assert_eq!(once(&route).await.action, SecretAction::Filled);
    assert_eq!(api.count_requests("POST", &[SECRETS_PATH]), 0);
}

#[tokio::test]
async fn losing_the_fill_race_adopts_the_winner() {
    let api = Arc::new(FakeApi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let names = route(api.client(), dir.path(), &[]).names().to_vec();
    api.insert(installed_secret());
    // Another replica fills the Secret between this one's read and its
    // write: the replace carries the stale resourceVersion, a real 409.
    let winner = Tls::fresh(&names, 0, 365);
    let hook = {
        let api = Arc::clone(&api);
        let mut filled = winner.secret_json();
        filled["type"] = json!("Opaque");
        Box::new(move || {
            api.insert(filled);
        })
    };
    let proxy = hook_proxy(api.addr(), "PUT /api/v1/namespaces/gpu-policy/secrets/", hook).await;
    let route = route(client_via(proxy), dir.path(), &[]);

    let outcome = once(&route).await;
    assert_eq!(outcome.action, SecretAction::AdoptedConflict);
    assert_eq!(api.count_requests("PUT", &[SECRET_PATH]), 1);
    assert_eq!(stored_tls(&api), winner, "the winner's pair is not overwritten");
    assert_eq!(Tls::from_dir(dir.path()), winner.files());
    assert_eq!(once(&route).await.action, SecretAction::Kept);
}

#[tokio::test]
async fn replicas_starting_together_share_one_pair() {
    let api = FakeApi::start().await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let routes: Vec<_> = dirs.iter().map(|dir| route(api.client(), dir.path(), &[])).collect();
    api.insert(installed_secret());
    let outcomes =
        within("replicas", futures::future::join_all(routes.iter().map(SecretRoute::ensure_once)))
            .await;
    let actions: Vec<SecretAction> =
        outcomes.into_iter().map(|o| o.expect("ensure_once").action).collect();
    // One fills it; the others lose the race, or read it filled.
    assert_eq!(actions.iter().filter(|a| **a == SecretAction::Filled).count(), 1, "{actions:?}");
    assert!(
        actions.iter().all(|a| matches!(
            a,
            SecretAction::Filled | SecretAction::AdoptedConflict | SecretAction::Kept
        )),
        "{actions:?}"
    );
    let stored = stored_tls(&api);
    for dir in &dirs {
        assert_eq!(Tls::from_dir(dir.path()), stored.files());
    }
}
