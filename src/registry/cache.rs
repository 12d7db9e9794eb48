//! The resolver's three bounded LRU caches: tag to digest (with a TTL, a
//! tag can move), digest and platform to what the image needs (no TTL: a
//! digest names fixed content), and recent failures (briefly).

use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lru::LruCache;
use oci_client::Reference;

use super::{Failure, ImageConfigFacts, Platform};

/// A lookup: the image reference as oci-client normalises it
/// (`docker.io/library/ubuntu:latest`) and the platform.
pub(super) type LookupKey = (String, Platform);

/// An image reference as the pod spells it, parsed once: parsing takes
/// longer than the whole cache hit that follows.
#[derive(Debug)]
pub(super) struct ParsedReference {
    pub(super) reference: Reference,
    /// As oci-client normalises it (`docker.io/library/ubuntu:latest`).
    pub(super) whole: String,
}

impl ParsedReference {
    pub(super) fn new(reference: Reference) -> Self {
        let whole = reference.whole();
        Self { reference, whole }
    }
}

/// What the tag cache knows of a reference.
pub(super) enum TagState {
    /// Resolved within the TTL.
    Fresh(String),
    /// Resolved before, but longer ago than the TTL: ask the registry
    /// which digest the tag names now (a HEAD).
    Stale,
    Unknown,
}

pub(super) struct Caches {
    tag_ttl: Duration,
    negative_ttl: Duration,
    references: LruCache<String, Arc<ParsedReference>>,
    tags: LruCache<String, (String, Instant)>,
    facts: LruCache<(String, Platform), Arc<ImageConfigFacts>>,
    negative: LruCache<LookupKey, (Failure, Instant)>,
}

fn capacity(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap_or(NonZeroUsize::MIN)
}

impl Caches {
    pub(super) fn new(
        tag_ttl: Duration,
        negative_ttl: Duration,
        tag_capacity: usize,
        facts_capacity: usize,
    ) -> Self {
        Self {
            tag_ttl,
            negative_ttl,
            references: LruCache::new(capacity(tag_capacity)),
            tags: LruCache::new(capacity(tag_capacity)),
            facts: LruCache::new(capacity(facts_capacity)),
            // Failures are few and short-lived; a quarter of the room.
            negative: LruCache::new(capacity(facts_capacity / 4)),
        }
    }

    /// The parsed form of an image reference seen before, as written.
    pub(super) fn reference(&mut self, image: &str) -> Option<Arc<ParsedReference>> {
        self.references.get(image).cloned()
    }

    pub(super) fn put_reference(&mut self, image: &str, parsed: Arc<ParsedReference>) {
        self.references.put(image.to_owned(), parsed);
    }

    pub(super) fn tag(&mut self, reference: &str, now: Instant) -> TagState {
        match self.tags.get(reference) {
            Some((digest, at)) if now.saturating_duration_since(*at) < self.tag_ttl => {
                TagState::Fresh(digest.clone())
            }
            Some(_) => TagState::Stale,
            None => TagState::Unknown,
        }
    }

    pub(super) fn put_tag(&mut self, reference: String, digest: String, now: Instant) {
        self.tags.put(reference, (digest, now));
    }

    pub(super) fn facts(
        &mut self,
        digest: String,
        platform: &Platform,
    ) -> Option<Arc<ImageConfigFacts>> {
        self.facts.get(&(digest, platform.clone())).cloned()
    }

    pub(super) fn put_facts(&mut self, platform: &Platform, facts: Arc<ImageConfigFacts>) {
        self.facts
            .put((facts.digest.clone(), platform.clone()), facts);
    }

    /// A failure of this lookup within the negative TTL, if any.
    pub(super) fn failure(&mut self, key: &LookupKey, now: Instant) -> Option<Failure> {
        match self.negative.get(key) {
            Some((failure, at)) if now.saturating_duration_since(*at) < self.negative_ttl => {
                Some(failure.clone())
            }
            Some(_) => {
                self.negative.pop(key);
                None
            }
            None => None,
        }
    }

