use super::*;
use rstest::rstest;

fn policy(registries: &[&str], insecure: &[&str]) -> HostPolicy {
    let own = |list: &[&str]| list.iter().map(|e| (*e).to_owned()).collect::<Vec<_>>();
    HostPolicy::new(&own(registries), &own(insecure)).unwrap_or_else(|err| panic!("{err}"))
}

fn url(text: &str) -> Url {
    Url::parse(text).unwrap_or_else(|err| panic!("{text}: {err}"))
}

#[rstest]
#[case("https://nvcr.io/v2/", None)]
#[case("https://registry.local:5000/v2/", None)]
#[case("http://127.0.0.1:5000/v2/", None)]
#[case("https://production.cloudflare.docker.com/blob", None)]
#[case("https://8.8.8.8/blob", None)]
#[case("https://[2606:4700::1111]/blob", None)]
#[case("http://127.0.0.1:5001/v2/", Some("plain HTTP"))]
#[case("https://127.0.0.1:5001/v2/", Some("a loopback address"))]
#[case("https://169.254.169.254/latest/meta-data", Some("a link-local address"))]
#[case("https://[::ffff:169.254.169.254]/", Some("a link-local address"))]
#[case("https://2130706433/", Some("a loopback address"))]
#[case("https://0x7f.1/", Some("a loopback address"))]
#[case("https://10.0.0.8/", Some("a private address"))]
#[case("https://[fd00::8]/", Some("a private address"))]
#[case("https://0.0.0.0/", Some("an unspecified address"))]
#[case("https://registry.local:22/", Some("a port of a listed host"))]
#[case("https://user:pw@cdn.example/", Some("credentials in it"))]
#[case("ftp://cdn.example/", Some("scheme ftp"))]
#[case("http://cdn.example/", Some("plain HTTP"))]
fn urls_are_checked_before_any_request(#[case] target: &str, #[case] refusal: Option<&str>) {
    let policy = policy(&["nvcr.io", "registry.local:5000", "127.0.0.1:5000"], &["127.0.0.1:5000"]);
    let checked = policy.check_url(&url(target));
    match refusal {
        None => assert_eq!(checked, Ok(()), "{target}"),
        Some(words) => assert!(
            checked.as_ref().is_err_and(|f| f.reason.contains(words)
                && f.kind == crate::registry::lookup::FailureKind::Refused
                && !f.reason.contains("/v2")
                && !f.reason.contains("pw")),
            "{target}: {checked:?}"
        ),
    }
}

#[test]
fn only_listed_registries_are_contacted() {
    let policy = policy(&["nvcr.io", "*.pkg.dev"], &[]);
    assert_eq!(policy.check_registry("nvcr.io"), Ok(()));
    assert_eq!(policy.check_registry("us-docker.pkg.dev"), Ok(()));
    let refused = policy.check_registry("169.254.169.254");
    assert_eq!(
        refused.map_err(|f| f.reason),
        Err("registry 169.254.169.254 is not in imageResolution.registries".to_owned())
    );
    assert_eq!(policy.scheme_for("nvcr.io"), "https");
}

fn addresses(list: &[&str]) -> Vec<SocketAddr> {
    list.iter()
        .map(|a| SocketAddr::new(a.parse().unwrap_or_else(|err| panic!("{a}: {err}")), 0))
        .collect()
}

#[test]
fn a_listed_name_reaches_private_addresses_and_never_loopback() {
    let policy = policy(&["registry.corp", "localhost:5000"], &[]);
    assert_eq!(
        policy.admitted("registry.corp", &addresses(&["10.0.0.5", "127.0.0.1", "169.254.169.254"])),
        Ok(addresses(&["10.0.0.5"]))
    );
    assert_eq!(
        policy.admitted("localhost", &addresses(&["127.0.0.1", "::1"])),
        Err("localhost resolves only to loopback addresses, which only a literal \
                 imageResolution.registries entry may reach"
            .to_owned())
    );
}

#[test]
fn any_other_name_reaches_public_addresses_only() {
    let policy = policy(&["nvcr.io"], &[]);
    assert_eq!(
        policy.admitted("cdn.example.", &addresses(&["10.0.0.5", "151.101.1.1"])),
        Ok(addresses(&["151.101.1.1"]))
    );
    assert_eq!(
        policy.admitted("metadata.evil.example", &addresses(&["169.254.169.254"])),
        Err("metadata.evil.example resolves only to link-local addresses, and it is \
                 not in imageResolution.registries"
            .to_owned())
    );
    assert_eq!(
        policy.admitted("nothing.example", &[]),
        Err("nothing.example resolves to no address".to_owned())
    );
}

/// The refusal becomes the warning a pod's author reads: the classes
/// of the addresses, each once, and never an address.
#[test]
fn a_refusal_names_the_host_and_the_classes_only() {
    let policy = policy(&["nvcr.io"], &[]);
    let found =
        addresses(&["10.0.0.5", "127.0.0.1", "10.0.0.6", "fd00::8", "169.254.169.254", "::1"]);
    let refusal = policy.admitted("CDN.Example", &found);
    assert_eq!(
        refusal,
        Err("cdn.example resolves only to private, loopback and link-local addresses, \
                 and it is not in imageResolution.registries"
            .to_owned())
    );
    let text = refusal.err().unwrap_or_default();
    for address in &found {
        assert!(!text.contains(&address.ip().to_string()), "{text}");
    }
    assert!(!text.contains("10.0") && !text.contains("::"), "{text}");
}

#[test]
fn listed_urls_take_credentials() {
    let policy = policy(&["registry.local:5000", "auth.docker.io"], &[]);
    assert!(policy.is_listed(&url("https://registry.local:5000/token")));
    assert!(policy.is_listed(&url("https://auth.docker.io/token?scope=x")));
    assert!(!policy.is_listed(&url("https://registry.local/token")));
    assert!(!policy.is_listed(&url("https://cdn.example/token")));
}
