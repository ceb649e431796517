//! The state the producer and every reader share, and the geometry both
//! compute seq positions with.

use super::barrier;
use super::chunk::Chunk;
use super::config::RingConfig;
use super::stream::StreamRecord;
use crate::sync::{
    fence, lock, Arc, AtomicArc, AtomicBool, AtomicU64, AtomicUsize, HashMap, Mutex, Ordering,
};
use crate::StreamId;
use std::fmt;
use std::task::Waker;

pub(crate) type Directory =
    std::collections::HashMap<StreamId, Arc<StreamRecord>, std::hash::BuildHasherDefault<IdHasher>>;

/// The stream directory's hasher: one multiplication. Stream ids are the
/// producer's own counter, never a peer's choice, so a keyed hash buys
/// nothing against collisions; the multiplier (2^64 over the golden ratio)
/// spreads consecutive ids over the high bits the table indexes with. A
/// directory lookup is on every per-stream resume (it was SipHash's 13
/// rounds); fixed, so loom's runs repeat.
#[derive(Default)]
pub(crate) struct IdHasher(u64);

impl std::hash::Hasher for IdHasher {
    #[inline]
    fn finish(&self) -> u64 {
        self.0
    }
    #[inline]
    fn write_u64(&mut self, n: u64) {
        self.0 = (self.0 ^ n).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }
    fn write(&mut self, bytes: &[u8]) {
        for b in bytes {
            self.write_u64(u64::from(*b));
        }
    }
}
pub(crate) type Tombstones = HashMap<StreamId, (u64, u64)>;

/// A ring's immutable shape, and the index arithmetic on it: the one place
/// that maps a seq to its chunk, its cell and its slot. The producer keeps a
/// copy on its own cache lines; readers use the one in [`Shared`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Geometry {
    /// Identity of the ring (for stream-handle checks).
    pub(crate) ring_id: u64,
    /// Most events retained.
    pub(crate) capacity: u64,
    /// Most payload bytes retained.
    pub(crate) byte_budget: usize,
    /// Events per chunk (`C`, a power of two).
    pub(crate) chunk_events: usize,
    /// log2(`C`).
    pub(crate) chunk_shift: u32,
    /// `C - 1`: a seq's cell index is `(seq - 1) & cell_mask`.
    pub(crate) cell_mask: u64,
    /// Slots - 1 (`S` is a power of two).
    pub(crate) slot_mask: usize,
}

impl Geometry {
    pub(crate) fn new(ring_id: u64, config: &RingConfig) -> Self {
        // Chunks that can overlap the retained window: ceil(cap / C) + 1. A
        // slot is reused only once its chunk is wholly evicted (producer.rs).
        let needed = config.capacity.div_ceil(config.chunk_events) + 1;
        Geometry {
            ring_id,
            capacity: config.capacity as u64,
            byte_budget: config.byte_budget,
            chunk_events: config.chunk_events,
            chunk_shift: config.chunk_events.trailing_zeros(),
            cell_mask: config.chunk_events as u64 - 1,
            slot_mask: needed.next_power_of_two() - 1,
        }
    }

    /// Slots in the table (`S`).
    pub(crate) fn slots(&self) -> usize {
        self.slot_mask + 1
    }

    /// Chunk number `k` of `seq >= 1`: chunk `k` holds `k*C+1 ..= (k+1)*C`.
    #[inline(always)]
    pub(crate) fn chunk_no(&self, seq: u64) -> u64 {
        (seq - 1) >> self.chunk_shift
    }

    /// First seq of chunk `k`.
    #[inline(always)]
    pub(crate) fn chunk_first(&self, k: u64) -> u64 {
        (k << self.chunk_shift) + 1
    }

    /// Cell index of `seq` inside its chunk.
    #[inline(always)]
    pub(crate) fn cell_idx(&self, seq: u64) -> usize {
        ((seq - 1) & self.cell_mask) as usize
    }

    /// Slot index of chunk `k`.
    #[inline(always)]
    pub(crate) fn slot_of(&self, k: u64) -> usize {
        (k as usize) & self.slot_mask
    }
}

