//! A request body charged to its peer's share as its frames arrive, past
//! its `Content-Length`'s reservation; a shed body stops at once.

use std::fmt;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, ready};

use axum::body::Bytes;
use hyper::body::{Body, Frame, SizeHint};

use super::deadline::RequestPhase;
use super::{BodyCharge, Refusal};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BodyCut {
    Refused(Refusal),
    /// Shed for a peer under its fair share.
    Shed,
}

impl fmt::Display for BodyCut {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BodyCut::Refused(Refusal::OverShare) | BodyCut::Shed => {
                f.write_str("the body is over this caller's share of the server")
            }
            BodyCut::Refused(Refusal::Full) => f.write_str("the server has no room for the body"),
        }
    }
}

impl std::error::Error for BodyCut {}

pub struct Charged<B> {
    inner: B,
    charge: Arc<BodyCharge>,
    phase: Arc<RequestPhase>,
}

impl<B> Charged<B> {
    pub fn new(inner: B, charge: Arc<BodyCharge>, phase: Arc<RequestPhase>) -> Self {
        Self { inner, charge, phase }
    }

    fn ended(&self) {
        self.charge.settle();
        self.phase.arrived();
    }
}

impl<B> Body for Charged<B>
where
    B: Body<Data = Bytes> + Unpin,
    B::Error: Into<axum::BoxError>,
{
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, axum::BoxError>>> {
        let this = self.get_mut();
        if this.charge.poll_shed(cx).is_ready() {
            return Poll::Ready(Some(Err(Box::new(BodyCut::Shed))));
        }
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(frame)) => frame,
            Some(Err(error)) => return Poll::Ready(Some(Err(error.into()))),
            None => {
                this.ended();
                return Poll::Ready(None);
            }
        };
        if let Some(data) = frame.data_ref() {
            let bytes = u64::try_from(data.len()).unwrap_or(u64::MAX);
            if let Err(refusal) = this.charge.receive(bytes) {
                return Poll::Ready(Some(Err(Box::new(BodyCut::Refused(refusal)))));
            }
        }
        if this.inner.is_end_stream() {
            this.ended();
        }
        Poll::Ready(Some(Ok(frame)))
    }

    fn is_end_stream(&self) -> bool {
        self.inner.is_end_stream()
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests;
