//! The request deadline, kept by the connection's reader: from the first
//! byte of a request to the last byte of its body. A client that stalls
//! has its connection cut, freeing its body's buffer. hyper's header
//! timeout starts when it waits for a request: it bounds idleness, not a
//! body.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU8, Ordering};
use std::task::{Context, Poll, ready};
use std::time::Duration;

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::time::{Instant, Sleep};

/// Shared by the reader (which starts the clock) and the service (which
/// stops it).
#[derive(Debug, Default)]
pub struct RequestPhase(AtomicU8);

const IDLE: u8 = 0;
const ARRIVING: u8 = 1;
const ARRIVED: u8 = 2;

impl RequestPhase {
    /// The body has arrived whole: the clock stops while it is decided.
    pub fn arrived(&self) {
        let _ = self.0.compare_exchange(ARRIVING, ARRIVED, Ordering::AcqRel, Ordering::Acquire);
    }

    pub fn answered(&self) {
        self.0.store(IDLE, Ordering::Release);
    }

    fn is_arriving(&self) -> bool {
        self.0.load(Ordering::Acquire) == ARRIVING
    }

    fn begin(&self) -> bool {
        self.0.compare_exchange(IDLE, ARRIVING, Ordering::AcqRel, Ordering::Acquire).is_ok()
    }
}

/// Fails its reads once the request being received is past its deadline.
pub struct Deadlined<T> {
    inner: T,
    phase: Arc<RequestPhase>,
    deadline: Duration,
    timer: Option<Pin<Box<Sleep>>>,
    armed: bool,
}

impl<T> Deadlined<T> {
    pub fn new(inner: T, phase: Arc<RequestPhase>, deadline: Duration) -> Self {
        Self { inner, phase, deadline, timer: None, armed: false }
    }

    fn arm(&mut self) {
        let Some(at) = Instant::now().checked_add(self.deadline) else {
            return;
        };
        match &mut self.timer {
            Some(timer) => timer.as_mut().reset(at),
            None => self.timer = Some(Box::pin(tokio::time::sleep_until(at))),
        }
        self.armed = true;
    }

    /// The timer wakes the reader when the deadline passes.
    fn passed(&mut self, cx: &mut Context<'_>) -> bool {
        if !self.phase.is_arriving() {
            self.armed = false;
        }
        match (&mut self.timer, self.armed) {
            (Some(timer), true) => timer.as_mut().poll(cx).is_ready(),
            _ => false,
        }
    }
}

impl<T: AsyncRead + Unpin> AsyncRead for Deadlined<T> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if this.passed(cx) {
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::TimedOut,
                "the request did not arrive within its deadline",
            )));
        }
        let before = buf.filled().len();
        ready!(Pin::new(&mut this.inner).poll_read(cx, buf))?;
        if buf.filled().len() > before && this.phase.begin() {
            this.arm();
        }
        Poll::Ready(Ok(()))
    }
}

impl<T: AsyncWrite + Unpin> AsyncWrite for Deadlined<T> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests;
