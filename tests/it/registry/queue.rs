//! The lookup queue shared among namespaces: the lookups a namespace's
//! admissions start hold at most its share of the places, so one
//! namespace that names image after image on a registry that never
//! answers leaves the other namespaces room, and says so in one line.

use std::time::Duration;

use gpu_policy::registry::{Lookup, Platform, ResolverOptions};

use super::{BUDGET, REQUIRE_13_1, cuda_config, found, options, resolver};
use crate::support::fake_registry::hostile::Fault;
use crate::support::fake_registry::{Auth, FakeRegistry};

#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_that_floods_the_queue_leaves_another_namespace_answered() {
    let silent = FakeRegistry::start(Auth::None).await;
    silent.set_fault("team/silent", Fault::Silent);
    let healthy = FakeRegistry::start(Auth::None).await;
    healthy.push_image("team/healthy", "1", &cuda_config("13.0.1", REQUIRE_13_1));
    let hosts = vec![silent.host(), healthy.host()];
    // The registry's slots are the whole queue here: only the namespace's
    // share stands between one namespace and every place.
    let resolver = resolver(ResolverOptions {
        registries: hosts.clone(),
        insecure_registries: hosts,
        max_pending_lookups: 8,
        max_lookups_per_namespace: 4,
        max_lookups_per_registry: 8,
        ..options(&silent)
    });

    let flood: Vec<String> =
        (0..100).map(|n| format!("{}/team/silent:{n}", silent.host())).collect();
    let answers = resolver
        .resolve_all("tenant-a", &flood, &Platform::default(), Duration::from_millis(200))
        .await;
    let mut timed_out = 0;
    for (image, lookup) in answers {
        match lookup {
            Lookup::TimedOut => timed_out += 1,
            Lookup::Refused(reason) => assert_eq!(
                reason, "the lookup queue's share of namespace tenant-a is full",
                "{image}"
            ),
            other => panic!("{image}: {other:?}"),
        }
    }
    assert_eq!(timed_out, 4, "the share of tenant-a");
    assert_eq!(silent.requests().len(), 4, "{:?}", silent.requests());

    // The same namespace gets nothing more; another one is answered.
    let more = format!("{}/team/healthy:1", healthy.host());
    let again =
        resolver.resolve_all("tenant-a", [more.as_str()], &Platform::default(), BUDGET).await;
    assert!(
        matches!(&again[0].1, Lookup::Refused(reason) if reason.contains("namespace tenant-a")),
        "{again:?}"
    );
    let answers =
        resolver.resolve_all("tenant-b", [more.as_str()], &Platform::default(), BUDGET).await;
    let facts = found(answers[0].1.clone());
    assert_eq!(facts.cuda_version.as_deref(), Some("13.0.1"));
}
