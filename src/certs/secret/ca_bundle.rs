//! Keeping `clientConfig.caBundle` of the named webhook configurations
//! equal to the Secret's CA: an update of the object as read (as JSON, so
//! fields this build does not know go back unchanged) with only its
//! `caBundle`s changed and the resourceVersion read, and no request when
//! every entry already carries the CA.

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::Client;
use kube::api::{Api, ApiResource, DynamicObject, PostParams};
use serde_json::Value;

use super::SecretError;

/// Which kind a webhook configuration name was found as (doctor reads the
/// same two kinds).
pub use crate::doctor::inventory::WebhookKind;

fn api_resource(kind: WebhookKind) -> ApiResource {
    match kind {
        WebhookKind::Mutating => ApiResource::erase::<MutatingWebhookConfiguration>(&()),
        WebhookKind::Validating => ApiResource::erase::<ValidatingWebhookConfiguration>(&()),
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookStatus {
    /// Every entry already carries the CA; nothing was sent.
    UpToDate,
    /// The `caBundle`s of `entries` entries were updated.
    Updated { entries: usize },
    /// The object changed between read and update; the next pass retries.
    Raced { reason: String },
    /// The name is neither a Mutating nor a ValidatingWebhookConfiguration.
    Missing,
    /// The API server refused or did not answer.
    Failed { reason: String },
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WebhookOutcome {
    pub name: String,
    /// `None` with [`WebhookStatus::Missing`].
    pub kind: Option<WebhookKind>,
    pub status: WebhookStatus,
}

/// Sets the `caBundle`s of every configuration named `names` to `ca`; one
/// outcome per kind a name was found as, or one `Missing` outcome.
pub(super) async fn sync_webhooks(
    client: &Client,
    names: &[String],
    ca: &[u8],
) -> Vec<WebhookOutcome> {
    let encoded = STANDARD.encode(ca);
    let mut outcomes = Vec::new();
    for name in names {
        let mutating = sync_one(client, WebhookKind::Mutating, name, &encoded).await;
        let validating = sync_one(client, WebhookKind::Validating, name, &encoded).await;
        if mutating.is_none() && validating.is_none() {
            outcomes.push(WebhookOutcome {
                name: name.clone(),
                kind: None,
                status: WebhookStatus::Missing,
            });
        }
        outcomes.extend(mutating);
        outcomes.extend(validating);
    }
    outcomes
}

async fn sync_one(
    client: &Client,
    kind: WebhookKind,
    name: &str,
    encoded: &str,
) -> Option<WebhookOutcome> {
    let outcome = |status| Some(WebhookOutcome { name: name.to_owned(), kind: Some(kind), status });
    let resource = api_resource(kind);
    let failed = |verb, error| {
        let error = SecretError::Api {
            verb,
            what: format!("{} {name}", kind.as_str()),
            scope: format!("{}.{} {name}", resource.plural, resource.group),
            source: Box::new(error),
        };
        WebhookStatus::Failed { reason: error.to_string() }
    };
    let api = Api::<DynamicObject>::all_with(client.clone(), &resource);
    let object = match api.get_opt(name).await {
        Ok(Some(object)) => object,
        Ok(None) => return None,
        Err(error) => return outcome(failed("get", error)),
    };
    let Some((updated, entries)) = with_ca_bundle(object, encoded) else {
        return outcome(WebhookStatus::UpToDate);
    };
    // metadata.resourceVersion is the one read: a concurrent writer makes
    // this a 409, never a lost update.
    match api.replace(name, &PostParams::default(), &updated).await {
        Ok(_) => outcome(WebhookStatus::Updated { entries }),
        Err(kube::Error::Api(status)) if status.code == 409 => {
            outcome(WebhookStatus::Raced { reason: status.message.clone() })
        }
        Err(error) => outcome(failed("update", error)),
    }
}

/// `object` with every entry's `caBundle` set to `encoded` (base64) and
/// nothing else changed, and how many entries that changed; `None` when
/// every entry already carries it.
fn with_ca_bundle(mut object: DynamicObject, encoded: &str) -> Option<(DynamicObject, usize)> {
    let mut entries = 0;
    let webhooks =
        object.data.get_mut("webhooks").and_then(Value::as_array_mut).into_iter().flatten();
    for webhook in webhooks {
        // clientConfig is required: an entry without one is not sent to.
        let Some(client_config) = webhook.get_mut("clientConfig").and_then(Value::as_object_mut)
        else {
            continue;
        };
        if client_config.get("caBundle").and_then(Value::as_str) != Some(encoded) {
            client_config.insert("caBundle".to_owned(), Value::String(encoded.to_owned()));
            entries += 1;
        }
    }
    // The API server keeps the managed fields of an update that sends none.
    object.metadata.managed_fields = None;
    (entries > 0).then_some((object, entries))
}

#[cfg(test)]
mod tests;
