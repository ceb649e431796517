//! # gapless: event rings that never lose an event silently
//!
//! One ring per MCP session holds the session's recent events under a dense,
//! monotonic [`Seq`]. A resume either gets every event after its cursor, in
//! order, or an explicit error that says what is missing.
//!
//! ```
//! use bytes::Bytes;
//! use gapless::{ring, Coverage, RingConfig, Seq};
//!
//! let (mut producer, reader) = ring(RingConfig::new(4, 1 << 20)).unwrap();
//! let stream = producer.open_stream();
//! for i in 0..6u8 {
//!     producer.publish(&stream, Bytes::from(vec![i])).unwrap(); // seqs 1..=6
//! }
//! assert_eq!(reader.coverage(Seq(2)), Coverage::Covered); // 3..=6 retained
//! assert_eq!(reader.coverage(Seq(1)), Coverage::Evicted { oldest: Seq(3), missing: 1 });
//! let snap = reader.snapshot(Seq(4)).unwrap(); // pins 5 and 6
//! for _ in 0..10 { producer.publish(&stream, Bytes::new()).unwrap(); } // lap the ring
//! let got: Vec<u8> = snap.iter().map(|e| e.payload[0]).collect();
//! assert_eq!(got, [4, 5]);
//! ```
//!
//! ## Layout
//!
//! Events live in append-once **chunks** of `C` cells (a power of two,
//! default 64). Chunk `k` holds seqs `k*C+1 ..= (k+1)*C` and sits in slot
//! `k mod S` of a fixed slot table while any of its seqs is retained
//! (`S` = next power of two of `ceil(capacity / C) + 1`, enough for every
//! chunk the window can overlap):
//!
//! ```text
//!            oldest                              head
//!               v                                  v
//!   slot 0: [ 1  2  3  4 ]  <- chunk 0 (evicted: slot cleared, or pinned
//!   slot 1: [ 5  6  7  8 ]     only by a snapshot that still holds it)
//!   slot 2: [ 9 10 11 12 ]  <- chunk 2, cells 11 and 12 unwritten
//!   slot 3: [            ]  <- empty until chunk 3 (or chunk 7 reuses 3)
//!             ^ each slot: an atomically swappable Option<Arc<Chunk>>
//! ```
//!
//! Shared words: `head` (newest published seq) and `oldest` (oldest
//! retained seq); for the async wake-up, a count of registrants and a
//! waiting flag. Per stream, a record with its
//! first and last seq, count, delivered mark and ended flag.
//!
//! ## Publish protocol (producer only, [`Producer::publish`])
//!
//! 1. Refuse a payload larger than the byte budget, or a stream that ended.
//! 2. **Evict**: advance `oldest` while the window would exceed the event
//!    capacity or the byte budget. If that empties chunks, store `oldest`
//!    (Release) and only then clear their slots (dropping the ring's
//!    reference; pinned chunks live on in their snapshots, unpinned ones are
//!    reused by the producer). Otherwise the store waits for step 6.
//! 3. If the current chunk is full, take the next one (a reused one or a new
//!    allocation) and store it in its slot (the slot's previous chunk was
//!    cleared in step 2 of an earlier publish: it was wholly evicted long
//!    before).
//! 4. Write the cell (stream id, position in stream, previous seq of the
//!    stream, payload). Nobody reads it yet.
//! 5. Update the stream record (`first`, `published`, `high`; Release).
//! 6. **Publish**: store `oldest` if step 2 left it, then the new seq in
//!    `head` (Release; adjacent words of one cache line).
//! 7. **Wake**: if a live cursor has registered a waker (a count), fence
//!    and, if one is asleep, wake the sleepers. While none has, this is a compiler fence and one load: the StoreLoad fence
//!    the wake-up needs is paid by each registrant once, as a process-wide
//!    `membarrier` (Linux; elsewhere both sides use `fence(SeqCst)`), see
//!    `barrier.rs`.
//!
//! No lock is taken and nothing waits on a reader.
//!
//! ## Read protocol ([`Reader`], [`Cursor`], [`Snapshot`])
//!
//! To read seq `s`: load `head` (Acquire); `s > head` is "not yet". Load
//! `oldest` (Acquire); `s < oldest` is an explicit [`Lagged`]/evicted error.
//! Otherwise load the chunk from slot `chunk(s) mod S` (one reference) and
//! check that its `first` is `chunk(s)*C+1`; a missing or different chunk
//! means `s` was evicted after our `oldest` load, also reported. Then read
//! the cell. A [`Snapshot`] does this once per chunk of its range and then
//! iterates cells by reference; a [`Cursor`] caches the current chunk.
//!
//! ## Eviction detection
//!
//! Eviction only moves `oldest` forward. Every read compares against it, and
//! the producer stores it *before* it clears a slot, so a reader that finds
//! a chunk gone also finds `oldest` past the seq it wanted. The
//! [`Reader::coverage`] check is two loads: `head`, then `oldest`.
//!
//! ## Why it is sound
//!
//! * Cells are written once, before the Release store of `head` that
//!   publishes them, and read only after an Acquire load of a `head` at
//!   least their seq: every read happens-after the write (no seqlock-style
//!   racy copy of a `Bytes`).
//! * A cell is never overwritten. It is dropped only in `Chunk::drop`, which
//!   runs when the last `Arc<Chunk>` goes: the slot's, the producer's, and
//!   each pinning snapshot's or cursor's. So a reader never sees freed or
//!   reused memory.
//! * Slots are `arc_swap::ArcSwapOption`, so loading a chunk races safely
//!   with the producer replacing it. Under `--cfg gapless_loom` the slots are
//!   loom mutexes (see `sync.rs`) and the whole protocol is model-checked in
//!   `loom-tests/`, with both fences of the wake-up as `fence(SeqCst)`
//!   (loom does not model `membarrier`; the asymmetric replacement rests on
//!   the argument in `barrier.rs`).
//!
//! ## Why chunks (the measured choice)
//!
//! A per-slot `ArcSwap<Event>` pays an allocation and a reference count per
//! event to publish and one per event to pin; a seqlock over `Bytes` is
//! undefined behaviour. Append-once chunks publish with a plain cell write
//! plus one store, allocate once per `C` events, and pin a gap with one
//! reference per chunk (156 references for a 10 000-event gap at `C` = 64).
//! The price: up to one chunk of already-evicted events stays in memory
//! until its chunk is wholly evicted. See `BENCHMARKS.md` for numbers.
//!
//! ## Bad input and limits
//!
//! Nothing here panics on bad input; each case has a typed answer.
//!
//! | input | result |
//! |---|---|
//! | capacity 0, or above [`MAX_CAPACITY`] | [`ConfigError::Capacity`] |
//! | byte budget 0 (smaller than any event's accounting) | [`ConfigError::ByteBudget`]; any budget of at least 1 is valid |
//! | chunk size not a power of two up to 65 536 | [`ConfigError::ChunkEvents`] |
//! | a payload larger than the whole byte budget | [`PublishError::PayloadTooLarge`]; the ring is unchanged |
//! | a payload exactly the budget | accepted; every other event is evicted |
//! | publishing on an ended stream / another ring's stream | [`PublishError::StreamEnded`] / [`PublishError::ForeignStream`] |
//! | cursor `Seq(0)` ("processed nothing") | [`Coverage::Covered`] while seq 1 is retained, else `Evicted { oldest, missing: oldest - 1 }`; `snapshot(Seq(0))` is everything |
//! | cursor past the head, e.g. `u64::MAX` | [`Coverage::Ahead`] / [`SnapshotError::Ahead`] with the head |
//! | a cursor that needs an evicted event | [`Coverage::Evicted`], [`SnapshotError::Evicted`], [`Lagged`]: always with the numbers |
//! | 2^63 - 1 events published | [`PublishError::SeqExhausted`] |
//!
//! ## Crate map
//!
//! * [`ring`], [`RingConfig`], [`Producer`], [`Reader`]: the ring.
//! * [`Coverage`]: the wait-free gap check.
//! * [`Snapshot`]: pinned, zero-copy gaps.
//! * [`Cursor::try_next_batch`], [`Batch`]: a chunk's available events at
//!   once, borrowed (no reference count per event).
//! * [`StreamHandle`], [`StreamInfo`]: per-stream bookkeeping.
//! * [`Hub`], [`Session`], [`SessionId`]: sessions with incarnations, limits
//!   and a per-session writer lock in front of each ring.
//! * [`event_id`]: the `<tag>-<seq>` wire codec; [`EventId`], [`Namespace`].
//! * [`Hub::decide`], [`Decision`], [`Refusal`]: the resume decision table.
//! * [`Hub::migrate`], [`Hub::redeem`], [`Ticket`]: WebSocket migration tickets.
//! * `Subscription` (feature `tokio`): replay, then live, one owned event
//!   (`recv`) or a borrowed batch (`recv_batch`) at a time; paced publishing.
//! * [`client`]: the sans-IO client guard.

