//! The resolver's three bounded LRU caches: tag to digest (with a TTL, a
//! tag can move), digest and platform to what the image needs (no TTL: a
//! digest names fixed content), and recent failures (briefly).

use std::num::NonZeroUsize;
use std::time::{Duration, Instant};

use lru::LruCache;

use super::{ImageConfigFacts, Platform};

/// A lookup: the image reference as oci-client normalises it
/// (`docker.io/library/ubuntu:latest`) and the platform.
pub(super) type LookupKey = (String, Platform);

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
    tags: LruCache<String, (String, Instant)>,
    facts: LruCache<(String, Platform), ImageConfigFacts>,
    negative: LruCache<LookupKey, (String, Instant)>,
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
            tags: LruCache::new(capacity(tag_capacity)),
            facts: LruCache::new(capacity(facts_capacity)),
            // Failures are few and short-lived; a quarter of the room.
            negative: LruCache::new(capacity(facts_capacity / 4)),
        }
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

    pub(super) fn facts(&mut self, digest: &str, platform: &Platform) -> Option<ImageConfigFacts> {
        self.facts
            .get(&(digest.to_owned(), platform.clone()))
            .cloned()
    }

    pub(super) fn put_facts(&mut self, platform: &Platform, facts: ImageConfigFacts) {
        self.facts
            .put((facts.digest.clone(), platform.clone()), facts);
    }

    /// A failure of this lookup within the negative TTL, if any.
    pub(super) fn failure(&mut self, key: &LookupKey, now: Instant) -> Option<String> {
        match self.negative.get(key) {
            Some((reason, at)) if now.saturating_duration_since(*at) < self.negative_ttl => {
                Some(reason.clone())
            }
            Some(_) => {
                self.negative.pop(key);
                None
            }
            None => None,
        }
    }

    pub(super) fn put_failure(&mut self, key: LookupKey, reason: String, now: Instant) {
        self.negative.put(key, (reason, now));
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

    fn facts(digest: &str) -> ImageConfigFacts {
        ImageConfigFacts {
            cuda_version: Some("13.0.1".to_owned()),
            require_cuda: None,
            cuda_label: None,
            digest: digest.to_owned(),
        }
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
            caches.facts("sha256:a", &Platform::default()),
            Some(facts("sha256:a"))
        );
        assert_eq!(caches.facts("sha256:a", &Platform::linux("arm64")), None);
    }

    #[test]
    fn the_caches_are_bounded_least_recently_used_first() {
        let mut caches = Caches::new(Duration::from_secs(60), Duration::from_secs(5), 2, 2);
        let platform = Platform::default();
        caches.put_facts(&platform, facts("sha256:1"));
        caches.put_facts(&platform, facts("sha256:2"));
        assert!(caches.facts("sha256:1", &platform).is_some());
        caches.put_facts(&platform, facts("sha256:3"));
        assert!(caches.facts("sha256:2", &platform).is_none());
        assert!(caches.facts("sha256:1", &platform).is_some());
        assert!(caches.facts("sha256:3", &platform).is_some());
    }

    #[test]
    fn failures_are_remembered_briefly() {
        let start = Instant::now();
        let mut caches = Caches::new(Duration::from_secs(60), Duration::from_secs(5), 8, 8);
        let key = ("r.io/x:1".to_owned(), Platform::default());
        caches.put_failure(key.clone(), "manifest unknown".to_owned(), start);
        assert_eq!(
            caches
                .failure(&key, start + Duration::from_secs(4))
                .as_deref(),
            Some("manifest unknown")
        );
        assert_eq!(caches.failure(&key, start + Duration::from_secs(6)), None);
        caches.put_failure(key.clone(), "again".to_owned(), start);
        caches.forget_failure(&key);
        assert_eq!(caches.failure(&key, start), None);
    }
}
