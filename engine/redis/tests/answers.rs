//! A request is answered once (`docs/SPEC.md` §8.6): the mark that a
//! request on a shared stream was answered lasts as long as its session,
//! a cancelled request is marked too, and its node, forgetting a request,
//! deletes its registration durably, then its mark (unless a reaper is at
//! work on the node: a reaper keeps the marks).

use bytes::Bytes;
use gapless::{SessionId, StreamId};
use gapless_redis::testing::RedisServer;
use gapless_redis::{RedisStore, RequestAt, TailEntry};
use std::time::Duration;

const LEASE: Duration = Duration::from_millis(300);

/// The payloads of the session's events, in order.
async fn payloads(s: &RedisStore, id: &SessionId) -> Vec<String> {
    let t = s.tail(id, (0, 0), 100, gapless::Seq(0)).await.unwrap().expect("the session exists");
    t.entries
        .iter()
        .filter_map(|(_, e)| match e {
            TailEntry::Event(e) => Some(String::from_utf8_lossy(&e.payload).into_owned()),
            _ => None,
        })
        .collect()
}

/// The answered marks in the session's meta.
async fn marks(c: &mut redis::aio::MultiplexedConnection, id: &SessionId) -> Vec<String> {
    let fields: Vec<String> =
        redis::cmd("HKEYS").arg(format!("gapless:{{{id}}}:m")).query_async(c).await.unwrap();
    fields.into_iter().filter(|f| f.starts_with("a:")).collect()
}

/// Node "b" reaps "a", dead (its lease ran out, with the skew allowed a
/// dead node): how many requests "b" answered.
async fn reap(s: &RedisStore) -> usize {
    s.reap("b", |rid| Bytes::from(format!("{{\"id\":{rid},\"error\":-31002}}"))).await.unwrap()
}

async fn die_and_reap(s: &RedisStore) -> usize {
    tokio::time::sleep(LEASE + Duration::from_millis(700)).await;
    reap(s).await
}

/// A node answers a request on a shared stream and dies before it forgets
/// it; the session stays busy for longer than its idle timeout. The mark
/// must outlast that (it used to be a key expiring after the idle
/// timeout, and the reaper then answered the request a second time).
#[tokio::test]
async fn an_answered_mark_lasts_as_long_as_its_session() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_millis(400)).await;
    let mut c = redis.admin().await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let stream = s.open_stream(&id).await.unwrap();
    s.heartbeat("a", LEASE).await.unwrap();
    let at = RequestAt::shared(stream);
    s.register_request("a", &id, at, "1").await.unwrap();
    assert_eq!(s.answer(&id, at, b"answer 1").await, Ok(true));
    // Busy for three idle timeouts, while node "a" dies: every event
    // refreshes the session.
    for i in 0..12 {
        s.append(&id, &[(StreamId(stream.0), Bytes::from(format!("event {i}")))]).await.unwrap();
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(reap(&s).await, 0, "answered by its node already");
    let want: Vec<String> =
        std::iter::once("answer 1".to_owned()).chain((0..12).map(|i| format!("event {i}"))).collect();
    assert_eq!(payloads(&s, &id).await, want, "no second answer");
    assert_eq!(marks(&mut c, &id).await.len(), 1, "the reaper keeps the mark");
}

/// A node taken for dead while alive: the reaper answers its request
/// first; the node's own answer later adds nothing, and its forgetting
/// keeps the mark while a reaper is at work on it.
#[tokio::test]
async fn a_node_taken_for_dead_adds_no_second_answer() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_secs(60)).await;
    let mut c = redis.admin().await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let stream = s.open_stream(&id).await.unwrap();
    s.heartbeat("a", LEASE).await.unwrap();
    let (one, two) = (RequestAt::shared(stream), RequestAt::shared(stream));
    s.register_request("a", &id, one, "1").await.unwrap();
    s.register_request("a", &id, two, "2").await.unwrap();
    assert_eq!(die_and_reap(&s).await, 2);
    assert_eq!(s.answer(&id, one, b"late answer 1").await, Ok(false), "the reaper's answer stands");
    s.finish_request("a", &id, one).await.unwrap();
    // Node "a" answers request 2 while a reaper of it holds the lock (one
    // that read the registrations before they went): the mark stays.
    let _: () = redis::cmd("SET").arg("gapless:reap:a").arg("b").query_async(&mut c).await.unwrap();
    assert_eq!(s.answer(&id, two, b"late answer 2").await, Ok(false));
    s.finish_request("a", &id, two).await.unwrap();
    assert_eq!(s.answer(&id, two, b"a reaper's stale answer").await, Ok(false), "no second answer");
    assert_eq!(payloads(&s, &id).await, ["{\"id\":1,\"error\":-31002}", "{\"id\":2,\"error\":-31002}"]);
    assert_eq!(marks(&mut c, &id).await.len(), 1, "request 2's mark stays while the reaper is at work");
}

/// A cancelled request gets no answer, from its node or, when its node
/// dies before it forgets the request, from the reaper.
#[tokio::test]
async fn a_cancelled_request_is_never_answered() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_secs(60)).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let stream = s.open_stream(&id).await.unwrap();
    s.heartbeat("a", LEASE).await.unwrap();
    let (cancelled, running) = (RequestAt::shared(stream), RequestAt::shared(stream));
    s.register_request("a", &id, cancelled, "1").await.unwrap();
    s.register_request("a", &id, running, "2").await.unwrap();
    let RequestAt::Shared(_, token) = cancelled else { unreachable!() };
    assert_eq!(s.mark_answered(&id, stream, token).await, Ok(true));
    assert_eq!(s.mark_answered(&id, stream, token).await, Ok(false), "marked once");
    assert_eq!(s.answer(&id, cancelled, b"late answer").await, Ok(false), "a marked request takes no answer");
    assert_eq!(die_and_reap(&s).await, 1, "request 2 only");
    assert_eq!(payloads(&s, &id).await, ["{\"id\":2,\"error\":-31002}"]);
}

/// Forgetting a request deletes its registration and its mark: a long
/// session of the legacy transport does not pile up marks.
#[tokio::test]
async fn forgetting_a_request_deletes_its_registration_and_its_mark() {
    let redis = RedisServer::start(&[]);
    let s = redis.store_with_idle_timeout(Duration::from_secs(60)).await;
    let mut c = redis.admin().await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let stream = s.open_stream(&id).await.unwrap();
    for n in 0..20 {
        let at = RequestAt::shared(stream);
        s.register_request("a", &id, at, &n.to_string()).await.unwrap();
        assert_eq!(s.answer(&id, at, format!("answer {n}").as_bytes()).await, Ok(true));
        assert_eq!(marks(&mut c, &id).await.len(), 1);
        s.finish_request("a", &id, at).await.unwrap();
    }
    assert!(marks(&mut c, &id).await.is_empty());
    let open: Vec<String> =
        redis::cmd("HKEYS").arg("gapless:node:a:requests").query_async(&mut c).await.unwrap();
    assert!(open.is_empty(), "{open:?}");
}
