//! The async layer (feature `tokio`): subscriptions that replay a pinned
//! gap and then follow the ring live, each once, in seq order.
//!
//! Waking costs the producer nothing while nobody waits: a subscriber that
//! finds nothing new registers its waker (push it, raise the ring's waiting
//! flag, fence, re-check `head`); the producer, after storing `head`, looks
//! at the flag only if some live cursor has registered, and takes the waker
//! list's lock only if the flag is up. A publish into a session nobody
//! subscribes to pays no fence at all (see [`crate::ring`](mod@crate::ring), "Wake").
//!
//! A subscription made through a session ([`Session::subscribe_stream`],
//! [`Resume::into_subscription`], [`Migration::into_subscription`]) attaches
//! to the session's pacing gate, so that a paced publish
//! ([`Session::publish_paced`]) waits for it. This layer adds those methods
//! to the session layer's types; nothing below imports it.

use crate::ring::{Batch, Cursor, Event, Lagged, Next, NextBatch, Reader, Snapshot, SnapshotError, Staged};
use crate::session::{Migration, PaceGate, Resume, Session};
use gapless_wire::{Seq, StreamId};
use std::future::poll_fn;
use std::sync::Arc;
use std::task::{Context, Poll};

/// Replays a pinned gap, then follows live events of the same target (a
/// stream, or the whole session), in seq order, each once.
#[derive(Debug)]
pub struct Subscription {
    /// The pinned gap and the next seq to look at in it.
    replay: Option<(Snapshot, u64)>,
    /// Live follower, positioned right after the snapshot's range.
    live: Cursor,
    /// Pacing gate this subscription is attached to: stream subscriptions
    /// and whole-session ones made through a session have one (the latter
    /// count progress in seqs, see `by_seq`); those made from a bare
    /// `Reader` have none.
    gate: Option<Arc<PaceGate>>,
    /// The gate counts session seqs (the session's gate), not positions in
    /// one stream.
    by_seq: bool,
    /// Set after the end or an error: nothing more is yielded.
    done: bool,
}

impl Subscription {
    /// Subscribes to every event of `reader`'s ring after `after`: replay,
    /// then live. Not attached to any pacing gate.
    pub fn after(reader: &Reader, after: Seq) -> Result<Subscription, SnapshotError> {
        Ok(Subscription::new(reader, reader.snapshot(after)?))
    }

    /// Subscribes to the events of `stream` after `after`: replay, then
    /// live; ends after the stream's last event once it ended. Not attached
    /// to any pacing gate (see [`Session::subscribe_stream`] for that).
    pub fn stream_after(
        reader: &Reader,
        stream: StreamId,
        after: Seq,
    ) -> Result<Subscription, SnapshotError> {
        Ok(Subscription::new(reader, reader.snapshot_stream(stream, after)?))
    }

    /// A subscription that yields `snapshot`'s events, then continues live
    /// from the seq after the snapshot's range.
    pub fn new(reader: &Reader, snapshot: Snapshot) -> Self {
        let next = Seq(snapshot.covered_to().0 + 1);
        let live = match snapshot.stream() {
            Some(s) => reader.stream_cursor(s, next).unwrap_or_else(|| ended_cursor(reader, next)),
            None => reader.cursor(next),
        };
        let from = snapshot.first().map_or(u64::MAX, |s| s.0);
        Subscription { replay: Some((snapshot, from)), live, gate: None, by_seq: false, done: false }
    }

    /// Events of the pinned gap not yet yielded (what a resume replays
    /// before it goes live). Counts them for a stream subscription, whose
    /// gap holds other streams' events too.
    pub fn replay_pending(&self) -> usize {
        self.replay.as_ref().map_or(0, |(snap, next)| snap.len_from(*next))
    }

    /// The stream followed, or `None` for the whole session.
    pub fn stream(&self) -> Option<StreamId> {
        self.live.stream()
    }

    /// Next event without waiting: `Pending` if none yet.
    pub fn try_recv(&mut self) -> Result<Next, Lagged> {
        if self.done {
            return Ok(Next::End);
        }
        if let Some((snap, next)) = &mut self.replay {
            if let Some(e) = snap.next_from(*next) {
                *next = e.seq.0 + 1;
                let e = e.to_event();
                self.consumed(&e);
                return Ok(Next::Event(e));
            }
            self.replay = None;
        }
        match self.live.try_next() {
            Ok(Next::Event(e)) => {
                self.consumed(&e);
                Ok(Next::Event(e))
            }
            Ok(Next::End) => {
                self.done = true;
                Ok(Next::End)
            }
            Ok(Next::Pending) => Ok(Next::Pending),
            Err(l) => {
                self.done = true;
                Err(l)
            }
        }
    }

