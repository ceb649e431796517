//! A task's event stream (the tasks extension's resumable event streams,
//! SEP-2694, draft; `docs/SPEC.md` §3.9): the events a task emits, kept in
//! a ring of their own, numbered densely from 0, replayed after a cursor
//! and followed live, or refused with the oldest seq still kept.
//!
//! ```
//! use bytes::Bytes;
//! use gapless::task::{TaskEvents, TaskEventsConfig, OpenError};
//! use std::time::Instant;
//!
//! let events = TaskEvents::new(TaskEventsConfig { max_events: 3, ..TaskEventsConfig::default() }).unwrap();
//! for i in 0..5u8 {
//!     assert_eq!(events.emit(Bytes::from(vec![i]), Instant::now()), Ok(u64::from(i))); // seqs 0..=4
//! }
//! // 2, 3 and 4 are kept: a cursor at 1 replays them, one at 0 is refused.
//! let replay = events.snapshot(Some(1), Instant::now()).unwrap();
//! assert_eq!(replay.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3, 4]);
//! assert_eq!(events.snapshot(Some(0), Instant::now()).unwrap_err(), OpenError::Gone { earliest: 2 });
//! ```
//!
//! It is the ring, unchanged: a task's seq `s` is the ring's seq `s + 1`,
//! so the coverage check, the pinned snapshot of a resume and the numbers
//! of a refusal are the ring's (§3.4, §3.5). The ring bounds the events
//! kept by count and by bytes; an age bound, when set, is a floor on top
//! of it: an event older than the age is no longer served (a cursor
//! before it is refused), and its memory goes with the ring's next
//! eviction of its chunk or with the task. The emitter and the openers
//! take one short lock, so that an opening's floor and its pin see the
//! same window; readers of an opened stream never lock. Charged to a
//! hub's memory budget ([`TaskEvents::in_hub`]), the producer sits behind
//! a ledger like a session's, and the budget's reclaim may evict its
//! oldest events: readers that need them are told, as for any eviction.

#[cfg(feature = "tokio")]
mod subscribe;

#[cfg(feature = "tokio")]
pub use subscribe::{TaskEvent, TaskSubscription};

use crate::ring::{ring, ConfigError, Producer, PublishError, Reader, RingConfig, Snapshot, SnapshotError};
use crate::ring::{EventRef, StreamHandle};
use crate::session::{Charged, Hub, Reclaimer, SessionError};
use bytes::Bytes;
use gapless_wire::{Seq, StreamId};
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

/// The default bound on the events a task keeps.
pub const DEFAULT_MAX_EVENTS: usize = 1024;
/// The default bound on the payload bytes a task keeps.
pub const DEFAULT_MAX_BYTES: usize = 1 << 20;

/// What a task's event stream keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskEventsConfig {
    /// Most events kept (the oldest go first).
    pub max_events: usize,
    /// Most payload bytes kept; a payload larger than this is refused.
    pub max_bytes: usize,
    /// How long an event is served after it was emitted; `None`: as long
    /// as the count and the bytes allow.
    pub max_age: Option<Duration>,
}

impl Default for TaskEventsConfig {
    fn default() -> Self {
        TaskEventsConfig { max_events: DEFAULT_MAX_EVENTS, max_bytes: DEFAULT_MAX_BYTES, max_age: None }
    }
}

/// Why [`TaskEvents::emit`] refused an event; nothing was kept.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EmitError {
    /// The payload alone is larger than the bytes a task keeps.
    TooLarge {
        /// The payload's length.
        len: usize,
        /// [`TaskEventsConfig::max_bytes`].
        max: usize,
    },
    /// The stream ended ([`TaskEvents::end`]): the task is terminal.
    Ended,
    /// 2^63 - 1 events were emitted.
    Exhausted,
}

