//! `doctor`'s read of gpu-policy's own install (`inventory_read.rs` reads
//! the GPU stack): the `gpu-policy` webhook configurations, each `caBundle`
//! verified against the chain of the certificate Secret (read for its
//! certificates only, its key never kept); the Deployment; whether the
//! allowlist's DaemonSets exist (a list by name or by prefix: the
//! webhook's RBAC grants list and watch of those names, no get).

use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration, WebhookClientConfig,
};
use k8s_openapi::api::apps::v1::Deployment as WireDeployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret};
use kube::Client;
use kube::api::{Api, GroupVersionKind, ListParams};
use serde::de::IgnoredAny;

use super::api_status::{is_forbidden, unless_forbidden};
use super::list::{INVENTORY_PAGES, Wire, list_seen};
use super::names::{is_dns_label, is_dns_subdomain};
use crate::certs::pki::bundle_trusts;
use crate::certs::{CA_FILE, CERT_FILE};
use crate::doctor::inventory::{AllowlistTarget, Deployment, Install, Seen, Webhook, WebhookKind};
use crate::install::{CERT_SECRET, NAME};
use crate::settings::Settings;

pub const CONFIG_KEY: &str = "config.yaml";

/// A GET's outcome as a part of the inventory (403 a state).
fn seen_get<T>(got: Result<T, kube::Error>, rbac: &'static str) -> Result<Seen<T>, kube::Error> {
    match got {
        Ok(value) => Ok(Seen::Complete(value)),
        Err(error) if is_forbidden(&error) => Ok(Seen::Forbidden { rbac }),
        Err(error) => Err(error),
    }
}

/// The configuration text of the install's ConfigMap (`namespace/gpu-policy`,
/// key `config.yaml`); None when it is not there or not readable.
pub async fn install_config(
    client: &Client,
    namespace: &str,
) -> Result<Option<String>, kube::Error> {
    if !is_dns_label(namespace) {
        return Ok(None);
    }
    let api = Api::<ConfigMap>::namespaced(client.clone(), namespace);
    let map = unless_forbidden(api.get_opt(NAME).await)?;
    Ok(map.and_then(|map| map.data?.remove(CONFIG_KEY)))
}

pub(super) async fn read_install(
    client: &Client,
    namespace: &str,
    settings: &Settings,
    now: i64,
) -> Result<Install, kube::Error> {
    let namespaced = is_dns_label(namespace);
    let chain = match namespaced {
        true => serving_chain(client, namespace).await?,
        false => None,
    };
    let webhooks = read_webhooks(client, chain.as_ref(), now).await?;
    let deployment = match namespaced {
        true => {
            let api = Api::<WireDeployment>::namespaced(client.clone(), namespace);
            let got = api.get_opt(NAME).await.map(|found| {
                found.map(|deployment| Deployment {
                    namespace: namespace.to_owned(),
                    name: NAME.to_owned(),
                    replicas: i64::from(deployment.spec.and_then(|s| s.replicas).unwrap_or(1)),
                    ready: i64::from(deployment.status.and_then(|s| s.ready_replicas).unwrap_or(0)),
                })
            });
            seen_get(got, "get deployments.apps")?
        }
        false => Seen::Complete(None),
    };
    let allowlist = read_allowlist(client, settings).await?;
    Ok(Install { namespace: namespace.to_owned(), webhooks, deployment, allowlist })
}

/// The Secret's `tls.crt` (and `ca.crt` after it, for a chain the leaf's
/// issuer completes); None when there is no readable Secret.
async fn serving_chain(client: &Client, namespace: &str) -> Result<Option<Vec<u8>>, kube::Error> {
    let api = Api::<Secret>::namespaced(client.clone(), namespace);
    let secret = unless_forbidden(api.get_opt(CERT_SECRET).await)?;
    let Some(mut data) = secret.and_then(|secret| secret.data) else {
        return Ok(None);
    };
    let Some(ByteString(mut chain)) = data.remove(CERT_FILE) else {
        return Ok(None);
    };
    if let Some(ByteString(ca)) = data.remove(CA_FILE) {
        chain.push(b'\n');
        chain.extend(ca);
    }
    Ok(Some(chain))
}

