//! The Redis store against real `redis-server` processes that each test
//! starts on a free loopback port.

use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::session::{Refusal, ResumeRequest, Target};
use gapless::{ErrorKind, EventId, Seq, SessionId, StreamId};
use gapless_redis::testing::{free_port, RedisServer};
use gapless_redis::{Announced, AppendError, RedisStore, StoreConfig, StoreError};
use std::collections::HashSet;
use std::time::Duration;

fn config(capacity: usize, byte_budget: usize) -> StoreConfig {
    StoreConfig { ring: RingConfig::new(capacity, byte_budget), ..StoreConfig::default() }
}

async fn store(redis: &RedisServer, capacity: usize, byte_budget: usize) -> RedisStore {
    RedisStore::connect(&redis.url(), config(capacity, byte_budget)).await.expect("connects")
}

fn ev(stream: u64, payload: &str) -> (StreamId, Bytes) {
    (StreamId(stream), Bytes::from(payload.to_owned()))
}

#[tokio::test]
async fn start_up_refuses_bad_urls_unreachable_servers_and_evicting_policies() {
    let e = RedisStore::connect("http://nope", StoreConfig::default()).await.unwrap_err();
    assert!(matches!(e, StoreError::BadUrl(_)), "{e:?}");
    let e = RedisStore::connect("redis://127.0.0.1:notaport/0", StoreConfig::default()).await.unwrap_err();
    assert!(matches!(e, StoreError::BadUrl(_)), "{e:?}");
    let quick = StoreConfig { timeout: Duration::from_millis(300), ..StoreConfig::default() };
    let t = std::time::Instant::now();
    let e = RedisStore::connect(&format!("redis://127.0.0.1:{}/0", free_port()), quick).await.unwrap_err();
    assert!(matches!(e, StoreError::Unavailable(_)), "{e:?}");
    assert!(t.elapsed() < Duration::from_secs(5), "gave up after {:?}", t.elapsed());
    let lru = RedisServer::start(&["--maxmemory-policy", "allkeys-lru"]);
    let e = RedisStore::connect(&lru.url(), StoreConfig::default()).await.unwrap_err();
    assert_eq!(e, StoreError::EvictionPolicy("allkeys-lru".into()));
    assert!(e.to_string().contains("noeviction"), "{e}");
    let ok = RedisServer::start(&[]);
    RedisStore::connect(&ok.url(), StoreConfig::default()).await.expect("noeviction is accepted");
}

#[tokio::test]
async fn sessions_are_bound_to_their_owner_and_a_new_incarnation_is_a_new_namespace() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let id = SessionId::random();
    let a = s.create(id, Some("alice")).await.unwrap();
    assert_eq!(s.lookup(&id, Some("alice")).await.unwrap(), Some(a.clone()));
    assert_eq!(s.lookup(&id, Some("bob")).await.unwrap(), None);
    assert_eq!(s.lookup(&id, None).await.unwrap(), None);
    assert!(!s.delete(&id, Some("bob")).await.unwrap(), "a foreign caller deletes nothing");
    s.append(&id, &[ev(1, "x")]).await.unwrap();
    let b = s.create(id, Some("alice")).await.unwrap();
    assert_ne!(a.ns, b.ns);
    let f = s.facts(&id, Some("alice"), Target::Session, None).await.unwrap().unwrap();
    assert_eq!(gapless::session::SessionFacts::head(&f), Seq(0), "the old incarnation's events are gone");
    assert!(s.delete(&id, Some("alice")).await.unwrap());
    assert_eq!(s.lookup(&id, Some("alice")).await.unwrap(), None);
    assert_eq!(s.open_stream(&id).await, Err(StoreError::UnknownSession));
}

#[tokio::test]
async fn a_session_keeps_its_values_until_it_goes_and_a_new_incarnation_starts_without_them() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let id = SessionId::random();
    assert_eq!(s.set_value(&id, "up", b"x").await, Err(StoreError::UnknownSession), "no session yet");
    assert_eq!(s.value(&id, "up").await, Err(StoreError::UnknownSession));
    s.create(id, None).await.unwrap();
    assert_eq!(s.value(&id, "up").await.unwrap(), None);
    s.set_value(&id, "up", b"{\"sid\":\"a\"}").await.unwrap();
    s.set_value(&id, "pv", b"not the version").await.unwrap();
    assert_eq!(s.value(&id, "up").await.unwrap().as_deref(), Some(&b"{\"sid\":\"a\"}"[..]));
    assert_eq!(s.value(&id, "pv").await.unwrap().as_deref(), Some(&b"not the version"[..]));
    let stored = s.lookup(&id, None).await.unwrap().expect("the session");
    assert_eq!(stored.version, "", "a value named like a meta field is not that field");
    s.set_value(&id, "up", b"").await.unwrap();
    assert_eq!(s.value(&id, "up").await.unwrap().as_deref(), Some(&b""[..]), "empty is a value");
    s.create(id, None).await.unwrap();
    assert_eq!(s.value(&id, "up").await.unwrap(), None, "a new incarnation starts without values");
    s.set_value(&id, "up", b"y").await.unwrap();
    assert!(s.delete(&id, None).await.unwrap());
    assert_eq!(s.value(&id, "up").await, Err(StoreError::UnknownSession), "they go with the session");
}

