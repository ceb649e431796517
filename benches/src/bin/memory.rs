//! `memory`: bytes per retained event and per idle session, counted by a
//! global allocator that tracks live heap bytes.
//!
//! Each figure is the growth of live heap bytes across building the thing,
//! divided by how many were built. Retained events are measured at steady
//! state (3 × capacity events published into a store of capacity 4 096, so
//! that it is full and has been evicting), with 64-byte payloads either
//! shared (clones of one `Bytes`: the store's own overhead) or distinct
//! (one 64-byte buffer per event, counted too). Prints a table and writes
//! `target/gapless-bench/memory.json`.
//!
//! Run: `cargo run --release -p gapless-benches --bin memory`.

use bytes::Bytes;
use gapless::{ring, Event, Hub, HubConfig, RingConfig, Seq, StreamId};
use gapless_benches::harness::{payload, results_dir, PAYLOAD_LEN};
use gapless_benches::{DequeStore, SortScanStore, SpeedOfLight};
use std::alloc::{GlobalAlloc, Layout, System};
use std::hint::black_box;
use std::sync::atomic::{AtomicIsize, Ordering};

/// Live heap bytes.
static LIVE: AtomicIsize = AtomicIsize::new(0);

struct Counting;

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged, so `System`'s guarantees hold; the counter is a side effect.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded; the caller upholds `alloc`'s contract.
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        // SAFETY: forwarded; the caller upholds `alloc_zeroed`'s contract.
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE.fetch_add(layout.size() as isize, Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        LIVE.fetch_sub(layout.size() as isize, Ordering::Relaxed);
        // SAFETY: forwarded; `ptr` came from this allocator with `layout`.
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        // SAFETY: forwarded; the caller upholds `realloc`'s contract.
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE.fetch_add(new_size as isize - layout.size() as isize, Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

fn live() -> isize {
    LIVE.load(Ordering::Relaxed)
}

const CAPACITY: usize = 4096;
const SESSIONS: usize = 1000;

/// Live bytes that `build` leaves behind (it returns what keeps them).
/// Handles are boxed so that their own size counts, as a session's does.
fn growth<T>(build: impl FnOnce() -> T) -> (isize, T) {
    let before = live();
    let kept = build();
    (live() - before, kept)
}

struct Row {
    what: String,
    bytes: f64,
}

fn retained(shared: bool) -> Vec<Row> {
    let one = payload();
    let p = || if shared { one.clone() } else { Bytes::copy_from_slice(&[0xA5; PAYLOAD_LEN]) };
    let n = 3 * CAPACITY;
    let per = |b: isize| b as f64 / CAPACITY as f64;
    let mut rows = Vec::new();

    let (b, kept) = growth(|| {
        let (mut producer, reader) =
            ring(RingConfig::new(CAPACITY, gapless::ring::DEFAULT_BYTE_BUDGET)).unwrap();
        let stream = producer.open_stream();
        for _ in 0..n {
            producer.publish(&stream, p()).unwrap();
        }
        (producer, reader, stream)
    });
    assert_eq!(kept.1.head().0 + 1 - kept.1.oldest().0, CAPACITY as u64);
    rows.push(Row { what: "gapless".into(), bytes: per(b) });
    drop(kept);

    let (b, kept) = growth(|| {
        let (tx, rx) = tokio::sync::broadcast::channel::<Event>(CAPACITY);
        for i in 1..=n as u64 {
            let e = Event { seq: Seq(i), stream: StreamId(1), index_in_stream: i, payload: p() };
            tx.send(e).unwrap();
        }
        (tx, rx)
    });
    rows.push(Row { what: "tokio_broadcast".into(), bytes: per(b) });
    drop(kept);

    let (b, kept) = growth(|| {
        let store = DequeStore::new(CAPACITY);
        for _ in 0..n {
            store.publish(StreamId(1), p());
        }
        store
    });
    rows.push(Row { what: "mutex_deque".into(), bytes: per(b) });
    drop(kept);

    // Never evicts (like the original): filled with exactly `CAPACITY`.
    let (b, kept) = growth(|| {
        let store = SortScanStore::new();
        for _ in 0..CAPACITY {
            black_box(store.store(StreamId(1), p()));
        }
        store
    });
    rows.push(Row { what: "sort_scan".into(), bytes: per(b) });
    drop(kept);

    let (b, kept) = growth(|| {
        let mut sol = SpeedOfLight::new(CAPACITY);
        for _ in 0..n {
            sol.publish(StreamId(1), p());
        }
        sol
    });
    rows.push(Row { what: "speed_of_light".into(), bytes: per(b) });
    drop(kept);
    rows
}

fn idle() -> Vec<Row> {
    let mut rows = Vec::new();
    let per = |b: isize, k: usize| b as f64 / k as f64;

    let hub = Hub::new(HubConfig::default()).unwrap();
    let mut sessions = Vec::with_capacity(SESSIONS);
    let (b, ()) = growth(|| sessions.extend((0..SESSIONS).map(|_| hub.create(None).unwrap())));
    rows.push(Row { what: "gapless session (Hub::create)".into(), bytes: per(b, SESSIONS) });
    let p = payload();
    let (b, ()) = growth(|| {
        for s in &sessions {
            s.publish(s.standalone(), p.clone()).unwrap();
        }
    });
    rows.push(Row { what: "gapless session: first event (one chunk)".into(), bytes: per(b, SESSIONS) });
    drop(sessions);

    let mut rings = Vec::with_capacity(SESSIONS);
    let (b, ()) =
        growth(|| rings.extend((0..SESSIONS).map(|_| Box::new(ring(RingConfig::default()).unwrap()))));
    rows.push(Row { what: "gapless ring alone (ring())".into(), bytes: per(b, SESSIONS) });
    drop(rings);

    let mut chans = Vec::with_capacity(SESSIONS);
    let (b, ()) = growth(|| {
        chans.extend((0..SESSIONS).map(|_| Box::new(tokio::sync::broadcast::channel::<Event>(CAPACITY))))
    });
    rows.push(Row { what: "tokio_broadcast channel(4096)".into(), bytes: per(b, SESSIONS) });
    drop(chans);

    let mut deques = Vec::with_capacity(SESSIONS);
    let (b, ()) = growth(|| deques.extend((0..SESSIONS).map(|_| Box::new(DequeStore::new(CAPACITY)))));
    rows.push(Row { what: "mutex_deque (empty)".into(), bytes: per(b, SESSIONS) });
    drop(deques);
    rows
}

fn json_rows(rows: &[Row]) -> String {
    let items: Vec<String> =
        rows.iter().map(|r| format!("    {{\"what\": \"{}\", \"bytes\": {:.1}}}", r.what, r.bytes)).collect();
    format!("[\n{}\n  ]", items.join(",\n"))
}

fn main() {
    let shared = retained(true);
    let distinct = retained(false);
    let idle = idle();
    println!("bytes per retained event (capacity {CAPACITY}, {PAYLOAD_LEN}-byte payloads, steady state)");
    println!("{:<20} {:>14} {:>16}", "store", "shared payload", "distinct payload");
    for (s, d) in shared.iter().zip(&distinct) {
        println!("{:<20} {:>14.1} {:>16.1}", s.what, s.bytes, d.bytes);
    }
    println!();
    println!("bytes per idle session ({SESSIONS} built)");
    for r in &idle {
        println!("{:<44} {:>10.0}", r.what, r.bytes);
    }
    let json = format!(
        "{{\n  \"capacity\": {CAPACITY},\n  \"payload_len\": {PAYLOAD_LEN},\n  \"retained_shared\": {},\n  \
         \"retained_distinct\": {},\n  \"idle\": {}\n}}\n",
        json_rows(&shared),
        json_rows(&distinct),
        json_rows(&idle)
    );
    let path = results_dir().join("memory.json");
    std::fs::write(&path, json).expect("write memory results");
    println!("\nmemory: wrote {}", path.display());
}