    /// Polls for the next event: `Ready(None)` once the stream ended or the
    /// session closed; `Ready(Some(Err(..)))` once if it fell behind
    /// eviction (then `None`).
    pub fn poll_recv(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Event, Lagged>>> {
        self.poll_with(cx, |s| {
            Ok(match s.try_recv()? {
                Next::Event(e) => Step::Ready(e),
                Next::Pending => Step::Pending,
                Next::End => Step::End,
            })
        })
    }

    /// The waiting loop of every poll: look; if nothing is there, register
    /// the waker, and look once more before sleeping (what happened between
    /// the first look and the registration, an end say, wakes nobody).
    fn poll_with<T>(
        &mut self,
        cx: &mut Context<'_>,
        mut look: impl FnMut(&mut Self) -> Result<Step<T>, Lagged>,
    ) -> Poll<Option<Result<T, Lagged>>> {
        loop {
            let found = match look(self) {
                Ok(Step::Pending) => {
                    if !self.live.register(cx.waker()) {
                        continue; // the head moved: look again
                    }
                    look(self)
                }
                other => other,
            };
            return match found {
                Ok(Step::Ready(t)) => Poll::Ready(Some(Ok(t))),
                Ok(Step::Pending) => Poll::Pending,
                Ok(Step::End) => Poll::Ready(None),
                Err(l) => Poll::Ready(Some(Err(l))),
            };
        }
    }

    /// Waits for the next event (see [`Subscription::poll_recv`]).
    pub async fn recv(&mut self) -> Option<Result<Event, Lagged>> {
        poll_fn(|cx| self.poll_recv(cx)).await
    }

    /// Takes every available event up to the end of the next event's chunk
    /// without waiting, borrowed from the pinned chunk: no reference
    /// counting per event (see [`Batch`]). `Pending` if none yet.
    pub fn try_recv_batch(&mut self) -> Result<NextBatch<'_>, Lagged> {
        self.try_recv_batch_max(usize::MAX)
    }