#[tokio::test]
async fn appends_are_dense_and_a_refused_batch_writes_nothing() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 100).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let two = s.open_stream(&id).await.unwrap();
    assert_eq!(two, StreamId(2));
    let got = s.append(&id, &[ev(1, "a"), ev(2, "b"), ev(1, "c")]).await.unwrap();
    assert_eq!(got.iter().map(|a| a.seq.0).collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(got.iter().map(|a| a.check).collect::<HashSet<_>>().len(), 3, "nonces differ");
    s.end_stream(&id, two).await.unwrap();
    let refused = [
        (vec![ev(1, "d"), ev(2, "e")], AppendError::StreamEnded(two)),
        (vec![ev(1, "d"), ev(9, "e")], AppendError::UnknownStream(StreamId(9))),
        (
            vec![ev(1, "d"), ev(1, &"x".repeat(101))],
            AppendError::PayloadTooLarge { index: 1, len: 101, budget: 100 },
        ),
    ];
    for (batch, want) in refused {
        assert_eq!(s.append(&id, &batch).await, Err(want));
    }
    let f = s.facts(&id, None, Target::Session, None).await.unwrap().unwrap();
    assert_eq!(gapless::session::SessionFacts::head(&f), Seq(3), "nothing of a refused batch stays");
    assert_eq!(s.append(&id, &[ev(1, "d")]).await.unwrap()[0].seq, Seq(4));
    assert_eq!(
        s.append(&SessionId::random(), &[ev(1, "x")]).await,
        Err(AppendError::Store(StoreError::UnknownSession))
    );
}

/// Two nodes (two connections) append into one session at once: the store
/// allocates every seq once, densely, and each node's batch stays in order.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_writers_get_dense_unique_seqs() {
    let redis = RedisServer::start(&[]);
    let (a, b) = (store(&redis, 1 << 16, 1 << 24).await, store(&redis, 1 << 16, 1 << 24).await);
    let id = SessionId::random();
    let ns = a.create(id, None).await.unwrap().ns;
    let write = |s: RedisStore, tag: &'static str| {
        tokio::spawn(async move {
            let mut seqs = Vec::new();
            for i in 0..200 {
                let batch: Vec<_> = (0..5).map(|j| ev(1, &format!("{tag}{}", i * 5 + j))).collect();
                seqs.extend(s.append(&id, &batch).await.unwrap().into_iter().map(|x| x.seq.0));
            }
            seqs
        })
    };
    let (sa, sb) = (write(a.clone(), "a"), write(b, "b"));
    let (sa, sb) = (sa.await.unwrap(), sb.await.unwrap());
    for s in [&sa, &sb] {
        assert!(s.windows(2).all(|w| w[0] < w[1]), "a writer's seqs rise");
    }
    let mut all: Vec<u64> = sa.iter().chain(&sb).copied().collect();
    all.sort_unstable();
    assert_eq!(all, (1..=2000).collect::<Vec<_>>(), "dense, none twice");
    // Every event is where its seq says, with its writer's payload order.
    let plan = gapless_redis::ReplayPlan {
        after: Seq(0),
        from: Seq(1),
        to: Seq(2000),
        head: Seq(2000),
        stream: None,
        ns,
        head_check: None,
    };
    let events = a.replay(&id, &plan, 333).await.unwrap();
    assert_eq!(events.len(), 2000);
    let a_payloads: Vec<String> = events
        .iter()
        .map(|e| String::from_utf8(e.payload.to_vec()).unwrap())
        .filter(|p| p.starts_with('a'))
        .collect();
    assert_eq!(a_payloads, (0..1000).map(|i| format!("a{i}")).collect::<Vec<_>>());
}

