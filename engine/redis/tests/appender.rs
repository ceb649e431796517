//! Batched appends against a real `redis-server` the test starts.

use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::{Seq, SessionId, StreamId};
use gapless_redis::testing::RedisServer;
use gapless_redis::{
    AppendError, Appender, RedisStore, Sink, StoreConfig, StoreError, TailEntry, Written, MAX_QUEUED_EVENTS,
};
use std::sync::{Arc, Mutex};
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
            TailEntry::Ended(_) | TailEntry::Own(_) => None,
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

/// Every event of the session's log as a skipping tail of node `origin`
/// gives it: (seq, stream, index, nonce, whether it came as the node's own).
async fn skipping_log(s: &RedisStore, id: &SessionId, origin: &str) -> Vec<(u64, u64, u64, u64, bool)> {
    let t = s.tail_skipping(id, (0, 0), 1 << 20, Seq(0), origin).await.unwrap().unwrap();
    t.entries
        .into_iter()
        .filter_map(|(_, e)| match e {
            TailEntry::Event(e) => Some((e.seq.0, e.stream.0, e.index_in_stream, e.check, false)),
            TailEntry::Own(o) => Some((o.seq.0, o.stream.0, o.index_in_stream, o.check, true)),
            TailEntry::Ended(_) => None,
        })
        .collect()
}

/// Group commit: `enqueue` does not wait for the store; the sink gets every
/// written event once, in seq order, with the index and nonce the log
/// holds; `barrier` returns only once everything before it is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueued_events_reach_the_sink_in_order_before_the_barrier() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 100_000, 64 << 20).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let two = s.open_stream(&id).await.unwrap();
    let got: Arc<Mutex<Vec<Written>>> = Arc::default();
    let sink: Sink = {
        let got = Arc::clone(&got);
        Arc::new(move |w: &[Written]| got.lock().unwrap().extend_from_slice(w))
    };
    let q = Appender::for_node(s.clone(), id, "node-a".into(), Some(sink));
    let before = script_calls(&redis).await;
    const N: usize = 3000;
    for i in 0..N {
        let stream = if i % 3 == 0 { StreamId(1) } else { two };
        q.enqueue(stream, Bytes::from(format!("e{i}"))).await.expect("queued");
    }
    q.barrier().await;
    let calls = script_calls(&redis).await - before;
    assert!(calls * 10 < N as u64, "{N} events took {calls} script calls: not batched");
    let got = got.lock().unwrap().clone();
    assert_eq!(got.len(), N, "every event reached the sink once before the barrier returned");
    let (mut one, mut other) = (0, 0);
    for (i, w) in got.iter().enumerate() {
        assert_eq!(w.seq, Seq(i as u64 + 1), "in seq order");
        let (stream, index) = if i % 3 == 0 {
            one += 1;
            (StreamId(1), one)
        } else {
            other += 1;
            (two, other)
        };
        assert_eq!((w.stream, w.index), (stream, index), "event {i}");
        assert_eq!(&w.payload[..], format!("e{i}").as_bytes());
    }
    let stored = skipping_log(&s, &id, "node-a").await;
    let from_sink: Vec<_> = got.iter().map(|w| (w.seq.0, w.stream.0, w.index, w.check, true)).collect();
    assert_eq!(stored, from_sink, "the log holds what the sink got, each marked as node-a's own");
    // Another node reads them in full.
    assert!(skipping_log(&s, &id, "node-b").await.iter().all(|e| !e.4));
    assert_eq!(log(&s, &id).await.len(), N);
}

