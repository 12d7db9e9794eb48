//! What kind of address a registry connection would go to: the webhook
//! runs inside the cluster, next to the API server, the node's kubelet and
//! the cloud's metadata service, so where it connects is decided by the
//! address, not only by the name.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AddressClass {
    Public,
    /// A private or otherwise non-global range (10/8, 172.16/12,
    /// 192.168/16, 100.64/10, fc00::/7, the documentation, benchmarking,
    /// protocol and reserved ranges that are not globally reachable, IPv6
    /// outside 2000::/3): in-house registries live here, so a listed name
    /// may resolve to one, but a redirect may not lead there.
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
        let article = if word.starts_with(['a', 'e', 'i', 'o', 'u']) { "an" } else { "a" };
        format!("{article} {word}")
    }
}

/// The class of `address`. An IPv4 address inside IPv6 (mapped,
/// compatible, NAT64's well-known prefix or 6to4) is judged by the IPv4
/// address it carries.
pub fn classify(address: IpAddr) -> AddressClass {
    match address {
        IpAddr::V4(v4) => classify_v4(v4),
        IpAddr::V6(v6) => match embedded_v4(v6) {
            Some(v4) => classify_v4(v4),
            None => classify_v6(v6),
        },
    }
}

const LOOPBACK: AddressClass = AddressClass::Forbidden("loopback");
const LINK_LOCAL: AddressClass = AddressClass::Forbidden("link-local");
const UNSPECIFIED: AddressClass = AddressClass::Forbidden("unspecified");
const MULTICAST: AddressClass = AddressClass::Forbidden("multicast");
const BROADCAST: AddressClass = AddressClass::Forbidden("broadcast");
const PRIVATE: AddressClass = AddressClass::Private;
const PUBLIC: AddressClass = AddressClass::Public;

/// The IPv4 ranges that are not public: every entry of IANA's IPv4
/// Special-Purpose Address Registry whose "Globally Reachable" is not
/// True, and multicast. The first range that holds an address decides, so
/// the globally reachable addresses inside a larger range come before it.
/// An address in none is public (among them the registry's globally
/// reachable 192.31.196.0/24, 192.52.193.0/24 and 192.175.48.0/24).
const V4_RANGES: [(u32, u8, AddressClass); 18] = [
    // Port Control Protocol Anycast (RFC 7723) and Traversal Using Relays
    // around NAT Anycast (RFC 8155): globally reachable, in 192.0.0.0/24.
    (0xc000_0009, 32, PUBLIC),
    (0xc000_000a, 32, PUBLIC),
    // "This network" (RFC 791); 0.0.0.0/32 is "this host" (RFC 1122).
    (0x0000_0000, 8, UNSPECIFIED),
    (0x0a00_0000, 8, PRIVATE),     // Private-Use (RFC 1918)
    (0x6440_0000, 10, PRIVATE),    // Shared Address Space (RFC 6598)
    (0x7f00_0000, 8, LOOPBACK),    // Loopback (RFC 1122)
    (0xa9fe_0000, 16, LINK_LOCAL), // Link Local (RFC 3927)
    (0xac10_0000, 12, PRIVATE),    // Private-Use (RFC 1918)
    // IETF Protocol Assignments (RFC 6890): the IPv4 Service Continuity
    // Prefix 192.0.0.0/29 (RFC 7335), the dummy address 192.0.0.8/32
    // (RFC 7600), NAT64/DNS64 discovery 192.0.0.170-171/32 (RFC 8880).
    (0xc000_0000, 24, PRIVATE),
    (0xc000_0200, 24, PRIVATE), // Documentation, TEST-NET-1 (RFC 5737)
    // Deprecated 6to4 Relay Anycast (RFC 7526), 6a44 relay (RFC 6751).
    (0xc058_6300, 24, PRIVATE),
    (0xc0a8_0000, 16, PRIVATE),   // Private-Use (RFC 1918)
    (0xc612_0000, 15, PRIVATE),   // Benchmarking (RFC 2544)
    (0xc633_6400, 24, PRIVATE),   // Documentation, TEST-NET-2 (RFC 5737)
    (0xcb00_7100, 24, PRIVATE),   // Documentation, TEST-NET-3 (RFC 5737)
    (0xe000_0000, 4, MULTICAST),  // Multicast (RFC 5771)
    (0xffff_ffff, 32, BROADCAST), // Limited Broadcast (RFC 919, RFC 8190)
    (0xf000_0000, 4, PRIVATE),    // Reserved (RFC 1112)
];

