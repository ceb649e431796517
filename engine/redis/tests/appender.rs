//! Batched appends against a real `redis-server` the test starts.

use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::{Seq, SessionId, StreamId};
use gapless_redis::testing::RedisServer;
use gapless_redis::{AppendError, Appender, RedisStore, StoreConfig, StoreError, TailEntry};
use std::time::Duration;

async fn store(redis: &RedisServer, capacity: usize, byte_budget: usize) -> RedisStore {
    let config = StoreConfig { ring: RingConfig::new(capacity, byte_budget), ..StoreConfig::default() };
    RedisStore::connect(&redis.url(), config).await.expect("connects")
}

/// How many script calls Redis has run so far.
async fn script_calls(redis: &RedisServer) -> u64 {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(&mut c).await.unwrap();
    info.lines()
        .filter(|l| l.starts_with("cmdstat_evalsha:") || l.starts_with("cmdstat_eval:"))
        .map(|l| {
            let calls = l.split("calls=").nth(1).unwrap();
            calls[..calls.find(',').unwrap()].parse::<u64>().unwrap()
        })
        .sum()
}

/// Every event of the session's log, as (seq, stream, payload).
async fn log(s: &RedisStore, id: &SessionId) -> Vec<(u64, u64, Bytes)> {
    let t = s.tail(id, (0, 0), 1 << 20, Seq(0)).await.unwrap().unwrap();
    t.entries
        .into_iter()
        .filter_map(|(_, e)| match e {
            TailEntry::Event(e) => Some((e.seq.0, e.stream.0, e.payload)),
            TailEntry::Ended(_) => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn queued_events_share_script_calls_and_keep_push_order() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 100_000, 64 << 20).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let two = s.open_stream(&id).await.unwrap();
    let q = Appender::new(s.clone(), id);
    let before = script_calls(&redis).await;
    const N: usize = 5000;
    let pending: Vec<_> = (0..N)
        .map(|i| {
            let stream = if i % 3 == 0 { StreamId(1) } else { two };
            q.push(stream, Bytes::from(format!("e{i}")))
        })
        .collect();
    let mut seqs = Vec::with_capacity(N);
    for p in pending {
        seqs.push(p.await.expect("appended").seq.0);
    }
    let calls = script_calls(&redis).await - before;
    assert_eq!(seqs, (1..=N as u64).collect::<Vec<_>>(), "seqs follow push order, dense");
    assert!(calls * 10 < N as u64, "{N} events took {calls} script calls: not batched");
    let got = log(&s, &id).await;
    assert_eq!(got.len(), N);
    for (i, (seq, stream, payload)) in got.iter().enumerate() {
        assert_eq!(*seq, i as u64 + 1);
        assert_eq!(*stream, if i % 3 == 0 { 1 } else { two.0 });
        assert_eq!(&payload[..], format!("e{i}").as_bytes());
    }
}

/// Refusals spread over several batches, two of them on the wire at once:
/// each fails only its events, and every other event is written once, in
/// push order (a batch after a refused one is not written before the
/// refused one's rest). On one thread, every push is queued before the
/// queue's task first runs, so the batches are the first 1024 events, the
/// next 1024, ...: a batch without a refusal follows each refused one.
#[tokio::test]
async fn a_refusal_fails_only_the_events_it_names() {
    const BUDGET: usize = 64 << 10;
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 100_000, BUDGET).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let two = s.open_stream(&id).await.unwrap();
    let three = s.open_stream(&id).await.unwrap();
    s.end_stream(&id, three).await.unwrap();
    let q = Appender::new(s.clone(), id);
    // Queued together, so that they share batches with the refused ones;
    // more than two batches' worth.
    // In the 1st, 3rd and 5th batches only.
    let (ended, unknown, large) = (|i| i == 100, |i| i == 2100, |i| i == 4200);
    let refused = |i: usize| ended(i) || unknown(i) || large(i);
    let pending: Vec<_> = (0..5000)
        .map(|i| match i {
            i if ended(i) => (i, q.push(three, Bytes::from_static(b"ended"))),
            i if unknown(i) => (i, q.push(StreamId(9), Bytes::from_static(b"unknown"))),
            i if large(i) => (i, q.push(two, Bytes::from(vec![b'x'; BUDGET + 1]))),
            _ => (i, q.push(if i % 2 == 0 { two } else { StreamId(1) }, Bytes::from(format!("ok{i}")))),
        })
        .collect();
    let mut kept = Vec::new();
    for (i, p) in pending {
        let r = p.await;
        match i {
            i if ended(i) => assert_eq!(r, Err(AppendError::StreamEnded(three)), "event {i}"),
            i if unknown(i) => assert_eq!(r, Err(AppendError::UnknownStream(StreamId(9))), "event {i}"),
            i if large(i) => {
                assert!(matches!(r, Err(AppendError::PayloadTooLarge { .. })), "event {i}: {r:?}")
            }
            _ => kept.push((r.expect("the other events are appended").seq.0, format!("ok{i}"))),
        }
    }
    assert_eq!(kept.len(), (0..5000).filter(|&i| !refused(i)).count());
    let got = log(&s, &id).await;
    assert_eq!(
        got.iter().map(|(seq, _, p)| (*seq, String::from_utf8(p.to_vec()).unwrap())).collect::<Vec<_>>(),
        kept,
        "exactly the accepted events, in push order"
    );
    assert_eq!(kept.iter().map(|k| k.0).collect::<Vec<_>>(), (1..=kept.len() as u64).collect::<Vec<_>>());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_fails_the_queued_events_and_the_queue_recovers() {
    let mut redis = RedisServer::start(&[]);
    let config = StoreConfig { timeout: Duration::from_millis(500), ..StoreConfig::default() };
    let s = RedisStore::connect(&redis.url(), config).await.unwrap();
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let q = Appender::new(s.clone(), id);
    assert_eq!(q.push(StreamId(1), Bytes::from_static(b"a")).await.unwrap().seq, Seq(1));
    redis.kill();
    let r = q.push(StreamId(1), Bytes::from_static(b"b")).await;
    assert!(matches!(r, Err(AppendError::Store(StoreError::Unavailable(_)))), "{r:?}");
    redis.restart();
    // The restarted Redis has no data (no persistence): the session is gone,
    // which the queue reports as such once Redis answers again.
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    loop {
        match q.push(StreamId(1), Bytes::from_static(b"c")).await {
            Err(AppendError::Store(StoreError::UnknownSession)) => break,
            Err(AppendError::Store(StoreError::Unavailable(_))) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(100)).await
            }
            other => panic!("after the restart: {other:?}"),
        }
    }
}
