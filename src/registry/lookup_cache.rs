//! The resolver's LRU caches (docs/architecture.md, "Where registries
//! enter"), each bounded in entries and in bytes ([`BoundedLru`]): whoever
//! names an image chooses how long its strings are.

use std::borrow::Borrow;
use std::hash::Hash;
use std::mem::size_of;
use std::num::NonZeroUsize;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use lru::LruCache;
use oci_client::Reference;

use super::lookup::Failure;
use super::oci::ImageConfigFacts;
use super::platform::Platform;

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
/// `ENTRY_OVERHEAD`. Past either bound the least recently used entries
/// go; an entry over the whole byte budget is not kept.
pub struct BoundedLru<K: Hash + Eq, V> {
    map: LruCache<K, (V, usize)>,
    bytes: usize,
    max_bytes: usize,
    heap: fn(&K, &V) -> usize,
}

impl<K: Hash + Eq, V> BoundedLru<K, V> {
    /// At most `entries` entries (one at least) and `max_bytes` bytes.
    pub fn new(entries: usize, max_bytes: usize, heap: fn(&K, &V) -> usize) -> Self {
        Self {
            map: LruCache::new(NonZeroUsize::new(entries).unwrap_or(NonZeroUsize::MIN)),
            bytes: 0,
            max_bytes,
            heap,
        }
    }

    fn charge(&self, key: &K, value: &V) -> usize {
        size_of::<K>()
            .saturating_add(size_of::<(V, usize)>())
            .saturating_add(ENTRY_OVERHEAD)
            .saturating_add((self.heap)(key, value))
    }

    pub fn get<Q>(&mut self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.map.get(key).map(|(value, _)| value)
    }

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

    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

/// The guard of `mutex`, poisoned or not: every critical section leaves
/// the caches whole.
pub(crate) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A kept string's capacity is its length, or close to it.
pub(super) fn string_bytes(value: &str) -> usize {
    value.len()
}

fn platform_heap(platform: &Platform) -> usize {
    string_bytes(&platform.os)
        .saturating_add(string_bytes(&platform.architecture))
        .saturating_add(platform.variant.as_deref().map_or(0, string_bytes))
}

fn arc_of<T>() -> usize {
    size_of::<T>().saturating_add(2 * size_of::<usize>())
}

/// Why these budgets: docs/operations.md, "Registry mode". A typical
/// entry's figure is what [`BoundedLru`] charges (the tests measure them).
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
    pub const DEFAULT: CacheBytes =
        CacheBytes { references: 1 << 20, tags: 512 << 10, facts: 4 << 20, failures: 512 << 10 };
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
    pub fn heap_bytes(&self) -> usize {
        let values = [&self.cuda_version, &self.require_cuda, &self.cuda_label];
        values
            .into_iter()
            .flatten()
            .fold(arc_of::<Self>().saturating_add(string_bytes(&self.digest)), |sum, value| {
                sum.saturating_add(string_bytes(value))
            })
    }
}

pub(super) enum TagState {
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
        self.facts.put((facts.digest.clone(), platform.clone()), facts);
    }

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
mod tests;
