//! The bytes of request bodies being received, bounded in all and per
//! client (`ServerConfig::max_body_bytes_in_flight`; the budget itself is
//! `vocab/byte_budget.rs`).
//!
//! A body is read whole before it is parsed, so without a bound a client
//! that sends all of a large body but its last byte holds that much of the
//! server's memory per connection until the body read timeout: 200
//! connections of 3.9 MiB held 823 MiB. Here each POST body holds a share
//! of a process-wide budget while it is received: the bytes that have
//! arrived, frame by frame; and a body whose declared `Content-Length`
//! does not fit what is left now is refused before the handler runs
//! (nothing is held for bytes that have not arrived, so heads alone cannot
//! fill the budget). One client (its identity, else its IP address) may
//! hold at most a quarter of the budget, so a client that fills its share
//! leaves the rest to others (a caller the server cannot tell apart, with
//! neither, is held to the total only). Over either: `503
//! too_many_body_bytes` with `Retry-After: 1`, and on HTTP/1.1 the
//! connection closed (its body is left unread). The share is given back
//! when the body is dropped: once the handler has read it, or with the
//! request.

use crate::vocab::byte_budget::Hold;
use axum::body::Body;
use bytes::Bytes;
use http_body::{Frame, SizeHint};
use std::pin::Pin;
use std::task::{ready, Context, Poll};

/// A request body that holds its share of the budget while it is read:
/// a frame past the share grows it, or fails the body with `OverBudget`.
pub(crate) struct Charged {
    inner: Body,
    hold: Hold,
}

impl Charged {
    pub(crate) fn new(inner: Body, hold: Hold) -> Self {
        Charged { inner, hold }
    }
}

impl http_body::Body for Charged {
    type Data = Bytes;
    type Error = axum::BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Self::Error>>> {
        let this = &mut *self;
        let frame = match ready!(Pin::new(&mut this.inner).poll_frame(cx)) {
            Some(Ok(f)) => f,
            Some(Err(e)) => return Poll::Ready(Some(Err(e.into_inner()))),
            None => return Poll::Ready(None),
        };
        if let Some(data) = frame.data_ref() {
            if let Err(e) = this.hold.grow(data.len()) {
                return Poll::Ready(Some(Err(Box::new(e))));
            }
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

/// The first error of `T`'s type in `e`'s chain.
pub(crate) fn find<'a, T: std::error::Error + 'static>(
    e: &'a (dyn std::error::Error + 'static),
) -> Option<&'a T> {
    let mut at = Some(e);
    while let Some(e) = at {
        if let Some(t) = e.downcast_ref::<T>() {
            return Some(t);
        }
        at = e.source();
    }
    None
}
