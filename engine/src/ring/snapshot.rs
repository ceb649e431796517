//! Zero-copy, pinning snapshots of a ring's events (`docs/SPEC.md` §3.5).

use super::batch::Batch;
use super::chunk::Chunk;
use super::event::EventRef;
use super::gap::{self, FirstRetained, Missing, StreamMarks};
use super::shared::Shared;
use super::stream::StreamRecord;
use crate::sync::{Arc, Ordering};
use gapless_wire::{Seq, StreamId};
use std::fmt;

/// Why a snapshot could not be taken.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SnapshotError {
    /// Some event of the requested range is no longer retained.
    Evicted {
        /// The first seq the snapshot needed.
        wanted: Seq,
        /// The oldest retained seq when it was found missing.
        oldest: Seq,
        /// How many events of the requested target are gone: exact for a
        /// whole-ring snapshot (`oldest - wanted`); for a stream snapshot
        /// exact when the cursor is the stream's delivered mark, otherwise a
        /// lower bound (at least 1). Never an overcount.
        missing: Missing,
    },
    /// The cursor is past the newest event.
    Ahead {
        /// The newest published seq.
        head: Seq,
    },
    /// No such stream in this ring (never opened, or its record was
    /// reclaimed after it ended and all its events were evicted).
    UnknownStream {
        /// The stream asked for.
        stream: StreamId,
    },
}

impl fmt::Display for SnapshotError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SnapshotError::Evicted { wanted, oldest, missing } => write!(
                f,
                "events from seq {wanted} were evicted ({missing} missing; oldest retained is {oldest})"
            ),
            SnapshotError::Ahead { head } => write!(f, "cursor is past the newest event {head}"),
            SnapshotError::UnknownStream { stream } => write!(f, "unknown stream {stream}"),
        }
    }
}

impl std::error::Error for SnapshotError {}

/// An owned set of consecutive events (optionally only those of one stream),
/// pinned: it holds one reference per chunk, so the events stay readable
/// after the ring evicts them. Cloning it clones those chunk references.
#[derive(Clone)]
pub struct Snapshot {
    shared: Arc<Shared>,
    /// Chunks covering `from ..= to`, in order.
    chunks: Vec<Arc<Chunk>>,
    /// First seq covered (`to + 1` when empty).
    from: u64,
    /// Last seq covered.
    to: u64,
    /// Only events of this stream are yielded.
    filter: Option<StreamId>,
    /// First and last yielded seq, if any.
    first: Option<Seq>,
    last: Option<Seq>,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("first", &self.first)
            .field("last", &self.last)
            .field("filter", &self.filter)
            .finish()
    }
}

impl Snapshot {
    pub(crate) fn empty(shared: Arc<Shared>, after: u64, filter: Option<StreamId>) -> Self {
        Snapshot { shared, chunks: Vec::new(), from: after + 1, to: after, filter, first: None, last: None }
    }

    /// Pins the chunks covering `from ..= to`; `None` if one is gone.
    /// Caller guarantees every seq in the range was published (it observed a
    /// head `>= to` with Acquire).
    pub(crate) fn pin(shared: &Arc<Shared>, from: u64, to: u64, filter: Option<StreamId>) -> Option<Self> {
        debug_assert!(from >= 1 && from <= to);
        let (k0, k1) = (shared.geo.chunk_no(from), shared.geo.chunk_no(to));
        let mut chunks = Vec::with_capacity((k1 - k0 + 1) as usize);
        for k in k0..=k1 {
            chunks.push(shared.chunk_for(shared.geo.chunk_first(k))?);
        }
        let mut s =
            Snapshot { shared: Arc::clone(shared), chunks, from, to, filter, first: None, last: None };
        match filter {
            None => {
                s.first = Some(Seq(from));
                s.last = Some(Seq(to));
            }
            Some(_) => {
                s.first = s.iter().next().map(|e| e.seq);
                s.last = s.iter_rev_first().map(|e| e.seq);
            }
        }
        Some(s)
    }

    /// First seq of the range this snapshot looked at.
    pub(crate) fn range_start(&self) -> u64 {
        self.from
    }

    /// Seq of the first event this snapshot yields.
    pub fn first(&self) -> Option<Seq> {
        self.first
    }

    /// Seq of the last event this snapshot yields.
    pub fn last(&self) -> Option<Seq> {
        self.last
    }

    /// Whether it yields no event.
    pub fn is_empty(&self) -> bool {
        self.first.is_none()
    }

    /// How many events it yields (counts them for a stream snapshot).
    pub fn len(&self) -> usize {
        match self.filter {
            None => (self.to + 1 - self.from) as usize,
            Some(_) => self.iter().count(),
        }
    }

