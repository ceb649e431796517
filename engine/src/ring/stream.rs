//! Per-stream bookkeeping (`docs/SPEC.md` §3.6): which events belong to a stream, its
//! high-water seq, what of it was delivered, and whether it has ended.

use super::event::Event;
use crate::sync::{Arc, AtomicU64, Ordering};
use gapless_wire::{Seq, StreamId};

/// The shared record of one stream.
#[derive(Debug)]
pub(crate) struct StreamRecord {
    pub(crate) id: StreamId,
    /// Identity of the ring this stream belongs to (guards against a handle
    /// of another ring being published through). Immutable.
    pub(crate) ring_id: u64,
    /// Seq of the stream's first event, 0 while it has none. Written once by
    /// the producer (Release), read by readers (Acquire).
    pub(crate) first: AtomicU64,
    /// Seq of the stream's last event (its high-water mark), 0 while it has
    /// none. Written only by the producer, Release, before the ring's head
    /// store for that seq; read by readers, Acquire.
    pub(crate) high: AtomicU64,
    /// How many events were published on the stream. Producer-written
    /// together with `high`.
    pub(crate) published: AtomicU64,
    /// Seq of the last event of this stream the transport reported delivered;
    /// every event of the stream at or below it counts as delivered (a
    /// stream is written in order on one connection). Only ever raised
    /// (`fetch_max`), by the transport.
    pub(crate) delivered: AtomicU64,
    /// Stream position (`index_in_stream`) of the event at `delivered`;
    /// raised with it. Only used to count what a refusal reports missing.
    pub(crate) delivered_index: AtomicU64,
    /// `ring_id` while the stream is open, 0 once it ended (ring ids start
    /// at 1): publish's one comparison for "a stream of this ring, not
    /// ended" (another ring's producer reads a value that is never its own
    /// id), and readers' "ended" (see [`StreamRecord::ended`]). Set to 0
    /// once, by the ring's producer, Release; read by readers, Acquire.
    pub(crate) open_in: AtomicU64,
}

impl StreamRecord {
    pub(crate) fn new(id: StreamId, ring_id: u64) -> Self {
        StreamRecord {
            id,
            ring_id,
            first: AtomicU64::new(0),
            high: AtomicU64::new(0),
            published: AtomicU64::new(0),
            delivered: AtomicU64::new(0),
            delivered_index: AtomicU64::new(0),
            open_in: AtomicU64::new(ring_id),
        }
    }

    /// Whether the stream ended (no more events): Acquire, so what the
    /// producer published on it before is visible.
    pub(crate) fn ended(&self) -> bool {
        self.open_in.load(Ordering::Acquire) == 0
    }

    /// Ends the stream (the producer of its ring only).
    pub(crate) fn end(&self) {
        self.open_in.store(0, Ordering::Release);
    }

    pub(crate) fn info(&self) -> StreamInfo {
        StreamInfo {
            id: self.id,
            first: Seq(self.first.load(Ordering::Acquire)),
            high: Seq(self.high.load(Ordering::Acquire)),
            published: self.published.load(Ordering::Acquire),
            delivered: Seq(self.delivered.load(Ordering::Acquire)),
            ended: self.ended(),
        }
    }

    pub(crate) fn mark_delivered(&self, seq: u64, index: u64) {
        // Raise the index first: a reader that sees the new `delivered`
        // also sees an index at least as new (it reads `delivered` first).
        self.delivered_index.fetch_max(index, Ordering::AcqRel);
        self.delivered.fetch_max(seq, Ordering::AcqRel);
    }
}

/// A handle to one stream of a ring, used to publish on it. Cloning it is
/// cheap; every clone names the same stream.
#[derive(Clone, Debug)]
pub struct StreamHandle {
    pub(crate) rec: Arc<StreamRecord>,
}

impl StreamHandle {
    /// The stream's id.
    pub fn id(&self) -> StreamId {
        self.rec.id
    }

    /// The stream's bookkeeping now.
    pub fn info(&self) -> StreamInfo {
        self.rec.info()
    }

    /// How many events were published on the stream (one atomic load).
    pub fn published(&self) -> u64 {
        self.rec.published.load(Ordering::Acquire)
    }

    /// Records that the transport delivered `event` (`docs/SPEC.md` §2, "delivered"):
    /// every event of this stream up to it now counts as delivered. Events of
    /// other streams are ignored (returns `false`).
    pub fn mark_delivered(&self, event: &Event) -> bool {
        if event.stream != self.rec.id {
            return false;
        }
        self.rec.mark_delivered(event.seq.0, event.index_in_stream);
        true
    }

    /// Records that every event published on this stream so far counts as
    /// delivered: for a transport that answered the stream's request another
    /// way (a JSON-only response) and will never send its events. Meant for
    /// a stream nobody publishes on any more; under a concurrent publish the
    /// newest event may be left out, never counted twice.
    pub fn mark_all_delivered(&self) {
        // `published` before `high`: the producer stores them in that order,
        // so the index read is never newer than the seq read.
        let index = self.rec.published.load(Ordering::Acquire);
        let high = self.rec.high.load(Ordering::Acquire);
        if high > 0 {
            self.rec.mark_delivered(high, index);
        }
    }
}

/// A point-in-time copy of a stream's bookkeeping.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamInfo {
    /// The stream.
    pub id: StreamId,
    /// Seq of its first event (`Seq(0)` while it has none).
    pub first: Seq,
    /// Seq of its last event, the high-water mark (`Seq(0)` while it has none).
    pub high: Seq,
    /// How many events were published on it.
    pub published: u64,
    /// Seq of the last event reported delivered; every earlier event of the
    /// stream counts as delivered.
    pub delivered: Seq,
    /// Whether the stream has ended (no more events will be published on it).
    pub ended: bool,
}
