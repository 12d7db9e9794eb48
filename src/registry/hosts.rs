//! Where the registry client may connect, decided twice: by the URL before
//! a request is sent (an image's registry, a redirect, a token realm), and
//! by the resolved addresses at connect time ([`CheckedResolver`]: the
//! client connects only to the addresses it returns, so DNS rebinding gets
//! nowhere). Which addresses each may reach: [`HostPolicy::admitted`].

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;

use reqwest::Url;
use reqwest::dns::{Addrs, Name, Resolve, Resolving};

use super::addresses::{AddressClass, classify};
use super::dns::Dns;
use super::error::RegistryError;
use super::lookup::Failure;
use crate::settings::{RegistryHosts, RegistryPattern};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct HostPolicy {
    registries: RegistryHosts,
    insecure: RegistryHosts,
}

/// A URL's host as the lists match it: lower case, an IPv6 address without
/// brackets; and the address when it is one.
fn host_of(url: &Url) -> Option<(String, Option<IpAddr>)> {
    match url.host()? {
        url::Host::Domain(name) => {
            let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
            Some((name, None))
        }
        url::Host::Ipv4(v4) => Some((v4.to_string(), Some(IpAddr::V4(v4)))),
        url::Host::Ipv6(v6) => Some((v6.to_string(), Some(IpAddr::V6(v6)))),
    }
}

/// `scheme://host[:port]` of a URL: what a refusal names (never the path
/// or the query, which may carry a token).
pub(super) fn origin_of(url: &Url) -> String {
    url.origin().ascii_serialization()
}

impl HostPolicy {
    pub(super) fn new(registries: &[String], insecure: &[String]) -> Result<Self, RegistryError> {
        let parse = |field, entries, wildcards| {
            RegistryHosts::parse(field, entries, wildcards).map_err(RegistryError::Hosts)
        };
        Ok(Self {
            registries: parse("imageResolution.registries", registries, true)?,
            insecure: parse("imageResolution.insecureRegistries", insecure, false)?,
        })
    }

    /// Whether an image's registry (`host[:port]`, as the reference names
    /// it) may be contacted.
    pub(super) fn check_registry(&self, registry: &str) -> Result<(), Failure> {
        self.registry_entry(registry).map(|_| ())
    }

    /// The entry of `imageResolution.registries` that lists an image's
    /// registry, and its place in the list: the key of the registry's
    /// lookup slots. A refusal when none does.
    pub(super) fn registry_entry(
        &self,
        registry: &str,
    ) -> Result<(usize, &RegistryPattern), Failure> {
        self.registries.entry_of(registry).ok_or_else(|| {
            Failure::refused(format!("registry {registry} is not in imageResolution.registries"))
        })
    }

    pub(super) fn scheme_for(&self, registry: &str) -> &'static str {
        if self.insecure.permits(registry) { "http" } else { "https" }
    }

    /// Whether `url` is on a listed host and port (credentials may go
    /// there; a listed host is contacted on private addresses too).
    pub(super) fn is_listed(&self, url: &Url) -> bool {
        host_of(url).is_some_and(|(host, _)| self.registries.permits_host(&host, url.port()))
    }

    /// Whether a request may go to `url`: the registry's own, a redirect's
    /// target, or a token realm. The reason names the origin only.
    pub(super) fn check_url(&self, url: &Url) -> Result<(), Failure> {
        let refuse = |why: String| Err(Failure::refused(format!("{}: {why}", origin_of(url))));
        let Some((host, address)) = host_of(url) else {
            return refuse("no host".to_owned());
        };
        if !url.username().is_empty() || url.password().is_some() {
            return refuse("a URL with credentials in it".to_owned());
        }
        let port = url.port();
        match url.scheme() {
            "https" => {}
            "http" if self.insecure.permits_host(&host, port) => {}
            "http" => return refuse("plain HTTP to a host not in insecureRegistries".to_owned()),
            other => return refuse(format!("scheme {other} is not https")),
        }
        if self.registries.permits_host(&host, port) {
            return Ok(());
        }
        match address {
            Some(address) => match classify(address) {
                AddressClass::Public => Ok(()),
                class => refuse(format!(
                    "{} address, not in imageResolution.registries",
                    class.with_article()
                )),
            },
            // A listed name on another port: the resolver would let it
            // reach private addresses, which only its listed port may.
            None if self.registries.names(&host) => refuse(
                "a port of a listed host that imageResolution.registries does not list".to_owned(),
            ),
            // Any other name: the resolver lets it reach public addresses
            // only.
            None => Ok(()),
        }
    }

    pub(super) fn resolver(self: &Arc<Self>, dns: &Dns) -> CheckedResolver {
        CheckedResolver { policy: Arc::clone(self), dns: dns.clone() }
    }

    /// Which of `addresses` a connection to `name` may go to: for a listed
    /// name, any but loopback, link-local, unspecified and multicast ones;
    /// for any other name (a redirect's, a token realm's), public ones.
    /// A refusal names the host and the classes of its addresses, never
    /// the addresses: it becomes the warning a pod's author reads.
    pub(super) fn admitted(
        &self,
        name: &str,
        addresses: &[SocketAddr],
    ) -> Result<Vec<SocketAddr>, String> {
        let name = name.strip_suffix('.').unwrap_or(name).to_ascii_lowercase();
        let listed = self.registries.names(&name);
        let mut admitted = Vec::new();
        let mut refused: Vec<AddressClass> = Vec::new();
        for address in addresses {
            let class = classify(address.ip());
            let allowed = match class {
                AddressClass::Public => true,
                AddressClass::Private => listed,
                AddressClass::Forbidden(_) => false,
            };
            if allowed {
                admitted.push(*address);
            } else if !refused.contains(&class) {
                refused.push(class);
            }
        }
        if !admitted.is_empty() {
            return Ok(admitted);
        }
        if refused.is_empty() {
            return Err(format!("{name} resolves to no address"));
        }
        let allowed = if listed {
            "which only a literal imageResolution.registries entry may reach"
        } else {
            "and it is not in imageResolution.registries"
        };
        Err(format!("{name} resolves only to {} addresses, {allowed}", in_words(&refused)))
    }
}

/// `private`, `private and loopback`, `private, loopback and link-local`.
fn in_words(classes: &[AddressClass]) -> String {
    let words: Vec<String> = classes.iter().map(ToString::to_string).collect();
    match words.split_last() {
        Some((last, [])) => last.clone(),
        Some((last, rest)) => format!("{} and {last}", rest.join(", ")),
        None => String::new(),
    }
}

/// Names asked as absolute names, then [`HostPolicy::admitted`] on what
/// [`Dns`] returned.
pub(super) struct CheckedResolver {
    policy: Arc<HostPolicy>,
    dns: Dns,
}

impl Resolve for CheckedResolver {
    fn resolve(&self, name: Name) -> Resolving {
        let policy = Arc::clone(&self.policy);
        let dns = self.dns.clone();
        let name = name.as_str().to_owned();
        Box::pin(async move {
            let found: Vec<SocketAddr> =
                dns.addresses(&name).await?.into_iter().map(|ip| SocketAddr::new(ip, 0)).collect();
            let admitted = policy.admitted(&name, &found).map_err(AddressRefused)?;
            let addresses: Addrs = Box::new(admitted.into_iter());
            Ok(addresses)
        })
    }
}

/// The refusal of [`CheckedResolver`], told apart from other connection
/// errors by the transport.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct AddressRefused(pub(super) String);

#[cfg(test)]
mod tests;
