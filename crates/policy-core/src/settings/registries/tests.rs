use super::*;
use rstest::rstest;

fn hosts(entries: &[&str]) -> RegistryHosts {
    let entries: Vec<String> = entries.iter().map(|e| (*e).to_owned()).collect();
    RegistryHosts::parse("registries", &entries, true).unwrap_or_else(|err| panic!("{err}"))
}

#[rstest]
#[case("nvcr.io", "nvcr.io", true)]
#[case("nvcr.io", "NVCR.IO", true)]
#[case("nvcr.io", "nvcr.io.", true)]
#[case("nvcr.io", "nvcr.io:443", false)]
#[case("nvcr.io", "evil-nvcr.io", false)]
#[case("registry.local:5000", "registry.local:5000", true)]
#[case("registry.local:5000", "registry.local", false)]
#[case("registry.local:5000", "registry.local:22", false)]
#[case("registry.local", "registry.local:22", false)]
#[case("*.gcr.io", "us.gcr.io", true)]
#[case("*.gcr.io", "a.b.gcr.io", true)]
#[case("*.gcr.io", "gcr.io", false)]
#[case("*.gcr.io", "evilgcr.io", false)]
#[case("*.gcr.io", "us.gcr.io:8443", false)]
#[case("127.0.0.1:5000", "127.0.0.1:5000", true)]
#[case("127.0.0.1:5000", "127.0.0.1:5001", false)]
#[case("[::1]:5000", "[::1]:5000", true)]
#[case("[::1]:5000", "[0:0::1]:5000", false)]
fn entries_match_hosts_and_ports(
    #[case] entry: &str,
    #[case] authority: &str,
    #[case] permitted: bool,
) {
    assert_eq!(hosts(&[entry]).permits(authority), permitted, "{entry} {authority}");
}

#[rstest]
#[case("", "empty")]
#[case("https://nvcr.io", "without a scheme")]
#[case("nvcr.io/nvidia", "without a path")]
#[case("user@nvcr.io", "without a path")]
#[case("nvcr.io:https", "and a port number")]
#[case("nvcr.io:70000", "and a port number")]
#[case("*", "wildcard only")]
#[case("*.io.*", "*. and a domain")]
#[case("*.io", "two labels")]
#[case("*.gcr.io:443", "without a port")]
#[case("*.10.0.0.1", "two labels")]
#[case("nv_cr.io", "a host name or IP address")]
#[case("[zz]:1", "a host name or IP address")]
#[case("a..b", "a host name or IP address")]
fn malformed_entries_say_what_was_expected(#[case] entry: &str, #[case] problem: &str) {
    let err = RegistryHosts::parse("registries", &[entry.to_owned()], true);
    assert!(
        err.as_ref().is_err_and(|err| err.contains(problem) && !err.contains('\n')),
        "{entry}: {err:?}"
    );
}

#[test]
fn wildcards_only_where_allowed() {
    let err = RegistryHosts::parse("insecureRegistries", &["*.corp.local".to_owned()], false);
    assert!(err.is_err_and(|err| err.starts_with("insecureRegistries: \"*.corp.local\"")));
}

#[test]
fn hosts_under_a_wildcard_are_one_entry() {
    let list = hosts(&["nvcr.io", "*.pkg.dev", "registry.local:5000", "[::1]:5000"]);
    let entry = |authority: &str| list.entry_of(authority).map(|(i, p)| (i, p.to_string()));
    assert_eq!(entry("us-docker.pkg.dev"), Some((1, "*.pkg.dev".to_owned())));
    assert_eq!(entry("EUROPE-docker.pkg.dev"), Some((1, "*.pkg.dev".to_owned())));
    assert_eq!(entry("nvcr.io"), Some((0, "nvcr.io".to_owned())));
    assert_eq!(entry("registry.local:5000"), Some((2, "registry.local:5000".to_owned())));
    assert_eq!(entry("[::1]:5000"), Some((3, "[::1]:5000".to_owned())));
    assert_eq!(entry("pkg.dev"), None);
    assert_eq!(entry("us-docker.pkg.dev:8443"), None);
}

#[test]
fn names_ignore_the_port() {
    let list = hosts(&["registry.local:5000", "*.corp.example"]);
    assert!(list.names("registry.local"));
    assert!(list.names("a.corp.example"));
    assert!(!list.names("corp.example"));
    assert!(!list.names("other.local"));
}

#[test]
fn the_defaults_parse_and_name_docker_hub_everywhere() {
    let list = RegistryHosts::parse("registries", &default_registries(), true)
        .unwrap_or_else(|err| panic!("{err}"));
    for host in [
        "docker.io",
        "index.docker.io",
        "registry-1.docker.io",
        "auth.docker.io",
        "nvcr.io",
        "us-docker.pkg.dev",
        "eu.gcr.io",
    ] {
        assert!(list.permits(host), "{host}");
    }
    assert!(!list.permits("169.254.169.254"));
    assert!(!list.permits("kubernetes.default.svc"));
}