/// The IPv6 ranges that are not public, as [`V4_RANGES`]: the entries of
/// IANA's IPv6 Special-Purpose Address Registry whose "Globally
/// Reachable" is not True (those that carry an IPv4 address are judged by
/// it, [`embedded_v4`]), multicast and the deprecated site-local range.
/// Outside these, only the global unicast range 2000::/3 is public: the
/// rest of the address space is reserved by the IETF (RFC 4291) and
/// routed nowhere.
const V6_RANGES: [(u128, u8, AddressClass); 20] = [
    (0, 128, UNSPECIFIED), // Unspecified Address (RFC 4291)
    (1, 128, LOOPBACK),    // Loopback Address (RFC 4291)
    // IPv4-IPv6 Translation, local use (RFC 8215).
    (0x0064_ff9b_0001 << 80, 48, PRIVATE),
    (0x0100 << 112, 64, PRIVATE), // Discard-Only Address Block (RFC 6666)
    (0x0100_0000_0000_0001 << 64, 64, PRIVATE), // Dummy IPv6 Prefix (RFC 9780)
    // Globally reachable inside IETF Protocol Assignments 2001::/23: Port
    // Control Protocol Anycast (RFC 7723), TURN Anycast (RFC 8155), DNS-SD
    // Service Registration Protocol Anycast (RFC 9665), AMT (RFC 7450),
    // AS112-v6 (RFC 7535), ORCHIDv2 (RFC 7343), Drone Remote ID Protocol
    // Entity Tags (RFC 9374).
    ((0x2001_0001 << 96) | 1, 128, PUBLIC),
    ((0x2001_0001 << 96) | 2, 128, PUBLIC),
    ((0x2001_0001 << 96) | 3, 128, PUBLIC),
    (0x2001_0003 << 96, 32, PUBLIC),
    (0x2001_0004_0112 << 80, 48, PUBLIC),
    (0x2001_0020 << 96, 28, PUBLIC),
    (0x2001_0030 << 96, 28, PUBLIC),
    // IETF Protocol Assignments (RFC 2928): TEREDO 2001::/32 (RFC 4380),
    // Benchmarking 2001:2::/48 (RFC 5180), the deprecated ORCHID
    // 2001:10::/28 (RFC 4843), and what is not assigned yet.
    (0x2001 << 112, 23, PRIVATE),
    (0x2001_0db8 << 96, 32, PRIVATE), // Documentation (RFC 3849)
    (0x3fff << 112, 20, PRIVATE),     // Documentation (RFC 9637)
    (0x5f00 << 112, 16, PRIVATE),     // Segment Routing (SRv6) SIDs (RFC 9602)
    (0xfc00 << 112, 7, PRIVATE),      // Unique-Local (RFC 4193)
    (0xfe80 << 112, 10, LINK_LOCAL),  // Link-Local Unicast (RFC 4291)
    (0xfec0 << 112, 10, PRIVATE),     // Site-Local, deprecated (RFC 3879)
    (0xff00 << 112, 8, MULTICAST),    // Multicast (RFC 4291)
];

fn classify_v4(address: Ipv4Addr) -> AddressClass {
    let bits = address.to_bits();
    V4_RANGES
        .iter()
        .find(|(first, prefix, _)| bits & mask_v4(*prefix) == *first)
        .map_or(PUBLIC, |(_, _, class)| *class)
}

fn classify_v6(address: Ipv6Addr) -> AddressClass {
    let bits = address.to_bits();
    let global_unicast = bits >> 125 == 0b001;
    V6_RANGES
        .iter()
        .find(|(first, prefix, _)| bits & mask_v6(*prefix) == *first)
        .map_or(if global_unicast { PUBLIC } else { PRIVATE }, |(_, _, class)| *class)
}

fn mask_v4(prefix: u8) -> u32 {
    u32::MAX.checked_shl(32 - u32::from(prefix.min(32))).unwrap_or(0)
}

fn mask_v6(prefix: u8) -> u128 {
    u128::MAX.checked_shl(128 - u32::from(prefix.min(128))).unwrap_or(0)
}

/// The IPv4 address an IPv6 address carries: `::ffff:a.b.c.d` (mapped),
/// `::a.b.c.d` (compatible, deprecated), NAT64's well-known prefix
/// `64:ff9b::a.b.c.d` (RFC 6052), 6to4's `2002:AABB:CCDD::/48` (RFC 3056).
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
mod tests;
