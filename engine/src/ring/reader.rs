//! Readers: cloneable handles that look at a ring without ever blocking it:
//! the wait-free coverage check (`docs/SPEC.md` §3.4), snapshots (§3.5),
//! cursors, and the per-stream bookkeeping (§3.6). Every method of
//! [`Reader`] is in this file; the read protocol is in the module docs
//! (`ring/mod.rs`).

use super::cursor::Cursor;
use super::event::Event;
use super::shared::Shared;
use super::snapshot::{self, Snapshot, SnapshotError};
use super::stream::{StreamHandle, StreamInfo};
use crate::sync::{Arc, Ordering};
use gapless_wire::{Seq, StreamId};
use std::fmt;

/// Whether a cursor's gap (every event after it) is still retained.
///
/// A negative answer is final: `oldest` only grows, so an evicted gap never
/// comes back, and an `Ahead` cursor named a seq that had not been published
/// when it was checked. A positive answer can go stale the moment it is
/// returned; confirm it by taking a [`Snapshot`], which pins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// Every event after the cursor is retained.
    Covered,
    /// `missing` events after the cursor were evicted; `oldest` is the oldest
    /// seq still retained.
    Evicted {
        /// The oldest retained seq when checked.
        oldest: Seq,
        /// How many events between the cursor and `oldest` are gone.
        missing: u64,
    },
    /// The cursor is past the newest event.
    Ahead {
        /// The newest published seq when checked.
        head: Seq,
    },
}

/// A handle for reading a ring: coverage checks, snapshots, cursors, stream
/// bookkeeping. Clone freely; readers never block the producer or each
/// other.
#[derive(Clone)]
pub struct Reader {
    pub(crate) shared: Arc<Shared>,
}

impl fmt::Debug for Reader {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Reader").field("ring", &self.shared).finish()
    }
}

