//! The async facade: subscriptions (replay, then live) and paced publishing.
#![cfg(feature = "tokio")]

use bytes::Bytes;
use gapless::{ring, Hub, HubConfig, Lagged, ResumeRequest, RingConfig, Seq, Subscription};
use std::sync::Arc;
use std::time::Duration;

fn payload(seq: u64) -> Bytes {
    Bytes::copy_from_slice(&seq.to_le_bytes())
}

/// Many subscribers follow a fast producer: each sees every seq exactly
/// once, in order, or ends with an explicit lag error (then nothing more).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn many_subscribers_see_every_seq_once_or_lag() {
    let n: u64 = if cfg!(miri) { 200 } else { 50_000 };
    let (mut p, r) = ring(RingConfig::new(1024, 1 << 20)).unwrap();
    let s = p.open_stream();
    let mut tasks = vec![];
    for _ in 0..8 {
        let mut sub = Subscription::after(&r, Seq(0)).unwrap();
        tasks.push(tokio::spawn(async move {
            let mut next = 1;
            let mut lag = None;
            while let Some(item) = sub.recv().await {
                match item {
                    Ok(e) => {
                        assert_eq!(e.seq.0, next, "hole or duplicate");
                        assert_eq!(&e.payload[..], &payload(next)[..]);
                        next += 1;
                    }
                    Err(l) => {
                        assert!(l.wanted.0 == next && l.wanted < l.oldest);
                        lag = Some(l);
                    }
                }
            }
            (next - 1, lag)
        }));
    }
    let producer = tokio::spawn(async move {
        for i in 1..=n {
            p.publish(&s, payload(i)).unwrap();
            if i % 256 == 0 {
                tokio::task::yield_now().await;
            }
        }
        drop(p); // closes: followers end
    });
    producer.await.unwrap();
    for t in tasks {
        let (last, lag): (u64, Option<Lagged>) = t.await.unwrap();
        assert!(last == n || lag.is_some(), "ended at {last} of {n} without an error");
    }
}

/// A subscription created while the producer is publishing has no hole and
/// no duplicate at the replay/live boundary. Repeated many times.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subscribe_during_publish_has_no_seam() {
    let rounds = if cfg!(miri) { 5 } else { 3000 };
    for round in 0..rounds {
        let (mut p, r) = ring(RingConfig::new(4096, 1 << 22)).unwrap();
        let s = p.open_stream();
        let total = 64u64;
        let producer = std::thread::spawn(move || {
            for i in 1..=total {
                p.publish(&s, payload(i)).unwrap();
                if i % 8 == 0 {
                    std::thread::yield_now();
                }
            }
        });
        // Subscribe from a cursor somewhere in what exists now.
        let after = Seq(r.head().0 / 2);
        let mut sub = Subscription::after(&r, after).unwrap();
        let mut next = after.0 + 1;
        while let Some(item) = sub.recv().await {
            let e = item.unwrap();
            assert_eq!(e.seq.0, next, "round {round}: seam at {next}");
            next += 1;
        }
        assert_eq!(next, total + 1, "round {round}");
        producer.join().unwrap();
    }
}

/// A stream subscription ends cleanly when its stream ends, skipping the
/// other streams' events.
#[tokio::test]
async fn stream_subscription_ends_with_its_stream() {
    let hub = Hub::new(HubConfig::default()).unwrap();
    let s = hub.create(None).unwrap();
    let a = s.open_stream().unwrap();
    let b = s.open_stream().unwrap();
    let mut sub = s.subscribe_stream(a.id(), Seq(0)).unwrap();
    let s2 = Arc::clone(&s);
    let (a2, b2) = (a.clone(), b.clone());
    let w = tokio::spawn(async move {
        for i in 0..10 {
            s2.publish(&a2, Bytes::from(vec![i])).unwrap();
            s2.publish(&b2, Bytes::new()).unwrap();
            tokio::task::yield_now().await;
        }
        s2.end_stream(&a2).unwrap();
    });
    let mut got = vec![];
    while let Some(e) = sub.recv().await {
        let e = e.unwrap();
        assert_eq!(e.stream, a.id());
        got.push(e.payload[0]);
    }
    assert_eq!(got, (0..10).collect::<Vec<u8>>());
    w.await.unwrap();
}

/// A session's deletion ends whole-session subscriptions.
#[tokio::test]
async fn session_removal_ends_subscriptions() {
    let hub = Hub::new(HubConfig::default()).unwrap();
    let s = hub.create(None).unwrap();
    let mut sub = Subscription::after(s.reader(), Seq(0)).unwrap();
    s.publish(s.standalone(), Bytes::from_static(b"x")).unwrap();
    assert_eq!(sub.recv().await.unwrap().unwrap().seq, Seq(1));
    let id = s.id();
    let t = tokio::spawn(async move { sub.recv().await.is_none() });
    tokio::time::sleep(Duration::from_millis(20)).await;
    hub.remove(&id);
    assert!(tokio::time::timeout(Duration::from_secs(5), t).await.unwrap().unwrap());
}

