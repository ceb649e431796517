//! Multi-threaded stress: one producer thread, spinning cursors, concurrent
//! snapshots and coverage checks. Every event read is checked against the
//! publishing pattern, so a torn, skipped, repeated or misfiled event fails.
//!
//! Pattern: event `seq` carries `seq` as 8 little-endian bytes (plus
//! `pad(seq)` filler bytes) and is published on stream `(seq - 1) % 3 + 1`
//! as that stream's `(seq - 1) / 3 + 1`-th event.
//!
//! Sizes stay small enough for a debug build on 2 cores, and shrink to a
//! few hundred events under Miri (`scripts/miri.sh`).

mod support;
use bytes::Bytes;
use gapless::ring::{
    ring, Coverage, Event, EventRef, Lagged, Missing, Next, Producer, Reader, RingConfig, Snapshot,
    SnapshotError, StreamHandle,
};
use gapless::{Seq, StreamId};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::Duration;
use support::Rng;

const STREAMS: u64 = 3;

/// Filler bytes of event `seq` beyond its 8-byte seq.
type Pad = fn(u64) -> usize;

fn no_pad(_: u64) -> usize {
    0
}

fn mixed_pad(seq: u64) -> usize {
    (seq.wrapping_mul(0x9e37_79b9) % 41) as usize
}

fn payload(seq: u64, pad: Pad) -> Bytes {
    let mut v = Vec::with_capacity(8 + pad(seq));
    v.extend_from_slice(&seq.to_le_bytes());
    v.resize(8 + pad(seq), 0xa5);
    Bytes::from(v)
}

fn stream_of(seq: u64) -> StreamId {
    StreamId((seq - 1) % STREAMS + 1)
}

/// The first seq `>= from` published on `stream`.
fn next_of_stream(stream: StreamId, from: u64) -> u64 {
    let want = stream.0 - 1;
    let have = (from - 1) % STREAMS;
    from + (want + STREAMS - have) % STREAMS
}

/// The last seq `<= n` published on `stream`.
fn last_of_stream(stream: StreamId, n: u64) -> u64 {
    let have = (n - 1) % STREAMS;
    n - (have + STREAMS - (stream.0 - 1)) % STREAMS
}

fn check(seq: Seq, stream: StreamId, index_in_stream: u64, payload_bytes: &Bytes, pad: Pad) {
    let s = seq.0;
    assert_eq!(payload_bytes.len(), 8 + pad(s), "payload length of seq {s}");
    assert_eq!(u64::from_le_bytes(payload_bytes[..8].try_into().unwrap()), s, "payload of seq {s}");
    assert_eq!(stream, stream_of(s), "stream of seq {s}");
    assert_eq!(index_in_stream, (s - 1) / STREAMS + 1, "index in stream of seq {s}");
}

fn check_event(e: &Event, pad: Pad) {
    check(e.seq, e.stream, e.index_in_stream, &e.payload, pad);
}

fn check_ref(e: &EventRef<'_>, pad: Pad) {
    check(e.seq, e.stream, e.index_in_stream, e.payload, pad);
}

/// Backs off while a cursor is `Pending`: spin a little, then yield.
fn idle(spins: &mut u32) {
    *spins += 1;
    if (*spins).is_multiple_of(8) {
        thread::yield_now();
    } else {
        std::hint::spin_loop();
    }
}

struct Scenario {
    config: RingConfig,
    events: u64,
    pad: Pad,
    /// Whole-ring followers that keep up as well as they can.
    fast_readers: usize,
    /// Whole-ring followers that sleep now and then (they lag on a small ring).
    slow_readers: usize,
    snapshotters: usize,
}

#[derive(Debug, Default)]
struct Outcome {
    fast_lags: u64,
    slow_lags: u64,
    stream_lags: u64,
    snapshots_ok: u64,
    snapshots_evicted: u64,
}

fn produce(mut p: Producer, streams: Vec<StreamHandle>, config: RingConfig, n: u64, pad: Pad) {
    for seq in 1..=n {
        let s = &streams[((seq - 1) % STREAMS) as usize];
        assert_eq!(p.publish(s, payload(seq, pad)), Ok(Seq(seq)));
        assert!(p.retained_bytes() <= config.byte_budget, "byte budget exceeded at {seq}");
        assert!(seq + 1 - p.oldest().0 <= config.capacity as u64, "capacity exceeded at {seq}");
        if seq % 1024 == 0 {
            thread::yield_now();
        }
    }
    for s in &streams {
        p.end_stream(s);
    }
}