impl fmt::Display for EmitError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EmitError::TooLarge { len, max } => {
                write!(f, "a task event of {len} bytes is larger than the {max} bytes a task keeps")
            }
            EmitError::Ended => f.write_str("the task's event stream has ended"),
            EmitError::Exhausted => f.write_str("the task's event seqs are exhausted"),
        }
    }
}

impl std::error::Error for EmitError {}

/// Why a stream could not be opened at a cursor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OpenError {
    /// An event after the cursor is no longer kept (`events_gone`):
    /// `earliest` is the oldest seq still kept (the next seq to be emitted
    /// when none is).
    Gone {
        /// The oldest seq kept.
        earliest: u64,
    },
    /// The cursor names an event not emitted yet: `next` is the seq the
    /// next event will have.
    Ahead {
        /// The next seq.
        next: u64,
    },
}

impl fmt::Display for OpenError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            OpenError::Gone { earliest } => {
                write!(f, "task events after the cursor are no longer kept; the earliest kept is {earliest}")
            }
            OpenError::Ahead { next } => {
                write!(f, "the cursor is past the task's last event; the next event will be {next}")
            }
        }
    }
}

impl std::error::Error for OpenError {}

/// One task's event stream: [`TaskEvents::emit`] from its work, openings
/// from any number of readers ([`TaskEvents::snapshot`],
/// `TaskEvents::subscribe` with feature `tokio`), [`TaskEvents::end`] when
/// the task is terminal. Made on its own ([`TaskEvents::new`]), or charged
/// to a hub's memory budget ([`TaskEvents::in_hub`]), which then counts it
/// and may evict its oldest events like a session's.
pub struct TaskEvents {
    reader: Reader,
    stream: StreamId,
    max_age: Option<Duration>,
    inner: Mutex<Inner>,
    /// The hub's budget to reclaim in after a change (charged streams).
    reclaimer: Option<Reclaimer>,
}

impl fmt::Debug for TaskEvents {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TaskEvents").field("ring", &self.reader).field("max_age", &self.max_age).finish()
    }
}

/// Where the producer lives.
enum Writer {
    /// Boxed: a producer is a few hundred bytes, a `Charged` two pointers.
    Own(Box<Producer>),
    /// Behind a hub's ledger: counted and reclaimed by its budget.
    Charged(Charged),
}

/// What the emitter changes.
struct Inner {
    writer: Writer,
    stream: StreamHandle,
    /// When each kept event was emitted (its ring seq), oldest first; only
    /// with an age bound. At most `max_events` long.
    times: VecDeque<(u64, Instant)>,
}

impl Inner {
    /// Runs `f` on the producer (`None`: a charged ring whose ledger let go).
    fn with<R>(&mut self, f: impl FnOnce(&mut Producer, &StreamHandle) -> R) -> Option<R> {
        let stream = &self.stream;
        match &mut self.writer {
            Writer::Own(p) => Some(f(p, stream)),
            Writer::Charged(c) => c.with_producer(|p| f(p, stream)),
        }
    }
}

impl TaskEvents {
    /// An empty stream.
    pub fn new(config: TaskEventsConfig) -> Result<Self, ConfigError> {
        let (producer, reader) = ring(RingConfig::new(config.max_events, config.max_bytes))?;
        Self::assemble(producer, reader, config, |p| Ok((Writer::Own(Box::new(p)), None)))
    }

    /// An empty stream charged to `hub`'s memory budget: it counts the
    /// stream's memory, and when over its limit evicts the oldest events of
    /// the rings, sessions' or tasks', that hold most and were idle longest.
    /// `MemoryExhausted` when even a reclaim leaves no room for its base.
    pub fn in_hub(hub: &Hub, config: TaskEventsConfig) -> Result<Self, SessionError> {
        let (producer, reader) =
            ring(RingConfig::new(config.max_events, config.max_bytes)).map_err(SessionError::Config)?;
        Self::assemble(producer, reader, config, |p| {
            let charged =
                hub.charge(p).ok_or(SessionError::MemoryExhausted { limit: hub.config().max_memory })?;
            let reclaimer = charged.reclaimer();
            Ok((Writer::Charged(charged), Some(reclaimer)))
        })
    }