/// Paced publish waits while the attached subscriber lags beyond the mark,
/// resumes as it reads, and never waits when nobody is attached.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn paced_publish_waits_only_for_attached_laggards() {
    let hub = Hub::new(HubConfig::default()).unwrap();
    let s = hub.create(None).unwrap();
    let st = s.open_stream().unwrap();
    // Nobody attached: 100 paced publishes with a mark of 2 complete at once.
    for _ in 0..100 {
        tokio::time::timeout(Duration::from_secs(5), s.publish_paced(&st, Bytes::new(), 2))
            .await
            .expect("paced publish waited with no reader attached")
            .unwrap();
    }
    let mut sub = s.subscribe_stream(st.id(), Seq(100)).unwrap();
    let (s2, st2) = (Arc::clone(&s), st.clone());
    let writer = tokio::spawn(async move {
        for _ in 0..50 {
            s2.publish_paced(&st2, Bytes::new(), 4).await.unwrap();
        }
    });
    // While we do not read, the writer stops at the mark (4 ahead).
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(st.info().published, 104, "writer did not stop at the high-water mark");
    // Reading lets it go on; we see every event.
    let mut n = 0;
    while n < 50 {
        sub.recv().await.unwrap().unwrap();
        n += 1;
    }
    tokio::time::timeout(Duration::from_secs(5), writer).await.unwrap().unwrap();
    // Detaching releases a waiting writer.
    let (s3, st3) = (Arc::clone(&s), st.clone());
    let writer = tokio::spawn(async move {
        for _ in 0..20 {
            s3.publish_paced(&st3, Bytes::new(), 1).await.unwrap();
        }
    });
    tokio::time::sleep(Duration::from_millis(50)).await;
    drop(sub);
    tokio::time::timeout(Duration::from_secs(5), writer).await.unwrap().unwrap();
}

/// Reading in batches yields exactly what reading one by one yields: the
/// replayed gap, then live events, in order, each once, until the producer
/// goes (then `None`); a subscriber that falls behind eviction gets one
/// `Lagged` and then `None`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_subscription_yields_what_recv_yields() {
    let n: u64 = if cfg!(miri) { 300 } else { 20_000 };
    let (mut p, r) = ring(RingConfig::new(32_768, 1 << 22)).unwrap();
    let s = p.open_stream();
    for seq in 1..=100 {
        p.publish(&s, payload(seq)).unwrap();
    }
    let mut one = Subscription::after(&r, Seq(10)).unwrap();
    let mut many = Subscription::after(&r, Seq(10)).unwrap();
    let a = tokio::spawn(async move {
        let mut got = vec![];
        while let Some(e) = one.recv().await {
            let e = e.unwrap();
            got.push((e.seq.0, e.payload));
        }
        got
    });
    let b = tokio::spawn(async move {
        let (mut got, mut batches) = (vec![], 0u64);
        while let Some(batch) = many.recv_batch().await {
            let batch = batch.unwrap();
            batches += 1;
            got.extend(batch.iter().map(|e| (e.seq.0, e.payload.clone())));
        }
        (got, batches)
    });
    for seq in 101..=100 + n {
        p.publish(&s, payload(seq)).unwrap();
        if seq % 64 == 0 {
            tokio::task::yield_now().await;
        }
    }
    drop(p);
    let one = a.await.unwrap();
    let (many, batches) = b.await.unwrap();
    assert_eq!(one.len() as u64, 90 + n);
    assert!(one.iter().zip(11..).all(|((seq, pl), want)| *seq == want && pl[..] == payload(want)[..]));
    assert_eq!(one, many, "batches yield the same events as recv");
    assert!(batches <= 90 + n, "at least one event per batch");

    // Lag: a subscriber that does not read while the ring laps it.
    let (mut p, r) = ring(RingConfig::new(64, 1 << 20)).unwrap();
    let s = p.open_stream();
    let mut sub = Subscription::after(&r, Seq(0)).unwrap();
    for seq in 1..=10 {
        p.publish(&s, payload(seq)).unwrap();
    }
    let first = sub.recv_batch().await.unwrap().unwrap();
    assert_eq!((first.first(), first.len()), (Seq(1), 10));
    for seq in 11..=500 {
        p.publish(&s, payload(seq)).unwrap();
    }
    let lag = sub.recv_batch().await.unwrap().unwrap_err();
    assert_eq!(lag.wanted, Seq(11));
    assert!(sub.recv_batch().await.is_none(), "nothing after a lag");
}

