//! One fetch from a registry, through oci-client: the digest the tag names,
//! the manifest (the platform's entry of an index), the config blob, and
//! what the config says of CUDA.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Instant;

use oci_client::errors::OciDistributionError;
use oci_client::manifest::{OciImageManifest, OciManifest};
use oci_client::{Client, Reference};
use serde::Deserialize;

use super::cache::TagState;
use super::resolver::Inner;
use super::{ImageConfigFacts, Platform};
use crate::manifest::one_line;

/// The env of the CUDA version the image is built on.
pub const CUDA_VERSION_ENV: &str = "CUDA_VERSION";
/// The env the NVIDIA Container Toolkit checks the node's driver against.
pub const REQUIRE_CUDA_ENV: &str = "NVIDIA_REQUIRE_CUDA";
/// The label of the CUDA version, on NVIDIA's images.
pub const CUDA_LABEL: &str = "com.nvidia.cuda.version";

/// Config blobs are a few kilobytes; anything past this is refused unread.
const MAX_CONFIG_BYTES: i64 = 4 * 1024 * 1024;
/// A failure reason stays readable in a warning.
const MAX_REASON_CHARS: usize = 300;

/// The parts of an image config (OCI image spec, `config` section) read.
#[derive(Deserialize)]
struct ConfigFile {
    #[serde(default)]
    config: Option<ConfigSection>,
}

#[derive(Deserialize)]
struct ConfigSection {
    #[serde(rename = "Env", default)]
    env: Option<Vec<String>>,
    #[serde(rename = "Labels", default)]
    labels: Option<HashMap<String, String>>,
}

/// What an image config says of CUDA; `digest` is the reference's.
pub fn facts_of_config(bytes: &[u8], digest: String) -> Result<ImageConfigFacts, String> {
    let config: ConfigFile = serde_json::from_slice(bytes)
        .map_err(|err| format!("image config is not JSON: {}", one_line(&err.to_string())))?;
    let section = config.config;
    let env = section
        .as_ref()
        .and_then(|section| section.env.as_ref())
        .map(Vec::as_slice)
        .unwrap_or_default();
    // The last definition wins, as in the container.
    let env_var = |name: &str| {
        env.iter().rev().find_map(|entry| {
            entry
                .split_once('=')
                .filter(|(key, _)| *key == name)
                .map(|(_, value)| value.to_owned())
        })
    };
    Ok(ImageConfigFacts {
        cuda_version: env_var(CUDA_VERSION_ENV),
        require_cuda: env_var(REQUIRE_CUDA_ENV),
        cuda_label: section
            .as_ref()
            .and_then(|section| section.labels.as_ref())
            .and_then(|labels| labels.get(CUDA_LABEL))
            .cloned(),
        digest,
    })
}

/// An oci-client error as one short line, after what was being fetched.
fn describe(what: &str, err: &OciDistributionError) -> String {
    let mut line = format!("{what}: {}", one_line(&err.to_string()));
    if line.chars().count() > MAX_REASON_CHARS {
        line = line.chars().take(MAX_REASON_CHARS).collect();
        line.push('…');
    }
    line
}

