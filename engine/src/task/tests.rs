use super::*;
use std::collections::VecDeque;

fn events(max_events: usize, max_bytes: usize, max_age: Option<Duration>) -> TaskEvents {
    TaskEvents::new(TaskEventsConfig { max_events, max_bytes, max_age }).unwrap()
}

fn seqs(s: &TaskSnapshot) -> Vec<u64> {
    s.iter().map(|e| e.seq).collect()
}

#[test]
fn seqs_are_dense_from_zero_and_a_cursor_is_exclusive() {
    let t = events(16, 1 << 20, None);
    let now = Instant::now();
    assert_eq!(t.next_seq(), 0);
    assert_eq!(seqs(&t.snapshot(None, now).unwrap()), Vec::<u64>::new(), "nothing yet: live from the start");
    for i in 0..5u64 {
        assert_eq!(t.emit(Bytes::from(format!("e{i}")), now), Ok(i));
    }
    assert_eq!(t.next_seq(), 5);
    assert_eq!(seqs(&t.snapshot(None, now).unwrap()), [0, 1, 2, 3, 4]);
    assert_eq!(seqs(&t.snapshot(Some(0), now).unwrap()), [1, 2, 3, 4]);
    let s = t.snapshot(Some(2), now).unwrap();
    let got: Vec<(u64, &[u8])> = s.iter().map(|e| (e.seq, e.payload)).collect();
    assert_eq!(got, [(3, &b"e3"[..]), (4, &b"e4"[..])]);
    assert!(t.snapshot(Some(4), now).unwrap().is_empty(), "caught up: nothing to replay");
    assert_eq!(t.snapshot(Some(5), now).unwrap_err(), OpenError::Ahead { next: 5 });
    assert_eq!(t.snapshot(Some(u64::MAX), now).unwrap_err(), OpenError::Ahead { next: 5 });
}

#[test]
fn a_cursor_before_the_kept_window_is_gone_with_the_earliest_seq() {
    let t = events(4, 1 << 20, None);
    let now = Instant::now();
    for i in 0..10u64 {
        t.emit(Bytes::from(vec![i as u8]), now).unwrap();
    }
    // 6..=9 kept.
    assert_eq!(t.earliest(now), 6);
    assert_eq!(seqs(&t.snapshot(None, now).unwrap()), [6, 7, 8, 9]);
    assert_eq!(seqs(&t.snapshot(Some(5), now).unwrap()), [6, 7, 8, 9], "the first needed is kept");
    assert_eq!(t.snapshot(Some(4), now).unwrap_err(), OpenError::Gone { earliest: 6 }, "5 is gone");
    assert_eq!(t.snapshot(Some(0), now).unwrap_err(), OpenError::Gone { earliest: 6 });
}

#[test]
fn a_payload_over_the_byte_bound_is_refused_and_nothing_kept() {
    let t = events(16, 8, None);
    let now = Instant::now();
    assert_eq!(t.emit(Bytes::from_static(b"123456789"), now), Err(EmitError::TooLarge { len: 9, max: 8 }));
    assert_eq!(t.next_seq(), 0);
    assert_eq!(t.emit(Bytes::from_static(b"12345"), now), Ok(0));
    assert_eq!(t.emit(Bytes::from_static(b"12345"), now), Ok(1), "the first goes to keep 8 bytes");
    assert_eq!(t.snapshot(Some(0), now).map(|s| seqs(&s)), Ok(vec![1]));
    assert_eq!(t.snapshot(None, now).map(|s| seqs(&s)), Ok(vec![1]));
    assert_eq!(t.earliest(now), 1);
}