/// A stream subscription read in batches skips other streams, ends with its
/// stream, and counts as consumption for paced publishing: a paced writer
/// with a mark of 4 runs to completion against a batch reader.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batch_stream_subscription_paces_and_ends() {
    let hub = Hub::new(HubConfig::default()).unwrap();
    let s = hub.create(None).unwrap();
    let a = s.open_stream().unwrap();
    let b = s.open_stream().unwrap();
    let mut sub = s.subscribe_stream(a.id(), Seq(0)).unwrap();
    let (s2, a2, b2) = (Arc::clone(&s), a.clone(), b.clone());
    let writer = tokio::spawn(async move {
        for i in 0..500u64 {
            s2.publish_paced(&a2, payload(i), 4).await.unwrap();
            s2.publish(&b2, Bytes::new()).unwrap();
        }
        s2.end_stream(&a2).unwrap();
    });
    // While we do not read, the writer stops at the mark.
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert_eq!(a.info().published, 4, "writer did not stop at the high-water mark");
    let mut got = vec![];
    while let Some(batch) = sub.recv_batch().await {
        for e in batch.unwrap() {
            assert_eq!(e.stream, a.id());
            got.push(u64::from_le_bytes(e.payload[..8].try_into().unwrap()));
        }
    }
    assert_eq!(got, (0..500).collect::<Vec<_>>());
    tokio::time::timeout(Duration::from_secs(5), writer).await.unwrap().unwrap();
}

/// A whole-session subscription (a migration's, as a WebSocket gets) paces
/// every stream: two paced writers on two streams stop at the high-water
/// mark while it does not read, both run to completion as it reads (no
/// lost wake-up with several writers on one gate), and dropping it
/// releases them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_subscription_paces_every_stream() {
    let hub = Hub::new(HubConfig::default()).unwrap();
    let s = hub.create(None).unwrap();
    let a = s.open_stream().unwrap();
    let b = s.open_stream().unwrap();
    let sid = s.id().to_string();
    let mut sub = hub.check_migration(ResumeRequest::new(&sid)).unwrap().into_subscription();
    let writer = |st: gapless::StreamHandle, n: u64| {
        let s = Arc::clone(&s);
        tokio::spawn(async move {
            for i in 0..n {
                s.publish_paced(&st, payload(i), 8).await.unwrap();
            }
        })
    };
    let (wa, wb) = (writer(a.clone(), 300), writer(b.clone(), 300));
    tokio::time::sleep(Duration::from_millis(100)).await;
    let head = s.reader().head().0;
    assert!((8..=9).contains(&head), "writers did not stop at the mark: head {head}");
    let mut n = 0;
    while n < 600 {
        let batch = sub.recv_batch().await.unwrap().unwrap();
        n += batch.len();
    }
    tokio::time::timeout(Duration::from_secs(10), wa).await.unwrap().unwrap();
    tokio::time::timeout(Duration::from_secs(10), wb).await.unwrap().unwrap();
    // Detaching releases a waiting writer.
    let w = writer(a.clone(), 50);
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!w.is_finished(), "the writer waits for the attached reader");
    drop(sub);
    tokio::time::timeout(Duration::from_secs(10), w).await.unwrap().unwrap();
}

/// A stream subscription resumed from a snapshot of interleaved streams
/// (the replay walks the stream's own events, not the range) yields, by
/// batch and by `try_recv`, exactly the stream's events after the cursor,
/// each batch within one chunk, and then goes on live.
#[tokio::test]
async fn stream_replay_of_interleaved_streams_yields_only_its_own() {
    let (mut p, r) = ring(RingConfig { chunk_events: 16, ..RingConfig::new(1024, 1 << 20) }).unwrap();
    let streams: Vec<_> = (0..5).map(|_| p.open_stream()).collect();
    // Irregular interleaving: stream 2 gets every 3rd event and the 7th ones.
    let mut mine = vec![];
    for seq in 1..=400u64 {
        let s = if seq % 3 == 0 || seq % 7 == 0 { 2 } else { (seq % 5) as usize };
        p.publish(&streams[s], payload(seq)).unwrap();
        if s == 2 {
            mine.push(seq);
        }
    }
    let target = streams[2].id();
    let cursor = mine[20];
    let want: Vec<u64> = mine.iter().copied().filter(|&s| s > cursor).collect();
    let snap = r.snapshot_stream(target, Seq(cursor)).unwrap();
    assert_eq!(snap.len(), want.len());
    assert_eq!(snap.iter().len(), want.len());
    assert_eq!(snap.iter().map(|e| e.seq.0).collect::<Vec<_>>(), want, "next()");
    assert_eq!(
        snap.iter().fold(vec![], |mut v, e| {
            v.push(e.seq.0);
            v
        }),
        want,
        "fold()"
    );
    assert_eq!((snap.first(), snap.last()), (Some(Seq(want[0])), Some(Seq(*want.last().unwrap()))));

    let mut by_batch = Subscription::new(&r, snap.clone());
    let mut by_event = Subscription::new(&r, snap);
    assert_eq!(by_batch.replay_pending(), want.len());
    let mut got = vec![];
    while got.len() < want.len() {
        let batch = by_batch.try_recv_batch().unwrap();
        let gapless::ring::NextBatch::Events(b) = batch else { panic!("replay is ready: {batch:?}") };
        let seqs: Vec<u64> = b.iter().map(|e| e.seq.0).collect();
        assert_eq!(b.len(), seqs.len());
        assert_eq!(b.last().seq.0, *seqs.last().unwrap());
        assert_eq!((seqs[0] - 1) / 16, (b.covered_to().0 - 1) / 16, "a batch stays within a chunk");
        assert!(b.iter().all(|e| e.stream == target));
        got.extend(seqs);
        assert_eq!(by_batch.replay_pending(), want.len() - got.len().min(want.len()));
    }
    assert_eq!(got, want, "batches");
    let mut one = vec![];
    while let Ok(gapless::ring::Next::Event(e)) = by_event.try_recv() {
        one.push(e.seq.0);
    }
    assert_eq!(one, want, "try_recv");
    // Live after the replay.
    let seq = p.publish(&streams[2], payload(401)).unwrap();
    p.publish(&streams[1], payload(402)).unwrap();
    match by_event.try_recv() {
        Ok(gapless::ring::Next::Event(e)) => assert_eq!(e.seq, seq),
        other => panic!("live event expected: {other:?}"),
    }
}

