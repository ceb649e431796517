//! Idle in a cluster (`docs/SPEC.md` §8.1, §8.8): sessions and open streams
//! that carry no events cost Redis next to nothing, and a follower that
//! hears no announcement at all still brings every event, by the safety
//! net. `gapless-server` processes on a `redis-server`, each started by the
//! test on free loopback ports.

mod common;
#[path = "common/node.rs"]
mod node;
#[path = "common/tasks.rs"]
mod tasks;

use common::SseReader;
use futures_util::StreamExt as _;
use gapless_redis::testing::RedisServer;
use node::{get_with, http as client, post_with as post, try_initialize_with, Node};
use serde_json::json;
use std::collections::BTreeMap;
use std::time::{Duration, Instant};
use tasks::{ended, task_call, task_request};

/// Flags that let one test client open thousands of sessions and
/// connections; an idle timeout of 32 s, so that a connection pins its
/// session after 2 s.
const MANY: &[&str] = &[
    "--idle-timeout-secs",
    "32",
    "--max-connections-per-ip",
    "100000",
    "--max-sessions-per-client",
    "100000",
    "--initialize-burst",
    "100000",
    "--initialize-per-sec",
    "100000",
];

/// The session's standalone stream, open.
async fn standalone(c: &reqwest::Client, url: &str, sid: &str) -> reqwest::Response {
    let r = get_with(c, url, sid, None).await;
    if r.status() != 200 {
        panic!("the standalone stream did not open: {} {}", r.status(), r.text().await.unwrap_or_default());
    }
    r
}

/// `emit_events` on the session's standalone stream, its answer read.
async fn emit_standalone(c: &reqwest::Client, url: &str, sid: &str, count: u64) {
    let r = post(
        c,
        url,
        Some(sid),
        json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"emit_events",
            "arguments":{"count":count,"target":"standalone"}}}),
    )
    .await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    while sse.next().await.is_some() {}
}

/// The next `count` `data.seq`s of a stream, within `within`.
async fn seqs(sse: &mut SseReader, count: usize, within: Duration) -> Vec<u64> {
    let mut got = Vec::new();
    let deadline = tokio::time::Instant::now() + within;
    while got.len() < count {
        match tokio::time::timeout_at(deadline, sse.next()).await {
            Ok(Some(e)) => got.extend(e.emit_seq()),
            Ok(None) => panic!("the stream ended after {got:?}"),
            Err(_) => panic!("only {got:?} of {count} events within {within:?}"),
        }
    }
    got
}

/// `INFO commandstats` as command -> calls.
/// Redis's commands over `window` from now (`INFO commandstats`, reset
/// first): their total, the test's own `INFO` left out, and the calls by name.
async fn commands_over(redis: &RedisServer, window: Duration) -> (u64, BTreeMap<String, u64>) {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut admin = client.get_multiplexed_async_connection().await.unwrap();
    let _: () = redis::cmd("CONFIG").arg("RESETSTAT").query_async(&mut admin).await.unwrap();
    tokio::time::sleep(window).await;
    let calls = command_calls(&mut admin).await;
    let total = calls.iter().filter(|(name, _)| name.as_str() != "info").map(|(_, n)| n).sum();
    (total, calls)
}

async fn command_calls(redis: &mut redis::aio::MultiplexedConnection) -> BTreeMap<String, u64> {
    let info: String = redis::cmd("INFO").arg("commandstats").query_async(redis).await.unwrap();
    info.lines()
        .filter_map(|l| {
            let (name, rest) = l.strip_prefix("cmdstat_")?.split_once(':')?;
            let calls = rest.split(',').find_map(|f| f.strip_prefix("calls="))?.parse().ok()?;
            Some((name.to_owned(), calls))
        })
        .collect()
}