/// Follows the whole ring from seq 1 to the end; returns how often it lagged.
fn follow_ring(r: Reader, n: u64, pad: Pad, slow: bool) -> u64 {
    let mut c = r.cursor(Seq(1));
    let (mut expected, mut lags, mut spins) = (1u64, 0u64, 0u32);
    loop {
        match c.try_next() {
            Ok(Next::Event(e)) => {
                assert_eq!(e.seq.0, expected, "cursor skipped or repeated");
                check_event(&e, pad);
                expected += 1;
                if slow && expected % 32 == 0 {
                    thread::sleep(Duration::from_micros(50));
                }
            }
            Ok(Next::Pending) => idle(&mut spins),
            Ok(Next::End) => break,
            Err(Lagged { wanted, oldest }) => {
                assert_eq!(wanted.0, expected, "lag reported for the seq the cursor needed");
                assert!(oldest > wanted, "lagged but {wanted} is still retained (oldest {oldest})");
                lags += 1;
                c.seek(oldest);
                expected = oldest.0;
            }
        }
    }
    assert_eq!(expected, n + 1, "End before the last event");
    assert!(r.is_closed());
    lags
}

/// Follows one stream to its end; returns how often it lagged.
fn follow_stream(r: Reader, stream: StreamId, n: u64, pad: Pad) -> u64 {
    let mut c = r.stream_cursor(stream, Seq(0)).expect("stream opened before the threads start");
    let (mut expected, mut last, mut lags, mut spins) = (next_of_stream(stream, 1), 0u64, 0u64, 0u32);
    loop {
        match c.try_next() {
            Ok(Next::Event(e)) => {
                assert_eq!(e.seq.0, expected, "stream cursor skipped or repeated");
                check_event(&e, pad);
                last = e.seq.0;
                expected += STREAMS;
            }
            Ok(Next::Pending) => idle(&mut spins),
            Ok(Next::End) => break,
            Err(Lagged { wanted, oldest }) => {
                assert!(
                    wanted.0 > last && wanted.0 <= expected,
                    "lag at {wanted}: last {last}, expected {expected}"
                );
                assert!(oldest > wanted);
                // Only a lost event of its own stream makes a stream cursor lag.
                assert!(
                    r.oldest().0 > expected,
                    "stream cursor lagged though its next event {expected} is retained"
                );
                lags += 1;
                c.seek(oldest);
                expected = next_of_stream(stream, oldest.0);
            }
        }
    }
    assert_eq!(last, last_of_stream(stream, n), "stream cursor ended before the stream's last event");
    lags
}

fn verify_snapshot(snap: &Snapshot, after: u64, pad: Pad) {
    let mut expected = after + 1;
    for e in snap {
        assert_eq!(e.seq.0, expected, "snapshot not dense");
        check_ref(&e, pad);
        expected += 1;
    }
    let count = expected - after - 1;
    assert_eq!(snap.len() as u64, count);
    assert_eq!(snap.first(), (count > 0).then_some(Seq(after + 1)));
    assert_eq!(snap.last(), (count > 0).then_some(Seq(expected - 1)));
    assert_eq!(snap.covered_to(), Seq(expected - 1));
}

fn verify_stream_snapshot(snap: &Snapshot, stream: StreamId, after: u64, pad: Pad) {
    let mut prev: Option<u64> = None;
    for e in snap {
        check_ref(&e, pad);
        assert_eq!(e.stream, stream, "stream snapshot yielded another stream's event");
        match prev {
            None => assert_eq!(
                e.seq.0,
                next_of_stream(stream, after + 1),
                "stream snapshot missed its first event"
            ),
            Some(p) => assert_eq!(e.seq.0, p + STREAMS, "stream snapshot not dense in its stream"),
        }
        prev = Some(e.seq.0);
    }
    assert_eq!(snap.last().map(|s| s.0), prev);
    assert!(snap.covered_to().0 >= prev.unwrap_or(0));
}

