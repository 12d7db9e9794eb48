//! What the install's ServiceAccount may do, asked of the API server as
//! users ask it (`kubectl auth can-i`, `kubectl --as`): its RBAC (get and
//! update of its certificate Secret and of its webhook configurations, by
//! name; no `create secrets`), the guard policy that holds its updates of
//! the webhook configurations to `caBundle`, and the one that refuses
//! everyone a token Secret of the install's ServiceAccounts
//! (docs/security.md, "What the install's ServiceAccounts may do").

use serde_json::{Value, json};

use crate::support::control_plane::{ControlPlane, NAME, Webhook, WebhookOptions};
use crate::support::process::Run;

/// The webhook's ServiceAccount, as the API server names it.
const WEBHOOK_USER: &str = "system:serviceaccount:gpu-policy:gpu-policy";
const MUTATING: &str = "mutatingwebhookconfiguration";
const VALIDATING: &str = "validatingwebhookconfiguration";
/// What the webhook configuration guard answers a change it refuses.
const ONLY_CA_BUNDLE: &str = "ValidatingAdmissionPolicy 'gpu-policy-webhook-configurations' \
     with binding 'gpu-policy-webhook-configurations' denied request: the ServiceAccount \
     gpu-policy/gpu-policy may change only clientConfig.caBundle of the webhook configurations \
     gpu-policy; apply the install to change anything else";

/// `kubectl ARGS` as the webhook's ServiceAccount (`--as`), with `stdin`.
fn as_webhook(cluster: &ControlPlane, args: &[&str], stdin: Option<&str>) -> Run {
    let mut all = vec!["--as", WEBHOOK_USER];
    all.extend_from_slice(args);
    cluster.kubectl_stdin(&all, stdin)
}

/// `kubectl auth can-i VERB RESOURCE [-n NAMESPACE]` as `user` (no
/// namespace: a cluster-scoped resource): its answer.
fn can_i(cluster: &ControlPlane, user: &str, verb: &str, resource: &str, namespace: &str) -> bool {
    let mut args = vec!["auth", "can-i", verb, resource, "--as", user];
    if !namespace.is_empty() {
        args.extend(["-n", namespace]);
    }
    let run = cluster.kubectl(&args);
    match run.stdout.trim() {
        "yes" => true,
        "no" => false,
        other => panic!("can-i {verb} {resource}: {other:?} {}", run.stderr),
    }
}

/// `kubectl replace [--dry-run=server] -f -` of `object` as the webhook's
/// ServiceAccount.
fn replace_as_webhook(cluster: &ControlPlane, object: &Value, dry_run: bool) -> Run {
    let mut args = vec!["replace", "-o", "json", "-f", "-"];
    if dry_run {
        args.push("--dry-run=server");
    }
    as_webhook(cluster, &args, Some(&object.to_string()))
}

