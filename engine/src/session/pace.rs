//! Pacing (`docs/SPEC.md` §3.8, feature `tokio`): a paced publish waits,
//! asynchronously, while an *attached* reader of its stream (or a
//! whole-session reader, a migrated socket) lags by a high-water mark or
//! more. It never waits when none is attached; the plain publish never
//! waits.
//!
//! The state lives here, in the session layer: each stream's [`PaceGate`]
//! (attached readers, their progress, the waiting publishers) and the
//! session's own gate. Subscriptions (`crate::subscription`) attach to a
//! gate and record their progress in it.
//!
//! The handshake between a waiting publisher and a consuming reader is a
//! SeqCst Dekker pair: the publisher raises `producers_waiting`, enables
//! its `Notified` and then re-checks the lag; the reader stores `consumed`
//! and then reads `producers_waiting`. One of the two sees the other.

use super::lock;
use super::session::{Session, SessionPublishError};
use crate::ring::StreamHandle;
use bytes::Bytes;
use gapless_wire::{Seq, StreamId};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::{Arc, Mutex};

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
    pub(crate) notify: tokio::sync::Notify,
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
    pub(crate) fn attach(&self, session: &Session, stream: StreamId, consumed: u64) -> Option<Arc<PaceGate>> {
        let ended = || session.reader().stream(stream).map_or(true, |i| i.ended);
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
    gate: Arc<PaceGate>,
    stream: StreamHandle,
}

impl Pacer {
    /// The stream it publishes on.
    pub fn stream(&self) -> &StreamHandle {
        &self.stream
    }
}

impl Session {
    /// The pacing handle of `stream` (see [`Session::publish_paced_with`]).
    pub fn pacer(&self, stream: &StreamHandle) -> Pacer {
        Pacer { gate: self.pace.gate(stream.id()), stream: stream.clone() }
    }

    /// Publishes on `stream`, first waiting (asynchronously) while a
    /// subscriber attached to it has `high_water` or more of the stream's
    /// events unread, so that it never lags by more than `high_water`
    /// (at least 1). Never waits when none is attached; the wait ends when
    /// the subscriber catches up or detaches, or the session closes.
    pub async fn publish_paced(
        &self,
        stream: &StreamHandle,
        payload: Bytes,
        high_water: u64,
    ) -> Result<Seq, SessionPublishError> {
        self.publish_paced_with(&self.pacer(stream), payload, high_water).await
    }

    /// [`Session::publish_paced`] through a [`Pacer`] obtained once: with no
    /// attached subscriber this costs one atomic load beyond a plain publish.
    pub async fn publish_paced_with(
        &self,
        pacer: &Pacer,
        payload: Bytes,
        high_water: u64,
    ) -> Result<Seq, SessionPublishError> {
        let (gate, stream) = (&*pacer.gate, &pacer.stream);
        let session_gate = &*self.pace.session;
        let high_water = high_water.max(1);
        // The stream's attached reader, or a whole-session one, lags.
        let stream_lags = || {
            gate.attached.load(SeqCst) > 0
                && stream.published().saturating_sub(gate.consumed.load(SeqCst)) >= high_water
        };
        let session_lags = || {
            session_gate.attached.load(SeqCst) > 0
                && self.reader().head().0.saturating_sub(session_gate.consumed.load(SeqCst)) >= high_water
        };
        loop {
            let (g, lags): (&PaceGate, &dyn Fn() -> bool) = if stream_lags() {
                (gate, &stream_lags)
            } else if session_lags() {
                (session_gate, &session_lags)
            } else {
                break;
            };
            if self.is_closed() {
                break;
            }
            let notified = g.notify.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            g.producers_waiting.fetch_add(1, SeqCst);
            if lags() && !self.is_closed() {
                notified.await;
            }
            g.producers_waiting.fetch_sub(1, SeqCst);
        }
        self.publish(stream, payload)
    }
}
