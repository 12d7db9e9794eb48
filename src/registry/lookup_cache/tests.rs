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
    let mut caches =
        Caches::new(Duration::from_secs(60), Duration::from_secs(5), 8, 8, CacheBytes::DEFAULT);
    let reference = "docker.io/nvidia/cuda:13.0.1-base-ubuntu24.04";
    assert!(matches!(caches.tag(reference, start), TagState::Unknown));
    caches.put_tag(reference.to_owned(), "sha256:a".to_owned(), start);
    caches.put_facts(&Platform::default(), facts("sha256:a"));
    assert!(
        matches!(caches.tag(reference, start + Duration::from_secs(59)), TagState::Fresh(d) if d == "sha256:a")
    );
    assert!(matches!(caches.tag(reference, start + Duration::from_secs(61)), TagState::Stale));
    assert_eq!(caches.facts("sha256:a".to_owned(), &Platform::default()), Some(facts("sha256:a")));
    assert_eq!(caches.facts("sha256:a".to_owned(), &Platform::linux("arm64")), None);
}

#[test]
fn the_caches_are_bounded_least_recently_used_first() {
    let mut caches =
        Caches::new(Duration::from_secs(60), Duration::from_secs(5), 2, 2, CacheBytes::DEFAULT);
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
    let mut caches =
        Caches::new(Duration::from_secs(60), Duration::from_secs(5), 1, 8, CacheBytes::DEFAULT);
    let parse = |image: &str| match super::super::reference::parse_reference(image) {
        Ok(reference) => Arc::new(ParsedReference::new(reference)),
        Err(err) => panic!("{image}: {err}"),
    };
    assert!(caches.reference("ubuntu").is_none());
    caches.put_reference("ubuntu", parse("ubuntu"));
    assert_eq!(
        caches.reference("ubuntu").map(|p| p.whole.clone()).as_deref(),
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
    let mut caches =
        Caches::new(Duration::from_secs(60), Duration::from_secs(5), 8, 8, CacheBytes::DEFAULT);
    let key = ("r.io/x:1".to_owned(), Platform::default());
    caches.put_failure(key.clone(), Failure::too_large("manifest larger than 4 MiB"), start);
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
    let budget = CacheBytes { facts: 256 << 10, ..CacheBytes::DEFAULT };
    let mut caches = Caches::new(Duration::from_secs(60), Duration::from_secs(5), 8, 1024, budget);
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
    assert!(caches.facts.bytes() <= 256 << 10, "{}", caches.facts.bytes());
    let kept = caches.facts.len();
    assert!((15..=21).contains(&kept), "{kept} entries of 12 KiB in 256 KiB");
    let last = format!("sha256:{:064x}", 1023);
    assert!(caches.facts(last, &Platform::default()).is_some());
}
