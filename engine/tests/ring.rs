//! Single-threaded properties of the ring, through the public API only.
//!
//! Each test checks one property and compares against a plain model where
//! one fits (a `VecDeque` ring with the same two bounds). Sizes shrink under
//! Miri (`cfg!(miri)`), which runs this file too (`scripts/miri.sh`).

mod support;
use bytes::Bytes;
use gapless::ring::{
    ring, ConfigError, Coverage, Cursor, Lagged, Missing, Next, NextBatch, Producer, PublishError, Reader,
    RingConfig, SnapshotError, StreamHandle, MAX_CAPACITY,
};
use gapless::{Seq, StreamId};
use std::collections::VecDeque;
use support::Rng;

// ---------------------------------------------------------------- helpers

/// Scales an iteration count down under Miri.
fn iters(native: u64, miri: u64) -> u64 {
    if cfg!(miri) {
        miri
    } else {
        native
    }
}

/// A payload that names its seq (8 little-endian bytes), padded to `len`
/// (at least 8).
fn payload(seq: u64, len: usize) -> Bytes {
    let mut v = seq.to_le_bytes().to_vec();
    v.resize(len.max(8), (seq % 251) as u8);
    Bytes::from(v)
}

fn cfg(capacity: usize, byte_budget: usize, chunk_events: usize) -> RingConfig {
    RingConfig { capacity, byte_budget, chunk_events }
}

fn new_ring(config: RingConfig) -> (Producer, Reader) {
    ring(config).expect("valid config")
}

/// Publishes `n` events of 8 bytes (the seq) on `s`; returns their seqs.
fn publish_n(p: &mut Producer, s: &StreamHandle, n: u64) -> Vec<Seq> {
    (0..n)
        .map(|_| {
            let seq = p.head().0 + 1;
            p.publish(s, payload(seq, 8)).expect("publish")
        })
        .collect()
}

/// Every retained event, as `(seq, stream, payload)`, read through a
/// whole-ring snapshot after `oldest - 1`.
fn retained(r: &Reader) -> Vec<(u64, StreamId, Bytes)> {
    let snap = r.snapshot(Seq(r.oldest().0 - 1)).expect("retained window is covered");
    snap.iter().map(|e| (e.seq.0, e.stream, e.payload.clone())).collect()
}

/// The obviously-correct model: a deque with both bounds.
struct Model {
    capacity: usize,
    budget: usize,
    events: VecDeque<(u64, StreamId, Bytes)>,
    bytes: usize,
    /// Payload bytes of every event evicted.
    evicted: u64,
    head: u64,
}

impl Model {
    fn new(c: RingConfig) -> Self {
        Model {
            capacity: c.capacity,
            budget: c.byte_budget,
            events: VecDeque::new(),
            bytes: 0,
            evicted: 0,
            head: 0,
        }
    }

    fn publish(&mut self, stream: StreamId, p: Bytes) -> u64 {
        while self.events.len() >= self.capacity || self.bytes + p.len() > self.budget {
            let (_, _, old) = self.events.pop_front().expect("model: a payload never exceeds the budget");
            self.bytes -= old.len();
            self.evicted += old.len() as u64;
        }
        self.head += 1;
        self.bytes += p.len();
        self.events.push_back((self.head, stream, p));
        self.head
    }

    fn oldest(&self) -> u64 {
        self.events.front().map_or(self.head + 1, |e| e.0)
    }

    /// Checks the ring against the model: window, bytes, every event.
    fn check(&self, p: &Producer, r: &Reader) {
        assert_eq!(r.head(), Seq(self.head), "head");
        assert_eq!(p.head(), Seq(self.head), "producer head");
        assert_eq!(r.oldest(), Seq(self.oldest()), "oldest");
        assert_eq!(p.oldest(), Seq(self.oldest()), "producer oldest");
        assert_eq!(p.retained_bytes(), self.bytes, "retained bytes");
        assert_eq!(p.evicted_bytes(), self.evicted, "evicted bytes");
        assert!(r.evicted_bytes() <= self.evicted, "a reader's figure trails at most");
        let got = retained(r);
        assert_eq!(got.len(), self.events.len(), "retained count at head {}", self.head);
        for (g, m) in got.iter().zip(&self.events) {
            assert_eq!(g, m, "retained event at head {}", self.head);
        }
    }
}

// ------------------------------------------------------------ seqs, coverage

#[test]
fn seqs_are_dense_from_one_and_returned_by_publish() {
    let (mut p, r) = new_ring(RingConfig::new(8, 1 << 20));
    let s = p.open_stream();
    assert_eq!(r.head(), Seq(0));
    assert_eq!(r.oldest(), Seq(1), "empty ring: oldest is head + 1");
    for expected in 1..=100u64 {
        let seq = p.publish(&s, payload(expected, 8)).unwrap();
        assert_eq!(seq, Seq(expected));
        assert_eq!(r.head(), seq);
        assert_eq!(p.head(), seq);
    }
}

#[test]
fn coverage_on_an_empty_ring() {
    let (_p, r) = new_ring(RingConfig::new(8, 1 << 20));
    assert_eq!(r.coverage(Seq(0)), Coverage::Covered, "nothing published, nothing missing");
    assert_eq!(r.coverage(Seq(1)), Coverage::Ahead { head: Seq(0) });
    assert_eq!(r.coverage(Seq(u64::MAX)), Coverage::Ahead { head: Seq(0) });
}

#[test]
fn coverage_before_any_eviction() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 8);
    for c in 0..=8 {
        assert_eq!(r.coverage(Seq(c)), Coverage::Covered, "cursor {c}");
    }
    assert_eq!(r.coverage(Seq(9)), Coverage::Ahead { head: Seq(8) });
}

#[test]
fn coverage_edges_after_eviction() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 20); // retained 13..=20
    assert_eq!(r.oldest(), Seq(13));
    assert_eq!(r.coverage(Seq(0)), Coverage::Evicted { oldest: Seq(13), missing: 12 });
    assert_eq!(r.coverage(Seq(20)), Coverage::Covered, "cursor == head");
    assert_eq!(r.coverage(Seq(21)), Coverage::Ahead { head: Seq(20) }, "head + 1");
    assert_eq!(r.coverage(Seq(u64::MAX)), Coverage::Ahead { head: Seq(20) });
    assert_eq!(r.coverage(Seq(12)), Coverage::Covered, "oldest - 1: the gap starts at oldest");
    assert_eq!(r.coverage(Seq(11)), Coverage::Evicted { oldest: Seq(13), missing: 1 }, "oldest - 2");
}

// ------------------------------------------------------------ wraparound

#[test]
fn wraparound_many_times_matches_model() {
    let config = cfg(8, 1 << 20, 4);
    let (mut p, r) = new_ring(config);
    let s = p.open_stream();
    let mut model = Model::new(config);
    for _ in 0..iters(10_000, 300) {
        let seq = model.head + 1;
        let pl = payload(seq, 8 + (seq % 5) as usize);
        assert_eq!(p.publish(&s, pl.clone()).unwrap().0, model.publish(s.id(), pl));
        model.check(&p, &r);
    }
    // Readers' figure of the evicted bytes is exact once the producer goes.
    drop(p);
    assert_eq!(r.evicted_bytes(), model.evicted);
}

#[test]
fn wraparound_other_geometries_match_model() {
    // Chunk sizes >= 2 (chunk size 1 has its own test), capacities that are
    // and are not multiples of the chunk. Each run reuses every slot at
    // least once (twice natively); Miri skips the big geometries.
    for (capacity, chunk) in
        [(2usize, 2usize), (3, 2), (5, 4), (7, 8), (16, 4), (17, 16), (64, 64), (100, 64)]
    {
        if cfg!(miri) && capacity > 17 {
            continue;
        }
        let slots = (capacity.div_ceil(chunk) + 1).next_power_of_two() as u64;
        let lap = slots * chunk as u64;
        let n = iters((2 * lap).max(12 * capacity as u64), lap + chunk as u64 + 1);
        let config = cfg(capacity, 1 << 20, chunk);
        let (mut p, r) = new_ring(config);
        let s = p.open_stream();
        let mut model = Model::new(config);
        for _ in 0..n {
            let seq = model.head + 1;
            let pl = payload(seq, 8);
            assert_eq!(p.publish(&s, pl.clone()).unwrap().0, model.publish(s.id(), pl));
            model.check(&p, &r);
        }
    }
}

#[test]
fn chunk_size_one_snapshot_yields_the_right_events() {
    let (mut p, r) = new_ring(cfg(4, 1 << 20, 1));
    let s = p.open_stream();
    publish_n(&mut p, &s, 4);
    let snap = r.snapshot(Seq(0)).expect("all four retained");
    let seqs: Vec<u64> =
        snap.iter().map(|e| u64::from_le_bytes(e.payload[..8].try_into().unwrap())).collect();
    assert_eq!(seqs, [1, 2, 3, 4], "payload of each snapshot event names its own seq");
}

#[test]
fn capacity_one_ring_snapshots_its_retained_event() {
    // `RingConfig::new(1, _)` picks one event per chunk.
    let (mut p, r) = new_ring(RingConfig::new(1, 1 << 20));
    let s = p.open_stream();
    publish_n(&mut p, &s, 2); // retained: 2
    assert_eq!(r.coverage(Seq(1)), Coverage::Covered);
    let snap = r.snapshot(Seq(1)).expect("seq 2 is retained");
    assert_eq!(snap.iter().map(|e| e.seq).collect::<Vec<_>>(), [Seq(2)]);
}

// ------------------------------------------------------------ byte budget

