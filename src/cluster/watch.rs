//! The watch machinery the caches share: [`mirror`] and [`fold`] turn a
//! kube-runtime watcher into one table of the [`ClusterCache`]'s snapshot.

use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use kube::api::Api;
use kube::runtime::WatchStreamExt;
use kube::runtime::watcher::{self, Event};
use kube::{Resource, ResourceExt};
use serde::de::DeserializeOwned;

use super::cache::{ClusterCache, Source};
use crate::policy::cluster::ClusterSnapshot;

/// Holds a source unsynced (at start) or stale (after a reload) until its
/// watch has listed once. A watch stopped before that releases its hold
/// without claiming the source current: `Watches::apply`, which stops it,
/// says so when it releases the source.
pub(super) struct FirstList {
    cache: Arc<ClusterCache>,
    source: Source,
    done: bool,
}

impl FirstList {
    pub(super) fn new(cache: &Arc<ClusterCache>, source: Source) -> Self {
        cache.watch_started(source);
        Self { cache: Arc::clone(cache), source, done: false }
    }

    pub(super) fn done(&mut self) {
        if !std::mem::replace(&mut self.done, true) {
            self.cache.watch_listed(self.source);
        }
    }
}

impl Drop for FirstList {
    fn drop(&mut self) {
        if !self.done {
            self.cache.watch_stopped(self.source);
        }
    }
}

/// Folds one watcher into the table of `first_list`'s source, by name (`by_name`)
/// or by namespace and name. A relist (Init .. InitDone) replaces the
/// table whole, so objects deleted while the watch was down disappear.
pub(super) async fn mirror<K, Key, V>(
    api: Api<K>,
    mut first_list: FirstList,
    table: fn(&mut ClusterSnapshot) -> &mut BTreeMap<Key, V>,
    entry: impl Fn(&K) -> Option<(Key, V)> + Send + 'static,
    on_first_list: impl Fn() + Send + 'static,
) where
    K: Resource + Clone + DeserializeOwned + Debug + Send + 'static,
    Key: Ord + Send + 'static,
    V: Send + 'static,
{
    let events = watcher::watcher(api, watcher::Config::default()).default_backoff();
    let (cache, source) = (Arc::clone(&first_list.cache), first_list.source);
    fold(events, &cache, source, table, Owns::Table, entry, || {
        on_first_list();
        first_list.done();
    })
    .await;
}

pub(super) fn by_name<K: Resource, V>(
    lean: impl Fn(&K) -> Option<V>,
) -> impl Fn(&K) -> Option<(String, V)> {
    move |object| Some((object.name_any(), lean(object)?))
}

/// Which entries of a table a watch owns: all of it, or the keys it
/// matches (the watches of allowlist entries share one table).
pub(super) enum Owns<Key> {
    Table,
    Keys(Box<dyn Fn(&Key) -> bool + Send + Sync>),
}

/// A relist (Init .. InitDone) replaces what the watch owns of the table;
/// an error marks the source stale until the next event. `entry` keeps what
/// the rules read of an object (None: nothing of it); `on_first_sync` runs
/// once, when the first list is in.
pub(super) async fn fold<K, Key, V>(
    events: impl Stream<Item = Result<Event<K>, watcher::Error>> + Send,
    cache: &ClusterCache,
    source: Source,
    table: fn(&mut ClusterSnapshot) -> &mut BTreeMap<Key, V>,
    owns: Owns<Key>,
    entry: impl Fn(&K) -> Option<(Key, V)>,
    mut on_first_sync: impl FnMut(),
) where
    Key: Ord,
{
    let mut events = std::pin::pin!(events);
    let mut relisted: Option<BTreeMap<Key, V>> = None;
    let mut synced = false;
    while let Some(event) = events.next().await {
        match event {
            Ok(Event::Init) => relisted = Some(BTreeMap::new()),
            Ok(Event::InitApply(object)) => {
                if let (Some(new), Some((key, value))) = (relisted.as_mut(), entry(&object)) {
                    new.insert(key, value);
                }
            }
            Ok(Event::InitDone) => {
                if let Some(new) = relisted.take() {
                    let mut snapshot = cache.write();
                    let table = table(&mut snapshot);
                    match &owns {
                        Owns::Table => *table = new,
                        Owns::Keys(owned) => {
                            table.retain(|key, _| !owned(key));
                            table.extend(new);
                        }
                    }
                }
                if !synced {
                    synced = true;
                    on_first_sync();
                }
                cache.mark_fresh(source);
            }
            Ok(Event::Apply(object)) => {
                if let Some((key, value)) = entry(&object) {
                    table(&mut cache.write()).insert(key, value);
                }
                cache.mark_fresh(source);
            }
            Ok(Event::Delete(object)) => {
                if let Some((key, _)) = entry(&object) {
                    table(&mut cache.write()).remove(&key);
                }
                cache.mark_fresh(source);
            }
            Err(error) => cache.mark_stale(source, &error),
        }
    }
}

#[cfg(test)]
mod tests;
