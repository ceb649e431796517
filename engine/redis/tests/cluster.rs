//! The Redis store on a Redis Cluster of three `redis-server` masters that
//! each test starts on free loopback ports, with sessions whose hash slots
//! live on different masters.

use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::session::{Refusal, ResumeRequest, Target};
use gapless::{ErrorKind, EventId, Seq, SessionId, StreamId};
use gapless_redis::testing::RedisCluster;
use gapless_redis::{Notifier, RedisStore, StoreConfig, StoreError, TailEntry};
use std::collections::BTreeMap;
use std::time::Duration;

fn config(capacity: usize, byte_budget: usize) -> StoreConfig {
    StoreConfig { ring: RingConfig::new(capacity, byte_budget), ..StoreConfig::default() }
}

fn ev(stream: u64, payload: &str) -> (StreamId, Bytes) {
    (StreamId(stream), Bytes::from(payload.to_owned()))
}

fn meta_key(id: &SessionId) -> String {
    format!("gapless:{{{id}}}:m")
}

/// A tail's entries, each as `<stream>:<payload>`, `end <stream>` or
/// `own <seq>`.
fn kinds(t: &gapless_redis::Tail) -> Vec<String> {
    t.entries
        .iter()
        .map(|(_, e)| match e {
            TailEntry::Event(e) => format!("{}:{}", e.stream, String::from_utf8_lossy(&e.payload)),
            TailEntry::Ended(s) => format!("end {s}"),
            TailEntry::Own(e) => format!("own {}", e.seq),
        })
        .collect()
}

/// One session id per master (drawn until each master has one), each
/// with every key of the session in one slot.
fn one_session_per_master(cluster: &RedisCluster) -> BTreeMap<u16, SessionId> {
    let mut by_master = BTreeMap::new();
    for _ in 0..1000 {
        let id = SessionId::random();
        by_master.entry(cluster.master_of(&meta_key(&id))).or_insert(id);
        if by_master.len() == cluster.nodes.len() {
            break;
        }
    }
    assert_eq!(by_master.len(), cluster.nodes.len(), "random sessions reach every master");
    for id in by_master.values() {
        let slot = cluster.slot(&meta_key(id));
        for part in ["l", "s", "t", "o", "k", "n", "lease:standalone"] {
            assert_eq!(cluster.slot(&format!("gapless:{{{id}}}:{part}")), slot, "{part} shares the slot");
        }
    }
    by_master
}