    /// The stream of a new ring whose producer `place` puts where it lives
    /// (with the budget's reclaimer, if charged). Its one stream is opened
    /// first: a charged ring's record then counts in its base.
    fn assemble<E>(
        mut producer: Producer,
        reader: Reader,
        config: TaskEventsConfig,
        place: impl FnOnce(Producer) -> Result<(Writer, Option<Reclaimer>), E>,
    ) -> Result<Self, E> {
        let stream = producer.open_stream();
        let (writer, reclaimer) = place(producer)?;
        let inner = Inner { writer, stream: stream.clone(), times: VecDeque::new() };
        Ok(TaskEvents {
            reader,
            stream: stream.id(),
            max_age: config.max_age,
            inner: Mutex::new(inner),
            reclaimer,
        })
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // Nothing panics while holding it half-way through a change.
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Keeps `payload` as the next event, emitted at `now`, and returns its
    /// seq (0 for the first, then one more each). The oldest events go as
    /// the bounds need.
    pub fn emit(&self, payload: Bytes, now: Instant) -> Result<u64, EmitError> {
        let r = self.emit_locked(payload, now);
        self.reclaim();
        r
    }

    /// Reclaims in the hub's budget if it is over (with no lock held).
    fn reclaim(&self) {
        if let Some(r) = &self.reclaimer {
            r.reclaim_if_over();
        }
    }

    fn emit_locked(&self, payload: Bytes, now: Instant) -> Result<u64, EmitError> {
        let mut inner = self.lock();
        let published = inner.with(|p, stream| p.publish(stream, payload).map(|seq| (seq, p.oldest())));
        let (seq, oldest) = published.ok_or(EmitError::Ended)?.map_err(|e| match e {
            PublishError::PayloadTooLarge { len, budget } => EmitError::TooLarge { len, max: budget },
            PublishError::SeqExhausted => EmitError::Exhausted,
            PublishError::StreamEnded { .. } | PublishError::ForeignStream { .. } => EmitError::Ended,
        })?;
        if self.max_age.is_some() {
            let times = &mut inner.times;
            while times.front().is_some_and(|&(s, _)| s < oldest.0) {
                times.pop_front();
            }
            times.push_back((seq.0, now));
        }
        Ok(seq.0 - 1)
    }

    /// Ends the stream: the task is terminal and emits nothing more.
    /// Streams opened now or later end after its last event. What it keeps
    /// stays (and stays counted) until it is dropped. Idempotent.
    pub fn end(&self) {
        self.lock().with(|p, stream| p.end_stream(stream));
        self.reclaim();
    }

    /// Whether [`TaskEvents::end`] was called.
    pub fn is_ended(&self) -> bool {
        self.reader.stream(self.stream).is_none_or(|i| i.ended)
    }

    /// The seq the next event will have (how many were emitted).
    pub fn next_seq(&self) -> u64 {
        self.reader.head().0
    }

    /// The oldest seq still served at `now` (the next seq when none is).
    pub fn earliest(&self, now: Instant) -> u64 {
        let mut inner = self.lock();
        self.floor(&mut inner, now) - 1
    }

    /// Bytes this stream keeps alive (the ring's footprint and the
    /// emission times).
    pub fn footprint(&self) -> usize {
        let inner = self.lock();
        let times = inner.times.capacity() * std::mem::size_of::<(u64, Instant)>();
        let ring = match &inner.writer {
            Writer::Own(p) => p.footprint(),
            Writer::Charged(c) => c.footprint(),
        };
        ring + times + std::mem::size_of::<Self>()
    }

    /// The oldest ring seq served at `now`: the ring's oldest, or later
    /// when the age bound hides older ones. Drops the times it passes.
    fn floor(&self, inner: &mut Inner, now: Instant) -> u64 {
        let oldest = self.reader.oldest().0;
        let Some(age) = self.max_age else { return oldest };
        let head = self.reader.head().0;
        while inner.times.front().is_some_and(|&(s, t)| s < oldest || now.saturating_duration_since(t) > age)
        {
            inner.times.pop_front();
        }
        inner.times.front().map_or(head + 1, |&(s, _)| s).max(oldest)
    }

    /// Pins every event after `after` (every kept event, for `None`): the
    /// replay of a stream opened at that cursor. `Gone` when an event
    /// after it is no longer served at `now`; `Ahead` when it names an
    /// event not emitted yet.
    pub fn snapshot(&self, after: Option<u64>, now: Instant) -> Result<TaskSnapshot, OpenError> {
        let mut inner = self.lock();
        // Under the lock nothing is emitted; a budget's reclaim may still
        // evict between the floor and the pin: the pin then says so, and
        // an opening without a cursor starts again at the new floor.
        loop {
            let floor = self.floor(&mut inner, now);
            let next = self.reader.head().0;
            // The ring's cursor: its seq of the last event processed.
            let cursor = match after {
                None => floor - 1,
                Some(a) if a >= next => return Err(OpenError::Ahead { next }),
                // a < head: a + 2 cannot overflow.
                Some(a) if a + 2 < floor => return Err(OpenError::Gone { earliest: floor - 1 }),
                Some(a) => a + 1,
            };
            return match self.reader.snapshot_stream(self.stream, Seq(cursor)) {
                Ok(snapshot) => Ok(TaskSnapshot { snapshot: Some(snapshot) }),
                Err(SnapshotError::Evicted { .. }) if after.is_none() => continue,
                Err(SnapshotError::Evicted { oldest, .. }) => Err(OpenError::Gone { earliest: oldest.0 - 1 }),
                Err(SnapshotError::Ahead { head }) => Err(OpenError::Ahead { next: head.0 }),
                // The record goes once the stream ended and every event of
                // it was evicted: nothing is kept, and the next seq is the
                // earliest. A cursor at the last event misses nothing.
                Err(SnapshotError::UnknownStream { .. }) => match after {
                    Some(a) if a + 1 < next => Err(OpenError::Gone { earliest: next }),
                    _ => Ok(TaskSnapshot { snapshot: None }),
                },
            };
        }
    }

    /// The ring's reader (to follow live after a snapshot).
    #[cfg(feature = "tokio")]
    pub(crate) fn reader(&self) -> &Reader {
        &self.reader
    }
}

/// A pinned replay: the events after a cursor when it was opened.
#[derive(Debug)]
pub struct TaskSnapshot {
    /// `None`: an ended stream that keeps nothing.
    snapshot: Option<Snapshot>,
}

/// An event of a task's stream, borrowed from a [`TaskSnapshot`].
#[derive(Clone, Copy, Debug)]
pub struct TaskEventRef<'a> {
    /// Its seq (from 0).
    pub seq: u64,
    /// What was emitted.
    pub payload: &'a [u8],
}

impl TaskEventRef<'_> {
    fn of(e: EventRef<'_>) -> TaskEventRef<'_> {
        TaskEventRef { seq: e.seq.0 - 1, payload: e.payload }
    }
}

impl TaskSnapshot {
    /// Its events, in seq order.
    pub fn iter(&self) -> impl Iterator<Item = TaskEventRef<'_>> {
        self.snapshot.iter().flat_map(|s| s.iter()).map(TaskEventRef::of)
    }

    /// How many events it holds.
    pub fn len(&self) -> usize {
        self.snapshot.as_ref().map_or(0, Snapshot::len)
    }

    /// Whether it holds none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    #[cfg(feature = "tokio")]
    pub(crate) fn into_inner(self) -> Option<Snapshot> {
        self.snapshot
    }
}

#[cfg(test)]
mod tests;
