//! The lookups in flight, and the places they take. A lookup that starts a
//! fetch holds a place until the fetch ends (in the background, past the
//! admission that started it, if need be). Three bounds say whether a new
//! one may start, each a fixed number a reader can predict:
//!
//! - the namespace's share: a namespace holds at most
//!   `max_lookups_per_namespace` places (16 of the 64 by default, a
//!   quarter), so it takes four namespaces to fill the queue, and a
//!   namespace alone still keeps every fetch turn (8) busy;
//! - the registry's slots: the lookups of one entry of
//!   `imageResolution.registries` hold at most `max_lookups_per_registry`
//!   places, so a registry that never answers holds that many fetch turns,
//!   never all of them. The key is the entry, not the host: every host
//!   under `*.pkg.dev` is anyone's to name, and shares the entry's slots;
//! - the queue: `max_pending_lookups` places in all.
//!
//! A lookup of an image already in flight joins its fetch and takes no
//! place. The refusals are one line and name the bound that refused.

use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

use tokio::sync::watch;

use super::cache::LookupKey;
use super::{Failure, ImageConfigFacts};
use crate::policy::message::prefix_within;

/// The answer of a fetch, once it is known.
pub(super) type Answer = Option<Result<Arc<ImageConfigFacts>, Failure>>;

/// The longest namespace kept, in bytes: a Kubernetes namespace is a DNS
/// label of at most 63. A caller of the port may send a review with any
/// string there; longer ones share the share of their first 63 bytes.
const MAX_NAMESPACE_BYTES: usize = 63;

/// The places lookups in flight may take.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Places {
    pub(super) queue: usize,
    pub(super) per_namespace: usize,
    pub(super) per_registry: usize,
}

/// Whom a lookup's place is charged to.
struct Holder {
    namespace: String,
    /// The place of the `imageResolution.registries` entry in the list.
    entry: usize,
}

/// The lookups in flight: each one's answer to come, and how many there
/// are per namespace and per registry entry. Each map holds at most one
/// key per lookup in flight.
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

    /// Takes a place for the lookup of `key` (after [`Self::admit`]).
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
        if let Some((replaced, _)) = self
            .lookups
            .insert(key, (Holder { namespace, entry }, answer))
        {
            release(&mut self.per_namespace, &replaced.namespace);
            release(&mut self.per_entry, &replaced.entry);
        }
    }

    /// Gives back the place of the lookup of `key`.
    pub(super) fn remove(&mut self, key: &LookupKey) {
        if let Some((holder, _)) = self.lookups.remove(key) {
            release(&mut self.per_namespace, &holder.namespace);
            release(&mut self.per_entry, &holder.entry);
        }
    }
}

#[cfg(test)]
mod tests;
