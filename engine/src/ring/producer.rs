//! The producer: the only writer of a ring.
//!
//! Publishing is: evict (advance `oldest`, clear the slots of wholly evicted
//! chunks), make sure a chunk has room, write the cell, update the stream
//! record, then publish with one Release store of `head` and wake sleeping
//! readers if there are any. No lock, no wait, and no StoreLoad fence while
//! no live cursor has registered a waker (see `barrier.rs`).

use super::chunk::{Chunk, Slot, UNSUMMED};
use super::config::MAX_SEQ;
use super::reader::Reader;
use super::shared::{Geometry, Shared};
use super::stream::{StreamHandle, StreamRecord};
use crate::sync::{Arc, Ordering};
use bytes::Bytes;
use gapless_wire::{Seq, StreamId};
use std::fmt;
// Not `crate::sync`'s: the sums are a memo, not synchronization, so loom
// need not explore them.
use std::sync::atomic::Ordering::Relaxed;

/// Why `publish` refused an event. The ring is unchanged when it does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PublishError {
    /// The payload alone is larger than the ring's whole byte budget.
    PayloadTooLarge {
        /// The payload's length.
        len: usize,
        /// The ring's byte budget.
        budget: usize,
    },
    /// The stream has ended; nothing more can be published on it.
    StreamEnded {
        /// The stream.
        stream: StreamId,
    },
    /// The stream handle belongs to another ring.
    ForeignStream {
        /// The stream.
        stream: StreamId,
    },
    /// 2^63 - 1 events were published; the sequence space is exhausted.
    SeqExhausted,
}

impl fmt::Display for PublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            PublishError::PayloadTooLarge { len, budget } => {
                write!(f, "payload of {len} bytes exceeds the ring's byte budget of {budget}")
            }
            PublishError::StreamEnded { stream } => write!(f, "stream {stream} has ended"),
            PublishError::ForeignStream { stream } => {
                write!(f, "stream {stream} belongs to another ring")
            }
            PublishError::SeqExhausted => f.write_str("sequence numbers exhausted"),
        }
    }
}

impl std::error::Error for PublishError {}

/// The unique writer of a ring (not `Clone`: "single producer" is a type
/// fact). Several writers of one session serialize in front of it.
pub struct Producer {
    shared: Arc<Shared>,
    /// Copies of the ring's immutable geometry, so that the publish path
    /// reads them from the producer's own cache lines.
    geo: Geometry,
    /// Mirror of the published head.
    head: u64,
    /// Mirror of `shared.oldest`.
    oldest: u64,
    /// Payload bytes of the retained events `oldest ..= head`.
    bytes: usize,
    /// Payload bytes of every event evicted so far; `shared.window`'s copy
    /// is updated when a chunk empties and when the producer goes.
    evicted_bytes: u64,
    /// The producer's own references to the chunks overlapping
    /// `oldest ..= head`, indexed like `shared.slots` (chunk `k` at
    /// `Geometry::slot_of`), so that finding a seq's chunk is arithmetic. The
    /// chunk of `head` is being written. Wholly evicted chunks are taken out
    /// (and their shared slots cleared). One entry while the ring has had
    /// one chunk (chunk 0), one per slot from its second chunk on (`roll`):
    /// a session that never published past its first chunk, as most idle
    /// ones, keeps one entry instead of a table (128 at the default
    /// geometry, 1 KiB).
    held: Box<[Option<Arc<Chunk>>]>,
    /// The seq at which `publish` leaves its fast path: the first seq of
    /// the chunk after the back chunk (a new chunk is due), or the first
    /// seq past `MAX_SEQ` if that comes first (nothing more can be
    /// published). One comparison per publish instead of three (chunk
    /// full, sequence space left, back chunk now full).
    roll_at: u64,
    /// The back chunk (the one `roll` installed last, in `held`), or null
    /// before the first: what `publish` writes into while `fill` is below
    /// the chunk size, without finding it by its seq. Valid while `held`
    /// holds it, which it does while it is not full (`evict_to` never
    /// evicts the head's chunk, and a chunk that is not full is the head's).
    back: *const Chunk,
    /// `oldest`'s cell in the chunk that holds it (the tail chunk), and
    /// one past that chunk's last cell: eviction reads the next payload
    /// length through it and steps it, without finding the chunk by its
    /// seq. Dereferenced only while `tail_cell != tail_stop`, when it is
    /// `oldest`'s cell of a chunk `held` still holds (a chunk leaves `held`
    /// only once `oldest` is past its end, and `oldest` never moves back).
    /// Both null (equal) while unpositioned: before the first eviction, and
    /// after any chunk is cleared or the first chunk grows (`tail_reset`),
    /// so that a cleared, recycled or replaced chunk is never read through
    /// them.
    tail_cell: *const super::chunk::Cell,
    tail_stop: *const super::chunk::Cell,
    /// A wholly evicted chunk nobody else held, its cells already dropped,
    /// kept so that the next `roll` reuses its memory (still cache-warm from
    /// eviction) instead of allocating.
    spare: Option<Arc<Chunk>>,
    /// Chunks evicted while a snapshot, batch or cursor still held them,
    /// each with the bytes it keeps alive (its cells and payloads): counted
    /// in the footprint until the producer finds itself their only holder
    /// (at its next `roll` or `evict_to`) and lets them go.
    pinned: Vec<(Arc<Chunk>, usize)>,
    /// Sum of `pinned`'s bytes.
    pinned_bytes: usize,
    /// Chunks in `held` (`Some` entries).
    chunks: usize,
    /// Ids handed out so far.
    streams_opened: u64,
    /// Directory size after the last reclamation sweep.
    swept_len: usize,
    /// Tombstoned stream ids, oldest first (see `Shared::tombstones`).
    tomb_order: std::collections::VecDeque<StreamId>,
}

