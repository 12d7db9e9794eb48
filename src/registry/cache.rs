//! The resolver's bounded LRU caches: tag to digest (with a TTL, a tag
//! can move), digest and platform to what the image needs (no TTL: a
//! digest names fixed content), recent failures (briefly), and the image
//! references as pods spell them, parsed. Each is bounded twice, in
//! entries and in bytes ([`BoundedLru`]): whoever names an image chooses
//! how long its strings are, so a count of entries alone bounds nothing.

use std::borrow::Borrow;
use std::hash::Hash;
use std::mem::size_of;
use std::num::NonZeroUsize;
use std::sync::Arc;
use std::time::{Duration, Instant};

use lru::LruCache;
use oci_client::Reference;

use super::{Failure, ImageConfigFacts, Platform};

/// A lookup: the image reference as oci-client normalises it
/// (`docker.io/library/ubuntu:latest`) and the platform.
pub(super) type LookupKey = (String, Platform);

/// What one entry of an [`LruCache`] costs besides its key and value:
/// the node's two links, the map's slot (a pointer to the key, one to the
/// node, a control byte) and the allocator's rounding of the node.
const ENTRY_OVERHEAD: usize = 48;

/// An LRU map bounded in entries and in bytes. Each entry is charged what
/// it holds: its key and value as laid out in the map, what they own on
/// the heap (`heap`, given by the owner, who knows the types), and
/// [`ENTRY_OVERHEAD`]. Past either bound the least recently used entries
/// go; an entry over the whole byte budget is not kept.
pub struct BoundedLru<K: Hash + Eq, V> {
    map: LruCache<K, (V, usize)>,
    bytes: usize,
    max_bytes: usize,
    heap: fn(&K, &V) -> usize,
}

impl<K: Hash + Eq, V> BoundedLru<K, V> {
    /// At most `entries` entries (one at least) and `max_bytes` bytes,
    /// each entry's heap bytes as `heap` counts them.
    pub fn new(entries: usize, max_bytes: usize, heap: fn(&K, &V) -> usize) -> Self {
        Self {
            map: LruCache::new(NonZeroUsize::new(entries).unwrap_or(NonZeroUsize::MIN)),
            bytes: 0,
            max_bytes,
            heap,
        }
    }

    /// The bytes an entry is charged.
    fn charge(&self, key: &K, value: &V) -> usize {
        size_of::<K>()
            .saturating_add(size_of::<(V, usize)>())
            .saturating_add(ENTRY_OVERHEAD)
            .saturating_add((self.heap)(key, value))
    }

    /// The value of `key`, now the most recently used.
    pub fn get<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get(key).map(|(value, _)| value)
    }

    /// Keeps `value` under `key` (in place of any value it had), then
    /// drops the least recently used entries until both bounds hold.
    pub fn put(&mut self, key: K, value: V) {
        let charge = self.charge(&key, &value);
        if charge > self.max_bytes {
            self.pop(&key);
            return;
        }
        if let Some((_, (_, replaced))) = self.map.push(key, (value, charge)) {
            self.bytes = self.bytes.saturating_sub(replaced);
        }
        self.bytes = self.bytes.saturating_add(charge);
        while self.bytes > self.max_bytes {
            match self.map.pop_lru() {
                Some((_, (_, evicted))) => self.bytes = self.bytes.saturating_sub(evicted),
                None => break,
            }
        }
    }

    pub fn pop<Q>(&mut self, key: &Q) -> Option<V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let (value, charge) = self.map.pop(key)?;
        self.bytes = self.bytes.saturating_sub(charge);
        Some(value)
    }

    pub fn clear(&mut self) {
        self.map.clear();
        self.bytes = 0;
    }

    pub fn len(&self) -> usize {
        self.map.len()
    }

    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// The bytes the entries are charged, together.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The heap bytes of a string as kept: its length (a kept string's
/// capacity is its length, or close to it).
pub(super) fn string_bytes(value: &str) -> usize {
    value.len()
}

