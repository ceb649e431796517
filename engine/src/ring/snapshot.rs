//! Zero-copy, pinning snapshots of a ring's events (`docs/SPEC.md` §3.5).

use super::batch::Batch;
use super::chunk::Chunk;
use super::event::EventRef;
use super::gap::{self, FirstRetained, Missing, StreamMarks};
use super::shared::Shared;
use super::stream::StreamRecord;
use crate::sync::{Arc, Ordering};
use gapless_wire::{Seq, StreamId};
use smallvec::SmallVec;
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

/// The chunk references a snapshot holds inline: a gap that spans up to
/// four chunks (a short resume among a few interleaved streams) pins
/// without allocating.
type Chunks = SmallVec<[Arc<Chunk>; 4]>;

/// A stream snapshot's own events, as offsets from the range's first seq, in
/// seq order: found once when it is pinned (`Snapshot::pin_stream`: a scan
/// of the chunks' tag columns, or the stream's predecessor links), so that
/// reading it touches no cell of another stream. Up to 16 inline.
type Own = SmallVec<[u32; 16]>;

/// Ranges shorter than this many seqs are scanned without following links
/// first (the scan costs about as much as a few links).
const SCAN_ALWAYS: u64 = 1024;

/// How many predecessor links a stream snapshot over a longer range follows
/// before it judges the stream's density (see `Snapshot::pin_stream`).
const WALK_PROBE: u64 = 4;

/// Mean distance in seqs between a stream's events below which scanning
/// the tag column beats following links: a link is a load that waits for
/// the one before (the walk cost about 10 ns per event on the 8-stream
/// resume bench, cells in L2); a tag is a quarter of one vector compare.
const DENSE_STRIDE: u64 = 64;

/// An owned set of consecutive events (optionally only those of one stream),
/// pinned: it holds one reference per chunk, so the events stay readable
/// after the ring evicts them. Cloning it clones those chunk references.
#[derive(Clone)]
pub struct Snapshot {
    shared: Arc<Shared>,
    /// Chunks covering `from ..= to`, in order.
    chunks: Chunks,
    /// First seq covered (`to + 1` when empty).
    from: u64,
    /// Last seq covered.
    to: u64,
    /// Only events of this stream are yielded.
    filter: Option<StreamId>,
    /// With a filter: the seqs yielded, as offsets from `from` (empty
    /// without one).
    own: Own,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Snapshot")
            .field("first", &self.first())
            .field("last", &self.last())
            .field("filter", &self.filter)
            .finish()
    }
}

impl Snapshot {
    pub(crate) fn empty(shared: Arc<Shared>, after: u64, filter: Option<StreamId>) -> Self {
        Snapshot { shared, chunks: Chunks::new(), from: after + 1, to: after, filter, own: Own::new() }
    }

    /// Pins the chunks covering `from ..= to`; `None` if one is gone.
    /// Caller guarantees every cell of the range was written before it read,
    /// with Acquire, a head `>= to` or a stream's high-water mark `>= to`
    /// (the producer stores either after every cell up to it).
    #[inline(always)]
    pub(crate) fn pin(shared: &Arc<Shared>, from: u64, to: u64) -> Option<Self> {
        debug_assert!(from >= 1 && from <= to);
        let (k0, k1) = (shared.geo.chunk_no(from), shared.geo.chunk_no(to));
        let mut chunks = Chunks::with_capacity((k1 - k0 + 1) as usize);
        for k in k0..=k1 {
            chunks.push(shared.chunk_for(shared.geo.chunk_first(k))?);
        }
        Some(Snapshot { shared: Arc::clone(shared), chunks, from, to, filter: None, own: Own::new() })
    }

