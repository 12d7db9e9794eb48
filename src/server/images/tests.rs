use super::*;

/// Interpreted configs of requirements as long as a value may be fill
/// the cache's bytes, not its entries; ordinary ones its entries.
#[test]
fn the_interpreted_configs_are_bounded_in_bytes() {
    let cache = NeedsCache::new();
    let entries = ResolverOptions::default().facts_capacity;
    let mut longest = "cuda>=13.0".to_owned();
    while longest.len() + 7 <= crate::registry::MAX_VALUE_BYTES {
        longest.push_str(" cuda>1");
    }
    for n in 0..entries {
        let version = format!("13.{n}");
        let facts = ImageConfigFacts::of(Some(&version), Some(&longest), None);
        assert!(cache.needs_of(&facts).is_ok());
    }
    let (kept, bytes) = {
        let needs = lock(&cache.0);
        (needs.len(), needs.bytes())
    };
    assert!(bytes <= NEEDS_CACHE_BYTES, "{bytes}");
    assert!(kept < entries / 2, "{kept} entries of the longest requirement");
    eprintln!("{kept} interpreted configs of the longest requirement in {bytes} bytes");

    let ordinary = NeedsCache::new();
    let require = ImageConfigFacts::cuda_12_8_requirement();
    for n in 0..entries {
        let version = format!("12.{n}");
        let facts = ImageConfigFacts::of(Some(&version), Some(&require), Some(&version));
        assert!(ordinary.needs_of(&facts).is_ok());
    }
    let needs = lock(&ordinary.0);
    assert_eq!(needs.len(), entries, "{} bytes", needs.bytes());
    eprintln!("{entries} ordinary interpreted configs in {} bytes", needs.bytes());
}

#[test]
fn a_config_is_interpreted_once_and_answered_the_same() {
    let cache = NeedsCache::new();
    let cuda13 = ImageConfigFacts::of(Some("13.0.2"), Some("cuda>=13.0"), None);
    let first = cache.needs_of(&cuda13);
    assert_eq!(first, needs_of(&cuda13));
    assert_eq!(lock(&cache.0).len(), 1);
    // An equal config from another fetch is the same entry.
    let again = ImageConfigFacts::of(Some("13.0.2"), Some("cuda>=13.0"), None);
    assert_eq!(cache.needs_of(&again), first);
    assert_eq!(lock(&cache.0).len(), 1);
    let unreadable = ImageConfigFacts::of(Some("thirteen"), None, None);
    assert!(cache.needs_of(&unreadable).is_err());
    assert_eq!(lock(&cache.0).len(), 2);
}
