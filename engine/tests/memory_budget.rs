//! Memory, measured with a counting allocator.
//!
//! * A ring's heap stays within its byte budget, the cells of its window
//!   and one chunk, plus a constant, with payloads made by `exact_bytes`
//!   from `Vec`s that had twice the capacity they needed.
//! * The hub's memory budget: a flood of sessions that each fill a large
//!   ring and are never read stays within the budget plus a constant, the
//!   flood's rings are evicted explicitly (a resume is refused with the
//!   numbers), and a canary session that is being read loses nothing.
//!
//! The tests take turns (`SERIAL`): the hub's tests count the whole
//! process's allocations; the ring's test counts its own thread's, which
//! the test harness's thread cannot disturb.

use bytes::Bytes;
use gapless::{ErrorKind, Hub, HubConfig, ResumeRequest, RingConfig, Seq, SessionError};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

/// Live heap bytes, and the most there ever were.
struct Counting;
static LIVE: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);
thread_local! {
    /// Bytes allocated minus bytes freed by this thread: exact for a test
    /// whose allocations stay on its thread, whatever other threads do.
    static MINE: std::cell::Cell<isize> = const { std::cell::Cell::new(0) };
}

/// This thread's [`MINE`].
fn mine() -> isize {
    MINE.with(|c| c.get())
}

// SAFETY: every call forwards to the system allocator with the caller's
// layout; the counters only observe.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        // SAFETY: forwarded as is; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = LIVE.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
            // `try_with`: nothing to count once the thread is exiting.
            let _ = MINE.try_with(|c| c.set(c.get() + l.size() as isize));
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size(), Ordering::Relaxed);
        let _ = MINE.try_with(|c| c.set(c.get() - l.size() as isize));
        // SAFETY: `p` came from `alloc` with this layout.
        unsafe { System.dealloc(p, l) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const MIB: usize = 1 << 20;

/// One measuring test at a time: the counter sees every thread.
static SERIAL: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn serial() -> std::sync::MutexGuard<'static, ()> {
    SERIAL.lock().unwrap_or_else(|e| e.into_inner())
}

/// A ring whose byte budget binds (not its capacity) holds, at every
/// publish, at most: its retained payloads as allocated (payloads of 512 B
/// to 8 KiB made the way `serde_json::to_vec` leaves them, with twice the
/// capacity they need, and passed through `exact_bytes`, after which each
/// allocation is the payload's length); the evicted payloads still in the
/// one chunk that is partly evicted; the cells of the chunks of its window
/// and a spare; and a constant (slot table, stream record, the ring's
/// shared state), measured before the first publish. Without `exact_bytes`
/// the same ring holds twice its budget, and this fails.
#[test]
fn a_ring_holds_its_byte_budget_one_chunk_and_a_constant() {
    let _turn = serial();
    let budget = MIB;
    let config = RingConfig { capacity: 4096, byte_budget: budget, chunk_events: 64 };
    let n = 20_000usize;
    let mut lens = Vec::with_capacity(n + 1); // by seq; allocated before counting
    lens.push(0usize);
    // This thread's count, not the process's: the test harness's own
    // thread allocates at times (the output of the test that ended), and
    // the ring lives on this thread alone.
    let before = mine();
    let (mut p, _r) = gapless::ring::ring(config).unwrap();
    let stream = p.open_stream();
    let constant = (mine() - before) as usize;
    // Cells: 56 bytes per event on 64-bit targets (stream, position,
    // predecessor, `Bytes`) and a 4-byte stream tag, plus a chunk header
    // each.
    let chunk = 64 * (56 + 4) + 64;
    // Exactly the payload: no spare capacity, no shared header.
    let alloc = |len: usize| len;
    let (mut peak, mut held_events) = (0, 0);
    for i in 0..n {
        let len = 512 + (i * 7919) % (8192 - 512);
        // As `serde_json::to_vec` leaves them (twice the capacity), or
        // with a little spare capacity, as `format!` often does.
        let mut v = Vec::with_capacity(if i % 2 == 0 { 2 * len } else { len + 16 });
        v.resize(len, i as u8);
        p.publish(&stream, gapless::ring::exact_bytes(v)).unwrap();
        lens.push(len);
        let live = (mine() - before) as usize;
        peak = peak.max(live);
        let (oldest, head) = (p.oldest().0 as usize, p.head().0 as usize);
        held_events = held_events.max(head + 1 - oldest);
        let retained: usize = lens[oldest..=head].iter().map(|&l| alloc(l)).sum();
        let dead: usize = lens[(oldest - 1) / 64 * 64 + 1..oldest].iter().map(|&l| alloc(l)).sum();
        // The window's chunks, the one being written and a spare.
        let chunks = (head + 1 - oldest).div_ceil(64) + 2;
        let bound = retained + dead + chunks * chunk + constant;
        assert!(live <= bound, "publish {i}: {live} bytes live, bound {bound}");
        assert!(p.retained_bytes() <= budget);
    }
    // Not vacuous: the budget bound, not the capacity (about 240 events of
    // 4.3 KiB on average fill 1 MiB).
    assert!(held_events < 400, "{held_events} events held: the budget did not bind");
    assert!(peak > budget * 3 / 4, "peak {peak}: the ring never filled its budget");
}