// SAFETY: the only fields that are not `Send`/`Sync` by themselves are
// `back`, `tail_cell` and `tail_stop`, pointers into chunks that the producer holds through an
// `Arc<Chunk>` in `held` whenever it reads through them (`Chunk` is
// `Send + Sync`). They are dereferenced only in `publish`, through
// `&mut self`, so they move with the producer and no `&Producer` ever
// reads through them.
unsafe impl Send for Producer {}
// SAFETY: see `Send`: no `&self` method dereferences `back` or the tail.
unsafe impl Sync for Producer {}

impl fmt::Debug for Producer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Producer")
            .field("head", &self.head)
            .field("oldest", &self.oldest)
            .field("bytes", &self.bytes)
            .finish_non_exhaustive()
    }
}

impl Producer {
    pub(crate) fn new(shared: Arc<Shared>) -> Self {
        let geo = shared.geo;
        Producer {
            shared,
            geo,
            head: 0,
            oldest: 1,
            bytes: 0,
            evicted_bytes: 0,
            held: Box::new([]),
            roll_at: 1,
            pinned: Vec::new(),
            pinned_bytes: 0,
            back: std::ptr::null(),
            tail_cell: std::ptr::null(),
            tail_stop: std::ptr::null(),
            spare: None,
            chunks: 0,
            streams_opened: 0,
            swept_len: 0,
            tomb_order: std::collections::VecDeque::new(),
        }
    }

    /// Makes a fresh ring's first seq `first` instead of 1: seqs below it
    /// count as published and evicted (a replica of a log kept elsewhere
    /// starts where that log is). Cells of `first`'s chunk below it hold
    /// placeholders that no reader ever sees (they are below `oldest`).
    ///
    /// # Panics
    /// If anything was published, or `first` is 0 or past the largest seq.
    pub fn start_at(&mut self, first: u64) {
        assert!(self.head == 0 && self.chunks == 0, "start_at on a ring that published");
        assert!((1..=MAX_SEQ).contains(&first), "first seq {first} out of range");
        if first == 1 {
            return;
        }
        let chunk_first = self.geo.chunk_first(self.geo.chunk_no(first));
        // A whole chunk even if it is the first: the placeholders may fill
        // more than a short one.
        self.roll_len(chunk_first, self.geo.chunk_events);
        let chunk = held(&self.held, &self.geo, chunk_first);
        for s in chunk_first..first {
            let placeholder =
                Slot { stream: StreamId(0), index_in_stream: 0, prev_in_stream: 0, payload: Bytes::new() };
            // SAFETY: the ring has published nothing, so no reader looks at
            // any cell; cell `s` of the new chunk is unwritten.
            unsafe { chunk.write(self.geo.cell_idx(s), placeholder) };
        }
        self.head = first - 1;
        self.oldest = first;
        // Readers see `oldest` past the placeholders before the head that
        // covers them.
        self.shared.window.oldest.store(first, Ordering::Release);
        self.shared.window.head.store(first - 1, Ordering::Release);
    }

