//! One session: a ring, the namespace of this incarnation, and the mutex
//! that serializes the session's several writers in front of its single
//! producer (`docs/SPEC.md` §3.1). Readers, coverage checks and snapshots
//! go through the session's [`Reader`] and never take that mutex.

use super::budget::{Ledger, MemoryBudget};
use super::lock;
#[cfg(feature = "tokio")]
use super::pace::{PaceGate, Pacer};
use super::secret::SessionId;
use super::ticket::TicketBook;
use crate::ring::{Producer, PublishError, Reader, StreamHandle};
use crate::sync::{AtomicBool, AtomicUsize, Ordering};
use bytes::Bytes;
use gapless_wire::{EventId, Namespace, Seq, StreamId};
use std::fmt;
use std::sync::Arc;

/// One MCP session: a ring, its namespace, its writers' mutex.
pub struct Session {
    id: SessionId,
    ns: Namespace,
    pub(super) owner: Option<String>,
    /// The producer behind the writer lock, and the session's entry in the
    /// hub's memory budget (with its last-activity time).
    pub(super) ledger: Arc<Ledger>,
    pub(super) budget: Arc<MemoryBudget>,
    reader: Reader,
    standalone: StreamHandle,
    /// Open connections (SSE streams, sockets).
    pub(super) connections: AtomicUsize,
    /// Set once when the session migrates to a WebSocket.
    migrated: AtomicBool,
    /// Set once when the session is closed (deleted or expired).
    closed: AtomicBool,
    pub(crate) tickets: TicketBook,
    #[cfg(feature = "tokio")]
    pub(crate) pace: super::pace::PaceTable,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session").field("id", &self.id).field("ns", &self.ns).finish_non_exhaustive()
    }
}

/// Publishing on a session failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionPublishError {
    /// The ring refused the event.
    Publish(PublishError),
    /// The session was deleted or expired.
    Closed,
}

impl fmt::Display for SessionPublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionPublishError::Publish(e) => e.fmt(f),
            SessionPublishError::Closed => f.write_str("session is closed"),
        }
    }
}

impl std::error::Error for SessionPublishError {}

impl From<PublishError> for SessionPublishError {
    fn from(e: PublishError) -> Self {
        SessionPublishError::Publish(e)
    }
}

impl Session {
    pub(super) fn new(
        id: SessionId,
        ns: Namespace,
        owner: Option<&str>,
        (producer, standalone): (Producer, StreamHandle),
        reader: Reader,
        budget: &Arc<MemoryBudget>,
        now: u64,
    ) -> Self {
        Session {
            id,
            ns,
            owner: owner.map(str::to_owned),
            ledger: budget.open(producer, now),
            budget: Arc::clone(budget),
            reader,
            standalone,
            connections: AtomicUsize::new(0),
            migrated: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            tickets: TicketBook::new(id),
            #[cfg(feature = "tokio")]
            pace: Default::default(),
        }
    }

    /// The session id.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The caller identity the session is bound to, if any.
    pub fn owner(&self) -> Option<&str> {
        self.owner.as_deref()
    }

    /// The namespace of this incarnation (part of every event id).
    pub fn namespace(&self) -> Namespace {
        self.ns
    }

    /// A reader of the session's ring (lock-free).
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The standalone (GET) stream.
    pub fn standalone(&self) -> &StreamHandle {
        &self.standalone
    }

    /// The wire event id of `seq` on `stream`.
    pub fn event_id(&self, stream: StreamId, seq: Seq) -> EventId {
        EventId::new(self.ns, stream, seq)
    }

    /// Whether the session was deleted (or expired).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether the session migrated to a WebSocket.
    pub fn is_migrated(&self) -> bool {
        self.migrated.load(Ordering::Acquire)
    }

    /// Marks the session migrated (its SSE streams are over).
    // Hidden: transport bookkeeping (gapless-server marks it when a
    // migrated socket attaches).
    #[doc(hidden)]
    pub fn set_migrated(&self) {
        self.migrated.store(true, Ordering::Release);
    }

    fn with_writer<R>(&self, f: impl FnOnce(&mut Producer) -> R) -> Result<R, SessionPublishError> {
        let mut w = lock(&self.ledger.writer);
        w.as_mut().map(|w| f(&mut w.producer)).ok_or(SessionPublishError::Closed)
    }

    /// Opens a stream (e.g. for one POST request).
    pub fn open_stream(&self) -> Result<StreamHandle, SessionPublishError> {
        self.with_writer(|p| p.open_stream())
    }

    /// Opens streams until `id` is opened, as a replica of a log kept
    /// elsewhere mirrors its stream ids; `id`'s handle if its record is
    /// kept (see `Producer::open_streams_to`).
    pub fn open_streams_to(&self, id: StreamId) -> Result<Option<StreamHandle>, SessionPublishError> {
        self.with_writer(|p| p.open_streams_to(id))
    }