#[tokio::test]
async fn the_webhook_service_account_may_change_only_ca_bundle() {
    let Some(cluster) = ControlPlane::start() else {
        return;
    };
    // The server fills the Secret the install created empty and every
    // caBundle from it, with nothing but get and update (`install` waits).
    let webhook = Webhook::install(&cluster, WebhookOptions::default()).await;
    let validating = cluster.get(&[VALIDATING, NAME]);
    let mutating = cluster.get(&[MUTATING, NAME]);
    let with = |object: &Value, change: &dyn Fn(&mut Value)| {
        let mut changed = object.clone();
        change(&mut changed);
        changed
    };
    let rules = with(&validating, &|o| {
        o["webhooks"][0]["rules"][0]["operations"] = json!(["DELETE"]);
    });
    // A policy takes effect a moment after it is written.
    cluster.eventually("the webhook configuration guard acts", || {
        replace_as_webhook(&cluster, &rules, true).stderr.contains(ONLY_CA_BUNDLE)
    });

    let changes: Vec<(&str, Value)> = vec![
        ("rules", rules.clone()),
        (
            "the URL",
            with(&validating, &|o| {
                o["webhooks"][1]["clientConfig"]["url"] = json!("https://attacker.example/hook");
            }),
        ),
        (
            "a Service instead of the URL",
            with(&mutating, &|o| {
                let client_config = &mut o["webhooks"][0]["clientConfig"];
                let ca_bundle = client_config["caBundle"].clone();
                *client_config = json!({
                    "service": {"namespace": "default", "name": "attacker", "path": "/mutate"},
                    "caBundle": ca_bundle,
                });
            }),
        ),
        (
            "the namespace selector",
            with(&mutating, &|o| {
                o["webhooks"][0]["namespaceSelector"] = json!({});
            }),
        ),
        (
            "the failure policy",
            with(&validating, &|o| o["webhooks"][0]["failurePolicy"] = json!("Ignore")),
        ),
        (
            "an entry less",
            with(&validating, &|o| {
                if let Some(hooks) = o["webhooks"].as_array_mut() {
                    hooks.pop();
                }
            }),
        ),
        (
            "an owner that would take the configuration with it",
            with(&validating, &|o| {
                o["metadata"]["ownerReferences"] = json!([{
                    "apiVersion": "v1", "kind": "ConfigMap", "name": "short-lived",
                    "uid": "00000000-0000-0000-0000-000000000001",
                }]);
            }),
        ),
        ("a label", with(&mutating, &|o| o["metadata"]["labels"]["extra"] = json!("1"))),
    ];
    for (what, changed) in &changes {
        let refused = replace_as_webhook(&cluster, changed, false);
        assert!(
            refused.code != 0 && refused.stderr.contains(ONLY_CA_BUNDLE),
            "{what}: {refused:?}"
        );
    }
    // Nothing was written: the objects are as the install left them.
    assert_eq!(cluster.get(&[VALIDATING, NAME]), validating);
    assert_eq!(cluster.get(&[MUTATING, NAME]), mutating);
    // The cluster admin is not held by it.
    cluster
        .kubectl_stdin(&["replace", "--dry-run=server", "-f", "-"], Some(&rules.to_string()))
        .success();
    // Creating or deleting one: RBAC refuses first.
    let delete = as_webhook(&cluster, &["delete", VALIDATING, NAME], None);
    assert!(delete.stderr.contains("Forbidden"), "{delete:?}");
    let mut other = validating.clone();
    other["metadata"] = json!({"name": "another"});
    let create = as_webhook(&cluster, &["create", "-f", "-"], Some(&other.to_string()));
    assert!(create.stderr.contains("Forbidden"), "{create:?}");

    // Its caBundle, in every entry: allowed, and stored.
    let foreign = "LS0tLS1CRUdJTiBDRVJUSUZJQ0FURS0tLS0tCg==";
    let ca_bundles = with(&validating, &|o| {
        for hook in o["webhooks"].as_array_mut().into_iter().flatten() {
            hook["clientConfig"]["caBundle"] = json!(foreign);
        }
    });
    let stored = replace_as_webhook(&cluster, &ca_bundles, false).success().value();
    assert!(
        stored["webhooks"]
            .as_array()
            .is_some_and(|hooks| hooks.iter().all(|h| h["clientConfig"]["caBundle"] == foreign)),
        "{stored}"
    );
    // And the server, updating as that ServiceAccount, puts its CA back.
    let secret = cluster.get(&["secret", "-n", NAME, "gpu-policy-tls"]);
    let ca = secret["data"]["ca.crt"].clone();
    cluster.eventually("the server restores its caBundle", || {
        cluster.get(&[VALIDATING, NAME])["webhooks"]
            .as_array()
            .is_some_and(|hooks| hooks.iter().all(|h| h["clientConfig"]["caBundle"] == ca))
    });
    let log = webhook.log();
    assert!(
        !log.contains("cannot keep caBundle current"),
        "the server's updates pass the guard: {log}"
    );
}

/// What `manifests` renders for a server outside the cluster.
fn manifests(cluster: &ControlPlane) -> String {
    cluster.manifests(&["--webhook-url", "https://127.0.0.1:9"])
}

/// The install as [`manifests`] renders it, applied (no server).
fn installed() -> Option<ControlPlane> {
    let cluster = ControlPlane::start()?;
    cluster.apply(&manifests(&cluster));
    Some(cluster)
}

