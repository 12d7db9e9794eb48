//! Certificates without extra tools: one CA and serving pair shared by every
//! replica through a `kubernetes.io/tls` Secret.
//!
//! `gpu-policy serve --cert-secret NS/NAME [--webhook-config NAME]...` runs a
//! [`SecretRoute`]. Each pass ([`SecretRoute::ensure_once`]):
//!
//! 1. reads the Secret; when absent, creates it with a new CA (10 years) and
//!    a serving certificate (1 year) in `ca.crt`, `ca.key`, `tls.crt`,
//!    `tls.key`. A create that loses the race (409 `AlreadyExists`) adopts
//!    the winner's pair, so all replicas serve the same one;
//! 2. re-issues the serving certificate from the Secret's CA when less than
//!    a third of its life remains, when it does not cover the wanted names,
//!    or when it does not verify against the CA; regenerates everything
//!    when the CA itself is unusable or would expire before a new serving
//!    certificate. The write is a `replace` carrying the resourceVersion
//!    that was read: on 409 `Conflict` the other writer's pair is re-read
//!    and adopted, never overwritten;
//! 3. writes `tls.key`, `tls.crt`, `ca.crt` into the certificates directory
//!    (atomically, only the files whose bytes changed), where the
//!    [`CertificateResolver`](super::CertificateResolver) file poller picks
//!    them up;
//! 4. keeps `clientConfig.caBundle` of every entry of the named
//!    Mutating/ValidatingWebhookConfigurations equal to `ca.crt`, with a
//!    JSON Patch guarded by a `test` of `metadata.resourceVersion`, and no
//!    request at all when they already are.
//!
//! [`SecretRoute::run`] repeats that every interval, so drift in the Secret
//! or in a `caBundle` is repaired. Errors (RBAC, API server down) are
//! returned with the reason; the files on disk, hence the pair being served,
//! are left as they were.
//!
//! Steps 1 and 2 decide in `verdict` (pure: may the route manage this
//! Secret, what does its pair need) and act in `store` (the Secret's reads
//! and writes), which also does step 3; step 4 is `ca_bundle`.

mod ca_bundle;
mod store;
mod verdict;

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use kube::Client;

use super::pki::{PkiError, unix_now, wanted_names};
use super::{CA_FILE, CERT_FILE, CertError, KEY_FILE};
use crate::poll;
pub use ca_bundle::{WebhookKind, WebhookOutcome, WebhookStatus};

/// The Secret type the route reads and writes.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// Data key of the CA's private key (the other keys are [`CA_FILE`],
/// [`CERT_FILE`] and [`KEY_FILE`]).
pub const CA_KEY: &str = "ca.key";
/// Default Service name and namespace: `gpu-policy.gpu-policy.svc`.
pub const DEFAULT_SERVICE: &str = "gpu-policy";
pub const DEFAULT_SERVICE_NAMESPACE: &str = "gpu-policy";

/// `NAMESPACE/NAME` of a Secret, as given to `--cert-secret`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecretRef {
    pub namespace: String,
    pub name: String,
}

impl FromStr for SecretRef {
    type Err = String;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        let Some((namespace, name)) = value.split_once('/') else {
            return Err(format!("{value:?}: expected NAMESPACE/NAME"));
        };
        let valid = |part: &str, max: usize| {
            !part.is_empty()
                && part.len() <= max
                && part
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.')
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !valid(namespace, 63) || namespace.contains('.') {
            return Err(format!("{value:?}: {namespace:?} is not a namespace name"));
        }
        if !valid(name, 253) {
            return Err(format!("{value:?}: {name:?} is not a Secret name"));
        }
        Ok(Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        })
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// What a [`SecretRoute`] manages.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConfig {
    /// The Secret holding the shared pair.
    pub secret: SecretRef,
    /// Where `tls.crt`, `tls.key` and `ca.crt` are written.
    pub certs_dir: PathBuf,
    /// Names wanted besides [`DEFAULT_DNS_NAMES`](super::DEFAULT_DNS_NAMES),
    /// `127.0.0.1` and `<service>.<service_namespace>.svc` (an entry that
    /// parses as an IP address becomes an IP SAN).
    pub dns_names: Vec<String>,
    pub service: String,
    pub service_namespace: String,
    /// Mutating and/or ValidatingWebhookConfiguration names whose `caBundle`
    /// is kept equal to the CA.
    pub webhook_configs: Vec<String>,
}

