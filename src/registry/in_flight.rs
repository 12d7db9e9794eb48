//! The lookups in flight, and the places they take: docs/operations.md,
//! "Registry mode" ("The lookup queue"). A lookup of an image already in
//! flight joins its fetch and takes no place.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use super::lookup::Failure;
use super::lookup_cache::LookupKey;
use super::oci::ImageConfigFacts;
use crate::policy::message::prefix_within;

pub(super) type Answer = Option<Result<Arc<ImageConfigFacts>, Failure>>;

/// The longest namespace kept, in bytes: a Kubernetes namespace is a DNS
/// label of at most 63. A caller of the port may send a review with any
/// string there; longer ones share the share of their first 63 bytes.
const MAX_NAMESPACE_BYTES: usize = 63;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Places {
    pub(super) queue: usize,
    pub(super) per_namespace: usize,
    pub(super) per_registry: usize,
}

struct Holder {
    namespace: String,
    /// The place of the `imageResolution.registries` entry in the list.
    entry: usize,
}

/// Each map holds at most one key per lookup in flight.
#[derive(Default)]
pub(super) struct InFlight {
    lookups: HashMap<LookupKey, (Holder, watch::Receiver<Answer>)>,
    per_namespace: HashMap<String, usize>,
    per_entry: HashMap<usize, usize>,
}

fn release<K: std::hash::Hash + Eq>(counts: &mut HashMap<K, usize>, key: &K) {
    if let Some(count) = counts.get_mut(key) {
        *count = count.saturating_sub(1);
        if *count == 0 {
            counts.remove(key);
        }
    }
}

impl InFlight {
    /// The answer to come of the fetch in flight for `key`, if one is. A
    /// fetch that ended without answering (its task panicked) is not
    /// joined: it would never answer; its place is given back.
    pub(super) fn joinable(&mut self, key: &LookupKey) -> Option<watch::Receiver<Answer>> {
        let (_, answer) = self.lookups.get(key)?;
        if answer.has_changed().is_ok() {
            return Some(answer.clone());
        }
        self.remove(key);
        None
    }

    /// Whether a new lookup of `namespace` on registry entry `entry` (shown
    /// as `entry_name`) may take a place; the refusal says which bound is
    /// reached.
    pub(super) fn admit(
        &self,
        namespace: &str,
        entry: usize,
        entry_name: &dyn fmt::Display,
        places: Places,
    ) -> Result<(), Failure> {
        let namespace = prefix_within(namespace, MAX_NAMESPACE_BYTES);
        let held = |count: Option<&usize>| count.copied().unwrap_or(0);
        if held(self.per_namespace.get(namespace)) >= places.per_namespace.max(1) {
            return Err(Failure::refused(format!(
                "the lookup queue's share of namespace {} is full",
                namespace.escape_debug()
            )));
        }
        if held(self.per_entry.get(&entry)) >= places.per_registry.max(1) {
            return Err(Failure::refused(format!(
                "the lookup queue of registry {entry_name} is full"
            )));
        }
        if self.lookups.len() >= places.queue.max(1) {
            return Err(Failure::refused("the lookup queue is full"));
        }
        Ok(())
    }

    /// After [`Self::admit`].
    pub(super) fn insert(
        &mut self,
        key: LookupKey,
        namespace: &str,
        entry: usize,
        answer: watch::Receiver<Answer>,
    ) {
        let namespace = prefix_within(namespace, MAX_NAMESPACE_BYTES).to_owned();
        *self.per_namespace.entry(namespace.clone()).or_default() += 1;
        *self.per_entry.entry(entry).or_default() += 1;
        if let Some((replaced, _)) = self.lookups.insert(key, (Holder { namespace, entry }, answer))
        {
            release(&mut self.per_namespace, &replaced.namespace);
            release(&mut self.per_entry, &replaced.entry);
        }
    }

    pub(super) fn remove(&mut self, key: &LookupKey) {
        if let Some((holder, _)) = self.lookups.remove(key) {
            release(&mut self.per_namespace, &holder.namespace);
            release(&mut self.per_entry, &holder.entry);
        }
    }
}

#[cfg(test)]
mod tests;