fn platform_heap(platform: &Platform) -> usize {
    string_bytes(&platform.os)
        .saturating_add(string_bytes(&platform.architecture))
        .saturating_add(platform.variant.as_deref().map_or(0, string_bytes))
}

/// What an `Arc` of `T` allocates: its two counts and `T`.
fn arc_of<T>() -> usize {
    size_of::<T>().saturating_add(2 * size_of::<usize>())
}

/// The most each of the resolver's caches holds, in bytes. The figures of
/// a typical entry are what [`BoundedLru`] charges (the tests measure
/// them): each budget holds more typical entries than the cache's entry
/// bound, so for ordinary images the entry bound is the one that binds,
/// and for images of long strings the byte budget.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct CacheBytes {
    /// Image references as pods spell them, parsed: ~350 bytes each.
    pub references: usize,
    /// Tag to digest: ~230 bytes each.
    pub tags: usize,
    /// Digest and platform to the config's CUDA values: ~1.5 KB each for
    /// a CUDA image (its `NVIDIA_REQUIRE_CUDA` is ~1 KB), at most ~12.5
    /// KiB (three values of 4 KiB).
    pub facts: usize,
    /// Recent failures: ~350 bytes each, at most ~1.3 KiB (a reason is
    /// cut at 1 KiB).
    pub failures: usize,
}

impl CacheBytes {
    pub const DEFAULT: CacheBytes = CacheBytes {
        references: 1 << 20,
        tags: 512 << 10,
        facts: 4 << 20,
        failures: 512 << 10,
    };
}

impl Default for CacheBytes {
    fn default() -> Self {
        Self::DEFAULT
    }
}

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

    /// What its strings take on the heap, and its `Arc`.
    fn heap_bytes(&self) -> usize {
        let reference = &self.reference;
        arc_of::<Self>()
            .saturating_add(string_bytes(reference.registry()))
            .saturating_add(string_bytes(reference.resolve_registry()))
            .saturating_add(string_bytes(reference.repository()))
            .saturating_add(reference.tag().map_or(0, string_bytes))
            .saturating_add(reference.digest().map_or(0, string_bytes))
            .saturating_add(string_bytes(&self.whole))
    }
}

impl ImageConfigFacts {
    /// What an `Arc` of it takes on the heap, its strings included.
    pub fn heap_bytes(&self) -> usize {
        let values = [&self.cuda_version, &self.require_cuda, &self.cuda_label];
        values.into_iter().flatten().fold(
            arc_of::<Self>().saturating_add(string_bytes(&self.digest)),
            |sum, value| sum.saturating_add(string_bytes(value)),
        )
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
    references: BoundedLru<String, Arc<ParsedReference>>,
    tags: BoundedLru<String, (String, Instant)>,
    facts: BoundedLru<(String, Platform), Arc<ImageConfigFacts>>,
    negative: BoundedLru<LookupKey, (Failure, Instant)>,
}

impl Caches {
    pub(super) fn new(
        tag_ttl: Duration,
        negative_ttl: Duration,
        tag_capacity: usize,
        facts_capacity: usize,
        bytes: CacheBytes,
    ) -> Self {
        Self {
            tag_ttl,
            negative_ttl,
            references: BoundedLru::new(tag_capacity, bytes.references, |image, parsed| {
                string_bytes(image).saturating_add(parsed.heap_bytes())
            }),
            tags: BoundedLru::new(tag_capacity, bytes.tags, |reference, (digest, _)| {
                string_bytes(reference).saturating_add(string_bytes(digest))
            }),
            facts: BoundedLru::new(facts_capacity, bytes.facts, |(digest, platform), facts| {
                string_bytes(digest)
                    .saturating_add(platform_heap(platform))
                    .saturating_add(facts.heap_bytes())
            }),
            // Failures are few and short-lived; a quarter of the room.
            negative: BoundedLru::new(
                facts_capacity / 4,
                bytes.failures,
                |(reference, platform), (failure, _)| {
                    string_bytes(reference)
                        .saturating_add(platform_heap(platform))
                        .saturating_add(string_bytes(&failure.reason))
                },
            ),
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
            oversized: None,
        })
    }

