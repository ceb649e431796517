//! Writes a failover must not lose (`docs/SPEC.md` §8.6): a request's
//! registration and its answer count as written only once a replica has
//! them, against real `redis-server` processes (a primary and a replica)
//! that the test starts on free loopback ports.

use bytes::Bytes;
use gapless::{SessionId, StreamId};
use gapless_redis::testing::{command, RedisServer};
use gapless_redis::{RedisStore, StoreConfig, StoreError};
use std::time::{Duration, Instant};

fn text(v: &redis::Value) -> String {
    match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text.clone(),
        other => panic!("expected text, got {other:?}"),
    }
}

/// Waits until the primary on `port` has `n` replicas online.
async fn until_replicas(port: u16, n: usize) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let info = text(&command(port, &["INFO", "replication"]).await);
        if info.lines().filter(|l| l.starts_with("slave") && l.contains("state=online")).count() == n {
            return;
        }
        assert!(Instant::now() < deadline, "no {n} replicas online: {info}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The store's timeout bounds how long a write waits for a replica. A
/// write the replica should acknowledge must not miss it on a loaded
/// machine (600 ms did once in CI, with the replica online), and a write
/// it cannot acknowledge waits all of it: 4 s is both.
fn config() -> StoreConfig {
    StoreConfig { timeout: Duration::from_secs(4), ..StoreConfig::default() }
}

#[tokio::test]
async fn a_write_counts_only_once_a_replica_has_it() {
    let primary = RedisServer::start(&[]);
    let port = primary.port.to_string();
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &port]);
    until_replicas(primary.port, 1).await;
    let store = RedisStore::connect(&primary.url(), config()).await.unwrap();
    let session = store.create(SessionId::random(), None).await.unwrap();
    let stream = store.open_stream(&session.id).await.unwrap();
    store.register_request("n1", &session.id, stream, "1").await.expect("replicated");

    // The replica leaves: a failover could still promote it, so nothing
    // written now is safe, and the store says so instead of acknowledging.
    command(replica.port, &["REPLICAOF", "NO", "ONE"]).await;
    until_replicas(primary.port, 0).await;
    let e = store.register_request("n1", &session.id, StreamId(stream.0 + 1), "2").await.unwrap_err();
    assert!(matches!(&e, StoreError::Unavailable(m) if m.contains("no replica acknowledged")), "{e:?}");
    let answer = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    let e = store.answer(&session.id, stream, &answer).await.unwrap_err();
    assert!(matches!(&e, StoreError::Unavailable(m) if m.contains("no replica acknowledged")), "{e:?}");

    // The replica is back: the writes are acknowledged. The answer the
    // first try left on the primary is found there (written once).
    command(replica.port, &["REPLICAOF", "127.0.0.1", &port]).await;
    until_replicas(primary.port, 1).await;
    store.register_request("n1", &session.id, StreamId(stream.0 + 1), "2").await.expect("replicated");
    assert_eq!(store.answer(&session.id, stream, &answer).await, Ok(false), "answered once");
    let log = command(primary.port, &["XRANGE", &format!("gapless:{{{}}}:l", session.id), "-", "+"]).await;
    let redis::Value::Array(entries) = log else { panic!("XRANGE answered {log:?}") };
    let answers = entries.iter().filter(|e| format!("{e:?}").contains(r#"\"result\""#)).count();
    assert_eq!(answers, 1, "{entries:?}");
}

#[tokio::test]
async fn a_redis_that_never_had_a_replica_is_not_waited_for() {
    let redis = RedisServer::start(&[]);
    let store = RedisStore::connect(&redis.url(), config()).await.unwrap();
    let session = store.create(SessionId::random(), None).await.unwrap();
    let stream = store.open_stream(&session.id).await.unwrap();
    store.register_request("n1", &session.id, stream, "1").await.expect("no replica to wait for");
    // An answer over the session's byte budget is refused for good, with
    // its length, and nothing is written: the stream is still open.
    let len = config().ring.byte_budget + 1;
    let big = Bytes::from(vec![b'x'; len]);
    assert_eq!(store.answer(&session.id, stream, &big).await, Err(StoreError::AnswerTooLarge { len }));
    let answer = Bytes::from_static(br#"{"jsonrpc":"2.0","id":1,"result":{}}"#);
    assert_eq!(store.answer(&session.id, stream, &answer).await, Ok(true));
}