    /// Opens streams until `id` is opened (a replica mirrors the stream
    /// ids of the log it follows); returns `id`'s handle if its record is
    /// kept.
    pub fn open_streams_to(&mut self, id: StreamId) -> Option<StreamHandle> {
        while self.streams_opened < id.0 {
            self.open_stream();
        }
        self.handle(id)
    }

    /// Counts stream ids up to `id` as opened without keeping records for
    /// them, as if they had ended and been reclaimed (a replica starting on
    /// a log whose streams up to there are over). Never lowers the count.
    pub fn skip_streams_to(&mut self, id: StreamId) {
        if id.0 > self.streams_opened {
            self.streams_opened = id.0;
            self.shared.streams_opened.store(self.streams_opened, Ordering::Release);
        }
    }

    /// Opens a new stream. Also reclaims the records of ended streams whose
    /// events have all left the ring, so the directory stays bounded.
    pub fn open_stream(&mut self) -> StreamHandle {
        self.streams_opened += 1;
        let id = StreamId(self.streams_opened);
        let rec = Arc::new(StreamRecord::new(id, self.geo.ring_id));
        let mut dir = self.shared.streams.load_full().map(|d| (*d).clone()).unwrap_or_default();
        // Sweep when the directory has doubled since the last sweep, so the
        // copy-on-write cost stays amortized O(1) per retained record.
        if dir.len() >= 2 * self.swept_len.max(8) {
            let oldest = self.oldest;
            // Finished streams whose events all left the ring go, unless not
            // everything was delivered: the transport may still report a late
            // delivery (it held the events), and a migration check must see
            // what was not. Up to KEEP_UNDELIVERED such records stay; older
            // ones go too, their high-water seq folded into
            // `reclaimed_undelivered` (a conservative bound).
            let mut undelivered: Vec<(StreamId, u64)> = Vec::new();
            let mut reclaimed: Vec<(StreamId, u64, u64)> = Vec::new();
            dir.retain(|id, r| {
                if !reclaimable(r, oldest) {
                    return true;
                }
                let high = r.high.load(Ordering::Acquire);
                if r.delivered.load(Ordering::Acquire) < high {
                    undelivered.push((*id, high));
                    return true;
                }
                reclaimed.push((*id, r.first.load(Ordering::Acquire), high));
                false
            });
            self.remember(reclaimed);
            if undelivered.len() > KEEP_UNDELIVERED {
                undelivered.sort_unstable();
                let excess = undelivered.len() - KEEP_UNDELIVERED;
                for (id, high) in &undelivered[..excess] {
                    dir.remove(id);
                    self.shared.reclaimed_undelivered.fetch_min(*high, Ordering::AcqRel);
                }
            }
            self.swept_len = dir.len();
        }
        dir.insert(id, Arc::clone(&rec));
        self.shared.streams.store(Some(Arc::new(dir)));
        self.shared.streams_opened.store(self.streams_opened, Ordering::Release);
        StreamHandle { rec }
    }

    /// Keeps tombstones of fully delivered reclaimed streams, the newest
    /// `KEEP_TOMBSTONES`.
    fn remember(&mut self, mut reclaimed: Vec<(StreamId, u64, u64)>) {
        if reclaimed.is_empty() {
            return;
        }
        reclaimed.sort_unstable();
        let mut t = self.shared.tombstones.load_full().map(|t| (*t).clone()).unwrap_or_default();
        for (id, first, high) in reclaimed {
            t.insert(id, (first, high));
            self.tomb_order.push_back(id);
        }
        while self.tomb_order.len() > KEEP_TOMBSTONES {
            let id = self.tomb_order.pop_front().expect("longer than the bound");
            t.remove(&id);
        }
        self.shared.tombstones.store(Some(Arc::new(t)));
    }

    /// A handle to an already opened stream, if its record is kept.
    pub fn handle(&self, id: StreamId) -> Option<StreamHandle> {
        self.shared.stream(id).map(|rec| StreamHandle { rec })
    }