    /// [`Subscription::try_recv_batch`] whose batch ends before the event
    /// that would take its payload bytes past `max_bytes`; a batch holds at
    /// least one event, however large. The events left out come next. For
    /// a transport that bounds the bytes of one write.
    pub fn try_recv_batch_max(&mut self, max_bytes: usize) -> Result<NextBatch<'_>, Lagged> {
        Ok(match self.advance_batch(max_bytes)? {
            Step::Ready(src) => NextBatch::Events(self.batch(src)),
            Step::Pending => NextBatch::Pending,
            Step::End => NextBatch::End,
        })
    }

    /// Polls for the next batch: `Ready(None)` once the stream ended or the
    /// session closed; `Ready(Some(Err(..)))` once if it fell behind
    /// eviction (then `None`). The same events, in the same order, as
    /// [`Subscription::poll_recv`] would yield one by one.
    pub fn poll_recv_batch(&mut self, cx: &mut Context<'_>) -> Poll<Option<Result<Batch<'_>, Lagged>>> {
        self.poll_recv_batch_max(cx, usize::MAX)
    }

    /// [`Subscription::poll_recv_batch`] with the bound of
    /// [`Subscription::try_recv_batch_max`].
    pub fn poll_recv_batch_max(
        &mut self,
        cx: &mut Context<'_>,
        max_bytes: usize,
    ) -> Poll<Option<Result<Batch<'_>, Lagged>>> {
        match self.poll_with(cx, |s| s.advance_batch(max_bytes)) {
            Poll::Ready(Some(Ok(src))) => Poll::Ready(Some(Ok(self.batch(src)))),
            Poll::Ready(Some(Err(l))) => Poll::Ready(Some(Err(l))),
            Poll::Ready(None) => Poll::Ready(None),
            Poll::Pending => Poll::Pending,
        }
    }

    /// Waits for the next batch (see [`Subscription::poll_recv_batch`]).
    pub async fn recv_batch(&mut self) -> Option<Result<Batch<'_>, Lagged>> {
        match poll_fn(|cx| self.poll_with(cx, |s| s.advance_batch(usize::MAX))).await? {
            Ok(src) => Some(Ok(self.batch(src))),
            Err(l) => Some(Err(l)),
        }
    }

    /// Finds the next batch (replay first, then live) and moves past it.
    fn advance_batch(&mut self, max_bytes: usize) -> Result<Step<Source>, Lagged> {
        if self.done {
            return Ok(Step::End);
        }
        if let Some((snap, next)) = &mut self.replay {
            if let Some((from, to)) = snap.batch_range_from(*next) {
                *next = to + 1;
                let src = self.cut(Source::Replay { from, to }, max_bytes);
                self.consumed_batch(src);
                return Ok(Step::Ready(src));
            }
            self.replay = None;
        }
        match self.live.advance_batch() {
            Ok(Staged::Ready { from, to }) => {
                let src = self.cut(Source::Live { from, to }, max_bytes);
                self.consumed_batch(src);
                Ok(Step::Ready(src))
            }
            Ok(Staged::Pending) => Ok(Step::Pending),
            Ok(Staged::End) => {
                self.done = true;
                Ok(Step::End)
            }
            Err(l) => {
                self.done = true;
                Err(l)
            }
        }
    }

    fn batch(&self, src: Source) -> Batch<'_> {
        match src {
            Source::Replay { from, to } => {
                self.replay.as_ref().expect("a replay batch comes from the snapshot").0.batch(from, to)
            }
            Source::Live { from, to } => self.live.staged(from, to),
        }
    }

    /// Ends the batch `src` (already moved past) before the event that
    /// would take its payload bytes past `max`, keeping at least one event,
    /// and moves back to right after the last event kept.
    fn cut(&mut self, src: Source, max: usize) -> Source {
        if max == usize::MAX {
            return src;
        }
        let mut kept = None;
        let mut bytes = 0usize;
        for e in self.batch(src).iter() {
            bytes = bytes.saturating_add(e.payload.len());
            if bytes > max && kept.is_some() {
                break;
            }
            kept = Some(e.seq.0);
        }
        let last = kept.expect("a batch holds an event");
        match src {
            Source::Replay { from, to } if last < to => {
                self.replay.as_mut().expect("a replay batch comes from the snapshot").1 = last + 1;
                Source::Replay { from, to: last }
            }
            Source::Live { from, to } if last < to => {
                self.live.seek(Seq(last + 1));
                Source::Live { from, to: last }
            }
            whole => whole,
        }
    }

    fn consumed_batch(&self, src: Source) {
        if let Some(g) = &self.gate {
            let last = self.batch(src).last();
            g.took(if self.by_seq { last.seq.0 } else { last.index_in_stream });
        }
    }

    fn consumed(&self, e: &Event) {
        if let Some(g) = &self.gate {
            g.took(if self.by_seq { e.seq.0 } else { e.index_in_stream });
        }
    }
}

impl Drop for Subscription {
    fn drop(&mut self) {
        if let Some(g) = self.gate.take() {
            g.detach();
        }
    }
}

/// Where a subscription's next batch lies.
#[derive(Clone, Copy, Debug)]
enum Source {
    Replay { from: u64, to: u64 },
    Live { from: u64, to: u64 },
}

/// What one look of a subscription found.
#[derive(Clone, Copy, Debug)]
enum Step<T> {
    Ready(T),
    Pending,
    End,
}

/// A cursor on a stream whose record is gone: ended, nothing left.
fn ended_cursor(reader: &Reader, next: Seq) -> Cursor {
    let mut c = reader.cursor(next);
    c.finish();
    c
}

impl Resume {
    /// Replays the granted gap, then follows the same target live.
    pub fn into_subscription(self) -> Subscription {
        let session = self.session;
        let consumed = replay_start(&session, &self.snapshot);
        match self.stream {
            Some(s) => {
                let mut sub = Subscription::new(session.reader(), self.snapshot);
                sub.gate = session.pace.attach(session.reader(), s, consumed);
                sub
            }
            None => session_subscription(&session, self.snapshot),
        }
    }
}

