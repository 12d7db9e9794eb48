//! What a review may make the webhook ask of the API server, bounded per
//! caller IP ([`Caller`]).
//!
//! Why, and the figures: docs/security.md, "What a forged review can make
//! the server do, and learn". Past a caller's [`RateLimit`] the review is
//! answered without the read.
//!
//! The rate limit is the generic cell rate algorithm written here rather
//! than the `governor` crate's keyed limiter: its table grows with every
//! address and is bounded only by sweeping it, where this one holds at most
//! [`MAX_CALLERS`] addresses and makes the rest share one entry, so calling
//! from many addresses cannot grow it.

use std::collections::HashMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use axum::extract::FromRequestParts;
use axum::http::request::Parts;
use tokio::sync::{Semaphore, SemaphorePermit};

use super::listener::Peer;

/// Who sent a review: the IP address of the connection it came on (the
/// port changes with every connection a caller opens).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Caller(pub IpAddr);

impl<S: Send + Sync> FromRequestParts<S> for Caller {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, Self::Rejection> {
        // In-process requests (tests) have no connection: one caller. An
        // IPv4 caller on a dual-stack socket is the same caller.
        let ip = parts
            .extensions
            .get::<Peer>()
            .map_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED), |Peer(address)| address.ip().to_canonical());
        Ok(Caller(ip))
    }
}

/// How many reads a caller may make: `burst` at once, then one per
/// `interval`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RateLimit {
    pub burst: u32,
    pub interval: Duration,
}

/// Caller addresses a [`PerCaller`] tells apart: under 100 KiB of table.
pub const MAX_CALLERS: usize = 1024;

/// GCRA: one instant per caller.
#[derive(Debug)]
pub struct PerCaller {
    limit: RateLimit,
    capacity: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// Each caller's theoretical arrival time of its next read.
    callers: HashMap<IpAddr, Instant>,
    /// Shared by the callers that found the table full.
    overflow: Option<Instant>,
}

impl PerCaller {
    pub fn new(limit: RateLimit) -> Self {
        Self::with_capacity(limit, MAX_CALLERS)
    }

    fn with_capacity(limit: RateLimit, capacity: usize) -> Self {
        Self { limit, capacity, table: Mutex::new(Table::default()) }
    }

    /// False when `caller` has no allowance left.
    pub fn take(&self, caller: Caller, now: Instant) -> bool {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let Table { callers, overflow } = &mut *table;
        if let Some(next) = callers.get_mut(&caller.0) {
            return self.admit(next, now);
        }
        if callers.len() >= self.capacity {
            // A caller whose allowance is full again is as good as new.
            callers.retain(|_, next| *next > now);
        }
        if callers.len() < self.capacity {
            let mut next = now;
            let admitted = self.admit(&mut next, now);
            callers.insert(caller.0, next);
            return admitted;
        }
        let next = overflow.get_or_insert(now);
        self.admit(next, now)
    }

    /// A read at `now` is allowed when the theoretical arrival time is at
    /// most `burst - 1` intervals ahead.
    fn admit(&self, next: &mut Instant, now: Instant) -> bool {
        let start = (*next).max(now);
        let ahead = start.saturating_duration_since(now);
        let window = self.limit.interval.saturating_mul(self.limit.burst.saturating_sub(1));
        if self.limit.burst == 0 || ahead > window {
            return false;
        }
        // An instant that would overflow is centuries away: stay put.
        *next = start.checked_add(self.limit.interval).unwrap_or(start);
        true
    }
}

/// Pages of each kind an opt-in look lists: 200 objects, 60 requests at
/// most; `gpu-policy audit -n` reads them all.
pub const NAMESPACE_PAGES: usize = 20;
/// Objects per page, held while evaluated: a pod may be 1.5 MiB (etcd),
/// so a look holds 15 MiB of JSON at worst, a few times that decoded.
pub const NAMESPACE_PAGE: u32 = 10;

#[derive(Debug)]
pub struct ClusterReads {
    /// Looks at a namespace's pods and claims. An opt-in is rare; a GitOps
    /// tool labelling many namespaces gets the others told to run `audit`.
    pub namespace_looks: PerCaller,
    /// Looks running at once, whoever asks: each holds a page of pods.
    pub looks_at_once: Semaphore,
    /// Reads of a claim's owner pod, and of its claims the caches do not
    /// know. The resource claim controller creates claims at 20 per second,
    /// bursts of 30, through the API server's address: this leaves it room.
    pub pod_reads: PerCaller,
    /// Claims' pods held at once, whoever asks: each is at most
    /// [`MAX_OBJECT_BYTES`](crate::cluster::MAX_OBJECT_BYTES); a review
    /// waits for its turn within its read budget.
    pub owners_at_once: Semaphore,
}

/// A caller's looks at namespaces: 3 at once, then one every 10 s.
pub const NAMESPACE_LOOKS: RateLimit = RateLimit { burst: 3, interval: Duration::from_secs(10) };
/// Looks running at once, all callers together: one page of pods held.
pub const LOOKS_AT_ONCE: usize = 1;
/// Claims' pods held at once, all callers together: some 20 MiB at most.
pub const OWNERS_AT_ONCE: usize = 2;
/// A caller's reads of pods: 50 at once, then 25 per second.
pub const POD_READS: RateLimit = RateLimit { burst: 50, interval: Duration::from_millis(40) };

impl Default for ClusterReads {
    fn default() -> Self {
        Self {
            namespace_looks: PerCaller::new(NAMESPACE_LOOKS),
            looks_at_once: Semaphore::new(LOOKS_AT_ONCE),
            pod_reads: PerCaller::new(POD_READS),
            owners_at_once: Semaphore::new(OWNERS_AT_ONCE),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookRefused {
    CallerLimit,
    /// [`LOOKS_AT_ONCE`] looks are running.
    Busy,
}

impl ClusterReads {
    /// A look at a namespace for `caller`: the permit is held while it runs.
    pub fn namespace_look(&self, caller: Caller) -> Result<SemaphorePermit<'_>, LookRefused> {
        let permit = self.looks_at_once.try_acquire().map_err(|_| LookRefused::Busy)?;
        if !self.namespace_looks.take(caller, Instant::now()) {
            return Err(LookRefused::CallerLimit);
        }
        Ok(permit)
    }

    pub fn pod_read(&self, caller: Caller) -> bool {
        self.pod_reads.take(caller, Instant::now())
    }
}

#[cfg(test)]
mod tests;