impl RouteConfig {
    /// The defaults: Service `gpu-policy/gpu-policy`, no extra names, no
    /// webhook configuration.
    pub fn new(secret: SecretRef, certs_dir: impl Into<PathBuf>) -> Self {
        Self {
            secret,
            certs_dir: certs_dir.into(),
            dns_names: Vec::new(),
            service: DEFAULT_SERVICE.to_owned(),
            service_namespace: DEFAULT_SERVICE_NAMESPACE.to_owned(),
            webhook_configs: Vec::new(),
        }
    }

    /// Every name the serving certificate must cover.
    pub fn wanted_names(&self) -> Vec<String> {
        let mut extra = self.dns_names.clone();
        let (service, namespace) = (self.service.trim(), self.service_namespace.trim());
        if !service.is_empty() && !namespace.is_empty() {
            extra.push(format!("{service}.{namespace}.svc"));
        }
        wanted_names(&extra)
    }
}

/// Why a pass failed. The files on disk were not changed.
///
/// The message ends with the cause's own text, so it reads whole on one
/// line; the cause is also kept as the error's source.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
    /// The API server refused or did not answer.
    #[error("cannot {verb} {what}: {}", api_reason(verb, scope, source))]
    Api {
        verb: &'static str,
        what: String,
        /// What `verb` is needed on, named when RBAC refuses it.
        scope: String,
        // Boxed: kube's error is large, and every pass returns this type.
        #[source]
        source: Box<kube::Error>,
    },
    /// The Secret exists but is not one this route may manage or serve.
    #[error("Secret {secret} cannot be used: {reason}")]
    Unusable { secret: SecretRef, reason: String },
    /// The serving pair in the Secret does not load.
    #[error("Secret {secret} cannot be used: its serving pair does not load: {source}")]
    UnloadablePair {
        secret: SecretRef,
        #[source]
        source: Box<CertError>,
    },
    /// The CA certificate in the Secret is not PEM.
    #[error("Secret {secret} cannot be used: {CA_FILE}: {source}")]
    UnreadableCa {
        secret: SecretRef,
        #[source]
        source: rustls::pki_types::pem::Error,
    },
    #[error("cannot generate certificates for Secret {secret}: {source}")]
    Generate {
        secret: SecretRef,
        #[source]
        source: PkiError,
    },
    #[error(transparent)]
    Files(#[from] CertError),
}

impl SecretError {
    /// HTTP status of the API server's answer, `None` when there was none.
    pub fn code(&self) -> Option<u16> {
        match self {
            Self::Api { source, .. } => match source.as_ref() {
                kube::Error::Api(status) => Some(status.code),
                _ => None,
            },
            _ => None,
        }
    }

    /// Whether RBAC refused the request (HTTP 403).
    pub fn is_forbidden(&self) -> bool {
        self.code() == Some(403)
    }
}

/// A readable reason for an API error; a 403 names RBAC and the missing
/// permission.
fn api_reason(verb: &str, scope: &str, error: &kube::Error) -> String {
    match error {
        kube::Error::Api(status) if status.code == 403 => format!(
            "forbidden by RBAC: the service account needs `{verb}` on {scope}: {}",
            status.message
        ),
        kube::Error::Api(status) => {
            format!("{} {}: {}", status.code, status.reason, status.message)
        }
        other => format!("the API server did not answer: {other}"),
    }
}