#[tokio::test]
async fn the_window_is_trimmed_by_events_and_by_bytes_in_the_append() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 4, 10).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let oldest = |s: RedisStore| async move {
        let f = s.facts(&id, None, Target::Session, None).await.unwrap().unwrap();
        gapless::session::SessionFacts::oldest(&f).0
    };
    s.append(&id, &[ev(1, "a"), ev(1, "b"), ev(1, "c"), ev(1, "d"), ev(1, "e")]).await.unwrap();
    assert_eq!(oldest(s.clone()).await, 2, "by events: 4 kept");
    s.append(&id, &[ev(1, "123456789")]).await.unwrap();
    assert_eq!(oldest(s.clone()).await, 5, "by bytes: 1 + 9 of 10");
    let key = format!("gapless:{{{id}}}:l");
    let mut c = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let len: usize = redis::cmd("XLEN").arg(&key).query_async(&mut c).await.unwrap();
    assert_eq!(len, 2, "the trimmed entries left the stream key");
}

#[tokio::test]
async fn idle_sessions_expire() {
    let redis = RedisServer::start(&[]);
    let cfg = StoreConfig { idle_timeout: Duration::from_millis(300), ..config(64, 1 << 20) };
    let s = RedisStore::connect(&redis.url(), cfg).await.unwrap();
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    s.append(&id, &[ev(1, "x")]).await.unwrap();
    for _ in 0..4 {
        tokio::time::sleep(Duration::from_millis(150)).await;
        assert!(s.lookup(&id, None).await.unwrap().is_some(), "a lookup resets the idle clock");
    }
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(s.lookup(&id, None).await.unwrap(), None, "expired");
    let cursor = "0000000000000000_1_0000000000000000-1";
    let r = s.resume(ResumeRequest::new(&id.to_string()).cursor(cursor), Target::Stream).await;
    assert_eq!(r.unwrap_err(), Refusal::UnknownSession);
}

/// Another program's data under our prefix: an explicit error, nothing
/// written, other sessions untouched.
#[tokio::test]
async fn keys_of_another_type_are_an_error_not_a_panic() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let (good, bad) = (SessionId::random(), SessionId::random());
    s.create(good, None).await.unwrap();
    s.append(&good, &[ev(1, "kept")]).await.unwrap();
    let mut c = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("SET")
        .arg(format!("gapless:{{{bad}}}:l"))
        .arg("not ours")
        .query_async(&mut c)
        .await
        .unwrap();
    let e = s.create(bad, None).await.unwrap_err();
    assert_eq!(e, StoreError::Corrupt { key: format!("gapless:{{{bad}}}:l") });
    let v: String = redis::cmd("GET").arg(format!("gapless:{{{bad}}}:l")).query_async(&mut c).await.unwrap();
    assert_eq!(v, "not ours", "the foreign key is left as it was");
    let _: () =
        redis::cmd("SET").arg(format!("gapless:{{{good}}}:s")).arg("x").query_async(&mut c).await.unwrap();
    assert!(matches!(
        s.append(&good, &[ev(1, "y")]).await,
        Err(AppendError::Store(StoreError::Corrupt { .. }))
    ));
    let other = SessionId::random();
    s.create(other, None).await.unwrap();
    assert_eq!(s.append(&other, &[ev(1, "z")]).await.unwrap()[0].seq, Seq(1), "other sessions work on");
}

/// Redis stops: resumes are 503 `store_unavailable`, appends fail visibly;
/// when it is back (empty: it kept nothing), the same store handle works
/// again without a restart, and the lost session is 404, never a fresh one.
#[tokio::test]
async fn redis_down_is_store_unavailable_and_the_store_recovers() {
    let mut redis = RedisServer::start(&[]);
    let cfg = StoreConfig { timeout: Duration::from_millis(500), ..config(64, 1 << 20) };
    let s = RedisStore::connect(&redis.url(), cfg).await.unwrap();
    let id = SessionId::random();
    let sess = s.create(id, None).await.unwrap();
    let a = s.append(&id, &[ev(1, "x")]).await.unwrap()[0];
    s.mark_delivered(&id, StreamId(1), a.seq, 1, None).await.unwrap();
    let cursor = EventId::new(sess.ns, StreamId(1), a.seq).with_check(a.check).to_string();
    redis.kill();
    let r = s.resume(ResumeRequest::new(&id.to_string()).cursor(&cursor), Target::Stream).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::StoreUnavailable);
    assert_eq!(r.http_status(), 503);
    assert!(matches!(
        s.append(&id, &[ev(1, "y")]).await,
        Err(AppendError::Store(StoreError::Unavailable(_)))
    ));
    redis.restart();
    let mut back = None;
    for _ in 0..50 {
        match s.resume(ResumeRequest::new(&id.to_string()).cursor(&cursor), Target::Stream).await {
            Err(Refusal::StoreUnavailable { .. }) => tokio::time::sleep(Duration::from_millis(100)).await,
            other => {
                back = Some(other);
                break;
            }
        }
    }
    assert_eq!(back.expect("the store reconnects").unwrap_err(), Refusal::UnknownSession);
    let id2 = SessionId::random();
    s.create(id2, None).await.unwrap();
    assert_eq!(s.append(&id2, &[ev(1, "z")]).await.unwrap()[0].seq, Seq(1));
}