/// 2 000 sessions on two nodes, each with its standalone stream open on
/// one of them, doing nothing: Redis sees under 100 commands a second in
/// all (the nodes' leases and the safety net, per node). The followers'
/// polls and the streams' lease renewals this replaced cost about 13 per
/// session per second. Then an event published on one node still reaches
/// a stream open on the other at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_sessions_with_open_streams_cost_redis_next_to_nothing() {
    const SESSIONS: usize = 2000;
    let redis = RedisServer::start(&[]);
    let nodes = [Node::start(&redis.url(), MANY), Node::start(&redis.url(), MANY)];
    let c = client();
    let t0 = Instant::now();
    let urls: Vec<&str> = nodes.iter().map(|n| n.url.as_str()).collect();
    let sids: Vec<String> = futures_util::stream::iter(0..SESSIONS)
        .map(|i| {
            let (c, url) = (&c, urls[i % 2]);
            async move { try_initialize_with(c, url).await.unwrap() }
        })
        .buffered(32)
        .collect()
        .await;
    eprintln!("{SESSIONS} sessions in {:?}", t0.elapsed());
    // Each stream is open on the node that did not create its session.
    let streams: Vec<reqwest::Response> = futures_util::stream::iter(sids.iter().enumerate())
        .map(|(i, sid)| standalone(&c, urls[(i + 1) % 2], sid))
        .buffered(32)
        .collect()
        .await;
    eprintln!("{SESSIONS} streams open at {:?}", t0.elapsed());
    // The connections pin their sessions after 2 s; then nothing happens.
    tokio::time::sleep(Duration::from_secs(4)).await;
    let window = Duration::from_secs(10);
    let (total, calls) = commands_over(&redis, window).await;
    eprintln!("{SESSIONS} idle sessions with open streams, {window:?}: {total} Redis commands {calls:?}");
    assert!(
        total < 100 * window.as_secs(),
        "{total} commands in {window:?} for {SESSIONS} idle sessions: {calls:?}"
    );

    // Still live: an event published on one node reaches a stream on the
    // other, told by the store's announcement.
    let mut first = SseReader::new(streams.into_iter().next().unwrap());
    let t = Instant::now();
    emit_standalone(&c, urls[0], &sids[0], 3).await;
    assert_eq!(seqs(&mut first, 3, Duration::from_secs(5)).await, vec![1, 2, 3]);
    eprintln!("a published event reached an idle stream on the other node in {:?}", t.elapsed());
}

/// A node that hears no announcement at all (as a broken link between
/// Redis Cluster nodes would have it): its follower learns of every event
/// from the safety net, within a few seconds for a handful of sessions,
/// and none is lost or reordered.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_hears_no_announcement_still_brings_every_event() {
    let redis = RedisServer::start(&[]);
    let a = Node::start(&redis.url(), &[]);
    let deaf = Node::start_with_env(&redis.url(), &[], &[(gapless_redis::DEAF_ENV, "1")]);
    let c = client();
    let sid = try_initialize_with(&c, &a.url).await.unwrap();
    let mut sse = SseReader::new(standalone(&c, &deaf.url, &sid).await);
    let mut got = Vec::new();
    for round in 0..3u64 {
        let t = Instant::now();
        emit_standalone(&c, &a.url, &sid, 20).await;
        got.extend(seqs(&mut sse, 20, Duration::from_secs(5)).await);
        eprintln!("round {round}: the safety net brought 20 events in {:?}", t.elapsed());
    }
    let want: Vec<u64> = (0..3).flat_map(|_| 1..=20).collect();
    assert_eq!(got, want, "every event, once, in order");

    // A task's event stream read on the deaf node: every event, then the
    // end, by the safety net's nudges.
    let id = task(&a, 20, 50).await;
    let t = Instant::now();
    let r = task_request(&deaf.url, "tasks/stream", json!({"taskId": id})).await;
    let read = tokio::time::timeout(Duration::from_secs(10), read_task_stream(r)).await;
    let (seqs, end) = read.expect("the task's stream ends within 10 s");
    assert_eq!((seqs, end.as_str()), ((0..20).collect::<Vec<_>>(), "ended"));
    eprintln!("a task stream on the deaf node ended, whole, in {:?}", t.elapsed());

    // A listen stream on the deaf node, watching a task of node a that
    // completes on its own (no bus message): told by the safety net.
    let id = task(&a, 2, 300).await;
    let t = Instant::now();
    let mut listen = listen_to(&deaf, &id).await;
    let status = tokio::time::timeout(Duration::from_secs(10), terminal(&mut listen)).await;
    assert_eq!(status.expect("told within 10 s"), "completed");
    eprintln!("a listen stream on the deaf node was told its task completed after {:?}", t.elapsed());
}

/// A `subscriptions/listen` stream on `node` watching task `id`, read past
/// its acknowledgment.
async fn listen_to(node: &Node, id: &str) -> SseReader {
    let r =
        task_request(&node.url, "subscriptions/listen", json!({"notifications": {"taskIds": [id]}})).await;
    let mut sse = SseReader::new(r);
    let ack = sse.next().await.and_then(|e| e.json()).expect("the acknowledgment");
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    sse
}