    /// How many of its events are at `next` or later (for
    /// `Subscription::replay_pending`).
    #[cfg(feature = "tokio")]
    pub(crate) fn len_from(&self, next: u64) -> usize {
        let next = next.max(self.from);
        match self.filter {
            None => (self.to + 1).saturating_sub(next) as usize,
            Some(_) => SnapshotIter { snap: self, next }.count(),
        }
    }

    /// The stream this snapshot is restricted to, if any.
    pub fn stream(&self) -> Option<StreamId> {
        self.filter
    }

    /// The last seq of the range this snapshot looked at (for a stream
    /// snapshot, events of other streams up to it were skipped). A live
    /// follower continues after it.
    pub fn covered_to(&self) -> Seq {
        Seq(self.to)
    }

    /// Iterates the events in seq order without touching reference counts.
    pub fn iter(&self) -> SnapshotIter<'_> {
        SnapshotIter { snap: self, next: self.from }
    }

    /// Reads `seq` (within `from ..= to`).
    #[inline(always)]
    pub(crate) fn get(&self, seq: u64) -> EventRef<'_> {
        let sh = &self.shared.geo;
        let chunk = &self.chunks[(sh.chunk_no(seq) - sh.chunk_no(self.from)) as usize];
        // SAFETY: `seq` is within the pinned range; `pin`'s caller observed a
        // head >= `to` with Acquire, so the cell was written and that write
        // happens-before this read; the chunk is kept alive by `self`.
        let slot = unsafe { chunk.get(sh.cell_idx(seq)) };
        EventRef {
            seq: Seq(seq),
            stream: slot.stream,
            index_in_stream: slot.index_in_stream,
            payload: &slot.payload,
        }
    }

    pub(crate) fn prev_in_stream(&self, seq: u64) -> u64 {
        let sh = &self.shared.geo;
        let chunk = &self.chunks[(sh.chunk_no(seq) - sh.chunk_no(self.from)) as usize];
        // SAFETY: as in `get`.
        unsafe { chunk.get(sh.cell_idx(seq)) }.prev_in_stream
    }

    /// The first yielded event at or after `seq`.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn next_from(&self, seq: u64) -> Option<EventRef<'_>> {
        SnapshotIter { snap: self, next: seq.max(self.from) }.next()
    }

    /// The range of the batch that starts at the first yielded event at or
    /// after `seq`: up to the end of that event's chunk or of the snapshot.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn batch_range_from(&self, seq: u64) -> Option<(u64, u64)> {
        let from = self.next_from(seq)?.seq.0;
        let geo = &self.shared.geo;
        let chunk_end = geo.chunk_first(geo.chunk_no(from) + 1) - 1;
        Some((from, self.to.min(chunk_end)))
    }

    /// The batch `from ..= to` (a range from `batch_range_from`).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn batch(&self, from: u64, to: u64) -> Batch<'_> {
        let sh = &self.shared.geo;
        assert!(self.from <= from && from <= to && to <= self.to && sh.chunk_no(from) == sh.chunk_no(to));
        let chunk = &self.chunks[(sh.chunk_no(from) - sh.chunk_no(self.from)) as usize];
        // SAFETY: `from ..= to` lies within the pinned range (asserted), so
        // it was published before the head `pin`'s caller acquired; it lies
        // in one chunk (asserted), the snapshot's, pinned while the batch
        // borrows the snapshot.
        unsafe { Batch::new(chunk, from, to, self.filter) }
    }

    fn iter_rev_first(&self) -> Option<EventRef<'_>> {
        (self.from..=self.to).rev().map(|s| self.get(s)).find(|e| Some(e.stream) == self.filter)
    }
}

impl<'a> IntoIterator for &'a Snapshot {
    type Item = EventRef<'a>;
    type IntoIter = SnapshotIter<'a>;
    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

/// Iterator over a [`Snapshot`].
#[derive(Debug)]
pub struct SnapshotIter<'a> {
    snap: &'a Snapshot,
    next: u64,
}

