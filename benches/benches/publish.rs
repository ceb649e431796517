//! `publish`: events per second for one producer with 0, 1 and 3 readers
//! tailing concurrently, 64-byte payloads (clones of one shared `Bytes`).
//!
//! Contenders, same capacity (4096 events), same records:
//! * `gapless`: `Producer::publish` (the `tokio` facade compiled in, no
//!   subscriber registered); readers follow with a `Cursor`.
//! * `tokio_broadcast`: `broadcast::Sender::send` with one idle receiver so
//!   that values are stored; readers `try_recv`.
//! * `mutex_deque`: `Mutex<VecDeque<Arc<Event>>>`; readers lock and clone
//!   the new `Arc`s out, at most 64 per lock.
//! * `speed_of_light`: the records written into a preallocated array with
//!   one Release store each, no readers (0-reader case only).
//! * `speed_of_light_swap` (diagnostic): the same with an AcqRel swap of
//!   the head, gapless's publication point, instead of the Release store.
//!
//! A reader that finds nothing new yields its thread. On 2 cores the
//! 3-reader case runs 4 threads and measures the scheduler as much as the
//! store: the targets are judged on 0 and 1 reader.

use criterion::{BenchmarkId, Criterion, Throughput};
use gapless::ring::DEFAULT_BYTE_BUDGET;
use gapless::{ring, Event, Next, RingConfig, Seq, StreamId};
use gapless_benches::harness::{payload, Background};
use gapless_benches::{DequeStore, Evicted, SpeedOfLight};
use std::hint::black_box;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::broadcast::{self, error::TryRecvError};

const CAPACITY: usize = 4096;
const READERS: [usize; 3] = [0, 1, 3];

fn publish(c: &mut Criterion) {
    let mut g = c.benchmark_group("publish");
    g.throughput(Throughput::Elements(1));
    let p = payload();

    let mut sol = SpeedOfLight::new(CAPACITY);
    g.bench_function(BenchmarkId::new("speed_of_light", "0_readers"), |b| {
        b.iter(|| sol.publish(StreamId(1), p.clone()))
    });
    black_box(sol.get(sol.head()));
    drop(sol);
    // Diagnostic, not a peer: the same floor with gapless's publication
    // point (an AcqRel swap, which a wake-up bit needs) instead of a
    // Release store. The gap between the two rows is the fence.
    let mut sol = SpeedOfLight::new(CAPACITY);
    g.bench_function(BenchmarkId::new("speed_of_light_swap", "0_readers"), |b| {
        b.iter(|| sol.publish_swap(StreamId(1), p.clone()))
    });
    black_box(sol.get(sol.head()));
    drop(sol);

    for readers in READERS {
        let id = format!("{readers}_readers");

        let (mut producer, reader) = ring(RingConfig::new(CAPACITY, DEFAULT_BYTE_BUDGET)).unwrap();
        let stream = producer.open_stream();
        let mut bg = Background::new();
        for _ in 0..readers {
            let mut cursor = reader.cursor(Seq(1));
            bg.spawn(move |stop| {
                while !Background::stopping(stop) {
                    match cursor.try_next() {
                        Ok(Next::Event(e)) => drop(black_box(e)),
                        Ok(Next::Pending) => std::thread::yield_now(),
                        Ok(Next::End) => break,
                        Err(lagged) => cursor.seek(lagged.oldest),
                    }
                }
            });
        }
        g.bench_function(BenchmarkId::new("gapless", &id), |b| {
            b.iter(|| producer.publish(&stream, p.clone()).unwrap())
        });
        drop(bg);
        drop(producer);

        let (tx, idle_rx) = broadcast::channel::<Event>(CAPACITY);
        let mut bg = Background::new();
        for _ in 0..readers {
            let mut rx = tx.subscribe();
            bg.spawn(move |stop| {
                while !Background::stopping(stop) {
                    match rx.try_recv() {
                        Ok(e) => drop(black_box(e)),
                        Err(TryRecvError::Empty) => std::thread::yield_now(),
                        Err(TryRecvError::Lagged(_)) => {}
                        Err(TryRecvError::Closed) => break,
                    }
                }
            });
        }
        let mut seq = 0;
        g.bench_function(BenchmarkId::new("tokio_broadcast", &id), |b| {
            b.iter(|| {
                seq += 1;
                let e =
                    Event { seq: Seq(seq), stream: StreamId(1), index_in_stream: seq, payload: p.clone() };
                tx.send(e).unwrap()
            })
        });
        drop(bg);
        drop((tx, idle_rx));

        let store = Arc::new(DequeStore::new(CAPACITY));
        let mut bg = Background::new();
        for _ in 0..readers {
            let store = Arc::clone(&store);
            bg.spawn(move |stop| {
                let mut pos = store.head();
                let mut buf = Vec::with_capacity(64);
                while !Background::stopping(stop) {
                    match store.read_after(pos, 64, &mut buf) {
                        Ok(()) if buf.is_empty() => std::thread::yield_now(),
                        Ok(()) => {
                            pos = buf.last().expect("not empty").seq;
                            buf.drain(..).for_each(|e| drop(black_box(e)));
                        }
                        Err(Evicted { oldest }) => pos = Seq(oldest.0 - 1),
                    }
                }
            });
        }
        g.bench_function(BenchmarkId::new("mutex_deque", &id), |b| {
            b.iter(|| store.publish(StreamId(1), p.clone()))
        });
        drop(bg);
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(30)
}

fn main() {
    let mut c = config().configure_from_args();
    publish(&mut c);
    c.final_summary();
}
