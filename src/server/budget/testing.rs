use std::net::IpAddr;
use std::time::Duration;

use super::Limits;

/// Two connections a peer, four in all; 60 bytes a peer, 100 in all.
pub const LIMITS: Limits = Limits {
    connections: 4,
    connections_per_peer: 2,
    body_bytes: 100,
    body_bytes_per_peer: 60,
    request_deadline: Duration::from_secs(1),
    idle_timeout: Duration::from_secs(1),
};

/// The peer `10.0.0.<last>`.
pub fn ip(last: u8) -> IpAddr {
    IpAddr::from([10, 0, 0, last])
}
