//! `Session::lease` (docs/SPEC.md §3.10): a run of publishes under one hold
//! of the session's writer, the budget charged per chunk.

use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::{Hub, HubConfig, Seq, SessionPublishError};
use std::sync::Arc;

fn payload(n: u64) -> Bytes {
    Bytes::from(n.to_string())
}

/// A lease's publishes get the next seqs, interleave with other writers'
/// only at its chunk boundaries, and a reader sees every event of each.
#[test]
fn a_lease_and_other_writers_share_the_ring_without_a_hole() {
    let ring = RingConfig { capacity: 1024, byte_budget: 1 << 20, chunk_events: 16 };
    let hub = Hub::new(HubConfig { ring, ..HubConfig::default() }).unwrap();
    let s = hub.create(None).unwrap();
    let (a, b) = (s.open_stream().unwrap(), s.open_stream().unwrap());
    let other = {
        let (s, b) = (Arc::clone(&s), b.clone());
        std::thread::spawn(move || {
            (1..=200u64).map(|i| s.publish(&b, payload(i)).unwrap().0).collect::<Vec<_>>()
        })
    };
    let mut mine = Vec::new();
    {
        let mut lease = s.lease().unwrap();
        for i in 1..=300u64 {
            mine.push(lease.publish(&a, payload(i)).unwrap().0);
        }
    }
    let theirs = other.join().unwrap();
    // Between two chunk boundaries the lease's seqs are consecutive: no
    // other writer got in.
    for w in mine.windows(2) {
        if w[1] != w[0] + 1 {
            assert_eq!(w[0] % 16, 0, "another writer got in at seq {} inside a chunk", w[0] + 1);
        }
    }
    let mut all: Vec<u64> = mine.iter().chain(&theirs).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (all[0]..all[0] + 500).collect::<Vec<_>>(), "dense seqs, none twice");
    // Each stream's events, in order, with their payloads.
    for (h, n) in [(&a, 300u64), (&b, 200)] {
        let snap = s.reader().snapshot_stream(h.id(), Seq(0)).unwrap();
        let got: Vec<u64> =
            snap.iter().map(|e| std::str::from_utf8(e.payload).unwrap().parse().unwrap()).collect();
        assert_eq!(got, (1..=n).collect::<Vec<_>>());
    }
}

/// A lease refuses what `Session::publish` refuses, leaves the ring as it
/// was when it does, and a closed session's lease says `Closed`.
#[test]
fn a_lease_refuses_as_publish_does() {
    let ring = RingConfig { capacity: 64, byte_budget: 100, chunk_events: 16 };
    let hub = Hub::new(HubConfig { ring, ..HubConfig::default() }).unwrap();
    let s = hub.create(None).unwrap();
    let st = s.open_stream().unwrap();
    let big = Bytes::from(vec![0u8; 101]);
    let by_publish = s.publish(&st, big.clone()).unwrap_err();
    {
        let mut lease = s.lease().unwrap();
        assert_eq!(lease.publish(&st, big).unwrap_err(), by_publish);
        assert_eq!(lease.publish(&st, payload(1)), Ok(Seq(1)), "the refusal took no seq");
    }
    hub.remove(&s.id());
    assert_eq!(s.lease().unwrap_err(), SessionPublishError::Closed);
    assert_eq!(s.publish(&st, payload(2)).unwrap_err(), SessionPublishError::Closed);
}

/// A session closed while a lease holds its writer closes at the lease's
/// next chunk boundary, where the lease gives the lock up: the lease's
/// publishes after it are refused `Closed`, and every event published
/// before is kept, its stream ended.
#[test]
fn a_session_closes_at_its_lease_s_chunk_boundary() {
    // Room for every event the loop may publish before the closer is queued
    // on the lock (thousands, at most the loop's bound), so that the reader
    // can check them all.
    // (Miri's scheduler lets the closer in within a few chunks.)
    let capacity = if cfg!(miri) { 1 << 12 } else { 1 << 18 };
    let ring = RingConfig { capacity, byte_budget: 64 << 20, chunk_events: 16 };
    let hub = Arc::new(Hub::new(HubConfig { ring, ..HubConfig::default() }).unwrap());
    let s = hub.create(None).unwrap();
    let st = s.open_stream().unwrap();
    let mut lease = s.lease().unwrap();
    let closer = {
        let (hub, id) = (Arc::clone(&hub), s.id());
        std::thread::spawn(move || hub.remove(&id).is_some())
    };
    let mut published = 0u64;
    let refused = loop {
        match lease.publish(&st, payload(published + 1)) {
            Ok(seq) => {
                published += 1;
                assert_eq!(seq, Seq(published));
            }
            Err(e) => break e,
        }
        // Waiting for the closer to be queued on the lock: each boundary
        // hands it over if it is.
        if published.is_multiple_of(16) {
            std::thread::yield_now();
        }
        assert!(published < capacity as u64, "the close never got the lock");
    };
    assert_eq!(refused, SessionPublishError::Closed);
    assert_eq!(published % 16, 0, "the close came in at a chunk's end, not after seq {published}");
    drop(lease);
    assert!(closer.join().unwrap());
    // Every event published before the close is there, in order, and the
    // stream is ended.
    let snap = s.reader().snapshot_stream(st.id(), Seq(0)).unwrap();
    let got: Vec<u64> = snap.iter().map(|e| e.index_in_stream).collect();
    assert_eq!(got, (1..=published).collect::<Vec<_>>());
    assert!(s.reader().stream(st.id()).unwrap().ended, "the close ended the stream");
}