#[test]
fn byte_budget_eviction_with_mixed_sizes_matches_model() {
    let mut rng = Rng(7);
    let config = cfg(32, 300, 4);
    let (mut p, r) = new_ring(config);
    let streams = [p.open_stream(), p.open_stream()];
    let mut model = Model::new(config);
    for _ in 0..iters(5_000, 200) {
        let seq = model.head + 1;
        let len = match rng.below(10) {
            0 => 300,                           // exactly the budget
            1 => 200 + rng.below(100) as usize, // most of it
            _ => 8 + rng.below(40) as usize,    // small
        };
        let s = &streams[rng.below(2) as usize];
        let pl = payload(seq, len);
        assert_eq!(p.publish(s, pl.clone()).unwrap().0, model.publish(s.id(), pl));
        model.check(&p, &r);
        assert!(p.retained_bytes() <= config.byte_budget);
    }
}

#[test]
fn payload_larger_than_budget_is_refused_and_ring_unchanged() {
    let (mut p, r) = new_ring(cfg(8, 100, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 11); // retained 4..=11, 64 bytes
    let before = (r.head(), r.oldest(), p.retained_bytes(), retained(&r), s.info());
    assert_eq!(
        p.publish(&s, Bytes::from(vec![0u8; 101])),
        Err(PublishError::PayloadTooLarge { len: 101, budget: 100 })
    );
    let after = (r.head(), r.oldest(), p.retained_bytes(), retained(&r), s.info());
    assert_eq!(before, after);
    // The next publish still gets the next seq.
    assert_eq!(p.publish(&s, payload(12, 8)).unwrap(), Seq(12));
}

#[test]
fn payload_of_exactly_the_budget_evicts_everything_else() {
    let (mut p, r) = new_ring(cfg(8, 100, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 5);
    let seq = p.publish(&s, payload(6, 100)).unwrap();
    assert_eq!(seq, Seq(6));
    assert_eq!(r.oldest(), Seq(6));
    assert_eq!(p.retained_bytes(), 100);
    assert_eq!(r.coverage(Seq(5)), Coverage::Covered);
    assert_eq!(r.coverage(Seq(4)), Coverage::Evicted { oldest: Seq(6), missing: 1 });
    let ev = retained(&r);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0].2, payload(6, 100));
    // And the next small one evicts it again.
    p.publish(&s, payload(7, 8)).unwrap();
    assert_eq!(r.oldest(), Seq(7));
    assert_eq!(p.retained_bytes(), 8);
}

#[test]
fn empty_payloads_are_retained_and_cost_no_bytes() {
    let (mut p, r) = new_ring(cfg(8, 1, 4));
    let s = p.open_stream();
    for i in 1..=8u64 {
        assert_eq!(p.publish(&s, Bytes::new()).unwrap(), Seq(i));
    }
    assert_eq!(p.retained_bytes(), 0);
    assert_eq!(r.oldest(), Seq(1), "eight priming events fit a one-byte budget");
    let snap = r.snapshot(Seq(0)).unwrap();
    assert_eq!(snap.len(), 8);
    assert!(snap.iter().all(|e| e.payload.is_empty()));
}

#[test]
fn empty_payloads_wrap_around() {
    // Priming events are ordinary events: a ring of them evicts by capacity
    // like any other.
    let config = cfg(4, 64, 2);
    let (mut p, r) = new_ring(config);
    let s = p.open_stream();
    let mut model = Model::new(config);
    for _ in 0..iters(100, 20) {
        assert_eq!(p.publish(&s, Bytes::new()).unwrap().0, model.publish(s.id(), Bytes::new()));
        model.check(&p, &r);
    }
}

#[test]
fn empty_payload_after_nonempty_ones_wraps_around() {
    // The crate-level doc example's shape: 1-byte events, then priming ones
    // that lap them.
    let (mut p, r) = new_ring(RingConfig::new(4, 1 << 20));
    let s = p.open_stream();
    for i in 0..6u8 {
        p.publish(&s, Bytes::from(vec![i])).unwrap();
    }
    for _ in 0..10 {
        p.publish(&s, Bytes::new()).unwrap();
    }
    assert_eq!(r.head(), Seq(16));
    assert_eq!(r.oldest(), Seq(13));
    assert_eq!(p.retained_bytes(), 0);
}

// ------------------------------------------------------------ bad config

#[test]
fn config_capacity_zero_is_refused() {
    assert_eq!(
        ring(RingConfig::new(0, 1024)).unwrap_err(),
        ConfigError::Capacity { capacity: 0, max: MAX_CAPACITY }
    );
    assert_eq!(ring(cfg(0, 1024, 4)).unwrap_err(), ConfigError::Capacity { capacity: 0, max: MAX_CAPACITY });
}

#[test]
fn config_capacity_above_max_is_refused() {
    assert_eq!(
        ring(RingConfig::new(MAX_CAPACITY + 1, 1024)).unwrap_err(),
        ConfigError::Capacity { capacity: MAX_CAPACITY + 1, max: MAX_CAPACITY }
    );
}

#[test]
fn config_byte_budget_zero_is_refused() {
    assert_eq!(ring(RingConfig::new(8, 0)).unwrap_err(), ConfigError::ByteBudget { byte_budget: 0 });
}

#[test]
fn config_chunk_not_power_of_two_is_refused() {
    for chunk_events in [0, 3, 6, 100, (1 << 16) + 1, 1 << 17] {
        assert_eq!(ring(cfg(8, 1024, chunk_events)).unwrap_err(), ConfigError::ChunkEvents { chunk_events });
    }
}

#[test]
fn config_smallest_valid_rings_work() {
    // The largest chunk (65 536 cells) is slow to build under Miri.
    let largest_chunk = if cfg!(miri) { 1 << 8 } else { 1 << 16 };
    for config in [cfg(1, 1, 1), cfg(1, 1, largest_chunk), RingConfig::new(1, 1), RingConfig::new(3, 1)] {
        let (mut p, r) = ring(config).unwrap_or_else(|e| panic!("{config:?}: {e}"));
        let s = p.open_stream();
        for i in 1..=3u64 {
            assert_eq!(p.publish(&s, Bytes::from_static(b"x")).unwrap(), Seq(i));
        }
        assert_eq!(r.oldest(), Seq(3), "{config:?}");
        assert_eq!(r.coverage(Seq(2)), Coverage::Covered);
    }
}

#[test]
fn config_new_picks_a_valid_chunk_size() {
    for capacity in [1, 2, 3, 5, 63, 64, 65, 1000, 4096] {
        let c = RingConfig::new(capacity, 1024);
        assert!(c.chunk_events.is_power_of_two() && c.chunk_events <= 64, "{c:?}");
        assert!(ring(c).is_ok(), "{c:?}");
    }
}

// ------------------------------------------------------------ cursors

#[test]
fn stalled_cursor_gets_lagged_with_the_right_numbers() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 3);
    let mut c = r.cursor(Seq(1));
    for i in 1..=3 {
        assert!(matches!(c.try_next(), Ok(Next::Event(e)) if e.seq == Seq(i)));
    }
    publish_n(&mut p, &s, 20); // head 23, retained 16..=23
    let lag = Lagged { wanted: Seq(4), oldest: Seq(16) };
    assert_eq!(c.try_next(), Err(lag));
    assert_eq!(c.try_next(), Err(lag), "a lagged cursor stays lagged until it seeks");
    assert_eq!(c.position(), Seq(4));
    c.seek(Seq(16));
    for i in 16..=23 {
        assert!(matches!(c.try_next(), Ok(Next::Event(e)) if e.seq == Seq(i)));
    }
    assert_eq!(c.try_next(), Ok(Next::Pending));
}

#[test]
fn cursor_lagged_inside_its_cached_chunk() {
    // The cursor holds chunk 5..=8 and wants 6; eviction reaches 7 without
    // removing that chunk from the ring.
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 5);
    let mut c = r.cursor(Seq(1));
    for _ in 0..5 {
        assert!(matches!(c.try_next(), Ok(Next::Event(_))));
    }
    publish_n(&mut p, &s, 9); // head 14, retained 7..=14
    assert_eq!(c.try_next(), Err(Lagged { wanted: Seq(6), oldest: Seq(7) }));
}

#[test]
fn cursor_from_an_evicted_seq_is_lagged_not_skipped() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 30);
    let mut c = r.cursor(Seq(0));
    assert_eq!(c.position(), Seq(1), "Seq(0) means from the first event");
    assert_eq!(c.try_next(), Err(Lagged { wanted: Seq(1), oldest: Seq(23) }));
}

#[test]
fn cursor_that_keeps_up_sees_every_seq() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    let mut c = r.cursor(Seq(1));
    let mut rng = Rng(3);
    let mut next = 1u64;
    for _ in 0..iters(2_000, 100) {
        // Publish a burst that fits the ring, then drain it.
        let burst = 1 + rng.below(8);
        publish_n(&mut p, &s, burst);
        loop {
            match c.try_next() {
                Ok(Next::Event(e)) => {
                    assert_eq!(e.seq, Seq(next));
                    assert_eq!(e.payload, payload(next, 8));
                    next += 1;
                }
                Ok(Next::Pending) => break,
                other => panic!("unexpected {other:?}"),
            }
        }
        assert_eq!(next, p.head().0 + 1);
    }
}