/// Takes whole-ring and per-stream snapshots at random cursors around the
/// retained window until the producer is gone; re-verifies a few pinned ones
/// later. Returns (ok, evicted).
fn snapshot_loop(r: Reader, seed: u64, pad: Pad, done: &AtomicBool) -> (u64, u64) {
    let mut rng = Rng(seed);
    let (mut ok, mut evicted) = (0u64, 0u64);
    let mut kept: Vec<(Snapshot, u64, Option<StreamId>)> = Vec::new();
    let mut last = false;
    while !last {
        last = done.load(Ordering::Acquire);
        let head = r.head().0;
        let oldest = r.oldest().0;
        // Mostly covered cursors, some just evicted ones.
        // `oldest` is loaded after `head` and may have passed it since.
        let lo = oldest.saturating_sub(3).min(head);
        let after = lo + rng.next() % (head - lo + 1);
        match rng.next() % 2 {
            0 => match r.snapshot(Seq(after)) {
                Ok(snap) => {
                    verify_snapshot(&snap, after, pad);
                    assert!(snap.covered_to().0 >= head, "snapshot shorter than the head seen before it");
                    ok += 1;
                    if kept.len() < 4 {
                        kept.push((snap, after, None));
                    }
                }
                Err(SnapshotError::Evicted { wanted, oldest, missing }) => {
                    assert_eq!(wanted.0, after + 1);
                    assert!(oldest > wanted);
                    assert_eq!(missing, Missing::Exact(oldest.0 - wanted.0));
                    evicted += 1;
                }
                Err(e) => panic!("snapshot({after}) with head {head}: {e:?}"),
            },
            _ => {
                let stream = StreamId(1 + rng.next() % STREAMS);
                match r.snapshot_stream(stream, Seq(after)) {
                    Ok(snap) => {
                        verify_stream_snapshot(&snap, stream, after, pad);
                        ok += 1;
                        if kept.len() < 8 {
                            kept.push((snap, after, Some(stream)));
                        }
                    }
                    Err(SnapshotError::Evicted { wanted, oldest, missing }) => {
                        assert_eq!(wanted.0, after + 1);
                        assert!(oldest > wanted);
                        assert!(missing.count() >= 1);
                        evicted += 1;
                    }
                    Err(e) => panic!("snapshot_stream({stream}, {after}) with head {head}: {e:?}"),
                }
            }
        }
        // Re-check a pinned snapshot now that the ring has moved on.
        if !kept.is_empty() && rng.next().is_multiple_of(4) {
            let (snap, after, stream) = kept.swap_remove((rng.next() % kept.len() as u64) as usize);
            match stream {
                None => verify_snapshot(&snap, after, pad),
                Some(s) => verify_stream_snapshot(&snap, s, after, pad),
            }
        }
        thread::yield_now();
    }
    for (snap, after, stream) in &kept {
        match stream {
            None => verify_snapshot(snap, *after, pad),
            Some(s) => verify_stream_snapshot(snap, *s, *after, pad),
        }
    }
    (ok, evicted)
}

/// Checks `head`/`oldest`/`coverage` answers for consistency until done.
fn coverage_loop(r: Reader, capacity: u64, seed: u64, done: &AtomicBool) {
    let mut rng = Rng(seed);
    let (mut prev_head, mut prev_oldest) = (0u64, 1u64);
    let mut last = false;
    while !last {
        last = done.load(Ordering::Acquire);
        let h1 = r.head().0;
        let o = r.oldest().0;
        let h2 = r.head().0;
        assert!(h1 >= prev_head && o >= prev_oldest, "head or oldest went backwards");
        assert!(h2 >= h1);
        assert!(o <= h2 + 1, "oldest {o} past head {h2} + 1");
        assert!(h1 + 1 - o.min(h1 + 1) <= capacity, "window {o}..={h1} larger than capacity");
        (prev_head, prev_oldest) = (h2, o);
        let cursor = o.saturating_sub(2) + rng.next() % 5;
        match r.coverage(Seq(cursor)) {
            Coverage::Covered => {
                assert!(cursor + 1 >= o, "covered, but {cursor} + 1 < oldest {o} seen before")
            }
            Coverage::Evicted { oldest, missing } => {
                assert!(oldest.0 >= o);
                assert_eq!(missing, oldest.0 - 1 - cursor);
            }
            Coverage::Ahead { head } => assert!(head.0 < cursor && head.0 >= h2),
        }
        thread::yield_now();
    }
}