    #[test]
    fn tags_expire_and_digests_do_not() {
        let start = Instant::now();
        let mut caches = Caches::new(
            Duration::from_secs(60),
            Duration::from_secs(5),
            8,
            8,
            CacheBytes::DEFAULT,
        );
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
        let mut caches = Caches::new(
            Duration::from_secs(60),
            Duration::from_secs(5),
            2,
            2,
            CacheBytes::DEFAULT,
        );
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
        let mut caches = Caches::new(
            Duration::from_secs(60),
            Duration::from_secs(5),
            1,
            8,
            CacheBytes::DEFAULT,
        );
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
        let mut caches = Caches::new(
            Duration::from_secs(60),
            Duration::from_secs(5),
            8,
            8,
            CacheBytes::DEFAULT,
        );
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

    /// A cache of strings whose entries are charged their two lengths.
    fn strings(entries: usize, max_bytes: usize) -> BoundedLru<String, String> {
        BoundedLru::new(entries, max_bytes, |key, value| key.len() + value.len())
    }

    /// What one entry of `strings` with a value of `len` bytes and a key
    /// of one byte is charged.
    fn charged(len: usize) -> usize {
        let mut one = strings(1, usize::MAX);
        one.put("k".to_owned(), "v".repeat(len));
        one.bytes()
    }

    #[test]
    fn past_the_byte_budget_the_least_recently_used_go() {
        let entry = charged(1000);
        assert!(entry > 1000, "the key, the value and the links: {entry}");
        let mut cache = strings(100, 2 * entry + entry / 2);
        cache.put("a".to_owned(), "a".repeat(1000));
        cache.put("b".to_owned(), "b".repeat(1000));
        assert_eq!((cache.len(), cache.bytes()), (2, 2 * entry));
        assert!(cache.get("a").is_some());
        // A third is over the budget: "b" is the least recently used.
        cache.put("c".to_owned(), "c".repeat(1000));
        assert_eq!((cache.len(), cache.bytes()), (2, 2 * entry));
        assert!(cache.get("b").is_none());
        assert!(cache.get("a").is_some() && cache.get("c").is_some());
        // One long entry takes the room of several short ones.
        cache.put("d".to_owned(), "d".repeat(2000));
        assert_eq!(cache.len(), 1);
        assert!(cache.get("d").is_some());
        assert!(cache.bytes() <= 2 * entry + entry / 2);
    }

    #[test]
    fn a_replaced_or_removed_entry_gives_its_bytes_back() {
        let mut cache = strings(100, 1 << 20);
        cache.put("a".to_owned(), "x".repeat(5000));
        cache.put("a".to_owned(), "y".repeat(10));
        assert_eq!((cache.len(), cache.bytes()), (1, charged(10)));
        assert_eq!(cache.pop("a").as_deref(), Some("yyyyyyyyyy"));
        assert_eq!((cache.len(), cache.bytes()), (0, 0));
        cache.put("b".to_owned(), "b".repeat(10));
        cache.clear();
        assert_eq!((cache.len(), cache.bytes()), (0, 0));
    }

    #[test]
    fn an_entry_over_the_whole_budget_is_not_kept_nor_its_older_value() {
        let mut cache = strings(100, charged(100));
        cache.put("k".to_owned(), "old".to_owned());
        cache.put("k".to_owned(), "v".repeat(101));
        assert!(cache.get("k").is_none());
        assert_eq!((cache.len(), cache.bytes()), (0, 0));
        cache.put("k".to_owned(), "v".repeat(100));
        assert_eq!(cache.len(), 1);
    }

    #[test]
    fn the_entry_bound_holds_under_the_byte_budget() {
        let mut cache = strings(2, 1 << 20);
        for key in ["a", "b", "c"] {
            cache.put(key.to_owned(), key.to_owned());
        }
        assert_eq!((cache.len(), cache.bytes()), (2, 2 * charged(1)));
        assert!(cache.get("a").is_none());
    }

    /// The facts of a CUDA image as its config gives them: the values of
    /// `nvidia/cuda:12.8.1`, whose requirement lists 30 brand and driver
    /// alternatives (some 1 KB).
    fn cuda_facts(digest: &str) -> Arc<ImageConfigFacts> {
        let require = ImageConfigFacts::cuda_12_8_requirement();
        Arc::new(ImageConfigFacts {
            cuda_version: Some("12.8.1".to_owned()),
            require_cuda: Some(require),
            cuda_label: Some("12.8.1".to_owned()),
            digest: digest.to_owned(),
            oversized: None,
        })
    }

    /// For ordinary images the entry bound binds, not the byte budget: a
    /// full cache of them fits the default budgets.
    #[test]
    fn the_default_budgets_hold_a_full_cache_of_ordinary_entries() {
        let entries = 1024;
        let mut caches = Caches::new(
            Duration::from_secs(60),
            Duration::from_secs(5),
            entries,
            entries,
            CacheBytes::DEFAULT,
        );
        let now = Instant::now();
        let platform = Platform::default();
        for n in 0..entries {
            let digest = format!("sha256:{n:064x}");
            let image = format!("nvcr.io/nvidia/pytorch:25.{n:04}-py3");
            let parsed = match super::super::reference::parse_reference(&image) {
                Ok(reference) => Arc::new(ParsedReference::new(reference)),
                Err(err) => panic!("{image}: {err}"),
            };
            caches.put_tag(parsed.whole.clone(), digest.clone(), now);
            caches.put_reference(&image, parsed);
            caches.put_facts(&platform, cuda_facts(&digest));
            if n % 4 == 0 {
                let reason = format!("{image}: manifest of {image}: 503 Service Unavailable");
                caches.put_failure((image, platform.clone()), Failure::failed(reason), now);
            }
        }
        assert_eq!(caches.references.len(), entries);
        assert_eq!(caches.tags.len(), entries);
        assert_eq!(caches.facts.len(), entries);
        assert_eq!(caches.negative.len(), entries / 4);
        eprintln!(
            "charged per entry: reference {}, tag {}, facts {}, failure {}",
            caches.references.bytes() / entries,
            caches.tags.bytes() / entries,
            caches.facts.bytes() / entries,
            caches.negative.bytes() / (entries / 4),
        );
    }

    /// Images whose values are as long as a value may be fill the facts
    /// cache's bytes long before its entries.
    #[test]
    fn long_values_are_bounded_by_the_byte_budget() {
        let budget = CacheBytes {
            facts: 256 << 10,
            ..CacheBytes::DEFAULT
        };
        let mut caches = Caches::new(
            Duration::from_secs(60),
            Duration::from_secs(5),
            8,
            1024,
            budget,
        );
        let long = "9".repeat(crate::registry::MAX_VALUE_BYTES);
        for n in 0..1024 {
            caches.put_facts(
                &Platform::default(),
                Arc::new(ImageConfigFacts {
                    cuda_version: Some(long.clone()),
                    require_cuda: Some(long.clone()),
                    cuda_label: Some(long.clone()),
                    digest: format!("sha256:{n:064x}"),
                    oversized: None,
                }),
            );
        }
        assert!(
            caches.facts.bytes() <= 256 << 10,
            "{}",
            caches.facts.bytes()
        );
        let kept = caches.facts.len();
        assert!(
            (15..=21).contains(&kept),
            "{kept} entries of 12 KiB in 256 KiB"
        );
        let last = format!("sha256:{:064x}", 1023);
        assert!(caches.facts(last, &Platform::default()).is_some());
    }
}