    /// Marks a stream ended and wakes its readers. Idempotent.
    pub fn end_stream(&mut self, stream: &StreamHandle) {
        if stream.rec.ring_id == self.geo.ring_id {
            stream.rec.end();
            self.notify();
        }
    }

    /// Publishes `payload` on `stream` and returns its seq. Never blocks,
    /// never waits for a reader; evicts the oldest events as needed to stay
    /// within both bounds. The byte budget counts `payload.len()`: make a
    /// payload from a `Vec` with [`exact_bytes`](super::exact_bytes), or the
    /// `Vec`'s unused capacity is held uncounted.
    #[inline(always)]
    pub fn publish(&mut self, stream: &StreamHandle, payload: Bytes) -> Result<Seq, PublishError> {
        let rec = &*stream.rec;
        if rec.open_in.load(Ordering::Relaxed) != self.geo.ring_id {
            return Err(self.refused_stream(rec));
        }
        let len = payload.len();
        let budget = self.geo.byte_budget;
        if len > budget {
            return Err(PublishError::PayloadTooLarge { len, budget });
        }
        let seq = self.head + 1;
        if seq == self.roll_at {
            // Before eviction, so that a refusal leaves the ring unchanged.
            // The new chunk's slot is free already: its previous chunk lies
            // wholly below `seq - capacity` (see `roll`).
            if seq > MAX_SEQ {
                return Err(PublishError::SeqExhausted);
            }
            self.roll(seq);
        }
        let oldest_pending = self.evict_for(seq, len);
        let prev = rec.high.load(Ordering::Relaxed);
        let index = rec.published.load(Ordering::Relaxed) + 1;
        debug_assert!(std::ptr::eq(self.back, held(&self.held, &self.geo, seq)));
        // SAFETY: `seq` is below `roll_at` or a chunk was rolled for it just
        // above, so `back` is the chunk of `seq`, which `held` keeps alive
        // (see the field): eviction never evicts the seq being published.
        let chunk = unsafe { &*self.back };
        // SAFETY: we are the only producer; `seq`'s cell of the back chunk
        // is not yet published, so no reader looks at it; it is unwritten
        // (a new chunk) or was dropped by `recycle`.
        unsafe {
            chunk.write(
                self.geo.cell_idx(seq),
                Slot { stream: rec.id, index_in_stream: index, prev_in_stream: prev, payload },
            );
        }
        self.bytes += len;
        if prev == 0 {
            rec.first.store(seq, Ordering::Release);
        }
        rec.published.store(index, Ordering::Release);
        rec.high.store(seq, Ordering::Release);
        self.head = seq;
        // The publication point: the cell and the stream record written
        // above happen-before any reader's Acquire load that sees `seq`.
        // `oldest` as eviction left it, if eviction did not store it itself.
        if oldest_pending {
            self.shared.window.oldest.store(self.oldest, Ordering::Release);
        }
        #[cfg(not(gapless_mutant = "relaxed_publish"))]
        self.shared.window.head.store(seq, Ordering::Release);
        #[cfg(gapless_mutant = "relaxed_publish")]
        self.shared.window.head.store(seq, Ordering::Relaxed);
        self.shared.wake_waiters();
        Ok(Seq(seq))
    }

    /// Why `publish` refused `rec`: another ring's stream, or an ended one.
    #[cold]
    #[inline(never)]
    fn refused_stream(&self, rec: &StreamRecord) -> PublishError {
        if rec.ring_id != self.geo.ring_id {
            PublishError::ForeignStream { stream: rec.id }
        } else {
            PublishError::StreamEnded { stream: rec.id }
        }
    }

    /// The seq of the newest event published (0 before the first).
    pub fn head(&self) -> Seq {
        Seq(self.head)
    }

    /// Events per chunk of this ring.
    pub(crate) fn chunk_events(&self) -> usize {
        self.geo.chunk_events
    }

    /// The oldest retained seq (`head + 1` when nothing is retained).
    pub fn oldest(&self) -> Seq {
        Seq(self.oldest)
    }

    /// Payload bytes currently retained.
    pub fn retained_bytes(&self) -> usize {
        self.bytes
    }

