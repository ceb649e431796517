//! Loom models of the ring's protocols, through its public API.
//!
//! Small on purpose (capacity 2–4, chunks of 1–2 events, at most 5
//! publishes, one producer, one or two readers); CI runs them with
//! `LOOM_MAX_PREEMPTIONS=2`, `scripts/loom.sh deep` with 3. Every model
//! prints its run time.
#![cfg(gapless_loom)]

use bytes::Bytes;
use gapless::ring::{ring, Coverage, Cursor, Lagged, Missing, Next, NextBatch, RingConfig, SnapshotError};
use gapless::Seq;
use loom::sync::atomic::{AtomicBool, Ordering};
use loom::sync::Arc;
use loom::thread;
use std::task::{Wake, Waker};
use std::time::Instant;

fn cfg(capacity: usize, chunk: usize) -> RingConfig {
    RingConfig { capacity, byte_budget: 1 << 20, chunk_events: chunk }
}

fn payload(seq: u64) -> Bytes {
    Bytes::from(vec![seq as u8; 1 + (seq as usize % 3)])
}

fn check_payload(seq: Seq, p: &[u8]) {
    assert_eq!(p, &payload(seq.0)[..], "torn or misplaced payload at seq {seq}");
}

fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let start = Instant::now();
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
    println!("loom model {name}: {:.2?}", start.elapsed());
}

/// An eviction error must be true: the wanted seq is below `oldest`.
fn check_lag(l: Lagged) {
    assert!(l.wanted < l.oldest, "told {l:?}, but that seq was not evicted");
}

/// Makes `attempts` non-blocking reads, checking order, bytes and every
/// eviction report; returns the next seq it expects. Bounded on purpose: a
/// spinning reader would blow up loom's state space.
fn drain(mut c: Cursor, mut expect: u64, attempts: usize) -> u64 {
    for _ in 0..attempts {
        match c.try_next() {
            Ok(Next::Event(e)) => {
                assert_eq!(e.seq.0, expect, "out of order or skipped");
                check_payload(e.seq, &e.payload);
                expect += 1;
            }
            Ok(Next::Pending) | Ok(Next::End) => {}
            Err(l) => {
                check_lag(l);
                assert_eq!(l.wanted.0, expect, "lag reported for a seq it was not reading");
                // Never observe a seq it was told was evicted: go on at oldest.
                expect = l.oldest.0;
                c.seek(l.oldest);
            }
        }
    }
    expect
}

#[test]
fn publish_racing_reads() {
    model("publish_racing_reads", || {
        let (mut p, r) = ring(cfg(2, 1)).unwrap();
        let r2 = r.clone();
        let s = p.open_stream();
        let t1 = thread::spawn(move || drain(r.cursor(Seq(1)), 1, 3));
        let t2 = thread::spawn(move || drain(r2.cursor(Seq(1)), 1, 2));
        for i in 1..=3 {
            assert_eq!(p.publish(&s, payload(i)).unwrap(), Seq(i));
        }
        assert!(t1.join().unwrap() <= 4);
        assert!(t2.join().unwrap() <= 4);
    });
}

/// Budget eviction (`evict_to`, no publish) races a reader and a
/// snapshot: the producer stores `oldest` before it clears and recycles the
/// chunks, so a reader is told "evicted" only for seqs below `oldest`,
/// never reads a recycled cell, and a snapshot taken before keeps its
/// events intact.
#[test]
fn budget_eviction_racing_reads() {
    model("budget_eviction_racing_reads", || {
        let (mut p, r) = ring(cfg(4, 1)).unwrap();
        let s = p.open_stream();
        for i in 1..=3 {
            p.publish(&s, payload(i)).unwrap();
        }
        let r2 = r.clone();
        let t1 = thread::spawn(move || drain(r.cursor(Seq(1)), 1, 3));
        let t2 = thread::spawn(move || {
            if let Ok(snap) = r2.snapshot(Seq(0)) {
                let seqs: Vec<u64> = snap
                    .iter()
                    .map(|e| {
                        check_payload(e.seq, e.payload);
                        e.seq.0
                    })
                    .collect();
                assert_eq!(seqs, [1, 2, 3], "a snapshot yields exactly what it pinned");
            }
        });
        assert_eq!(p.evict_to(0), 2, "every chunk but the one being written");
        assert!(t1.join().unwrap() <= 4);
        t2.join().unwrap();
        // Publishing goes on after a budget eviction.
        assert_eq!(p.publish(&s, payload(4)).unwrap(), Seq(4));
    });
}

