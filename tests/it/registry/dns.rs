//! The registry client's DNS under a pod's resolv.conf
//! (`support/fake_dns.rs` as its name server): an image's registry, a
//! token realm and a redirect's host are asked as absolute names only,
//! never under the pod's search list; what they resolve to is checked as
//! before, and a refusal names the host and the class of its addresses,
//! never the addresses.

use std::net::IpAddr;

use gpu_policy::registry::{DnsOptions, Lookup, Platform, Resolver, ResolverOptions};

use super::{BUDGET, REQUIRE_13_1, cuda_config, options, resolver};
use crate::support::fake_dns::FakeDns;
use crate::support::fake_registry::hostile::Fault;
use crate::support::fake_registry::{Auth, FakeRegistry};

/// What the kubelet writes into a pod of namespace `gpu-policy`: the
/// cluster DNS Service, the namespace's search list and `ndots:5`. The
/// name server is replaced by the fake one; the rest is read as written.
const POD_RESOLV_CONF: &str = "\
nameserver 10.96.0.10
search gpu-policy.svc.cluster.local svc.cluster.local cluster.local
options ndots:5
";

fn refused(lookup: Lookup) -> String {
    super::reason(lookup, "refused")
}

fn loopback() -> [IpAddr; 2] {
    [[127, 0, 0, 1].into(), std::net::Ipv6Addr::LOCALHOST.into()]
}

/// The resolver of `registry` (plain HTTP) and `nvcr.io`, its DNS the fake
/// one under the pod's resolv.conf.
fn pod_resolver(registry: &FakeRegistry, dns: &FakeDns) -> Resolver {
    resolver(ResolverOptions {
        registries: vec![registry.host(), "nvcr.io".to_owned()],
        dns: DnsOptions {
            resolv_conf: Some(POD_RESOLV_CONF.to_owned()),
            name_server: Some(dns.addr()),
        },
        ..options(registry)
    })
}

/// The refusal names the host and the class; none of the addresses the
/// fake DNS gave.
fn names_no_address(reason: &str) {
    for address in loopback() {
        assert!(!reason.contains(&address.to_string()), "{reason}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn registry_realm_and_redirect_hosts_are_asked_as_absolute_names() {
    let addresses = loopback();
    let dns = FakeDns::start(&[
        ("nvcr.io.", &addresses),
        ("auth.example.", &addresses),
        ("cdn.example.", &addresses),
    ])
    .await;
    let registry = FakeRegistry::start(Auth::None).await;
    for repository in ["team/realm", "team/redirect"] {
        registry.push_image(repository, "1", &cuda_config("13.0.1", REQUIRE_13_1));
    }
    registry
        .set_fault("team/realm", Fault::RealmElsewhere("https://auth.example/token".to_owned()));
    registry
        .set_fault("team/redirect", Fault::RedirectBlobs("https://cdn.example/blob".to_owned()));
    let resolver = pod_resolver(&registry, &dns);

    // A listed registry's name: its loopback answer is refused before any
    // connection.
    let reason =
        refused(resolver.resolve("nvcr.io/nvidia/cuda:13.0.1", &Platform::default(), BUDGET).await);
    assert_eq!(
        reason,
        "nvcr.io resolves only to loopback addresses, which only a literal \
         imageResolution.registries entry may reach"
    );
    names_no_address(&reason);

    // A token realm and a redirect on names nobody listed.
    let realm = format!("{}/team/realm:1", registry.host());
    let reason = refused(resolver.resolve(&realm, &Platform::default(), BUDGET).await);
    assert_eq!(
        reason,
        "auth.example resolves only to loopback addresses, and it is not in \
         imageResolution.registries"
    );
    names_no_address(&reason);
    let redirect = format!("{}/team/redirect:1", registry.host());
    let reason = refused(resolver.resolve(&redirect, &Platform::default(), BUDGET).await);
    assert_eq!(
        reason,
        "cdn.example resolves only to loopback addresses, and it is not in \
         imageResolution.registries"
    );
    names_no_address(&reason);
    assert_eq!(registry.blob_gets("team/redirect"), 1, "the redirect was answered once");

    // Only the absolute names were asked: never one under the search list.
    assert_eq!(
        dns.names_asked(),
        ["nvcr.io.", "auth.example.", "cdn.example."],
        "{:?}",
        dns.questions()
    );
    let types: Vec<String> = dns.questions().into_iter().map(|q| q.record_type).collect();
    assert!(types.iter().any(|t| t == "A") && types.iter().any(|t| t == "AAAA"), "{types:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_name_dns_does_not_know_is_asked_once_and_fails() {
    let dns = FakeDns::start(&[]).await;
    let registry = FakeRegistry::start(Auth::None).await;
    let resolver = pod_resolver(&registry, &dns);
    let lookup = resolver.resolve("nvcr.io/nvidia/cuda:13.0.1", &Platform::default(), BUDGET).await;
    let reason = super::failed(lookup);
    assert!(reason.contains("nvcr.io resolves to no address"), "{reason}");
    assert_eq!(dns.names_asked(), ["nvcr.io."], "{:?}", dns.questions());
}