/// `exact_bytes` leaves exactly the payload's length allocated, whatever
/// spare capacity its `Vec` had, small or large: no spare bytes and no
/// shared header (which `Bytes::from` allocates for a `Vec` with spare
/// capacity).
#[test]
fn exact_bytes_allocates_exactly_the_length() {
    let _turn = serial();
    for (len, cap) in [(100, 100), (100, 116), (100, 200), (5000, 5001), (70_000, 70_016), (70_000, 140_000)]
    {
        let mut v = Vec::with_capacity(cap);
        v.resize(len, 7u8);
        let before = mine();
        let b = gapless::ring::exact_bytes(v);
        let after = mine();
        assert_eq!(after + cap as isize, before + len as isize, "len {len}, capacity {cap}");
        assert_eq!((b.len(), b[len - 1]), (len, 7));
        // Cloning it (a shared reference, as a second reader would take)
        // then allocates the header once.
        let c = b.clone();
        drop((b, c));
        assert_eq!(mine() + cap as isize, before, "all freed: len {len}");
    }
}

/// Every live session of `hub` together keeps at most the budget plus a
/// granule per session alive, and the whole process at most that plus the
/// test's own allocations (a few MiB, measured before the flood).
#[test]
fn a_flood_stays_within_the_budget_and_a_read_canary_loses_nothing() {
    let _turn = serial();
    let budget = 32 * MIB;
    let hub = Arc::new(
        Hub::new(HubConfig {
            // Each ring alone could hold 16 MiB: 64 of them would be 1 GiB.
            ring: RingConfig::new(4096, 16 * MIB),
            max_sessions: 256,
            max_memory: budget,
            ..HubConfig::default()
        })
        .unwrap(),
    );
    // The canary: published to throughout, read as it goes.
    let canary = hub.create(None).unwrap();
    let stream = canary.open_stream().unwrap();
    let mut sub = canary.subscribe_stream(stream.id(), Seq(0)).unwrap();
    let baseline = LIVE.load(Ordering::Relaxed);
    PEAK.store(baseline, Ordering::Relaxed);
    let mut next = 1u64;
    let payload = |n: usize| Bytes::from(vec![7u8; n]);
    let mut flood = Vec::new();
    for s in 0..64 {
        let victim = hub.create(None).expect("eviction makes room for a new session");
        let st = victim.open_stream().unwrap();
        for _ in 0..1000 {
            victim.publish(&st, payload(4096)).unwrap();
        }
        flood.push((victim, st));
        // The canary goes on, and its reader keeps up.
        for _ in 0..50 {
            canary.publish(&stream, Bytes::from(format!("{next}"))).unwrap();
            next += 1;
        }
        while let Ok(gapless::Next::Event(e)) = sub.try_recv() {
            if !e.payload.is_empty() {
                let got: u64 = std::str::from_utf8(&e.payload).unwrap().parse().unwrap();
                assert_eq!(got, e.index_in_stream, "the canary's events arrive dense, in order");
            }
        }
        assert!(hub.memory_used() <= budget + budget / 8, "after {s} sessions: {} used", hub.memory_used());
    }
    let peak = PEAK.load(Ordering::Relaxed) - baseline;
    // The slack: a granule per session (an eighth of the budget), one
    // 4 KiB payload in flight, allocator rounding of the chunk tables.
    assert!(peak <= budget + budget / 4, "peak heap {} MiB over a {} MiB budget", peak / MIB, budget / MIB);
    // The canary's reader saw every event, none was evicted under it.
    assert_eq!(canary.reader().stream(stream.id()).unwrap().published, next - 1);
    assert!(matches!(sub.try_recv(), Ok(gapless::Next::Pending)), "nothing left, no lag");
    // The flood's first rings lost their oldest events, explicitly.
    let (first, st) = &flood[0];
    let snap = first.reader().snapshot_stream(st.id(), Seq(0));
    assert!(matches!(snap, Err(gapless::SnapshotError::Evicted { .. })), "{snap:?}");
    // A migration from "processed nothing" is refused with the numbers.
    let sid = first.id().to_string();
    let r = hub.check_migration(ResumeRequest::new(&sid)).unwrap_err();
    assert_eq!(r.kind(), ErrorKind::GapNotCovered, "{r}");
}