/// A resume granted on the store replays exactly the cursor's stream after
/// it; a cursor whose check is not the event's nonce is `history_rewritten`.
#[tokio::test]
async fn resume_replays_the_stream_and_checks_the_nonce() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let id = SessionId::random();
    let sess = s.create(id, None).await.unwrap();
    let two = s.open_stream(&id).await.unwrap();
    let got = s.append(&id, &[ev(2, "a"), ev(1, "s"), ev(2, "b"), ev(2, "c")]).await.unwrap();
    s.mark_delivered(&id, two, got[0].seq, 1, None).await.unwrap();
    let sid = id.to_string();
    let cursor = EventId::new(sess.ns, two, got[0].seq).with_check(got[0].check);
    let d = s.resume(ResumeRequest::new(&sid).cursor(&cursor.to_string()), Target::Stream).await.unwrap();
    let events = s.replay(&id, &d.replay, 2).await.unwrap();
    assert_eq!(
        events.iter().map(|e| (e.seq.0, &e.payload[..])).collect::<Vec<_>>(),
        [(3, &b"b"[..]), (4, b"c")]
    );
    let forged = cursor.with_check(got[0].check ^ 1).to_string();
    let r = s.resume(ResumeRequest::new(&sid).cursor(&forged), Target::Stream).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::HistoryRewritten);
    let unchecked = EventId::new(sess.ns, two, got[0].seq).to_string();
    let r = s.resume(ResumeRequest::new(&sid).cursor(&unchecked), Target::Stream).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::NamespaceMismatch, "the store mints every id with a check");
    let beyond = EventId::new(sess.ns, two, Seq(99)).with_check(7).to_string();
    let r = s.resume(ResumeRequest::new(&sid).cursor(&beyond), Target::Stream).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::CursorAhead, "beyond the head, and nothing known lost: never emitted");
    // A node had seen a head of 120: the store lost up to 120 (a failover).
    let r =
        s.resume_seen(ResumeRequest::new(&sid).cursor(&beyond), Target::Stream, Seq(120)).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::HistoryRewritten, "a checked seq the store lost");
    let r = s.resume(ResumeRequest::new(&sid).cursor(&beyond), Target::Stream).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::HistoryRewritten, "the store remembers what it lost");
    let past = EventId::new(sess.ns, two, Seq(121)).with_check(7).to_string();
    let r = s.resume(ResumeRequest::new(&sid).cursor(&past), Target::Stream).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::CursorAhead, "beyond what was lost: never emitted");
}