/// Batch reads (borrowed from the cursor's pinned chunk) race the producer,
/// which evicts and recycles chunks nobody else holds: every batch is in
/// order with intact payloads, and a chunk is never rewritten while a
/// cursor still reads it (loom tracks every cell access).
#[test]
fn batch_reads_racing_publish_and_recycling() {
    model("batch_reads_racing_publish_and_recycling", || {
        let (mut p, r) = ring(cfg(2, 2)).unwrap();
        let s = p.open_stream();
        let t = thread::spawn(move || {
            let mut c = r.cursor(Seq(1));
            let mut expect = 1;
            for _ in 0..3 {
                match c.try_next_batch() {
                    Ok(NextBatch::Events(b)) => {
                        for e in b {
                            assert_eq!(e.seq.0, expect, "out of order or skipped");
                            check_payload(e.seq, e.payload);
                            expect += 1;
                        }
                    }
                    Ok(NextBatch::Pending) | Ok(NextBatch::End) => {}
                    Err(l) => {
                        check_lag(l);
                        assert_eq!(l.wanted.0, expect);
                        expect = l.oldest.0;
                        c.seek(l.oldest);
                    }
                }
            }
            expect
        });
        for i in 1..=5 {
            assert_eq!(p.publish(&s, payload(i)).unwrap(), Seq(i));
        }
        assert!(t.join().unwrap() <= 6);
    });
}

#[test]
fn snapshot_survives_wraparound() {
    model("snapshot_survives_wraparound", || {
        let (mut p, r) = ring(cfg(2, 1)).unwrap();
        let s = p.open_stream();
        p.publish(&s, payload(1)).unwrap();
        let t = thread::spawn(move || match r.snapshot(Seq(0)) {
            Ok(snap) => {
                // Read after the producer may have lapped the ring twice.
                thread::yield_now();
                let seqs: Vec<u64> = snap.iter().map(|e| e.seq.0).collect();
                let first = snap.first().unwrap().0;
                let last = snap.last().unwrap().0;
                assert_eq!(seqs, (first..=last).collect::<Vec<_>>());
                assert_eq!(first, 1);
                for e in snap.iter() {
                    check_payload(e.seq, e.payload);
                }
            }
            Err(SnapshotError::Evicted { wanted, oldest, missing }) => {
                assert!(wanted < oldest);
                assert_eq!(missing, Missing::Exact(oldest.0 - wanted.0));
            }
            Err(e) => panic!("unexpected {e:?}"),
        });
        for i in 2..=5 {
            p.publish(&s, payload(i)).unwrap();
        }
        t.join().unwrap();
    });
}

#[test]
fn coverage_then_snapshot_has_no_hole() {
    model("coverage_then_snapshot_has_no_hole", || {
        let (mut p, r) = ring(cfg(2, 2)).unwrap();
        let s = p.open_stream();
        p.publish(&s, payload(1)).unwrap();
        let t = thread::spawn(move || {
            let cursor = Seq(1);
            match r.coverage(cursor) {
                Coverage::Covered => match r.snapshot(cursor) {
                    Ok(snap) => {
                        if let Some(f) = snap.first() {
                            assert_eq!(f, Seq(2), "hole after a Covered answer");
                            let n = snap.last().unwrap().0 - f.0 + 1;
                            assert_eq!(snap.iter().count() as u64, n);
                            for e in snap.iter() {
                                check_payload(e.seq, e.payload);
                            }
                        }
                    }
                    // A positive answer may go stale; the snapshot says so.
                    Err(SnapshotError::Evicted { wanted, oldest, .. }) => assert!(wanted < oldest),
                    Err(e) => panic!("unexpected {e:?}"),
                },
                Coverage::Evicted { oldest, missing } => {
                    // Never wrong: seq 2 really is gone, for good.
                    assert!(oldest.0 > 2);
                    assert_eq!(missing, oldest.0 - 2);
                    assert!(r.oldest() >= oldest);
                    assert!(matches!(r.snapshot(cursor), Err(SnapshotError::Evicted { .. })));
                }
                Coverage::Ahead { head } => panic!("cursor 1 is never ahead of {head:?}"),
            }
        });
        for i in 2..=4 {
            p.publish(&s, payload(i)).unwrap();
        }
        t.join().unwrap();
    });
}

