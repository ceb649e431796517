//! `coverage`: latency of the session-level coverage check
//! (`session.reader().coverage(cursor)`) while another thread publishes on
//! the same session flat out, against its floor: a bare atomic load of a
//! counter another thread increments flat out. Each also runs idle (no
//! writer) for reference, and the `Mutex<VecDeque>` store answers the same
//! question under its lock.
//!
//! The cursor is `Seq(1)`, evicted once the writer has lapped the ring
//! (prefilled so that it has): the check still does both of its loads
//! (`head`, then `oldest`), as for a covered cursor. A cursor that stays
//! covered cannot be held fixed while the ring moves at full speed.
//!
//! The measuring thread is pinned to CPU 0 and every writer to CPU 1
//! (`harness::pin_to`), so the writer never time-shares the reader's core,
//! which would hide the cross-core traffic being measured.
//!
//! The harness costs the same around each contender: it passes one
//! `black_box`ed reference in (the `Session`, the counter, the store), so
//! that every iteration starts from it as a request handler would, instead
//! of the compiler hoisting the pointer loads out of the loop, and takes one
//! word out (see `digest`).

use criterion::{BenchmarkId, Criterion};
use gapless::{Hub, HubConfig, Seq, Session, StreamId};
use gapless_benches::harness::{digest, payload, pin_to, Background, CachePadded};
use gapless_benches::DequeStore;
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// Writer iterations between looks at the stop flag.
const BATCH: usize = 1024;

fn coverage(c: &mut Criterion) {
    let mut g = c.benchmark_group("coverage");
    let p = payload();
    let cursor = Seq(1);
    for writing in [false, true] {
        let id = if writing { "publishing" } else { "idle" };

        let counter = Arc::new(CachePadded(AtomicU64::new(0)));
        let mut bg = Background::new();
        if writing {
            let counter = Arc::clone(&counter);
            bg.spawn(move |stop| {
                pin_to(1);
                while !Background::stopping(stop) {
                    for _ in 0..BATCH {
                        counter.fetch_add(1, Ordering::Release);
                    }
                }
            });
        }
        let c: &AtomicU64 = &counter;
        g.bench_function(BenchmarkId::new("atomic_load", id), |b| {
            b.iter(|| black_box(c).load(Ordering::Acquire))
        });
        drop(bg);

        let hub = Hub::new(HubConfig::default()).unwrap();
        let session = hub.create(None).unwrap();
        for _ in 0..2 * hub.config().ring.capacity {
            session.publish(session.standalone(), p.clone()).unwrap();
        }
        let mut bg = Background::new();
        if writing {
            let session = Arc::clone(&session);
            let p = p.clone();
            bg.spawn(move |stop| {
                pin_to(1);
                while !Background::stopping(stop) {
                    for _ in 0..BATCH {
                        session.publish(session.standalone(), p.clone()).unwrap();
                    }
                }
            });
        }
        let s: &Session = &session;
        g.bench_function(BenchmarkId::new("gapless", id), |b| {
            b.iter(|| digest(black_box(s).reader().coverage(cursor)))
        });
        drop(bg);

        let store = Arc::new(DequeStore::new(hub.config().ring.capacity));
        for _ in 0..2 * hub.config().ring.capacity {
            store.publish(StreamId(1), p.clone());
        }
        let mut bg = Background::new();
        if writing {
            let store = Arc::clone(&store);
            let p = p.clone();
            bg.spawn(move |stop| {
                pin_to(1);
                while !Background::stopping(stop) {
                    for _ in 0..BATCH {
                        store.publish(StreamId(1), p.clone());
                    }
                }
            });
        }
        let d: &DequeStore = &store;
        g.bench_function(BenchmarkId::new("mutex_deque", id), |b| {
            b.iter(|| digest(black_box(d).coverage(cursor)))
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
    // The measuring thread on CPU 0, every writer on CPU 1: "while another
    // thread publishes" means another core, never a time-shared one.
    pin_to(0);
    let mut c = config().configure_from_args();
    coverage(&mut c);
    c.final_summary();
}
