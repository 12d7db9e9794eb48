//! The budget of the admission port: docs/operations.md, "The admission
//! port's budget" and "Fair shares, and what they cannot do". Connections
//! are charged before the TLS handshake ([`Budget::connect`]), bodies per
//! frame past their `Content-Length` ([`charged::Charged`]), time by
//! [`deadline::Deadlined`].

pub mod charged;
pub mod deadline;
mod ledger;

use std::net::IpAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use ledger::Pool;
pub use ledger::{Refusal, ShedSignal};

use crate::metrics::{BudgetRefusals, RefusedLabels};

/// What the admission port may hold at once, and for how long.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    pub connections: u64,
    pub connections_per_peer: u64,
    /// Request body bytes being received or decided.
    pub body_bytes: u64,
    pub body_bytes_per_peer: u64,
    /// From a request's first byte to its body's last.
    pub request_deadline: Duration,
    pub idle_timeout: Duration,
}

impl Limits {
    /// For one replica of 2 cores and 256Mi (docs/operations.md reckons).
    pub const DEFAULT: Limits = Limits {
        connections: 256,
        connections_per_peer: 128,
        body_bytes: 48 << 20,
        body_bytes_per_peer: 40 << 20,
        request_deadline: Duration::from_secs(10),
        idle_timeout: Duration::from_secs(30),
    };
}

impl Default for Limits {
    fn default() -> Self {
        Self::DEFAULT
    }
}

#[derive(Debug)]
pub struct Budget {
    limits: Limits,
    ledger: Mutex<Ledger>,
    next_claim: AtomicU64,
    /// `gpu_policy_admission_refused_total`.
    refused: BudgetRefusals,
}

#[derive(Debug)]
struct Ledger {
    connections: Pool,
    bytes: Pool,
}

impl Budget {
    pub fn new(limits: Limits, refused: BudgetRefusals) -> Arc<Self> {
        Arc::new(Self {
            limits,
            refused,
            ledger: Mutex::new(Ledger {
                connections: Pool::new(limits.connections, limits.connections_per_peer),
                bytes: Pool::new(limits.body_bytes, limits.body_bytes_per_peer),
            }),
            next_claim: AtomicU64::new(1),
        })
    }

    pub fn limits(&self) -> &Limits {
        &self.limits
    }

    fn claim(self: &Arc<Self>, peer: IpAddr) -> Claim {
        Claim {
            budget: Arc::clone(self),
            peer: peer.to_canonical(),
            id: self.next_claim.fetch_add(1, Ordering::Relaxed),
            signal: Arc::new(ShedSignal::default()),
        }
    }

    /// A connection from `peer`, counted until the permit is dropped; or
    /// why it is refused (the caller closes it at once).
    pub fn connect(self: &Arc<Self>, peer: IpAddr) -> Result<ConnectionPermit, Refusal> {
        let claim = self.claim(peer);
        let mut ledger = self.ledger();
        let pool = &mut ledger.connections;
        let sharers = pool.peers() + usize::from(pool.held_by(claim.peer) == 0);
        pool.take(claim.peer, claim.id, 1, &claim.signal, sharers)
            .inspect_err(|refusal| self.count(RefusedLabels::CONNECTIONS, *refusal))?;
        drop(ledger);
        Ok(ConnectionPermit(claim))
    }

    /// A claim on body bytes for one request of `peer`, `announced` of
    /// them (its `Content-Length`) reserved at once; or why it is refused.
    pub fn body(self: &Arc<Self>, peer: IpAddr, announced: u64) -> Result<BodyCharge, Refusal> {
        let charge = BodyCharge {
            claim: self.claim(peer),
            reserved: AtomicU64::new(0),
            received: AtomicU64::new(0),
        };
        charge.reserve(announced)?;
        Ok(charge)
    }

    /// Open connections and body bytes held, all peers together.
    pub fn in_use(&self) -> (u64, u64) {
        let ledger = self.ledger();
        (ledger.connections.held(), ledger.bytes.held())
    }

    fn count(&self, resource: &'static str, refusal: Refusal) {
        let reason = match refusal {
            Refusal::OverShare => RefusedLabels::OVER_SHARE,
            Refusal::Full => RefusedLabels::FULL,
        };
        self.refused.get_or_create(&RefusedLabels { resource, reason }).inc();
    }

    fn ledger(&self) -> MutexGuard<'_, Ledger> {
        // The ledger is consistent after every call (no call panics while
        // holding it), so a poisoned lock is still a good ledger.
        self.ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

/// One claim of a peer on the budget.
#[derive(Debug)]
struct Claim {
    budget: Arc<Budget>,
    peer: IpAddr,
    id: u64,
    signal: Arc<ShedSignal>,
}

/// One open connection of a peer, counted until dropped.
#[derive(Debug)]
pub struct ConnectionPermit(Claim);

impl ConnectionPermit {
    /// Completes when the connection is shed for a peer under its fair
    /// share: the connection is then closed.
    pub async fn shed(&self) {
        self.0.signal.wait().await;
    }
}

impl Drop for ConnectionPermit {
    fn drop(&mut self) {
        let Claim { budget, peer, id, .. } = &self.0;
        budget.ledger().connections.release(*peer, *id);
    }
}

/// The body bytes one request holds: reserved for its `Content-Length`,
/// grown as frames beyond it arrive, given back when dropped.
#[derive(Debug)]
pub struct BodyCharge {
    claim: Claim,
    reserved: AtomicU64,
    received: AtomicU64,
}

impl BodyCharge {
    /// Charges `bytes` more received; past the reservation, the pool is
    /// asked for the difference.
    pub fn receive(&self, bytes: u64) -> Result<(), Refusal> {
        let received = self.received.fetch_add(bytes, Ordering::AcqRel).saturating_add(bytes);
        let reserved = self.reserved.load(Ordering::Acquire);
        if received > reserved {
            self.reserve(received.saturating_sub(reserved))?;
        }
        Ok(())
    }

    /// The whole body has arrived: it is being decided, and shedding it
    /// would no longer free anything soon.
    pub fn settle(&self) {
        let Claim { budget, peer, id, .. } = &self.claim;
        budget.ledger().bytes.settle(*peer, *id);
    }

    /// Whether the claim was shed for a peer under its fair share.
    pub fn poll_shed(&self, cx: &mut Context<'_>) -> Poll<()> {
        self.claim.signal.poll_shed(cx)
    }

    fn reserve(&self, bytes: u64) -> Result<(), Refusal> {
        if bytes == 0 {
            return Ok(());
        }
        let Claim { budget, peer, id, signal } = &self.claim;
        let mut ledger = budget.ledger();
        let sharers = ledger.connections.peers();
        ledger
            .bytes
            .take(*peer, *id, bytes, signal, sharers)
            .inspect_err(|refusal| budget.count(RefusedLabels::BODY_BYTES, *refusal))?;
        self.reserved.fetch_add(bytes, Ordering::AcqRel);
        Ok(())
    }
}

impl Drop for BodyCharge {
    fn drop(&mut self) {
        let Claim { budget, peer, id, .. } = &self.claim;
        budget.ledger().bytes.release(*peer, *id);
    }
}

#[cfg(test)]
mod tests;
