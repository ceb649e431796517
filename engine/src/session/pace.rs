//! Pacing (`docs/SPEC.md` §3.8, feature `tokio`): a paced publish waits,
//! asynchronously, while an *attached* reader of its stream (or a
//! whole-session reader, a migrated socket) lags by a high-water mark or
//! more. It never waits when none is attached; the plain publish never
//! waits.
//!
//! The state lives here, in the session layer: each stream's [`PaceGate`]
//! (attached readers, their progress, the waiting publishers) and the
//! session's own gate. Subscriptions (the async layer above) attach to a
//! gate and record their progress in it ([`PaceGate::took`],
//! [`PaceGate::detach`]); a paced publish waits on it ([`PaceGate::wait`]).
//!
//! The handshake between a waiting publisher and a consuming reader is a
//! store-buffering (Dekker) pair, with a `fence(SeqCst)` on each side as in
//! the ring's wake-up (`ring/barrier.rs`): the publisher creates its
//! `Notified`, raises `producers_waiting`, fences and re-checks the lag;
//! the reader stores `consumed`, fences and reads `producers_waiting`. One
//! of the two sees the other's store: the reader wakes the publisher, or
//! the publisher sees the progress and does not sleep. A reader that
//! detaches lowers `attached` and then always notifies: a publisher whose
//! re-check still saw it attached created its `Notified` before, so it is
//! woken. The loom model `paced_publish_vs_consume_and_detach`
//! (`loom-tests/tests/session.rs`) checks both.
//!
//! The fences, not SeqCst loads and stores, carry the argument because loom
//! checks fences and treats SeqCst accesses as AcqRel; on x86-64 the
//! reader's half costs what a SeqCst store did (one locked instruction).

use super::lock;
use crate::ring::{Reader, StreamHandle};
use crate::sync::Ordering::{Relaxed, Release, SeqCst};
use crate::sync::{fence, AtomicU64, AtomicUsize, HashMap, Mutex, Notify};
use gapless_wire::StreamId;
use std::sync::Arc;

/// Pacing state of a stream (or of the whole session): the attached
/// readers' progress.
#[derive(Debug, Default)]
pub(crate) struct PaceGate {
    /// Attached subscriptions.
    pub(crate) attached: AtomicUsize,
    /// `index_in_stream` of the last event an attached subscription took
    /// (its seq, for the session's gate).
    pub(crate) consumed: AtomicU64,
    /// Paced publishers about to sleep or sleeping on this gate (several can:
    /// every stream's publishers share the session's gate).
    pub(crate) producers_waiting: AtomicUsize,
    pub(crate) notify: Notify,
}

impl PaceGate {
    /// The reader's half: an attached subscription took everything up to
    /// `position`; wakes the publishers waiting on the gate, if any.
    #[inline]
    pub(crate) fn took(&self, position: u64) {
        self.consumed.store(position, Release);
        // Our store of `consumed`, this fence, then the load of
        // `producers_waiting`; a publisher raises `producers_waiting`,
        // fences, then loads `consumed` (`wait`). One of the two sees the
        // other's store.
        #[cfg(not(gapless_mutant = "unfenced_progress"))]
        fence(SeqCst);
        if self.producers_waiting.load(Relaxed) > 0 {
            self.notify.notify_waiters();
        }
    }

    /// A subscription attached to the gate went: wakes every waiting
    /// publisher, so that it looks again at whether anyone lags.
    pub(crate) fn detach(&self) {
        self.attached.fetch_sub(1, SeqCst);
        self.notify.notify_waiters();
    }

    /// The publisher's half: sleeps until a reader's progress, a detach or
    /// the session's close wakes it, unless `lags` (whether an attached
    /// reader lags, read after our announcement) is already false or
    /// `closed` true. The caller looks again after it returns.
    pub(crate) async fn wait(&self, lags: &(dyn Fn() -> bool + Sync), closed: &(dyn Fn() -> bool + Sync)) {
        // Created first: every `notify_waiters` from here on completes it.
        let mut notified = std::pin::pin!(self.notify.notified());
        notified.as_mut().enable();
        self.producers_waiting.fetch_add(1, SeqCst);
        // Taken back when this returns, or when the publish is dropped while
        // it waits (else every later read would wake publishers for nothing).
        let _announced = Announced(&self.producers_waiting);
        fence(SeqCst);
        if lags() && !closed() {
            notified.await;
        }
    }
}