/// The two words every read looks at, on a cache line of their own: the
/// producer writes both on a publish that evicts, and nothing else that is
/// written often (reference counts, the sleepers' lock) shares their line.
/// 64 bytes, not `crossbeam_utils::CachePadded`'s 128 (x86_64's line pair):
/// measured both ways, coverage under a writer took the same time (median
/// 2.64-2.72 ns with 64, 2.53-2.72 ns with 128, three alternating runs
/// each, BENCHMARKS.md 2026-12-03), so the pair's extra bytes buy nothing.
#[repr(C, align(64))]
pub(crate) struct Window {
    /// Seq of the newest published event (0 before the first). Written only
    /// by the producer, with a Release store after the event's cell and
    /// stream record are written (this is the publication point); read with
    /// Acquire. Never decreases.
    pub(crate) head: AtomicU64,
    /// Oldest retained seq; `head + 1` when nothing is retained. Written only
    /// by the producer (Release), before a slot that held evicted chunks is
    /// cleared or reused; read Acquire. Never decreases, and
    /// `head + 1 - oldest <= capacity` whenever both are read after the same
    /// publish.
    pub(crate) oldest: AtomicU64,
    /// Payload bytes of every event evicted so far: a statistic (what an
    /// operator sees), written only by the producer, Relaxed both ways,
    /// when eviction empties a chunk (it then writes `oldest` on this line
    /// anyway), in `evict_to`, and when the producer goes; nothing is
    /// ordered by it.
    pub(crate) evicted_bytes: AtomicU64,
}

/// Wakers of sleeping readers and whether there are any (`waiting`, written
/// only under the lock so that the two agree). Pushed by readers in
/// `Cursor::register` before every sleep, drained by the producer; on its
/// own cache line so that sleeping readers do not disturb `Window`.
#[repr(align(64))]
pub(crate) struct Sleepers {
    pub(crate) wakers: Mutex<Vec<Waker>>,
    pub(crate) waiting: AtomicBool,
}

/// State shared by the producer and every reader.
pub(crate) struct Shared {
    /// `head` and `oldest`, alone on their cache line (see [`Window`]).
    pub(crate) window: Window,
    /// Set once by the producer's `Drop` (Release), before its final wake-up.
    pub(crate) closed: AtomicBool,
    /// Smallest high-water seq among reclaimed stream records that still had
    /// undelivered events (`u64::MAX`: none). Such a stream had an
    /// undelivered event at or below that seq, which a migration check must
    /// still see after the record is gone. Lowered by the producer
    /// (`fetch_min`) when it reclaims a record.
    pub(crate) reclaimed_undelivered: AtomicU64,
    /// How many streams the producer has opened (ids `1..=streams_opened`).
    /// Written by the producer (Release) after the stream's record is in
    /// `streams`.
    pub(crate) streams_opened: AtomicU64,
    /// `slots[geo.slot_of(k)]` holds chunk `k` while any of its seqs is
    /// retained, or a cleared/older/newer chunk; readers check
    /// `Chunk::first`. Written only by the producer.
    pub(crate) slots: Box<[AtomicArc<Chunk>]>,
    /// The ring's shape and index arithmetic. Immutable.
    pub(crate) geo: Geometry,
    pub(crate) config: RingConfig,
    /// Stream records by id, copy-on-write. Replaced only by the producer
    /// (stream open, record reclamation); read by readers.
    pub(crate) streams: AtomicArc<Directory>,
    /// `(first, high)` seqs of the most recently reclaimed records (ended,
    /// fully delivered, every event evicted), copy-on-write, at most
    /// `KEEP_TOMBSTONES` (producer.rs). Lets a resume on such a stream tell
    /// "nothing after the stream's last event" from "events were lost".
    pub(crate) tombstones: AtomicArc<Tombstones>,
    /// Wakers of sleeping readers (see [`Sleepers`]).
    pub(crate) sleepers: Sleepers,
    /// Live cursors that have registered a waker at least once. While it is
    /// zero a publish pays no StoreLoad fence (see `barrier.rs`).
    pub(crate) registrants: AtomicUsize,
    /// Whether `barrier::light` may be a compiler fence (decided once per
    /// process, before this ring existed).
    pub(crate) asymmetric: bool,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Shared")
            .field("head", &self.window.head.load(Ordering::Relaxed))
            .field("oldest", &self.window.oldest.load(Ordering::Relaxed))
            .field("config", &self.config)
            .finish_non_exhaustive()
    }
}