#[test]
fn an_event_older_than_the_age_bound_is_no_longer_served() {
    let t = events(16, 1 << 20, Some(Duration::from_secs(10)));
    let t0 = Instant::now();
    t.emit(Bytes::from_static(b"a"), t0).unwrap(); // 0
    t.emit(Bytes::from_static(b"b"), t0 + Duration::from_secs(5)).unwrap(); // 1
    t.emit(Bytes::from_static(b"c"), t0 + Duration::from_secs(8)).unwrap(); // 2
    let at = t0 + Duration::from_secs(10);
    assert_eq!(seqs(&t.snapshot(None, at).unwrap()), [0, 1, 2], "10 s old: still served");
    let at = t0 + Duration::from_secs(12);
    assert_eq!(t.earliest(at), 1);
    assert_eq!(seqs(&t.snapshot(None, at).unwrap()), [1, 2]);
    assert_eq!(seqs(&t.snapshot(Some(0), at).unwrap()), [1, 2]);
    assert_eq!(t.snapshot(None, at).map(|s| s.len()), Ok(2));
    let at = t0 + Duration::from_secs(16);
    assert_eq!(t.snapshot(Some(0), at).unwrap_err(), OpenError::Gone { earliest: 2 });
    // Every event aged out: the earliest is the next seq, and a cursor at
    // the last one is still good (nothing after it is missing).
    let at = t0 + Duration::from_secs(30);
    assert_eq!(t.earliest(at), 3);
    assert!(t.snapshot(None, at).unwrap().is_empty());
    assert!(t.snapshot(Some(2), at).unwrap().is_empty());
    assert_eq!(t.snapshot(Some(1), at).unwrap_err(), OpenError::Gone { earliest: 3 });
    // A new event is served again.
    assert_eq!(t.emit(Bytes::from_static(b"d"), at), Ok(3));
    assert_eq!(seqs(&t.snapshot(Some(2), at).unwrap()), [3]);
}

#[test]
fn an_ended_stream_refuses_events_and_still_serves_what_it_keeps() {
    let t = events(16, 1 << 20, None);
    let now = Instant::now();
    t.emit(Bytes::from_static(b"a"), now).unwrap();
    let before = t.footprint();
    assert!(!t.is_ended());
    t.end();
    t.end(); // idempotent
    assert!(t.is_ended());
    assert_eq!(t.emit(Bytes::from_static(b"b"), now), Err(EmitError::Ended));
    assert_eq!(seqs(&t.snapshot(None, now).unwrap()), [0]);
    assert!(t.snapshot(Some(0), now).unwrap().is_empty());
    assert_eq!(t.footprint(), before, "its memory is still counted");
}

/// The window against a model: a deque that drops its oldest while over
/// either bound. Random payload sizes and cursors; every opening agrees.
#[test]
fn openings_agree_with_a_model_of_the_bounds() {
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut rnd = move |n: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % n
    };
    for round in 0..50 {
        let (cap, budget) = (1 + rnd(20) as usize, 1 + rnd(200) as usize);
        let t = events(cap, budget, None);
        let now = Instant::now();
        let mut model: VecDeque<(u64, usize)> = VecDeque::new();
        let mut next = 0u64;
        for _ in 0..200 {
            let len = rnd(budget as u64 + 10) as usize;
            match t.emit(Bytes::from(vec![7u8; len]), now) {
                Ok(seq) => {
                    assert!(len <= budget, "round {round}: {len} > {budget} kept");
                    assert_eq!(seq, next);
                    next += 1;
                    model.push_back((seq, len));
                    while model.len() > cap || model.iter().map(|e| e.1).sum::<usize>() > budget {
                        model.pop_front();
                    }
                }
                Err(e) => assert_eq!(e, EmitError::TooLarge { len, max: budget }, "round {round}"),
            }
            let earliest = model.front().map_or(next, |e| e.0);
            assert_eq!(t.earliest(now), earliest, "round {round}");
            let after = if next == 0 || rnd(4) == 0 { None } else { Some(rnd(next + 2)) };
            let got = t.snapshot(after, now).map(|s| seqs(&s));
            let want = match after {
                Some(a) if a >= next => Err(OpenError::Ahead { next }),
                Some(a) if a + 1 < earliest => Err(OpenError::Gone { earliest }),
                Some(a) => Ok(model.iter().map(|e| e.0).filter(|&s| s > a).collect()),
                None => Ok(model.iter().map(|e| e.0).collect()),
            };
            assert_eq!(got, want, "round {round}: after {after:?}, cap {cap}, budget {budget}");
        }
    }
}

/// Charged to a hub, a task's stream counts in its memory budget while it
/// lives (ended too), and leaves it when dropped.
#[test]
fn a_charged_stream_counts_in_the_hubs_budget() {
    let hub = Hub::new(crate::session::HubConfig { max_memory: 64 << 20, ..Default::default() }).unwrap();
    let before = hub.memory_used();
    let t =
        TaskEvents::in_hub(&hub, TaskEventsConfig { max_events: 4096, max_bytes: 8 << 20, max_age: None })
            .unwrap();
    let base = hub.memory_used() - before;
    assert!(base > 0, "its base is counted");
    let now = Instant::now();
    for _ in 0..1000 {
        t.emit(Bytes::from(vec![1u8; 1024]), now).unwrap();
    }
    let used = hub.memory_used() - before;
    assert!(used >= 1000 * 1024, "its events are counted: {used}");
    assert!(used.abs_diff(t.footprint()) < 128 << 10, "within a granule: {used} vs {}", t.footprint());
    t.end();
    assert_eq!(t.emit(Bytes::new(), now), Err(EmitError::Ended));
    assert!(hub.memory_used() - before >= 1000 * 1024, "an ended stream keeps its events, counted");
    drop(t);
    assert_eq!(hub.memory_used(), before, "gone with the stream");
}