#[test]
fn whole_ring_cursor_ends_after_producer_dropped() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 3);
    let mut c = r.cursor(Seq(1));
    assert!(matches!(c.try_next(), Ok(Next::Event(e)) if e.seq == Seq(1)));
    assert!(!r.is_closed());
    drop(p);
    assert!(r.is_closed());
    assert!(
        matches!(c.try_next(), Ok(Next::Event(e)) if e.seq == Seq(2)),
        "events before the close still come"
    );
    assert!(matches!(c.try_next(), Ok(Next::Event(e)) if e.seq == Seq(3)));
    assert_eq!(c.try_next(), Ok(Next::End));
    assert_eq!(c.try_next(), Ok(Next::End));
}

#[test]
fn whole_ring_cursor_is_pending_while_producer_lives() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    let mut c = r.cursor(Seq(1));
    assert_eq!(c.try_next(), Ok(Next::Pending));
    publish_n(&mut p, &s, 1);
    assert!(matches!(c.try_next(), Ok(Next::Event(_))));
    assert_eq!(c.try_next(), Ok(Next::Pending));
}

// ------------------------------------------------------------ snapshots

#[test]
fn snapshot_survives_two_laps() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 10); // retained 3..=10
    let snap = r.snapshot(Seq(4)).unwrap();
    assert_eq!(snap.first(), Some(Seq(5)));
    assert_eq!(snap.last(), Some(Seq(10)));
    assert_eq!(snap.len(), 6);
    assert!(!snap.is_empty());
    assert_eq!(snap.covered_to(), Seq(10));
    publish_n(&mut p, &s, 16); // two laps of capacity 8: head 26, retained 19..=26
    assert_eq!(r.coverage(Seq(4)), Coverage::Evicted { oldest: Seq(19), missing: 14 });
    let got: Vec<(Seq, Bytes)> = snap.iter().map(|e| (e.seq, e.payload.clone())).collect();
    let want: Vec<(Seq, Bytes)> = (5..=10).map(|i| (Seq(i), payload(i, 8))).collect();
    assert_eq!(got, want);
    assert_eq!((snap.first(), snap.last(), snap.len()), (Some(Seq(5)), Some(Seq(10)), 6));
    // A clone pins too, after the original is gone.
    let clone = snap.clone();
    drop(snap);
    publish_n(&mut p, &s, 16);
    assert_eq!(
        clone.iter().map(|e| e.payload.clone()).collect::<Vec<_>>(),
        want.iter().map(|w| w.1.clone()).collect::<Vec<_>>()
    );
}

#[test]
fn snapshot_of_an_evicted_cursor_is_refused_with_numbers() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 20); // retained 13..=20
    assert_eq!(
        r.snapshot(Seq(0)).unwrap_err(),
        SnapshotError::Evicted { wanted: Seq(1), oldest: Seq(13), missing: Missing::Exact(12) }
    );
    assert_eq!(
        r.snapshot(Seq(11)).unwrap_err(),
        SnapshotError::Evicted { wanted: Seq(12), oldest: Seq(13), missing: Missing::Exact(1) }
    );
    assert!(r.snapshot(Seq(12)).is_ok(), "oldest - 1 is covered");
}

#[test]
fn snapshot_at_head_is_empty() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    let empty = r.snapshot(Seq(0)).unwrap();
    assert!(empty.is_empty() && empty.first().is_none() && empty.last().is_none());
    assert_eq!(empty.len(), 0);
    publish_n(&mut p, &s, 12);
    let snap = r.snapshot(Seq(12)).unwrap();
    assert!(snap.is_empty());
    assert_eq!(snap.len(), 0);
    assert_eq!(snap.iter().count(), 0);
    assert_eq!((snap.first(), snap.last()), (None, None));
    assert_eq!(snap.covered_to(), Seq(12));
}

#[test]
fn snapshot_ahead_of_head_is_refused() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    assert_eq!(r.snapshot(Seq(1)).unwrap_err(), SnapshotError::Ahead { head: Seq(0) });
    publish_n(&mut p, &s, 5);
    assert_eq!(r.snapshot(Seq(6)).unwrap_err(), SnapshotError::Ahead { head: Seq(5) });
    assert_eq!(r.snapshot(Seq(u64::MAX)).unwrap_err(), SnapshotError::Ahead { head: Seq(5) });
}

#[test]
fn snapshot_spanning_many_chunks_is_exact() {
    let (mut p, r) = new_ring(cfg(100, 1 << 20, 8));
    let s = p.open_stream();
    publish_n(&mut p, &s, 250); // retained 151..=250
    for after in [150, 151, 155, 159, 160, 199, 249] {
        let snap = r.snapshot(Seq(after)).unwrap();
        let seqs: Vec<u64> = snap.iter().map(|e| e.seq.0).collect();
        assert_eq!(seqs, (after + 1..=250).collect::<Vec<_>>(), "after {after}");
        assert!(snap.iter().all(|e| *e.payload == payload(e.seq.0, 8)));
        assert_eq!(snap.len(), (250 - after) as usize);
    }
}

// ------------------------------------------------------------ stream snapshots

#[test]
fn stream_snapshot_yields_only_that_stream() {
    let (mut p, r) = new_ring(cfg(64, 1 << 20, 8));
    let (a, b) = (p.open_stream(), p.open_stream());
    for i in 1..=30u64 {
        let s = if i % 3 == 0 { &a } else { &b };
        p.publish(s, payload(i, 8)).unwrap();
    }
    let snap = r.snapshot_stream(a.id(), Seq(4)).unwrap();
    assert_eq!(snap.stream(), Some(a.id()));
    let seqs: Vec<u64> = snap.iter().map(|e| e.seq.0).collect();
    assert_eq!(seqs, (6..=30).step_by(3).collect::<Vec<_>>());
    assert!(snap.iter().all(|e| e.stream == a.id() && *e.payload == payload(e.seq.0, 8)));
    let idx: Vec<u64> = snap.iter().map(|e| e.index_in_stream).collect();
    assert_eq!(idx, (2..=10).collect::<Vec<_>>());
    assert_eq!((snap.first(), snap.last(), snap.len()), (Some(Seq(6)), Some(Seq(30)), 9));
    assert_eq!(snap.covered_to(), Seq(30));
}

#[test]
fn stream_snapshot_ignores_evicted_events_of_other_streams() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    p.publish(&a, payload(1, 8)).unwrap(); // a: 1
    for i in 2..=9 {
        p.publish(&b, payload(i, 8)).unwrap(); // b: 2..=9
    }
    p.publish(&a, payload(10, 8)).unwrap(); // a: 10; retained 3..=10
    assert_eq!(r.oldest(), Seq(3));
    let snap = r.snapshot_stream(a.id(), Seq(1)).expect("only b's events after 1 were evicted");
    assert_eq!(snap.iter().map(|e| e.seq).collect::<Vec<_>>(), [Seq(10)]);
    // Nothing of `a` retained after the cursor, and nothing of it lost.
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    p.publish(&a, payload(1, 8)).unwrap();
    for i in 2..=12 {
        p.publish(&b, payload(i, 8)).unwrap();
    }
    let snap = r.snapshot_stream(a.id(), Seq(1)).expect("a has nothing after 1");
    assert!(snap.is_empty());
}

#[test]
fn stream_snapshot_fails_when_an_event_of_its_stream_was_evicted() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    p.publish(&a, payload(1, 8)).unwrap();
    p.publish(&a, payload(2, 8)).unwrap(); // lost below
    for i in 3..=9 {
        p.publish(&b, payload(i, 8)).unwrap();
    }
    p.publish(&a, payload(10, 8)).unwrap(); // retained 3..=10
    match r.snapshot_stream(a.id(), Seq(1)) {
        Err(SnapshotError::Evicted { wanted, oldest, missing }) => {
            assert_eq!((wanted, oldest), (Seq(2), Seq(3)));
            // Nothing was delivered: the cursor is above the delivered mark,
            // so its position in the stream is unknown and 1 is a bound.
            assert_eq!(missing, Missing::AtLeast(1));
        }
        other => panic!("expected Evicted, got {other:?}"),
    }
    // From seq 2 on, nothing of `a` is missing.
    let snap = r.snapshot_stream(a.id(), Seq(2)).unwrap();
    assert_eq!(snap.iter().map(|e| e.seq).collect::<Vec<_>>(), [Seq(10)]);
}

#[test]
fn stream_snapshot_missing_is_exact_at_the_delivered_mark() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    for i in 1..=5 {
        p.publish(&a, payload(i, 8)).unwrap(); // a: 1..=5
    }
    let mut c = r.stream_cursor(a.id(), Seq(1)).unwrap();
    for _ in 0..2 {
        let Ok(Next::Event(e)) = c.try_next() else { panic!() };
        assert!(r.mark_delivered(&e));
    }
    for i in 6..=13 {
        p.publish(&b, payload(i, 8)).unwrap(); // retained 6..=13: a's 3, 4, 5 lost
    }
    assert_eq!(
        r.snapshot_stream(a.id(), Seq(2)).unwrap_err(),
        SnapshotError::Evicted { wanted: Seq(3), oldest: Seq(6), missing: Missing::Exact(3) }
    );
}

#[test]
fn stream_snapshot_missing_never_overcounts() {
    // SnapshotError::Evicted::missing is documented as exact at the delivered
    // mark and "otherwise a lower bound". With nothing marked delivered and
    // the cursor at a's 2nd event, only a's 3rd event is gone after it.
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    for i in 1..=3 {
        p.publish(&a, payload(i, 8)).unwrap();
    }
    for i in 4..=11 {
        p.publish(&b, payload(i, 8)).unwrap(); // retained 4..=11
    }
    match r.snapshot_stream(a.id(), Seq(2)) {
        Err(SnapshotError::Evicted { wanted, oldest, missing }) => {
            assert_eq!((wanted, oldest), (Seq(3), Seq(4)));
            assert_eq!(missing.count(), 1, "one event of `a` (seq 3) follows the cursor and was evicted");
            assert_eq!(missing, Missing::AtLeast(1), "above the delivered mark: a bound, not exact");
        }
        other => panic!("expected Evicted, got {other:?}"),
    }
}