/// Every store operation on sessions of every master, through one node's
/// URL: create, streams, batches, delivery marks, an exact replay, a gap
/// refusal, a rewritten check, tickets, delete; then the same after every
/// node forgot the scripts (NOSCRIPT: loaded again where needed).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_operation_works_on_sessions_of_every_master() {
    let cluster = RedisCluster::start(3);
    let s = RedisStore::connect(&cluster.url(1), config(8, 1 << 20)).await.expect("connects to the cluster");
    let sessions = one_session_per_master(&cluster);
    for round in 0..2 {
        if round == 1 {
            for n in &cluster.nodes {
                gapless_redis::testing::command(n.port, &["SCRIPT", "FLUSH"]).await;
            }
        }
        for (master, id) in &sessions {
            let what = format!("round {round}, session on master {master}");
            let sess = s.create(*id, Some("alice")).await.expect(&what);
            let two = s.open_stream(id).await.unwrap();
            assert_eq!(two, StreamId(2));
            let a = s.append(id, &[ev(2, "a"), ev(1, "s"), ev(2, "b")]).await.unwrap();
            let b = s.append(id, &[ev(2, "c"), ev(2, "d")]).await.unwrap();
            assert_eq!(a.iter().chain(&b).map(|x| x.seq.0).collect::<Vec<_>>(), [1, 2, 3, 4, 5], "{what}");
            assert!(s.mark_delivered(id, two, a[0].seq, 1, Some(a[0].check)).await.unwrap());
            assert_eq!(s.marks(id, two).await.unwrap(), (Seq(5), Seq(1)));
            let sid = id.to_string();
            let cursor = EventId::new(sess.ns, two, a[0].seq).with_check(a[0].check).to_string();
            let req = ResumeRequest::new(&sid).cursor(&cursor).owner(Some("alice"));
            let d = s.resume(req, Target::Stream).await.expect(&what);
            let got = s.replay(id, &d.replay, 2).await.unwrap();
            assert_eq!(
                got.iter().map(|e| (e.seq.0, &e.payload[..])).collect::<Vec<_>>(),
                [(3, &b"b"[..]), (4, b"c"), (5, b"d")],
                "{what}: exactly the stream's events after the cursor"
            );
            let forged = EventId::new(sess.ns, two, a[0].seq).with_check(a[0].check ^ 1).to_string();
            let r =
                s.resume(ResumeRequest::new(&sid).cursor(&forged).owner(Some("alice")), Target::Stream).await;
            assert_eq!(r.unwrap_err().kind(), ErrorKind::HistoryRewritten, "{what}");
            // Past the window (8 events): the cursor's gap is refused.
            s.append(id, &(0..8).map(|i| ev(2, &format!("x{i}"))).collect::<Vec<_>>()).await.unwrap();
            let r = s.resume(req, Target::Stream).await.unwrap_err();
            assert!(matches!(r, Refusal::GapNotCovered { .. }), "{what}: {r:?}");
            // A ticket from "processed nothing" and one at the stream's
            // last event, each redeemed once.
            assert_eq!(
                s.issue_ticket(id, Some("alice"), "t0", None, Duration::from_secs(5), 4).await,
                Ok(Ok(()))
            );
            let redeemed = s.redeem_ticket("t0", Some("alice")).await.unwrap();
            assert_eq!(redeemed, Ok((*id, Seq(0))), "{what}");
            assert!(s.redeem_ticket("t0", Some("alice")).await.unwrap().is_err(), "{what}: once");
            let t = s.tail(id, (12, 0), 10, Seq(0)).await.unwrap().unwrap();
            let Some((_, TailEntry::Event(last))) = t.entries.last() else {
                panic!("{what}: the head event")
            };
            let at = EventId::new(sess.ns, two, last.seq).with_check(last.check);
            s.issue_ticket(id, Some("alice"), "t1", Some(&at), Duration::from_secs(5), 4)
                .await
                .unwrap()
                .unwrap();
            assert_eq!(s.redeem_ticket("t1", Some("alice")).await.unwrap(), Ok((*id, Seq(13))), "{what}");
            assert!(s.lookup(id, Some("alice")).await.unwrap().unwrap().migrated);
            assert!(s.delete(id, Some("alice")).await.unwrap(), "{what}");
            assert_eq!(s.lookup(id, Some("alice")).await.unwrap(), None, "{what}");
        }
    }
}

/// The store refuses a cluster with any master that may evict keys (not
/// only the node the URL names), and a database other than 0.
#[tokio::test]
async fn start_up_checks_every_master() {
    let cluster = RedisCluster::start(3);
    RedisStore::connect(&cluster.url(0), StoreConfig::default()).await.expect("noeviction everywhere");
    gapless_redis::testing::command(
        cluster.nodes[2].port,
        &["CONFIG", "SET", "maxmemory-policy", "allkeys-lru"],
    )
    .await;
    for i in 0..2 {
        let e = RedisStore::connect(&cluster.url(i), StoreConfig::default()).await.unwrap_err();
        assert_eq!(e, StoreError::EvictionPolicy("allkeys-lru".into()), "through node {i}");
    }
    let db1 = format!("redis://127.0.0.1:{}/1", cluster.nodes[0].port);
    assert!(matches!(RedisStore::connect(&db1, StoreConfig::default()).await, Err(StoreError::BadUrl(_))));
}

