//! `imageResolution.registries` and `insecureRegistries`: the registry hosts
//! registry mode may contact, and which of them speak plain HTTP.
//!
//! An entry is `host` (a DNS name or an IP address, on the scheme's default port), `host:port`,
//! `[v6]` / `[v6]:port`, or `*.suffix` (any name under `suffix`, on the default port). Names are
//! compared in lower case, without a trailing dot. The image reference's registry (`nvcr.io`,
//! `registry.local:5000`) is what is matched: a port counts only where the entry names one, so
//! `registry.local` does not open `registry.local:22`.

use std::fmt;
use std::net::IpAddr;

/// The public registries CUDA images live on: NVIDIA's, Docker Hub under all its names (the token
/// service and the API hosts), GitHub's, Quay, the Kubernetes project's, AWS's public gallery,
/// Google's and Microsoft's.
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
    /// A host (lower case; an IPv6 address without brackets) and the port the entry names, if any.
    Host { host: String, port: Option<u16> },
    /// `*.suffix`, kept as `.suffix`: names under it, on the default port.
    Suffix(String),
}

/// A host and port split out of `host`, `host:port` or `[v6]:port`; the host in lower case, without
/// a trailing dot, an IPv6 address without its brackets. None when it is not one.
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
        && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
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

    /// Whether `host` (as [`split_authority`] gives it) on `port` is this entry.
    pub fn matches(&self, host: &str, port: Option<u16>) -> bool {
        match self {
            Self::Host { host: entry, port: entry_port } => entry == host && *entry_port == port,
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
    /// The entry as the list may spell it: `host`, `host:port`, `[v6]:port`, `*.suffix`.
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
    /// Parses `entries`; the error names the entry and says what was expected.
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
        self.patterns.iter().enumerate().find(|(_, pattern)| pattern.matches(&host, port))
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
mod tests;