/// When evicting cannot make room (every ring is down to the chunk it is
/// writing), a new session is refused, and a session that goes frees its
/// share.
#[test]
fn new_sessions_are_refused_only_when_eviction_cannot_make_room() {
    let _turn = serial();
    let ring = RingConfig { capacity: 64, byte_budget: MIB, chunk_events: 64 };
    let hub =
        Hub::new(HubConfig { ring, max_sessions: 10_000, max_memory: 256 << 10, ..HubConfig::default() })
            .unwrap();
    let mut live = Vec::new();
    let refused = loop {
        match hub.create(None) {
            Ok(s) => live.push(s),
            Err(e) => break e,
        }
        assert!(live.len() < 10_000, "never refused");
    };
    assert!(matches!(refused, SessionError::MemoryExhausted { limit } if limit == 256 << 10), "{refused:?}");
    assert!(hub.memory_used() <= 256 << 10);
    let gone = live.pop().unwrap();
    hub.remove(&gone.id());
    assert!(hub.create(None).is_ok(), "a removed session's share is free again");
}

/// A new session asks the budget for room for everything its ring holds
/// from the start, its standalone stream's record included: with room for
/// exactly one session, that session is admitted and the total stays
/// within the limit, and a second one is refused; with a byte less, none
/// is admitted.
#[test]
fn a_session_is_admitted_with_everything_it_holds_counted() {
    let _turn = serial();
    let ring = RingConfig { capacity: 64, byte_budget: MIB, chunk_events: 64 };
    // One session's footprint, measured on a hub without a memory limit.
    let probe = Hub::new(HubConfig { ring, ..HubConfig::default() }).unwrap();
    let one = probe.create(None).unwrap().footprint();
    let hub = Hub::new(HubConfig { ring, max_memory: one, ..HubConfig::default() }).unwrap();
    let s = hub.create(None).unwrap();
    assert_eq!(s.footprint(), one);
    assert!(hub.memory_used() <= one, "{} used, limit {one}", hub.memory_used());
    assert!(matches!(hub.create(None), Err(SessionError::MemoryExhausted { .. })));
    let short = Hub::new(HubConfig { ring, max_memory: one - 1, ..HubConfig::default() }).unwrap();
    let r = short.create(None);
    assert!(matches!(r, Err(SessionError::MemoryExhausted { .. })), "admitted: {} used", short.memory_used());
    assert_eq!(short.memory_used(), 0);
}