/// A waiting publisher's announcement in `producers_waiting`, withdrawn on
/// drop.
struct Announced<'a>(&'a AtomicUsize);

impl Drop for Announced<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, SeqCst);
    }
}

/// The session's pacing gates, by stream, and the gate of whole-session
/// subscriptions (a WebSocket after migration).
#[derive(Debug, Default)]
pub(crate) struct PaceTable {
    pub(crate) gates: Mutex<HashMap<StreamId, Arc<PaceGate>>>,
    pub(crate) session: Arc<PaceGate>,
}

impl PaceTable {
    /// Attaches a whole-session subscription that has taken every event up
    /// to seq `consumed`.
    pub(crate) fn attach_session(&self, consumed: u64) -> Arc<PaceGate> {
        self.session.consumed.fetch_max(consumed, SeqCst);
        self.session.attached.fetch_add(1, SeqCst);
        Arc::clone(&self.session)
    }

    /// The gate of `stream`, created on first use.
    pub(crate) fn gate(&self, stream: StreamId) -> Arc<PaceGate> {
        Arc::clone(lock(&self.gates).entry(stream).or_default())
    }

    /// Attaches a subscription that has already taken the stream's events
    /// up to position `consumed`; `None` if the stream has ended (nothing
    /// more can be published on it, so there is nothing to pace).
    pub(crate) fn attach(&self, reader: &Reader, stream: StreamId, consumed: u64) -> Option<Arc<PaceGate>> {
        let ended = || reader.stream(stream).is_none_or(|i| i.ended);
        if ended() {
            return None;
        }
        let g = self.gate(stream);
        g.consumed.fetch_max(consumed, SeqCst);
        g.attached.fetch_add(1, SeqCst);
        // Ending a stream marks it ended, then forgets its gate. If that
        // forgetting ran before our insert, we see the mark now and forget
        // the gate ourselves, so the table never keeps an ended stream.
        if ended() {
            self.forget(stream);
        }
        Some(g)
    }

    /// Forgets an ended stream's gate (holders keep their `Arc`), so the
    /// table holds only streams that can still be published on.
    pub(crate) fn forget(&self, stream: StreamId) {
        if let Some(g) = lock(&self.gates).remove(&stream) {
            g.notify.notify_waiters();
        }
    }

    /// Wakes every waiting paced publisher (the session closed).
    pub(crate) fn wake_all(&self) {
        for g in lock(&self.gates).values() {
            g.notify.notify_waiters();
        }
        self.session.notify.notify_waiters();
    }
}

/// A stream's pacing handle: look it up once, publish through it many
/// times without touching the session's gate table.
#[derive(Debug, Clone)]
pub struct Pacer {
    pub(super) gate: Arc<PaceGate>,
    pub(super) stream: StreamHandle,
}

impl Pacer {
    /// The stream it publishes on.
    pub fn stream(&self) -> &StreamHandle {
        &self.stream
    }
}

#[cfg(all(test, not(gapless_loom)))]
mod tests {
    use super::*;
    use std::future::Future;
    use std::task::{Context, Poll, Waker};

    #[test]
    fn a_publish_dropped_while_it_waits_withdraws_its_announcement() {
        let gate = PaceGate::default();
        let mut wait = Box::pin(gate.wait(&|| true, &|| false));
        let mut cx = Context::from_waker(Waker::noop());
        assert!(matches!(wait.as_mut().poll(&mut cx), Poll::Pending), "it waits");
        assert_eq!(gate.producers_waiting.load(SeqCst), 1);
        drop(wait);
        assert_eq!(gate.producers_waiting.load(SeqCst), 0, "dropped: no publisher waits");
        // One that does not need to wait leaves none announced either.
        let mut quick = Box::pin(gate.wait(&|| false, &|| false));
        assert!(matches!(quick.as_mut().poll(&mut cx), Poll::Ready(())));
        assert_eq!(gate.producers_waiting.load(SeqCst), 0);
    }
}