/// A follower attaches where the log is, is woken by announcements, and
/// reads events and stream ends in log order; after Redis restarts, its
/// watch is woken so that it reads again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn followers_attach_tail_and_are_woken() {
    use gapless_redis::{Notifier, TailEntry};
    let mut redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let id = SessionId::random();
    s.create_versioned(id, Some("o"), "2025-06-18").await.unwrap();
    let two = s.open_stream(&id).await.unwrap();
    let three = s.open_stream(&id).await.unwrap();
    s.append(&id, &[ev(2, "a"), ev(3, "b")]).await.unwrap();
    s.end_stream(&id, two).await.unwrap();
    assert_eq!(s.attach(&id, None).await.unwrap(), None, "a foreign caller attaches to nothing");
    let at = s.attach(&id, Some("o")).await.unwrap().unwrap();
    assert_eq!((at.head, at.opened, at.position), (Seq(2), three, (2, 1)));
    assert_eq!(at.live, [StreamId(1), three], "stream 2 ended");
    assert_eq!(at.version, "2025-06-18");
    let notifier = Notifier::start(&redis.url(), "gapless:").unwrap();
    let watch = notifier.watch(id);
    tokio::time::sleep(Duration::from_millis(200)).await; // subscribed
    assert_eq!(
        watch.heard(),
        Announced { head: None, ctl: 0, other: true },
        "a new watch reads the log first"
    );
    assert_eq!(watch.heard(), Announced { head: None, ctl: 0, other: false }, "told once");
    // What is heard next (a wake-up may be left from the subscription).
    let next = || async {
        loop {
            tokio::time::timeout(Duration::from_secs(2), watch.changed()).await.expect("woken");
            let a = watch.heard();
            if a != (Announced { head: None, ctl: 0, other: false }) {
                return a;
            }
        }
    };
    let writer = store(&redis, 64, 1 << 20).await;
    writer.append(&id, &[ev(3, "c")]).await.unwrap();
    assert_eq!(
        next().await,
        Announced { head: Some(3), ctl: 1, other: false },
        "an append names its head, and how many streams' ends the log had (stream 2's)"
    );
    writer.end_stream(&id, three).await.unwrap();
    assert_eq!(next().await, Announced { head: None, ctl: 0, other: true }, "an end names no head");
    let tail = s.tail(&id, at.position, 10, Seq(0)).await.unwrap().unwrap();
    assert_eq!(tail.ctl, 2, "two streams ended");
    let got: Vec<_> = tail
        .entries
        .iter()
        .map(|(pos, e)| match e {
            TailEntry::Event(e) => (*pos, format!("{}:{}", e.stream, String::from_utf8_lossy(&e.payload))),
            TailEntry::Ended(s) => (*pos, format!("end {s}")),
            TailEntry::Own(e) => (*pos, format!("own {}", e.seq)),
        })
        .collect();
    assert_eq!(got, [((3, 0), "3:c".to_owned()), ((3, 1), "end 3".to_owned())]);
    assert_eq!(s.tail(&id, (3, 1), 10, Seq(0)).await.unwrap().unwrap().entries, []);
    // Redis restarts: the watch is woken (announcements may have been lost).
    // Drain the wake-up the writes above may have left.
    let _ = tokio::time::timeout(Duration::from_millis(100), watch.changed()).await;
    redis.restart();
    tokio::time::timeout(Duration::from_secs(5), watch.changed())
        .await
        .expect("woken after the reconnection");
    assert!(watch.heard().other, "announcements may have been lost meanwhile");
    // The follower then reads again: the session is gone (it kept nothing).
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        match s.tail(&id, (3, 1), 10, Seq(0)).await {
            Ok(t) => {
                assert_eq!(t, None);
                break;
            }
            Err(e) => assert!(std::time::Instant::now() < deadline, "the store did not come back: {e}"),
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A replay reads exactly what was decided, or nothing: a window trimmed
/// past the gap after the decision, or a session replaced under the same
/// id with as many events, is `Moved` (decide again), never a replay of
/// other events.
#[tokio::test]
async fn a_replay_after_the_window_moved_or_the_session_was_replaced_is_moved() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 8, 1 << 20).await;
    let id = SessionId::random();
    let sid = id.to_string();
    let sess = s.create(id, None).await.unwrap();
    let got = s.append(&id, &[ev(1, "a"), ev(1, "b"), ev(1, "c")]).await.unwrap();
    let cursor = EventId::new(sess.ns, StreamId(1), got[0].seq).with_check(got[0].check).to_string();
    s.mark_delivered(&id, StreamId(1), got[0].seq, 1, None).await.unwrap();
    let d = s.resume(ResumeRequest::new(&sid).cursor(&cursor), Target::Stream).await.unwrap();
    let read = |e: &[gapless_redis::StoredEvent]| e.iter().map(|e| e.payload.clone()).collect::<Vec<_>>();
    assert_eq!(read(&s.replay(&id, &d.replay, 1).await.unwrap()), [Bytes::from("b"), Bytes::from("c")]);
    // Trimmed: 8 more events push seqs 2 and 3 out.
    for i in 0..8 {
        s.append(&id, &[ev(1, &format!("x{i}"))]).await.unwrap();
    }
    assert_eq!(s.replay(&id, &d.replay, 1000).await, Err(gapless_redis::ReplayError::Moved));
    // Replaced: a new incarnation with events at the same seqs.
    let s2 = store(&redis, 64, 1 << 20).await;
    let fresh = s2.create(id, None).await.unwrap();
    let got = s2.append(&id, &[ev(1, "a"), ev(1, "b"), ev(1, "c")]).await.unwrap();
    s2.mark_delivered(&id, StreamId(1), got[0].seq, 1, None).await.unwrap();
    let cursor = EventId::new(fresh.ns, StreamId(1), got[0].seq).with_check(got[0].check).to_string();
    let d = s2.resume(ResumeRequest::new(&sid).cursor(&cursor), Target::Stream).await.unwrap();
    s2.create(id, None).await.unwrap();
    s2.append(&id, &[ev(1, "p"), ev(1, "q"), ev(1, "r")]).await.unwrap();
    assert_eq!(s2.replay(&id, &d.replay, 1000).await, Err(gapless_redis::ReplayError::Moved));
}

