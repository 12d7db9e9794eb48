//! What kind of address a registry connection would go to: the webhook
//! runs inside the cluster, next to the API server, the node's kubelet and
//! the cloud's metadata service, so where it connects is decided by the
//! address, not only by the name.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The classes that decide whether a connection may be made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    /// Routed on the internet.
    Public,
    /// A private or otherwise non-global range (10/8, 172.16/12,
    /// 192.168/16, 100.64/10, fc00::/7, documentation and benchmarking
    /// ranges): in-house registries live here, so a listed name may
    /// resolve to one, but a redirect may not lead there.
    Private,
    /// Loopback, link-local (the metadata address 169.254.169.254),
    /// unspecified, multicast or broadcast: only ever contacted when a
    /// `registries` entry is that literal address.
    Forbidden(&'static str),
}

impl fmt::Display for AddressClass {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Public => f.write_str("public"),
            Self::Private => f.write_str("private"),
            Self::Forbidden(kind) => f.write_str(kind),
        }
    }
}

impl AddressClass {
    /// `a public`, `an unspecified`, ...: for a sentence.
    pub fn with_article(&self) -> String {
        let word = self.to_string();
        let article = if word.starts_with(['a', 'e', 'i', 'o', 'u']) {
            "an"
        } else {
            "a"
        };
        format!("{article} {word}")
    }
}

/// The class of `address`. An IPv4 address inside IPv6 (mapped,
/// compatible, NAT64 or 6to4) is judged by the IPv4 address it carries.
pub fn classify(address: IpAddr) -> AddressClass {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

fn classify_v4(address: Ipv4Addr) -> AddressClass {
    let [a, b, c, _] = address.octets();
    if address.is_loopback() {
        AddressClass::Forbidden("loopback")
    } else if address.is_link_local() {
        AddressClass::Forbidden("link-local")
    } else if address.is_unspecified() || a == 0 {
        AddressClass::Forbidden("unspecified")
    } else if address.is_multicast() {
        AddressClass::Forbidden("multicast")
    } else if address.is_broadcast() {
        AddressClass::Forbidden("broadcast")
    } else if address.is_private()
        // Carrier-grade NAT, IETF protocol assignments, documentation,
        // benchmarking, and the reserved 240/4.
        || (a == 100 && (64..128).contains(&b))
        || (a == 192 && b == 0 && (c == 0 || c == 2))
        || (a == 198 && (b == 18 || b == 19))
        || (a == 198 && b == 51 && c == 100)
        || (a == 203 && b == 0 && c == 113)
        || a >= 240
    {
        AddressClass::Private
    } else {
        AddressClass::Public
    }
}

fn classify_v6(address: Ipv6Addr) -> AddressClass {
    let first = address.segments()[0];
    if address.is_loopback() {
        AddressClass::Forbidden("loopback")
    } else if address.is_unspecified() {
        AddressClass::Forbidden("unspecified")
    } else if address.is_multicast() {
        AddressClass::Forbidden("multicast")
    } else if first & 0xffc0 == 0xfe80 {
        AddressClass::Forbidden("link-local")
    } else if first & 0xfe00 == 0xfc00
        // Site-local (deprecated, still not global) and documentation.
        || first & 0xffc0 == 0xfec0
        || (first == 0x2001 && address.segments()[1] == 0x0db8)
    {
        AddressClass::Private
    } else {
        AddressClass::Public
    }
}

/// The IPv4 address an IPv6 address carries: `::ffff:a.b.c.d`,
/// `::a.b.c.d`, NAT64's `64:ff9b::a.b.c.d`, 6to4's `2002:AABB:CCDD::`.
fn embedded_v4(address: Ipv6Addr) -> Option<Ipv4Addr> {
    if let Some(v4) = address.to_ipv4_mapped() {
        return Some(v4);
    }
    let s = address.segments();
    let low = |hi: u16, lo: u16| {
        let [a, b] = hi.to_be_bytes();
        let [c, d] = lo.to_be_bytes();
        Ipv4Addr::new(a, b, c, d)
    };
    if s[..6] == [0, 0, 0, 0, 0, 0] && !address.is_loopback() && !address.is_unspecified() {
        return Some(low(s[6], s[7]));
    }
    if s[..6] == [0x64, 0xff9b, 0, 0, 0, 0] {
        return Some(low(s[6], s[7]));
    }
    if s[0] == 0x2002 {
        return Some(low(s[1], s[2]));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use rstest::rstest;

    #[rstest]
    #[case("8.8.8.8", "public")]
    #[case("151.101.1.1", "public")]
    #[case("127.0.0.1", "loopback")]
    #[case("127.9.9.9", "loopback")]
    #[case("169.254.169.254", "link-local")]
    #[case("0.0.0.0", "unspecified")]
    #[case("0.1.2.3", "unspecified")]
    #[case("224.0.0.1", "multicast")]
    #[case("255.255.255.255", "broadcast")]
    #[case("10.1.2.3", "private")]
    #[case("172.16.0.1", "private")]
    #[case("172.32.0.1", "public")]
    #[case("192.168.1.1", "private")]
    #[case("100.64.0.1", "private")]
    #[case("100.128.0.1", "public")]
    #[case("198.18.0.1", "private")]
    #[case("240.0.0.1", "private")]
    #[case("::1", "loopback")]
    #[case("::", "unspecified")]
    #[case("fe80::1", "link-local")]
    #[case("ff02::1", "multicast")]
    #[case("fd00::1", "private")]
    #[case("2001:db8::1", "private")]
    #[case("2606:4700::1111", "public")]
    #[case("::ffff:127.0.0.1", "loopback")]
    #[case("::ffff:169.254.169.254", "link-local")]
    #[case("::127.0.0.1", "loopback")]
    #[case("64:ff9b::a9fe:a9fe", "link-local")]
    #[case("2002:7f00:1::", "loopback")]
    #[case("::ffff:8.8.8.8", "public")]
    fn addresses_are_classified(#[case] address: &str, #[case] class: &str) {
        let address: IpAddr = address
            .parse()
            .unwrap_or_else(|err| panic!("{address}: {err}"));
        assert_eq!(classify(address).to_string(), class, "{address}");
    }
}
