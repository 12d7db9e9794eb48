//! caBundle injection into the webhook configurations.

use super::*;

#[tokio::test]
async fn ca_bundle_is_updated_once_then_left_alone_then_repaired() {
    let api = FakeApi::start().await;
    api.insert(installed_secret());
    let dir = tempfile::tempdir().expect("tempdir");
    let stale = STANDARD.encode("-----BEGIN CERTIFICATE-----\nstale\n");
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, Some(stale.as_str())]));
    api.insert(webhook_config(VALIDATING, "gpu-policy", [None, None]));
    api.insert(webhook_config(VALIDATING, "gpu-policy-guard", [Some(stale.as_str()), None]));
    let route = route(api.client(), dir.path(), &["gpu-policy", "gpu-policy-guard", "absent"]);

    let outcome = once(&route).await;
    let ca = STANDARD.encode(stored_tls(&api).ca_crt);
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Mutating)),
        WebhookStatus::Updated { entries: 2 }
    );
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Validating)),
        WebhookStatus::Updated { entries: 2 }
    );
    assert_eq!(
        webhook(&outcome, "gpu-policy-guard", Some(WebhookKind::Validating)),
        WebhookStatus::Updated { entries: 2 }
    );
    assert_eq!(
        outcome.webhooks.iter().filter(|w| w.name == "absent").collect::<Vec<_>>(),
        vec![&WebhookOutcome {
            name: "absent".to_owned(),
            kind: None,
            status: WebhookStatus::Missing,
        }]
    );
    for (kind, name) in
        [(MUTATING, "gpu-policy"), (VALIDATING, "gpu-policy"), (VALIDATING, "gpu-policy-guard")]
    {
        assert_eq!(
            bundles(&api, kind, name),
            vec![Some(ca.clone()), Some(ca.clone())],
            "{kind} {name}"
        );
        // The rest of each entry is untouched.
        let object = api.get(ADMISSION, kind, None, name).expect("config");
        assert_eq!(object["webhooks"][1]["name"], "hook1.gpu-policy.io");
        assert_eq!(object["webhooks"][1]["clientConfig"]["service"]["path"], "/hook1");
    }
    assert_eq!(api.count_requests("PUT", &["webhookconfigurations"]), 3);
    assert_eq!(api.count_requests("PATCH", &["webhookconfigurations"]), 0);

    // Second pass: everything is current, no write at all.
    api.clear_requests();
    let outcome = once(&route).await;
    for kind in [WebhookKind::Mutating, WebhookKind::Validating] {
        assert_eq!(webhook(&outcome, "gpu-policy", Some(kind)), WebhookStatus::UpToDate);
    }
    assert_eq!(writes(&api), Vec::<(String, String)>::new());

    // Drift: someone resets one entry; the next pass puts the CA back.
    api.insert(webhook_config(VALIDATING, "gpu-policy", [Some(ca.as_str()), Some(stale.as_str())]));
    api.clear_requests();
    let outcome = once(&route).await;
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Validating)),
        WebhookStatus::Updated { entries: 1 }
    );
    assert_eq!(
        webhook(&outcome, "gpu-policy", Some(WebhookKind::Mutating)),
        WebhookStatus::UpToDate
    );
    assert_eq!(bundles(&api, VALIDATING, "gpu-policy"), vec![Some(ca.clone()), Some(ca.clone())]);
    assert_eq!(writes(&api).len(), 1, "{:?}", writes(&api));
    assert_eq!(
        api.count_requests(
            "PUT",
            &["/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/gpu-policy"]
        ),
        1
    );
}

#[tokio::test]
async fn ca_bundle_update_that_races_is_retried_next_pass() {
    let api = FakeApi::start().await;
    api.insert(installed_secret());
    let dir = tempfile::tempdir().expect("tempdir");
    api.insert(webhook_config(MUTATING, "gpu-policy", [None, None]));
    let route = route(api.client(), dir.path(), &["gpu-policy"]);
    // The resourceVersion read is stale, as when another writer got there
    // between our read and our update.
    api.fail_next("PUT", "/apis/admissionregistration.k8s.io", 409, 1);
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
        WebhookStatus::Updated { entries: 2 }
    );
}

#[tokio::test]
async fn forbidden_update_is_reported_per_configuration() {
    let api = FakeApi::start().await;
    api.insert(installed_secret());
    let dir = tempfile::tempdir().expect("tempdir");
    api.insert(webhook_config(VALIDATING, "gpu-policy", [None, None]));
    let route = route(api.client(), dir.path(), &["gpu-policy"]);
    api.fail_next(
        "PUT",
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
            && reason.contains("`update` on validatingwebhookconfigurations.admissionregistration.k8s.io gpu-policy"),
        "{reason}"
    );
}
