//! The registry client's DNS: every name it connects to (an image's
//! registry, a token realm, a redirect's host) is asked as an absolute
//! name. Under Kubernetes' resolv.conf (`search <ns>.svc.cluster.local
//! ...`, `ndots:5`) the system's resolver would ask `nvcr.io` as
//! `nvcr.io.svc.cluster.local` (the Service `nvcr` of namespace `io`)
//! first, and an in-cluster answer would pass the address check. Here only
//! resolv.conf's name servers, `timeout` and `attempts` apply.

use std::io::ErrorKind;
use std::net::{IpAddr, SocketAddr};
use std::time::Duration;

use hickory_resolver::TokioResolver;
use hickory_resolver::config::{
    LookupIpStrategy, NameServerConfig, ResolveHosts, ResolverConfig, ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::proto::rr::Name;

/// The resolv.conf read when [`DnsOptions::resolv_conf`] gives none.
const RESOLV_CONF: &str = "/etc/resolv.conf";

/// Answers kept (by name and record type): the client resolves the listed
/// registries, their token realms and their CDNs, a few names.
const CACHE_ENTRIES: u64 = 256;

/// Where the registry client's DNS questions go. The default reads
/// `/etc/resolv.conf` when the resolver is built; the configuration file
/// has no say in it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DnsOptions {
    /// resolv.conf text to read instead of `/etc/resolv.conf`.
    pub resolv_conf: Option<String>,
    /// One address (and port) that replaces every `nameserver` of the
    /// resolv.conf, for a test's DNS server on loopback. With it the
    /// system's hosts file is not read either: every answer is that
    /// server's.
    pub name_server: Option<SocketAddr>,
}

/// Cheap to clone: clones share the name servers and the cache.
#[derive(Clone)]
pub(super) struct Dns {
    resolver: TokioResolver,
}

/// One line naming the name.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct DnsFailure(String);

/// One line.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DnsSetupError {
    #[error("cannot read {RESOLV_CONF}: {0}")]
    ResolvConf(String),
    #[error("DNS resolver: {0}")]
    Resolver(String),
}

/// The resolv.conf text `options` name: theirs, or `/etc/resolv.conf`'s
/// (a missing file reads as empty, as the C library's resolver reads it).
fn resolv_conf_text(options: &DnsOptions) -> Result<Vec<u8>, DnsSetupError> {
    match &options.resolv_conf {
        Some(text) => Ok(text.clone().into_bytes()),
        None => match std::fs::read(RESOLV_CONF) {
            Ok(bytes) => Ok(bytes),
            Err(err) if err.kind() == ErrorKind::NotFound => Ok(Vec::new()),
            Err(err) => Err(DnsSetupError::ResolvConf(err.to_string())),
        },
    }
}

impl Dns {
    /// A resolver of the name servers `options` name. The resolv.conf
    /// lines it does not understand are ignored, as the C library ignores
    /// them; without a `nameserver` line, the local one (127.0.0.1, ::1).
    pub(super) fn new(options: &DnsOptions) -> Result<Self, DnsSetupError> {
        let text = resolv_conf_text(options)?;
        let (parsed, _unread_lines) = resolv_conf::Config::parse_with_errors(&text);
        let name_servers: Vec<NameServerConfig> = match options.name_server {
            Some(address) => {
                let mut server = NameServerConfig::udp_and_tcp(address.ip());
                for connection in &mut server.connections {
                    connection.port = address.port();
                }
                vec![server]
            }
            None => parsed
                .get_nameservers_or_local()
                .iter()
                .map(|ip| NameServerConfig::udp_and_tcp(ip.into()))
                .collect(),
        };
        // No `domain`, no `search`: only absolute names are asked.
        let config = ResolverConfig::from_parts(None, Vec::new(), name_servers);
        let mut resolver_options = ResolverOpts::default();
        resolver_options.timeout = Duration::from_secs(u64::from(parsed.timeout.max(1)));
        resolver_options.attempts = usize::try_from(parsed.attempts.max(1)).unwrap_or(1);
        resolver_options.edns0 = parsed.edns0;
        resolver_options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        resolver_options.cache_size = CACHE_ENTRIES;
        if options.name_server.is_some() {
            resolver_options.use_hosts_file = ResolveHosts::Never;
        }
        let resolver = TokioResolver::builder_with_config(config, TokioRuntimeProvider::default())
            .with_options(resolver_options)
            .build()
            .map_err(|err| DnsSetupError::Resolver(err.to_string()))?;
        Ok(Self { resolver })
    }

    /// `host` is a name or an IP literal; a name is asked as absolute.
    pub(super) async fn addresses(&self, host: &str) -> Result<Vec<IpAddr>, DnsFailure> {
        let literal = host.strip_prefix('[').and_then(|h| h.strip_suffix(']'));
        if let Ok(address) = literal.unwrap_or(host).parse::<IpAddr>() {
            return Ok(vec![address]);
        }
        let shown = host.strip_suffix('.').unwrap_or(host);
        let mut name =
            Name::from_ascii(host).map_err(|_| DnsFailure(format!("{shown} is not a DNS name")))?;
        name.set_fqdn(true);
        match self.resolver.lookup_ip(name).await {
            Ok(found) => Ok(found.iter().collect()),
            Err(err) => Err(DnsFailure(describe(shown, &err))),
        }
    }
}

fn describe(name: &str, err: &NetError) -> String {
    match err {
        _ if err.is_no_records_found() || err.is_nx_domain() => {
            format!("{name} resolves to no address")
        }
        NetError::Timeout => format!("no DNS answer for {name} in time"),
        NetError::Dns(DnsError::ResponseCode(code)) => {
            format!("DNS answered {code} for {name}")
        }
        _ => format!("DNS lookup of {name} failed"),
    }
}

#[cfg(test)]
mod tests;
