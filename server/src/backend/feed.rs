//! What a stream's reader (an SSE body, a socket) sends: events read from
//! the store first (a cluster resume's replay), then the live subscription
//! on the session's ring.

use gapless::{Event, Next, Subscription};
use std::task::{Context, Poll};

/// What an SSE body sends: events read from the store first (a cluster
/// resume's replay), then the live subscription on the session's ring
/// (`None`: nothing live follows, the stream is over).
pub(crate) struct Feed {
    backlog: std::collections::VecDeque<Event>,
    live: Option<Subscription>,
    /// Dropped with the body (ends what the connection holds, e.g. the
    /// standalone stream's claim in a cluster).
    _guard: Option<tokio_util::sync::DropGuard>,
}

impl Feed {
    /// Only the ring's subscription.
    pub(crate) fn live(sub: Subscription) -> Self {
        Feed { backlog: Default::default(), live: Some(sub), _guard: None }
    }

    /// Events it replays before going live: the store's backlog and what
    /// is left of the subscription's pinned gap.
    pub(crate) fn replay_len(&self) -> usize {
        self.backlog.len() + self.live.as_ref().map_or(0, Subscription::replay_pending)
    }

    /// The same feed, holding `guard` until the body drops.
    pub(crate) fn guarded(mut self, guard: tokio_util::sync::DropGuard) -> Self {
        self._guard = Some(guard);
        self
    }

    /// `backlog` first, then `live`.
    pub(crate) fn replay(backlog: Vec<Event>, live: Option<Subscription>) -> Self {
        Feed { backlog: backlog.into(), live, _guard: None }
    }

    /// The next event (`None` at the end).
    pub(crate) async fn recv(&mut self) -> Option<Result<Event, gapless::Lagged>> {
        std::future::poll_fn(|cx| self.poll_recv(cx)).await
    }

    fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Event, gapless::Lagged>>> {
        if let Some(e) = self.backlog.pop_front() {
            return Poll::Ready(Some(Ok(e)));
        }
        match &mut self.live {
            Some(sub) => sub.poll_recv(cx),
            None => Poll::Ready(None),
        }
    }

    /// The next event of the store's backlog, if any is left.
    pub(crate) fn pop_backlog(&mut self) -> Option<Event> {
        self.backlog.pop_front()
    }

    /// The live subscription (`None`: nothing live follows).
    pub(crate) fn live_mut(&mut self) -> Option<&mut Subscription> {
        self.live.as_mut()
    }

    pub(crate) fn try_recv(&mut self) -> Result<Next, gapless::Lagged> {
        if let Some(e) = self.backlog.pop_front() {
            return Ok(Next::Event(e));
        }
        match &mut self.live {
            Some(sub) => sub.try_recv(),
            None => Ok(Next::End),
        }
    }
}