#[test]
fn stream_snapshot_of_an_unknown_stream_is_refused() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    publish_n(&mut p, &s, 3);
    assert_eq!(
        r.snapshot_stream(StreamId(99), Seq(0)).unwrap_err(),
        SnapshotError::UnknownStream { stream: StreamId(99) }
    );
    assert_eq!(
        r.snapshot_stream(StreamId(0), Seq(0)).unwrap_err(),
        SnapshotError::UnknownStream { stream: StreamId(0) }
    );
}

#[test]
fn stream_snapshot_ahead_and_at_head() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    publish_n(&mut p, &a, 2);
    publish_n(&mut p, &b, 2);
    assert_eq!(r.snapshot_stream(a.id(), Seq(5)).unwrap_err(), SnapshotError::Ahead { head: Seq(4) });
    let snap = r.snapshot_stream(a.id(), Seq(2)).unwrap();
    assert!(snap.is_empty(), "a's high-water mark: nothing to replay");
    assert!(r.snapshot_stream(a.id(), Seq(4)).unwrap().is_empty());
}

#[test]
fn stream_snapshot_pins_across_laps() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    for i in 1..=8u64 {
        p.publish(if i % 2 == 0 { &a } else { &b }, payload(i, 8)).unwrap();
    }
    let snap = r.snapshot_stream(a.id(), Seq(0)).unwrap();
    publish_n(&mut p, &b, 24);
    let got: Vec<(u64, Bytes)> = snap.iter().map(|e| (e.seq.0, e.payload.clone())).collect();
    assert_eq!(got, [2, 4, 6, 8].map(|i| (i, payload(i, 8))));
}

// ------------------------------------------------------------ stream bookkeeping

#[test]
fn stream_info_tracks_first_high_published() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    assert_eq!((a.id(), b.id()), (StreamId(1), StreamId(2)));
    assert_eq!(r.streams_opened(), 2);
    let fresh = r.stream(a.id()).unwrap();
    assert_eq!(
        (fresh.first, fresh.high, fresh.published, fresh.delivered, fresh.ended),
        (Seq(0), Seq(0), 0, Seq(0), false)
    );
    for i in 1..=20u64 {
        p.publish(if i % 4 == 0 { &a } else { &b }, payload(i, 8)).unwrap();
    }
    let ia = r.stream(a.id()).unwrap();
    assert_eq!((ia.id, ia.first, ia.high, ia.published, ia.ended), (a.id(), Seq(4), Seq(20), 5, false));
    let ib = r.stream(b.id()).unwrap();
    assert_eq!((ib.first, ib.high, ib.published), (Seq(1), Seq(19), 15));
    assert_eq!(a.info(), ia, "handle and reader agree");
}

#[test]
fn mark_delivered_raises_and_never_lowers() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    for i in 1..=6u64 {
        p.publish(if i % 2 == 0 { &a } else { &b }, payload(i, 8)).unwrap();
    }
    let mut c = r.stream_cursor(a.id(), Seq(0)).unwrap();
    let mut evs = Vec::new();
    while let Ok(Next::Event(e)) = c.try_next() {
        evs.push(e);
    }
    assert_eq!(evs.iter().map(|e| e.seq.0).collect::<Vec<_>>(), [2, 4, 6]);
    assert!(r.mark_delivered(&evs[1]));
    assert_eq!(r.stream(a.id()).unwrap().delivered, Seq(4));
    assert!(a.mark_delivered(&evs[0]));
    assert_eq!(r.stream(a.id()).unwrap().delivered, Seq(4), "delivered never goes down");
    assert!(a.mark_delivered(&evs[2]));
    assert_eq!(a.info().delivered, Seq(6));
    assert_eq!(r.stream(b.id()).unwrap().delivered, Seq(0), "other streams untouched");
    assert!(!b.mark_delivered(&evs[2]), "a handle ignores another stream's event");
    assert_eq!(r.stream(b.id()).unwrap().delivered, Seq(0));
}

#[test]
fn publish_after_end_stream_is_refused() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    publish_n(&mut p, &a, 2);
    p.end_stream(&a);
    p.end_stream(&a); // idempotent
    assert!(r.stream(a.id()).unwrap().ended);
    assert!(a.clone().info().ended);
    assert_eq!(p.publish(&a, payload(3, 8)), Err(PublishError::StreamEnded { stream: a.id() }));
    assert_eq!(r.head(), Seq(2), "refused publish left the ring unchanged");
    assert_eq!(p.publish(&b, payload(3, 8)), Ok(Seq(3)), "other streams go on");
    assert!(!r.stream(b.id()).unwrap().ended);
}

#[test]
fn foreign_stream_handle_is_refused() {
    let (mut p1, r1) = new_ring(cfg(8, 1 << 20, 4));
    let (mut p2, _r2) = new_ring(cfg(8, 1 << 20, 4));
    let _own = p1.open_stream();
    let foreign = p2.open_stream();
    assert_eq!(
        p1.publish(&foreign, payload(1, 8)),
        Err(PublishError::ForeignStream { stream: foreign.id() })
    );
    assert_eq!(r1.head(), Seq(0));
    assert_eq!(foreign.info().published, 0);
    // Ended in its own ring, it is still another ring's stream here.
    p2.end_stream(&foreign);
    assert_eq!(
        p1.publish(&foreign, payload(1, 8)),
        Err(PublishError::ForeignStream { stream: foreign.id() })
    );
    assert_eq!(p2.publish(&foreign, payload(1, 8)), Err(PublishError::StreamEnded { stream: foreign.id() }));
}

#[test]
fn end_stream_with_a_foreign_handle_changes_nothing() {
    let (mut p1, r1) = new_ring(cfg(8, 1 << 20, 4));
    let (mut p2, _r2) = new_ring(cfg(8, 1 << 20, 4));
    let own = p1.open_stream(); // StreamId(1) of ring 1
    let foreign = p2.open_stream(); // StreamId(1) of ring 2
    assert_eq!(own.id(), foreign.id());
    p1.end_stream(&foreign);
    assert!(!foreign.info().ended);
    assert!(!r1.stream(own.id()).unwrap().ended);
    assert_eq!(p2.publish(&foreign, payload(1, 8)), Ok(Seq(1)));
}

#[test]
fn ended_stream_records_are_reclaimed_and_directory_stays_bounded() {
    let (mut p, r) = new_ring(RingConfig::new(16, 1 << 20));
    // Opened first, never ended: its only event is evicted long before the
    // end, but an open stream's record must stay.
    let long_lived = p.open_stream();
    p.publish(&long_lived, payload(1, 8)).unwrap();
    let n = iters(10_000, 200);
    let mut max_live = 0usize;
    for i in 0..n {
        let s = p.open_stream();
        let seq = p.publish(&s, payload(p.head().0 + 1, 8)).unwrap();
        deliver(&s, seq);
        p.end_stream(&s);
        if i % 97 == 0 || i == n - 1 {
            let live = (1..=r.streams_opened()).filter(|&id| r.stream(StreamId(id)).is_some()).count();
            max_live = max_live.max(live);
        }
    }
    assert_eq!(r.streams_opened(), n + 1);
    assert!(max_live <= 64, "directory grew to {max_live} records with 16 retained events");
    let old_gone = (2..=n / 2).filter(|&id| r.stream(StreamId(id)).is_none()).count() as u64;
    assert!(
        old_gone >= (n / 2 - 1).saturating_sub(64),
        "only {old_gone} of the oldest {} ended records reclaimed",
        n / 2 - 1
    );
    // Kept: the open stream, and the ended streams whose events are retained.
    let info = r.stream(long_lived.id()).expect("open stream kept");
    assert_eq!((info.published, info.ended), (1, false));
    let oldest = r.oldest().0;
    for id in 2..=n + 1 {
        let high = id; // stream `id` published exactly seq `id`
        if high >= oldest {
            let i = r.stream(StreamId(id)).unwrap_or_else(|| panic!("stream {id} still has retained events"));
            assert!(i.ended && i.high == Seq(high));
        }
    }
}

#[test]
fn reclaimed_stream_is_unknown_to_readers() {
    let (mut p, r) = new_ring(RingConfig::new(4, 1 << 20));
    let first = p.open_stream();
    let seq = p.publish(&first, payload(1, 8)).unwrap();
    deliver(&first, seq);
    p.end_stream(&first);
    // Enough short streams to trigger sweeps after `first` is evicted.
    for _ in 0..64 {
        let s = p.open_stream();
        let seq = p.publish(&s, payload(p.head().0 + 1, 8)).unwrap();
        deliver(&s, seq);
        p.end_stream(&s);
    }
    assert!(r.stream(first.id()).is_none());
    assert_eq!(
        r.snapshot_stream(first.id(), Seq(0)).unwrap_err(),
        SnapshotError::UnknownStream { stream: first.id() }
    );
    assert!(r.stream_cursor(first.id(), Seq(0)).is_none());
    // The handle itself still refuses publishing.
    assert_eq!(p.publish(&first, Bytes::new()), Err(PublishError::StreamEnded { stream: first.id() }));
}

// ------------------------------------------------------------ stream cursors