/// A node marks an event delivered only if the store's event at that seq
/// is the one it holds: after a failover reused the seq, marking would
/// count another event as delivered to a client that never got it.
#[tokio::test]
async fn a_delivery_mark_with_another_nonce_records_nothing() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let got = s.append(&id, &[ev(1, "a"), ev(1, "b")]).await.unwrap();
    assert_eq!(
        s.mark_delivered(&id, StreamId(1), got[1].seq, 2, Some(got[1].check ^ 1)).await,
        Err(StoreError::Rewritten { seq: got[1].seq })
    );
    assert_eq!(s.marks(&id, StreamId(1)).await.unwrap(), (got[1].seq, Seq(0)), "nothing recorded");
    assert_eq!(s.mark_delivered(&id, StreamId(1), got[1].seq, 2, Some(got[1].check)).await, Ok(true));
    assert_eq!(s.marks(&id, StreamId(1)).await.unwrap(), (got[1].seq, got[1].seq));
}

/// The six keys of a session as they are now (`DUMP`), to put back later
/// (`RESTORE`): what a failover to a replica that lags looks like.
async fn snapshot(
    c: &mut redis::aio::MultiplexedConnection,
    id: &SessionId,
) -> Vec<(String, Option<Vec<u8>>)> {
    let mut out = Vec::new();
    for part in ["m", "l", "s", "t", "o", "k", "b"] {
        let key = format!("gapless:{{{id}}}:{part}");
        let dump: Option<Vec<u8>> = redis::cmd("DUMP").arg(&key).query_async(c).await.unwrap();
        out.push((key, dump));
    }
    out
}

async fn restore(c: &mut redis::aio::MultiplexedConnection, keys: &[(String, Option<Vec<u8>>)]) {
    for (key, dump) in keys {
        let _: () = redis::cmd("DEL").arg(key).query_async(c).await.unwrap();
        if let Some(d) = dump {
            let _: () = redis::cmd("RESTORE").arg(key).arg(0).arg(d).query_async(c).await.unwrap();
        }
    }
}

/// A migration ticket keeps its cursor's check: when the store lost the
/// cursor's event (a failover between the migration check and the ticket,
/// which then lands on the new primary), redeeming it is refused
/// `history_rewritten` with the cursor and the store's head, as a resume
/// with that cursor is, whether new events reused the seq or not; never a
/// replay of other events after it. The ticket is used up.
#[tokio::test]
async fn a_ticket_whose_cursor_a_failover_rewrote_is_refused() {
    use gapless_redis::RedeemError;
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let mut c = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let ttl = Duration::from_secs(5);
    let id = SessionId::random();
    let sess = s.create(id, None).await.unwrap();
    let sid = id.to_string();
    let first = s.append(&id, &[ev(1, "a")]).await.unwrap()[0];
    let replica = snapshot(&mut c, &id).await; // the replica got event 1 only
    let lost = s.append(&id, &[ev(1, "b"), ev(1, "c")]).await.unwrap();
    s.mark_all_delivered(&id, StreamId(1)).await.unwrap();
    let cursor = EventId::new(sess.ns, StreamId(1), lost[1].seq).with_check(lost[1].check);
    let wire = cursor.to_string();
    // Before the failover the same ticket redeems, with its cursor's seq.
    s.issue_ticket(&id, None, "before", Some(&cursor), ttl, 4).await.unwrap().unwrap();
    assert_eq!(s.redeem_ticket("before", None).await.unwrap(), Ok((id, Seq(3))));

    // Failover: the store's head is 1, below the cursor.
    restore(&mut c, &replica).await;
    let r = s.resume(ResumeRequest::new(&sid).cursor(&wire), Target::Session).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::CursorAhead, "a resume alone cannot tell yet");
    s.issue_ticket(&id, None, "beyond", Some(&cursor), ttl, 4).await.unwrap().unwrap();
    let e = s.redeem_ticket("beyond", None).await.unwrap().unwrap_err();
    assert_eq!(e, RedeemError::HistoryRewritten { cursor, head: Seq(1) });
    assert!(e.to_string().contains("failover"), "{e}");
    assert!(!s.lookup(&id, None).await.unwrap().unwrap().migrated, "not migrated");
    let r = s.resume(ResumeRequest::new(&sid).cursor(&wire), Target::Session).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::HistoryRewritten, "the redeem recorded the seq as lost");

    // Failover again, then new events reuse seqs 2 and 3 (other nonces).
    restore(&mut c, &replica).await;
    let reused = s.append(&id, &[ev(1, "B"), ev(1, "C")]).await.unwrap();
    assert_eq!(reused[1].seq, cursor.seq);
    s.mark_all_delivered(&id, StreamId(1)).await.unwrap();
    s.issue_ticket(&id, None, "reused", Some(&cursor), ttl, 4).await.unwrap().unwrap();
    let e = s.redeem_ticket("reused", None).await.unwrap().unwrap_err();
    assert_eq!(e, RedeemError::HistoryRewritten { cursor, head: Seq(3) });
    let r = s.resume(ResumeRequest::new(&sid).cursor(&wire), Target::Session).await.unwrap_err();
    assert_eq!(r, Refusal::HistoryRewritten { cursor, head: Seq(3) }, "the same refusal as a resume");
    assert!(s.redeem_ticket("reused", None).await.unwrap().is_err(), "used up");
    // A cursor the failover kept still redeems.
    let kept = EventId::new(sess.ns, StreamId(1), first.seq).with_check(first.check);
    s.issue_ticket(&id, None, "kept", Some(&kept), ttl, 4).await.unwrap().unwrap();
    assert_eq!(s.redeem_ticket("kept", None).await.unwrap(), Ok((id, Seq(1))));
}