fn run(sc: Scenario) -> Outcome {
    let (mut p, r) = ring(sc.config).expect("valid config");
    let streams: Vec<StreamHandle> = (0..STREAMS).map(|_| p.open_stream()).collect();
    assert_eq!(streams.iter().map(|s| s.id().0).collect::<Vec<_>>(), (1..=STREAMS).collect::<Vec<_>>());
    let done = Arc::new(AtomicBool::new(false));
    let (n, pad, config) = (sc.events, sc.pad, sc.config);
    let mut out = Outcome::default();
    thread::scope(|scope| {
        let fast: Vec<_> = (0..sc.fast_readers)
            .map(|_| {
                let r = r.clone();
                scope.spawn(move || follow_ring(r, n, pad, false))
            })
            .collect();
        let slow: Vec<_> = (0..sc.slow_readers)
            .map(|_| {
                let r = r.clone();
                scope.spawn(move || follow_ring(r, n, pad, true))
            })
            .collect();
        let by_stream = {
            let r = r.clone();
            scope.spawn(move || follow_stream(r, StreamId(2), n, pad))
        };
        let snaps: Vec<_> = (0..sc.snapshotters)
            .map(|i| {
                let (r, done) = (r.clone(), Arc::clone(&done));
                scope.spawn(move || snapshot_loop(r, 1 + i as u64, pad, &done))
            })
            .collect();
        let cov = {
            let (r, done) = (r.clone(), Arc::clone(&done));
            let cap = sc.config.capacity as u64;
            scope.spawn(move || coverage_loop(r, cap, 99, &done))
        };
        let producer = scope.spawn(move || {
            produce(p, streams, config, n, pad);
            done.store(true, Ordering::Release);
        });
        producer.join().expect("producer");
        out.fast_lags = fast.into_iter().map(|h| h.join().expect("fast reader")).sum();
        out.slow_lags = slow.into_iter().map(|h| h.join().expect("slow reader")).sum();
        out.stream_lags = by_stream.join().expect("stream reader");
        for h in snaps {
            let (ok, ev) = h.join().expect("snapshotter");
            out.snapshots_ok += ok;
            out.snapshots_evicted += ev;
        }
        cov.join().expect("coverage checker");
    });
    assert_eq!(r.head(), Seq(n));
    eprintln!("{out:?}");
    out
}

#[test]
fn stress_followers_and_snapshots() {
    let out = run(Scenario {
        config: RingConfig { capacity: 1024, byte_budget: 1 << 20, chunk_events: 64 },
        events: if cfg!(miri) { 200 } else { 500_000 },
        pad: no_pad,
        fast_readers: 2,
        slow_readers: 0,
        snapshotters: 1,
    });
    assert!(out.snapshots_ok > 0);
}

#[test]
fn stress_small_ring_lags_are_explicit() {
    let out = run(Scenario {
        config: RingConfig { capacity: 48, byte_budget: 1 << 20, chunk_events: 8 },
        events: if cfg!(miri) { 200 } else { 200_000 },
        pad: no_pad,
        fast_readers: 1,
        slow_readers: 1,
        snapshotters: 1,
    });
    if !cfg!(miri) {
        assert!(
            out.slow_lags > 0,
            "a sleeping reader on a 48-event ring never lagged: the test lost its point"
        );
    }
}

#[test]
fn stress_small_byte_budget() {
    // About 6 to 12 events fit; capacity never binds.
    let out = run(Scenario {
        config: RingConfig { capacity: 1024, byte_budget: 160, chunk_events: 16 },
        events: if cfg!(miri) { 200 } else { 200_000 },
        pad: mixed_pad,
        fast_readers: 1,
        slow_readers: 1,
        snapshotters: 1,
    });
    if !cfg!(miri) {
        assert!(out.slow_lags > 0, "a sleeping reader on a 160-byte ring never lagged");
    }
}

