//! What the route refuses to do: touch files when the API is away or
//! forbidden, or take over a Secret it did not make.

use super::*;

#[tokio::test]
async fn forbidden_or_unreachable_api_leaves_the_files_alone() {
    let api = FakeApi::start().await;
    api.insert(installed_secret());
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
async fn refuses_a_secret_it_did_not_make() {
    let api = FakeApi::start().await;
    let dir = tempfile::tempdir().expect("tempdir");
    let route = route(api.client(), dir.path(), &[]);
    let mut foreign = Tls::fresh(route.names(), 0, 365).secret_json();
    foreign["data"].as_object_mut().expect("data").remove("ca.key");
    api.insert(foreign);
    let error = once_err(&route).await;
    assert!(error.to_string().contains("ca.key"), "{error}");
    assert!(!route.cert_path().exists());
    assert_eq!(writes(&api), Vec::<(String, String)>::new());
}