/// Several seeds (`docs/SPEC.md` §8): the first that answers is the
/// one the store reports, a dead seed before it costs only its probe, and
/// the cluster client learns every master from the seeds; several seeds
/// naming a plain Redis are refused, and when no seed answers the error
/// names each one.
#[tokio::test]
async fn a_store_starts_from_the_first_seed_that_answers() {
    let cluster = RedisCluster::start(3);
    let dead = format!("redis://127.0.0.1:{}/0", gapless_redis::testing::free_port());
    let quick = || StoreConfig { timeout: Duration::from_millis(300), ..StoreConfig::default() };
    let (store, seed) = RedisStore::connect_seeds(&[&dead, &cluster.url(1), &cluster.url(2)], quick())
        .await
        .expect("a seed answers");
    assert_eq!(seed, cluster.url(1));
    for (_, id) in one_session_per_master(&cluster) {
        store.create(id, None).await.expect("a session on every master");
        store.set_value(&id, "k", b"v").await.unwrap();
    }
    let plain = gapless_redis::testing::RedisServer::start(&[]);
    let e = RedisStore::connect_seeds(&[&plain.url(), &cluster.url(0)], quick()).await.unwrap_err();
    assert!(matches!(&e, StoreError::BadUrl(m) if m.contains("plain Redis")), "{e:?}");
    let e = RedisStore::connect_seeds(&[&dead, &plain.url()], quick()).await.unwrap_err();
    assert!(matches!(&e, StoreError::BadUrl(_)), "a plain Redis among dead seeds too: {e:?}");
    let other = format!("redis://127.0.0.1:{}/0", gapless_redis::testing::free_port());
    let e = RedisStore::connect_seeds(&[&dead, &other], quick()).await.unwrap_err();
    assert!(matches!(&e, StoreError::Unavailable(m) if m.contains(&dead) && m.contains(&other)), "{e:?}");
    assert!(matches!(RedisStore::connect_seeds(&[], quick()).await, Err(StoreError::BadUrl(_))));
}

/// A notifier subscribed through one node is woken by announcements of
/// sessions on every master; node leases and the reaping of a dead node's
/// open request work across slots; the cluster bus reaches the notifier.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn announcements_leases_and_the_bus_reach_across_masters() {
    let cluster = RedisCluster::start(3);
    let s = RedisStore::connect(&cluster.url(0), config(64, 1 << 20)).await.unwrap();
    let sessions = one_session_per_master(&cluster);
    let notifier = Notifier::start(&cluster.url(0), "gapless:").unwrap();
    let mut bus = notifier.bus();
    let mut watches = Vec::new();
    for id in sessions.values() {
        s.create(*id, None).await.unwrap();
        watches.push(notifier.watch(*id));
    }
    tokio::time::sleep(Duration::from_millis(300)).await; // subscribed
    for w in &watches {
        // Drain the wake-up of the subscription itself.
        let _ = tokio::time::timeout(Duration::from_millis(50), w.changed()).await;
    }
    for ((master, id), w) in sessions.iter().zip(&watches) {
        s.append(id, &[ev(1, "x")]).await.unwrap();
        tokio::time::timeout(Duration::from_secs(2), w.changed())
            .await
            .unwrap_or_else(|_| panic!("the append on master {master} reached the notifier on node 0"));
    }
    s.publish_bus(b"hello").await.unwrap();
    let m = tokio::time::timeout(Duration::from_secs(2), bus.recv()).await.expect("the bus").unwrap();
    assert_eq!(&m[..], b"hello");

    // Node "a" runs a request on a session of each master, then dies.
    s.heartbeat("a", Duration::from_millis(300)).await.unwrap();
    s.heartbeat("b", Duration::from_secs(10)).await.unwrap();
    let mut streams = Vec::new();
    for id in sessions.values() {
        let stream = s.open_stream(id).await.unwrap();
        s.register_request("a", id, stream, "7").await.unwrap();
        streams.push(stream);
    }
    assert_eq!(s.reap("b", |_| Bytes::from_static(b"{}")).await.unwrap(), 0, "a is alive");
    // The lease (300 ms) and the clock skew a dead node is allowed (500 ms).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let answered =
        s.reap("b", |rid| Bytes::from(format!("{{\"id\":{rid},\"error\":-32010}}"))).await.unwrap();
    assert_eq!(answered, sessions.len(), "one answer per open request");
    assert_eq!(s.reap("b", |_| Bytes::from_static(b"{}")).await.unwrap(), 0, "never twice");
    for (id, stream) in sessions.values().zip(&streams) {
        let t = s.tail(id, (1, 0), 10, Seq(0)).await.unwrap().unwrap();
        let kinds = kinds(&t);
        assert_eq!(kinds, [format!("{stream}:{{\"id\":7,\"error\":-32010}}"), format!("end {stream}")]);
    }
}

