//! Cursors: one follower's reading position, event by event or a chunk's
//! batch at a time, with the waker registration of the wake-up protocol.
//!
//! Read protocol for seq `s` (the module docs draw it): load `head`
//! (Acquire); `s > head` means not yet published. Load `oldest` (Acquire);
//! `s < oldest` means evicted, an explicit error. Otherwise take the chunk
//! for `s` from its slot (or the cursor's cached one), check its `first`,
//! and read the cell: it was written before the head store we acquired and
//! is never rewritten while the chunk is shared.

use super::barrier;
use super::batch::Batch;
use super::chunk::Chunk;
use super::event::Event;
use super::shared::Shared;
use super::stream::StreamRecord;
use crate::sync::{fence, lock, Arc, Ordering};
use gapless_wire::{Seq, StreamId};
use std::fmt;
use std::task::Waker;

/// Where `Cursor::locate` left the cursor.
enum Located {
    /// `next <= head`, not evicted, its chunk cached.
    Ready {
        head: u64,
    },
    Pending,
    End,
}

/// What `Cursor::advance_batch` found.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Staged {
    /// A batch `from ..= to` of the cached chunk (`from` is yielded).
    Ready {
        from: u64,
        to: u64,
    },
    Pending,
    End,
}

/// What [`Cursor::try_next_batch`] found.
#[derive(Clone, Copy, Debug)]
pub enum NextBatch<'a> {
    /// One or more events (of the cursor's stream, for a stream cursor).
    Events(Batch<'a>),
    /// Nothing new yet.
    Pending,
    /// Nothing more will come (see [`Next::End`]).
    End,
}

/// A reader fell behind eviction: the event it needed next is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Lagged {
    /// The seq the reader needed.
    pub wanted: Seq,
    /// The oldest seq still retained.
    pub oldest: Seq,
}

impl fmt::Display for Lagged {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "event {} was evicted; oldest retained is {}", self.wanted, self.oldest)
    }
}

impl std::error::Error for Lagged {}

/// What a cursor found next.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Next {
    /// The next event (of the cursor's stream, for a stream cursor).
    Event(Event),
    /// Nothing new yet.
    Pending,
    /// Nothing more will come: the stream ended (stream cursor) or the
    /// producer was dropped, and everything was read.
    End,
}

/// A reading position in a ring. Not shared: each follower owns one.
pub struct Cursor {
    shared: Arc<Shared>,
    /// The seq this cursor reads next.
    next: u64,
    /// The chunk holding recent seqs, cached so that following the producer
    /// costs no slot load per event.
    chunk: Option<Arc<Chunk>>,
    /// Only events of this stream are yielded.
    stream: Option<Arc<StreamRecord>>,
    /// Head seen by the last `try_next` that returned `Pending`.
    seen_head: u64,
    /// Reports `End` unconditionally (its stream's record is gone).
    gone: bool,
    /// Counted in `Shared::registrants` (since its first `register`).
    registrant: bool,
}

impl Cursor {
    /// A cursor at `next` (at least 1), following `stream` only if given.
    pub(super) fn new(shared: Arc<Shared>, next: Seq, stream: Option<Arc<StreamRecord>>) -> Self {
        Cursor {
            shared,
            next: next.0.max(1),
            chunk: None,
            stream,
            seen_head: 0,
            gone: false,
            registrant: false,
        }
    }
}

impl fmt::Debug for Cursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Cursor")
            .field("next", &self.next)
            .field("stream", &self.stream.as_ref().map(|r| r.id))
            .finish()
    }
}

impl Cursor {
    /// The seq this cursor looks at next.
    pub fn position(&self) -> Seq {
        Seq(self.next)
    }

    /// The stream this cursor follows, if any.
    pub fn stream(&self) -> Option<StreamId> {
        self.stream.as_ref().map(|r| r.id)
    }

    /// Reads the next event without waiting. Errors when the next needed
    /// event was evicted: the cursor never skips.
    pub fn try_next(&mut self) -> Result<Next, Lagged> {
        loop {
            match self.locate()? {
                Located::Ready { .. } => {}
                Located::Pending => return Ok(Next::Pending),
                Located::End => return Ok(Next::End),
            }
            let chunk = self.chunk.as_ref().expect("located");
            // SAFETY: `locate` saw next <= head (Acquire), so the cell is
            // written and the write is visible; the cached chunk is alive and
            // is chunk `chunk_no(next)` (checked `first`).
            let slot = unsafe { chunk.get(self.shared.geo.cell_idx(self.next)) };
            let seq = self.next;
            self.next += 1;
            if let Some(r) = &self.stream {
                if slot.stream != r.id {
                    continue;
                }
            }
            return Ok(Next::Event(Event {
                seq: Seq(seq),
                stream: slot.stream,
                index_in_stream: slot.index_in_stream,
                payload: slot.payload.clone(),
            }));
        }
    }

