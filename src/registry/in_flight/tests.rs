use super::*;
use crate::registry::platform::Platform;
use crate::settings::RegistryHosts;

const PLACES: Places = Places { queue: 8, per_namespace: 3, per_registry: 2 };

fn key(image: &str) -> LookupKey {
    (image.to_owned(), Platform::default())
}

/// Takes a place for `image` of `namespace` on the entry that lists its
/// registry, or says why not.
fn start(
    in_flight: &mut InFlight,
    hosts: &RegistryHosts,
    namespace: &str,
    image: &str,
) -> Result<(), String> {
    let registry = image.split('/').next().unwrap_or_default();
    let Some((entry, pattern)) = hosts.entry_of(registry) else {
        panic!("{registry} is not listed");
    };
    in_flight.admit(namespace, entry, pattern, PLACES).map_err(|failure| failure.reason)?;
    let (_, receiver) = watch::channel(None);
    in_flight.insert(key(image), namespace, entry, receiver);
    Ok(())
}

fn hosts(entries: &[&str]) -> RegistryHosts {
    let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
    RegistryHosts::parse("registries", &entries, true).unwrap_or_else(|err| panic!("{err}"))
}

/// Every host under a wildcard entry is the entry: a tenant that names
/// a new subdomain per image gets no new slots.
#[test]
fn the_hosts_under_one_wildcard_entry_share_its_slots() {
    let hosts = hosts(&["*.pkg.dev", "nvcr.io"]);
    let mut in_flight = InFlight::default();
    assert_eq!(start(&mut in_flight, &hosts, "a", "us-docker.pkg.dev/p/r/i:1"), Ok(()));
    assert_eq!(start(&mut in_flight, &hosts, "b", "europe-docker.pkg.dev/p/r/i:1"), Ok(()));
    assert_eq!(
        start(&mut in_flight, &hosts, "c", "asia-docker.pkg.dev/p/r/i:1"),
        Err("the lookup queue of registry *.pkg.dev is full".to_owned())
    );
    // Another entry has slots of its own.
    assert_eq!(start(&mut in_flight, &hosts, "c", "nvcr.io/nvidia/cuda:13"), Ok(()));
    // A fetch that ends gives its slot back to the entry.
    in_flight.remove(&key("us-docker.pkg.dev/p/r/i:1"));
    assert_eq!(start(&mut in_flight, &hosts, "c", "me-docker.pkg.dev/p/r/i:1"), Ok(()));
}

/// A namespace holds its share and no more, whatever registries it
/// names; the others keep theirs, up to the queue.
#[test]
fn a_namespace_holds_its_share_of_the_queue() {
    let hosts = hosts(&["a.io", "b.io", "c.io", "d.io", "e.io"]);
    let mut in_flight = InFlight::default();
    for image in ["a.io/x:1", "b.io/x:1", "c.io/x:1"] {
        assert_eq!(start(&mut in_flight, &hosts, "tenant", image), Ok(()));
    }
    assert_eq!(
        start(&mut in_flight, &hosts, "tenant", "d.io/x:1"),
        Err("the lookup queue's share of namespace tenant is full".to_owned())
    );
    for image in ["a.io/y:1", "b.io/y:1", "c.io/y:1"] {
        assert_eq!(start(&mut in_flight, &hosts, "other", image), Ok(()));
    }
    assert_eq!(start(&mut in_flight, &hosts, "third", "d.io/y:1"), Ok(()));
    assert_eq!(start(&mut in_flight, &hosts, "third", "e.io/y:1"), Ok(()));
    assert_eq!(
        start(&mut in_flight, &hosts, "fourth", "d.io/z:1"),
        Err("the lookup queue is full".to_owned())
    );
    in_flight.remove(&key("a.io/x:1"));
    assert_eq!(start(&mut in_flight, &hosts, "tenant", "e.io/x:1"), Ok(()));
}

/// A namespace as a forged review may spell it: its first 63 bytes
/// are its share, and a refusal stays one line.
#[test]
fn a_long_or_odd_namespace_is_cut_and_one_line() {
    let hosts = hosts(&["a.io", "b.io", "c.io", "d.io"]);
    let mut in_flight = InFlight::default();
    let long = format!("{}\n", "n".repeat(100));
    for (n, image) in ["a.io/x:1", "b.io/x:1", "c.io/x:1"].into_iter().enumerate() {
        let spelling = format!("{long}{n}");
        assert_eq!(start(&mut in_flight, &hosts, &spelling, image), Ok(()));
    }
    let refusal = start(&mut in_flight, &hosts, &long, "d.io/x:1");
    assert_eq!(
        refusal,
        Err(format!("the lookup queue's share of namespace {} is full", "n".repeat(63)))
    );
    assert_eq!(in_flight.per_namespace.len(), 1);
    let odd = "a\nb";
    let mut in_flight = InFlight::default();
    let places = Places { per_namespace: 1, ..PLACES };
    let (_, receiver) = watch::channel(None);
    in_flight.insert(key("a.io/x:1"), odd, 0, receiver);
    let refusal = in_flight.admit(odd, 0, &"a.io", places);
    assert_eq!(
        refusal.map_err(|f| f.reason),
        Err("the lookup queue's share of namespace a\\nb is full".to_owned())
    );
}