    /// Prepares a fresh replica for a log whose streams `1..=opened` are
    /// over except `live` (ascending): records only for those, the other
    /// ids counted as opened and reclaimed (see `Producer::skip_streams_to`).
    pub fn mirror_streams(&self, live: &[StreamId], opened: StreamId) -> Result<(), SessionPublishError> {
        let standalone = self.standalone.id();
        self.with_writer(|p| {
            for &id in live.iter().filter(|id| **id > standalone) {
                p.skip_streams_to(StreamId(id.0 - 1));
                p.open_stream();
            }
            p.skip_streams_to(opened);
        })?;
        if !live.contains(&standalone) {
            self.end_stream(&self.standalone)?;
        }
        Ok(())
    }

    /// Publishes on `stream`; serialized with the session's other writers.
    /// If the hub's memory budget is exceeded then, the oldest events of the
    /// sessions that hold most and were idle longest are evicted (see
    /// `HubConfig::max_memory`). The budgets count the payload's length:
    /// make a payload from a `Vec` with [`exact_bytes`](crate::ring::exact_bytes),
    /// or the `Vec`'s unused capacity is held uncounted.
    pub fn publish(&self, stream: &StreamHandle, payload: Bytes) -> Result<Seq, SessionPublishError> {
        let seq = {
            let mut guard = lock(&self.ledger.writer);
            let w = guard.as_mut().ok_or(SessionPublishError::Closed)?;
            let seq = w.producer.publish(stream, payload)?;
            self.budget.account(w);
            seq
        };
        if self.budget.over() {
            self.budget.reclaim();
        }
        Ok(seq)
    }

    /// Bytes this session's ring keeps alive, as last reported to the
    /// hub's memory budget (see `Producer::footprint`).
    pub fn footprint(&self) -> usize {
        lock(&self.ledger.writer).as_ref().map_or(0, |w| w.producer.footprint())
    }

    /// Ends `stream` (its followers finish after its last event).
    pub fn end_stream(&self, stream: &StreamHandle) -> Result<(), SessionPublishError> {
        self.with_writer(|p| p.end_stream(stream))?;
        #[cfg(feature = "tokio")]
        self.pace.forget(stream.id());
        Ok(())
    }

    /// Closes the session: drops the producer (followers of the whole ring
    /// see `End`, stream followers too once their stream is ended) and ends
    /// every stream.
    /// Its tickets are the hub's to drop (`Hub::end`), with their index
    /// entries.
    pub(super) fn close(&self) {
        // Marked before anything is woken: a paced publisher that a wake
        // below lets go, or that comes after it, sees the mark (its
        // `Notified` synchronizes with the wake) and does not wait again.
        #[cfg(not(gapless_mutant = "late_close_mark"))]
        self.closed.store(true, Ordering::Release);
        let writer = lock(&self.ledger.writer).take();
        if let Some(w) = writer {
            self.budget.close(&w);
            let mut p = w.producer;
            for info in self.reader.streams() {
                if !info.ended {
                    if let Some(h) = p.handle(info.id) {
                        p.end_stream(&h);
                    }
                }
            }
            drop(p);
        }
        #[cfg(feature = "tokio")]
        self.pace.wake_all();
        #[cfg(gapless_mutant = "late_close_mark")]
        self.closed.store(true, Ordering::Release);
    }
}

/// Paced publishing (`docs/SPEC.md` §3.8; the gates are in `pace.rs`).
#[cfg(feature = "tokio")]
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
        use crate::sync::Ordering::SeqCst;
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
            let (g, lags): (&PaceGate, &(dyn Fn() -> bool + Sync)) = if stream_lags() {
                (gate, &stream_lags)
            } else if session_lags() {
                (session_gate, &session_lags)
            } else {
                break;
            };
            if self.is_closed() {
                break;
            }
            g.wait(lags, &|| self.is_closed()).await;
        }
        self.publish(stream, payload)
    }

    /// Waits as [`Session::publish_paced_with`] does before it publishes,
    /// counting `ahead()` more events as published on the stream and on the
    /// session, and publishes nothing: a cluster node paces the events it
    /// queues for the store (`ahead`: queued, not yet in its replica) by its
    /// replica's attached readers. The wait is woken by the readers'
    /// progress only: a caller whose `ahead` may shrink by itself waits with
    /// a timeout and looks again.
    pub async fn pace(&self, pacer: &Pacer, high_water: u64, ahead: &(dyn Fn() -> u64 + Sync)) {
        use crate::sync::Ordering::SeqCst;
        let (gate, stream) = (&*pacer.gate, &pacer.stream);
        let session_gate = &*self.pace.session;
        let high_water = high_water.max(1);
        let stream_lags = || {
            gate.attached.load(SeqCst) > 0
                && (stream.published() + ahead()).saturating_sub(gate.consumed.load(SeqCst)) >= high_water
        };
        let session_lags = || {
            session_gate.attached.load(SeqCst) > 0
                && (self.reader().head().0 + ahead()).saturating_sub(session_gate.consumed.load(SeqCst))
                    >= high_water
        };
        loop {
            let (g, lags): (&PaceGate, &(dyn Fn() -> bool + Sync)) = if stream_lags() {
                (gate, &stream_lags)
            } else if session_lags() {
                (session_gate, &session_lags)
            } else {
                return;
            };
            if self.is_closed() {
                return;
            }
            g.wait(lags, &|| self.is_closed()).await;
        }
    }
}