/// What the store holds of a stream's enqueued events is a prefix of them:
/// the events queued behind a refused one fail unsent, the refusal is told
/// once, to the stream's next `enqueue`, and the stream goes on after it.
/// Another stream's events are not touched.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_enqueue_is_told_once_and_what_follows_it_is_not_written() {
    const BUDGET: usize = 64 << 10;
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 100_000, BUDGET).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let two = s.open_stream(&id).await.unwrap();
    let q = Appender::new(s.clone(), id);
    // Redis answers nothing for a second (it lifts the pause itself), so
    // that the refusal cannot reach an enqueue of this loop: on a fast run
    // it used to be told to `b`'s.
    let client = redis::Client::open(redis.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CLIENT").arg("PAUSE").arg(1000).arg("ALL").query_async(&mut admin).await.unwrap();
    for (stream, payload) in [
        (two, Bytes::from_static(b"a")),
        (StreamId(1), Bytes::from_static(b"x")),
        (two, Bytes::from(vec![b'z'; BUDGET + 1])),
        (two, Bytes::from_static(b"b")),
        (StreamId(1), Bytes::from_static(b"y")),
        (two, Bytes::from_static(b"c")),
    ] {
        q.enqueue(stream, payload).await.expect("queued: refusals come later");
    }
    q.barrier().await;
    let payloads = |l: Vec<(u64, u64, Bytes)>| l.into_iter().map(|(_, _, p)| p).collect::<Vec<_>>();
    assert_eq!(payloads(log(&s, &id).await), ["a", "x", "y"], "b and c were behind the refused event");
    let r = q.enqueue(two, Bytes::from_static(b"d")).await;
    assert!(matches!(r, Err(AppendError::PayloadTooLarge { .. })), "told to the next enqueue: {r:?}");
    q.enqueue(StreamId(1), Bytes::from_static(b"w")).await.expect("the other stream was never refused");
    q.enqueue(two, Bytes::from_static(b"e")).await.expect("told once");
    q.barrier().await;
    assert_eq!(payloads(log(&s, &id).await), ["a", "x", "y", "w", "e"], "d was refused, not queued");
    // An ended stream: refused by the store, told once; forget drops what is
    // left untold.
    s.end_stream(&id, two).await.unwrap();
    q.enqueue(two, Bytes::from_static(b"f")).await.expect("queued");
    q.barrier().await;
    assert_eq!(q.forget(two), Some(AppendError::StreamEnded(two)));
    assert_eq!(q.forget(two), None);
}

/// `enqueue` waits while MAX_QUEUED_EVENTS events are unanswered: a
/// publisher faster than the store is held back, not buffered without end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn enqueue_waits_while_the_queue_is_full() {
    let redis = RedisServer::start(&[]);
    // A timeout longer than the pause below: nothing is failed (and its
    // room given back) meanwhile.
    let config = StoreConfig {
        timeout: Duration::from_secs(30),
        ring: RingConfig::new(100_000, 64 << 20),
        ..StoreConfig::default()
    };
    let s = RedisStore::connect(&redis.url(), config).await.unwrap();
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let q = Appender::new(s.clone(), id);
    let client = redis::Client::open(redis.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    // Redis answers no client for two seconds (it lifts the pause itself).
    let _: () = redis::cmd("CLIENT").arg("PAUSE").arg(2000).arg("ALL").query_async(&mut admin).await.unwrap();
    for i in 0..MAX_QUEUED_EVENTS {
        q.enqueue(StreamId(1), Bytes::from(format!("e{i}"))).await.expect("room");
    }
    let gauge = q.gauge();
    assert_eq!(gauge.unanswered(), MAX_QUEUED_EVENTS, "nothing answered while Redis is paused");
    let one_more = q.enqueue(StreamId(1), Bytes::from_static(b"over"));
    tokio::pin!(one_more);
    assert!(
        tokio::time::timeout(Duration::from_millis(300), &mut one_more).await.is_err(),
        "an enqueue past the bound returned while nothing was answered"
    );
    one_more.await.expect("queued once the store answered");
    q.barrier().await;
    assert_eq!(gauge.unanswered(), 0, "every event answered");
    assert_eq!(q.forget(StreamId(1)), None, "nothing refused");
    assert_eq!(log(&s, &id).await.len(), MAX_QUEUED_EVENTS + 1);
}

/// Two batches on the wire whose scripts Redis no longer has (a restart, a
/// failover, `SCRIPT FLUSH`): each is sent again after its `NOSCRIPT`, and
/// Redis may run the second before the first. The second is then refused
/// as out of order and sent again after the first, never failed: what the
/// store told of an earlier run does not undo a later answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn batches_run_out_of_order_after_noscript_are_all_written() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 100_000, 64 << 20).await;
    let client = redis::Client::open(redis.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    for round in 0..100 {
        let id = SessionId::random();
        s.create(id, None).await.unwrap();
        let q = Appender::new(s.clone(), id);
        let _: () = redis::cmd("SCRIPT").arg("FLUSH").query_async(&mut admin).await.unwrap();
        // One event alone (its batch goes at once), then more behind it
        // while it is on the wire.
        for i in 0..31 {
            q.enqueue(StreamId(1), Bytes::from(format!("e{i}"))).await.expect("queued");
        }
        q.barrier().await;
        assert_eq!(q.forget(StreamId(1)), None, "round {round}: an event was refused");
        let got: Vec<_> = log(&s, &id).await.into_iter().map(|(seq, _, p)| (seq, p)).collect();
        let want: Vec<_> = (0..31).map(|i| (i as u64 + 1, Bytes::from(format!("e{i}")))).collect();
        assert_eq!(got, want, "round {round}: every event once, in order");
    }
}