fn webhook(
    configuration: WebhookKind,
    name: String,
    client_config: WebhookClientConfig,
    chain: Option<&Vec<u8>>,
    now: i64,
) -> Webhook {
    let trusts_serving_certificate = chain.map(|chain| match &client_config.ca_bundle {
        Some(ByteString(bundle)) if !bundle.is_empty() => {
            bundle_trusts(bundle, chain, now).map_err(|why| why.to_string())
        }
        _ => Err("caBundle is empty".to_owned()),
    });
    Webhook {
        configuration,
        name,
        trusts_serving_certificate,
        service: client_config
            .service
            .map(|service| format!("{}/{}", service.namespace, service.name)),
    }
}

async fn read_webhooks(
    client: &Client,
    chain: Option<&Vec<u8>>,
    now: i64,
) -> Result<Seen<Vec<Webhook>>, kube::Error> {
    const RBAC: &str =
        "get mutatingwebhookconfigurations and validatingwebhookconfigurations named gpu-policy";
    let mutating = Api::<MutatingWebhookConfiguration>::all(client.clone());
    let validating = Api::<ValidatingWebhookConfiguration>::all(client.clone());
    let (mutating, validating) =
        match (mutating.get_opt(NAME).await, validating.get_opt(NAME).await) {
            (Ok(m), Ok(v)) => (m, v),
            (Err(error), _) | (_, Err(error)) if is_forbidden(&error) => {
                return Ok(Seen::Forbidden { rbac: RBAC });
            }
            (Err(error), _) | (_, Err(error)) => return Err(error),
        };
    if mutating.is_none() && validating.is_none() {
        return Ok(Seen::NotServed);
    }
    let mutating = mutating.and_then(|m| m.webhooks).into_iter().flatten();
    let validating = validating.and_then(|v| v.webhooks).into_iter().flatten();
    let webhooks = mutating
        .map(|hook| (WebhookKind::Mutating, hook.name, hook.client_config))
        .chain(validating.map(|hook| (WebhookKind::Validating, hook.name, hook.client_config)))
        .map(|(kind, name, config)| webhook(kind, name, config, chain, now))
        .collect();
    Ok(Seen::Complete(webhooks))
}

async fn read_allowlist(
    client: &Client,
    settings: &Settings,
) -> Result<Vec<AllowlistTarget>, kube::Error> {
    const RBAC: &str = "list and watch daemonsets.apps in the allowlist's namespaces";
    let gvk = GroupVersionKind::gvk("apps", "v1", "DaemonSet");
    let mut targets = Vec::new();
    let defaults = crate::settings::Config::default().allowlist;
    for entry in &settings.config().allowlist {
        if entry.kind != "DaemonSet" || !is_dns_label(&entry.namespace) {
            continue;
        }
        let namespace = Some(entry.namespace.as_str());
        let pages = INVENTORY_PAGES.daemon_sets;
        let found = match &entry.name_prefix {
            Some(prefix) => {
                let params = ListParams::default();
                let keep =
                    |wire: Wire| wire.metadata.name.starts_with(prefix.as_str()).then_some(());
                list_seen(client, &gvk, namespace, params, pages, RBAC, keep).await?
            }
            // A list by name, as the webhook's watch reads it: RBAC grants
            // the webhook list and watch on these names, and no get.
            // A DNS subdomain (what Kubernetes names a DaemonSet) has no `,` or
            // `=` to break the selector.
            None if is_dns_subdomain(&entry.name) => {
                let by_name =
                    ListParams::default().fields(&format!("metadata.name={}", entry.name));
                let keep = |_: IgnoredAny| Some(());
                list_seen(client, &gvk, namespace, by_name, pages, RBAC, keep).await?
            }
            None => continue,
        };
        let exists = found.map(|found| !found.is_empty());
        targets.push(AllowlistTarget {
            entry: entry.to_string(),
            namespace: entry.namespace.clone(),
            name: entry.name_prefix.clone().unwrap_or_else(|| entry.name.clone()),
            by_prefix: entry.name_prefix.is_some(),
            default_entry: defaults.contains(entry),
            exists,
        });
    }
    Ok(targets)
}