fn drain(c: &mut Cursor) -> (Vec<u64>, Next) {
    let mut seqs = Vec::new();
    loop {
        match c.try_next().expect("not lagged") {
            Next::Event(e) => seqs.push(e.seq.0),
            other => return (seqs, other),
        }
    }
}

#[test]
fn stream_cursor_yields_only_its_stream() {
    let (mut p, r) = new_ring(cfg(64, 1 << 20, 8));
    let (a, b) = (p.open_stream(), p.open_stream());
    for i in 1..=20u64 {
        p.publish(if i % 3 == 1 { &a } else { &b }, payload(i, 8)).unwrap();
    }
    let mut c = r.stream_cursor(a.id(), Seq(1)).unwrap();
    assert_eq!(c.stream(), Some(a.id()));
    let (seqs, last) = drain(&mut c);
    assert_eq!(seqs, (1..=19).step_by(3).collect::<Vec<_>>());
    assert_eq!(last, Next::Pending);
    p.publish(&b, payload(21, 8)).unwrap();
    assert_eq!(drain(&mut c), (vec![], Next::Pending));
    p.publish(&a, payload(22, 8)).unwrap();
    assert_eq!(drain(&mut c), (vec![22], Next::Pending));
}

#[test]
fn stream_cursor_ends_after_its_stream_ends() {
    let (mut p, r) = new_ring(cfg(64, 1 << 20, 8));
    let (a, b) = (p.open_stream(), p.open_stream());
    let mut c = r.stream_cursor(a.id(), Seq(0)).unwrap();
    p.publish(&a, payload(1, 8)).unwrap();
    p.publish(&b, payload(2, 8)).unwrap();
    p.publish(&a, payload(3, 8)).unwrap();
    p.end_stream(&a);
    p.publish(&b, payload(4, 8)).unwrap();
    assert_eq!(drain(&mut c), (vec![1, 3], Next::End), "events first, then End");
    assert_eq!(c.try_next(), Ok(Next::End));
    // A cursor of a stream that ended with no events ends at once.
    let empty = p.open_stream();
    p.end_stream(&empty);
    let mut c = r.stream_cursor(empty.id(), Seq(0)).unwrap();
    assert_eq!(c.try_next(), Ok(Next::End));
}

#[test]
fn stalled_stream_cursor_passes_over_other_streams_evicted_events() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    p.publish(&a, payload(1, 8)).unwrap();
    let mut c = r.stream_cursor(a.id(), Seq(1)).unwrap();
    assert!(matches!(c.try_next(), Ok(Next::Event(e)) if e.seq == Seq(1)));
    for i in 2..=9 {
        p.publish(&b, payload(i, 8)).unwrap(); // b's 2 is evicted below
    }
    p.publish(&a, payload(10, 8)).unwrap(); // retained 3..=10
    assert_eq!(r.oldest(), Seq(3));
    assert_eq!(drain(&mut c), (vec![10], Next::Pending), "nothing of `a` was lost: no lag");
}

#[test]
fn stalled_stream_cursor_lags_when_its_own_event_was_evicted() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let (a, b) = (p.open_stream(), p.open_stream());
    p.publish(&a, payload(1, 8)).unwrap();
    p.publish(&a, payload(2, 8)).unwrap(); // evicted below
    let mut c = r.stream_cursor(a.id(), Seq(1)).unwrap();
    assert!(matches!(c.try_next(), Ok(Next::Event(e)) if e.seq == Seq(1)));
    for i in 3..=9 {
        p.publish(&b, payload(i, 8)).unwrap();
    }
    p.publish(&a, payload(10, 8)).unwrap(); // retained 3..=10
    assert_eq!(c.try_next(), Err(Lagged { wanted: Seq(2), oldest: Seq(3) }));
}

#[test]
fn stream_cursor_of_unknown_stream_is_none() {
    let (_p, r) = new_ring(cfg(8, 1 << 20, 4));
    assert!(r.stream_cursor(StreamId(1), Seq(0)).is_none());
}

// ------------------------------------------------------------ stream_of

#[test]
fn stream_of_names_the_stream_of_retained_events_only() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let streams = [p.open_stream(), p.open_stream(), p.open_stream()];
    for i in 1..=20u64 {
        p.publish(&streams[(i % 3) as usize], payload(i, 8)).unwrap();
    }
    assert_eq!(r.stream_of(Seq(0)), None);
    assert_eq!(r.stream_of(Seq(12)), None, "evicted");
    assert_eq!(r.stream_of(Seq(21)), None, "not yet published");
    assert_eq!(r.stream_of(Seq(u64::MAX)), None);
    for i in 13..=20u64 {
        assert_eq!(r.stream_of(Seq(i)), Some(streams[(i % 3) as usize].id()), "seq {i}");
    }
}

#[test]
fn slot_table_is_bounded_by_config_validation() {
    // One event per chunk for the largest capacity would need a 2^26-entry
    // slot table: refused, not allocated.
    assert!(matches!(
        ring(cfg(MAX_CAPACITY, 1 << 20, 1)).unwrap_err(),
        ConfigError::ChunkEvents { chunk_events: 1 }
    ));
    // RingConfig::new picks a chunk size that keeps the table bounded.
    let c = RingConfig::new(MAX_CAPACITY, 1 << 20);
    assert!(MAX_CAPACITY / c.chunk_events <= 1 << 20, "{c:?}");
}

#[test]
fn stream_cursor_ends_when_the_producer_is_dropped() {
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    p.publish(&s, payload(1, 8)).unwrap();
    let mut c = r.stream_cursor(s.id(), Seq(1)).unwrap();
    assert!(matches!(c.try_next(), Ok(Next::Event(_))));
    assert_eq!(c.try_next(), Ok(Next::Pending));
    drop(p); // the stream was never ended
    assert_eq!(c.try_next(), Ok(Next::End));
}

/// Marks the single event `seq` of a one-event stream delivered.
fn deliver(s: &StreamHandle, seq: Seq) {
    let ev = gapless::Event { seq, stream: s.id(), index_in_stream: 1, payload: Bytes::new() };
    assert!(s.mark_delivered(&ev));
}

#[test]
fn undelivered_finished_streams_are_kept_boundedly_for_late_deliveries() {
    let (mut p, r) = new_ring(RingConfig::new(4, 1 << 20));
    // Never delivered, ended, evicted: kept, so a late delivery still lands.
    let late = p.open_stream();
    let seq = p.publish(&late, payload(1, 8)).unwrap();
    p.end_stream(&late);
    for _ in 0..64 {
        let s = p.open_stream();
        let q = p.publish(&s, payload(p.head().0 + 1, 8)).unwrap();
        deliver(&s, q);
        p.end_stream(&s);
    }
    assert!(r.oldest() > seq);
    let ev = gapless::Event { seq, stream: late.id(), index_in_stream: 1, payload: Bytes::new() };
    assert!(r.mark_delivered(&ev), "the record is still there for the transport");
    assert_eq!(r.stream(late.id()).unwrap().delivered, seq);
    assert_eq!(r.reclaimed_undelivered(), None);
    if cfg!(miri) {
        return; // the bound below needs thousands of directory copies
    }
    // Without deliveries, at most 256 such records stay; the rest fold into
    // a conservative bound.
    for _ in 0..2000 {
        let s = p.open_stream();
        p.publish(&s, payload(p.head().0 + 1, 8)).unwrap();
        p.end_stream(&s);
    }
    let kept = (1..=r.streams_opened()).filter(|&id| r.stream(StreamId(id)).is_some()).count();
    assert!(kept <= 2 * 256 + 8, "directory grew to {kept}");
    assert!(r.reclaimed_undelivered().is_some());
}

// ------------------------------------------------------ payload lifetimes

/// A payload whose owner is counted: `Arc::strong_count(&tracker) - 1` is
/// the number of payload copies still alive anywhere.
fn tracked(tracker: &std::sync::Arc<()>, seq: u64) -> Bytes {
    /// Holds a count on `tracker` for as long as the payload lives.
    struct Owner {
        _count: std::sync::Arc<()>,
        bytes: [u8; 8],
    }
    impl AsRef<[u8]> for Owner {
        fn as_ref(&self) -> &[u8] {
            &self.bytes
        }
    }
    Bytes::from_owner(Owner { _count: std::sync::Arc::clone(tracker), bytes: seq.to_le_bytes() })
}

fn alive(tracker: &std::sync::Arc<()>) -> usize {
    std::sync::Arc::strong_count(tracker) - 1
}

/// Evicted payloads are released once their chunk is wholly evicted (the
/// producer reuses unpinned chunks' memory, dropping their cells first), a
/// chunk pinned by a snapshot keeps its payloads until the snapshot goes
/// and is then freed, not reused, and nothing survives the ring.
#[test]
fn evicted_payloads_are_released_with_or_without_pins() {
    let tracker = std::sync::Arc::new(());
    let (mut p, r) = new_ring(cfg(8, 1 << 20, 4));
    let s = p.open_stream();
    for seq in 1..=iters(200, 40) {
        p.publish(&s, tracked(&tracker, seq)).unwrap();
        // 8 retained, plus at most 3 evicted ones in the oldest,
        // partly evicted chunk.
        assert!(alive(&tracker) <= 8 + 3, "seq {seq}: {} payloads alive", alive(&tracker));
    }
    let head = r.head().0;
    let snap = r.snapshot(Seq(head - 8)).unwrap(); // pins the 8 retained
    for seq in head + 1..=head + 40 {
        p.publish(&s, tracked(&tracker, seq)).unwrap();
    }
    // The pinned chunks keep their 8 payloads; they were not recycled (the
    // snapshot still reads its own events).
    assert!(alive(&tracker) >= 8 + 8, "{} alive", alive(&tracker));
    let got: Vec<u64> = snap.iter().map(|e| u64::from_le_bytes(e.payload[..8].try_into().unwrap())).collect();
    assert_eq!(got, (head - 7..=head).collect::<Vec<_>>());
    drop(snap);
    for seq in head + 41..=head + 60 {
        p.publish(&s, tracked(&tracker, seq)).unwrap();
    }
    assert!(alive(&tracker) <= 8 + 3, "after the snapshot went: {} alive", alive(&tracker));
    drop((p, r));
    assert_eq!(alive(&tracker), 0, "every payload is released with the ring");
}