/// A per-stream resume (a stream snapshot, then the stream's cursor from
/// after its range) misses no event of the stream while the producer
/// publishes on it and on another stream: the snapshot looks for the
/// stream's events (tag scan or predecessor links) at or below a
/// high-water mark read after the head, so it holds every event of the
/// stream up to the end of its range.
#[test]
fn stream_snapshot_then_follow_has_no_hole() {
    model("stream_snapshot_then_follow_has_no_hole", || {
        let (mut p, r) = ring(cfg(4, 2)).unwrap();
        let (a, b) = (p.open_stream(), p.open_stream());
        let id = a.id();
        p.publish(&a, payload(1)).unwrap();
        let t = thread::spawn(move || {
            let snap = r.snapshot_stream(id, Seq(0)).unwrap();
            let got: Vec<u64> = snap.iter().map(|e| e.seq.0).collect();
            for e in snap.iter() {
                check_payload(e.seq, e.payload);
            }
            let cursor = r.stream_cursor(id, Seq(snap.covered_to().0 + 1)).unwrap();
            (got, cursor)
        });
        p.publish(&b, payload(2)).unwrap();
        p.publish(&a, payload(3)).unwrap();
        let (mut got, mut cursor) = t.join().unwrap();
        // Everything is published now: the follower yields the rest.
        while let Ok(Next::Event(e)) = cursor.try_next() {
            got.push(e.seq.0);
        }
        assert_eq!(got, [1, 3], "the stream's events, each once, none lost");
    });
}

struct Flag {
    woken: AtomicBool,
    thread: thread::Thread,
}

impl Wake for Flag {
    fn wake(self: std::sync::Arc<Self>) {
        // An RMW, not a plain store: loom 0.7 otherwise lets the sleeper's
        // later swap miss this write (seen as a false deadlock report).
        self.woken.swap(true, Ordering::AcqRel);
        self.thread.unpark();
    }
}

/// The waker protocol: a reader that registers and sleeps is always woken by
/// a later publish or by the producer closing (a lost wake-up would leave it
/// parked forever, which loom reports as a deadlock).
#[test]
fn wakeup_is_never_lost() {
    model("wakeup_is_never_lost", || {
        let (mut p, r) = ring(cfg(4, 2)).unwrap();
        let s = p.open_stream();
        let t = thread::spawn(move || {
            let flag = std::sync::Arc::new(Flag { woken: AtomicBool::new(false), thread: thread::current() });
            let waker = Waker::from(flag.clone());
            let mut c = r.cursor(Seq(1));
            let mut next = 1;
            loop {
                match c.try_next().unwrap() {
                    Next::Event(e) => {
                        assert_eq!(e.seq.0, next);
                        next += 1;
                    }
                    Next::End => return next,
                    Next::Pending => {
                        if !c.register(&waker) {
                            continue;
                        }
                        match c.try_next().unwrap() {
                            Next::Pending => {
                                while !flag.woken.swap(false, Ordering::Acquire) {
                                    thread::park();
                                }
                            }
                            Next::Event(e) => {
                                assert_eq!(e.seq.0, next);
                                next += 1;
                            }
                            Next::End => return next,
                        }
                    }
                }
            }
        });
        p.publish(&s, payload(1)).unwrap();
        p.publish(&s, payload(2)).unwrap();
        drop(p);
        assert_eq!(t.join().unwrap(), 3);
    });
}

/// A stream follower is woken when its stream ends.
#[test]
fn stream_end_wakes_follower() {
    model("stream_end_wakes_follower", || {
        let (mut p, r) = ring(cfg(4, 2)).unwrap();
        let s = p.open_stream();
        let id = s.id();
        let t = thread::spawn(move || {
            let flag = std::sync::Arc::new(Flag { woken: AtomicBool::new(false), thread: thread::current() });
            let waker = Waker::from(flag.clone());
            let mut c = r.stream_cursor(id, Seq(1)).unwrap();
            let mut got = 0;
            loop {
                match c.try_next().unwrap() {
                    Next::Event(_) => got += 1,
                    Next::End => return got,
                    Next::Pending => {
                        if !c.register(&waker) {
                            continue;
                        }
                        match c.try_next().unwrap() {
                            Next::Pending => {
                                while !flag.woken.swap(false, Ordering::Acquire) {
                                    thread::park();
                                }
                            }
                            Next::Event(_) => got += 1,
                            Next::End => return got,
                        }
                    }
                }
            }
        });
        p.publish(&s, payload(1)).unwrap();
        p.end_stream(&s);
        assert_eq!(t.join().unwrap(), 1);
        drop(p);
    });
}

/// Drop and reclamation: every chunk (loom `Arc`) is freed exactly once
/// whichever side lets go last; loom reports leaks and double drops.
#[test]
fn drop_and_reclamation() {
    model("drop_and_reclamation", || {
        let (mut p, r) = ring(cfg(2, 1)).unwrap();
        let s = p.open_stream();
        p.publish(&s, payload(1)).unwrap();
        p.publish(&s, payload(2)).unwrap();
        let snap = r.snapshot(Seq(0)).unwrap();
        let t = thread::spawn(move || {
            let n = snap.iter().count();
            drop(snap);
            n
        });
        p.publish(&s, payload(3)).unwrap();
        p.publish(&s, payload(4)).unwrap();
        drop(p);
        assert_eq!(t.join().unwrap(), 2);
        drop(r);
        let _ = Arc::new(()); // keep loom's Arc in scope for leak tracking
    });
}