impl Shared {
    /// A ring's shared state for a validated configuration, empty.
    pub(crate) fn new(config: RingConfig) -> Self {
        let geo = Geometry::new(next_ring_id(), &config);
        Shared {
            window: Window {
                head: AtomicU64::new(0),
                oldest: AtomicU64::new(1),
                evicted_bytes: AtomicU64::new(0),
            },
            closed: AtomicBool::new(false),
            streams_opened: AtomicU64::new(0),
            reclaimed_undelivered: AtomicU64::new(u64::MAX),
            slots: (0..geo.slots()).map(|_| AtomicArc::new(None)).collect(),
            geo,
            config,
            streams: AtomicArc::new(Some(Arc::new(Directory::default()))),
            tombstones: AtomicArc::new(None),
            sleepers: Sleepers { wakers: Mutex::new(Vec::new()), waiting: AtomicBool::new(false) },
            registrants: AtomicUsize::new(0),
            asymmetric: barrier::asymmetric_available(),
        }
    }

    #[inline]
    pub(crate) fn head(&self) -> u64 {
        self.window.head.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn oldest(&self) -> u64 {
        self.window.oldest.load(Ordering::Acquire)
    }

    /// The chunk holding `seq`, if it is still in its slot.
    #[inline]
    pub(crate) fn chunk_for(&self, seq: u64) -> Option<Arc<Chunk>> {
        let k = self.geo.chunk_no(seq);
        let c = self.slots[self.geo.slot_of(k)].load_full()?;
        (c.first == self.geo.chunk_first(k)).then_some(c)
    }

    /// `(first, high)` of a reclaimed stream, if still remembered.
    pub(crate) fn tombstone(&self, id: StreamId) -> Option<(u64, u64)> {
        self.tombstones.load_full().and_then(|t| t.get(&id).copied())
    }

    pub(crate) fn stream(&self, id: StreamId) -> Option<Arc<StreamRecord>> {
        self.streams.load_full().and_then(|d| d.get(&id).cloned())
    }

    /// The producer's half of the wake-up protocol, after a change readers
    /// may sleep on (a new `head`, a stream ending, the ring closing) was
    /// stored: wakes every sleeping reader. Costs a compiler fence and one
    /// load while no live cursor has registered (see `barrier.rs`).
    #[inline]
    pub(crate) fn wake_waiters(&self) {
        #[cfg(not(gapless_mutant = "no_publish_fence"))]
        barrier::light(self.asymmetric);
        if self.registrants.load(Ordering::Relaxed) == 0 {
            return;
        }
        // A registrant exists: the symmetric protocol. Our store above, then
        // this fence, then the load of `waiting`; the reader stores
        // `waiting`, fences, then loads `head` (`Cursor::register`). One of
        // the two sees the other's store.
        #[cfg(not(gapless_mutant = "no_publish_fence"))]
        if self.asymmetric {
            fence(Ordering::SeqCst);
        }
        if self.sleepers.waiting.load(Ordering::Relaxed) {
            self.wake_all();
        }
    }

    #[cold]
    fn wake_all(&self) {
        let wakers = {
            let mut ws = lock(&self.sleepers.wakers);
            self.sleepers.waiting.store(false, Ordering::Relaxed);
            std::mem::take(&mut *ws)
        };
        for w in wakers {
            w.wake();
        }
    }
}

fn next_ring_id() -> u64 {
    // Not a synchronization point (an identity only): the std atomic is
    // right under loom too.
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
