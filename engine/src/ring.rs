//! Ring configuration, the state producer and readers share, and the
//! constructor that returns the handle pair.

use crate::barrier;
use crate::chunk::Chunk;
use crate::event::StreamId;
use crate::producer::Producer;
use crate::reader::Reader;
use crate::stream::StreamRecord;
use crate::sync::{fence, lock, Arc, AtomicArc, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use std::collections::HashMap;
use std::fmt;
use std::task::Waker;

/// Largest seq a ring can publish.
pub(crate) const MAX_SEQ: u64 = (1 << 63) - 1;

/// Default capacity in events (SPEC §5).
pub const DEFAULT_CAPACITY: usize = 4096;
/// Default payload budget in bytes (SPEC §5): 16 MiB.
pub const DEFAULT_BYTE_BUDGET: usize = 16 << 20;
/// Default events per chunk.
pub const DEFAULT_CHUNK_EVENTS: usize = 64;
/// Largest accepted capacity in events.
pub const MAX_CAPACITY: usize = 1 << 26;
/// Most chunk slots a ring may need (`capacity / chunk_events`): the slot
/// table is allocated up front, one pointer per slot.
const MAX_SLOTS: usize = 1 << 20;

/// How big a ring is. Both bounds apply: publishing past either evicts the
/// oldest events.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Most events retained (1 ..= [`MAX_CAPACITY`]).
    pub capacity: usize,
    /// Most payload bytes retained (at least 1). A single payload larger than
    /// this is refused by `publish`.
    pub byte_budget: usize,
    /// Events per storage chunk: a power of two, 1 ..= 65 536, and at least
    /// `capacity / 2^20` (the slot table is allocated up front). Pinning costs
    /// one reference count per chunk; up to one chunk of already-evicted
    /// events may stay in memory until the chunk is wholly evicted.
    pub chunk_events: usize,
}

impl Default for RingConfig {
    fn default() -> Self {
        RingConfig {
            capacity: DEFAULT_CAPACITY,
            byte_budget: DEFAULT_BYTE_BUDGET,
            chunk_events: DEFAULT_CHUNK_EVENTS,
        }
    }
}

impl RingConfig {
    /// A configuration with the given bounds and the default chunk size
    /// (smaller when the capacity is small).
    pub fn new(capacity: usize, byte_budget: usize) -> Self {
        let small = DEFAULT_CHUNK_EVENTS.min(capacity.max(1).next_power_of_two());
        let chunk_events = small.max((capacity / MAX_SLOTS).next_power_of_two()).min(1 << 16);
        RingConfig { capacity, byte_budget, chunk_events }
    }

    fn validate(&self) -> Result<(), ConfigError> {
        if self.capacity == 0 || self.capacity > MAX_CAPACITY {
            return Err(ConfigError::Capacity { capacity: self.capacity, max: MAX_CAPACITY });
        }
        if self.byte_budget == 0 {
            return Err(ConfigError::ByteBudget { byte_budget: 0 });
        }
        if !self.chunk_events.is_power_of_two()
            || self.chunk_events > 1 << 16
            || self.capacity.div_ceil(self.chunk_events) > MAX_SLOTS
        {
            return Err(ConfigError::ChunkEvents { chunk_events: self.chunk_events });
        }
        Ok(())
    }
}

/// Why a ring configuration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConfigError {
    /// Capacity 0 or above the maximum.
    Capacity {
        /// What was asked for.
        capacity: usize,
        /// The largest accepted.
        max: usize,
    },
    /// A byte budget of 0 (no event, not even an empty priming one, could be
    /// accounted for; the smallest budget is 1).
    ByteBudget {
        /// What was asked for.
        byte_budget: usize,
    },
    /// Chunk size not a power of two in 1 ..= 65 536, or so small for the
    /// capacity that the slot table would exceed 2^20 entries.
    ChunkEvents {
        /// What was asked for.
        chunk_events: usize,
    },
}

