//! `snapshot`: pinning and iterating a gap of 16, 1 000 and 10 000 events
//! in a ring of 16 384 (filled to capacity, one stream).
//!
//! Three groups, each element an event of the gap:
//! * `snapshot_pin`: take the gap and let it go. gapless pins it
//!   (`Reader::snapshot`: one reference per 64-event chunk); the
//!   `Mutex<VecDeque<Arc<Event>>>` store clones the gap's `Arc`s into a
//!   `Vec` under its lock (`mutex_deque_clone`).
//! * `snapshot_iter`: walk an already taken gap, reading each event's seq
//!   and payload length: gapless's `Snapshot::iter` against the deque
//!   store's `Vec<Arc<Event>>`.
//! * `snapshot_replay`: take and walk, what a resume does. Adds the
//!   TypeScript SDK's example store (`sort_scan`), which can only replay
//!   (it sorts every stored id, scans to the cursor, then sends the rest).

use criterion::{BenchmarkId, Criterion, Throughput};
use gapless::ring::DEFAULT_BYTE_BUDGET;
use gapless::{ring, RingConfig, Seq, StreamId};
use gapless_benches::harness::payload;
use gapless_benches::{DequeStore, SortScanStore};
use std::hint::black_box;
use std::time::Duration;

const RING: usize = 16_384;
const GAPS: [u64; 3] = [16, 1_000, 10_000];

fn snapshot(c: &mut Criterion) {
    let p = payload();
    let (mut producer, reader) = ring(RingConfig::new(RING, DEFAULT_BYTE_BUDGET)).unwrap();
    let stream = producer.open_stream();
    let deque = DequeStore::new(RING);
    let sorted = SortScanStore::new();
    let mut ids = Vec::with_capacity(RING);
    for _ in 0..RING {
        producer.publish(&stream, p.clone()).unwrap();
        deque.publish(StreamId(1), p.clone());
        ids.push(sorted.store(StreamId(1), p.clone()));
    }
    let head = reader.head().0;
    assert_eq!((head, deque.head().0, reader.oldest().0), (RING as u64, RING as u64, 1));

    let mut g = c.benchmark_group("snapshot_pin");
    for gap in GAPS {
        let after = Seq(head - gap);
        g.throughput(Throughput::Elements(gap));
        g.bench_function(BenchmarkId::new("gapless", gap), |b| b.iter(|| reader.snapshot(black_box(after))));
        g.bench_function(BenchmarkId::new("mutex_deque_clone", gap), |b| {
            b.iter(|| deque.gap(black_box(after)))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("snapshot_iter");
    for gap in GAPS {
        let after = Seq(head - gap);
        g.throughput(Throughput::Elements(gap));
        let snap = reader.snapshot(after).unwrap();
        assert_eq!(snap.len() as u64, gap);
        g.bench_function(BenchmarkId::new("gapless", gap), |b| {
            b.iter(|| black_box(&snap).iter().fold(0u64, |acc, e| acc ^ e.seq.0 ^ e.payload.len() as u64))
        });
        let cloned = deque.gap(after).unwrap();
        g.bench_function(BenchmarkId::new("mutex_deque_vec", gap), |b| {
            b.iter(|| black_box(&cloned).iter().fold(0u64, |acc, e| acc ^ e.seq.0 ^ e.payload.len() as u64))
        });
    }
    g.finish();

    let mut g = c.benchmark_group("snapshot_replay");
    for gap in GAPS {
        let after = Seq(head - gap);
        g.throughput(Throughput::Elements(gap));
        g.bench_function(BenchmarkId::new("gapless", gap), |b| {
            b.iter(|| {
                let snap = reader.snapshot(black_box(after)).unwrap();
                snap.iter().fold(0u64, |acc, e| acc ^ e.seq.0 ^ e.payload.len() as u64)
            })
        });
        g.bench_function(BenchmarkId::new("mutex_deque_clone", gap), |b| {
            b.iter(|| {
                let v = deque.gap(black_box(after)).unwrap();
                v.iter().fold(0u64, |acc, e| acc ^ e.seq.0 ^ e.payload.len() as u64)
            })
        });
        let last_id = &ids[after.0 as usize - 1];
        let mut n = 0;
        sorted.replay_after(last_id, |_, _| n += 1);
        assert_eq!(n, gap, "the peers replay the same events");
        assert_eq!(deque.gap(after).unwrap().len() as u64, gap);
        g.bench_function(BenchmarkId::new("sort_scan", gap), |b| {
            b.iter(|| {
                let mut acc = 0u64;
                let mut n = 0u64;
                sorted.replay_after(black_box(last_id), |id, payload| {
                    n += 1;
                    acc ^= id.len() as u64 ^ payload.len() as u64;
                });
                acc ^ n
            })
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

fn main() {
    let mut c = config().configure_from_args();
    snapshot(&mut c);
    c.final_summary();
}