    /// Pins `from ..= to` as [`Snapshot::pin`] does and keeps only the
    /// events of `stream`, whose newest event at or below `to` is `last`
    /// (0: none). Over a long range, walks the stream's predecessor links
    /// back from `last` while the stream is sparse (one cell per event of
    /// the stream, none of other streams); over a short range, or once its
    /// events lie closer than [`DENSE_STRIDE`] seqs apart on average, scans
    /// the chunks' tag columns for the rest instead (see `scan`): each link
    /// is a load that waits for the one before, and the scan's loads are
    /// independent and dense.
    /// Caller guarantees, beyond `pin`'s, that `last <= to` and that no
    /// event of `stream` lies in `last + 1 ..= to`.
    #[inline(always)]
    fn pin_stream(shared: &Arc<Shared>, from: u64, to: u64, stream: StreamId, last: u64) -> Option<Self> {
        debug_assert!(last <= to);
        let mut s = Self::pin(shared, from, to)?;
        s.filter = Some(stream);
        let mut seq = last;
        let mut steps = 0u64;
        while seq >= from {
            if to - from < SCAN_ALWAYS || steps >= WALK_PROBE && last - seq < steps * DENSE_STRIDE {
                // Dense: the links found `own` (newest first); the scan
                // puts the older events after them in seq order, and a
                // rotation puts them first.
                let walked = s.own.len();
                s.own.reverse();
                s.scan(from, seq, stream);
                s.own.rotate_left(walked);
                return Some(s);
            }
            let slot = s.slot(seq);
            debug_assert_eq!(slot.stream, stream, "a predecessor link stays in its stream");
            let prev = slot.prev_in_stream;
            // A pinned range spans at most the capacity plus two chunks
            // (below 2^27 seqs), so an offset fits.
            s.own.push((seq - from) as u32);
            seq = prev;
            steps += 1;
        }
        s.own.reverse();
        Some(s)
    }

    /// Pushes, in seq order, the offsets of `stream`'s events in
    /// `from ..= to` (within the pinned range): 64 cells at a time, the
    /// chunks' tag columns give the candidates. While the ring has opened
    /// at most 2^32 - 1 streams, every tag (an id's low 32 bits) names one
    /// stream, so a candidate is the stream's; past that, each candidate's
    /// cell confirms it. No cell is loaded here while tags are unique.
    fn scan(&mut self, from: u64, to: u64, stream: StreamId) {
        // Every id in a cell of the range was opened (and counted here,
        // Release) before its event was published, so before the head or
        // high-water mark our caller acquired: this load sees at least it.
        let unique = self.shared.streams_opened.load(Ordering::Acquire) <= u64::from(u32::MAX);
        let geo = &self.shared.geo;
        let k0 = (geo.chunk_no(from) - geo.chunk_no(self.from)) as usize;
        let mut seq = from;
        let (already, mut estimate) = (self.own.len(), true);
        for chunk in &self.chunks[k0..] {
            let end = (geo.cell_idx(seq) + (to - seq) as usize + 1).min(geo.chunk_events);
            let mut a = geo.cell_idx(seq);
            let base = seq - a as u64;
            while a < end {
                let n = (end - a).min(64);
                // SAFETY: as in `slot`: these cells are within the pinned
                // range, written before the head (or the stream's high-water
                // mark) that `pin`'s caller read with Acquire, and `chunk` is
                // kept alive by `self`.
                let mask = unsafe { chunk.tag_mask(a, n, stream) };
                // Offsets from `self.from` of cells `a ..` of this block.
                let off = (base + a as u64 - self.from) as u32;
                if unique {
                    // One reservation per block, then plain writes: a push
                    // per event cost more than finding it.
                    let n = mask.count_ones() as usize;
                    self.own.reserve(n);
                    let len = self.own.len();
                    // SAFETY: `n` more offsets fit (reserved), exactly `n`
                    // are written (one per set bit), then counted.
                    unsafe {
                        let p = self.own.as_mut_ptr().add(len);
                        for (k, i) in Bits(mask).enumerate() {
                            p.add(k).write(off + i);
                        }
                        self.own.set_len(len + n);
                    }
                } else {
                    for i in Bits(mask) {
                        // SAFETY: cell `a + i` is one of those cells.
                        if unsafe { chunk.get(a + i as usize) }.stream == stream {
                            self.own.push(off + i);
                        }
                    }
                }
                a += n;
            }
            seq = base + end as u64;
            if seq > to {
                break;
            }
            if estimate && seq - from >= 64 {
                // Room for the rest at the density of the first 64 seqs or
                // more: growing by doubling copied the list several times
                // on a long resume. Exact for a stream spread evenly.
                estimate = false;
                let found = (self.own.len() - already) as u64;
                self.own.reserve(((to + 1 - seq) * found / (seq - from)) as usize);
            }
        }
    }