/// Trimming reads each retained event's length from a list of its own; a
/// list out of step with the log (written by a node that kept none) is
/// measured again from the log, so the window is trimmed exactly as the
/// ring trims it.
#[tokio::test]
async fn a_lengths_list_out_of_step_is_rebuilt_from_the_log() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 100).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let key = format!("gapless:{{{id}}}:b");
    let mut c = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let list = |c: &mut redis::aio::MultiplexedConnection| {
        let mut c = c.clone();
        let key = key.clone();
        async move {
            redis::cmd("LRANGE").arg(&key).arg(0).arg(-1).query_async::<Vec<String>>(&mut c).await.unwrap()
        }
    };
    // One element per append, its lengths run-length coded.
    s.append(&id, &[ev(1, &"a".repeat(20)), ev(1, &"b".repeat(20)), ev(1, &"c".repeat(20))]).await.unwrap();
    assert_eq!(list(&mut c).await, ["1-3:20*3"]);
    // 60 + 60 > 100: seq 1 goes, and the front element, cut inside its run,
    // is rewritten.
    s.append(&id, &[ev(1, &"d".repeat(60))]).await.unwrap();
    let f = s.facts(&id, None, Target::Session, None).await.unwrap().unwrap();
    assert_eq!(gapless::session::SessionFacts::oldest(&f), Seq(2));
    assert_eq!(list(&mut c).await, ["2-3:20*2", "4-4:60"]);
    // Lost at the front: the next append reads the lengths from the log.
    let _: String = redis::cmd("LPOP").arg(&key).query_async(&mut c).await.unwrap();
    // 100 + 30 > 100: seqs 2 and 3 (20 bytes each) go.
    s.append(&id, &[ev(1, &"e".repeat(30))]).await.unwrap();
    let f = s.facts(&id, None, Target::Session, None).await.unwrap().unwrap();
    assert_eq!(gapless::session::SessionFacts::oldest(&f), Seq(4));
    assert_eq!(list(&mut c).await, ["4-4:60", "5-5:30"]);
    // A list as the previous release wrote it (one number per event) is
    // rebuilt too: read as elements of this one, it would free 0 bytes per
    // event, and this append would evict all but itself.
    let _: () = redis::cmd("DEL").arg(&key).query_async(&mut c).await.unwrap();
    let _: () = redis::cmd("RPUSH").arg(&key).arg(60).arg(30).query_async(&mut c).await.unwrap();
    // 90 + 50 > 100: seq 4 (60 bytes) goes.
    s.append(&id, &[ev(1, &"f".repeat(50))]).await.unwrap();
    let f = s.facts(&id, None, Target::Session, None).await.unwrap().unwrap();
    assert_eq!(gapless::session::SessionFacts::oldest(&f), Seq(5));
    assert_eq!(list(&mut c).await, ["5-5:30", "6-6:50"]);
    // An element holds 64 runs at most: 70 lengths that all differ are two.
    let batch: Vec<_> = (1..=70).map(|k| ev(1, &"g".repeat(k))).collect();
    let s2 = store(&redis, 1000, 1 << 20).await;
    let id2 = SessionId::random();
    s2.create(id2, None).await.unwrap();
    s2.append(&id2, &batch).await.unwrap();
    let lens: Vec<String> = redis::cmd("LRANGE")
        .arg(format!("gapless:{{{id2}}}:b"))
        .arg(0)
        .arg(-1)
        .query_async(&mut c)
        .await
        .unwrap();
    let runs = |from: usize, to: usize| (from..=to).map(|k| k.to_string()).collect::<Vec<_>>().join(" ");
    assert_eq!(lens, [format!("1-64:{}", runs(1, 64)), format!("65-70:{}", runs(65, 70))]);
}