impl Inner {
    /// Fetches what `reference` needs on `platform`, filling the tag and
    /// config caches as it goes. Failures are one line.
    pub(super) async fn fetch(
        &self,
        reference: &Reference,
        platform: &Platform,
    ) -> Result<Arc<ImageConfigFacts>, String> {
        let session = self.session.load_full();
        let client: &Client = &session.client;
        let auth = session.credentials.auth_for(reference.registry());
        let whole = reference.whole();
        let name = whole.as_str();

        let tag_state = match reference.digest() {
            Some(digest) => TagState::Fresh(digest.to_owned()),
            None => self.caches().tag(name, Instant::now()),
        };
        let (digest, mut manifest) = match tag_state {
            TagState::Fresh(digest) => (digest, None),
            TagState::Stale => {
                let digest = client
                    .fetch_manifest_digest(reference, &auth)
                    .await
                    .map_err(|err| describe(&format!("manifest of {name}"), &err))?;
                self.caches()
                    .put_tag(whole.clone(), digest.clone(), Instant::now());
                (digest, None)
            }
            TagState::Unknown => {
                let (manifest, digest) = client
                    .pull_manifest(reference, &auth)
                    .await
                    .map_err(|err| describe(&format!("manifest of {name}"), &err))?;
                self.caches()
                    .put_tag(whole.clone(), digest.clone(), Instant::now());
                (digest, Some(manifest))
            }
        };
        if let Some(facts) = self.caches().facts(digest.clone(), platform) {
            self.hit("config");
            return Ok(facts);
        }

        let by_digest = reference.clone_with_digest(digest.clone());
        let top = match manifest.take() {
            Some(manifest) => manifest,
            None => {
                client
                    .pull_manifest(&by_digest, &auth)
                    .await
                    .map_err(|err| describe(&format!("manifest of {name}"), &err))?
                    .0
            }
        };
        let image: OciImageManifest = match top {
            OciManifest::Image(image) => image,
            OciManifest::ImageIndex(index) => {
                let entry = platform
                    .choose(&index.manifests)
                    .ok_or_else(|| format!("{name}: the image index has no {platform} image"))?;
                let child = reference.clone_with_digest(entry.digest.clone());
                match client.pull_manifest(&child, &auth).await {
                    Ok((OciManifest::Image(image), _)) => image,
                    Ok((OciManifest::ImageIndex(_), _)) => {
                        return Err(format!(
                            "{name}: the {platform} entry of the image index is an index again"
                        ));
                    }
                    Err(err) => {
                        return Err(describe(&format!("{platform} manifest of {name}"), &err));
                    }
                }
            }
        };

        let config = &image.config;
        if config.size > MAX_CONFIG_BYTES {
            return Err(format!(
                "{name}: image config of {} bytes is too large to read",
                config.size
            ));
        }
        let mut blob = Vec::with_capacity(usize::try_from(config.size).unwrap_or(0));
        client
            .pull_blob(&by_digest, config, &mut blob)
            .await
            .map_err(|err| describe(&format!("image config of {name}"), &err))?;
        let facts = facts_of_config(&blob, digest).map_err(|err| format!("{name}: {err}"))?;
        let facts = Arc::new(facts);
        self.caches().put_facts(platform, Arc::clone(&facts));
        Ok(facts)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn reads_cuda_from_env_and_label() {
        let config = json!({
            "architecture": "amd64",
            "os": "linux",
            "config": {
                "Env": [
                    "PATH=/usr/local/nvidia/bin:/usr/local/cuda/bin:/usr/bin",
                    "NVARCH=x86_64",
                    "NVIDIA_REQUIRE_CUDA=cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536",
                    "CUDA_VERSION=12.8.1",
                    "CUDA_VERSION_EXTRA=x"
                ],
                "Labels": {"com.nvidia.cuda.version": "12.8.1", "maintainer": "NVIDIA CORPORATION"}
            }
        });
        let facts = facts_of_config(config.to_string().as_bytes(), "sha256:abc".to_owned());
        assert_eq!(
            facts,
            Ok(ImageConfigFacts {
                cuda_version: Some("12.8.1".to_owned()),
                require_cuda: Some(
                    "cuda>=12.8 brand=unknown,driver>=470,driver<471 brand=tesla,driver>=535,driver<536"
                        .to_owned()
                ),
                cuda_label: Some("12.8.1".to_owned()),
                digest: "sha256:abc".to_owned(),
            })
        );
    }

    #[test]
    fn the_last_definition_wins_and_absent_is_none() {
        let config = json!({"config": {"Env": ["CUDA_VERSION=11.8.0", "CUDA_VERSION=12.4.1"], "Labels": null}});
        let facts = facts_of_config(config.to_string().as_bytes(), "sha256:d".to_owned());
        assert_eq!(
            facts.as_ref().map(|f| f.cuda_version.as_deref()),
            Ok(Some("12.4.1"))
        );
        assert_eq!(facts.map(|f| f.cuda_label), Ok(None));
        let bare = facts_of_config(b"{\"architecture\": \"amd64\"}", "sha256:e".to_owned());
        assert_eq!(
            bare,
            Ok(ImageConfigFacts {
                cuda_version: None,
                require_cuda: None,
                cuda_label: None,
                digest: "sha256:e".to_owned()
            })
        );
    }

    #[test]
    fn a_config_that_is_not_json_is_one_line() {
        let err = facts_of_config(b"{\n\"config\": [", "sha256:f".to_owned());
        assert!(err.is_err_and(|err| err.starts_with("image config is not JSON") && !err.contains('\n')));
    }
}