    /// First seq of the range this snapshot looked at.
    pub(crate) fn range_start(&self) -> u64 {
        self.from
    }

    /// Seq of the first event this snapshot yields.
    pub fn first(&self) -> Option<Seq> {
        match self.filter {
            None => (self.from <= self.to).then_some(Seq(self.from)),
            Some(_) => self.own.first().map(|&o| Seq(self.from + u64::from(o))),
        }
    }

    /// Seq of the last event this snapshot yields.
    pub fn last(&self) -> Option<Seq> {
        match self.filter {
            None => (self.from <= self.to).then_some(Seq(self.to)),
            Some(_) => self.own.last().map(|&o| Seq(self.from + u64::from(o))),
        }
    }

    /// Whether it yields no event.
    pub fn is_empty(&self) -> bool {
        self.first().is_none()
    }

    /// How many events it yields.
    pub fn len(&self) -> usize {
        match self.filter {
            None => (self.to + 1 - self.from) as usize,
            Some(_) => self.own.len(),
        }
    }

    /// How many of its events are at `next` or later (for
    /// `Subscription::replay_pending`).
    #[cfg(feature = "tokio")]
    pub(crate) fn len_from(&self, next: u64) -> usize {
        match self.filter {
            None => (self.to + 1).saturating_sub(next.max(self.from)) as usize,
            Some(_) => self.own.len() - self.own_before(next),
        }
    }

    /// How many of the stream's events lie below `seq` (with a filter).
    fn own_before(&self, seq: u64) -> usize {
        let off = seq.saturating_sub(self.from);
        self.own.partition_point(|&o| u64::from(o) < off)
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
        SnapshotIter { snap: self, next: self.from, i: 0 }
    }

    /// Iterates the events at `seq` or later.
    fn iter_from(&self, seq: u64) -> SnapshotIter<'_> {
        let i = if self.filter.is_some() { self.own_before(seq) } else { 0 };
        SnapshotIter { snap: self, next: seq.max(self.from), i }
    }

    /// The cell of `seq` (within `from ..= to`).
    #[inline(always)]
    fn slot(&self, seq: u64) -> &super::chunk::Slot {
        let sh = &self.shared.geo;
        let chunk = &self.chunks[(sh.chunk_no(seq) - sh.chunk_no(self.from)) as usize];
        // SAFETY: `seq` is within the pinned range, whose cells were written
        // before the head or high-water mark `pin`'s caller read with
        // Acquire, so that write happens-before this read; the chunk is kept
        // alive by `self`.
        unsafe { chunk.get(sh.cell_idx(seq)) }
    }

    /// Reads `seq` (within `from ..= to`).
    #[inline(always)]
    pub(crate) fn get(&self, seq: u64) -> EventRef<'_> {
        let slot = self.slot(seq);
        EventRef {
            seq: Seq(seq),
            stream: slot.stream,
            index_in_stream: slot.index_in_stream,
            payload: &slot.payload,
        }
    }

    pub(crate) fn prev_in_stream(&self, seq: u64) -> u64 {
        self.slot(seq).prev_in_stream
    }

    /// The first yielded event at or after `seq`.
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn next_from(&self, seq: u64) -> Option<EventRef<'_>> {
        self.iter_from(seq).next()
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
        let own = self.filter.map(|_| (&self.own[self.own_before(from)..self.own_before(to + 1)], self.from));
        // SAFETY: `from ..= to` lies within the pinned range (asserted), so
        // it was published before the head `pin`'s caller acquired; it lies
        // in one chunk (asserted), the snapshot's, pinned while the batch
        // borrows the snapshot. The offsets are the stream's events in it.
        unsafe { Batch::new(chunk, from, to, self.filter, own) }
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
    /// Next seq (a whole-ring snapshot).
    next: u64,
    /// Next index into the snapshot's own seqs (a stream snapshot).
    i: usize,
}

