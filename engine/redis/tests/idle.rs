//! What an idle session needs of the store, none of it a command per
//! session per second (`docs/SPEC.md` §8.1, §8.3, §8.8): pins that keep a
//! session with an open connection from expiring, holds valid while their
//! node's lease is, and the safety net's probe.

use bytes::Bytes;
use gapless::{SessionId, StreamId};
use gapless_redis::testing::RedisServer;
use gapless_redis::{Hold, Probe, STANDALONE_HOLD as SA};
use std::time::Duration;

/// The TTL of each of the session's keys that exists, in ms (-1: none).
async fn ttls(c: &mut redis::aio::MultiplexedConnection, id: &SessionId) -> Vec<i64> {
    let mut out = Vec::new();
    for part in ["m", "l", "s", "b"] {
        let t: i64 = redis::cmd("PTTL").arg(format!("gapless:{{{id}}}:{part}")).query_async(c).await.unwrap();
        if t != -2 {
            out.push(t);
        }
    }
    out
}

fn ev(stream: u64, payload: &str) -> (StreamId, Bytes) {
    (StreamId(stream), Bytes::from(payload.to_owned()))
}

#[tokio::test]
async fn a_pinned_session_outlives_its_idle_timeout_and_expires_idle_after_its_last_pin() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_millis(400)).await;
    let mut c = redis.admin().await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    assert!(ttls(&mut c, &id).await.iter().all(|t| *t > 0), "an unpinned session expires");
    assert!(s.pin(&id, "a", true).await.unwrap());
    assert!(s.pin(&id, "a", true).await.unwrap(), "pinning twice is one pin");
    assert!(s.pin(&id, "b", true).await.unwrap());
    // Keys made while pinned get no TTL either (the log, its lengths).
    s.append(&id, &[ev(1, "x")]).await.unwrap();
    let t = ttls(&mut c, &id).await;
    assert!(t.len() >= 3 && t.iter().all(|t| *t == -1), "pinned: no TTL on any key: {t:?}");
    tokio::time::sleep(Duration::from_millis(900)).await;
    assert!(s.lookup(&id, None).await.unwrap().is_some(), "pinned past its idle timeout");
    assert!(s.pin(&id, "a", false).await.unwrap());
    assert!(ttls(&mut c, &id).await.iter().all(|t| *t == -1), "b still pins it");
    assert!(s.pin(&id, "b", false).await.unwrap());
    let t = ttls(&mut c, &id).await;
    assert!(t.iter().all(|t| *t > 0 && *t <= 400), "the last unpin gives every key the idle timeout: {t:?}");
    tokio::time::sleep(Duration::from_millis(700)).await;
    assert_eq!(s.lookup(&id, None).await.unwrap(), None, "expired idle after the last pin");
    assert!(!s.pin(&id, "a", true).await.unwrap(), "a gone session is not pinned");
    let set: Vec<String> =
        redis::cmd("SMEMBERS").arg("gapless:node:a:pinned").query_async(&mut c).await.unwrap();
    assert!(set.is_empty(), "nothing left in the node's pins: {set:?}");
}

#[tokio::test]
async fn the_reaper_lets_go_of_a_dead_nodes_pins() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_secs(60)).await;
    let mut c = redis.admin().await;
    let (id, other) = (SessionId::random(), SessionId::random());
    s.create(id, None).await.unwrap();
    s.create(other, None).await.unwrap();
    s.heartbeat("a", Duration::from_millis(300)).await.unwrap();
    s.heartbeat("b", Duration::from_secs(10)).await.unwrap();
    s.pin(&id, "a", true).await.unwrap();
    s.pin(&other, "a", true).await.unwrap();
    s.pin(&other, "b", true).await.unwrap();
    s.reap("b", |_| Bytes::from_static(b"{}")).await.unwrap();
    assert!(ttls(&mut c, &id).await.iter().all(|t| *t == -1), "a is alive: its pins stay");
    tokio::time::sleep(Duration::from_millis(900)).await; // the lease and SKEW
    s.reap("b", |_| Bytes::from_static(b"{}")).await.unwrap();
    let t = ttls(&mut c, &id).await;
    assert!(!t.is_empty() && t.iter().all(|t| *t > 0), "a's pin went with a: {t:?}");
    assert!(ttls(&mut c, &other).await.iter().all(|t| *t == -1), "b's pin stays");
    let set: i64 = redis::cmd("EXISTS").arg("gapless:node:a:pinned").query_async(&mut c).await.unwrap();
    assert_eq!(set, 0, "the dead node's pins are forgotten");
}

