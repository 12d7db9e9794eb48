//! Renewal of the leaf, and its races between writers.

use super::*;

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
    assert_ne!(resource_version(&stored_secret(&api)), resource_version(&inserted));
    let new_leaf = leaf(&renewed.tls_crt);
    assert_eq!(new_leaf.issuer, subject(&old.ca_crt).0);
    assert!(new_leaf.not_before <= now());
    let life = new_leaf.not_after - now();
    assert!((364 * DAY..=366 * DAY).contains(&life), "{life}");
    assert_eq!(Tls::from_dir(dir.path()), renewed.files());
    // Signed by the same CA: the old ca.crt (already in caBundle) verifies it.
    let presented =
        handshake(dir.path(), &old.ca_crt, SNI).await.expect("verifies against the unchanged CA");
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

#[tokio::test]
async fn renewal_conflict_adopts_the_other_writers_pair() {
    let api = Arc::new(FakeApi::start().await);
    let dir = tempfile::tempdir().expect("tempdir");
    let names = route(api.client(), dir.path(), &[]).names().to_vec();
    let old = Tls::fresh(&names, 20, 30);
    api.insert(old.secret_json());

    // Another replica renews between this one's read and its write: the
    // replace carries the stale resourceVersion and gets a real 409.
    let ca = PemPair { cert: old.ca_crt.clone(), key: old.ca_key.clone() };
    let theirs =
        Tls::new(&ca, &issue(&old.ca_crt, &old.ca_key, &names, now(), 365).expect("their leaf"));
    let hook = {
        let api = Arc::clone(&api);
        let theirs = theirs.clone();
        Box::new(move || {
            api.insert(theirs.secret_json());
        })
    };
    let proxy = hook_proxy(api.addr(), "PUT /api/v1/namespaces/gpu-policy/secrets/", hook).await;
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
    assert_eq!(api.count_requests("GET", &[SECRET_PATH]), 2, "{:?}", api.requests());
    // The next pass renews for real.
    assert!(matches!(once(&route).await.action, SecretAction::Renewed { .. }));
}

#[tokio::test]
async fn replicas_renewing_together_agree() {
    let api = FakeApi::start().await;
    let dirs: Vec<_> = (0..3).map(|_| tempfile::tempdir().expect("tempdir")).collect();
    let routes: Vec<_> = dirs.iter().map(|dir| route(api.client(), dir.path(), &[])).collect();
    let old = Tls::fresh(routes[0].names(), 20, 30);
    api.insert(old.secret_json());
    let outcomes =
        within("replicas", futures::future::join_all(routes.iter().map(SecretRoute::ensure_once)))
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
