//! What a review may make the webhook ask of the API server, bounded per
//! caller.
//!
//! Anyone who reaches the port may forge a review (no client certificate is
//! required by default), and two kinds of review make the webhook read the
//! cluster: a Namespace being opted in (its pods and claims are listed, a
//! few pages at most) and a ResourceClaim made for a pod (the pod is read,
//! and those of its claims and templates the caches do not know). Each
//! read is taken from a [`RateLimit`] kept per
//! caller IP ([`Caller`]), so a flood of forged reviews from one pod costs
//! the API server a bounded number of requests, and the API server's own
//! reviews, which come from its own address, keep their share. Past the
//! limit the review is answered without the read, as when the API server
//! does not answer: the claim unchanged, the namespace change admitted with
//! a warning that names the command that does the look instead.
//!
//! The callers' table holds at most [`MAX_CALLERS`] addresses; past it,
//! new addresses share one more entry, so the table cannot be made to grow
//! by calling from many addresses.

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
        // A router called in-process (tests) has no connection: all such
        // requests are one caller.
        let ip = parts.extensions.get::<Peer>().map_or(
            IpAddr::V4(Ipv4Addr::UNSPECIFIED),
            |Peer(address)| {
                // As the budget keys callers: an IPv4 caller seen on a
                // dual-stack socket is the same caller.
                address.ip().to_canonical()
            },
        );
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

/// How many caller addresses a [`PerCaller`] tells apart. An entry is 48
/// bytes or so: the table stays under 100 KiB.
pub const MAX_CALLERS: usize = 1024;

/// A [`RateLimit`] kept for each caller: the generic cell rate algorithm,
/// whose whole state per caller is one instant (when the caller's
/// allowance is next back to full, less one read).
#[derive(Debug)]
pub struct PerCaller {
    limit: RateLimit,
    capacity: usize,
    table: Mutex<Table>,
}

#[derive(Debug, Default)]
struct Table {
    /// For each caller, the theoretical arrival time of its next read.
    callers: HashMap<IpAddr, Instant>,
    /// Shared by the callers that found the table full.
    overflow: Option<Instant>,
}

impl PerCaller {
    pub fn new(limit: RateLimit) -> Self {
        Self::with_capacity(limit, MAX_CALLERS)
    }

    fn with_capacity(limit: RateLimit, capacity: usize) -> Self {
        Self {
            limit,
            capacity,
            table: Mutex::new(Table::default()),
        }
    }

    /// Takes one read of `caller`'s allowance at `now`; false when it has
    /// none left.
    pub fn take(&self, caller: Caller, now: Instant) -> bool {
        let mut table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        let Table { callers, overflow } = &mut *table;
        if let Some(next) = callers.get_mut(&caller.0) {
            return self.admit(next, now);
        }
        if callers.len() >= self.capacity {
            // A caller whose allowance is full again is as good as new:
            // forgetting it changes nothing.
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

    /// How many callers are told apart now (tests).
    #[cfg(test)]
    fn callers(&self) -> usize {
        let table = self.table.lock().unwrap_or_else(|e| e.into_inner());
        table.callers.len()
    }

    /// GCRA: a read at `now` is allowed when the caller's theoretical
    /// arrival time is at most `burst - 1` intervals ahead of `now`.
    fn admit(&self, next: &mut Instant, now: Instant) -> bool {
        let start = (*next).max(now);
        let ahead = start.saturating_duration_since(now);
        let window = self
            .limit
            .interval
            .saturating_mul(self.limit.burst.saturating_sub(1));
        if self.limit.burst == 0 || ahead > window {
            return false;
        }
        // An instant that would overflow is centuries away: stay put.
        *next = start.checked_add(self.limit.interval).unwrap_or(start);
        true
    }
}

/// Every opt-in look at a namespace lists at most this many pages of its
/// objects of each kind: 200 objects, 60 requests at most (pods, claims,
/// claim templates); `gpu-policy audit -n` reads them all.
pub const NAMESPACE_PAGES: usize = 20;
/// Objects per page of such a list. A page is held in memory while it is
/// evaluated: a pod is some KiB as a rule, but etcd lets one be 1.5 MiB,
/// and the namespace's users write them, so 10 such pods (15 MiB of JSON,
/// a few times that decoded) is what one look may hold at worst.
pub const NAMESPACE_PAGE: u32 = 10;

/// The cluster reads reviews cause, and their limits.
#[derive(Debug)]
pub struct ClusterReads {
    /// Looks at a namespace's pods and claims (Namespace reviews). An
    /// opt-in is rare; a GitOps tool labelling many namespaces at once
    /// gets the first ones checked and the others told to run `audit`.
    pub namespace_looks: PerCaller,
    /// How many looks run at once, whoever asks: each holds a page of pods
    /// ([`NAMESPACE_PAGE`]).
    pub looks_at_once: Semaphore,
    /// Reads of a claim's owner pod, and of the pod's claims and templates
    /// the caches do not know (ResourceClaim reviews): one each. The
    /// resource claim controller creates claims at the controller
    /// manager's client rate (20 per second, bursts of 30, by default),
    /// all through the API server's address: this leaves it room.
    pub pod_reads: PerCaller,
    /// How many claims' pods are held at once, read and evaluated, whoever
    /// asks: a pod is some KiB as a rule, but
    /// [`MAX_OBJECT_BYTES`](crate::cluster::MAX_OBJECT_BYTES) at
    /// most, and a review waits for its turn within its read budget.
    pub owners_at_once: Semaphore,
}

/// A caller's looks at namespaces: 3 at once, then one every 10 s.
pub const NAMESPACE_LOOKS: RateLimit = RateLimit {
    burst: 3,
    interval: Duration::from_secs(10),
};
/// Looks running at once, for all callers together: one, so that one
/// page of pods at most is held, whatever the callers do.
pub const LOOKS_AT_ONCE: usize = 1;
/// Claims' pods held at once, for all callers together: with the document
/// the rules read of each, some 20 MiB at most.
pub const OWNERS_AT_ONCE: usize = 2;
/// A caller's reads of pods: 50 at once, then 25 per second.
pub const POD_READS: RateLimit = RateLimit {
    burst: 50,
    interval: Duration::from_millis(40),
};

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

/// Why a namespace look was not made.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LookRefused {
    /// The caller has used its allowance.
    CallerLimit,
    /// [`LOOKS_AT_ONCE`] looks are running.
    Busy,
}

impl ClusterReads {
    /// A look at a namespace for `caller`, if its allowance and the looks
    /// running allow: the permit is held while the look runs.
    pub fn namespace_look(&self, caller: Caller) -> Result<SemaphorePermit<'_>, LookRefused> {
        let permit = self
            .looks_at_once
            .try_acquire()
            .map_err(|_| LookRefused::Busy)?;
        if !self.namespace_looks.take(caller, Instant::now()) {
            return Err(LookRefused::CallerLimit);
        }
        Ok(permit)
    }

    /// One read of a pod for `caller`, if its allowance has one.
    pub fn pod_read(&self, caller: Caller) -> bool {
        self.pod_reads.take(caller, Instant::now())
    }
}

#[cfg(test)]
mod tests;