    /// Payload bytes of every event evicted so far (exact; a reader's
    /// [`Reader::evicted_bytes`] may trail it by less than one chunk).
    pub fn evicted_bytes(&self) -> u64 {
        self.evicted_bytes
    }

    /// A reader of this ring.
    pub fn reader(&self) -> Reader {
        Reader::new(Arc::clone(&self.shared))
    }

    /// Bytes this producer keeps alive: retained payloads and the evicted
    /// ones still in the oldest held chunk, each at its allocator size class
    /// (jemalloc's: a 4 170-byte payload takes 5 120 bytes), the cells
    /// of every held chunk and the spare, the slot table, stream records and
    /// tombstones, and the chunks eviction took while a snapshot, batch or
    /// cursor held them (their cells and payloads), until the producer finds
    /// them released at its next chunk or [`Producer::evict_to`]. Costs a
    /// walk of the head's chunk (a sealed chunk is summed once, then
    /// remembered) and one step per held chunk.
    pub fn footprint(&self) -> usize {
        self.footprint_with(self.oldest)
    }

    /// [`Producer::footprint`] as it would be with `oldest` at `o`: the
    /// chunks before `o`'s are gone, and `o`'s holds every payload from its
    /// first seq on, evicted or not.
    fn footprint_with(&self, o: u64) -> usize {
        let geo = &self.geo;
        let mut payloads = 0;
        if o <= self.head {
            let head_k = geo.chunk_no(self.head);
            for k in geo.chunk_no(o)..=head_k {
                let i = geo.slot_of(k);
                let first = geo.chunk_first(k);
                let Some(c) = self.held.get(i).and_then(Option::as_deref).filter(|c| c.first == first) else {
                    continue;
                };
                payloads += if k < head_k {
                    match c.alloc_sum.load(Relaxed) {
                        UNSUMMED => {
                            let sum = alloc_of(c, 0..geo.chunk_events);
                            c.alloc_sum.store(sum, Relaxed);
                            sum
                        }
                        sum => sum,
                    }
                } else {
                    alloc_of(c, 0..geo.cell_idx(self.head) + 1)
                };
            }
        } else if let Some(c) = self.held.get(geo.slot_of(geo.chunk_no(o))).and_then(Option::as_deref) {
            // Nothing retained: `o` is `head + 1`, and the head's chunk,
            // if `o` is in it, holds only evicted payloads.
            if c.first == geo.chunk_first(geo.chunk_no(o)) && geo.cell_idx(o) > 0 {
                payloads = alloc_of(c, 0..geo.cell_idx(o));
            }
        }
        let chunks = self.chunks + usize::from(self.spare.is_some());
        let records = self.shared.streams.load_full().map_or(0, |d| d.len());
        // A short first chunk, counted at its own size.
        let short = self
            .held
            .first()
            .and_then(Option::as_deref)
            .map_or(0, |c| chunk_bytes(geo.chunk_events) - chunk_bytes(c.len()));
        payloads
            + self.pinned_bytes
            + self.pinned.capacity() * std::mem::size_of::<(Arc<Chunk>, usize)>()
            + chunks * chunk_bytes(geo.chunk_events)
            - short
            + (geo.slots() + self.held.len()) * std::mem::size_of::<usize>()
            + records * RECORD_BYTES
            + self.tomb_order.len() * TOMBSTONE_BYTES
    }

    /// Payload length of `seq <= head` whose chunk is still held: a
    /// retained seq, or an evicted one of the oldest held chunk
    /// (producer-side read of its own cell).
    #[inline]
    fn payload_len(&self, seq: u64) -> usize {
        // SAFETY: `seq <= head` and its chunk is held (`held` panics
        // otherwise), so its cell was written by us, before any later
        // publish; cells are never rewritten while their chunk is held.
        unsafe { held(&self.held, &self.geo, seq).get(self.geo.cell_idx(seq)) }.payload.len()
    }

    /// Lets go of the evicted chunks that no reader holds any more.
    fn release_unpinned(&mut self) {
        let mut freed = 0;
        self.pinned.retain(|(c, bytes)| {
            let held = Arc::strong_count(c) > 1;
            if !held {
                freed += bytes;
            }
            held
        });
        self.pinned_bytes -= freed;
    }

    /// Wakes waiting readers (after a change they wait for that is not a new
    /// head: a stream ending, the ring closing).
    fn notify(&self) {
        self.shared.wake_waiters();
    }
}