    pub(super) fn put_failure(&mut self, key: LookupKey, failure: Failure, now: Instant) {
        self.negative.put(key, (failure, now));
    }

    pub(super) fn forget_failure(&mut self, key: &LookupKey) {
        self.negative.pop(key);
    }

    pub(super) fn forget_failures(&mut self) {
        self.negative.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts(digest: &str) -> Arc<ImageConfigFacts> {
        Arc::new(ImageConfigFacts {
            cuda_version: Some("13.0.1".to_owned()),
            require_cuda: None,
            cuda_label: None,
            digest: digest.to_owned(),
        })
    }

    #[test]
    fn tags_expire_and_digests_do_not() {
        let start = Instant::now();
        let mut caches = Caches::new(Duration::from_secs(60), Duration::from_secs(5), 8, 8);
        let reference = "docker.io/nvidia/cuda:13.0.1-base-ubuntu24.04";
        assert!(matches!(caches.tag(reference, start), TagState::Unknown));
        caches.put_tag(reference.to_owned(), "sha256:a".to_owned(), start);
        caches.put_facts(&Platform::default(), facts("sha256:a"));
        assert!(
            matches!(caches.tag(reference, start + Duration::from_secs(59)), TagState::Fresh(d) if d == "sha256:a")
        );
        assert!(matches!(
            caches.tag(reference, start + Duration::from_secs(61)),
            TagState::Stale
        ));
        assert_eq!(
            caches.facts("sha256:a".to_owned(), &Platform::default()),
            Some(facts("sha256:a"))
        );
        assert_eq!(
            caches.facts("sha256:a".to_owned(), &Platform::linux("arm64")),
            None
        );
    }

    #[test]
    fn the_caches_are_bounded_least_recently_used_first() {
        let mut caches = Caches::new(Duration::from_secs(60), Duration::from_secs(5), 2, 2);
        let platform = Platform::default();
        caches.put_facts(&platform, facts("sha256:1"));
        caches.put_facts(&platform, facts("sha256:2"));
        assert!(caches.facts("sha256:1".to_owned(), &platform).is_some());
        caches.put_facts(&platform, facts("sha256:3"));
        assert!(caches.facts("sha256:2".to_owned(), &platform).is_none());
        assert!(caches.facts("sha256:1".to_owned(), &platform).is_some());
        assert!(caches.facts("sha256:3".to_owned(), &platform).is_some());
    }

    #[test]
    fn references_are_parsed_once_and_bounded() {
        let mut caches = Caches::new(Duration::from_secs(60), Duration::from_secs(5), 1, 8);
        let parse = |image: &str| match super::super::reference::parse_reference(image) {
            Ok(reference) => Arc::new(ParsedReference::new(reference)),
            Err(err) => panic!("{image}: {err}"),
        };
        assert!(caches.reference("ubuntu").is_none());
        caches.put_reference("ubuntu", parse("ubuntu"));
        assert_eq!(
            caches
                .reference("ubuntu")
                .map(|p| p.whole.clone())
                .as_deref(),
            Some("docker.io/library/ubuntu:latest")
        );
        caches.put_reference(
            "nvcr.io/nvidia/pytorch:25.12-py3",
            parse("nvcr.io/nvidia/pytorch:25.12-py3"),
        );
        assert!(caches.reference("ubuntu").is_none(), "one entry of room");
    }

    #[test]
    fn failures_are_remembered_briefly() {
        let start = Instant::now();
        let mut caches = Caches::new(Duration::from_secs(60), Duration::from_secs(5), 8, 8);
        let key = ("r.io/x:1".to_owned(), Platform::default());
        caches.put_failure(
            key.clone(),
            Failure::too_large("manifest larger than 4 MiB"),
            start,
        );
        assert_eq!(
            caches.failure(&key, start + Duration::from_secs(4)),
            Some(Failure::too_large("manifest larger than 4 MiB"))
        );
        assert_eq!(caches.failure(&key, start + Duration::from_secs(6)), None);
        caches.put_failure(key.clone(), Failure::failed("again"), start);
        caches.forget_failure(&key);
        assert_eq!(caches.failure(&key, start), None);
    }
}