// ------------------------------------------------------------------ batches

/// (seq, stream, index in stream, first payload word) of a read event.
type Seen = (u64, StreamId, u64, u64);

/// Drains a cursor one event at a time, then says how it stopped.
fn drain_one_by_one(c: &mut Cursor) -> (Vec<Seen>, Result<Next, Lagged>) {
    let mut got = vec![];
    loop {
        match c.try_next() {
            Ok(Next::Event(e)) => got.push((
                e.seq.0,
                e.stream,
                e.index_in_stream,
                u64::from_le_bytes(e.payload[..8].try_into().unwrap()),
            )),
            other => return (got, other),
        }
    }
}

/// The same through batches; also checks each batch's own bookkeeping.
fn drain_batches(c: &mut Cursor) -> (Vec<Seen>, Result<Next, Lagged>, usize) {
    let (mut got, mut batches) = (vec![], 0);
    loop {
        match c.try_next_batch() {
            Ok(NextBatch::Events(b)) => {
                batches += 1;
                let evs: Vec<_> = b.iter().collect();
                assert!(!evs.is_empty() && evs.len() == b.len());
                assert_eq!(evs[0].seq, b.first());
                assert_eq!(*evs.last().unwrap(), b.last());
                assert!(b.last().seq <= b.covered_to());
                got.extend(evs.iter().map(|e| {
                    (
                        e.seq.0,
                        e.stream,
                        e.index_in_stream,
                        u64::from_le_bytes(e.payload[..8].try_into().unwrap()),
                    )
                }));
            }
            Ok(NextBatch::Pending) => return (got, Ok(Next::Pending), batches),
            Ok(NextBatch::End) => return (got, Ok(Next::End), batches),
            Err(l) => return (got, Err(l), batches),
        }
    }
}

/// A cursor read in batches yields exactly what it yields one by one (whole
/// ring and per stream, across chunk boundaries, with interleaved streams,
/// after eviction, at the end), and never more than one chunk per batch.
#[test]
fn batches_yield_what_single_reads_yield() {
    let mut rng = Rng(7);
    for round in 0..iters(40, 4) {
        let chunk = 1 << rng.below(4);
        let (mut p, r) = new_ring(cfg(16, 1 << 20, chunk));
        let streams: Vec<StreamHandle> = (0..3).map(|_| p.open_stream()).collect();
        let ids: Vec<StreamId> = streams.iter().map(|s| s.id()).collect();
        let mut cursors: Vec<(Cursor, Cursor)> = vec![(r.cursor(Seq(1)), r.cursor(Seq(1)))];
        for &id in &ids {
            cursors.push((r.stream_cursor(id, Seq(1)).unwrap(), r.stream_cursor(id, Seq(1)).unwrap()));
        }
        let mut seq = 0;
        for step in 0..iters(12, 3) {
            for _ in 0..rng.below(20) {
                // Stream 0 ends at step 5; later events go to 1 and 2.
                let k = if step > 5 { 1 + rng.below(2) } else { rng.below(3) };
                seq += 1;
                p.publish(&streams[k as usize], payload(seq, 8)).unwrap();
            }
            if step == 5 {
                p.end_stream(&streams[0]);
            }
            for (one, many) in &mut cursors {
                let (a, a_end) = drain_one_by_one(one);
                let (b, b_end, batches) = drain_batches(many);
                assert_eq!(a, b, "round {round} step {step}: batches differ from single reads");
                assert_eq!(a_end, b_end, "round {round} step {step}");
                if a_end != Ok(Next::End) {
                    // (After `End` a stream cursor's position is not
                    // meaningful: nothing more is read.)
                    assert_eq!(one.position(), many.position(), "round {round} step {step}");
                }
                assert!(batches as u64 <= (a.len() as u64).max(1) + 16 / chunk as u64 + 1);
                if let Err(l) = a_end {
                    one.seek(l.oldest);
                    many.seek(l.oldest);
                }
            }
        }
        drop(p);
        for (one, many) in &mut cursors {
            let (a, a_end) = drain_one_by_one(one);
            let (b, b_end, _) = drain_batches(many);
            assert_eq!((a, a_end), (b, b_end), "after the producer went");
        }
    }
}

/// Internal iteration of a snapshot (`for_each`, `fold`, `count`: a walk
/// over each chunk's cells) yields exactly what `next` yields, for whole
/// and per-stream snapshots, from any starting point, after a partial walk.
#[test]
fn snapshot_fold_matches_next() {
    let mut rng = Rng(11);
    for _ in 0..iters(60, 6) {
        let chunk = 1 << rng.below(4);
        let cap = 1 + rng.below(40) as usize;
        let (mut p, r) = new_ring(cfg(cap, 1 << 20, chunk));
        let streams: Vec<StreamHandle> = (0..3).map(|_| p.open_stream()).collect();
        let n = rng.below(80);
        for seq in 1..=n {
            p.publish(&streams[rng.below(3) as usize], payload(seq, 8)).unwrap();
        }
        let oldest = r.oldest().0;
        let after = Seq(oldest - 1 + rng.below(cap as u64 + 1).min(n + 1 - oldest));
        let mut snaps = vec![r.snapshot(after).unwrap()];
        for s in &streams {
            if let Ok(snap) = r.snapshot_stream(s.id(), after) {
                snaps.push(snap);
            }
        }
        for snap in &snaps {
            // `from_fn` drives the snapshot's own `next`, never its `fold`.
            let mut it = snap.iter();
            let by_next: Vec<u64> = std::iter::from_fn(|| it.next()).map(|e| e.seq.0).collect();
            let mut by_fold = vec![];
            snap.iter().for_each(|e| by_fold.push(e.seq.0));
            assert_eq!(by_next, by_fold);
            assert_eq!(snap.iter().count(), by_next.len());
            assert_eq!(snap.len(), by_next.len());
            // Part by `next`, the rest by `fold`.
            let k = rng.below(by_next.len() as u64 + 1) as usize;
            let mut it = snap.iter();
            let mut mixed: Vec<u64> = (0..k).map(|_| it.next().unwrap().seq.0).collect();
            it.for_each(|e| {
                assert_eq!(u64::from_le_bytes(e.payload[..8].try_into().unwrap()), e.seq.0);
                mixed.push(e.seq.0)
            });
            assert_eq!(mixed, by_next);
        }
    }
}

/// A waker that counts its wake-ups.
struct CountingWaker(std::sync::atomic::AtomicUsize);

