//! What a route manages: the Secret holding the shared pair
//! ([`SecretRef`]), the certificates directory, the names to cover and the
//! webhook configurations to keep in step ([`RouteConfig`]).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;

use crate::certs::pki::wanted_names;

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
        Ok(Self { namespace: namespace.to_owned(), name: name.to_owned() })
    }
}

impl fmt::Display for SecretRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RouteConfig {
    pub secret: SecretRef,
    /// Where `tls.crt`, `tls.key` and `ca.crt` are written.
    pub certs_dir: PathBuf,
    /// Names wanted besides
    /// [`DEFAULT_DNS_NAMES`](crate::certs::DEFAULT_DNS_NAMES), `127.0.0.1`
    /// and `<service>.<service_namespace>.svc` (an entry that parses as an
    /// IP address becomes an IP SAN).
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

    pub fn wanted_names(&self) -> Vec<String> {
        let mut extra = self.dns_names.clone();
        let (service, namespace) = (self.service.trim(), self.service_namespace.trim());
        if !service.is_empty() && !namespace.is_empty() {
            extra.push(format!("{service}.{namespace}.svc"));
        }
        wanted_names(&extra)
    }
}

#[cfg(test)]
mod tests;
