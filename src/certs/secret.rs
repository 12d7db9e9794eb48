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

use std::collections::{BTreeMap, HashSet};
use std::fmt;
use std::fs;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;
use json_patch::jsonptr::PointerBuf;
use json_patch::{AddOperation, PatchOperation, TestOperation};
use k8s_openapi::ByteString;
use k8s_openapi::api::admissionregistration::v1::{
    MutatingWebhookConfiguration, ValidatingWebhookConfiguration,
};
use k8s_openapi::api::core::v1::Secret;
use kube::api::{Api, ObjectMeta, Patch, PatchParams, PostParams};
use kube::{Client, Resource};
use rcgen::{KeyPair, PublicKeyData as _};
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;
use serde::de::DeserializeOwned;
use serde_json::Value;
use x509_parser::extensions::GeneralName;

use super::{
    CA_FILE, CA_VALIDITY_DAYS, CERT_FILE, CertError, DAY, KEY_FILE, MIN_POLL,
    SERVING_VALIDITY_DAYS, check_names, generate_ca, issue, parse_pair, unix_now, verify_chain,
    wanted_names, write_atomically,
};

/// The Secret type the route reads and writes.
pub const TLS_SECRET_TYPE: &str = "kubernetes.io/tls";
/// Data key of the CA's private key (the other keys are [`CA_FILE`],
/// [`CERT_FILE`] and [`KEY_FILE`]).
pub const CA_KEY: &str = "ca.key";
/// Default Service name and namespace: `gpu-policy.gpu-policy.svc`.
pub const DEFAULT_SERVICE: &str = "gpu-policy";
pub const DEFAULT_SERVICE_NAMESPACE: &str = "gpu-policy";

const MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
const MANAGED_BY: &str = "gpu-policy";

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
#[derive(Debug, Clone, thiserror::Error)]
pub enum SecretError {
    /// The API server refused or did not answer.
    #[error("cannot {verb} {what}: {reason}")]
    Api {
        verb: &'static str,
        what: String,
        /// HTTP status of the answer, `None` when there was none.
        code: Option<u16>,
        reason: String,
    },
    /// The Secret exists but is not one this route may manage or serve.
    #[error("Secret {secret} cannot be used: {reason}")]
    Unusable { secret: SecretRef, reason: String },
    #[error("cannot generate certificates for Secret {secret}: {reason}")]
    Generate { secret: SecretRef, reason: String },
    #[error(transparent)]
    Files(#[from] CertError),
}

impl SecretError {
    /// Whether RBAC refused the request (HTTP 403).
    pub fn is_forbidden(&self) -> bool {
        matches!(
            self,
            Self::Api {
                code: Some(403),
                ..
            }
        )
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

/// The four data entries of the Secret.
#[derive(Clone, PartialEq, Eq)]
struct TlsData {
    ca_crt: Vec<u8>,
    ca_key: Vec<u8>,
    tls_crt: Vec<u8>,
    tls_key: Vec<u8>,
}

impl fmt::Debug for TlsData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsData")
            .field("ca_crt", &String::from_utf8_lossy(&self.ca_crt))
            .field("tls_crt", &String::from_utf8_lossy(&self.tls_crt))
            .finish_non_exhaustive()
    }
}

/// What the Secret's pair needs.
#[derive(Debug, PartialEq, Eq)]
enum Verdict {
    Good,
    RenewLeaf(String),
    RegenerateAll(String),
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
        let webhooks = self.sync_webhooks(&data.ca_crt).await;
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
        let every = every.max(MIN_POLL);
        let mut interval = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let mut failing = false;
        loop {
            interval.tick().await;
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

    fn secrets(&self) -> Api<Secret> {
        Api::namespaced(self.client.clone(), &self.config.secret.namespace)
    }

    fn secret_error(&self, verb: &'static str, error: kube::Error) -> SecretError {
        let what = format!("Secret {}", self.config.secret);
        api_error(verb, what, "secrets", Some(&self.config.secret), error)
    }

    fn unusable(&self, reason: impl Into<String>) -> SecretError {
        SecretError::Unusable {
            secret: self.config.secret.clone(),
            reason: reason.into(),
        }
    }

    /// The pair to serve, creating, renewing or adopting it as needed.
    async fn ensure_secret(&self, now: i64) -> Result<(SecretAction, TlsData), SecretError> {
        let api = self.secrets();
        let name = self.config.secret.name.as_str();
        let existing = api
            .get_opt(name)
            .await
            .map_err(|error| self.secret_error("get", error))?;
        let Some(existing) = existing else {
            let fresh = self.generate_all(now)?;
            return match api
                .create(&PostParams::default(), &self.new_secret(&fresh))
                .await
            {
                Ok(_) => Ok((SecretAction::Created, fresh)),
                Err(kube::Error::Api(status)) if status.code == 409 => {
                    let winner = self.reread(&api).await?;
                    Ok((SecretAction::AdoptedCreated, winner))
                }
                Err(error) => Err(self.secret_error("create", error)),
            };
        };
        let data = self.read_data(&existing)?;
        let (action, updated) = match evaluate(&data, &self.names, now) {
            Verdict::Good => return Ok((SecretAction::Kept, data)),
            Verdict::RenewLeaf(reason) => {
                let mut names = self.names.clone();
                names.extend(san_strings(&data.tls_crt));
                let names = dedup_names(names);
                let leaf = issue(
                    &String::from_utf8_lossy(&data.ca_crt),
                    &String::from_utf8_lossy(&data.ca_key),
                    &names,
                    now,
                    SERVING_VALIDITY_DAYS,
                )
                .map_err(|reason| self.generate_error(reason))?;
                let updated = TlsData {
                    tls_crt: leaf.cert.into_bytes(),
                    tls_key: leaf.key.into_bytes(),
                    ..data
                };
                (SecretAction::Renewed { reason }, updated)
            }
            Verdict::RegenerateAll(reason) => (
                SecretAction::Regenerated { reason },
                self.generate_all(now)?,
            ),
        };
        let mut secret = existing;
        secret.metadata.managed_fields = None;
        let entries = secret.data.get_or_insert_with(BTreeMap::new);
        for (key, value) in updated.entries() {
            entries.insert(key.to_owned(), ByteString(value.to_vec()));
        }
        // metadata.resourceVersion is the one read: a concurrent writer
        // makes this a 409 instead of a lost update.
        match api.replace(name, &PostParams::default(), &secret).await {
            Ok(_) => Ok((action, updated)),
            Err(kube::Error::Api(status)) if status.code == 409 => {
                let winner = self.reread(&api).await?;
                Ok((SecretAction::AdoptedConflict, winner))
            }
            Err(error) => Err(self.secret_error("update", error)),
        }
    }

    /// The Secret another replica just wrote.
    async fn reread(&self, api: &Api<Secret>) -> Result<TlsData, SecretError> {
        let secret = api
            .get_opt(&self.config.secret.name)
            .await
            .map_err(|error| self.secret_error("get", error))?
            .ok_or_else(|| self.unusable("deleted while being written"))?;
        self.read_data(&secret)
    }

    fn read_data(&self, secret: &Secret) -> Result<TlsData, SecretError> {
        read_data(secret).map_err(|reason| self.unusable(reason))
    }

    fn generate_error(&self, reason: String) -> SecretError {
        SecretError::Generate {
            secret: self.config.secret.clone(),
            reason,
        }
    }

    fn generate_all(&self, now: i64) -> Result<TlsData, SecretError> {
        let ca = generate_ca(now, CA_VALIDITY_DAYS).map_err(|r| self.generate_error(r))?;
        let leaf = issue(&ca.cert, &ca.key, &self.names, now, SERVING_VALIDITY_DAYS)
            .map_err(|r| self.generate_error(r))?;
        Ok(TlsData {
            ca_crt: ca.cert.into_bytes(),
            ca_key: ca.key.into_bytes(),
            tls_crt: leaf.cert.into_bytes(),
            tls_key: leaf.key.into_bytes(),
        })
    }

    fn new_secret(&self, data: &TlsData) -> Secret {
        Secret {
            metadata: ObjectMeta {
                name: Some(self.config.secret.name.clone()),
                namespace: Some(self.config.secret.namespace.clone()),
                labels: Some(BTreeMap::from([(
                    MANAGED_BY_LABEL.to_owned(),
                    MANAGED_BY.to_owned(),
                )])),
                ..ObjectMeta::default()
            },
            type_: Some(TLS_SECRET_TYPE.to_owned()),
            data: Some(
                data.entries()
                    .into_iter()
                    .map(|(key, value)| (key.to_owned(), ByteString(value.to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

    /// Writes the files whose bytes differ, key first. Refuses a pair that
    /// would not load, so the resolver never sees it.
    fn write_files(&self, data: &TlsData) -> Result<bool, SecretError> {
        let (cert, key, ca) = (self.cert_path(), self.key_path(), self.ca_path());
        parse_pair(&data.tls_crt, &data.tls_key, &cert, &key)
            .map_err(|error| self.unusable(format!("its serving pair does not load: {error}")))?;
        CertificateDer::from_pem_slice(&data.ca_crt)
            .map_err(|error| self.unusable(format!("{CA_FILE}: {error}")))?;
        fs::create_dir_all(&self.config.certs_dir).map_err(|error| CertError::Write {
            path: self.config.certs_dir.clone(),
            reason: error.to_string(),
        })?;
        let mut written = false;
        for (path, bytes, private) in [
            (&key, &data.tls_key, true),
            (&cert, &data.tls_crt, false),
            (&ca, &data.ca_crt, false),
        ] {
            if fs::read(path).is_ok_and(|on_disk| on_disk == *bytes) {
                continue;
            }
            write_atomically(path, bytes, private)?;
            written = true;
        }
        Ok(written)
    }

    async fn sync_webhooks(&self, ca: &[u8]) -> Vec<WebhookOutcome> {
        let mut outcomes = Vec::new();
        for name in &self.config.webhook_configs {
            let mutating = self
                .sync_one::<MutatingWebhookConfiguration>(name, ca)
                .await;
            let validating = self
                .sync_one::<ValidatingWebhookConfiguration>(name, ca)
                .await;
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
    async fn sync_one<K: WebhookConfig>(&self, name: &str, ca: &[u8]) -> Option<WebhookOutcome> {
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
            let reason = api_error(verb, what.clone(), &plural, None, error).to_string();
            WebhookStatus::Failed { reason }
        };
        let api = Api::<K>::all(self.client.clone());
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
}

impl TlsData {
    fn entries(&self) -> [(&'static str, &[u8]); 4] {
        [
            (CA_FILE, &self.ca_crt),
            (CA_KEY, &self.ca_key),
            (CERT_FILE, &self.tls_crt),
            (KEY_FILE, &self.tls_key),
        ]
    }
}

/// The Secret's data, if this route may manage it.
fn read_data(secret: &Secret) -> Result<TlsData, String> {
    let type_ = secret.type_.as_deref().unwrap_or("Opaque");
    if type_ != TLS_SECRET_TYPE {
        return Err(format!(
            "its type is {type_}, not {TLS_SECRET_TYPE}; delete it or name another Secret"
        ));
    }
    let get = |key: &str| {
        secret
            .data
            .as_ref()
            .and_then(|data| data.get(key))
            .map(|value| value.0.clone())
            .unwrap_or_default()
    };
    let data = TlsData {
        ca_crt: get(CA_FILE),
        ca_key: get(CA_KEY),
        tls_crt: get(CERT_FILE),
        tls_key: get(KEY_FILE),
    };
    if data.ca_key.is_empty() && !(data.ca_crt.is_empty() && data.tls_crt.is_empty()) {
        return Err(format!(
            "it holds no {CA_KEY}, so gpu-policy did not make it (cert-manager?); mount it and \
             pass --tls-cert/--tls-key instead"
        ));
    }
    Ok(data)
}

/// What the pair in `data` needs to serve `names` at `now`.
fn evaluate(data: &TlsData, names: &[String], now: i64) -> Verdict {
    if data.ca_crt.is_empty() && data.ca_key.is_empty() {
        return Verdict::RegenerateAll("the Secret holds no CA".to_owned());
    }
    let ca = match check_ca(data, now) {
        Ok(ca) => ca,
        Err(reason) => return Verdict::RegenerateAll(reason),
    };
    match check_leaf(data, ca, names, now) {
        Ok(()) => Verdict::Good,
        Err(reason) => Verdict::RenewLeaf(reason),
    }
}

/// The CA certificate, when it and its key can sign a full-length serving
/// certificate.
fn check_ca(data: &TlsData, now: i64) -> Result<CertificateDer<'static>, String> {
    let ca = CertificateDer::from_pem_slice(&data.ca_crt).map_err(|e| format!("{CA_FILE}: {e}"))?;
    let (_, x509) =
        x509_parser::parse_x509_certificate(&ca).map_err(|e| format!("{CA_FILE}: {e}"))?;
    if !x509.is_ca() {
        return Err(format!("{CA_FILE} is not a CA certificate"));
    }
    let validity = x509.validity();
    if validity.not_before.timestamp() > now {
        return Err(format!("{CA_FILE} is not valid yet"));
    }
    let remaining = validity.not_after.timestamp().saturating_sub(now);
    if remaining < SERVING_VALIDITY_DAYS * DAY {
        return Err(format!(
            "{CA_FILE} expires in {} days, before a new serving certificate would",
            remaining / DAY
        ));
    }
    let key = std::str::from_utf8(&data.ca_key)
        .map_err(|e| e.to_string())
        .and_then(|pem| KeyPair::from_pem(pem).map_err(|e| e.to_string()))
        .map_err(|e| format!("{CA_KEY}: {e}"))?;
    if key.der_bytes() != x509.public_key().subject_public_key.data.as_ref() {
        return Err(format!("{CA_KEY} does not match {CA_FILE}"));
    }
    Ok(ca.clone())
}

/// Ok when the serving pair loads, verifies against `ca`, covers `names`
/// and has at least a third of its life left.
fn check_leaf(
    data: &TlsData,
    ca: CertificateDer<'_>,
    names: &[String],
    now: i64,
) -> Result<(), String> {
    let pair = parse_pair(
        &data.tls_crt,
        &data.tls_key,
        Path::new(CERT_FILE),
        Path::new(KEY_FILE),
    )
    .map_err(|e| e.to_string())?;
    verify_chain(ca, &pair.key.cert, now)
        .map_err(|e| format!("{CERT_FILE} does not verify against {CA_FILE}: {e}"))?;
    let Some(leaf) = pair.key.cert.first() else {
        return Err(format!("{CERT_FILE}: no certificate"));
    };
    let (_, x509) =
        x509_parser::parse_x509_certificate(leaf).map_err(|e| format!("{CERT_FILE}: {e}"))?;
    check_names(&x509, names).map_err(|e| format!("{CERT_FILE} {e}"))?;
    let validity = x509.validity();
    let (not_before, not_after) = (
        validity.not_before.timestamp(),
        validity.not_after.timestamp(),
    );
    let life = not_after.saturating_sub(not_before);
    let remaining = not_after.saturating_sub(now);
    if remaining.saturating_mul(3) < life {
        return Err(format!(
            "{CERT_FILE} has less than a third of its life left ({} hours of {} days)",
            remaining / 3600,
            life / DAY
        ));
    }
    Ok(())
}

/// The DNS and IP subject alternative names of the first certificate in
/// `cert_pem` (none when it does not parse).
fn san_strings(cert_pem: &[u8]) -> Vec<String> {
    let Ok(der) = CertificateDer::from_pem_slice(cert_pem) else {
        return Vec::new();
    };
    let Ok((_, x509)) = x509_parser::parse_x509_certificate(&der) else {
        return Vec::new();
    };
    let Ok(Some(san)) = x509.subject_alternative_name() else {
        return Vec::new();
    };
    san.value
        .general_names
        .iter()
        .filter_map(|name| match name {
            GeneralName::DNSName(dns) => Some((*dns).to_owned()),
            GeneralName::IPAddress(bytes) => match bytes.len() {
                4 => <[u8; 4]>::try_from(*bytes)
                    .ok()
                    .map(|ip| IpAddr::from(ip).to_string()),
                16 => <[u8; 16]>::try_from(*bytes)
                    .ok()
                    .map(|ip| IpAddr::from(ip).to_string()),
                _ => None,
            },
            _ => None,
        })
        .collect()
}

/// `names` without blanks and duplicates (case-insensitive), order kept.
fn dedup_names(names: Vec<String>) -> Vec<String> {
    let mut seen = HashSet::new();
    names
        .into_iter()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty() && seen.insert(name.to_ascii_lowercase()))
        .collect()
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

/// A readable error naming the refusal; a 403 names RBAC and the missing
/// permission.
fn api_error(
    verb: &'static str,
    what: String,
    resource: &str,
    secret: Option<&SecretRef>,
    error: kube::Error,
) -> SecretError {
    let (code, reason) = match &error {
        kube::Error::Api(status) if status.code == 403 => {
            let scope = match secret {
                Some(secret) => format!(
                    "{resource} in namespace {} (resourceName {})",
                    secret.namespace, secret.name
                ),
                None => format!("{resource}.admissionregistration.k8s.io"),
            };
            (
                Some(403),
                format!(
                    "forbidden by RBAC: the service account needs `{verb}` on {scope}: {}",
                    status.message
                ),
            )
        }
        kube::Error::Api(status) => (
            Some(status.code),
            format!("{} {}: {}", status.code, status.reason, status.message),
        ),
        other => (None, format!("the API server did not answer: {other}")),
    };
    SecretError::Api {
        verb,
        what,
        code,
        reason,
    }
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
    use super::*;
    use serde_json::json;

    const NAMES: &[&str] = &["localhost", "gpu-policy.gpu-policy.svc", "127.0.0.1"];

    fn names() -> Vec<String> {
        NAMES.iter().map(|n| (*n).to_owned()).collect()
    }

    fn fresh(now: i64, leaf_days: i64) -> TlsData {
        let ca = generate_ca(now, CA_VALIDITY_DAYS).expect("ca");
        let leaf = issue(&ca.cert, &ca.key, &names(), now, leaf_days).expect("leaf");
        TlsData {
            ca_crt: ca.cert.into_bytes(),
            ca_key: ca.key.into_bytes(),
            tls_crt: leaf.cert.into_bytes(),
            tls_key: leaf.key.into_bytes(),
        }
    }

    fn tls_secret(data: &TlsData) -> Secret {
        Secret {
            type_: Some(TLS_SECRET_TYPE.to_owned()),
            data: Some(
                data.entries()
                    .into_iter()
                    .map(|(k, v)| (k.to_owned(), ByteString(v.to_vec())))
                    .collect(),
            ),
            ..Secret::default()
        }
    }

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

    #[test]
    fn fresh_pair_is_good() {
        let now = unix_now();
        assert_eq!(evaluate(&fresh(now, 365), &names(), now), Verdict::Good);
    }

    #[test]
    fn leaf_with_less_than_a_third_left_is_renewed() {
        let now = unix_now();
        // 30 days long, 21 days in: 9 of 30 days left.
        let data = fresh(now - 21 * DAY, 30);
        match evaluate(&data, &names(), now) {
            Verdict::RenewLeaf(reason) => assert!(reason.contains("third"), "{reason}"),
            other => panic!("{other:?}"),
        }
        // 19 days in: 11 of 30 left, still good.
        let data = fresh(now - 19 * DAY, 30);
        assert_eq!(evaluate(&data, &names(), now), Verdict::Good);
    }

    #[test]
    fn uncovered_name_is_renewed() {
        let now = unix_now();
        let mut wanted = names();
        wanted.push("other.example.com".to_owned());
        match evaluate(&fresh(now, 365), &wanted, now) {
            Verdict::RenewLeaf(reason) => assert!(reason.contains("other.example.com"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn leaf_of_another_ca_is_renewed() {
        let now = unix_now();
        let mut data = fresh(now, 365);
        let other = fresh(now, 365);
        data.tls_crt = other.tls_crt;
        data.tls_key = other.tls_key;
        match evaluate(&data, &names(), now) {
            Verdict::RenewLeaf(reason) => assert!(reason.contains("does not verify"), "{reason}"),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn unusable_ca_regenerates_everything() {
        let now = unix_now();
        let mut mismatched = fresh(now, 365);
        mismatched.ca_key = fresh(now, 365).ca_key;
        let mut garbage = fresh(now, 365);
        garbage.ca_crt = b"garbage".to_vec();
        let ca = generate_ca(now - 3000 * DAY, 3200).expect("old ca");
        let leaf = issue(&ca.cert, &ca.key, &names(), now, 30).expect("leaf");
        let expiring = TlsData {
            ca_crt: ca.cert.into_bytes(),
            ca_key: ca.key.into_bytes(),
            tls_crt: leaf.cert.into_bytes(),
            tls_key: leaf.key.into_bytes(),
        };
        let empty = TlsData {
            ca_crt: Vec::new(),
            ca_key: Vec::new(),
            tls_crt: Vec::new(),
            tls_key: Vec::new(),
        };
        for (data, expected) in [
            (mismatched, "does not match"),
            (garbage, "ca.crt"),
            (expiring, "expires in"),
            (empty, "no CA"),
        ] {
            match evaluate(&data, &names(), now) {
                Verdict::RegenerateAll(reason) => assert!(reason.contains(expected), "{reason}"),
                other => panic!("{expected}: {other:?}"),
            }
        }
    }

    #[test]
    fn foreign_secrets_are_refused() {
        let now = unix_now();
        let mut opaque = tls_secret(&fresh(now, 365));
        opaque.type_ = Some("Opaque".to_owned());
        assert!(read_data(&opaque).expect_err("opaque").contains("Opaque"));

        let mut cert_manager = tls_secret(&fresh(now, 365));
        if let Some(data) = cert_manager.data.as_mut() {
            data.remove(CA_KEY);
        }
        assert!(
            read_data(&cert_manager)
                .expect_err("no ca.key")
                .contains("ca.key")
        );

        let empty = Secret {
            type_: Some(TLS_SECRET_TYPE.to_owned()),
            ..Secret::default()
        };
        assert!(read_data(&empty).is_ok());
    }

    #[test]
    fn renewal_keeps_existing_names() {
        let now = unix_now();
        let ca = generate_ca(now, CA_VALIDITY_DAYS).expect("ca");
        let leaf = issue(
            &ca.cert,
            &ca.key,
            &["Other.Example.com".to_owned(), "10.0.0.1".to_owned()],
            now,
            1,
        )
        .expect("leaf");
        let mut all = names();
        all.extend(san_strings(leaf.cert.as_bytes()));
        let all = dedup_names(all);
        assert!(all.iter().any(|n| n == "Other.Example.com"));
        assert!(all.iter().any(|n| n == "10.0.0.1"));
        assert_eq!(dedup_names(vec!["a".into(), "A".into(), " ".into()]), ["a"]);
    }

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
