//! Registry credentials from one dockerconfigjson file (`{"auths": {HOST:
//! {...}}}`, as a `kubernetes.io/dockerconfigjson` Secret or
//! `~/.docker/config.json`), or the older `.dockercfg` (hosts at the top).

use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use oci_client::secrets::RegistryAuth;
use serde::Deserialize;
use serde_json::Value;

use crate::manifest::one_line;

/// Docker Hub under the name image references give it.
const DOCKER_HUB: &str = "docker.io";

/// Usernames and passwords by registry host. `Debug` shows the hosts only.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct Credentials {
    by_registry: BTreeMap<String, (String, String)>,
}

impl fmt::Debug for Credentials {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Credentials")
            .field("registries", &self.by_registry.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// One line, naming the file.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CredentialsError {
    #[error("cannot read {path}: {reason}")]
    Read { path: String, reason: String },
    #[error("{path}: {source}")]
    Content {
        path: String,
        #[source]
        source: DockerConfigError,
    },
}

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DockerConfigError {
    #[error("not JSON ({0})")]
    NotJson(String),
    #[error("not a JSON object")]
    NotObject,
    #[error("\"auths\" is not an object")]
    AuthsNotObject,
    #[error("registry {host:?}: {reason}")]
    Entry { host: String, reason: String },
    #[error("registry {0:?}: \"auth\" is not base64 of user:password")]
    Auth(String),
}

#[derive(Deserialize)]
struct Entry {
    #[serde(default)]
    auth: Option<String>,
    #[serde(default)]
    username: Option<String>,
    #[serde(default)]
    password: Option<String>,
}

impl Credentials {
    pub fn none() -> Self {
        Self::default()
    }

    /// Reads a dockerconfigjson file; the error never quotes its content.
    pub fn load(path: &Path) -> Result<Self, CredentialsError> {
        Self::read(path).map(|(credentials, _)| credentials)
    }

    pub fn read(path: &Path) -> Result<(Self, Vec<u8>), CredentialsError> {
        let shown = || path.display().to_string();
        let bytes = std::fs::read(path).map_err(|err| CredentialsError::Read {
            path: shown(),
            reason: one_line(&err.to_string()),
        })?;
        let credentials = Self::from_docker_config(&bytes)
            .map_err(|source| CredentialsError::Content { path: shown(), source })?;
        Ok((credentials, bytes))
    }

    pub fn from_docker_config(bytes: &[u8]) -> Result<Self, DockerConfigError> {
        let document: Value = serde_json::from_slice(bytes)
            .map_err(|err| DockerConfigError::NotJson(one_line(&err.to_string())))?;
        let Value::Object(top) = document else {
            return Err(DockerConfigError::NotObject);
        };
        let auths = match top.get("auths") {
            Some(Value::Object(auths)) => auths.clone(),
            Some(_) => return Err(DockerConfigError::AuthsNotObject),
            None => top,
        };
        let mut by_registry = BTreeMap::new();
        for (host, entry) in auths {
            let entry: Entry = match serde_json::from_value(entry) {
                Ok(entry) => entry,
                Err(err) => {
                    let reason = one_line(&err.to_string());
                    return Err(DockerConfigError::Entry { host, reason });
                }
            };
            let pair = match (entry.username, entry.password, entry.auth) {
                (Some(user), Some(password), _) if !user.is_empty() => (user, password),
                (_, _, Some(auth)) => match decode_auth(&auth) {
                    Some(pair) => pair,
                    None => return Err(DockerConfigError::Auth(host)),
                },
                // An identity token alone (an OAuth refresh token) cannot be
                // used for pulls here: the host is left anonymous.
                _ => continue,
            };
            by_registry.insert(normalize_host(&host), pair);
        }
        Ok(Self { by_registry })
    }

    pub fn registries(&self) -> impl Iterator<Item = &str> {
        self.by_registry.keys().map(String::as_str)
    }

    /// What oci-client sends to `registry` (a reference's registry, such as
    /// `docker.io` or `registry.local:5000`).
    pub fn auth_for(&self, registry: &str) -> RegistryAuth {
        match self.by_registry.get(&normalize_host(registry)) {
            Some((user, password)) => RegistryAuth::Basic(user.clone(), password.clone()),
            None => RegistryAuth::Anonymous,
        }
    }
}

fn decode_auth(auth: &str) -> Option<(String, String)> {
    let bytes = STANDARD.decode(auth.trim()).ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let (user, password) = text.split_once(':')?;
    (!user.is_empty()).then(|| (user.to_owned(), password.to_owned()))
}

/// A dockerconfigjson key as a registry host: no scheme, no path, lower
/// case, and Docker Hub's many names as `docker.io`.
fn normalize_host(key: &str) -> String {
    let without_scheme =
        key.strip_prefix("https://").or_else(|| key.strip_prefix("http://")).unwrap_or(key);
    let host = without_scheme.split('/').next().unwrap_or(without_scheme).to_ascii_lowercase();
    match host.as_str() {
        "index.docker.io" | "registry-1.docker.io" | "registry.hub.docker.com" => {
            DOCKER_HUB.to_owned()
        }
        _ => host,
    }
}

#[cfg(test)]
mod tests;
