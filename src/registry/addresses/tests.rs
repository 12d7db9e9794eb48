use super::*;
use rstest::rstest;

/// One address of each range of the IANA IPv4 and IPv6 Special-Purpose
/// Address Registries (their "Globally Reachable" column decides
/// public or not), of multicast, of the reserved IPv6 space, and of
/// IPv4 carried in IPv6.
#[rstest]
// IPv4 Special-Purpose Address Registry.
#[case("0.0.0.0", "unspecified")] // 0.0.0.0/32 "This host on this network", RFC 1122: False
#[case("0.1.2.3", "unspecified")] // 0.0.0.0/8 "This network", RFC 791: False
#[case("10.1.2.3", "private")] // 10.0.0.0/8 Private-Use, RFC 1918: False
#[case("100.64.0.1", "private")] // 100.64.0.0/10 Shared Address Space, RFC 6598: False
#[case("100.127.255.254", "private")] // (its last address)
#[case("127.0.0.1", "loopback")] // 127.0.0.0/8 Loopback, RFC 1122: False
#[case("127.9.9.9", "loopback")]
#[case("169.254.169.254", "link-local")] // 169.254.0.0/16 Link Local, RFC 3927: False
#[case("172.16.0.1", "private")] // 172.16.0.0/12 Private-Use, RFC 1918: False
#[case("172.31.255.254", "private")]
#[case("192.0.0.77", "private")] // 192.0.0.0/24 IETF Protocol Assignments, RFC 6890: False
#[case("192.0.0.1", "private")] // 192.0.0.0/29 IPv4 Service Continuity Prefix, RFC 7335: False
#[case("192.0.0.8", "private")] // 192.0.0.8/32 IPv4 dummy address, RFC 7600: False
#[case("192.0.0.9", "public")] // 192.0.0.9/32 Port Control Protocol Anycast, RFC 7723: True
#[case("192.0.0.10", "public")] // 192.0.0.10/32 TURN Anycast, RFC 8155: True
#[case("192.0.0.170", "private")] // 192.0.0.170/32 NAT64/DNS64 Discovery, RFC 8880: False
#[case("192.0.0.171", "private")] // 192.0.0.171/32 NAT64/DNS64 Discovery, RFC 8880: False
#[case("192.0.2.1", "private")] // 192.0.2.0/24 Documentation (TEST-NET-1), RFC 5737: False
#[case("192.31.196.1", "public")] // 192.31.196.0/24 AS112-v4, RFC 7535: True
#[case("192.52.193.1", "public")] // 192.52.193.0/24 AMT, RFC 7450: True
#[case("192.88.99.1", "private")] // 192.88.99.0/24 Deprecated (6to4 Relay Anycast), RFC 7526
#[case("192.88.99.2", "private")] // 192.88.99.2/32 6a44-relay anycast address, RFC 6751
#[case("192.168.1.1", "private")] // 192.168.0.0/16 Private-Use, RFC 1918: False
#[case("192.175.48.1", "public")] // 192.175.48.0/24 Direct Delegation AS112 Service, RFC 7534: True
#[case("198.18.0.1", "private")] // 198.18.0.0/15 Benchmarking, RFC 2544: False
#[case("198.19.255.254", "private")]
#[case("198.51.100.7", "private")] // 198.51.100.0/24 Documentation (TEST-NET-2), RFC 5737: False
#[case("203.0.113.7", "private")] // 203.0.113.0/24 Documentation (TEST-NET-3), RFC 5737: False
#[case("240.0.0.1", "private")] // 240.0.0.0/4 Reserved, RFC 1112: False
#[case("255.255.255.255", "broadcast")]
// 255.255.255.255/32 Limited Broadcast, RFC 919: False
// IPv4 Multicast Address Space Registry, 224.0.0.0/4 (RFC 5771).
#[case("224.0.0.1", "multicast")]
#[case("239.255.255.250", "multicast")]
// Neighbours of the ranges, and ordinary public addresses.
#[case("8.8.8.8", "public")]
#[case("151.101.1.1", "public")]
#[case("1.0.0.0", "public")]
#[case("100.63.255.255", "public")]
#[case("100.128.0.1", "public")]
#[case("126.255.255.255", "public")]
#[case("172.32.0.1", "public")]
#[case("192.0.1.1", "public")]
#[case("198.20.0.1", "public")]
#[case("223.255.255.255", "public")]
// IPv6 Special-Purpose Address Registry.
#[case("::1", "loopback")] // ::1/128 Loopback Address, RFC 4291: False
#[case("::", "unspecified")] // ::/128 Unspecified Address, RFC 4291: False
#[case("::ffff:127.0.0.1", "loopback")] // ::ffff:0:0/96 IPv4-mapped Address, RFC 4291: its IPv4
#[case("::ffff:169.254.169.254", "link-local")]
#[case("::ffff:10.0.0.1", "private")]
#[case("::ffff:8.8.8.8", "public")]
#[case("64:ff9b::a9fe:a9fe", "link-local")] // 64:ff9b::/96 IPv4-IPv6 Translat., RFC 6052: its IPv4
#[case("64:ff9b::808:808", "public")]
#[case("64:ff9b:1::808:808", "private")] // 64:ff9b:1::/48 IPv4-IPv6 Translat. (local use), RFC 8215: False
#[case("100::1", "private")] // 100::/64 Discard-Only Address Block, RFC 6666: False
#[case("100:0:0:1::1", "private")] // 100:0:0:1::/64 Dummy IPv6 Prefix, RFC 9780: False
#[case("2001:1ff::1", "private")] // 2001::/23 IETF Protocol Assignments, RFC 2928: False
#[case("2001::1", "private")] // 2001::/32 TEREDO, RFC 4380: N/A
#[case("2001:1::1", "public")] // 2001:1::1/128 Port Control Protocol Anycast, RFC 7723: True
#[case("2001:1::2", "public")] // 2001:1::2/128 TURN Anycast, RFC 8155: True
#[case("2001:1::3", "public")] // 2001:1::3/128 DNS-SD SRP Anycast, RFC 9665: True
#[case("2001:1::4", "private")] // (unassigned, in 2001::/23)
#[case("2001:2::1", "private")] // 2001:2::/48 Benchmarking, RFC 5180: False
#[case("2001:3::1", "public")] // 2001:3::/32 AMT, RFC 7450: True
#[case("2001:4:112::1", "public")] // 2001:4:112::/48 AS112-v6, RFC 7535: True
#[case("2001:10::1", "private")] // 2001:10::/28 Deprecated (previously ORCHID), RFC 4843: N/A
#[case("2001:20::1", "public")] // 2001:20::/28 ORCHIDv2, RFC 7343: True
#[case("2001:30::1", "public")] // 2001:30::/28 Drone Remote ID Protocol Entity Tags, RFC 9374: True
#[case("2001:db8::1", "private")] // 2001:db8::/32 Documentation, RFC 3849: False
#[case("2002:7f00:1::", "loopback")] // 2002::/16 6to4, RFC 3056: its IPv4
#[case("2002:808:808::1", "public")]
#[case("2620:4f:8000::1", "public")] // 2620:4f:8000::/48 Direct Delegation AS112 Service, RFC 7534: True
#[case("3fff::1", "private")] // 3fff::/20 Documentation, RFC 9637: False
#[case("3fff:fff::1", "private")]
#[case("5f00::1", "private")] // 5f00::/16 Segment Routing (SRv6) SIDs, RFC 9602: False
#[case("fd00::1", "private")] // fc00::/7 Unique-Local, RFC 4193: False
#[case("fc00::1", "private")]
#[case("fe80::1", "link-local")]
// fe80::/10 Link-Local Unicast, RFC 4291: False
// IPv6 Address Space Registry: deprecated site-local (RFC 3879),
// multicast (RFC 4291), and space reserved by the IETF.
#[case("fec0::1", "private")]
#[case("ff02::1", "multicast")]
#[case("ff0e::1", "multicast")]
#[case("::127.0.0.1", "loopback")] // ::/96 IPv4-compatible (deprecated, RFC 4291): its IPv4
#[case("::ffff:0:808:808", "private")] // ::ffff:0:0:0/96 IPv4-translated (RFC 2765): reserved
#[case("4000::1", "private")]
#[case("1000::1", "private")]
// Global unicast 2000::/3 outside the ranges above.
#[case("2606:4700::1111", "public")]
#[case("2001:200::1", "public")]
#[case("3ffe::1", "public")]
#[case("3fff:1000::1", "public")]
fn addresses_are_classified(#[case] address: &str, #[case] class: &str) {
    let address: IpAddr = address.parse().unwrap_or_else(|err| panic!("{address}: {err}"));
    assert_eq!(classify(address).to_string(), class, "{address}");
}

#[test]
fn every_range_starts_on_its_prefix() {
    for (first, prefix, _) in V4_RANGES {
        assert_eq!(first & !mask_v4(prefix), 0, "{}", Ipv4Addr::from_bits(first));
    }
    for (first, prefix, _) in V6_RANGES {
        assert_eq!(first & !mask_v6(prefix), 0, "{}", Ipv6Addr::from_bits(first));
    }
}
