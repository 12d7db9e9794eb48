//! Keeping `clientConfig.caBundle` of the named Mutating and
//! ValidatingWebhookConfigurations equal to the Secret's CA: one JSON Patch
//! per configuration, guarded by a `test` of its resourceVersion, and no
//! request at all when every entry already carries the CA.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, TestOperation};
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use kube::api::{Api, Patch, PatchParams};
use kube::{Client, Resource};
use serde::de::DeserializeOwned;
use serde_json::Value;

use super::SecretError;

/// Which kind a webhook configuration name was found as.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WebhookKind {
    Mutating,
    Validating,
}

impl WebhookKind {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Mutating => "MutatingWebhookConfiguration",
            Self::Validating => "ValidatingWebhookConfiguration",
        }
    }
}

/// What happened to the `caBundle`s of one webhook configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WebhookStatus {
    /// Every entry already carries the CA; nothing was sent.
    UpToDate,
    /// `entries` entries were patched.
    Patched { entries: usize },
    /// The object changed between read and patch; the next pass retries.
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
    let mut outcomes = Vec::new();
    for name in names {
        let mutating = sync_one::<MutatingWebhookConfiguration>(client, name, ca).await;
        let validating = sync_one::<ValidatingWebhookConfiguration>(client, name, ca).await;
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

/// `None` when there is no such object of kind `K`.
async fn sync_one<K: WebhookConfig>(
    client: &Client,
    name: &str,
    ca: &[u8],
) -> Option<WebhookOutcome> {
    let outcome = |status| {
        Some(WebhookOutcome {
            name: name.to_owned(),
            kind: Some(K::KIND),
            status,
        })
    };
    let what = format!("{} {name}", K::KIND.as_str());
    let plural = K::plural(&()).into_owned();
    let failed = |verb, error| {
        let error = SecretError::Api {
            verb,
            what: what.clone(),
            scope: format!("{plural}.admissionregistration.k8s.io"),
            source: Box::new(error),
        };
        let reason = error.to_string();
        WebhookStatus::Failed { reason }
    };
    let api = Api::<K>::all(client.clone());
    let object = match api.get_opt(name).await {
        Ok(Some(object)) => object,
        Ok(None) => return None,
        Err(error) => return outcome(failed("get", error)),
    };
    let ops = ca_bundle_patch(
        &object.ca_bundles(),
        ca,
        object.meta().resource_version.as_deref(),
    );
    let Some(ops) = ops else {
        return outcome(WebhookStatus::UpToDate);
    };
    let entries = ops
        .0
        .iter()
        .filter(|op| matches!(op, PatchOperation::Add(_)))
        .count();
    match api
        .patch(name, &PatchParams::default(), &Patch::<()>::Json(ops))
        .await
    {
        Ok(_) => outcome(WebhookStatus::Patched { entries }),
        // 409, or 422 from the failed `test` of resourceVersion.
        Err(kube::Error::Api(status)) if matches!(status.code, 409 | 422) => {
            outcome(WebhookStatus::Raced {
                reason: status.message.clone(),
            })
        }
        Err(error) => outcome(failed("patch", error)),
    }
}

/// The JSON Patch that sets every entry's `caBundle` to `ca`, preceded by a
/// `test` of the resourceVersion it was computed from; `None` when every
/// entry already carries it.
fn ca_bundle_patch(
    bundles: &[Option<&[u8]>],
    ca: &[u8],
    resource_version: Option<&str>,
) -> Option<json_patch::Patch> {
    let encoded = Value::String(STANDARD.encode(ca));
    // The `test` makes the patch fail (422) if the object changed since it
    // was read, so entries are never patched by index into a new list.
    let mut ops: Vec<PatchOperation> = resource_version
        .map(|rv| {
            PatchOperation::Test(TestOperation {
                path: PointerBuf::from_tokens(["metadata", "resourceVersion"]),
                value: Value::String(rv.to_owned()),
            })
        })
        .into_iter()
        .collect();
    let guard = ops.len();
    for (index, bundle) in bundles.iter().enumerate() {
        if *bundle != Some(ca) {
            // `add` replaces a member that exists and creates one that does not.
            ops.push(PatchOperation::Add(AddOperation {
                path: PointerBuf::from_tokens([
                    "webhooks".to_owned(),
                    index.to_string(),
                    "clientConfig".to_owned(),
                    "caBundle".to_owned(),
                ]),
                value: encoded.clone(),
            }));
        }
    }
    (ops.len() > guard).then_some(json_patch::Patch(ops))
}

/// Mutating and ValidatingWebhookConfiguration, as far as `caBundle` goes.
trait WebhookConfig:
    Resource<DynamicType = ()> + Clone + DeserializeOwned + fmt::Debug + Send + Sync + 'static
{
    const KIND: WebhookKind;
    /// `clientConfig.caBundle` of each entry, in order.
    fn ca_bundles(&self) -> Vec<Option<&[u8]>>;
}

impl WebhookConfig for MutatingWebhookConfiguration {
    const KIND: WebhookKind = WebhookKind::Mutating;
    fn ca_bundles(&self) -> Vec<Option<&[u8]>> {
        self.webhooks
            .iter()
            .flatten()
            .map(|webhook| webhook.client_config.ca_bundle.as_ref().map(|b| &b.0[..]))
            .collect()
    }
}

impl WebhookConfig for ValidatingWebhookConfiguration {
    const KIND: WebhookKind = WebhookKind::Validating;
    fn ca_bundles(&self) -> Vec<Option<&[u8]>> {
        self.webhooks
            .iter()
            .flatten()
            .map(|webhook| webhook.client_config.ca_bundle.as_ref().map(|b| &b.0[..]))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn ca_bundle_patch_sets_only_differing_entries() {
        let ca = b"CA PEM";
        let old = b"OLD".as_slice();
        let bundles = [Some(ca.as_slice()), None, Some(old)];
        let ops = ca_bundle_patch(&bundles, ca, Some("42")).expect("a patch");
        let encoded = STANDARD.encode(ca);
        assert_eq!(
            serde_json::to_value(&ops).expect("serialises"),
            json!([
                json!({"op": "test", "path": "/metadata/resourceVersion", "value": "42"}),
                json!({"op": "add", "path": "/webhooks/1/clientConfig/caBundle", "value": encoded}),
                json!({"op": "add", "path": "/webhooks/2/clientConfig/caBundle", "value": encoded}),
            ])
        );
        assert_eq!(ca_bundle_patch(&[Some(ca.as_slice())], ca, Some("1")), None);
        assert_eq!(ca_bundle_patch(&[], ca, None), None);
    }
}