impl Migration {
    /// Replays the pinned gap (first seq = cursor + 1), then every live
    /// event of the session, attached to the session's pacing gate.
    pub fn into_subscription(self) -> Subscription {
        session_subscription(&self.session, self.snapshot)
    }
}

/// A whole-session subscription attached to the session's pacing gate: it
/// reads every stream, so a paced publish on any stream waits for it.
fn session_subscription(session: &Session, snapshot: Snapshot) -> Subscription {
    let consumed = snapshot.first().map_or(snapshot.covered_to().0, |f| f.0 - 1);
    let mut sub = Subscription::new(session.reader(), snapshot);
    sub.gate = Some(session.pace.attach_session(consumed));
    sub.by_seq = true;
    sub
}

/// Stream position the subscriber has taken before the snapshot's first
/// event (all of the stream's events so far when the snapshot is empty).
fn replay_start(session: &Session, snapshot: &Snapshot) -> u64 {
    match snapshot.iter().next() {
        Some(e) => e.index_in_stream - 1,
        None => snapshot.stream().and_then(|s| session.reader().stream(s)).map_or(0, |i| i.published),
    }
}

impl Session {
    /// Subscribes to `stream` after `after` and attaches to its pacing gate,
    /// so that [`Session::publish_paced`] waits for this subscriber.
    pub fn subscribe_stream(&self, stream: StreamId, after: Seq) -> Result<Subscription, SnapshotError> {
        let snapshot = self.reader().snapshot_stream(stream, after)?;
        let consumed = replay_start(self, &snapshot);
        let mut sub = Subscription::new(self.reader(), snapshot);
        sub.gate = self.pace.attach(self.reader(), stream, consumed);
        Ok(sub)
    }
}

#[cfg(test)]
mod tests {
    use crate::{Hub, HubConfig, Seq};
    use bytes::Bytes;

    /// Subscribing to (or resuming) a stream that has ended attaches no
    /// pacing gate: the session's gate table only holds streams that can
    /// still be published on, however many late subscribers come.
    #[test]
    fn ended_streams_leave_no_pacing_gate() {
        let hub = Hub::new(HubConfig::default()).unwrap();
        let s = hub.create(None).unwrap();
        let live = s.open_stream().unwrap();
        let done = s.open_stream().unwrap();
        s.publish(&done, Bytes::from_static(b"x")).unwrap();
        let sub_live = s.subscribe_stream(live.id(), Seq(0)).unwrap();
        assert!(sub_live.gate.is_some());
        s.end_stream(&done).unwrap();
        let gates = || crate::session::lock(&s.pace.gates).len();
        assert_eq!(gates(), 1, "only the live stream's gate");
        let late: Vec<_> = (0..10).map(|_| s.subscribe_stream(done.id(), Seq(0)).unwrap()).collect();
        assert!(late.iter().all(|l| l.gate.is_none()));
        assert_eq!(gates(), 1, "an ended stream gets no gate");
        drop(sub_live);
        s.end_stream(&live).unwrap();
        assert_eq!(gates(), 0);
    }

    /// What a subscription still has to replay: the gap's events of its
    /// stream (not the other streams' in between), fewer as it yields them.
    #[test]
    fn replay_pending_counts_what_is_left_of_the_gap() {
        use crate::ring::Next;
        let hub = Hub::new(HubConfig::default()).unwrap();
        let s = hub.create(None).unwrap();
        let (a, b) = (s.open_stream().unwrap(), s.open_stream().unwrap());
        for _ in 0..5 {
            s.publish(&a, Bytes::from_static(b"a")).unwrap();
            s.publish(&b, Bytes::from_static(b"b")).unwrap();
        }
        // Seqs 1..=10 (a on odd ones): a's events after seq 4 are 5, 7, 9.
        let mut sub = s.subscribe_stream(a.id(), Seq(4)).unwrap();
        assert_eq!(sub.replay_pending(), 3);
        assert!(matches!(sub.try_recv(), Ok(Next::Event(e)) if e.seq == Seq(5)));
        assert_eq!(sub.replay_pending(), 2);
        let whole = crate::Subscription::after(s.reader(), Seq(6)).unwrap();
        assert_eq!(whole.replay_pending(), 4, "seqs 7 to 10");
        let none = crate::Subscription::after(s.reader(), Seq(10)).unwrap();
        assert_eq!(none.replay_pending(), 0);
    }
}