impl Reader {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        Reader { shared }
    }

    /// Seq of the newest published event (`Seq(0)` before the first).
    #[inline]
    pub fn head(&self) -> Seq {
        Seq(self.shared.head())
    }

    /// Oldest retained seq (`head + 1` when nothing is retained).
    #[inline]
    pub fn oldest(&self) -> Seq {
        Seq(self.shared.oldest())
    }

    /// Payload bytes of the events this ring evicted (a statistic, read
    /// Relaxed): the producer updates it when a chunk empties, so while it
    /// publishes the figure may trail by the events of less than one chunk;
    /// exact once the producer is dropped.
    pub fn evicted_bytes(&self) -> u64 {
        self.shared.window.evicted_bytes.load(Ordering::Relaxed)
    }

    /// Whether the producer has been dropped (no more events will come).
    pub fn is_closed(&self) -> bool {
        self.shared.closed.load(Ordering::Acquire)
    }

    /// The smallest high-water seq among reclaimed stream records that had
    /// undelivered events, if any: an undelivered event lies at or below it.
    // Hidden: bookkeeping of the migration check, public only so that the
    // ring's tests and the fuzz reference can look at it.
    #[doc(hidden)]
    pub fn reclaimed_undelivered(&self) -> Option<Seq> {
        let v = self.shared.reclaimed_undelivered.load(Ordering::Acquire);
        (v != u64::MAX).then_some(Seq(v))
    }

    /// How many streams were opened (stream ids are `1..=` this).
    // Hidden: bookkeeping of the decision table's membership check, public
    // only so that the ring's tests can look at it.
    #[doc(hidden)]
    pub fn streams_opened(&self) -> u64 {
        self.shared.streams_opened.load(Ordering::Acquire)
    }

    /// The bookkeeping of a stream, or `None` if it was never opened or its
    /// record was reclaimed (it ended and all its events were evicted).
    pub fn stream(&self, id: StreamId) -> Option<StreamInfo> {
        self.shared.stream(id).map(|r| r.info())
    }

    /// A handle to stream `id` (to mark deliveries or read its bookkeeping),
    /// if its record is kept. Publishing through it still needs the producer.
    pub fn handle(&self, id: StreamId) -> Option<StreamHandle> {
        self.shared.stream(id).map(|rec| StreamHandle { rec })
    }

    /// The bookkeeping of every stream whose record is kept, in id order.
    pub fn streams(&self) -> Vec<StreamInfo> {
        let mut v: Vec<StreamInfo> = self
            .shared
            .streams
            .load_full()
            .map(|d| d.values().map(|r| r.info()).collect())
            .unwrap_or_default();
        v.sort_by_key(|i| i.id);
        v
    }

    /// Records that the transport delivered `event` on its stream (every
    /// earlier event of that stream counts as delivered too). Returns `false`
    /// if the stream's record is gone.
    pub fn mark_delivered(&self, event: &Event) -> bool {
        match self.shared.stream(event.stream) {
            Some(r) => {
                r.mark_delivered(event.seq.0, event.index_in_stream);
                true
            }
            None => false,
        }
    }

    /// The stream retained event `seq` belongs to, or `None` if `seq` is not
    /// retained (never published, or evicted).
    pub fn stream_of(&self, seq: Seq) -> Option<StreamId> {
        let sh = &self.shared;
        if seq.0 == 0 || seq.0 > sh.head() || seq.0 < sh.oldest() {
            return None;
        }
        let chunk = sh.chunk_for(seq.0)?;
        // SAFETY: `seq <= head` (Acquire) so the cell is written and visible;
        // `chunk` keeps it alive.
        Some(unsafe { chunk.get(sh.geo.cell_idx(seq.0)) }.stream)
    }

    /// A cursor that yields every event from `next` on, in seq order.
    pub fn cursor(&self, next: Seq) -> Cursor {
        Cursor::new(Arc::clone(&self.shared), next, None)
    }

    /// A cursor that yields the events of `stream` from `next` on, and ends
    /// after the stream's last event once the stream has ended.
    pub fn stream_cursor(&self, stream: StreamId, next: Seq) -> Option<Cursor> {
        let rec = self.shared.stream(stream)?;
        Some(Cursor::new(Arc::clone(&self.shared), next, Some(rec)))
    }

    /// `(first, high)` of a reclaimed, fully delivered stream, if its
    /// tombstone is still kept (the newest 256 per ring).
    pub(crate) fn tombstone(&self, id: StreamId) -> Option<(Seq, Seq)> {
        self.shared.tombstone(id).map(|(f, h)| (Seq(f), Seq(h)))
    }

    /// An empty snapshot after `after` (of `stream` only, if given): what a
    /// resume at a target's high-water mark replays.
    pub(crate) fn empty_snapshot(&self, after: Seq, stream: Option<StreamId>) -> Snapshot {
        Snapshot::empty(Arc::clone(&self.shared), after.0, stream)
    }

    /// Checks whether every event after `cursor` is retained. Wait-free: two
    /// atomic loads and arithmetic, whatever the producer is doing.
    ///
    /// `Seq(0)` ("processed nothing") is covered while seq 1 is retained;
    /// `u64::MAX` (or any seq past the head) is `Ahead`.
    #[inline]
    pub fn coverage(&self, cursor: Seq) -> Coverage {
        let head = self.shared.head();
        if cursor.0 > head {
            return Coverage::Ahead { head: Seq(head) };
        }
        // Loaded after `head`: `oldest` may have moved past `head + 1` in
        // between, which only makes the answer "evicted", and that is true.
        let oldest = self.shared.oldest();
        if cursor.0 + 1 >= oldest {
            Coverage::Covered
        } else {
            Coverage::Evicted { oldest: Seq(oldest), missing: oldest - 1 - cursor.0 }
        }
    }

    /// Pins every event after `after` (the whole ring's gap for that cursor).
    /// The snapshot stays valid however far the ring moves on.
    pub fn snapshot(&self, after: Seq) -> Result<Snapshot, SnapshotError> {
        snapshot::pin_after(&self.shared, after)
    }

    /// Pins every event of `stream` after `after` (a per-stream resume's
    /// gap). Events of the stream that were evicted make it fail; evicted
    /// events of *other* streams do not matter.
    pub fn snapshot_stream(&self, stream: StreamId, after: Seq) -> Result<Snapshot, SnapshotError> {
        snapshot::pin_stream_after(&self.shared, stream, after)
    }
}