    /// Takes every available event up to the end of the next event's chunk
    /// at once, borrowed (no reference counting per event; see [`Batch`]).
    /// Like [`Cursor::try_next`] otherwise: `Pending`, `End`, or an error if
    /// the next needed event was evicted.
    pub fn try_next_batch(&mut self) -> Result<NextBatch<'_>, Lagged> {
        Ok(match self.advance_batch()? {
            Staged::Ready { from, to } => NextBatch::Events(self.staged(from, to)),
            Staged::Pending => NextBatch::Pending,
            Staged::End => NextBatch::End,
        })
    }

    /// Finds the next batch and moves past it; the batch is then read with
    /// `staged` (two steps, so that callers can decide before borrowing).
    pub(crate) fn advance_batch(&mut self) -> Result<Staged, Lagged> {
        loop {
            let head = match self.locate()? {
                Located::Ready { head } => head,
                Located::Pending => return Ok(Staged::Pending),
                Located::End => return Ok(Staged::End),
            };
            let chunk = self.chunk.as_deref().expect("located");
            let to = head.min(chunk.first + chunk.len() as u64 - 1);
            let from = match &self.stream {
                None => Some(self.next),
                Some(r) => (self.next..=to).find(|&s| {
                    // SAFETY: `s` is in `next ..= to`: published (head
                    // acquired by `locate`) and inside the cached chunk.
                    unsafe { chunk.get((s - chunk.first) as usize) }.stream == r.id
                }),
            };
            self.next = to + 1;
            if let Some(from) = from {
                return Ok(Staged::Ready { from, to });
            }
        }
    }

    /// The batch `advance_batch` just returned (the cursor was not moved
    /// in between: its cached chunk is the batch's).
    pub(crate) fn staged(&self, from: u64, to: u64) -> Batch<'_> {
        let chunk = self.chunk.as_deref().expect("staged from the cached chunk");
        assert!(chunk.first <= from && from <= to && to < chunk.first + chunk.len() as u64);
        // SAFETY: `advance_batch` returned `from ..= to` after `locate` saw
        // `head >= to` (Acquire); the range lies in the cached chunk
        // (asserted), which the cursor pins for as long as the batch
        // borrows it; `from` is of the cursor's stream.
        unsafe { Batch::new(chunk, from, to, self.stream.as_ref().map(|r| r.id), None) }
    }

    /// Positions the cursor on a readable `next`: not past the head, not
    /// evicted, its chunk cached. Skips evicted events of other streams for
    /// a stream cursor.
    #[inline]
    fn locate(&mut self) -> Result<Located, Lagged> {
        if self.gone {
            return Ok(Located::End);
        }
        let sh = &*self.shared;
        loop {
            // Ended/closed first: if it is set, the head we load next
            // includes the stream's (ring's) last event.
            // A dropped producer finishes every stream too.
            let finished =
                sh.closed.load(Ordering::Acquire) || self.stream.as_ref().is_some_and(|r| r.ended());
            let head = sh.head();
            if self.next > head {
                self.seen_head = head;
                return Ok(if finished { Located::End } else { Located::Pending });
            }
            if let Some(r) = &self.stream {
                // Nothing of ours can come after a finished stream's high.
                if finished && self.next > r.high.load(Ordering::Acquire) {
                    return Ok(Located::End);
                }
            }
            let oldest = sh.oldest();
            if self.next < oldest {
                if skip_others_evicted(&self.shared, self.stream.as_deref(), &mut self.next, &mut self.chunk)
                {
                    continue;
                }
                return Err(Lagged { wanted: Seq(self.next), oldest: Seq(oldest) });
            }
            let k_first = sh.geo.chunk_first(sh.geo.chunk_no(self.next));
            // Another chunk, or the ring's short first chunk cached before
            // it grew (`Producer::grow`): the head is past its cells (so may
            // `next` be), and the slot, loaded after the head above, holds
            // the whole one; a batch then runs to the chunk's end, as from
            // any other chunk. A whole chunk is never reloaded for this.
            #[cfg(not(gapless_mutant = "stale_short_chunk"))]
            let stale = |c: &Chunk| {
                c.first != k_first || (c.len() < sh.geo.chunk_events && head - c.first >= c.len() as u64)
            };
            #[cfg(gapless_mutant = "stale_short_chunk")]
            let stale = |c: &Chunk| c.first != k_first;
            if self.chunk.as_deref().is_none_or(stale) {
                self.chunk = sh.chunk_for(self.next);
                if self.chunk.is_none() {
                    if skip_others_evicted(
                        &self.shared,
                        self.stream.as_deref(),
                        &mut self.next,
                        &mut self.chunk,
                    ) {
                        continue;
                    }
                    return Err(Lagged { wanted: Seq(self.next), oldest: Seq(sh.oldest()) });
                }
            }
            return Ok(Located::Ready { head });
        }
    }

    /// Makes the cursor report `End` from now on (its stream is gone).
    #[cfg_attr(not(feature = "tokio"), allow(dead_code))]
    pub(crate) fn finish(&mut self) {
        self.gone = true;
    }

    /// Moves the cursor to `next` (e.g. after replaying a snapshot up to
    /// `next - 1`).
    pub fn seek(&mut self, next: Seq) {
        self.next = next.0.max(1);
    }

    /// Asks for `waker` to be woken at the next change of the ring's head (a
    /// publish, a stream ending, the producer closing). Returns `false`, and
    /// registers nothing useful, if the head already moved since the last
    /// `Pending`: call `try_next` again instead of sleeping. After `true`,
    /// call `try_next` once more before sleeping (a stream may have ended in
    /// between).
    // Hidden: the reader's half of the wake-up protocol. The async layer
    // (`Subscription`) is the way to wait; this is public only for the loom
    // models, which drive the protocol by hand.
    #[doc(hidden)]
    pub fn register(&mut self, waker: &Waker) -> bool {
        let sh = &*self.shared;
        if !self.registrant {
            // Once per cursor: from here on every publish takes the
            // symmetric path and looks at `waiting` (see `barrier.rs`).
            #[cfg(not(gapless_mutant = "uncounted_registrant"))]
            sh.registrants.fetch_add(1, Ordering::SeqCst);
            self.registrant = true;
            barrier::heavy(sh.asymmetric);
        }
        {
            let mut ws = lock(&sh.sleepers.wakers);
            if !ws.iter().any(|w| w.will_wake(waker)) {
                ws.push(waker.clone());
            }
            sh.sleepers.waiting.store(true, Ordering::Relaxed);
        }
        // Our store of `waiting`, this fence, then the load of `head`; the
        // producer stores `head`, fences, then loads `waiting`
        // (`Shared::wake_waiters`). One of the two sees the other's store.
        fence(Ordering::SeqCst);
        sh.head() == self.seen_head
    }
}