impl fmt::Display for ConfigError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ConfigError::Capacity { capacity, max } => {
                write!(f, "ring capacity must be 1..={max} events, got {capacity}")
            }
            ConfigError::ByteBudget { byte_budget } => {
                write!(f, "ring byte budget must be at least 1, got {byte_budget}")
            }
            ConfigError::ChunkEvents { chunk_events } => {
                write!(
                    f,
                    "chunk size must be a power of two up to 65536 and at least capacity / 2^20, got {chunk_events}"
                )
            }
        }
    }
}

impl std::error::Error for ConfigError {}

pub(crate) type Directory = HashMap<StreamId, Arc<StreamRecord>>;
pub(crate) type Tombstones = HashMap<StreamId, (u64, u64)>;

/// The two words every read looks at, on a cache line of their own: the
/// producer writes both on a publish that evicts, and nothing else that is
/// written often (reference counts, the sleepers' lock) shares their line.
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
    /// `slots[k & slot_mask]` holds chunk `k` (seqs `k*C+1 ..= (k+1)*C`)
    /// while any of its seqs is retained, or a cleared/older/newer chunk;
    /// readers check `Chunk::first`. Written only by the producer.
    pub(crate) slots: Box<[AtomicArc<Chunk>]>,
    pub(crate) slot_mask: usize,
    /// log2(events per chunk).
    pub(crate) chunk_shift: u32,
    pub(crate) config: RingConfig,
    /// Identity of this ring (for stream-handle checks).
    pub(crate) id: u64,
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
    #[inline]
    pub(crate) fn head(&self) -> u64 {
        self.window.head.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn oldest(&self) -> u64 {
        self.window.oldest.load(Ordering::Acquire)
    }

    #[inline]
    pub(crate) fn chunk_no(&self, seq: u64) -> u64 {
        (seq - 1) >> self.chunk_shift
    }

    #[inline]
    pub(crate) fn cell_idx(&self, seq: u64) -> usize {
        ((seq - 1) & ((1u64 << self.chunk_shift) - 1)) as usize
    }

    /// The chunk holding `seq`, if it is still in its slot.
    #[inline]
    pub(crate) fn chunk_for(&self, seq: u64) -> Option<Arc<Chunk>> {
        let k = self.chunk_no(seq);
        let c = self.slots[(k as usize) & self.slot_mask].load_full()?;
        (c.first == (k << self.chunk_shift) + 1).then_some(c)
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

/// Creates a ring and returns its unique producer and a first reader.
pub fn ring(config: RingConfig) -> Result<(Producer, Reader), ConfigError> {
    config.validate()?;
    let chunk_shift = config.chunk_events.trailing_zeros();
    // Chunks that can overlap the retained window: ceil(cap / C) + 1. A slot
    // is reused only once its chunk is wholly evicted (see producer.rs).
    let needed = config.capacity.div_ceil(config.chunk_events) + 1;
    let nslots = needed.next_power_of_two();
    let shared = Arc::new(Shared {
        window: Window { head: AtomicU64::new(0), oldest: AtomicU64::new(1) },
        closed: AtomicBool::new(false),
        streams_opened: AtomicU64::new(0),
        reclaimed_undelivered: AtomicU64::new(u64::MAX),
        slots: (0..nslots).map(|_| AtomicArc::new(None)).collect(),
        slot_mask: nslots - 1,
        chunk_shift,
        config,
        id: next_ring_id(),
        streams: AtomicArc::new(Some(Arc::new(HashMap::new()))),
        tombstones: AtomicArc::new(None),
        sleepers: Sleepers { wakers: Mutex::new(Vec::new()), waiting: AtomicBool::new(false) },
        registrants: AtomicUsize::new(0),
        asymmetric: barrier::asymmetric_available(),
    });
    Ok((Producer::new(Arc::clone(&shared)), Reader::new(shared)))
}

fn next_ring_id() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(1);
    NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
}