/// Batches bounded in payload bytes (`try_recv_batch_max`): every batch
/// holds at most the bound, or one event alone when that event is larger;
/// the events left out come next, so replay and live together yield
/// exactly what `try_recv` yields, for the whole ring and for one stream.
#[tokio::test]
async fn bounded_batches_split_where_the_bytes_run_out() {
    let (mut p, r) = ring(RingConfig { chunk_events: 32, ..RingConfig::new(4096, 1 << 24) }).unwrap();
    let (a, b) = (p.open_stream(), p.open_stream());
    let len = |seq: u64| ((seq * 37) % 300) as usize + if seq.is_multiple_of(29) { 1000 } else { 0 };
    let body = |seq: u64| Bytes::from(vec![seq as u8; len(seq)]);
    let publish = |p: &mut gapless::ring::Producer, range: std::ops::RangeInclusive<u64>| {
        for seq in range {
            p.publish(if seq % 3 == 0 { &b } else { &a }, body(seq)).unwrap();
        }
    };
    publish(&mut p, 1..=200);
    let max = 700;
    for stream in [None, Some(a.id())] {
        let sub = |r: &gapless::Reader| match stream {
            None => Subscription::after(r, Seq(10)).unwrap(),
            Some(s) => Subscription::stream_after(r, s, Seq(10)).unwrap(),
        };
        let (mut bounded, mut single) = (sub(&r), sub(&r));
        let mut want = vec![];
        while let Ok(gapless::ring::Next::Event(e)) = single.try_recv() {
            want.push(e.seq.0);
        }
        let (mut got, mut split) = (vec![], 0);
        loop {
            let batch = bounded.try_recv_batch_max(max).unwrap();
            let gapless::ring::NextBatch::Events(batch) = batch else { break };
            let seqs: Vec<u64> = batch.iter().map(|e| e.seq.0).collect();
            let bytes: usize = batch.iter().map(|e| e.payload.len()).sum();
            assert!(bytes <= max || seqs.len() == 1, "{bytes} bytes in {seqs:?}");
            assert!(batch.iter().all(|e| e.payload[..] == body(e.seq.0)[..]));
            assert_eq!(batch.len(), seqs.len());
            assert_eq!(batch.last().seq.0, *seqs.last().unwrap());
            split += usize::from(bytes + len(seqs.last().unwrap() + 1) > max);
            got.extend(seqs);
        }
        assert_eq!(got, want, "stream {stream:?}: the same events, each once");
        assert!(split > 10, "the bound cut batches");
        // Live: more events, read in bounded batches again.
        let from = p.head().0 + 1;
        publish(&mut p, from..=from + 150);
        let mut want = vec![];
        while let Ok(gapless::ring::Next::Event(e)) = single.try_recv() {
            want.push(e.seq.0);
        }
        let mut got = vec![];
        while let Ok(gapless::ring::NextBatch::Events(batch)) = bounded.try_recv_batch_max(max) {
            let bytes: usize = batch.iter().map(|e| e.payload.len()).sum();
            assert!(bytes <= max || batch.len() == 1, "{bytes} bytes live");
            got.extend(batch.iter().map(|e| e.seq.0));
        }
        assert_eq!(got, want, "stream {stream:?}, live");
    }
}