impl<'a> Iterator for SnapshotIter<'a> {
    type Item = EventRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<EventRef<'a>> {
        while self.next <= self.snap.to {
            let e = self.snap.get(self.next);
            self.next += 1;
            match self.snap.filter {
                Some(s) if s != e.stream => continue,
                _ => return Some(e),
            }
        }
        None
    }

    /// Internal iteration (`for_each`, `fold`, `sum`, `count`, ...) walks
    /// each pinned chunk's cells as a slice: no chunk lookup per event.
    #[inline]
    fn fold<B, F: FnMut(B, EventRef<'a>) -> B>(self, init: B, mut f: F) -> B {
        let (snap, mut seq) = (self.snap, self.next);
        let mut acc = init;
        if seq > snap.to {
            return acc;
        }
        let sh = &snap.shared.geo;
        let k0 = (sh.chunk_no(seq) - sh.chunk_no(snap.from)) as usize;
        let c = sh.chunk_events;
        for chunk in &snap.chunks[k0..] {
            let a = sh.cell_idx(seq);
            let n = ((snap.to - seq + 1) as usize).min(c - a);
            for cell in chunk.cells(a, n) {
                // SAFETY: as in `Snapshot::get`: `seq` is within the pinned
                // range, so the cell was written before the head we acquired
                // and the chunk is kept alive by the snapshot.
                let slot = unsafe { Chunk::read(cell) };
                if snap.filter.map_or(true, |s| s == slot.stream) {
                    let e = EventRef {
                        seq: Seq(seq),
                        stream: slot.stream,
                        index_in_stream: slot.index_in_stream,
                        payload: &slot.payload,
                    };
                    acc = f(acc, e);
                }
                seq += 1;
            }
            if seq > snap.to {
                break;
            }
        }
        acc
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let rest = (self.snap.to + 1).saturating_sub(self.next) as usize;
        match self.snap.filter {
            None => (rest, Some(rest)),
            Some(_) => (0, Some(rest)),
        }
    }
}

/// The stream's marks as the gap verdict needs them (`gap::stream_gap`).
fn marks(rec: &StreamRecord, high: u64) -> StreamMarks {
    use crate::sync::Ordering::Acquire;
    // `delivered` before its index: the index is raised first, so the index
    // read is at least the one of the mark read (never an overcount).
    let delivered = rec.delivered.load(Acquire);
    let delivered_index = rec.delivered_index.load(Acquire);
    StreamMarks { high, published: rec.published.load(Acquire), delivered, delivered_index }
}

/// Pins every event after `after`: [`Reader::snapshot`](super::Reader::snapshot).
pub(super) fn pin_after(sh: &Arc<Shared>, after: Seq) -> Result<Snapshot, SnapshotError> {
    let head = sh.head();
    if after.0 > head {
        return Err(SnapshotError::Ahead { head: Seq(head) });
    }
    let evicted = |oldest: u64, missing| SnapshotError::Evicted {
        wanted: Seq(after.0 + 1),
        oldest: Seq(oldest),
        missing,
    };
    let oldest = sh.oldest();
    if let Err(missing) = gap::session_gap(after.0, oldest) {
        return Err(evicted(oldest, missing));
    }
    if after.0 == head {
        return Ok(Snapshot::empty(Arc::clone(sh), after.0, None));
    }
    // A chunk can only be missing if the producer evicted it after our
    // `oldest` load; it stored the new `oldest` before clearing the slot.
    Snapshot::pin(sh, after.0 + 1, head, None).ok_or_else(|| {
        let oldest = sh.oldest();
        evicted(oldest, gap::session_gap(after.0, oldest).expect_err("a chunk went, so oldest moved past it"))
    })
}

/// Pins every event of `stream` after `after`, with the predecessor proof
/// for evicted seqs of other streams:
/// [`Reader::snapshot_stream`](super::Reader::snapshot_stream).
pub(super) fn pin_stream_after(
    sh: &Arc<Shared>,
    stream: StreamId,
    after: Seq,
) -> Result<Snapshot, SnapshotError> {
    let rec = sh.stream(stream).ok_or(SnapshotError::UnknownStream { stream })?;
    // Cells up to `hi` are written and visible once we read `hi` with
    // Acquire (the producer writes the cell, then `high`), so `to` may
    // exceed the head we read.
    let hi = rec.high.load(Ordering::Acquire);
    let to = sh.head().max(hi);
    if after.0 > to {
        return Err(SnapshotError::Ahead { head: Seq(to) });
    }
    let q = after.0;
    for _ in 0..64 {
        let oldest = sh.oldest();
        let from = (q + 1).max(oldest);
        let snap = if from > to {
            Snapshot::empty(Arc::clone(sh), to, Some(stream))
        } else {
            match Snapshot::pin(sh, from, to, Some(stream)) {
                Some(s) => s,
                None => continue, // evicted under us: the window moved, look again
            }
        };
        // Seqs q+1 .. from-1 may be gone: the verdict proves none of them
        // was ours, or counts what of ours is missing.
        let first = snap.first().map(|f| FirstRetained {
            seq: f.0,
            index: snap.get(f.0).index_in_stream,
            prev: snap.prev_in_stream(f.0),
        });
        return match gap::stream_gap(q, oldest, marks(&rec, hi), first) {
            Ok(()) => Ok(snap),
            Err(missing) => Err(SnapshotError::Evicted { wanted: Seq(q + 1), oldest: Seq(oldest), missing }),
        };
    }
    let oldest = sh.oldest();
    Err(SnapshotError::Evicted { wanted: Seq(q + 1), oldest: Seq(oldest), missing: Missing::AtLeast(1) })
}
