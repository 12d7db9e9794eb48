use super::*;

const ALLOWLISTED: Source = Source::AllowlistedWorkloads;

/// As `Watches::start` does it: every source held, the watches started
/// one after the other, the first one listing before the second is
/// started.
#[test]
fn a_source_is_synced_once_every_watch_it_started_with_has_listed() {
    let cache = Arc::new(ClusterCache::default());
    for source in Source::ALL {
        cache.hold(source);
    }
    let mut first = FirstList::new(&cache, ALLOWLISTED);
    first.done();
    let mut second = FirstList::new(&cache, ALLOWLISTED);
    for source in Source::ALL {
        cache.release(source);
    }
    assert!(!cache.is_synced());
    second.done();
    assert!(cache.is_synced());
    assert!(!cache.is_stale(ALLOWLISTED));
}

/// As `Watches::apply` does it: two entries added at reload, the first
/// one listing before the second is started; the source stays stale
/// until both have listed.
#[test]
fn a_source_is_current_again_once_every_watch_added_at_reload_has_listed() {
    let cache = Arc::new(ClusterCache::default());
    for source in Source::ALL {
        cache.hold(source);
        cache.release(source);
    }
    assert!(cache.is_synced() && !cache.is_stale(ALLOWLISTED));

    cache.hold(ALLOWLISTED);
    let mut first = FirstList::new(&cache, ALLOWLISTED);
    assert!(cache.is_stale(ALLOWLISTED));
    first.done();
    assert!(cache.is_stale(ALLOWLISTED));
    let mut second = FirstList::new(&cache, ALLOWLISTED);
    cache.release(ALLOWLISTED);
    assert!(cache.is_stale(ALLOWLISTED));
    second.done();
    assert!(!cache.is_stale(ALLOWLISTED));
    assert!(cache.is_synced());
}

/// A watch stopped before it listed (its entry removed at reload) no
/// longer holds its source.
#[test]
fn a_watch_stopped_before_it_listed_holds_nothing() {
    let cache = Arc::new(ClusterCache::default());
    for source in Source::ALL {
        cache.hold(source);
    }
    let forbidden = FirstList::new(&cache, ALLOWLISTED);
    for source in Source::ALL {
        cache.release(source);
    }
    assert!(!cache.is_synced());

    cache.hold(ALLOWLISTED);
    drop(forbidden);
    assert!(!cache.is_synced());
    cache.release(ALLOWLISTED);
    assert!(cache.is_synced());
    assert!(!cache.is_stale(ALLOWLISTED));
}