#[tokio::test]
async fn a_hold_is_kept_until_let_go_of_or_its_node_dies() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_secs(60)).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    s.heartbeat("a", Duration::from_millis(300)).await.unwrap();
    s.heartbeat("b", Duration::from_secs(10)).await.unwrap();
    let taken = |replaced: Option<&str>| Hold::Taken { replaced: replaced.map(str::to_owned) };
    let busy = |holder: &str| Hold::Busy { holder: holder.to_owned() };
    assert_eq!(s.take_hold(&id, SA, "a:1", true, |_| false).await.unwrap(), taken(None));
    assert_eq!(s.take_hold(&id, SA, "a:1", true, |_| false).await.unwrap(), taken(None), "the holder again");
    assert_eq!(s.take_hold(&id, SA, "b:1", true, |_| false).await.unwrap(), busy("a:1"), "a is alive");
    assert_eq!(s.take_hold(&id, SA, "a:2", true, |_| false).await.unwrap(), busy("a:1"), "a:1 is open");
    assert_eq!(s.take_hold(&id, SA, "a:2", true, |h| h == "a:1").await.unwrap(), taken(Some("a:1")));
    s.drop_hold(&id, SA, "a:1").await.unwrap(); // no longer the holder: nothing
    assert_eq!(s.take_hold(&id, SA, "b:1", true, |_| false).await.unwrap(), busy("a:2"));
    // Another hold of the session is another field.
    assert_eq!(s.take_hold(&id, "h:x", "b", true, |_| false).await.unwrap(), taken(None));
    tokio::time::sleep(Duration::from_millis(900)).await; // the lease and SKEW
    assert_eq!(
        s.take_hold(&id, SA, "b:1", false, |_| false).await.unwrap(),
        busy("a:2"),
        "a caller that may not judge deaths takes nobody for dead"
    );
    assert_eq!(s.take_hold(&id, SA, "b:1", true, |_| false).await.unwrap(), taken(Some("a:2")), "a died");
    s.drop_hold(&id, SA, "b:1").await.unwrap();
    assert_eq!(s.take_hold(&id, SA, "b:2", true, |_| false).await.unwrap(), taken(None), "let go of");
    assert_eq!(s.take_hold(&id, "h:x", "a", true, |_| false).await.unwrap(), busy("b"));
    s.delete(&id, None).await.unwrap();
    let e = s.take_hold(&id, SA, "b:3", true, |_| false).await.unwrap_err();
    assert_eq!(e, gapless_redis::StoreError::UnknownSession);
}

#[tokio::test]
async fn a_probe_reads_the_logs_last_entry_and_writes_nothing() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_secs(60)).await;
    let mut c = redis.admin().await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    assert_eq!(s.probe(&id).await.unwrap(), Probe::Last((0, 0), None, 0));
    let two = s.open_stream(&id).await.unwrap();
    s.append(&id, &[ev(1, "x"), ev(two.0, "y")]).await.unwrap();
    let Probe::Last(at, Some(nonce), 0) = s.probe(&id).await.unwrap() else { panic!("an event last") };
    assert_eq!(at, (2, 0));
    let tail = s.tail(&id, (1, 0), 10, gapless::Seq(0)).await.unwrap().unwrap();
    match &tail.entries[..] {
        [(_, gapless_redis::TailEntry::Event(e))] => assert_eq!(e.check, nonce, "the last event's nonce"),
        other => panic!("{other:?}"),
    }
    s.end_stream(&id, two).await.unwrap();
    assert_eq!(
        s.probe(&id).await.unwrap(),
        Probe::Last((2, 1), None, 1),
        "a stream's end is an entry too, counted"
    );
    let before = ttls(&mut c, &id).await;
    tokio::time::sleep(Duration::from_millis(50)).await;
    s.probe(&id).await.unwrap();
    let after = ttls(&mut c, &id).await;
    assert!(before.iter().zip(&after).all(|(b, a)| a < b), "no TTL refreshed: {before:?} {after:?}");
    s.delete(&id, None).await.unwrap();
    assert_eq!(s.probe(&id).await.unwrap(), Probe::Gone);
}