impl Drop for Cursor {
    fn drop(&mut self) {
        #[cfg(not(gapless_mutant = "uncounted_registrant"))]
        if self.registrant && self.shared.registrants.fetch_sub(1, Ordering::AcqRel) == 1 {
            // The last registrant went: no publish looks at the sleepers any
            // more, so drop the wakers left behind (they keep their tasks
            // alive). A new registrant counts itself before it takes this
            // lock: either we see it and leave the list alone, or its push
            // comes after our clearing.
            let mut ws = lock(&self.shared.sleepers.wakers);
            if self.shared.registrants.load(Ordering::SeqCst) == 0 {
                ws.clear();
                self.shared.sleepers.waiting.store(false, Ordering::Relaxed);
            }
        }
    }
}

/// A stream cursor whose next seq was evicted lags only if an event of *its*
/// stream was among the evicted ones: evicted events of other streams are
/// skipped. Proven the way a stream snapshot proves coverage (predecessor
/// links); returns whether the cursor moved on. Only runs on the slow path.
fn skip_others_evicted(
    shared: &Arc<Shared>,
    stream: Option<&StreamRecord>,
    next: &mut u64,
    chunk: &mut Option<Arc<Chunk>>,
) -> bool {
    let Some(r) = stream else { return false };
    match super::snapshot::pin_stream_after(shared, r.id, Seq(*next - 1)) {
        // The proof starts past `next` (at the oldest retained seq): move
        // there. A proof starting at `next` itself cannot happen (`next` is
        // evicted); treat it as a lag rather than loop.
        Ok(proof) if proof.range_start() > *next => {
            *next = proof.range_start();
            *chunk = None;
            true
        }
        _ => false,
    }
}
