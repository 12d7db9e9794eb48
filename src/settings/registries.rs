//! `imageResolution.registries` and `insecureRegistries`: the registry hosts
//! registry mode may contact, and which of them speak plain HTTP.
//!
//! An entry is `host` (a DNS name or an IP address, on the scheme's default
//! port), `host:port`, `[v6]` / `[v6]:port`, or `*.suffix` (any name under
//! `suffix`, on the default port). Names are compared in lower case, without
//! a trailing dot. The image reference's registry (`nvcr.io`,
//! `registry.local:5000`) is what is matched: a port counts only where the
//! entry names one, so `registry.local` does not open `registry.local:22`.

use std::fmt;
use std::net::IpAddr;

/// The public registries CUDA images live on: NVIDIA's, Docker Hub under
/// all its names (the token service and the API hosts), GitHub's, Quay,
/// the Kubernetes project's, AWS's public gallery, Google's and
/// Microsoft's.
pub fn default_registries() -> Vec<String> {
    [
        "nvcr.io",
        "docker.io",
        "index.docker.io",
        "registry-1.docker.io",
        "registry.hub.docker.com",
        "auth.docker.io",
        "ghcr.io",
        "quay.io",
        "registry.k8s.io",
        "public.ecr.aws",
        "gcr.io",
        "*.gcr.io",
        "*.pkg.dev",
        "mcr.microsoft.com",
    ]
    .into_iter()
    .map(str::to_owned)
    .collect()
}

/// One entry of the list, parsed.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RegistryPattern {
    /// A host (lower case; an IPv6 address without brackets) and the port
    /// the entry names, if any.
    Host { host: String, port: Option<u16> },
    /// `*.suffix`, kept as `.suffix`: names under it, on the default port.
    Suffix(String),
}

/// A host and port split out of `host`, `host:port` or `[v6]:port`; the
/// host in lower case, without a trailing dot, an IPv6 address without its
/// brackets. None when it is not one.
pub fn split_authority(authority: &str) -> Option<(String, Option<u16>)> {
    let (host, port) = if let Some(rest) = authority.strip_prefix('[') {
        let (address, after) = rest.split_once(']')?;
        address.parse::<std::net::Ipv6Addr>().ok()?;
        let port = match after {
            "" => None,
            _ => Some(after.strip_prefix(':')?.parse::<u16>().ok()?),
        };
        (address, port)
    } else {
        match authority.rsplit_once(':') {
            Some((host, port)) => (host, Some(port.parse::<u16>().ok()?)),
            None => (authority, None),
        }
    };
    let host = host.strip_suffix('.').unwrap_or(host).to_ascii_lowercase();
    let valid = host.parse::<IpAddr>().is_ok() || host.split('.').all(is_label);
    valid.then_some((host, port))
}

/// A DNS label: letters, digits and inner hyphens, 1 to 63 of them.
fn is_label(label: &str) -> bool {
    !label.is_empty()
        && label.len() <= 63
        && label
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-')
        && !label.starts_with('-')
        && !label.ends_with('-')
}

impl RegistryPattern {
    /// Parses one entry; the error says what was expected.
    pub fn parse(entry: &str, wildcards: bool) -> Result<Self, &'static str> {
        let entry = entry.trim();
        if entry.is_empty() {
            return Err("empty");
        }
        if entry.contains("://") {
            return Err("a host[:port], without a scheme");
        }
        if entry.contains(|c: char| c == '/' || c == '@' || c.is_whitespace()) {
            return Err("a host[:port], without a path or spaces");
        }
        if let Some(suffix) = entry.strip_prefix("*.") {
            if !wildcards {
                return Err("a host[:port]; wildcards belong in imageResolution.registries");
            }
            return match split_authority(suffix) {
                Some((suffix, None))
                    if suffix.contains('.') && suffix.parse::<IpAddr>().is_err() =>
                {
                    Ok(Self::Suffix(format!(".{suffix}")))
                }
                _ => Err("*. and a domain of two labels or more, without a port (\"*.gcr.io\")"),
            };
        }
        if entry.contains('*') {
            return Err("a wildcard only as a leading \"*.\"");
        }
        match split_authority(entry) {
            Some((host, port)) => Ok(Self::Host { host, port }),
            None => Err("a host name or IP address, and a port number if any"),
        }
    }

    /// Whether `host` (as [`split_authority`] gives it) on `port` is this
    /// entry.
    pub fn matches(&self, host: &str, port: Option<u16>) -> bool {
        match self {
            Self::Host {
                host: entry,
                port: entry_port,
            } => entry == host && *entry_port == port,
            Self::Suffix(suffix) => port.is_none() && host.ends_with(suffix.as_str()),
        }
    }

    /// Whether the entry names `host` on some port.
    fn names(&self, host: &str) -> bool {
        match self {
            Self::Host { host: entry, .. } => entry == host,
            Self::Suffix(suffix) => host.ends_with(suffix.as_str()),
        }
    }
}