#[test]
fn the_webhook_service_account_has_no_secret_but_its_own() {
    let Some(cluster) = installed() else {
        return;
    };
    // The Secret is there, empty, for the server to fill.
    let secret = cluster.get(&["secret", "-n", NAME, "gpu-policy-tls"]);
    assert_eq!(secret["type"], "Opaque");
    assert_eq!(secret.get("data"), None, "{secret}");
    for (verb, resource, namespace, allowed) in [
        ("get", "secrets/gpu-policy-tls", NAME, true),
        ("update", "secrets/gpu-policy-tls", NAME, true),
        ("create", "secrets", NAME, false),
        ("create", "secrets", "default", false),
        ("patch", "secrets/gpu-policy-tls", NAME, false),
        ("delete", "secrets/gpu-policy-tls", NAME, false),
        ("get", "secrets/another", NAME, false),
        ("list", "secrets", NAME, false),
        ("create", "serviceaccounts/token", NAME, false),
        ("get", "mutatingwebhookconfigurations/gpu-policy", "", true),
        ("update", "mutatingwebhookconfigurations/gpu-policy", "", true),
        ("update", "validatingwebhookconfigurations/gpu-policy", "", true),
        ("patch", "validatingwebhookconfigurations/gpu-policy", "", false),
        ("update", "validatingwebhookconfigurations/another", "", false),
        ("create", "validatingwebhookconfigurations", "", false),
        ("delete", "mutatingwebhookconfigurations/gpu-policy", "", false),
        ("get", "namespaces/default", "", false),
        ("list", "namespaces", "", true),
    ] {
        assert_eq!(
            can_i(&cluster, WEBHOOK_USER, verb, resource, namespace),
            allowed,
            "{verb} {resource} in {namespace:?}"
        );
    }
    let create = as_webhook(&cluster, &["create", "secret", "generic", "mine", "-n", NAME], None);
    assert!(
        create.code != 0
            && create
                .stderr
                .contains(&format!("User \"{WEBHOOK_USER}\" cannot create resource \"secrets\"")),
        "{create:?}"
    );

    // Filled as the server fills it (an update as its ServiceAccount), the
    // Secret keeps its data when the install is applied again, server-side
    // (as `installed` applied it) or client-side.
    let mut filled = cluster.get(&["secret", "-n", NAME, "gpu-policy-tls"]);
    let data = json!({"ca.crt": "Y2E=", "ca.key": "a2V5", "tls.crt": "Y3J0", "tls.key": "a2V5"});
    filled["data"] = data.clone();
    as_webhook(&cluster, &["replace", "-f", "-"], Some(&filled.to_string())).success();
    cluster.apply(&manifests(&cluster));
    cluster.kubectl_stdin(&["apply", "-f", "-"], Some(&manifests(&cluster))).success();
    let secret = cluster.get(&["secret", "-n", NAME, "gpu-policy-tls"]);
    assert_eq!(secret["data"], data, "{secret}");
}

/// A `kubernetes.io/service-account-token` Secret in `namespace` for the
/// ServiceAccount `service_account`.
fn token_secret(name: &str, namespace: &str, service_account: &str) -> String {
    format!(
        "apiVersion: v1\nkind: Secret\nmetadata:\n  name: {name}\n  namespace: {namespace}\n  \
         annotations:\n    kubernetes.io/service-account.name: {service_account}\n\
         type: kubernetes.io/service-account-token\n"
    )
}

#[test]
fn no_one_gets_a_token_secret_of_the_install_service_account() {
    let Some(cluster) = installed() else {
        return;
    };
    let refusal = "ValidatingAdmissionPolicy 'gpu-policy-service-account-tokens' with binding \
                   'gpu-policy-service-account-tokens' denied request: no Secret of type \
                   kubernetes.io/service-account-token may name the ServiceAccount \
                   gpu-policy/gpu-policy of gpu-policy: its token would never expire; use \
                   kubectl create token for a short-lived one";
    let borrowed = token_secret("borrowed", NAME, NAME);
    cluster
        .eventually("the token guard acts", || cluster.dry_run(&borrowed).stderr.contains(refusal));
    // Refused to the cluster admin itself.
    let created = cluster.create(&borrowed);
    assert!(created.code != 0 && created.stderr.contains(refusal), "{created:?}");
    assert_ne!(cluster.kubectl(&["get", "secret", "borrowed", "-n", NAME]).code, 0);
    // A token Secret of another ServiceAccount, and one of a namesake in
    // another namespace, are not the install's business.
    cluster.create(&token_secret("other", NAME, "other")).success();
    cluster.namespace("team", None);
    cluster.create(&token_secret("namesake", "team", NAME)).success();
    // Renaming the other one to the install's: refused too.
    let renamed = cluster.kubectl(&[
        "annotate",
        "secret",
        "other",
        "-n",
        NAME,
        "--overwrite",
        &format!("kubernetes.io/service-account.name={NAME}"),
    ]);
    assert!(renamed.code != 0 && renamed.stderr.contains(refusal), "{renamed:?}");
    let other = cluster.get(&["secret", "other", "-n", NAME]);
    assert_eq!(other["metadata"]["annotations"]["kubernetes.io/service-account.name"], "other");
}

#[test]
fn the_guard_policies_type_check_clean() {
    let Some(cluster) = installed() else {
        return;
    };
    let _controller = cluster.start_policy_status_controller();
    let names = ["gpu-policy-webhook-configurations", "gpu-policy-service-account-tokens"];
    let checked = || -> Vec<Value> {
        names
            .iter()
            .map(|name| cluster.get(&["validatingadmissionpolicy", name]))
            .filter(|p| p["status"]["observedGeneration"] == p["metadata"]["generation"])
            .collect()
    };
    cluster.eventually("both policies type-checked", || checked().len() == names.len());
    for policy in checked() {
        assert!(policy["status"]["typeChecking"].is_object(), "{policy:#}");
        let warnings = &policy["status"]["typeChecking"]["expressionWarnings"];
        assert!(warnings.as_array().is_none_or(Vec::is_empty), "{policy:#}");
    }
}