/// Reads a listen stream's task notifications to a terminal status; that
/// status.
async fn terminal(sse: &mut SseReader) -> String {
    loop {
        let m = sse.next().await.and_then(|e| e.json()).expect("a task notification");
        assert_eq!(m["method"], "notifications/tasks", "{m}");
        let status = m["params"]["status"].as_str().expect("a status").to_owned();
        if ["completed", "failed", "cancelled"].contains(&status.as_str()) {
            return status;
        }
    }
}

/// A task on node a, `count` events `interval_ms` apart; its id.
async fn task(a: &Node, count: u64, interval_ms: u64) -> String {
    let created = task_call(
        &a.url,
        "tools/call",
        json!({"name": "task_events", "arguments": {"count": count, "interval_ms": interval_ms}}),
    )
    .await;
    created["result"]["taskId"].as_str().expect("a task").to_owned()
}

/// Reads a `tasks/stream` to its end: the events' seqs and how it ended.
async fn read_task_stream(r: reqwest::Response) -> (Vec<u64>, String) {
    let mut sse = SseReader::new(r);
    let mut seqs = vec![];
    while let Some(e) = sse.next().await {
        let m = e.json().unwrap();
        if m["method"] != "notifications/tasks/event" {
            return (seqs, ended(Some(m)));
        }
        seqs.push(m["params"]["seq"].as_u64().unwrap());
    }
    (seqs, ended(None))
}

/// 40 `tasks/stream` readers on node b of a task on node a that emits
/// every 10 s: while nothing comes they cost Redis no read each (they wait
/// for the stream's announcements; the node's safety net nudges 4 a
/// second), where each polled 5 times a second and read the task's record
/// every second before. The first 3 s window that saw no event is the
/// measure (on a loaded machine the readers may open late). Then each gets
/// every event and the end.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_task_stream_readers_wait_to_be_told() {
    const READERS: usize = 40;
    let redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let id = task(&a, 3, 10_000).await;
    let readers: Vec<reqwest::Response> = futures_util::stream::iter(0..READERS)
        .map(|_| task_request(&b.url, "tasks/stream", json!({"taskId": id})))
        .buffered(8)
        .collect()
        .await;
    let window = Duration::from_secs(3);
    let mut idle = None;
    for _ in 0..3 {
        // After what the last event brought.
        tokio::time::sleep(Duration::from_secs(1)).await;
        let (total, calls) = commands_over(&redis, window).await;
        if !calls.contains_key("xadd") {
            idle = Some((total, calls));
            break;
        }
    }
    let (total, calls) = idle.expect("a window without an event, events being 10 s apart");
    eprintln!("{READERS} idle task stream readers, {window:?}: {total} Redis commands {calls:?}");
    assert!(
        total < 100 * window.as_secs(),
        "{total} commands in {window:?} for {READERS} idle readers: {calls:?}"
    );
    let ends: Vec<(Vec<u64>, String)> =
        futures_util::stream::iter(readers).map(read_task_stream).buffered(READERS).collect().await;
    for e in ends {
        assert_eq!(e, (vec![0, 1, 2], "ended".to_owned()), "every reader: every event, then the end");
    }
}

/// 60 listen streams on node b, each watching its own task running on
/// node a, and the tasks' work, all waiting: Redis sees under 100 commands
/// a second in all. Each stream read its task twice a second and each
/// work its record once a second before (about 180 reads a second); now
/// they wait to be told (the store announces a record's change) and the
/// nodes' safety nets read 4 watched tasks a second each. Then each task
/// is cancelled on node a, and every stream on node b is told.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_listen_streams_and_task_work_wait_to_be_told() {
    const STREAMS: usize = 60;
    let redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let mut ids = Vec::new();
    for _ in 0..STREAMS {
        let created =
            task_call(&a.url, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 60}}))
                .await;
        ids.push(created["result"]["taskId"].as_str().expect("a task").to_owned());
    }
    let mut streams = Vec::new();
    for id in &ids {
        let mut sse = listen_to(&b, id).await;
        let first = sse.next().await.and_then(|e| e.json()).expect("the task as it is");
        assert_eq!(first["params"]["status"], "working", "{first}");
        streams.push(sse);
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let window = Duration::from_secs(3);
    let (total, calls) = commands_over(&redis, window).await;
    eprintln!("{STREAMS} idle listen streams and tasks, {window:?}: {total} Redis commands {calls:?}");
    assert!(total < 100 * window.as_secs(), "{total} commands in {window:?}: {calls:?}");
    for id in &ids {
        let ack = task_call(&a.url, "tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    }
    for sse in &mut streams {
        let status = tokio::time::timeout(Duration::from_secs(5), terminal(sse)).await;
        assert_eq!(status.expect("told within 5 s"), "cancelled");
    }
}