impl fmt::Display for RegistryPattern {
    /// The entry as the list may spell it: `host`, `host:port`,
    /// `[v6]:port`, `*.suffix`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Host { host, port } => {
                if host.contains(':') {
                    write!(f, "[{host}]")?;
                } else {
                    f.write_str(host)?;
                }
                match port {
                    Some(port) => write!(f, ":{port}"),
                    None => Ok(()),
                }
            }
            Self::Suffix(suffix) => write!(f, "*{suffix}"),
        }
    }
}

/// A list of entries, parsed.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct RegistryHosts {
    patterns: Vec<RegistryPattern>,
}

impl RegistryHosts {
    /// Parses `entries`; the error names the entry and says what was
    /// expected, on one line.
    pub fn parse(field: &str, entries: &[String], wildcards: bool) -> Result<Self, String> {
        let patterns = entries
            .iter()
            .map(|entry| {
                RegistryPattern::parse(entry, wildcards)
                    .map_err(|problem| format!("{field}: {entry:?}: expected {problem}"))
            })
            .collect::<Result<_, _>>()?;
        Ok(Self { patterns })
    }

    /// Whether `authority` (`host`, `host:port`, `[v6]:port`) is an entry.
    pub fn permits(&self, authority: &str) -> bool {
        split_authority(authority).is_some_and(|(host, port)| self.permits_host(&host, port))
    }

    /// The first entry that permits `authority`, and its place in the
    /// list: every host under `*.pkg.dev` is the one entry.
    pub fn entry_of(&self, authority: &str) -> Option<(usize, &RegistryPattern)> {
        let (host, port) = split_authority(authority)?;
        self.patterns
            .iter()
            .enumerate()
            .find(|(_, pattern)| pattern.matches(&host, port))
    }

    /// [`RegistryHosts::permits`] of a host already split and lower-cased.
    pub fn permits_host(&self, host: &str, port: Option<u16>) -> bool {
        self.patterns.iter().any(|p| p.matches(host, port))
    }

    /// Whether an entry names `host` (lower case), on whatever port.
    pub fn names(&self, host: &str) -> bool {
        self.patterns.iter().any(|p| p.names(host))
    }

    pub fn is_empty(&self) -> bool {
        self.patterns.is_empty()
    }
}

#[cfg(test)]
mod tests {
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
        assert_eq!(
            hosts(&[entry]).permits(authority),
            permitted,
            "{entry} {authority}"
        );
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
            err.as_ref()
                .is_err_and(|err| err.contains(problem) && !err.contains('\n')),
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
        assert_eq!(
            entry("us-docker.pkg.dev"),
            Some((1, "*.pkg.dev".to_owned()))
        );
        assert_eq!(
            entry("EUROPE-docker.pkg.dev"),
            Some((1, "*.pkg.dev".to_owned()))
        );
        assert_eq!(entry("nvcr.io"), Some((0, "nvcr.io".to_owned())));
        assert_eq!(
            entry("registry.local:5000"),
            Some((2, "registry.local:5000".to_owned()))
        );
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
}