impl<'a> Iterator for SnapshotIter<'a> {
    type Item = EventRef<'a>;

    #[inline]
    fn next(&mut self) -> Option<EventRef<'a>> {
        let snap = self.snap;
        match snap.filter {
            None if self.next <= snap.to => {
                self.next += 1;
                Some(snap.get(self.next - 1))
            }
            None => None,
            Some(_) => {
                let o = *snap.own.get(self.i)?;
                self.i += 1;
                Some(snap.get(snap.from + u64::from(o)))
            }
        }
    }

    /// Internal iteration (`for_each`, `fold`, `sum`, `count`, ...) walks
    /// each pinned chunk's cells as a slice: no chunk lookup per event.
    #[inline]
    fn fold<B, F: FnMut(B, EventRef<'a>) -> B>(self, init: B, mut f: F) -> B {
        let (snap, mut seq) = (self.snap, self.next);
        let mut acc = init;
        if snap.filter.is_some() {
            // An offset's position counted from the first pinned chunk's
            // first cell names its chunk and cell with a shift and a mask.
            let sh = &snap.shared.geo;
            let (chunks, base) = (&snap.chunks[..], sh.cell_idx(snap.from) as u64);
            for &o in &snap.own[self.i..] {
                let pos = base + u64::from(o);
                let chunk = &chunks[(pos >> sh.chunk_shift) as usize];
                // SAFETY: as in `Snapshot::get`: an offset of `own` is a
                // seq within the pinned range, in that chunk.
                let slot = unsafe { chunk.get((pos & sh.cell_mask) as usize) };
                let e = EventRef {
                    seq: Seq(snap.from + u64::from(o)),
                    stream: slot.stream,
                    index_in_stream: slot.index_in_stream,
                    payload: &slot.payload,
                };
                acc = f(acc, e);
            }
            return acc;
        }
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
                let e = EventRef {
                    seq: Seq(seq),
                    stream: slot.stream,
                    index_in_stream: slot.index_in_stream,
                    payload: &slot.payload,
                };
                acc = f(acc, e);
                seq += 1;
            }
            if seq > snap.to {
                break;
            }
        }
        acc
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let rest = match self.snap.filter {
            None => (self.snap.to + 1).saturating_sub(self.next) as usize,
            Some(_) => self.snap.own.len() - self.i,
        };
        (rest, Some(rest))
    }
}

impl ExactSizeIterator for SnapshotIter<'_> {}

/// The set bits of a mask, lowest first, as bit positions.
struct Bits(u64);

impl Iterator for Bits {
    type Item = u32;

    #[inline(always)]
    fn next(&mut self) -> Option<u32> {
        if self.0 == 0 {
            return None;
        }
        let i = self.0.trailing_zeros();
        self.0 &= self.0 - 1;
        Some(i)
    }

    #[inline(always)]
    fn size_hint(&self) -> (usize, Option<usize>) {
        let n = self.0.count_ones() as usize;
        (n, Some(n))
    }
}

impl ExactSizeIterator for Bits {}

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
    Snapshot::pin(sh, after.0 + 1, head).ok_or_else(|| {
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
    // `head` before `high`: every event of the stream up to the head we
    // read stored `high` before that head, so `hi` is at least the
    // stream's newest event up to `to` and the walk back from it misses
    // none of them. Cells up to `hi` are written and visible once we read
    // `hi` with Acquire (the producer writes the cell, then `high`), so
    // `to` may exceed the head we read.
    #[cfg(not(gapless_mutant = "high_before_head"))]
    let (head, hi) = {
        let head = sh.head();
        (head, rec.high.load(Ordering::Acquire))
    };
    #[cfg(gapless_mutant = "high_before_head")]
    let (head, hi) = {
        let hi = rec.high.load(Ordering::Acquire);
        (sh.head(), hi)
    };
    let to = head.max(hi);
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
            match Snapshot::pin_stream(sh, from, to, stream, hi) {
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
