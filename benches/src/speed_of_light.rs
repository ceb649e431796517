//! The publish floor: what one producer writing the same records into a
//! preallocated array costs, with one Release store of the head per record,
//! dropping the record it overwrites. No readers, no eviction bookkeeping,
//! no chunk allocation: gapless's publish can only be slower than this.

use bytes::Bytes;
use gapless::{Seq, StreamId};
use std::sync::atomic::{AtomicU64, Ordering};

/// The record gapless stores per event (its seq is implied by the index).
#[derive(Debug)]
struct Record {
    stream: StreamId,
    index_in_stream: u64,
    prev_in_stream: u64,
    payload: Bytes,
}

/// A preallocated array of records and a published head.
#[derive(Debug)]
pub struct SpeedOfLight {
    cells: Box<[Option<Record>]>,
    mask: usize,
    /// Newest seq; written with one Release store per publish.
    head: AtomicU64,
    seq: u64,
    /// Per stream id: (events published, seq of the newest).
    per_stream: Vec<(u64, u64)>,
}

impl SpeedOfLight {
    /// An array of `capacity` (rounded up to a power of two) empty cells.
    pub fn new(capacity: usize) -> Self {
        let n = capacity.next_power_of_two();
        SpeedOfLight {
            cells: (0..n).map(|_| None).collect(),
            mask: n - 1,
            head: AtomicU64::new(0),
            seq: 0,
            per_stream: Vec::new(),
        }
    }

    /// Writes the next record and publishes it with a Release store.
    #[inline]
    pub fn publish(&mut self, stream: StreamId, payload: Bytes) -> Seq {
        let seq = self.write(stream, payload);
        self.head.store(seq, Ordering::Release);
        Seq(seq)
    }

    /// Like [`SpeedOfLight::publish`], but publishes with an AcqRel swap
    /// (what a producer that must see a reader's wake-up bit pays).
    #[inline]
    pub fn publish_swap(&mut self, stream: StreamId, payload: Bytes) -> Seq {
        let seq = self.write(stream, payload);
        std::hint::black_box(self.head.swap(seq, Ordering::AcqRel));
        Seq(seq)
    }

    #[inline(always)]
    fn write(&mut self, stream: StreamId, payload: Bytes) -> u64 {
        self.seq += 1;
        let seq = self.seq;
        let s = stream.0 as usize;
        if self.per_stream.len() <= s {
            self.per_stream.resize(s + 1, (0, 0));
        }
        let st = &mut self.per_stream[s];
        st.0 += 1;
        let rec = Record { stream, index_in_stream: st.0, prev_in_stream: st.1, payload };
        st.1 = seq;
        self.cells[(seq as usize) & self.mask] = Some(rec);
        seq
    }

    /// The newest published seq.
    pub fn head(&self) -> Seq {
        Seq(self.head.load(Ordering::Acquire))
    }

    /// The record in `seq`'s cell: (stream, index in stream, previous seq of
    /// the stream, payload).
    pub fn get(&self, seq: Seq) -> Option<(StreamId, u64, u64, &Bytes)> {
        let r = self.cells[(seq.0 as usize) & self.mask].as_ref()?;
        Some((r.stream, r.index_in_stream, r.prev_in_stream, &r.payload))
    }
}