/// A request on a stream other requests share (the legacy transport's) is
/// answered once, by its node or by the reaper when its node died, and the
/// stream goes on: the answered mark is a field of the session's meta on
/// every master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_on_a_shared_stream_is_answered_once() {
    let cluster = RedisCluster::start(3);
    let s = RedisStore::connect(&cluster.url(0), config(64, 1 << 20)).await.unwrap();
    let sessions = one_session_per_master(&cluster);
    s.heartbeat("a", Duration::from_millis(300)).await.unwrap();
    let mut shared = Vec::new();
    for id in sessions.values() {
        s.create(*id, None).await.unwrap();
        let stream = s.open_stream(id).await.unwrap();
        // Request 1 is answered by its node; 2 is still running when it dies.
        let (one, two) = (gapless_redis::RequestAt::shared(stream), gapless_redis::RequestAt::shared(stream));
        assert_ne!(one, two, "each request has its own token");
        s.register_request("a", id, one, "1").await.unwrap();
        s.register_request("a", id, two, "2").await.unwrap();
        assert_eq!(s.answer(id, one, b"{\"id\":1,\"result\":{}}").await, Ok(true));
        assert_eq!(s.answer(id, one, b"{\"id\":1,\"again\":1}").await, Ok(false), "answered once");
        // Node "a" died before it forgot request 1.
        shared.push((*id, stream));
    }
    // The lease (300 ms) and the clock skew a dead node is allowed (500 ms).
    tokio::time::sleep(Duration::from_millis(900)).await;
    let answered =
        s.reap("b", |rid| Bytes::from(format!("{{\"id\":{rid},\"error\":-31002}}"))).await.unwrap();
    assert_eq!(answered, sessions.len(), "request 2 of each session, not request 1 again");
    for (id, stream) in &shared {
        // The stream goes on: the next request's events follow.
        s.append(id, &[(*stream, Bytes::from_static(b"next"))]).await.unwrap();
        let t = s.tail(id, (0, 0), 10, Seq(0)).await.unwrap().unwrap();
        let kinds = kinds(&t);
        assert_eq!(
            kinds,
            [
                format!("{stream}:{{\"id\":1,\"result\":{{}}}}"),
                format!("{stream}:{{\"id\":2,\"error\":-31002}}"),
                format!("{stream}:next"),
            ]
        );
    }
}

/// When the node the notifier is connected to goes away, it reconnects to
/// another node of the cluster it learnt of, and wakes every watch.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_notifier_moves_to_another_node() {
    let mut cluster = RedisCluster::start(3);
    let notifier = Notifier::start(&cluster.url(0), "gapless:").unwrap();
    let id = SessionId::random();
    let watch = notifier.watch(id);
    tokio::time::sleep(Duration::from_millis(300)).await; // connected, nodes learnt
    let _ = tokio::time::timeout(Duration::from_millis(50), watch.changed()).await;
    cluster.nodes[0].kill();
    tokio::time::timeout(Duration::from_secs(5), watch.changed())
        .await
        .expect("woken after reconnecting to another node");
    // Announcements on the remaining nodes reach it.
    let survivor = cluster.nodes[2].port;
    let channel = format!("gapless:{{{id}}}:n");
    gapless_redis::testing::command(survivor, &["PUBLISH", &channel, "x"]).await;
    tokio::time::timeout(Duration::from_secs(2), watch.changed())
        .await
        .expect("an announcement after the move");
}