/// Stream records are opened, published on, ended and reclaimed by the
/// producer while readers look them up, follow them and snapshot them. (This
/// also races arc-swap loads of the stream directory against its stores.)
#[test]
fn stress_stream_directory_churn() {
    let streams = if cfg!(miri) { 60 } else { 20_000 };
    let (mut p, r) = ring(RingConfig::new(16, 1 << 20)).expect("valid config");
    let done = Arc::new(AtomicBool::new(false));
    thread::scope(|scope| {
        let checkers: Vec<_> = (0..2u64)
            .map(|i| {
                let (r, done) = (r.clone(), Arc::clone(&done));
                scope.spawn(move || {
                    let mut rng = Rng(i + 7);
                    let mut last = false;
                    let mut seen = 0u64;
                    while !last {
                        last = done.load(Ordering::Acquire);
                        let opened = r.streams_opened();
                        if opened == 0 {
                            thread::yield_now();
                            continue;
                        }
                        // Mostly recent streams, some old ones.
                        let id = StreamId(opened - rng.next() % opened.min(24));
                        // Every stream publishes two consecutive seqs, then ends.
                        if let Some(info) = r.stream(id) {
                            seen += 1;
                            assert_eq!(info.id, id);
                            assert!(info.published <= 2);
                            // The fields are separate atomics, read one after the
                            // other: only check what holds across such reads.
                            if info.first.0 != 0 && info.high.0 != 0 {
                                assert!(info.high >= info.first && info.high.0 <= info.first.0 + 1);
                            }
                            if let Ok(snap) = r.snapshot_stream(id, Seq(0)) {
                                for e in &snap {
                                    assert_eq!(e.stream, id);
                                    assert_eq!(
                                        u64::from_le_bytes(e.payload[..8].try_into().unwrap()),
                                        e.seq.0
                                    );
                                }
                            }
                        }
                        if let Some(mut c) = r.stream_cursor(id, Seq(0)) {
                            let mut prev = 0;
                            while let Ok(Next::Event(e)) = c.try_next() {
                                assert_eq!(e.stream, id);
                                assert!(e.seq.0 > prev);
                                prev = e.seq.0;
                            }
                        }
                        thread::yield_now();
                    }
                    seen
                })
            })
            .collect();
        let producer = scope.spawn(move || {
            for _ in 0..streams {
                let s = p.open_stream();
                for i in 0..2 {
                    let seq = p.head().0 + 1;
                    assert_eq!(p.publish(&s, payload(seq, no_pad)), Ok(Seq(seq)));
                    // Delivered, as a transport would: finished streams whose
                    // events were all delivered are reclaimed promptly (the
                    // undelivered ones are kept, boundedly; see ring.rs).
                    let ev = gapless::Event {
                        seq: Seq(seq),
                        stream: s.id(),
                        index_in_stream: i + 1,
                        payload: Bytes::new(),
                    };
                    assert!(s.mark_delivered(&ev));
                }
                p.end_stream(&s);
            }
            done.store(true, Ordering::Release);
        });
        producer.join().expect("producer");
        for c in checkers {
            assert!(c.join().expect("checker") > 0);
        }
    });
    let live = (1..=r.streams_opened()).filter(|&id| r.stream(StreamId(id)).is_some()).count();
    assert!(live <= 64, "{live} stream records kept with 16 retained events");
}

/// `docs/SPEC.md` §4.2, row 6, migration form, racing eviction: while an
/// event at or below the cursor was never delivered, no migration check is
/// granted, however the producer moves the window during the check (it
/// reads the window's start, then pins the window: a chunk recycled in
/// between must not leave the check without its evidence).
#[test]
fn stress_migration_check_racing_eviction_never_skips_an_undelivered_event() {
    use gapless::{Hub, HubConfig, ResumeRequest};
    let ring = RingConfig { chunk_events: 1, ..RingConfig::new(8, 1 << 20) };
    let hub = Hub::new(HubConfig { ring, ..HubConfig::default() }).unwrap();
    let s = hub.create(None).unwrap();
    let sid = s.id().to_string();
    let hot = s.open_stream().unwrap();
    let cold = s.open_stream().unwrap(); // never delivered
    let done = AtomicBool::new(false);
    let checks = if cfg!(miri) { 50 } else { 20_000 };
    let granted = thread::scope(|scope| {
        scope.spawn(|| {
            let mut index = 0;
            while !done.load(Ordering::Acquire) {
                let seq = s.publish(&hot, Bytes::new()).unwrap();
                index += 1;
                let ev =
                    gapless::Event { seq, stream: hot.id(), index_in_stream: index, payload: Bytes::new() };
                assert!(hot.mark_delivered(&ev));
            }
        });
        let mut granted = Vec::new();
        for _ in 0..checks {
            let u = s.publish(&cold, Bytes::new()).unwrap();
            // A cursor at or after `u`: the newest event (of either stream).
            let head = s.reader().head();
            let Some(stream) = s.reader().stream_of(head) else { continue };
            let cursor = s.event_id(stream, head).to_string();
            if let Ok(r) = hub.check_migration(ResumeRequest::new(&sid).cursor(&cursor)) {
                granted.push((u, r.after));
            }
        }
        done.store(true, Ordering::Release);
        granted
    });
    assert!(granted.is_empty(), "granted past never-delivered events (seq, cursor): {granted:?}");
}