mod barrier;
mod batch;
mod chunk;
pub mod client;
mod coverage;
mod event;
pub mod event_id;
#[cfg(feature = "tokio")]
mod facade;
mod producer;
mod reader;
mod resume;
mod ring;
mod session;
mod snapshot;
mod stream;
mod sync;
mod ticket;

pub use batch::{Batch, BatchIter};
pub use coverage::Coverage;
pub use event::{Event, EventRef, Seq, StreamId};
pub use event_id::{EventId, Namespace};
#[cfg(feature = "tokio")]
pub use facade::{Pacer, Subscription};
pub use producer::{Producer, PublishError};
pub use reader::{Cursor, Lagged, Next, NextBatch, Reader};
pub use resume::{Decision, Refusal, Resume, ResumeRequest, ResumeTarget};
pub use ring::{
    ring, ConfigError, RingConfig, DEFAULT_BYTE_BUDGET, DEFAULT_CAPACITY, DEFAULT_CHUNK_EVENTS, MAX_CAPACITY,
};
pub use session::{ConnectionGuard, Hub, HubConfig, Session, SessionError, SessionId, SessionPublishError};
pub use snapshot::{Snapshot, SnapshotError, SnapshotIter};
pub use stream::{StreamHandle, StreamInfo};
pub use ticket::{IssuedTicket, MigrateError, Migration, Ticket, TicketError};
