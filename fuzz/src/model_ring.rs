//! The reference ring: a `VecDeque` of retained events plus the full history
//! of every event ever published (with its stream and payload) and of every
//! stream (with its delivered mark). Slow and obviously correct: eviction is
//! "pop the oldest while the new event would not fit".

use bytes::Bytes;
use std::collections::VecDeque;

/// One published event, as the model remembers it forever.
#[derive(Clone, Debug)]
pub struct MEvent {
    /// Session-global seq (1-based, dense).
    pub seq: u64,
    /// Stream id.
    pub stream: u64,
    /// 1-based position in its stream.
    pub index: u64,
    /// The exact `Bytes` handed to `publish` (pointer compared for zero-copy).
    pub payload: Bytes,
}

/// One stream, as the model sees it.
#[derive(Clone, Debug, Default)]
pub struct MStream {
    /// Seqs of its events, ascending.
    pub seqs: Vec<u64>,
    /// Ended (no more publishes).
    pub ended: bool,
    /// Seq of the highest event reported delivered (0: none).
    pub delivered: u64,
    /// Its position in the stream (0: none).
    pub delivered_index: u64,
    /// The engine dropped the record (observed; checked to be allowed).
    pub reclaimed: bool,
    /// `delivered` when the record was dropped (later marks through a
    /// handle reach only the orphaned record).
    pub delivered_at_reclaim: u64,
}

impl MStream {
    /// First seq (0 while empty).
    pub fn first(&self) -> u64 {
        self.seqs.first().copied().unwrap_or(0)
    }

    /// High-water seq (0 while empty).
    pub fn high(&self) -> u64 {
        self.seqs.last().copied().unwrap_or(0)
    }

    /// Whether the engine may reclaim the record: it ended and every event
    /// of it left the ring (`docs/SPEC.md` §3.6; `Reader::stream` docs).
    pub fn reclaimable(&self, oldest: u64) -> bool {
        self.ended && self.high() < oldest
    }

    /// Whether event `seq` of this stream counts as delivered.
    pub fn is_delivered(&self, seq: u64) -> bool {
        seq <= self.delivered
    }
}

/// Why the model refuses a publish (mirrors `gapless::PublishError`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MPublishError {
    /// Larger than the whole budget.
    TooLarge,
    /// The stream ended.
    Ended,
}

/// The reference ring.
#[derive(Debug)]
pub struct ModelRing {
    /// Event bound.
    pub capacity: usize,
    /// Payload byte bound.
    pub budget: usize,
    /// Retained seqs, oldest first.
    pub window: VecDeque<u64>,
    /// Payload bytes of `window`.
    pub bytes: usize,
    /// Every event ever published; `hist[seq - 1]`.
    pub hist: Vec<MEvent>,
    /// Every stream ever opened; `streams[id - 1]`.
    pub streams: Vec<MStream>,
}

impl ModelRing {
    /// An empty ring.
    pub fn new(capacity: usize, budget: usize) -> Self {
        ModelRing {
            capacity,
            budget,
            window: VecDeque::new(),
            bytes: 0,
            hist: Vec::new(),
            streams: Vec::new(),
        }
    }

    /// Newest seq (0 before the first).
    pub fn head(&self) -> u64 {
        self.hist.len() as u64
    }

    /// Oldest retained seq (`head + 1` when nothing is retained).
    pub fn oldest(&self) -> u64 {
        self.window.front().copied().unwrap_or(self.head() + 1)
    }

    /// Whether `seq` is retained.
    pub fn retained(&self, seq: u64) -> bool {
        seq >= 1 && seq <= self.head() && seq >= self.oldest()
    }

    /// The event `seq` (any published seq, retained or not).
    pub fn event(&self, seq: u64) -> &MEvent {
        &self.hist[(seq - 1) as usize]
    }

    /// The stream `id` (must be opened).
    pub fn stream(&self, id: u64) -> &MStream {
        &self.streams[(id - 1) as usize]
    }

    /// Mutable stream `id`.
    pub fn stream_mut(&mut self, id: u64) -> &mut MStream {
        &mut self.streams[(id - 1) as usize]
    }

    /// Opens a stream; returns its id.
    pub fn open(&mut self) -> u64 {
        self.streams.push(MStream::default());
        self.streams.len() as u64
    }

    /// The publish a refusal would come from, if any. When several apply,
    /// all are returned (the engine may report any of them).
    pub fn refusals(&self, stream: u64, len: usize) -> Vec<MPublishError> {
        let mut v = Vec::new();
        if self.stream(stream).ended {
            v.push(MPublishError::Ended);
        }
        if len > self.budget {
            v.push(MPublishError::TooLarge);
        }
        v
    }

    /// Publishes (the caller checked `refusals` is empty); returns the seq.
    pub fn publish(&mut self, stream: u64, payload: Bytes) -> u64 {
        let len = payload.len();
        debug_assert!(len <= self.budget && !self.stream(stream).ended);
        while self.window.len() >= self.capacity || self.bytes + len > self.budget {
            let s = self.window.pop_front().expect("a non-empty window when over a bound");
            self.bytes -= self.hist[(s - 1) as usize].payload.len();
        }
        let seq = self.head() + 1;
        let st = self.stream_mut(stream);
        st.seqs.push(seq);
        let index = st.seqs.len() as u64;
        self.hist.push(MEvent { seq, stream, index, payload });
        self.window.push_back(seq);
        self.bytes += len;
        seq
    }

    /// Records delivery of event `seq` (raises its stream's mark).
    pub fn deliver(&mut self, seq: u64) {
        let e = self.event(seq).clone();
        let st = self.stream_mut(e.stream);
        st.delivered = st.delivered.max(seq);
        st.delivered_index = st.delivered_index.max(e.index);
    }

    /// Seqs of `stream`'s events in `lo ..= hi`.
    pub fn stream_seqs_in(&self, stream: u64, lo: u64, hi: u64) -> Vec<u64> {
        self.stream(stream).seqs.iter().copied().filter(|&s| s >= lo && s <= hi).collect()
    }
}
