use super::SecretRef;
use super::verdict::Unmanageable;
use crate::certs::{CA_FILE, CertError, PkiError};

/// The files on disk were not changed. The message ends with the cause's
/// own text, so it reads whole on one line; the cause is kept as source.
#[derive(Debug, thiserror::Error)]
pub enum SecretError {
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
    /// The Secret does not exist. The install creates it, empty: the
    /// server may get and update it, never create it.
    #[error(
        "Secret {secret} does not exist: the install creates it empty for the server to fill; \
         apply the install again or run `kubectl -n {ns} create secret generic {name}`",
        ns = secret.namespace,
        name = secret.name
    )]
    Missing { secret: SecretRef },
    /// The Secret exists but is not one this route may manage or serve.
    #[error("Secret {secret} cannot be used: {reason}")]
    Unusable { secret: SecretRef, reason: Unmanageable },
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
    pub fn is_forbidden(&self) -> bool {
        matches!(self, Self::Api { source, .. }
            if matches!(source.as_ref(), kube::Error::Api(status) if status.code == 403))
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
