//! The producer: the only writer of a ring.
//!
//! Publishing is: evict (advance `oldest`, clear the slots of wholly evicted
//! chunks), make sure a chunk has room, write the cell, update the stream
//! record, then publish with one Release store of `head` and wake sleeping
//! readers if there are any. No lock, no wait, and no StoreLoad fence while
//! no reader has ever slept (see `barrier.rs`).

use crate::chunk::{Chunk, Slot};
use crate::event::{Seq, StreamId};
use crate::ring::{Shared, MAX_SEQ};
use crate::stream::{StreamHandle, StreamRecord};
use crate::sync::{Arc, Ordering};
use bytes::Bytes;
use std::collections::VecDeque;
use std::fmt;

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
    /// Mirror of the published head.
    head: u64,
    /// Mirror of `shared.oldest`.
    oldest: u64,
    /// Payload bytes of the retained events `oldest ..= head`.
    bytes: usize,
    /// Chunks overlapping `oldest ..= head`, in order; the back one is being
    /// written. Wholly evicted chunks are popped (and their slots cleared).
    chunks: VecDeque<Arc<Chunk>>,
    /// Cells written in the back chunk (== chunk size when a new one is due).
    fill: usize,
    /// Ids handed out so far.
    streams_opened: u64,
    /// Directory size after the last reclamation sweep.
    swept_len: usize,
}

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
        let c = shared.config.chunk_events;
        Producer {
            shared,
            head: 0,
            oldest: 1,
            bytes: 0,
            chunks: VecDeque::new(),
            fill: c,
            streams_opened: 0,
            swept_len: 0,
        }
    }

    /// Opens a new stream. Also reclaims the records of ended streams whose
    /// events have all left the ring, so the directory stays bounded.
    pub fn open_stream(&mut self) -> StreamHandle {
        self.streams_opened += 1;
        let id = StreamId(self.streams_opened);
        let rec = Arc::new(StreamRecord::new(id, self.shared.id));
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
            dir.retain(|id, r| {
                if !reclaimable(r, oldest) {
                    return true;
                }
                let high = r.high.load(Ordering::Acquire);
                if r.delivered.load(Ordering::Acquire) < high {
                    undelivered.push((*id, high));
                    return true;
                }
                false
            });
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

    /// A handle to an already opened stream, if its record is kept.
    pub fn handle(&self, id: StreamId) -> Option<StreamHandle> {
        self.shared.stream(id).map(|rec| StreamHandle { rec })
    }

    /// Marks a stream ended and wakes its readers. Idempotent.
    pub fn end_stream(&mut self, stream: &StreamHandle) {
        if stream.rec.ring_id == self.shared.id {
            stream.rec.ended.store(true, Ordering::Release);
            self.notify();
        }
    }

    /// Publishes `payload` on `stream` and returns its seq. Never blocks,
    /// never waits for a reader; evicts the oldest events as needed to stay
    /// within both bounds.
    #[inline]
    pub fn publish(&mut self, stream: &StreamHandle, payload: Bytes) -> Result<Seq, PublishError> {
        let rec = &*stream.rec;
        if rec.ring_id != self.shared.id {
            return Err(PublishError::ForeignStream { stream: rec.id });
        }
        if rec.ended.load(Ordering::Relaxed) {
            return Err(PublishError::StreamEnded { stream: rec.id });
        }
        let len = payload.len();
        let budget = self.shared.config.byte_budget;
        if len > budget {
            return Err(PublishError::PayloadTooLarge { len, budget });
        }
        if self.head == MAX_SEQ {
            return Err(PublishError::SeqExhausted);
        }
        let seq = self.head + 1;
        self.evict_for(seq, len);
        if self.fill == self.shared.config.chunk_events {
            self.roll(seq);
        }
        let prev = rec.high.load(Ordering::Relaxed);
        let index = rec.published.load(Ordering::Relaxed) + 1;
        let chunk = self.chunks.back().expect("roll pushed a chunk");
        // SAFETY: we are the only producer; cell `fill` of the back chunk is
        // unwritten and holds `seq`, which is not yet published, so no reader
        // looks at it.
        unsafe {
            chunk.write(
                self.fill,
                Slot { stream: rec.id, index_in_stream: index, prev_in_stream: prev, payload },
            );
        }
        self.fill += 1;
        if self.fill == self.shared.config.chunk_events {
            chunk.seal(self.fill);
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
        #[cfg(not(gapless_mutant = "relaxed_publish"))]
        self.shared.head.store(seq, Ordering::Release);
        #[cfg(gapless_mutant = "relaxed_publish")]
        self.shared.head.store(seq, Ordering::Relaxed);
        self.shared.wake_waiters();
        Ok(Seq(seq))
    }

    /// The seq of the newest event published (0 before the first).
    pub fn head(&self) -> Seq {
        Seq(self.head)
    }

    /// The oldest retained seq (`head + 1` when nothing is retained).
    pub fn oldest(&self) -> Seq {
        Seq(self.oldest)
    }

    /// Payload bytes currently retained.
    pub fn retained_bytes(&self) -> usize {
        self.bytes
    }

    /// A reader of this ring.
    pub fn reader(&self) -> crate::Reader {
        crate::Reader::new(Arc::clone(&self.shared))
    }

    /// Advances `oldest` so that publishing `seq` with `len` payload bytes
    /// keeps both bounds.
    #[inline]
    fn evict_for(&mut self, seq: u64, len: usize) {
        let cap = self.shared.config.capacity as u64;
        let budget = self.shared.config.byte_budget;
        let mut o = self.oldest;
        if seq - o >= cap {
            self.bytes -= self.payload_len(o);
            o += 1;
        }
        while self.bytes + len > budget {
            self.bytes -= self.payload_len(o);
            o += 1;
        }
        if o == self.oldest {
            return;
        }
        debug_assert!(o <= seq, "eviction never passes the event being published");
        #[cfg(not(gapless_mutant = "late_evict"))]
        self.shared.oldest.store(o, Ordering::Release);
        self.oldest = o;
        let c = self.shared.config.chunk_events as u64;
        while let Some(front) = self.chunks.front() {
            if front.first + c > o {
                break;
            }
            // Wholly evicted: readers already see `oldest` past it (stored
            // above), so clearing its slot never hides a retained seq.
            let k = self.shared.chunk_no(front.first) as usize;
            self.shared.slots[k & self.shared.slot_mask].store(None);
            self.chunks.pop_front();
        }
        #[cfg(gapless_mutant = "late_evict")]
        self.shared.oldest.store(o, Ordering::Release);
    }

    /// Payload length of retained `seq` (producer-side read of its own cell).
    #[inline]
    fn payload_len(&self, seq: u64) -> usize {
        let front = self.chunks.front().expect("a retained seq lives in a chunk");
        let i = ((seq - front.first) >> self.shared.chunk_shift) as usize;
        // SAFETY: `seq` is retained (oldest <= seq <= head), so its cell was
        // written by us; cells are never rewritten.
        unsafe { self.chunks[i].get(self.shared.cell_idx(seq)) }.payload.len()
    }

    /// Starts a new chunk whose first seq is `seq`.
    #[cold]
    fn roll(&mut self, seq: u64) {
        let c = self.shared.config.chunk_events;
        let chunk = Arc::new(Chunk::new(seq, c));
        let k = self.shared.chunk_no(seq) as usize;
        debug_assert_eq!(self.shared.cell_idx(seq), 0);
        // The slot's previous chunk (k - nslots) is wholly evicted: the
        // window spans at most ceil(cap/C) + 1 <= nslots chunks, and its slot
        // was cleared when it was evicted.
        self.shared.slots[k & self.shared.slot_mask].store(Some(Arc::clone(&chunk)));
        self.chunks.push_back(chunk);
        self.fill = 0;
    }

    /// Wakes waiting readers (after a change they wait for that is not a new
    /// head: a stream ending, the ring closing).
    fn notify(&self) {
        self.shared.wake_waiters();
    }
}

/// Most records of finished, evicted, not fully delivered streams a ring
/// keeps (see `open_stream`).
const KEEP_UNDELIVERED: usize = 256;

fn reclaimable(r: &StreamRecord, oldest: u64) -> bool {
    r.ended.load(Ordering::Acquire) && r.high.load(Ordering::Acquire) < oldest
}

impl Drop for Producer {
    fn drop(&mut self) {
        if let Some(back) = self.chunks.back() {
            back.seal(self.fill);
        }
        self.shared.closed.store(true, Ordering::Release);
        self.notify();
    }
}