/// Over the hub's limit, the budget's reclaim evicts the oldest events of
/// the task's ring as it would a session's: an opening before them is
/// refused with the numbers, a reader behind them is told, the total comes
/// back under the limit; no room even for a new stream's base is refused.
#[test]
fn the_hubs_budget_reclaims_from_a_task_stream() {
    let limit = 512 << 10;
    let hub = Hub::new(crate::session::HubConfig { max_memory: limit, ..Default::default() }).unwrap();
    let config = TaskEventsConfig { max_events: 65536, max_bytes: 64 << 20, max_age: None };
    let t = TaskEvents::in_hub(&hub, config).unwrap();
    let now = Instant::now();
    for _ in 0..4000 {
        t.emit(Bytes::from(vec![2u8; 1024]), now).unwrap();
    }
    assert!(hub.memory_used() <= limit, "reclaimed to the limit: {}", hub.memory_used());
    let earliest = t.earliest(now);
    assert!(earliest > 0, "the oldest were evicted");
    assert_eq!(t.snapshot(Some(0), now).unwrap_err(), OpenError::Gone { earliest });
    let all: Vec<u64> = t.snapshot(None, now).unwrap().iter().map(|e| e.seq).collect();
    assert_eq!(all, (earliest..4000).collect::<Vec<_>>(), "what is kept is whole after the earliest");
    // A new stream whose base cannot fit, even after a reclaim: refused.
    let tiny = Hub::new(crate::session::HubConfig { max_memory: 1, ..Default::default() }).unwrap();
    assert!(matches!(TaskEvents::in_hub(&tiny, config), Err(SessionError::MemoryExhausted { limit: 1 })));
}

#[cfg(feature = "tokio")]
mod live {
    use super::*;

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_subscription_replays_then_follows_live_to_the_end() {
        let t = std::sync::Arc::new(events(64, 1 << 20, None));
        for i in 0..3u8 {
            t.emit(Bytes::from(vec![i]), Instant::now()).unwrap();
        }
        let mut sub = t.subscribe(Some(0), Instant::now()).unwrap();
        assert_eq!(sub.replay_pending(), 2);
        let emitter = std::sync::Arc::clone(&t);
        let work = tokio::spawn(async move {
            for i in 3..40u8 {
                emitter.emit(Bytes::from(vec![i]), Instant::now()).unwrap();
                if i % 8 == 0 {
                    tokio::task::yield_now().await;
                }
            }
            emitter.end();
        });
        let mut got = vec![];
        while let Some(e) = sub.recv().await {
            let e = e.expect("never behind: the ring keeps 64");
            assert_eq!(e.payload[0] as u64, e.seq);
            got.push(e.seq);
        }
        work.await.unwrap();
        assert_eq!(got, (1..40).collect::<Vec<_>>(), "each once, in order, then the end");
        // Opened after the end: the replay, then the end at once.
        let mut late = t.subscribe(Some(37), Instant::now()).unwrap();
        assert_eq!(late.recv().await.map(|e| e.unwrap().seq), Some(38));
        assert_eq!(late.recv().await.map(|e| e.unwrap().seq), Some(39));
        assert!(late.recv().await.is_none());
    }

    #[tokio::test]
    async fn a_reader_behind_the_bounds_is_told_the_earliest_seq_never_skipped() {
        let t = events(4, 1 << 20, None);
        let mut sub = t.subscribe(None, Instant::now()).unwrap();
        for i in 0..10u8 {
            t.emit(Bytes::from(vec![i]), Instant::now()).unwrap();
        }
        // Seq 0 was dropped before the reader read it: it learns so,
        // with the oldest kept, and nothing after.
        assert_eq!(sub.recv().await, Some(Err(OpenError::Gone { earliest: 6 })));
        assert_eq!(sub.recv().await, None);
    }
}
