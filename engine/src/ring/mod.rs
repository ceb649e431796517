//! The ring: one producer, many readers, no locks.
//!
//! ```
//! use bytes::Bytes;
//! use gapless::ring::{ring, Coverage, RingConfig};
//! use gapless::Seq;
//!
//! let (mut producer, reader) = ring(RingConfig::new(4, 1 << 20)).unwrap();
//! let stream = producer.open_stream();
//! for i in 0..6u8 {
//!     producer.publish(&stream, Bytes::from(vec![i])).unwrap(); // seqs 1..=6
//! }
//! assert_eq!(reader.coverage(Seq(2)), Coverage::Covered); // 3..=6 retained
//! assert_eq!(reader.coverage(Seq(1)), Coverage::Evicted { oldest: Seq(3), missing: 1 });
//! let snap = reader.snapshot(Seq(4)).unwrap(); // pins 5 and 6
//! for _ in 0..10 {
//!     producer.publish(&stream, Bytes::new()).unwrap(); // lap the ring
//! }
//! let got: Vec<u8> = snap.iter().map(|e| e.payload[0]).collect();
//! assert_eq!(got, [4, 5]); // still there
//! ```
//!
//! [`ring`] returns the handle pair: the unique [`Producer`] (not `Clone`:
//! "single producer" is a type fact) and a [`Reader`] (clone freely).
//!
//! # Symbols
//!
//! | symbol | meaning |
//! |---|---|
//! | seq | an event's number: 1, 2, 3, ... (0 is the cursor "processed nothing") |
//! | `head` | the newest published seq (0 before the first publish) |
//! | `oldest` | the oldest retained seq; `head + 1` when nothing is retained |
//! | `cap` | the capacity in events ([`RingConfig::capacity`]); also a byte budget bounds the window |
//! | `C` | events per chunk, a power of two ([`RingConfig::chunk_events`], default 64) |
//! | chunk `k` | the storage of seqs `k*C+1 ..= (k+1)*C` |
//! | `S` | slots in the slot table: the next power of two of `ceil(cap / C) + 1` |
//! | slot `i` | where chunk `k` sits while any of its seqs is retained, `i = k mod S` |
//! | cell | one event's storage in a chunk: stream id, position in its stream, the seq of its stream's previous event (`prev`), payload |
//!
//! # Layout
//!
//! `cap` = 6, `C` = 4, so `S` = 4. Seqs 1..=10 were published; `oldest` = 5
//! (the window is `cap` events), `head` = 10.
//!
//! ```text
//!                      oldest = 5       head = 10
//!                          |                |
//!                          v                v
//!   slot 0: chunk 0 [  1   2   3   4 ]      |     wholly evicted: slot cleared
//!   slot 1: chunk 1 [  5   6   7   8 ]      |     retained
//!   slot 2: chunk 2 [  9  10   .   . ]  <---'     cells 11, 12 unwritten
//!   slot 3:         ( empty )                     chunk 3 goes here on seq 13
//!
//!   every slot: an atomically swappable Option<Arc<Chunk>>
//!   (arc-swap; under loom, a loom mutex)
//! ```
//!
//! Seqs 1..=4 are gone from the ring: chunk 0's slot was cleared when seq 5
//! became `oldest`. A [`Snapshot`] that pinned chunk 0 before that still
//! holds it, and reads its cells as they were.
//!
//! Shared words: `head` and `oldest`, alone on one cache line; for the
//! async wake-up a count of registrants, a waiting flag and the wakers, on
//! another. Per stream a record: its first and last (high-water) seq, how
//! many events it has, its delivered mark, and whether it has ended.
//!
//! # Publish ([`Producer::publish`], the producer only)
//!
//! 1. Refuse a payload larger than the byte budget, or a stream that ended.
//! 2. **Evict**: advance `oldest` while the window would exceed `cap` or the
//!    byte budget. If that empties chunks, store `oldest` (Release) first,
//!    then clear their slots, dropping the ring's reference. A chunk that
//!    nobody else holds then (no snapshot, no cursor: the producer's `Arc`
//!    is unique) has its cells dropped and is kept as the spare for step 3:
//!    chunks are **recycled**. A chunk still pinned lives on in its pinners
//!    and is freed when the last lets go. If no chunk emptied, the store of
//!    `oldest` waits for step 6.
//! 3. If the current chunk is full, take the spare (its memory is reused for
//!    chunk `k`, its `first` rewritten while the producer holds the only
//!    reference) or allocate one, and store it in slot `k mod S`. That slot's
//!    previous chunk (`k - S`) was wholly evicted and cleared long before:
//!    the window spans at most `ceil(cap / C) + 1 <= S` chunks.
//!    The ring's first chunk starts **short** (half a chunk, at most 4
//!    cells: an idle session's ring keeps a few cells, not 64). When it is
//!    full, a whole chunk 0 takes its place: its cells are copied (payloads
//!    by reference count) and the whole chunk is stored in slot 0, all
//!    before the seq past the short length is written, so before any `head`
//!    or stream high-water mark that covers it (`producer/roll.rs`, `grow`).
//!    The short chunk stays valid, unchanged, for whoever still holds it.
//! 4. Write the cell. No reader looks at it yet: its seq is above `head`.
//! 5. Update the stream record (`first`, `published`, `high`; Release).
//! 6. **Publish**: store `oldest` if step 2 left it, then the new seq in
//!    `head` (Release). This store is the publication point.
//! 7. **Wake**: if a live cursor has ever registered a waker (the count),
//!    fence and, if one sleeps, wake the sleepers. While none has, this is a
//!    compiler fence and one load: the StoreLoad fence the wake-up needs is
//!    paid once per registrant, as a process-wide `membarrier` (Linux;
//!    elsewhere both sides use `fence(SeqCst)`), see `barrier.rs`.
//!
//! No lock is taken and nothing waits on a reader.
//!
//! # Read ([`Reader`], [`Cursor`], [`Snapshot`])
//!
//! To read seq `s`: load `head` (Acquire); `s > head` is "not yet". Load
//! `oldest` (Acquire); `s < oldest` is evicted, an explicit error. Otherwise
//! load the chunk from slot `chunk(s) mod S` (taking one reference) and
//! check that its first seq is `chunk(s)*C + 1`; a missing or different
//! chunk means `s` was evicted after our `oldest` load, also reported. Then
//! read the cell. A [`Snapshot`] does this once per chunk of its range and
//! then walks cells by reference; a [`Cursor`] caches its current chunk.
//! A chunk loaded after a `head` (or high-water mark) `>= s` was read holds
//! `s`'s cell, even chunk 0 while the first chunk grows (step 3). A cursor
//! that cached the short first chunk sees `s` past its cells and loads the
//! slot again (`cursor.rs`, `locate`).
//!
//! Eviction only moves `oldest` forward, and the producer stores it
//! *before* it clears a slot, so a reader that finds a chunk gone also finds
//! `oldest` past the seq it wanted. [`Reader::coverage`] is two loads:
//! `head`, then `oldest`.
//!
//! # The four hard read paths
//!
//! **A stream cursor across other streams' evictions.** A cursor that
//! follows one stream can find its next seq evicted although none of *its*
//! events were: the evicted seqs belonged to other streams. It must skip
//! them, not report a lag, and it must not skip one of its own. It asks for
//! the proof below from its position; if the proof holds, it moves to
//! `oldest` and reads on (`cursor.rs`, `skip_others_evicted`).
//!
//! **The predecessor proof.** Each cell stores `prev`, the seq of the
//! previous event of the same stream. For a stream gap after cursor `q`
//! with seqs `q+1 .. oldest-1` evicted, the newest event of the stream
//! before `oldest` is the `prev` of the stream's first retained event, or,
//! when none is retained, the stream's `high`. If that seq is `<= q`, no
//! event of the stream was evicted after `q` and the gap is covered
//! ([`Reader::snapshot_stream`]). Otherwise the stream lost events, and the
//! refusal says how many ([`Missing`]).
//!
//! **Delivered marks.** The transport reports, per stream, the newest event
//! it handed to the connection (`Reader::mark_delivered`); every earlier
//! event of that stream counts as delivered too, since a stream is written
//! in order on one connection. The mark is only ever raised (`fetch_max`),
//! with the event's position in its stream raised first, so a reader that
//! sees a mark sees a position at least as new. The decision table refuses
//! a cursor above its stream's mark (`cursor_not_delivered`), and a gap
//! refusal's count is exact when the cursor is the mark: the events of the
//! stream before its first retained one, minus the mark's position.
//!
//! **Tombstones.** Stream records of ended streams whose events are all
//! evicted are reclaimed (the directory stays bounded). For the newest 256
//! reclaimed, fully delivered streams a ring keeps a tombstone, the
//! stream's first and last seq, so that a resume at such a stream's last
//! event is still an empty success and an earlier cursor a refusal.
//! Streams reclaimed while not fully delivered lower one number,
//! `reclaimed_undelivered`, so a migration check still sees that something
//! at or below it was never delivered.
//!
//! # Why it is sound
//!
//! * Cells are written once, before the Release store of `head` that
//!   publishes them, and read only after an Acquire load of a `head` at
//!   least their seq: every read happens-after the write. No seqlock-style
//!   racy copy of a `Bytes` ever happens.
//! * A cell is never written while its chunk is shared. Its contents are
//!   dropped only through `&mut Chunk`: in `Chunk::drop`, when the last
//!   `Arc` goes, or in `Chunk::recycle`, which the producer runs only when
//!   `Arc::get_mut` proves its reference is the only one (no slot, snapshot
//!   or cursor holds the chunk). So a reader never sees freed or reused
//!   memory.
//! * Slots are `arc_swap::ArcSwapOption`, so loading a chunk races safely
//!   with the producer replacing it. Under `--cfg gapless_loom` the slots are
//!   loom mutexes (the `sync` shim) and the protocol is model-checked in
//!   `loom-tests/`, with both fences of the wake-up as `fence(SeqCst)`
//!   (loom does not model `membarrier`; the asymmetric replacement rests on
//!   the argument in `barrier.rs`).
//!
//! # Why chunks (the measured choice)
//!
//! A per-slot `ArcSwap<Event>` pays an allocation and a reference count per
//! event to publish and one per event to pin; a seqlock over `Bytes` is
//! undefined behaviour. Append-once chunks publish with a plain cell write
//! plus one store, allocate at most once per `C` events (none once a spare
//! is recycled), and pin a gap with one reference per chunk (157 or 158 for a
//! 10 000-event gap at `C` = 64). The price: up to one chunk of
//! already-evicted events stays in memory until its chunk is wholly
//! evicted. `BENCHMARKS.md` has the numbers.
//!
//! This module is the only one that imports the `sync` shim; everything
//! above it uses the ring through the types below.

mod barrier;
mod batch;
mod chunk;
mod config;
mod cursor;
mod event;
pub mod gap;
mod producer;
mod reader;
mod shared;
mod snapshot;
mod stream;

pub use batch::{Batch, BatchIter};
pub use config::{
    ConfigError, RingConfig, DEFAULT_BYTE_BUDGET, DEFAULT_CAPACITY, DEFAULT_CHUNK_EVENTS, MAX_CAPACITY,
};
#[cfg(feature = "tokio")]
pub(crate) use cursor::Staged;
pub use cursor::{Cursor, Lagged, Next, NextBatch};
pub use event::{exact_bytes, Event, EventRef};
pub use gap::Missing;
pub use producer::{Producer, PublishError};
pub use reader::{Coverage, Reader};
pub use snapshot::{Snapshot, SnapshotError, SnapshotIter};
pub use stream::{StreamHandle, StreamInfo};

use crate::sync::Arc;
use shared::Shared;

/// Creates a ring and returns its unique producer and a first reader.
pub fn ring(config: RingConfig) -> Result<(Producer, Reader), ConfigError> {
    config.validate()?;
    let shared = Arc::new(Shared::new(config));
    Ok((Producer::new(Arc::clone(&shared)), Reader::new(shared)))
}
