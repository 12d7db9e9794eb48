//! The accounts of one shared resource (open connections, or body bytes in
//! flight): what each peer holds, in claims, against a cap per peer and a
//! cap for all. No clock, no I/O, no locking ([`super::Budget`] holds it
//! under its mutex). A shed claim leaves the accounts at once and is told
//! through its [`ShedSignal`], which wakes even a stalled reader.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::{Context, Poll};

use futures::task::AtomicWaker;

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The peer would hold more than its share: its own cap, or, while the
    /// pool is full, its fair share of the pool. Answered 429.
    OverShare,
    /// The pool is full and nothing held over a fair share can be shed
    /// (bodies already read, being decided). Answered 503.
    Full,
}

#[derive(Debug)]
struct Claim {
    id: u64,
    amount: u64,
    /// Whether shedding it frees what it holds: a body still arriving can
    /// be cut, a body already read is being decided and ends soon anyway.
    sheddable: bool,
    signal: Arc<ShedSignal>,
}

#[derive(Debug, Default)]
struct Holding {
    held: u64,
    /// Bounded by the peer's connection cap, so scanning it is cheap.
    claims: Vec<Claim>,
}

#[derive(Debug)]
pub struct Pool {
    cap: u64,
    peer_cap: u64,
    held: u64,
    /// Only peers that hold something: bounded by the connection cap.
    peers: HashMap<IpAddr, Holding>,
}

impl Pool {
    pub fn new(cap: u64, peer_cap: u64) -> Self {
        Self { cap, peer_cap: peer_cap.min(cap), held: 0, peers: HashMap::new() }
    }

    pub fn held(&self) -> u64 {
        self.held
    }

    pub fn held_by(&self, peer: IpAddr) -> u64 {
        self.peers.get(&peer).map_or(0, |holding| holding.held)
    }

    pub fn peers(&self) -> usize {
        self.peers.len()
    }

    /// Adds `amount` to claim `id` of `peer` (a new, sheddable claim when
    /// it has none yet). Within the caps it is granted. Past the pool's
    /// cap, a peer within its fair share (the pool divided among `sharers`
    /// peers) is granted by shedding claims of the peers that hold the most
    /// above that share (max-min fairness), largest first; otherwise
    /// refused, and nothing changes.
    pub fn take(
        &mut self,
        peer: IpAddr,
        id: u64,
        amount: u64,
        signal: &Arc<ShedSignal>,
        sharers: usize,
    ) -> Result<(), Refusal> {
        let before = self.held_by(peer);
        let after = before.saturating_add(amount);
        if after > self.peer_cap {
            return Err(Refusal::OverShare);
        }
        let total = self.held.saturating_add(amount);
        if total > self.cap {
            let fair = self.cap / u64::try_from(sharers.max(1)).unwrap_or(u64::MAX);
            if after > fair {
                return Err(Refusal::OverShare);
            }
            self.shed_down_to(total.saturating_sub(self.cap), peer, fair)?;
        }
        let holding = self.peers.entry(peer).or_default();
        holding.held = after;
        self.held = self.held.saturating_add(amount);
        match holding.claims.iter_mut().find(|claim| claim.id == id) {
            Some(claim) => claim.amount = claim.amount.saturating_add(amount),
            None => holding.claims.push(Claim {
                id,
                amount,
                sheddable: true,
                signal: Arc::clone(signal),
            }),
        }
        Ok(())
    }

    /// Claim `id` of `peer` can no longer be shed (its body is read).
    pub fn settle(&mut self, peer: IpAddr, id: u64) {
        if let Some(claim) = self
            .peers
            .get_mut(&peer)
            .and_then(|holding| holding.claims.iter_mut().find(|claim| claim.id == id))
        {
            claim.sheddable = false;
        }
    }

    /// Nothing when it was shed.
    pub fn release(&mut self, peer: IpAddr, id: u64) {
        let Some(holding) = self.peers.get_mut(&peer) else {
            return;
        };
        if let Some(index) = holding.claims.iter().position(|claim| claim.id == id) {
            let claim = holding.claims.swap_remove(index);
            holding.held = holding.held.saturating_sub(claim.amount);
            self.held = self.held.saturating_sub(claim.amount);
        }
        if holding.claims.is_empty() {
            self.peers.remove(&peer);
        }
    }

    /// Sheds claims of peers other than `taker` that hold more than `fair`
    /// until `needed` units are freed, or refuses without shedding any when
    /// they cannot free that much.
    fn shed_down_to(&mut self, needed: u64, taker: IpAddr, fair: u64) -> Result<(), Refusal> {
        let over = |(peer, holding): &(&IpAddr, &Holding)| **peer != taker && holding.held > fair;
        let sheddable = |claim: &&Claim| claim.sheddable;
        let can_free: u64 = (self.peers.iter().filter(over))
            .flat_map(|(_, holding)| holding.claims.iter().filter(sheddable))
            .map(|claim| claim.amount)
            .sum();
        if can_free < needed {
            return Err(Refusal::Full);
        }
        let mut freed = 0u64;
        while freed < needed {
            let victim = (self.peers.iter().filter(over))
                .filter(|(_, holding)| holding.claims.iter().any(|claim| claim.sheddable))
                .max_by_key(|(_, holding)| holding.held)
                .map(|(peer, _)| *peer);
            let Some((victim, holding)) = victim.and_then(|v| Some((v, self.peers.get_mut(&v)?)))
            else {
                return Err(Refusal::Full);
            };
            let Some(index) = (holding.claims.iter().enumerate())
                .filter(|(_, claim)| claim.sheddable)
                .max_by_key(|(_, claim)| claim.amount)
                .map(|(index, _)| index)
            else {
                return Err(Refusal::Full);
            };
            let claim = holding.claims.swap_remove(index);
            claim.signal.shed();
            holding.held = holding.held.saturating_sub(claim.amount);
            self.held = self.held.saturating_sub(claim.amount);
            freed = freed.saturating_add(claim.amount);
            if holding.claims.is_empty() {
                self.peers.remove(&victim);
            }
        }
        Ok(())
    }
}

#[derive(Debug, Default)]
pub struct ShedSignal {
    shed: AtomicBool,
    waker: AtomicWaker,
}

impl ShedSignal {
    pub(super) fn shed(&self) {
        self.shed.store(true, Ordering::Release);
        self.waker.wake();
    }

    pub fn is_shed(&self) -> bool {
        self.shed.load(Ordering::Acquire)
    }

    pub fn poll_shed(&self, cx: &mut Context<'_>) -> Poll<()> {
        if self.is_shed() {
            return Poll::Ready(());
        }
        self.waker.register(cx.waker());
        if self.is_shed() { Poll::Ready(()) } else { Poll::Pending }
    }

    pub async fn wait(&self) {
        std::future::poll_fn(|cx| self.poll_shed(cx)).await;
    }
}

#[cfg(test)]
mod tests;