/// The producer's chunk for retained (or being published) `seq`.
#[inline]
fn held<'a>(held: &'a [Option<Arc<Chunk>>], geo: &Geometry, seq: u64) -> &'a Chunk {
    let i = geo.slot_of(geo.chunk_no(seq));
    held[i].as_deref().expect("a retained seq's chunk is held")
}

/// Cells of a ring's first chunk, until the ring publishes past them
/// (`Producer::grow`): half a chunk, at most 4. The `initialize` answer of
/// a session is 2 events; an idle session then keeps 4 cells (240 bytes)
/// instead of 64 (3.8 KiB).
pub(crate) fn first_chunk_len(c: usize) -> usize {
    if c >= 2 {
        (c / 2).min(4)
    } else {
        c
    }
}

/// Bytes of one chunk allocation of `c` cells: the cells, the chunk and the
/// `Arc` header.
fn chunk_bytes(c: usize) -> usize {
    // Each cell and its stream tag (`Chunk`'s column).
    c * (std::mem::size_of::<super::chunk::Cell>() + std::mem::size_of::<u32>())
        + std::mem::size_of::<Chunk>()
        + 2 * std::mem::size_of::<usize>()
}

/// The allocated size of the payloads in cells `cells` of `c`, each
/// written and not rewritten while `c` is held.
fn alloc_of(c: &Chunk, cells: std::ops::Range<usize>) -> usize {
    // SAFETY: callers pass only cells the producer wrote (up to the head,
    // or a whole sealed chunk) of a chunk it holds; cells are never
    // rewritten while their chunk is held.
    cells.map(|i| alloc_size(unsafe { c.get(i) }.payload.len())).sum()
}

/// What the allocator takes for `len` bytes: jemalloc's size classes (the
/// bundled server's allocator), 16-byte steps up to 128 and four classes
/// per doubling above, so up to a quarter more than `len`; glibc's malloc
/// takes no more than this beyond its own 16-byte rounding. 0 for 0 (an
/// empty `Bytes` allocates nothing). A payload that shares its allocation
/// with others (a slice of a larger `Bytes`) is counted as if it had its
/// own: the count errs high.
pub(crate) fn alloc_size(len: usize) -> usize {
    if len <= 128 {
        return (len + 15) & !15;
    }
    // len - 1 lies in [2^b, 2^(b+1)): four classes of 2^(b-2) each.
    let step = 1usize << (usize::BITS - (len - 1).leading_zeros() - 3);
    (len + step - 1) & !(step - 1)
}

/// Bytes of one stream record with its `Arc` and directory entry.
const RECORD_BYTES: usize = std::mem::size_of::<StreamRecord>() + 4 * std::mem::size_of::<usize>();

/// Bytes of one tombstone entry.
const TOMBSTONE_BYTES: usize = 4 * std::mem::size_of::<u64>();

/// Most records of finished, evicted, not fully delivered streams a ring
/// keeps (see `open_stream`).
const KEEP_UNDELIVERED: usize = 256;

/// Most tombstones (first and last seq of a reclaimed, fully delivered
/// stream) a ring keeps: 256 entries, a few KiB at most.
const KEEP_TOMBSTONES: usize = 256;

fn reclaimable(r: &StreamRecord, oldest: u64) -> bool {
    r.ended() && r.high.load(Ordering::Acquire) < oldest
}

impl Drop for Producer {
    fn drop(&mut self) {
        // The head's chunk is the back chunk, which `roll` has not sealed:
        // seal it with the cells written. Absent only when the head lies
        // before a chunk `start_at` rolled (its cells are placeholders of
        // that chunk, below `oldest`; `back` has none written then).
        if self.head > 0 {
            let k = self.geo.chunk_no(self.head);
            if let Some(Some(c)) = self.held.get(self.geo.slot_of(k)) {
                if c.first == self.geo.chunk_first(k) {
                    c.seal(self.geo.cell_idx(self.head) + 1);
                }
            }
        }
        self.shared.window.evicted_bytes.store(self.evicted_bytes, Ordering::Relaxed);
        self.shared.closed.store(true, Ordering::Release);
        self.notify();
    }
}

mod evict;
mod roll;

#[cfg(test)]
mod tests;