impl std::task::Wake for CountingWaker {
    fn wake(self: std::sync::Arc<Self>) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Wakers are not kept alive by cursors that went away: the last
/// registrant to drop clears the sleepers (no publish looks at them any
/// more); while another registrant lives, the next publish wakes and drains
/// every registered waker as before.
#[test]
fn dropped_registrants_leave_no_wakers_behind() {
    use std::sync::Arc as StdArc;
    let (mut p, r) = new_ring(cfg(16, 1 << 20, 4));
    let s = p.open_stream();
    let (w1, w2) = (StdArc::new(CountingWaker(0.into())), StdArc::new(CountingWaker(0.into())));
    let (k1, k2) = (std::task::Waker::from(StdArc::clone(&w1)), std::task::Waker::from(StdArc::clone(&w2)));
    let mut c1 = r.cursor(Seq(1));
    let mut c2 = r.cursor(Seq(1));
    assert_eq!(c1.try_next(), Ok(Next::Pending));
    assert_eq!(c2.try_next(), Ok(Next::Pending));
    assert!(c1.register(&k1) && c2.register(&k2));
    drop(k1);
    drop(k2);
    assert_eq!(StdArc::strong_count(&w1), 2, "registered: the ring holds a clone");
    // c2 still registered: c1's waker stays until the next publish wakes all.
    drop(c1);
    assert_eq!(StdArc::strong_count(&w1), 2);
    p.publish(&s, payload(1, 8)).unwrap();
    assert_eq!(w1.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(w2.0.load(std::sync::atomic::Ordering::SeqCst), 1);
    assert_eq!(StdArc::strong_count(&w1), 1, "drained by the wake-up");
    // The last registrant registers again, then goes: its waker goes too.
    assert!(matches!(c2.try_next(), Ok(Next::Event(_))));
    assert_eq!(c2.try_next(), Ok(Next::Pending));
    let k2 = std::task::Waker::from(StdArc::clone(&w2));
    assert!(c2.register(&k2));
    drop(k2);
    assert_eq!(StdArc::strong_count(&w2), 2);
    drop(c2);
    assert_eq!(StdArc::strong_count(&w2), 1, "cleared with the last registrant");
    p.publish(&s, payload(2, 8)).unwrap();
    assert_eq!(w2.0.load(std::sync::atomic::Ordering::SeqCst), 1, "nobody left to wake");
}

/// The footprint counts each payload at its allocator size class (a
/// 4 170-byte payload takes jemalloc's 5 120-byte class), and a chunk's
/// remembered sum is redone when its slot takes a new chunk.
#[test]
fn footprint_counts_payloads_at_their_size_class() {
    let footprint = |lens: &mut dyn Iterator<Item = usize>, every: bool| {
        let (mut p, _r) = new_ring(cfg(16, 1 << 20, 8));
        let s = p.open_stream();
        let mut fp = 0;
        for len in lens {
            let seq = p.head().0 + 1;
            p.publish(&s, payload(seq, len)).unwrap();
            if every {
                fp = p.footprint();
            }
        }
        if every {
            fp
        } else {
            p.footprint()
        }
    };
    let small = footprint(&mut std::iter::repeat_n(8, 16), false);
    for (len, class) in [(4096, 4096), (4170, 5120), (129, 160), (8, 16)] {
        let got = footprint(&mut std::iter::repeat_n(len, 16), false);
        assert_eq!(got - small, 16 * (class - 16), "16 payloads of {len} bytes");
    }
    // 48 small, then 16 large: the retained 16 (two chunks) are large,
    // whatever sums were remembered for the chunks their slots held.
    let mixed =
        |every| footprint(&mut std::iter::repeat_n(8, 48).chain(std::iter::repeat_n(4170, 16)), every);
    let all_small = footprint(&mut std::iter::repeat_n(8, 64), false);
    assert_eq!(mixed(true), mixed(false));
    assert_eq!(mixed(true) - all_small, 16 * (5120 - 16));
}

/// A chunk evicted while a snapshot holds it stays in the footprint (its
/// memory is alive) until the producer finds it released: at `evict_to`,
/// or when it starts its next chunk.
#[test]
fn footprint_counts_chunks_that_readers_pin() {
    let (mut p, r) = new_ring(cfg(64, 1 << 20, 8));
    let s = p.open_stream();
    for i in 0..24u64 {
        p.publish(&s, payload(i + 1, 1000)).unwrap(); // 3 chunks of 8
    }
    let full = p.footprint();
    let pinned = r.snapshot(Seq(0)).unwrap();
    assert_eq!(p.evict_to(0), 16, "the two chunks below the head's");
    assert!(p.footprint() >= full, "{} < {full}: the pinned chunks are alive", p.footprint());
    drop(pinned);
    assert_eq!(p.evict_to(0), 0);
    let released = p.footprint();
    assert!(released + 16 * 1024 <= full, "{released} after the snapshot let go (full: {full})");
    // The same, released by the next chunk.
    let pinned = r.snapshot(Seq(16)).unwrap();
    for i in 24..32u64 {
        p.publish(&s, payload(i + 1, 1000)).unwrap();
    }
    assert_eq!(p.evict_to(0), 8);
    let with_pin = p.footprint();
    drop(pinned);
    assert_eq!(p.footprint(), with_pin, "counted until the producer looks");
    p.publish(&s, payload(33, 1000)).unwrap(); // a new chunk, and 1 000 bytes more
    assert!(
        p.footprint() + 7 * 1024 <= with_pin,
        "{} after the next chunk (pinned: {with_pin})",
        p.footprint()
    );
}

/// `evict_to` evicts whole chunks below the one being written, oldest
/// first, until the footprint fits: explicitly (coverage, cursors and
/// snapshots say so), never under a snapshot taken before (it pins), and
/// the footprint counts what the producer holds.
#[test]
fn evict_to_frees_whole_chunks_explicitly() {
    let (mut p, r) = new_ring(cfg(64, 1 << 20, 8));
    let s = p.open_stream();
    let empty = p.footprint();
    for i in 0..40u64 {
        p.publish(&s, payload(i, 1000)).unwrap(); // 5 chunks of 8
    }
    let full = p.footprint();
    assert!(full >= empty + 40 * 1000, "footprint {full} counts the payloads (empty ring: {empty})");
    let pinned = r.snapshot(Seq(0)).unwrap(); // all 40
    let mut cursor = r.cursor(Seq(1));
    // Down to half: whole chunks go until it fits.
    let evicted = p.evict_to(full - 20 * 1000);
    assert_eq!(evicted % 8, 0, "whole chunks only");
    assert!(evicted >= 16, "evicted {evicted}");
    assert_eq!(r.oldest(), Seq(evicted + 1));
    assert_eq!(r.coverage(Seq(0)), Coverage::Evicted { oldest: Seq(evicted + 1), missing: evicted });
    assert_eq!(cursor.try_next().unwrap_err(), Lagged { wanted: Seq(1), oldest: Seq(evicted + 1) });
    assert_eq!(pinned.iter().count(), 40, "a snapshot pins what it took");
    // Its memory counts until it lets go.
    drop(pinned);
    assert_eq!(p.evict_to(full), 0);
    assert!(p.footprint() <= full - 16 * 1000, "{} after evicting {evicted}", p.footprint());
    assert_eq!((p.evicted_bytes(), r.evicted_bytes()), (evicted * 1000, evicted * 1000));
    // Never the chunk being written, however low the target.
    p.evict_to(0);
    assert_eq!(r.oldest(), Seq(33), "the last chunk (33..=40) stays");
    assert_eq!(r.evicted_bytes(), 32 * 1000);
    assert_eq!(r.snapshot(Seq(32)).unwrap().len(), 8);
    // Publishing goes on from there.
    assert_eq!(p.publish(&s, payload(41, 10)).unwrap(), Seq(41));
}

// ------------------------------------------------------------- start_at

/// A ring started at seq `first` (a replica of a log kept elsewhere)
/// behaves like the model started there: seqs below it are evicted and
/// never seen, whatever chunk offset it starts at, through eviction,
/// snapshots, cursors and drops.
#[test]
fn a_ring_started_at_any_seq_matches_the_model() {
    for first in [1u64, 2, 4, 5, 7, 8, 9, 1_000_003] {
        let c = cfg(6, 40, 4);
        let (mut p, r) = new_ring(c);
        p.start_at(first);
        let s = p.open_stream();
        assert_eq!((r.head(), r.oldest()), (Seq(first - 1), Seq(first)), "first {first}");
        assert_eq!(r.coverage(Seq(first - 1)), Coverage::Covered);
        if first >= 2 {
            assert!(matches!(r.snapshot(Seq(first - 2)), Err(SnapshotError::Evicted { .. })));
        }
        assert!(r.stream_of(Seq(first - 1)).is_none(), "a placeholder is never seen");
        let mut m = Model::new(c);
        m.head = first - 1;
        let mut cursor = r.cursor(Seq(first));
        for i in 0..iters(40, 12) {
            let len = 8 + (i as usize * 7) % 9;
            let seq = p.publish(&s, payload(first + i, len)).unwrap();
            assert_eq!(seq.0, m.publish(s.id(), payload(first + i, len)));
            m.check(&p, &r);
            if i % 3 == 0 {
                match cursor.try_next() {
                    Ok(Next::Event(e)) => assert!(e.seq.0 >= first),
                    Err(Lagged { .. }) => cursor = r.cursor(r.oldest()),
                    Ok(_) => {}
                }
            }
        }
    }
}

/// The last seq is 2^63 - 1: a ring started a few chunks below it
/// publishes up to it, across chunk boundaries, and then refuses with
/// `SeqExhausted`, unchanged; what it holds stays readable and drops
/// cleanly.
#[test]
fn the_sequence_space_ends_at_2_pow_63_minus_1() {
    const LAST: u64 = (1 << 63) - 1;
    // Chunks of 4: LAST is the third cell of its chunk, so the refusal
    // comes inside a chunk, after the producer rolled over two others.
    let (mut p, r) = new_ring(cfg(8, 1000, 4));
    p.start_at(LAST - 9);
    let s = p.open_stream();
    for i in 0..10 {
        assert_eq!(p.publish(&s, payload(i, 8)).unwrap(), Seq(LAST - 9 + i));
    }
    let bytes = p.retained_bytes();
    assert_eq!(p.publish(&s, payload(10, 8)), Err(PublishError::SeqExhausted));
    assert_eq!(p.publish(&s, payload(11, 8)), Err(PublishError::SeqExhausted), "and stays refused");
    assert_eq!((r.head(), r.oldest(), p.retained_bytes()), (Seq(LAST), Seq(LAST - 7), bytes));
    let seqs: Vec<u64> = r.snapshot(Seq(LAST - 8)).unwrap().iter().map(|e| e.seq.0).collect();
    assert_eq!(seqs, (LAST - 7..=LAST).collect::<Vec<_>>());
    let own: Vec<u64> = r.snapshot_stream(s.id(), Seq(LAST - 3)).unwrap().iter().map(|e| e.seq.0).collect();
    assert_eq!(own, (LAST - 2..=LAST).collect::<Vec<_>>());
    drop(p);
    assert_eq!(r.snapshot(Seq(LAST - 1)).unwrap().len(), 1, "still readable once the producer is gone");
}

#[test]
#[should_panic(expected = "start_at on a ring that published")]
fn start_at_refuses_a_ring_that_published() {
    let (mut p, _r) = new_ring(cfg(8, 100, 4));
    let s = p.open_stream();
    p.publish(&s, payload(1, 8)).unwrap();
    p.start_at(10);
}

/// Stream tags are an id's low 32 bits. Past 2^32 - 1 streams two ids
/// share a tag; a stream snapshot then confirms each candidate on its cell
/// and yields only its own stream's events, over a short range (the tag
/// scan) and a long one (links, then the scan).
#[test]
fn stream_snapshots_tell_apart_streams_whose_tags_collide() {
    for events in [60u64, iters(3000, 400)] {
        let (mut p, r) = ring(cfg(4096, 64 << 20, 64)).unwrap();
        let a = p.open_stream();
        p.skip_streams_to(StreamId(1 << 32));
        let b = p.open_stream();
        assert_eq!((a.id(), b.id()), (StreamId(1), StreamId((1 << 32) + 1)), "the same low 32 bits");
        let mut mine = (Vec::new(), Vec::new());
        for i in 0..events {
            // Mostly b, so that a's snapshot finds b's cells among its
            // candidates in every block.
            let (s, list) = if i % 5 == 0 { (&a, &mut mine.0) } else { (&b, &mut mine.1) };
            list.push(p.publish(s, payload(i, 8)).unwrap().0);
        }
        for (s, want) in [(&a, &mine.0), (&b, &mine.1)] {
            let got: Vec<u64> = r.snapshot_stream(s.id(), Seq(0)).unwrap().iter().map(|e| e.seq.0).collect();
            assert_eq!(&got, want, "stream {} over {events} events", s.id());
            assert!(r.snapshot_stream(s.id(), Seq(0)).unwrap().iter().all(|e| e.stream == s.id()));
        }
    }
}

/// A stream snapshot over a long range follows its stream's links where
/// the stream is sparse, scans the chunks' tag columns where it is dense,
/// and switches from one to the other part-way: every way, it yields
/// exactly the stream's events after the cursor, in order.
#[test]
fn stream_snapshots_walk_sparse_streams_and_scan_dense_ones() {
    let events = iters(6000, 1200);
    let (mut p, r) = ring(cfg(8192, 64 << 20, 64)).unwrap();
    let streams: Vec<_> = (0..40).map(|_| p.open_stream()).collect();
    let mut mine: Vec<Vec<u64>> = vec![vec![]; streams.len()];
    let half = events / 2;
    for seq in 1..=events {
        let s = if seq % 100 == 0 {
            0 // sparse throughout: walked
        } else if seq % 3 == 0 {
            1 // dense throughout: scanned
        } else if (seq <= half && seq % 3 == 1) || (seq > half && seq % 150 == 1) {
            2 // dense, then sparse: walked back from the top, then scanned
        } else {
            3 + (seq % 37) as usize
        };
        p.publish(&streams[s], payload(seq, 8)).unwrap();
        mine[s].push(seq);
    }
    for (s, own) in mine.iter().enumerate().take(3) {
        let id = streams[s].id();
        // From the start, from one of its own events, from a seq of another
        // stream, from its newest event.
        let other = (1..=events).find(|q| !own.contains(q) && *q > own[own.len() / 3]).unwrap();
        for cursor in [0, own[own.len() / 4], other, *own.last().unwrap()] {
            let want: Vec<u64> = own.iter().copied().filter(|&q| q > cursor).collect();
            let snap = r.snapshot_stream(id, Seq(cursor)).unwrap();
            let got: Vec<u64> = snap.iter().map(|e| e.seq.0).collect();
            assert_eq!(got, want, "stream {s} after {cursor}");
            assert!(snap.iter().all(|e| e.stream == id));
            assert_eq!(snap.len(), want.len());
        }
    }
}

// ------------------------------------------------ the short first chunk

/// A ring's first chunk holds 4 cells until the ring publishes past them,
/// then a whole chunk replaces it (`Producer::grow`). Readers that pinned
/// or cached the short one go on reading it, and past it from the whole
/// one: a cursor, a batch cursor, a snapshot taken before and after, and a
/// stream snapshot all see every event once, in order.
#[test]
fn the_short_first_chunk_grows_under_its_readers() {
    for chunk_events in [2usize, 4, 8, 64] {
        let (mut p, r) = new_ring(cfg(256, 1 << 20, chunk_events));
        let (a, b) = (p.open_stream(), p.open_stream());
        p.publish(&a, payload(1, 8)).unwrap();
        p.publish(&b, payload(2, 8)).unwrap();
        let mut cursor = r.cursor(Seq(1));
        let mut batches = r.cursor(Seq(1));
        let mut follower = r.stream_cursor(a.id(), Seq(0)).unwrap();
        let mut seen = Vec::new();
        // Each reader caches the first chunk while it is short.
        assert!(matches!(cursor.try_next(), Ok(Next::Event(e)) if e.seq == Seq(1)));
        match batches.try_next_batch() {
            Ok(NextBatch::Events(batch)) => seen.extend(batch.iter().map(|e| e.seq.0)),
            other => panic!("a batch of the first events: {other:?}"),
        }
        assert!(matches!(follower.try_next(), Ok(Next::Event(e)) if e.seq == Seq(1)));
        let before = r.snapshot(Seq(0)).unwrap();
        for seq in 3..=100u64 {
            let s = if seq % 2 == 1 { &a } else { &b };
            assert_eq!(p.publish(s, payload(seq, 8)).unwrap(), Seq(seq));
        }
        let mut next = 2u64;
        while let Ok(Next::Event(e)) = cursor.try_next() {
            assert_eq!((e.seq.0, &e.payload[..8]), (next, &next.to_le_bytes()[..]), "C = {chunk_events}");
            next += 1;
        }
        assert_eq!(next, 101, "C = {chunk_events}");
        while let Ok(NextBatch::Events(batch)) = batches.try_next_batch() {
            seen.extend(batch.iter().map(|e| e.seq.0));
        }
        assert_eq!(seen, (1..=100).collect::<Vec<_>>(), "C = {chunk_events}");
        let mut mine = vec![1];
        while let Ok(Next::Event(e)) = follower.try_next() {
            mine.push(e.seq.0);
        }
        assert_eq!(mine, (1..=100).step_by(2).collect::<Vec<_>>(), "C = {chunk_events}");
        assert_eq!(before.iter().map(|e| e.seq.0).collect::<Vec<_>>(), [1, 2], "C = {chunk_events}");
        let after = r.snapshot(Seq(0)).unwrap();
        assert_eq!(after.iter().map(|e| e.seq.0).collect::<Vec<_>>(), (1..=100).collect::<Vec<_>>());
        let stream = r.snapshot_stream(b.id(), Seq(0)).unwrap();
        assert_eq!(
            stream.iter().map(|e| e.seq.0).collect::<Vec<_>>(),
            (2..=100).step_by(2).collect::<Vec<_>>()
        );
    }
}

/// What the short first chunk saves: a ring that published 2 events keeps
/// 4 cells, not a whole chunk of 64, and its footprint says so; past 4
/// events it holds the whole chunk.
#[test]
fn the_short_first_chunk_is_counted_at_its_size() {
    let (mut p, _r) = new_ring(cfg(4096, 1 << 20, 64));
    let s = p.open_stream();
    publish_n(&mut p, &s, 2);
    let short = p.footprint();
    publish_n(&mut p, &s, 3);
    let whole = p.footprint();
    // 60 cells of 56 bytes and their 4-byte tags, and three 8-byte payloads
    // (16 bytes each at the allocator's class).
    assert_eq!(whole - short, 60 * (56 + 4) + 3 * 16);
}

/// A reader that still holds the short first chunk when it is replaced
/// keeps its cells and payloads alive: the footprint counts them until the
/// reader lets go and the producer finds it so (at its next chunk).
#[test]
fn a_replaced_short_chunk_that_a_reader_holds_stays_counted() {
    let (mut p, r) = new_ring(cfg(4096, 1 << 20, 64));
    let (mut twin, _tr) = new_ring(cfg(4096, 1 << 20, 64));
    let (s, ts) = (p.open_stream(), twin.open_stream());
    publish_n(&mut p, &s, 4);
    publish_n(&mut twin, &ts, 4);
    let snap = r.snapshot(Seq(0)).unwrap();
    publish_n(&mut p, &s, 1);
    publish_n(&mut twin, &ts, 1);
    // 4 cells of 60 bytes, 4 payloads of 16 at the allocator's class, the
    // chunk's own header and the producer's list of held chunks.
    let extra = p.footprint() - twin.footprint();
    assert!(
        (4 * 60 + 4 * 16..=4 * 60 + 4 * 16 + 160).contains(&extra),
        "{extra} bytes counted for the held chunk"
    );
    assert_eq!(snap.iter().count(), 4, "the reader still reads it");
    drop(snap);
    // Seq 65 starts the next chunk, where the producer lets go of it.
    publish_n(&mut p, &s, 60);
    publish_n(&mut twin, &ts, 60);
    // What is left is the list's own capacity (a few words).
    let left = p.footprint() - twin.footprint();
    assert!(left < 4 * 60 + 4 * 16, "{left} bytes still counted once the reader let go");
}

/// A batch cursor that cached the short first chunk, once the ring grew
/// past it, takes its next batch to the whole chunk's end, as from any
/// chunk (found by the `ring_ops` fuzz target: the batch stopped at the
/// short chunk's end).
#[test]
fn a_batch_after_the_first_chunk_grew_runs_to_the_chunk_end() {
    let (mut p, r) = new_ring(cfg(64, 1 << 20, 8));
    let s = p.open_stream();
    publish_n(&mut p, &s, 2);
    let mut c = r.cursor(Seq(1));
    match c.try_next_batch() {
        Ok(NextBatch::Events(b)) => assert_eq!((b.first(), b.covered_to()), (Seq(1), Seq(2))),
        other => panic!("the first two events: {other:?}"),
    }
    publish_n(&mut p, &s, 10);
    match c.try_next_batch() {
        Ok(NextBatch::Events(b)) => {
            assert_eq!((b.first(), b.covered_to()), (Seq(3), Seq(8)), "to the chunk's end")
        }
        other => panic!("seqs 3 to 8: {other:?}"),
    }
}