/// The budget is charged at each of a lease's chunk boundaries, not only
/// when it ends: the hub's total follows the ring while the lease lives.
#[test]
fn a_lease_charges_the_budget_per_chunk() {
    let ring = RingConfig { capacity: 4096, byte_budget: 64 << 20, chunk_events: 64 };
    // A granule of 1 KiB (an eighth of the limit over the sessions, at
    // least 1 KiB): the total is within that of each report.
    let hub =
        Hub::new(HubConfig { ring, max_sessions: 10_000, max_memory: 64 << 20, ..HubConfig::default() })
            .unwrap();
    let s = hub.create(None).unwrap();
    let st = s.open_stream().unwrap();
    let before = hub.memory_used();
    let mut lease = s.lease().unwrap();
    for _ in 0..64 * 8 - 1 {
        lease.publish(&st, Bytes::from(vec![1u8; 1000])).unwrap();
    }
    // Seven chunks filled and charged (each 1 000-byte payload counts at
    // its allocator class, 1 024); the eighth, one event short, not yet.
    let charged = hub.memory_used() - before;
    assert!(charged >= 7 * 64 * 1024 - 1024, "charged {charged} bytes for 7 chunks of 65 536");
    assert!(charged < 8 * 64 * 1024 - 1024, "charged {charged}: the eighth chunk too, before it filled");
    lease.publish(&st, Bytes::from(vec![1u8; 1000])).unwrap();
    let charged = hub.memory_used() - before;
    assert!(charged >= 8 * 64 * 1024 - 1024, "charged {charged} bytes once the eighth chunk filled");
    drop(lease);
    // Once it ends: the session's whole footprint, within a granule.
    let fp = s.footprint();
    let total = hub.memory_used();
    assert!(total.abs_diff(fp) <= 1024, "{total} charged for a footprint of {fp}");
}

/// Over the hub's memory limit, a lease's chunk boundary reclaims (with its
/// lock given up, as a reclaim takes every writer lock): the total stays
/// within the limit and a granule per session while the lease publishes far
/// more than the limit.
#[test]
fn a_lease_reclaims_at_its_chunk_boundaries() {
    // Miri runs a quarter of it: 1 MB published against 256 KiB (room for
    // the two chunks being written, which a reclaim never evicts).
    let (limit, chunks) = if cfg!(miri) { (1 << 18, 16) } else { (1 << 20, 64) };
    let ring = RingConfig { capacity: 1 << 12, byte_budget: 64 << 20, chunk_events: 64 };
    let hub =
        Hub::new(HubConfig { ring, max_sessions: 8, max_memory: limit, ..HubConfig::default() }).unwrap();
    let idle = hub.create(None).unwrap();
    let idle_stream = idle.open_stream().unwrap();
    for _ in 0..chunks * 4 {
        idle.publish(&idle_stream, Bytes::from(vec![2u8; 1000])).unwrap();
    }
    let s = hub.create(None).unwrap();
    let st = s.open_stream().unwrap();
    let mut lease = s.lease().unwrap();
    for i in 0..64 * chunks {
        lease.publish(&st, Bytes::from(vec![1u8; 1000])).unwrap();
        if i % 64 == 63 {
            // Past a boundary: charged, and reclaimed if over. The slack is
            // the granule of each session and the chunk not yet charged.
            let used = hub.memory_used();
            assert!(used <= limit + limit / 8 + 2 * 64 * 1024, "{used} bytes used at event {i}");
        }
    }
    // Reclaimed while the lease lived: the rings lost their oldest events,
    // explicitly (4 MB published against a limit of 1 MiB).
    assert!(s.reader().snapshot_stream(st.id(), Seq(0)).is_err());
    drop(lease);
    assert!(hub.memory_used() <= limit + limit / 8, "{} used", hub.memory_used());
}