/// What a pass did with the Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SecretAction {
    /// The Secret did not exist; this replica created it.
    Created,
    /// Another replica created it first (409 AlreadyExists); its pair is used.
    AdoptedCreated,
    /// The Secret holds a good pair; nothing was written.
    Kept,
    /// A new serving certificate was issued from the Secret's CA.
    Renewed { reason: String },
    /// The CA was unusable; a new CA and serving certificate replaced it.
    Regenerated { reason: String },
    /// The write lost to another replica (409 Conflict); its pair is used.
    AdoptedConflict,
}

/// The result of one [`SecretRoute::ensure_once`].
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
            SecretAction::Created => {
                tracing::info!(%secret, "created the certificate Secret with a new CA");
            }
            SecretAction::AdoptedCreated => tracing::info!(
                %secret,
                "another replica created the certificate Secret first; using its pair"
            ),
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
            let kind = webhook
                .kind
                .map_or("webhook configuration", WebhookKind::as_str);
            let name = webhook.name.as_str();
            match &webhook.status {
                WebhookStatus::UpToDate => tracing::debug!(kind, name, "caBundle is current"),
                WebhookStatus::Patched { entries } => {
                    tracing::info!(kind, name, entries, "caBundle set to the Secret's CA");
                }
                WebhookStatus::Raced { reason } => tracing::info!(
                    kind,
                    name,
                    %reason,
                    "changed while patching caBundle; retrying on the next pass"
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

/// Keeps the Secret, the certificate files and the `caBundle`s in step. See
/// the module documentation.
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
        Self {
            client,
            config,
            names,
        }
    }

    pub fn config(&self) -> &RouteConfig {
        &self.config
    }

    /// The names the serving certificate must cover.
    pub fn names(&self) -> &[String] {
        &self.names
    }

    /// `tls.crt` in the certificates directory.
    pub fn cert_path(&self) -> PathBuf {
        self.config.certs_dir.join(CERT_FILE)
    }

    /// `tls.key` in the certificates directory.
    pub fn key_path(&self) -> PathBuf {
        self.config.certs_dir.join(KEY_FILE)
    }

    /// `ca.crt` in the certificates directory.
    pub fn ca_path(&self) -> PathBuf {
        self.config.certs_dir.join(CA_FILE)
    }

    /// One pass: Secret, files, then `caBundle`s. An error leaves the files
    /// as they were and skips the `caBundle`s; a webhook configuration that
    /// cannot be read or patched is reported in [`Outcome::webhooks`].
    pub async fn ensure_once(&self) -> Result<Outcome, SecretError> {
        let (action, data) = self.ensure_secret(unix_now()).await?;
        let files_written = self.write_files(&data)?;
        let webhooks =
            ca_bundle::sync_webhooks(&self.client, &self.config.webhook_configs, &data.ca_crt)
                .await;
        Ok(Outcome {
            action,
            files_written,
            webhooks,
        })
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_ref_parses_namespace_slash_name() {
        let parsed: SecretRef = "gpu-policy/gpu-policy-tls".parse().expect("parse");
        assert_eq!(parsed.namespace, "gpu-policy");
        assert_eq!(parsed.name, "gpu-policy-tls");
        assert_eq!(parsed.to_string(), "gpu-policy/gpu-policy-tls");
        for bad in [
            "name", "/name", "ns/", "ns/a/b", "NS/name", "ns/Name", "a.b/name",
        ] {
            assert!(bad.parse::<SecretRef>().is_err(), "{bad} accepted");
        }
    }

    #[test]
    fn wanted_names_add_the_service() {
        let secret: SecretRef = "ns/tls".parse().expect("parse");
        let config = RouteConfig {
            service: "hook".to_owned(),
            service_namespace: "ops".to_owned(),
            dns_names: vec!["extra.example.com".to_owned()],
            ..RouteConfig::new(secret, "dir")
        };
        let names = config.wanted_names();
        for name in ["localhost", "gpu-policy.gpu-policy.svc", "127.0.0.1"] {
            assert!(names.iter().any(|n| n == name), "{name} missing: {names:?}");
        }
        assert!(names.iter().any(|n| n == "extra.example.com"));
        assert!(names.iter().any(|n| n == "hook.ops.svc"));
    }
}