/// A delivery mark beyond the store's head comes from a node that holds
/// events the store lost: nothing is recorded, and the store remembers the
/// seq as lost, so that a checked cursor at it is `history_rewritten`.
#[tokio::test]
async fn a_delivery_mark_beyond_the_head_is_rewritten_and_recorded_as_lost() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let id = SessionId::random();
    let sess = s.create(id, None).await.unwrap();
    s.append(&id, &[ev(1, "a"), ev(1, "b")]).await.unwrap();
    assert_eq!(
        s.mark_delivered(&id, StreamId(1), Seq(5), 5, Some(7)).await,
        Err(StoreError::Rewritten { seq: Seq(5) })
    );
    assert_eq!(s.marks(&id, StreamId(1)).await.unwrap(), (Seq(2), Seq(0)), "nothing recorded");
    let cursor = EventId::new(sess.ns, StreamId(1), Seq(5)).with_check(7).to_string();
    let r = s.resume(ResumeRequest::new(&id.to_string()).cursor(&cursor), Target::Session).await.unwrap_err();
    assert_eq!(r.kind(), ErrorKind::HistoryRewritten);
}

/// One append of more events than Lua's `unpack` takes at once.
#[tokio::test]
async fn a_batch_of_ten_thousand_events_is_one_append() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 20_000, 1 << 24).await;
    let id = SessionId::random();
    s.create(id, None).await.unwrap();
    let batch: Vec<_> = (0..10_000).map(|i| ev(1, &format!("e{i}"))).collect();
    let got = s.append(&id, &batch).await.unwrap();
    assert_eq!(got.last().unwrap().seq, Seq(10_000));
    assert_eq!(s.append(&id, &[ev(1, "next")]).await.unwrap()[0].seq, Seq(10_001));
}

/// A failover between a resume's decision and its replay: the store's log
/// now has other events at the same seqs (after the cursor), in the same
/// incarnation. The replay checks the decided head's nonce and answers
/// `Moved` (decide again, which then refuses by name), never the other
/// events.
#[tokio::test]
async fn a_replay_after_a_failover_rewrote_the_decided_head_is_moved() {
    let redis = RedisServer::start(&[]);
    let s = store(&redis, 64, 1 << 20).await;
    let mut c = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let id = SessionId::random();
    let sess = s.create(id, None).await.unwrap();
    let first = s.append(&id, &[ev(1, "a")]).await.unwrap()[0];
    s.mark_all_delivered(&id, StreamId(1)).await.unwrap();
    let replica = snapshot(&mut c, &id).await; // the replica has event 1 only
    s.append(&id, &[ev(1, "b"), ev(1, "c")]).await.unwrap();
    let cursor = EventId::new(sess.ns, StreamId(1), first.seq).with_check(first.check).to_string();
    let d = s.resume(ResumeRequest::new(&id.to_string()).cursor(&cursor), Target::Stream).await.unwrap();
    assert_eq!(d.replay.head, Seq(3));
    let decided = s.check_at(&id, Seq(3)).await.unwrap();
    assert_eq!(d.replay.head_check, decided, "the plan keeps the head's nonce");
    assert!(decided.is_some());
    // Failover, then new events reuse seqs 2 and 3.
    restore(&mut c, &replica).await;
    s.append(&id, &[ev(1, "B"), ev(1, "C")]).await.unwrap();
    assert_eq!(s.replay(&id, &d.replay, 1000).await, Err(gapless_redis::ReplayError::Moved));
    let now = s.check_at(&id, Seq(3)).await.unwrap();
    assert!(now.is_some() && now != decided, "what a node rechecks before going live: another event");
    assert_eq!(s.check_at(&id, Seq(9)).await.unwrap(), None);
}
