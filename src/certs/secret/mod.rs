//! One CA and serving pair shared by every replica through a Secret
//! (`serve --cert-secret NS/NAME [--webhook-config NAME]...`). Each pass
//! ([`SecretRoute::ensure_once`]):
//!
//! 1. reads the Secret, which the install creates empty (the server may
//!    get and update it, never create it); when empty, fills it with a new
//!    CA (10 years) and serving certificate (1 year);
//! 2. re-issues the serving certificate from the Secret's CA when less than
//!    a third of its life remains, when it misses a wanted name or does not
//!    verify against the CA; regenerates everything when the CA is unusable
//!    or would expire first. Every write carries the resourceVersion read:
//!    on 409 `Conflict` the other replica's pair is re-read and adopted,
//!    never overwritten (`verdict` decides, `store` acts);
//! 3. writes `tls.key`, `tls.crt`, `ca.crt` into the certificates directory
//!    (atomically, only the files whose bytes changed), where the
//!    [`CertificateResolver`](super::CertificateResolver) picks them up;
//! 4. keeps `clientConfig.caBundle` of the named webhook configurations
//!    equal to `ca.crt` (`ca_bundle`).
//!
//! [`SecretRoute::run`] repeats that every interval, so drift is repaired.
//! A failed pass leaves the files, hence the pair being served, as they
//! were.

mod ca_bundle;
mod config;
mod error;
mod store;
mod verdict;

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use kube::Client;

use super::pki::unix_now;
use super::{CA_FILE, CERT_FILE, KEY_FILE};
use crate::poll;
pub use ca_bundle::{WebhookKind, WebhookOutcome, WebhookStatus};
pub use config::{DEFAULT_SERVICE, DEFAULT_SERVICE_NAMESPACE, RouteConfig, SecretRef};
pub use error::SecretError;

/// What a pass did with the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretAction {
    /// The Secret was empty, as the install creates it; this replica filled
    /// it with a new CA and serving certificate.
    Filled,
    /// The Secret holds a good pair; nothing was written.
    Kept,
    /// A new serving certificate was issued from the Secret's CA.
    Renewed { reason: String },
    /// The CA was unusable; a new CA and serving certificate replaced it.
    Regenerated { reason: String },
    /// The write lost to another replica (409 Conflict); its pair is used.
    AdoptedConflict,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub action: SecretAction,
    /// Some file in the certificates directory was (re)written.
    pub files_written: bool,
    /// One entry per kind a name was found as, or one `Missing` entry.
    pub webhooks: Vec<WebhookOutcome>,
}

impl Outcome {
    /// Logs what changed at info, problems at error, the rest at debug.
    pub fn log(&self, secret: &SecretRef) {
        let secret = secret.to_string();
        match &self.action {
            SecretAction::Filled => {
                tracing::info!(%secret, "filled the empty certificate Secret with a new CA");
            }
            SecretAction::Kept => tracing::debug!(%secret, "certificate Secret is current"),
            SecretAction::Renewed { reason } => tracing::info!(
                %secret,
                %reason,
                "issued a new serving certificate from the Secret's CA"
            ),
            SecretAction::Regenerated { reason } => tracing::warn!(
                %secret,
                %reason,
                "replaced the Secret's CA and serving certificate"
            ),
            SecretAction::AdoptedConflict => tracing::info!(
                %secret,
                "another replica updated the certificate Secret first; using its pair"
            ),
        }
        if self.files_written {
            tracing::info!(%secret, "wrote the Secret's pair to the certificates directory");
        }
        for webhook in &self.webhooks {
            let kind = webhook.kind.map_or("webhook configuration", WebhookKind::as_str);
            let name = webhook.name.as_str();
            match &webhook.status {
                WebhookStatus::UpToDate => tracing::debug!(kind, name, "caBundle is current"),
                WebhookStatus::Updated { entries } => {
                    tracing::info!(kind, name, entries, "caBundle set to the Secret's CA");
                }
                WebhookStatus::Raced { reason } => tracing::info!(
                    kind,
                    name,
                    %reason,
                    "changed while updating caBundle; retrying on the next pass"
                ),
                WebhookStatus::Missing => tracing::error!(
                    name,
                    "no MutatingWebhookConfiguration or ValidatingWebhookConfiguration of this \
                     name; its caBundle cannot be kept"
                ),
                WebhookStatus::Failed { reason } => {
                    tracing::error!(kind, name, %reason, "cannot keep caBundle current");
                }
            }
        }
    }
}

/// See the module documentation.
#[derive(Clone)]
pub struct SecretRoute {
    client: Client,
    config: RouteConfig,
    names: Vec<String>,
}

impl fmt::Debug for SecretRoute {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SecretRoute")
            .field("config", &self.config)
            .field("names", &self.names)
            .finish_non_exhaustive()
    }
}

impl SecretRoute {
    pub fn new(client: Client, config: RouteConfig) -> Self {
        let names = config.wanted_names();
        Self { client, config, names }
    }

    pub fn config(&self) -> &RouteConfig {
        &self.config
    }

    pub fn names(&self) -> &[String] {
        &self.names
    }

    pub fn cert_path(&self) -> PathBuf {
        self.config.certs_dir.join(CERT_FILE)
    }

    pub fn key_path(&self) -> PathBuf {
        self.config.certs_dir.join(KEY_FILE)
    }

    pub fn ca_path(&self) -> PathBuf {
        self.config.certs_dir.join(CA_FILE)
    }

    /// One pass: Secret, files, then `caBundle`s. An error leaves the files
    /// as they were and skips the `caBundle`s; a webhook configuration that
    /// cannot be read or updated is reported in [`Outcome::webhooks`].
    pub async fn ensure_once(&self) -> Result<Outcome, SecretError> {
        let (action, data) = self.ensure_secret(unix_now()).await?;
        let files_written = self.write_files(&data)?;
        let webhooks =
            ca_bundle::sync_webhooks(&self.client, &self.config.webhook_configs, &data.ca_crt)
                .await;
        Ok(Outcome { action, files_written, webhooks })
    }

    /// Runs [`ensure_once`](Self::ensure_once) every `every` (at least
    /// 10 ms), the first time after `every`: call `ensure_once` first to
    /// have files to serve. Logs each outcome; a failure is logged with its
    /// reason and retried on the next tick while the last good pair keeps
    /// being served.
    pub async fn run(self, every: Duration) {
        // Not a bytes-changed poll: each pass reads the Secret and the
        // webhook configurations, and repairs drift in any of them.
        let mut ticker = poll::ticker(every);
        let mut failing = false;
        loop {
            ticker.tick().await;
            match self.ensure_once().await {
                Ok(outcome) => {
                    if failing {
                        tracing::info!(secret = %self.config.secret, "certificate Secret reachable again");
                        failing = false;
                    }
                    outcome.log(&self.config.secret);
                }
                Err(error) => {
                    failing = true;
                    tracing::error!(
                        secret = %self.config.secret,
                        %error,
                        "certificate Secret pass failed; the last good pair keeps serving, \
                         retrying"
                    );
                }
            }
        }
    }
}
