//! One lookup of an image's config: the digest the tag names, the manifest
//! (the platform's entry of an index), the config blob. The caches are
//! filled only when the whole lookup succeeded.

use std::sync::Arc;
use std::time::Instant;

use oci_client::Reference;

use super::digest::Digest;
use super::lookup::Failure;
use super::lookup_cache::TagState;
use super::oci::ImageConfigFacts;
use super::oci::{Manifest, facts_of_config, read_manifest};
use super::platform::Platform;
use super::resolver::Inner;
use super::transport::{Bound, Transport};

/// A manifest fetched by tag: its digest is the one the registry names
/// (checked against the body), or the body's sha256 when it names none.
fn tagged_digest(header: Option<&str>, body: &[u8]) -> Result<Digest, Failure> {
    match header {
        Some(header) => {
            let digest = Digest::parse(header)?;
            digest.verify("the manifest", body)?;
            Ok(digest)
        }
        None => Ok(Digest::sha256_of(body)),
    }
}

/// The manifest `digest` names, checked against it, within `bound`.
async fn manifest_by_digest(
    transport: &Transport,
    reference: &Reference,
    digest: &Digest,
    bound: Bound,
) -> Result<Vec<u8>, Failure> {
    let fetched = transport.manifest(reference, digest.as_str(), bound).await?;
    digest.verify("the manifest", &fetched.body)?;
    Ok(fetched.body)
}

impl Inner {
    /// Failures are one line.
    pub(super) async fn fetch(
        &self,
        reference: &Reference,
        platform: &Platform,
    ) -> Result<Arc<ImageConfigFacts>, Failure> {
        let transport = self.transport.load_full();
        let transport = transport.as_ref();
        let name = reference.whole();
        let context = |what: &str| format!("{what} of {name}");

        // The digest the reference names, and the manifest when it had to
        // be read to learn it. The tag is remembered only at the end.
        let (digest, from_tag, mut top) = match reference.digest() {
            Some(digest) => (Digest::parse(digest).map_err(|f| f.within(&name))?, false, None),
            None => {
                let tag = reference.tag().unwrap_or("latest");
                let state = self.caches().tag(&name, Instant::now());
                match state {
                    TagState::Fresh(digest) => (Digest::parse(&digest)?, false, None),
                    TagState::Stale => {
                        let header = transport
                            .manifest_digest(reference, tag)
                            .await
                            .map_err(|f| f.within(&context("manifest")))?;
                        match header {
                            Some(header) => {
                                let digest = Digest::parse(&header)
                                    .map_err(|f| f.within(&context("manifest")))?;
                                (digest, true, None)
                            }
                            None => self.by_tag(transport, reference, tag, &context).await?,
                        }
                    }
                    TagState::Unknown => self.by_tag(transport, reference, tag, &context).await?,
                }
            }
        };
        let remember_tag = |inner: &Inner| {
            if from_tag {
                inner.caches().put_tag(name.clone(), digest.as_str().to_owned(), Instant::now());
            }
        };
        let cached = self.caches().facts(digest.as_str().to_owned(), platform);
        if let Some(facts) = cached {
            self.hit("config");
            remember_tag(self);
            return Ok(facts);
        }

        let top = match top.take() {
            Some(body) => body,
            None => manifest_by_digest(transport, reference, &digest, Bound::MANIFEST)
                .await
                .map_err(|f| f.within(&context("manifest")))?,
        };
        let config =
            match read_manifest(&top).map_err(|err| Failure::failed(context(&err.to_string())))? {
                Manifest::Image { config } => config,
                Manifest::Index { manifests } => {
                    drop(top);
                    let entry = platform.choose(&manifests).ok_or_else(|| {
                        Failure::failed(format!("{name}: the image index has no {platform} image"))
                    })?;
                    let child = Digest::parse(&entry.digest).map_err(|f| f.within(&name))?;
                    let bound = Bound::MANIFEST.declared(entry.size)?;
                    let what = format!("{platform} manifest");
                    drop(manifests);
                    let body = manifest_by_digest(transport, reference, &child, bound)
                        .await
                        .map_err(|f| f.within(&context(&what)))?;
                    match read_manifest(&body)
                        .map_err(|err| Failure::failed(context(&err.to_string())))?
                    {
                        Manifest::Image { config } => config,
                        Manifest::Index { .. } => {
                            return Err(Failure::failed(format!(
                                "{name}: the {platform} entry of the image index is an index again"
                            )));
                        }
                    }
                }
            };

        let config_digest = Digest::parse(&config.digest).map_err(|f| f.within(&name))?;
        let bound = Bound::CONFIG.declared(config.size)?;
        let blob = transport
            .blob(reference, &config_digest, bound)
            .await
            .map_err(|f| f.within(&context("image config")))?;
        config_digest.verify("the image config", &blob).map_err(|f| f.within(&name))?;
        let facts = facts_of_config(&blob, digest.as_str().to_owned())
            .map_err(|err| Failure::failed(format!("{name}: {err}")))?;
        let facts = Arc::new(facts);
        remember_tag(self);
        self.caches().put_facts(platform, Arc::clone(&facts));
        Ok(facts)
    }

    async fn by_tag(
        &self,
        transport: &Transport,
        reference: &Reference,
        tag: &str,
        context: &(dyn Fn(&str) -> String + Sync),
    ) -> Result<(Digest, bool, Option<Vec<u8>>), Failure> {
        let fetched = transport
            .manifest(reference, tag, Bound::MANIFEST)
            .await
            .map_err(|f| f.within(&context("manifest")))?;
        let digest = tagged_digest(fetched.digest_header.as_deref(), &fetched.body)
            .map_err(|f| f.within(&context("manifest")))?;
        Ok((digest, true, Some(fetched.body)))
    }
}

#[cfg(test)]
mod tests;
