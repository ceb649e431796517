//! Cluster mode (`docs/SPEC.md` §8): several `gapless-server` processes on
//! one `redis-server` (or a Redis Cluster of them), each started by the test
//! on free loopback ports, and a client that sends every request of a
//! session to another node.

mod common;
#[path = "common/node.rs"]
mod node;
#[path = "common/tasks.rs"]
mod tasks;

use common::SseReader;
use gapless_redis::testing::{free_port, RedisServer};
use node::{call, get, http, initialize, post, try_initialize, Node};
use serde_json::{json, Value};
use std::collections::BTreeSet;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use tasks::{ended, follow, task_call, task_request, task_stream};

/// Reads a stream to its end: the `data.seq`s, the result, the last id.
async fn drain(sse: &mut SseReader, seqs: &mut Vec<u64>, last: &mut Option<String>) -> Option<Value> {
    let mut result = None;
    while let Some(e) = sse.next().await {
        if let Some(n) = e.emit_seq() {
            seqs.push(n);
        } else if let Some(m) = e.json().filter(|m| m.get("result").is_some()) {
            result = Some(m);
        }
        if e.id.is_some() {
            *last = e.id;
        }
    }
    result
}

/// [`drain`], with the answer whether a result or an error.
async fn drain_answer(sse: &mut SseReader, seqs: &mut Vec<u64>, last: &mut Option<String>) -> Option<Value> {
    let mut answer = None;
    while let Some(e) = sse.next().await {
        if let Some(n) = e.emit_seq() {
            seqs.push(n);
        } else if let Some(m) = e.json().filter(|m| m.get("result").is_some() || m.get("error").is_some()) {
            answer = Some(m);
        }
        if e.id.is_some() {
            *last = e.id;
        }
    }
    answer
}

/// The session-global seq of a wire id (`<tag>-<seq>`).
fn seq_of(id: &str) -> u64 {
    id.rsplit('-').next().unwrap().parse().unwrap()
}

async fn expect_error(r: reqwest::Response, status: u16, kind: &str) -> Value {
    assert_eq!(r.status().as_u16(), status, "status for {kind}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], json!(kind), "body {body}");
    body
}

/// Three nodes, a client that sends each request to the next node: every
/// event of every stream arrives exactly once; a stream cut on one node
/// resumes on another; the standalone stream is one GET in the whole
/// cluster; a DELETE on one node ends the session on all.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_request_on_any_node() {
    let redis = RedisServer::start(&[]);
    let nodes: Vec<Node> = (0..3).map(|_| Node::start(&redis.url(), &[])).collect();
    let at = |i: usize| nodes[i % 3].url.as_str();
    let sid = initialize(at(0)).await;

    // A whole stream from node 1.
    let mut seqs = vec![];
    let mut last = None;
    let r = call(at(1), &sid, 1, json!({"count": 200})).await;
    assert_eq!(r.status(), 200);
    let result = drain(&mut SseReader::new(r), &mut seqs, &mut last).await;
    assert!(result.unwrap()["result"]["content"][0]["text"].as_str().unwrap().contains("200"));
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>());
    let id = last.unwrap();
    assert_eq!(id.split('-').next().unwrap().split('_').count(), 3, "cluster ids carry a check: {id}");

    // A stream cut after 50 events on node 2, resumed on node 0.
    let r = call(at(2), &sid, 2, json!({"count": 400, "interval_ms": 1})).await;
    let mut sse = SseReader::new(r);
    let (mut got, mut cursor) = (vec![], None);
    while got.len() < 50 {
        let e = sse.next().await.unwrap();
        if let Some(n) = e.emit_seq() {
            got.push(n);
        }
        cursor = e.id.or(cursor);
    }
    drop(sse);
    let cursor = cursor.unwrap();
    let r = get(at(3), &sid, Some(&cursor)).await;
    assert_eq!(r.status(), 200, "resume on another node");
    let mut last = None;
    let result = drain(&mut SseReader::new(r), &mut got, &mut last).await;
    assert!(result.is_some(), "the result follows the replay");
    assert_eq!(got, (1..=400).collect::<Vec<_>>(), "every event once, in order, across the cut");

    // The standalone stream: one GET in the cluster; events published on
    // another node reach it.
    let g = get(at(1), &sid, None).await;
    assert_eq!(g.status(), 200);
    expect_error(get(at(2), &sid, None).await, 409, "stream_busy").await;
    let mut standalone = SseReader::new(g);
    let r = call(at(0), &sid, 3, json!({"count": 30, "target": "standalone"})).await;
    let mut ignore = (vec![], None);
    drain(&mut SseReader::new(r), &mut ignore.0, &mut ignore.1).await.expect("result");
    let mut st = vec![];
    while st.len() < 30 {
        let e = standalone.next().await.expect("standalone events");
        if let Some(n) = e.emit_seq() {
            st.push(n);
        }
    }
    assert_eq!(st, (1..=30).collect::<Vec<_>>());
    drop(standalone);

    // DELETE on one node: the session is gone on every node.
    let r = http().delete(at(2)).header("mcp-session-id", &sid).send().await.unwrap();
    assert_eq!(r.status(), 204);
    for i in 0..3 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = call(at(i), &sid, 10 + i as u64, json!({"count": 1})).await;
            if r.status() == 404 {
                expect_error(r, 404, "unknown_session").await;
                break;
            }
            assert!(Instant::now() < deadline, "node {i} still serves a deleted session");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

/// Two nodes publish into one session at once: the seqs of both streams
/// together are dense, none twice, and each stream gets all its events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_nodes_publish_into_one_session() {
    let redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let sid = initialize(&a.url).await;
    let run = |url: String, sid: String, id: u64| async move {
        let r = call(&url, &sid, id, json!({"count": 2000})).await;
        let mut sse = SseReader::new(r);
        let (mut seqs, mut ids) = (vec![], vec![]);
        while let Some(e) = sse.next().await {
            if let Some(n) = e.emit_seq() {
                seqs.push(n);
            }
            ids.extend(e.id);
        }
        (seqs, ids)
    };
    let (ra, rb) = tokio::join!(run(a.url.clone(), sid.clone(), 1), run(b.url.clone(), sid.clone(), 2));
    for (seqs, _) in [&ra, &rb] {
        assert_eq!(seqs, &(1..=2000).collect::<Vec<_>>());
    }
    let all: Vec<u64> = ra.1.iter().chain(&rb.1).map(|i| seq_of(i)).collect();
    let set: BTreeSet<u64> = all.iter().copied().collect();
    assert_eq!(set.len(), all.len(), "no seq twice");
    // 2 initialize events (priming, result) come first; then both streams.
    let (lo, hi) = (*set.first().unwrap(), *set.last().unwrap());
    assert_eq!(hi - lo + 1, set.len() as u64, "dense: {lo}..={hi}");
}

/// Redis stops: a resume is 503 `store_unavailable`, a tool call fails
/// visibly; Redis comes back (empty): the nodes recover without a restart,
/// the lost session is 404, never a fresh 200.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_down_is_503_and_nodes_recover() {
    let mut redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let sid = initialize(&a.url).await;
    let (mut seqs, mut last) = (vec![], None);
    let r = call(&b.url, &sid, 1, json!({"count": 5})).await;
    drain(&mut SseReader::new(r), &mut seqs, &mut last).await.expect("result");
    let cursor = last.unwrap();
    // The store's figures: b's requests were answered, and its call's
    // registration and answer were written durably (no replica to wait for).
    let m = metrics(&b.url).await;
    assert!(sample(&m, r#"gapless_store_requests_total{outcome="ok"}"#) > 0.0, "{m}");
    assert_eq!(sample(&m, r#"gapless_store_requests_total{outcome="unavailable"}"#), 0.0, "{m}");
    assert!(sample(&m, r#"gapless_store_durable_writes_total{outcome="ok"}"#) >= 2.0, "{m}");
    assert!(sample(&m, "gapless_store_request_seconds_total") > 0.0, "{m}");
    redis.kill();
    let r = get(&a.url, &sid, Some(&cursor)).await;
    let body = expect_error(r, 503, "store_unavailable").await;
    let m = metrics(&a.url).await;
    assert!(sample(&m, r#"gapless_store_requests_total{outcome="unavailable"}"#) > 0.0, "{m}");
    assert!(body["message"].as_str().unwrap().contains("unavailable"), "{body}");
    let r = call(&b.url, &sid, 2, json!({"count": 5})).await;
    assert!(
        r.status().is_server_error() || !r.text().await.unwrap().contains("emitted 5"),
        "a call without a store does not succeed"
    );
    expect_error(
        post(
            &a.url,
            None,
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        )
        .await,
        503,
        "store_unavailable",
    )
    .await;
    redis.restart();
    let deadline = Instant::now() + Duration::from_secs(15);
    let fresh = loop {
        let r = post(
            &b.url,
            None,
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        )
        .await;
        if r.status() == 200 {
            break r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        }
        assert!(Instant::now() < deadline, "the node did not recover: {}", r.status());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let r = call(&a.url, &fresh, 3, json!({"count": 3})).await;
    let (mut seqs, mut last) = (vec![], None);
    drain(&mut SseReader::new(r), &mut seqs, &mut last).await.expect("a call works again");
    assert_eq!(seqs, [1, 2, 3]);
    // The session Redis lost (it kept nothing) is unknown, on both nodes.
    expect_error(get(&a.url, &sid, Some(&cursor)).await, 404, "unknown_session").await;
    expect_error(get(&b.url, &sid, Some(&cursor)).await, 404, "unknown_session").await;
}

/// Open descriptors and resident memory (KiB) of a process.
fn fds_and_rss(pid: u32) -> (usize, u64) {
    let fds = std::fs::read_dir(format!("/proc/{pid}/fd")).unwrap().count();
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let rss = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    (fds, rss)
}

fn signal(pid: u32, sig: &str) {
    let ok = Command::new("kill").args([sig, &pid.to_string()]).status().unwrap().success();
    assert!(ok, "kill {sig} {pid}");
}

/// Redis stopped (`SIGSTOP`: connections open, nothing answered) for
/// 4 s, then continued (`docs/SPEC.md` §8.5): a resume and a new session are
/// `503 store_unavailable` within the store's timeout (2 s a call), a call
/// made meanwhile ends explicitly (its answer or an error) instead of
/// hanging, the nodes hold no more descriptors or memory than before, and
/// everything works again, the session intact.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn redis_paused_is_503_in_time_and_nothing_hangs() {
    let redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let sid = initialize(&a.url).await;
    let pid = redis.pid().expect("redis-server runs");
    paused_store(&a, &b, &sid, true, || signal(pid, "-STOP"), || signal(pid, "-CONT")).await;
}

/// The same on a Redis Cluster with replicas: the master of the session's
/// slot paused (`CLIENT PAUSE 4000 ALL`: its clients wait, the cluster bus
/// goes on, so no failover) while the other masters answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_paused_redis_cluster_master_is_503_in_time_and_nothing_hangs() {
    let cluster = gapless_redis::testing::RedisCluster::start_with_replicas(3, 1);
    let (a, b) = (Node::start(&cluster.url(0), &[]), Node::start(&cluster.url(1), &[]));
    let sid = initialize(&a.url).await;
    let master = cluster.master_of(&format!("gapless:{{{sid}}}:m"));
    let pause = || {
        let out = Command::new("redis-cli")
            .args(["-p", &master.to_string(), "CLIENT", "PAUSE", "4000", "ALL"])
            .output()
            .unwrap();
        assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "OK");
    };
    // The pause ends by itself after 4 s.
    paused_store(&a, &b, &sid, false, pause, || ()).await;
    assert_eq!(cluster.master_of(&format!("gapless:{{{sid}}}:m")), master, "no failover");
}

/// Session `sid` (on nodes `a` and `b`) while its store does not answer
/// for 4 s (`pause` .. `unpause`); `whole_store`: nothing answers, so a new
/// session is refused too.
async fn paused_store(
    a: &Node,
    b: &Node,
    sid: &str,
    whole_store: bool,
    pause: impl FnOnce(),
    unpause: impl FnOnce(),
) {
    let sid = sid.to_owned();
    let (mut seqs, mut last) = (vec![], None);
    let r = call(&b.url, &sid, 1, json!({"count": 5})).await;
    drain(&mut SseReader::new(r), &mut seqs, &mut last).await.expect("result");
    let cursor = last.unwrap();
    // Warm both nodes' pools of connections and buffers first.
    for id in 2..6 {
        let r = call(if id % 2 == 0 { &a.url } else { &b.url }, &sid, id, json!({"count": 50})).await;
        let _ = r.text().await;
    }
    let before = [fds_and_rss(a.child.id()), fds_and_rss(b.child.id())];
    pause();
    let stopped = Instant::now();

    // A call in flight while Redis answers nothing.
    let in_flight = tokio::spawn({
        let (url, sid) = (a.url.clone(), sid.clone());
        async move {
            let r = call(&url, &sid, 9, json!({"count": 3})).await;
            let status = r.status().as_u16();
            (status, r.text().await.unwrap_or_default(), Instant::now())
        }
    });
    let hangs = Duration::from_secs(10);
    let t = Instant::now();
    let r = tokio::time::timeout(hangs, get(&b.url, &sid, Some(&cursor))).await.expect("the resume hangs");
    expect_error(r, 503, "store_unavailable").await;
    let resume_took = t.elapsed();
    let t = Instant::now();
    if whole_store {
        let fresh = post(
            &a.url,
            None,
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        );
        let r = tokio::time::timeout(hangs, fresh).await.expect("initialize hangs");
        expect_error(r, 503, "store_unavailable").await;
    }
    let initialize_took = t.elapsed();
    // Each is refused after one call's timeout (2 s here); 5 s leaves room
    // for a loaded machine, not for a second timed-out call.
    assert!(resume_took < Duration::from_secs(5), "the resume took {resume_took:?}");
    assert!(initialize_took < Duration::from_secs(5), "initialize took {initialize_took:?}");

    tokio::time::sleep(Duration::from_secs(4).saturating_sub(stopped.elapsed())).await;
    unpause();
    let resumed = Instant::now();

    // The call made meanwhile ends (its answer, or an explicit error: a
    // 503 when its registration timed out), at the latest not long after
    // Redis is back.
    let (status, body, ended) = tokio::time::timeout(Duration::from_secs(30), in_flight)
        .await
        .expect("the call in flight hangs after Redis came back")
        .unwrap();
    assert!(status == 200 || status >= 500, "{status}: {body}");
    assert!(body.contains("\"result\"") || body.contains("\"error\""), "{status}: {body}");
    assert!(ended.saturating_duration_since(resumed) < Duration::from_secs(15), "{status}: {body}");

    // Everything works again, and the session is intact (Redis kept it).
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = get(&a.url, &sid, Some(&cursor)).await;
        if r.status() == 200 {
            break;
        }
        assert_eq!(r.status(), 503);
        assert!(Instant::now() < deadline, "the node did not recover");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let r = call(&b.url, &sid, 10, json!({"count": 3})).await;
    let (mut seqs, mut last) = (vec![], None);
    drain(&mut SseReader::new(r), &mut seqs, &mut last).await.expect("a call works again");
    assert_eq!(seqs.len(), 3, "{seqs:?}");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "{seqs:?}");
    initialize(&b.url).await;

    // No descriptor or memory growth beyond noise.
    for (node, (fds0, rss0)) in [a, b].into_iter().zip(before) {
        let (fds, rss) = fds_and_rss(node.child.id());
        assert!(fds <= fds0 + 4, "descriptors {fds0} -> {fds}");
        assert!(rss <= rss0 + 16 * 1024, "RSS {rss0} -> {rss} KiB");
    }
}

/// The node's `/metrics` (its listener serves them to loopback).
async fn metrics(node_url: &str) -> String {
    let url = node_url.replace("/mcp", "/metrics");
    let r = http().get(url).send().await.unwrap();
    assert_eq!(r.status(), 200);
    r.text().await.unwrap()
}

/// The value of the sample `name` (labels as written), 0 when absent.
fn sample(text: &str, name: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(name).and_then(|rest| rest.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().unwrap())
}

/// A malformed or unreachable `--redis-url`, or a Redis that may evict
/// keys: a clear message and exit code 2.
#[tokio::test]
async fn bad_redis_urls_exit_2() {
    let lru = RedisServer::start(&["--maxmemory-policy", "allkeys-lru"]);
    let unreachable = format!("redis://127.0.0.1:{}/0", free_port());
    let both = format!("{unreachable},{}", lru.url());
    // Credentials Redis refuses: at once (no wait mends them), the
    // password never shown.
    let locked = RedisServer::start(&[]);
    gapless_redis::testing::command(locked.port, &["CONFIG", "SET", "requirepass", "right"]).await;
    let wrong = format!("redis://:wr0ngpass@127.0.0.1:{}/0", locked.port);
    for (url, says) in [
        ("not a url", "malformed Redis URL"),
        (unreachable.as_str(), "no seed answered within 1 s"),
        (lru.url().as_str(), "noeviction"),
        (both.as_str(), "plain Redis"),
        (wrong.as_str(), "credentials are refused"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_gapless-server"))
            .args(["--bind", "127.0.0.1:0", "--redis-url", url, "--redis-wait-secs", "1"])
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{url}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(says), "{url}: {err}");
        assert!(!err.contains("panicked"), "{err}");
        assert!(!err.contains("wr0ngpass"), "a password in the message: {err}");
    }
    let t = Instant::now();
    let out = Command::new(env!("CARGO_BIN_EXE_gapless-server"))
        .args(["--bind", "127.0.0.1:0", "--redis-url", &wrong, "--redis-wait-secs", "30"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(t.elapsed() < Duration::from_secs(10), "refused credentials waited {:?}", t.elapsed());
}

/// A node started while its Redis is away keeps trying (`--redis-wait-secs`)
/// and serves once Redis answers (`docs/SPEC.md` §8, §8.5).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_node_waits_for_its_redis_at_start_up() {
    let mut redis = RedisServer::start(&[]);
    redis.kill();
    let port = free_port();
    let mut child = Command::new(env!("CARGO_BIN_EXE_gapless-server"))
        .args(["--bind", &format!("127.0.0.1:{port}"), "--redis-wait-secs", "30"])
        .args(["--redis-url", &redis.url()])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert!(child.try_wait().unwrap().is_none(), "the node waits for its Redis");
    assert!(std::net::TcpStream::connect(("127.0.0.1", port)).is_err(), "and does not serve before it");
    redis.restart();
    let node = Node { child, url: format!("http://127.0.0.1:{port}/mcp") };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "the node did not start once Redis answered");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sid = initialize(&node.url).await;
    let r = call(&node.url, &sid, 1, json!({"count": 2})).await;
    assert_eq!(r.status(), 200);
}

async fn call_tool(url: &str, sid: &str, id: u64, name: &str, args: Value) -> reqwest::Response {
    post(
        url,
        Some(sid),
        json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args}}),
    )
    .await
}

/// `kill -9` of the node running a tool call: a resume on another node
/// gets exactly cursor+1…head of what the dead node published, then the
/// explicit JSON-RPC error for the orphaned request, within the bound
/// (`docs/SPEC.md` §8.6: under 5 s: lease 3 s + reaper 500 ms + a read of
/// the log), and
/// the stream ends.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_leaves_no_request_unanswered() {
    let redis = RedisServer::start(&[]);
    let mut a = Node::start(&redis.url(), &[]);
    let b = Node::start(&redis.url(), &[]);
    let sid = initialize(&b.url).await;
    // A long call on node a: 2000 events, 5 ms apart.
    let r = call(&a.url, &sid, 7, json!({"count": 2000, "interval_ms": 5})).await;
    let mut sse = SseReader::new(r);
    let (mut got, mut cursor) = (vec![], None);
    while got.len() < 20 {
        let e = sse.next().await.unwrap();
        if let Some(n) = e.emit_seq() {
            got.push(n);
        }
        cursor = e.id.or(cursor);
    }
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    let killed = Instant::now();
    drop(sse);
    let r = get(&b.url, &sid, cursor.as_deref()).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let mut answer = None;
    // Keep-alive comments would keep a stream without an end open forever:
    // the bound is the test's own deadline.
    tokio::time::timeout(Duration::from_secs(25), async {
        while let Some(e) = sse.next().await {
            if let Some(n) = e.emit_seq() {
                got.push(n);
            } else if let Some(m) = e.json() {
                answer = Some(m);
            }
        }
    })
    .await
    .expect("the resumed stream of the orphaned request ended");
    let took = killed.elapsed();
    let n = got.len() as u64;
    assert!(n < 2000, "the node was killed mid-call");
    assert_eq!(got, (1..=n).collect::<Vec<_>>(), "exactly what it published, once, in order");
    let answer = answer.expect("an answer for the orphaned request");
    assert_eq!(answer["id"], json!(7));
    assert_eq!(answer["error"]["code"], json!(-31002), "{answer}");
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
}

/// A sequential publisher at full speed (group commit, `docs/SPEC.md`
/// §8.8), its node `kill -9`ed mid-call: a resume on another node gets
/// exactly what the store holds of it, once, in order, then the orphaned
/// request's error; a node started afresh serves the same from the store.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_fast_publishers_node_killed_mid_call_loses_nothing_silently() {
    let redis = RedisServer::start(&[]);
    // A window larger than the call: the resume is served, not refused.
    let args = ["--ring-events", "200000"];
    let mut a = Node::start(&redis.url(), &args);
    let b = Node::start(&redis.url(), &args);
    let sid = initialize(&b.url).await;
    let r = call(&a.url, &sid, 7, json!({"count": 100000, "payload_bytes": 64})).await;
    let mut sse = SseReader::new(r);
    let (mut got, mut cursor) = (vec![], None);
    while got.len() < 3000 {
        let e = sse.next().await.unwrap();
        if let Some(n) = e.emit_seq() {
            got.push(n);
        }
        cursor = e.id.or(cursor);
    }
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    drop(sse);
    let r = get(&b.url, &sid, cursor.as_deref()).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let mut answer = None;
    let mut last = cursor.clone();
    tokio::time::timeout(Duration::from_secs(25), async {
        while let Some(e) = sse.next().await {
            if let Some(n) = e.emit_seq() {
                got.push(n);
                last = e.id.clone().or(last.take());
            } else if let Some(m) = e.json() {
                answer = Some(m);
            }
        }
    })
    .await
    .expect("the resumed stream of the orphaned request ended");
    let n = got.len() as u64;
    assert!(n < 100000, "the node was killed mid-call");
    assert_eq!(got, (1..=n).collect::<Vec<_>>(), "exactly what the store holds, once, in order");
    let answer = answer.expect("an answer for the orphaned request");
    assert_eq!(answer["error"]["code"], json!(-31002), "{answer}");
    // A node started afresh: from the last event, only the answer.
    let c = Node::start(&redis.url(), &args);
    let r = get(&c.url, &sid, last.as_deref()).await;
    assert_eq!(r.status(), 200);
    let (mut after, mut end) = (vec![], None);
    let again = drain_answer(&mut SseReader::new(r), &mut after, &mut end).await;
    assert_eq!(after, Vec::<u64>::new(), "nothing after the last event but the answer");
    assert_eq!(again.expect("the answer again")["error"]["code"], json!(-31002));
}

/// A publish the store would refuse (a payload over the session's byte
/// budget) fails that publish, visibly: the tool's call ends with the
/// refusal, and the session goes on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_publish_is_seen_by_its_publisher() {
    let redis = RedisServer::start(&[]);
    let a = Node::start(&redis.url(), &["--ring-bytes", "4096"]);
    let sid = initialize(&a.url).await;
    let (mut seqs, mut last) = (vec![], None);
    let r = call(&a.url, &sid, 1, json!({"count": 3, "payload_bytes": 8192})).await;
    let answer = drain_answer(&mut SseReader::new(r), &mut seqs, &mut last).await.expect("an answer");
    assert_eq!(seqs, Vec::<u64>::new(), "no event of the call was sent");
    let message = answer["error"]["message"].as_str().unwrap_or_default();
    assert!(message.contains("exceeds the byte budget of 4096"), "{answer}");
    let r = call(&a.url, &sid, 2, json!({"count": 3, "payload_bytes": 16})).await;
    let answer = drain_answer(&mut SseReader::new(r), &mut seqs, &mut last).await.expect("an answer");
    assert_eq!(seqs, [1, 2, 3], "the session goes on");
    assert!(answer["result"]["content"][0]["text"].as_str().unwrap().contains("emitted 3"), "{answer}");
}

/// The client's response to a server → client request (sampling), POSTed
/// to another node than the one waiting for it, reaches that node: the
/// tool completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_response_to_the_server_reaches_the_node_waiting_for_it() {
    let redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let sid = initialize(&a.url).await;
    let r = call_tool(&a.url, &sid, 5, "test_sampling", json!({"prompt": "hi"})).await;
    let mut sse = SseReader::new(r);
    let request = loop {
        let e = sse.next().await.expect("the sampling request");
        if let Some(m) = e.json().filter(|m| m["method"] == "sampling/createMessage") {
            break m;
        }
    };
    let reply = json!({"jsonrpc":"2.0","id":request["id"],"result":{"role":"assistant","content":{"type":"text","text":"from b"},"model":"m"}});
    assert_eq!(post(&b.url, Some(&sid), reply).await.status(), 202);
    let mut result = None;
    while let Some(e) = sse.next().await {
        if let Some(m) = e.json().filter(|m| m["id"] == json!(5)) {
            result = Some(m);
        }
    }
    let result = result.expect("the tool's result");
    assert_eq!(result["result"]["content"][0]["text"], json!("LLM response: from b"), "{result}");
}

/// `notifications/cancelled` sent to another node than the one running the
/// request cancels it: its stream ends without a result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_reaches_the_node_running_the_request() {
    let redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let sid = initialize(&a.url).await;
    let r = call(&a.url, &sid, 9, json!({"count": 4000, "interval_ms": 5})).await;
    let mut sse = SseReader::new(r);
    for _ in 0..5 {
        sse.next().await.unwrap();
    }
    let cancel =
        json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9,"reason":"test"}});
    let sent = Instant::now();
    assert_eq!(post(&b.url, Some(&sid), cancel).await.status(), 202);
    let (mut seqs, mut result) = (vec![], None);
    while let Some(e) = sse.next().await {
        if let Some(n) = e.emit_seq() {
            seqs.push(n);
        } else if let Some(m) = e.json().filter(|m| m["id"] == json!(9)) {
            result = Some(m);
        }
    }
    assert!(result.is_none(), "a cancelled request gets no response: {result:?}");
    assert!(seqs.len() < 3990, "the request ran on after the cancellation");
    assert!(sent.elapsed() < Duration::from_secs(10));
}

/// A TCP forwarder on a free loopback port whose target can be switched
/// (what a failover looks like to a node: the same address, another
/// server). Switching cuts every open connection.
struct Switch {
    port: u16,
    target: std::sync::Arc<std::sync::atomic::AtomicU16>,
    generation: std::sync::Arc<std::sync::atomic::AtomicU64>,
}

impl Switch {
    async fn start(target: u16) -> Switch {
        use std::sync::atomic::Ordering::SeqCst;
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let t = std::sync::Arc::new(std::sync::atomic::AtomicU16::new(target));
        let g = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
        let (t2, g2) = (t.clone(), g.clone());
        tokio::spawn(async move {
            loop {
                let Ok((mut inbound, _)) = listener.accept().await else { return };
                let (port, gen) = (t2.load(SeqCst), g2.load(SeqCst));
                let g3 = g2.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(("127.0.0.1", port)).await else {
                        return;
                    };
                    let cut = async {
                        while g3.load(SeqCst) == gen {
                            tokio::time::sleep(Duration::from_millis(20)).await;
                        }
                    };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = cut => {}
                    }
                });
            }
        });
        Switch { port, target: t, generation: g }
    }

    fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    fn switch_to(&self, port: u16) {
        use std::sync::atomic::Ordering::SeqCst;
        self.target.store(port, SeqCst);
        self.generation.fetch_add(1, SeqCst);
    }
}

/// Waits until the replica on `replica` has everything the primary on
/// `primary` wrote so far.
async fn until_caught_up(primary: u16, replica: u16) {
    let offset = |v: &redis::Value, field: &str| {
        let text = match v {
            redis::Value::BulkString(b) => String::from_utf8_lossy(b).into_owned(),
            redis::Value::VerbatimString { text, .. } => text.clone(),
            _ => String::new(),
        };
        text.lines()
            .find_map(|l| l.strip_prefix(field))
            .and_then(|x| x.trim().parse::<u64>().ok())
            .unwrap_or(0)
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = gapless_redis::testing::command(replica, &["INFO", "replication"]).await;
        let p = gapless_redis::testing::command(primary, &["INFO", "replication"]).await;
        let p = offset(&p, "master_repl_offset:");
        if offset(&r, "slave_repl_offset:") >= p && p > 0 {
            return;
        }
        assert!(Instant::now() < deadline, "the replica did not catch up");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A Redis primary with a replica. The replica lags (its replication link
/// is cut: stopping the process would not do, the kernel would keep what
/// the primary sent for it); the primary takes more events, which a client
/// reads; the primary dies and the replica is promoted in its place. The client's cursor of an event the failover
/// lost is refused `409 history_rewritten`, before and after new events
/// reuse its seq: never an empty 200, never a replay of other events.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failover_that_lost_events_is_refused_by_name() {
    let mut primary = RedisServer::start(&[]);
    let link = Switch::start(primary.port).await;
    let replica_of = link.port.to_string();
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &replica_of]);
    let switch = Switch::start(primary.port).await;
    let (a, b) = (Node::start(&switch.url(), &[]), Node::start(&switch.url(), &[]));
    let sid = initialize(&a.url).await;
    // Batch 1, replicated.
    let (mut seqs, mut kept) = (vec![], None);
    let r = call(&a.url, &sid, 1, json!({"count": 10})).await;
    drain(&mut SseReader::new(r), &mut seqs, &mut kept).await.expect("result");
    let kept = kept.unwrap();
    until_caught_up(primary.port, replica.port).await;
    // The replica lags: batch 2 reaches the primary only.
    link.switch_to(free_port());
    let (mut seqs2, mut lost) = (vec![], None);
    let r = call(&b.url, &sid, 2, json!({"count": 10})).await;
    drain(&mut SseReader::new(r), &mut seqs2, &mut lost).await.expect("result");
    let lost = lost.unwrap();
    // The primary dies; the replica is promoted in its place.
    primary.kill();
    gapless_redis::testing::command(replica.port, &["REPLICAOF", "NO", "ONE"]).await;
    switch.switch_to(replica.port);
    // The lost cursor, beyond the new primary's head, at the node that
    // served it: its replica holds the lost events, so it tells the store
    // how far the store's history went (node `a` may not have tailed them
    // before the primary died, and a store that never heard of them cannot
    // tell a lost cursor from a foreign one).
    let body = rewritten_after_failover(&b.url, &sid, &lost).await;
    assert_eq!(body["cursor"], json!(lost));
    // The store has recorded the loss: every node refuses it alike (once
    // its own connection has found the new primary: 503 until then).
    rewritten_after_failover(&a.url, &sid, &lost).await;
    // The kept cursor resumes (the stream ended with its result: replayed).
    let r = get(&b.url, &sid, Some(&kept)).await;
    assert_eq!(r.status(), 200, "a cursor the failover kept resumes");
    // New events reuse the lost seqs: the lost cursor's check tells them apart.
    let (mut s3, mut l3) = (vec![], None);
    // (A node's replica that still held the lost events is found stale and
    // dropped: a stream it carried ends, and the client resumes, as any
    // SSE client does when a stream ends without its response.)
    let r = call(&b.url, &sid, 3, json!({"count": 30})).await;
    let mut result = drain(&mut SseReader::new(r), &mut s3, &mut l3).await;
    for _ in 0..5 {
        if result.is_some() {
            break;
        }
        let cursor = l3.as_deref().expect("the call's stream began (its priming event)");
        let r = get(&a.url, &sid, Some(cursor)).await;
        assert_eq!(r.status(), 200, "a resume after the failover");
        result = drain(&mut SseReader::new(r), &mut s3, &mut l3).await;
    }
    assert!(result.is_some(), "the result after the failover");
    assert_eq!(s3, (1..=30).collect::<Vec<_>>(), "every event once");
    assert!(seq_of(l3.as_ref().unwrap()) > seq_of(&lost), "the lost seq was reused");
    for node in [&a, &b] {
        expect_error(get(&node.url, &sid, Some(&lost)).await, 409, "history_rewritten").await;
    }
}

/// The answer of node `url` to a resume of session `sid` after `lost`, an
/// event a failover lost: `409 history_rewritten`, once the node reaches
/// the new primary (until then `503`, or `404` while it cannot find the
/// session), within 15 s.
async fn rewritten_after_failover(url: &str, sid: &str, lost: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let r = get(url, sid, Some(lost)).await;
        if r.status() == 409 {
            return expect_error(r, 409, "history_rewritten").await;
        }
        assert!(r.status() == 503 || r.status() == 404, "while failing over: {}", r.status());
        assert!(Instant::now() < deadline, "no answer after the failover");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

/// A failover must not lose a request's answer once the node counted it
/// written (the protocol model's finding 2, `docs/model/README.md`). The
/// request is registered and primed while the replica keeps up; then the
/// replica's link is cut, the tool answers (on the primary only), the
/// primary dies and the replica is promoted. The node is alive, so no
/// reaper answers for it: a client resuming the request's stream must
/// still get its answer (the node writes it again on the new primary, as it
/// never had a replica's acknowledgement), not an open stream forever.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_a_failover_lost_is_written_again() {
    let mut primary = RedisServer::start(&[]);
    let link = Switch::start(primary.port).await;
    let replica_of = link.port.to_string();
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &replica_of]);
    let switch = Switch::start(primary.port).await;
    let a = Node::start(&switch.url(), &[]);
    let sid = initialize(&a.url).await;
    // Its events go to the standalone stream: the request's own stream
    // holds its priming event and, after about 5 s, its answer.
    let r = call(&a.url, &sid, 1, json!({"count": 2, "interval_ms": 5000, "target": "standalone"})).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let primed = sse.next().await.and_then(|e| e.id).expect("the priming event");
    drop(sse);
    until_caught_up(primary.port, replica.port).await;
    // The replica lags from here on: the answer reaches the primary only.
    link.switch_to(free_port());
    // It has the request's registration, and the request is still running.
    let registered = |port| async move {
        match gapless_redis::testing::command(port, &["KEYS", "gapless:node:*:requests"]).await {
            redis::Value::Array(keys) => !keys.is_empty(),
            other => panic!("KEYS answered {other:?}"),
        }
    };
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(registered(replica.port).await, "the replica has the registration");
    assert!(registered(primary.port).await, "the request is still running");
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let r = get(&a.url, &sid, Some(&primed)).await;
        assert_eq!(r.status(), 200, "a resume before the failover");
        let (mut seqs, mut last) = (vec![], None);
        let mut sse = SseReader::new(r);
        if let Ok(Some(_)) =
            tokio::time::timeout(Duration::from_secs(1), drain(&mut sse, &mut seqs, &mut last)).await
        {
            break; // the answer is on the primary
        }
        assert!(Instant::now() < deadline, "no answer on the primary");
    }
    // The primary dies; the replica, which never got the answer, is
    // promoted in its place.
    primary.kill();
    gapless_redis::testing::command(replica.port, &["REPLICAOF", "NO", "ONE"]).await;
    switch.switch_to(replica.port);
    let deadline = Instant::now() + Duration::from_secs(30);
    let result = loop {
        let r = get(&a.url, &sid, Some(&primed)).await;
        if r.status() == 200 {
            let (mut seqs, mut last) = (vec![], None);
            let left = deadline.saturating_duration_since(Instant::now());
            let mut sse = SseReader::new(r);
            match tokio::time::timeout(left, drain(&mut sse, &mut seqs, &mut last)).await {
                Ok(Some(result)) => break result,
                Ok(None) => {} // the stale replica's stream ended: resume again
                Err(_) => panic!("the request's stream stayed open without its answer after the failover"),
            }
        } else {
            assert!(r.status() == 503 || r.status() == 404, "while failing over: {}", r.status());
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
        assert!(Instant::now() < deadline, "no answer after the failover");
    };
    assert_eq!(result["id"], json!(1), "{result}");
    assert_eq!(result["result"]["content"][0]["text"], json!("emitted 2"), "{result}");
}

/// A WebSocket migration with its upgrade on one node and its socket on
/// another: the socket's first frame is cursor+1, frames are dense, a
/// request over the socket streams live, and the session is migrated on
/// every node (POSTs get 409 `session_migrated`).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_migration_upgrades_on_one_node_and_attaches_on_another() {
    use futures_util::SinkExt;
    let redis = RedisServer::start(&[]);
    let nodes: Vec<Node> = (0..3).map(|_| Node::start(&redis.url(), &[])).collect();
    let sid = initialize(&nodes[0].url).await;
    // 30 events; the client processed up to the 10th.
    let r = call(&nodes[1].url, &sid, 1, json!({"count": 30})).await;
    let mut sse = SseReader::new(r);
    let mut ids = vec![];
    while let Some(e) = sse.next().await {
        if e.emit_seq().is_some() {
            ids.push(e.id.unwrap());
        }
    }
    let cursor = ids[9].clone();
    let r = http()
        .post(format!("{}/session/{sid}/upgrade", nodes[2].url))
        .header("content-type", "application/json")
        .body(json!({"cursor": cursor}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let grant: Value = r.json().await.unwrap();
    assert_eq!(grant["replay_from"], json!(ids[10]), "{grant}");
    let host = nodes[0].url.trim_start_matches("http://").trim_end_matches("/mcp").to_owned();
    let ws_url = format!("ws://{host}{}", grant["websocket"].as_str().unwrap());
    let (mut ws, _) = tokio_tungstenite::connect_async(ws_url).await.expect("socket on another node");
    let mut seqs = vec![];
    while seqs.len() < 20 + 1 {
        // the 20 replayed events, then the call's result
        let (seq, _, msg) = common::frame(&mut ws).await.expect("a frame");
        seqs.push((seq, msg));
    }
    let first = seq_of(&ids[10]);
    for (i, (seq, _)) in seqs.iter().enumerate() {
        assert_eq!(*seq, first + i as u64, "dense from cursor+1");
    }
    assert!(seqs.last().unwrap().1.get("result").is_some(), "the call's result follows its events");
    // A request over the socket: its events arrive live, then its result.
    let call = json!({"message": {"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":5}}}});
    ws.send(tokio_tungstenite::tungstenite::Message::Text(call.to_string().into())).await.unwrap();
    let mut got = vec![];
    loop {
        let (_, _, msg) = common::frame(&mut ws).await.expect("a frame");
        if let Some(n) = msg["params"]["data"]["seq"].as_u64() {
            got.push(n);
        }
        if msg["id"] == json!(2) && msg.get("result").is_some() {
            break;
        }
    }
    assert_eq!(got, [1, 2, 3, 4, 5]);
    // Migrated everywhere.
    for node in &nodes {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let r = call_tool(&node.url, &sid, 9, "emit_events", json!({"count": 1})).await;
            if r.status() == 409 {
                expect_error(r, 409, "session_migrated").await;
                break;
            }
            assert!(Instant::now() < deadline, "a node still takes POSTs of a migrated session");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    // A ticket is single-use, on every node.
    let again = format!("ws://{host}{}", grant["websocket"].as_str().unwrap());
    let r = http()
        .get(again.replace("ws://", "http://"))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    expect_error(r, 403, "ticket_invalid").await;
}

/// Concurrent requests on one node never make it think its replica stale:
/// eight calls at once, and resumes while another call publishes, all get
/// every event and their results.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_requests_keep_the_replica() {
    let redis = RedisServer::start(&[]);
    let (a, b) = (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let sid = initialize(&a.url).await;
    let (mut done, mut last) = (vec![], None);
    let r = call(&a.url, &sid, 1, json!({"count": 20})).await;
    drain(&mut SseReader::new(r), &mut done, &mut last).await.expect("result");
    let first_cursor = {
        // The first notification's id: resumable again and again.
        let r = get(&a.url, &sid, last.as_deref()).await;
        assert_eq!(r.status(), 200);
        last.clone().unwrap()
    };
    let busy = {
        let (url, sid) = (b.url.clone(), sid.clone());
        tokio::spawn(async move {
            let r = call(&url, &sid, 2, json!({"count": 400, "interval_ms": 2})).await;
            let (mut seqs, mut last) = (vec![], None);
            let result = drain(&mut SseReader::new(r), &mut seqs, &mut last).await;
            (seqs, result.is_some())
        })
    };
    let calls: Vec<_> = (0..8u64)
        .map(|i| {
            let (url, sid) = (a.url.clone(), sid.clone());
            tokio::spawn(async move {
                let r = call(&url, &sid, 10 + i, json!({"count": 50})).await;
                let (mut seqs, mut last) = (vec![], None);
                let result = drain(&mut SseReader::new(r), &mut seqs, &mut last).await;
                (seqs, result.is_some())
            })
        })
        .collect();
    for _ in 0..10 {
        let r = get(&a.url, &sid, Some(&first_cursor)).await;
        assert_eq!(r.status(), 200, "a resume while another call publishes");
        let (mut seqs, mut l) = (vec![], None);
        drain(&mut SseReader::new(r), &mut seqs, &mut l).await;
        assert!(seqs.is_empty(), "nothing after the stream's last event");
    }
    for c in calls {
        let (seqs, result) = c.await.unwrap();
        assert!(result, "each call gets its result");
        assert_eq!(seqs, (1..=50).collect::<Vec<_>>());
    }
    let (seqs, result) = busy.await.unwrap();
    assert!(result);
    assert_eq!(seqs, (1..=400).collect::<Vec<_>>());
}

/// Two nodes on a Redis Cluster of three masters, each given a different
/// cluster node's URL, with a session whose slot lives on the third: a
/// stream cut on one node and resumed with `Last-Event-ID` on the other
/// gets exactly the events after the cursor, then its result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_on_a_redis_cluster_resumes_on_another_node() {
    let cluster = gapless_redis::testing::RedisCluster::start(3);
    let (a, b) = (Node::start(&cluster.url(0), &[]), Node::start(&cluster.url(1), &[]));
    let (p0, p1) = (cluster.nodes[0].port, cluster.nodes[1].port);
    let mut sid = initialize(&a.url).await;
    for _ in 0..30 {
        let master = cluster.master_of(&format!("gapless:{{{sid}}}:m"));
        if master != p0 && master != p1 {
            break;
        }
        sid = initialize(&a.url).await;
    }
    let master = cluster.master_of(&format!("gapless:{{{sid}}}:m"));
    assert!(master != p0 && master != p1, "a session on the third master");

    let r = call(&a.url, &sid, 1, json!({"count": 60, "interval_ms": 5})).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let (mut before, mut cursor) = (vec![], None);
    while before.len() < 20 {
        let e = sse.next().await.expect("events before the cut");
        if let Some(n) = e.emit_seq() {
            before.push(n);
        }
        cursor = e.id.or(cursor);
    }
    drop(sse);
    assert_eq!(before, (1..=20).collect::<Vec<_>>());
    let r = get(&b.url, &sid, cursor.as_deref()).await;
    assert_eq!(r.status(), 200, "resume on the other node");
    let (mut after, mut last) = (vec![], None);
    let result = drain(&mut SseReader::new(r), &mut after, &mut last).await;
    assert_eq!(after, (21..=60).collect::<Vec<_>>(), "exactly the events after the cursor, once");
    assert!(result.expect("the result follows")["result"]["content"][0]["text"]
        .as_str()
        .unwrap()
        .contains("60"));
}

/// A Redis Cluster master `kill -9`ed while a stream runs, its replica
/// promoted (`docs/SPEC.md` §8.4, issue 32): the replica was stopped while
/// the last events the client read were written, so the failover lost
/// them. The client saw no hole; its resume, on another node, is refused
/// `409 history_rewritten` by name, never answered with other events; and
/// both nodes follow the new topology without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_redis_cluster_failover_that_lost_events_is_refused_by_name() {
    let mut cluster = gapless_redis::testing::RedisCluster::start_with_replicas(3, 1);
    let (a, b) = (Node::start(&cluster.url(0), &[]), Node::start(&cluster.url(1), &[]));
    let seeds = [cluster.nodes[0].port, cluster.nodes[1].port];
    let mut sid = initialize(&a.url).await;
    let key = |sid: &str| format!("gapless:{{{sid}}}:m");
    for _ in 0..30 {
        if !seeds.contains(&cluster.master_of(&key(&sid))) {
            break;
        }
        sid = initialize(&a.url).await;
    }
    let master = cluster.master_of(&key(&sid));
    assert!(!seeds.contains(&master), "a session on a master neither node was started with");
    let replica = *cluster.replicas_of(master).first().expect("the master has a replica");

    let r = call(&a.url, &sid, 1, json!({"count": 2000, "interval_ms": 5})).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let (mut seqs, mut cursor) = (vec![], None);
    while seqs.len() < 40 {
        let e = sse.next().await.expect("events before the failover");
        if let Some(n) = e.emit_seq() {
            seqs.push(n);
        }
        cursor = e.id.or(cursor);
    }
    // Replicated so far; then the replica stops and the master drops its
    // link (what it had sent may wait in the stopped replica's socket; it
    // sends nothing more). The tool publishes an event every 5 ms or more:
    // at that moment at most about 100 events exist (40 read, the rest in
    // flight), so what the client reads from the 300th on is on the master
    // only.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let replica_pid = cluster.node(replica).pid().expect("the replica runs");
    signal(replica_pid, "-STOP");
    let out = Command::new("redis-cli")
        .args(["-p", &master.to_string(), "CLIENT", "KILL", "TYPE", "replica"])
        .output()
        .unwrap();
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "1", "the master's link to its replica dropped");
    while seqs.len() < 300 {
        let e = sse.next().await.expect("events the replica does not have");
        if let Some(n) = e.emit_seq() {
            seqs.push(n);
        }
        cursor = e.id.or(cursor);
    }
    cluster.node(master).kill();
    signal(replica_pid, "-CONT");
    let killed = Instant::now();
    // The stream goes on until the node cannot record a delivery, then
    // ends; whatever it carried, the client saw no hole.
    let _ = tokio::time::timeout(Duration::from_secs(60), drain_answer(&mut sse, &mut seqs, &mut cursor))
        .await
        .expect("the stream ends after the failover");
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "no hole in what the client read");
    let cursor = cursor.unwrap();

    // The resume: 503 while the cluster fails over, then refused by name.
    let deadline = Instant::now() + Duration::from_secs(30);
    let refused = loop {
        let r = get(&b.url, &sid, Some(&cursor)).await;
        if r.status() != 503 {
            break r;
        }
        assert!(Instant::now() < deadline, "still 503 {:?} after the kill", killed.elapsed());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let body = expect_error(refused, 409, "history_rewritten").await;
    assert_eq!(body["cursor"], json!(cursor), "{body}");

    // Both nodes follow the new topology: new sessions on the promoted
    // replica's slots (and everywhere else) work, without a restart.
    for node in [&a, &b] {
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut works = 0;
        while works < 6 {
            // Six sessions in a row: with three masters, some on the
            // promoted replica's slots.
            let (mut got, mut answer) = (vec![], None);
            if let Ok(fresh) = try_initialize(&node.url).await {
                let r = call(&node.url, &fresh, 1, json!({"count": 5})).await;
                answer = drain_answer(&mut SseReader::new(r), &mut got, &mut None).await;
            }
            if got == [1, 2, 3, 4, 5] && answer.is_some_and(|a| a.get("result").is_some()) {
                works += 1;
                continue;
            }
            works = 0;
            assert!(Instant::now() < deadline, "{} does not work after the failover: {got:?}", node.url);
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }
    let promoted = cluster.master_of(&key(&sid));
    assert_eq!(promoted, replica, "the replica took the slot over");
}

/// A legacy (2024-11-05) client's event stream opened on `node`, read past
/// its `endpoint` event, and the messages URL that event named on `post_to`
/// (any node: the session is in the store).
async fn legacy_stream(node: &Node, post_to: &Node) -> (SseReader, String) {
    let r =
        http().get(format!("{}/sse", node.url)).header("accept", "text/event-stream").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let endpoint = sse.next().await.expect("the endpoint event");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"), "{endpoint:?}");
    (sse, format!("{}{}", post_to.url.trim_end_matches("/mcp"), endpoint.data))
}

/// POSTs `msg` to a legacy session's messages URL `to`; the status.
async fn legacy_post(to: &str, msg: Value) -> u16 {
    let r = http().post(to).header("content-type", "application/json").body(msg.to_string());
    r.send().await.unwrap().status().as_u16()
}

/// The legacy handshake through `to`: `initialize`, answered on `sse`, then
/// `notifications/initialized`.
async fn legacy_handshake(sse: &mut SseReader, to: &str) {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"legacy","version":"1"}}});
    assert_eq!(legacy_post(to, init).await, 202);
    let e = sse.next().await.expect("the initialize response");
    assert_eq!(e.json().unwrap()["result"]["protocolVersion"], json!("2024-11-05"), "{e:?}");
    assert_eq!(legacy_post(to, json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await, 202);
}

/// The legacy HTTP+SSE transport on a cluster (`docs/SPEC.md` §5.3, §8):
/// the event stream on one node, the messages posted to another, whose
/// responses and notifications arrive on that stream in order; the stream
/// cut and reconnected on a third node with `Last-Event-ID` gets exactly
/// what followed.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_client_streams_on_one_node_and_posts_to_another() {
    let redis = RedisServer::start(&[]);
    let nodes: Vec<Node> = (0..3).map(|_| Node::start(&redis.url(), &[])).collect();
    let (mut sse, to) = legacy_stream(&nodes[0], &nodes[1]).await;
    let sid = to.rsplit_once('=').unwrap().1.to_owned();
    let send = |msg: Value| legacy_post(&to, msg);
    legacy_handshake(&mut sse, &to).await;
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":30,"interval_ms":2}}});
    assert_eq!(send(call).await, 202);
    let (mut got, mut cursor) = (vec![], None);
    while got.len() < 10 {
        let e = sse.next().await.expect("the call's notifications");
        assert_eq!(e.event.as_deref(), Some("message"), "{e:?}");
        if let Some(n) = e.emit_seq() {
            got.push(n);
        }
        cursor = e.id.or(cursor);
    }
    drop(sse);
    // Reconnected on a third node with the cursor: exactly what followed.
    let cursor = cursor.unwrap();
    let r = http()
        .get(format!("{}/sse?sessionId={sid}", nodes[2].url))
        .header("accept", "text/event-stream")
        .header("last-event-id", &cursor)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let endpoint = sse.next().await.expect("the endpoint event again");
    assert_eq!(endpoint.event.as_deref(), Some("endpoint"), "{endpoint:?}");
    let result = loop {
        let e = sse.next().await.expect("the rest of the call");
        if let Some(n) = e.emit_seq() {
            got.push(n);
        } else if let Some(m) = e.json().filter(|m| m["id"] == json!(1)) {
            break m;
        }
    };
    assert_eq!(got, (1..=30).collect::<Vec<_>>(), "every notification once, in order");
    assert!(result["result"]["content"][0]["text"].as_str().unwrap().contains("emitted 30"), "{result}");
}

/// `kill -9` of the node running a legacy transport request (its
/// response goes on the session's shared stream, `docs/SPEC.md` §8.9): the
/// client's stream, on another node, gets what the dead node published,
/// once, in order, then the explicit JSON-RPC error for the request within
/// the bound of §8.6, and goes on: a later request's response follows.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_answers_its_legacy_request_and_the_stream_goes_on() {
    let redis = RedisServer::start(&[]);
    let keep = Node::start(&redis.url(), &[]);
    let mut doomed = Node::start(&redis.url(), &[]);
    let (mut sse, to_keep) = legacy_stream(&keep, &keep).await;
    let to_doomed = to_keep.replace(keep.url.trim_end_matches("/mcp"), doomed.url.trim_end_matches("/mcp"));
    let send = |url: String, msg: Value| async move { legacy_post(&url, msg).await };
    legacy_handshake(&mut sse, &to_keep).await;
    // A long call on the doomed node: 2000 events, 5 ms apart.
    let call = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":2000,"interval_ms":5}}});
    assert_eq!(send(to_doomed, call).await, 202);
    let mut got = vec![];
    while got.len() < 20 {
        let e = sse.next().await.expect("the call's notifications");
        if let Some(n) = e.emit_seq() {
            got.push(n);
        }
    }
    doomed.child.kill().unwrap(); // SIGKILL
    doomed.child.wait().unwrap();
    let killed = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(25), async {
        loop {
            let e = sse.next().await.expect("the stream goes on");
            if let Some(n) = e.emit_seq() {
                got.push(n);
            } else if let Some(m) = e.json().filter(|m| m.get("id").is_some()) {
                break m;
            }
        }
    })
    .await
    .expect("an answer for the orphaned legacy request");
    let took = killed.elapsed();
    let n = got.len() as u64;
    assert!(n < 2000, "the node was killed mid-call");
    assert_eq!(got, (1..=n).collect::<Vec<_>>(), "exactly what it published, once, in order");
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-31002), "{answer}");
    assert!(took < Duration::from_secs(5), "answered after {took:?}");
    // The stream is the session's: it goes on, the next request's response
    // follows, and nothing else for request 1 came between.
    let next = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":3,"interval_ms":1}}});
    assert_eq!(send(to_keep, next).await, 202);
    let mut more = vec![];
    let result = loop {
        let e = sse.next().await.expect("the next request's events");
        if let Some(n) = e.emit_seq() {
            more.push(n);
        } else if let Some(m) = e.json().filter(|m| m.get("id").is_some()) {
            break m;
        }
    };
    assert_eq!(more, [1, 2, 3]);
    assert_eq!(result["id"], json!(2), "request 1 was answered once: {result}");
    assert!(result["result"]["content"][0]["text"].as_str().unwrap().contains("emitted 3"), "{result}");
}

/// A legacy request whose response exceeds the session's byte budget (in
/// the store) gets an explicit `-32603` in its place at once, on the
/// shared stream, and the stream goes on: never a retry until the
/// client-request timeout, never silence.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_response_over_the_budget_is_an_explicit_error() {
    let redis = RedisServer::start(&[]);
    let node = Node::start(&redis.url(), &["--ring-bytes", "8192"]);
    let (mut sse, to) = legacy_stream(&node, &node).await;
    let send = |msg: Value| legacy_post(&to, msg);
    legacy_handshake(&mut sse, &to).await;
    let big = "x".repeat(10_000);
    let call = |id: u64, name: &str| json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"greet","arguments":{"name":name}}});
    let asked = Instant::now();
    assert_eq!(send(call(1, &big)).await, 202);
    let answer = tokio::time::timeout(Duration::from_secs(10), sse.next()).await.expect("an answer").unwrap();
    let answer = answer.json().unwrap();
    assert_eq!(answer["id"], json!(1), "{answer}");
    assert_eq!(answer["error"]["code"], json!(-32603), "{answer}");
    assert!(answer["error"]["message"].as_str().unwrap().contains("byte budget"), "{answer}");
    assert!(asked.elapsed() < Duration::from_secs(5), "at once, not after retries: {:?}", asked.elapsed());
    assert_eq!(send(call(2, "ok")).await, 202);
    let next = sse.next().await.expect("the next answer").json().unwrap();
    assert_eq!(
        (&next["id"], &next["result"]["content"][0]["text"]),
        (&json!(2), &json!("Hello, ok!")),
        "{next}"
    );
}

/// Polls `tasks/get` on `url` until `done` holds of the task (or `within`
/// has passed: then the last answer).
async fn poll_task(url: &str, id: &str, within: Duration, done: impl Fn(&Value) -> bool) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let r = task_call(url, "tasks/get", json!({"taskId": id})).await;
        if done(&r["result"]) || Instant::now() >= deadline {
            return r;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// Tasks across nodes on one Redis (`docs/SPEC.md` §5.5): a task created on
/// one node is found at once on another (stored before its handle went
/// out), fed its input there, completed by the first, and its result read
/// on a third; a cancel on another node stops it and its status holds.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_created_polled_fed_and_read_on_different_nodes() {
    let redis = RedisServer::start(&[]);
    let (a, b, c) =
        (Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]), Node::start(&redis.url(), &[]));
    let created =
        task_call(&a.url, "tools/call", json!({"name": "confirm_delete", "arguments": {"filename": "x"}}))
            .await;
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    // On b, at once: the record is in the store before the handle went out.
    let now = task_call(&b.url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(now["result"]["taskId"], json!(id), "{now}");
    let asked = poll_task(&b.url, &id, Duration::from_secs(5), |t| t["status"] == "input_required").await;
    assert_eq!(asked["result"]["inputRequests"]["confirm"]["method"], "elicitation/create", "{asked}");
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let ack = task_call(&b.url, "tasks/update", json!({"taskId": id, "inputResponses": answer})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    // a's work takes the answer from the store, completes, and c reads it.
    let done = poll_task(&c.url, &id, Duration::from_secs(5), |t| t["status"] == "completed").await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "deleted x", "{done}");

    // A cancel on c of a task working on a: cancelled, it stays so, and
    // a's work stops as the bus tells it (`docs/SPEC.md` §8.11), well
    // before its own look at the record (a second), let alone its 30 s.
    let running = |url: String| async move {
        let m = http().get(url.replace("/mcp", "/metrics")).send().await.unwrap().text().await.unwrap();
        m.lines().find_map(|l| l.strip_prefix("gapless_tasks_running ")).unwrap().parse::<u64>().unwrap()
    };
    let long = task_call(
        &a.url,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 30, "label": "l"}}),
    )
    .await;
    let long = long["result"]["taskId"].as_str().unwrap().to_owned();
    assert_eq!(running(a.url.clone()).await, 1);
    let ack = task_call(&c.url, "tasks/cancel", json!({"taskId": long})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let deadline = Instant::now() + Duration::from_millis(500);
    while running(a.url.clone()).await != 0 {
        assert!(Instant::now() < deadline, "a's work still runs 500 ms after the cancel on c");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let after = task_call(&b.url, "tasks/get", json!({"taskId": long})).await;
    assert_eq!(after["result"]["status"], "cancelled", "{after}");
}

/// A task emitting events on a, read on b and cancelled on c: c seals the
/// task's stream in the store before it answers, so a `tasks/stream`
/// opened after the cancel gets no event a's work emitted after it (the
/// stream's `next` in the store does not move past the cancel), then the
/// end, even though a hears no bus (its work runs on for up to a second).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancel_on_another_node_stops_the_tasks_events_at_once() {
    let redis = RedisServer::start(&[]);
    // a hears no bus message: its work learns of the cancel from its own
    // look at the record, a second later; the seal alone keeps what it
    // emits meanwhile out of the stream.
    let deaf = [(gapless_redis::DEAF_ENV, "all")];
    let nodes: Vec<Node> = vec![
        Node::start_with_env(&redis.url(), &[], &deaf),
        Node::start(&redis.url(), &[]),
        Node::start(&redis.url(), &[]),
    ];
    let (a, b, c) = (&nodes[0], &nodes[1], &nodes[2]);
    let created = task_call(
        &a.url,
        "tools/call",
        json!({"name": "task_events", "arguments": {"count": 5000, "interval_ms": 5}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    let (seen, end) = task_stream(&b.url, json!({"taskId": id}), 20).await;
    assert!(end.is_none());
    let client = redis::Client::open(redis.url()).unwrap();
    let mut r = client.get_multiplexed_async_connection().await.unwrap();
    let meta = format!("gapless:task:{{{id}}}:em");
    let ack = task_call(&c.url, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let next_at_cancel: u64 = redis::cmd("HGET").arg(&meta).arg("next").query_async(&mut r).await.unwrap();
    let got = task_call(&b.url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(got["result"]["status"], "cancelled", "{got}");
    let after = *seen.last().unwrap();
    let (late, end) = tokio::time::timeout(
        Duration::from_secs(5),
        task_stream(&b.url, json!({"taskId": id, "after": after}), 5000),
    )
    .await
    .expect("the stream of a cancelled task ends");
    assert_eq!(ended(end), "ended");
    assert!(late.iter().all(|&s| s < next_at_cancel), "events after the cancel ({next_at_cancel}): {late:?}");
    tokio::time::sleep(Duration::from_millis(500)).await;
    let next: u64 = redis::cmd("HGET").arg(&meta).arg("next").query_async(&mut r).await.unwrap();
    assert_eq!(next, next_at_cancel, "a's work appended after the cancel");
    eprintln!("{} events after the last one read before the cancel, all before it", late.len());
}

/// `kill -9` of the node running a task: another node reports it `failed`
/// (-31002, the node stopped) once the dead node's lease has expired, within
/// 5 s (the lease, 3 s, and a poll), and before that it is still `working`, never
/// gone.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_of_a_killed_node_is_failed_once_its_lease_expires() {
    let redis = RedisServer::start(&[]);
    let mut a = Node::start(&redis.url(), &[]);
    let b = Node::start(&redis.url(), &[]);
    let created = task_call(
        &a.url,
        "tools/call",
        json!({"name": "slow_compute", "arguments": {"seconds": 60, "label": "k"}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap().to_owned();
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    let killed = Instant::now();
    let early = task_call(&b.url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(early["result"]["status"], "working", "{early}");
    let failed = poll_task(&b.url, &id, Duration::from_secs(20), |t| t["status"] == "failed").await;
    let took = killed.elapsed();
    assert_eq!(failed["result"]["status"], "failed", "{failed}");
    assert_eq!(failed["result"]["error"]["code"], -31002, "{failed}");
    assert!(took < Duration::from_secs(5), "failed after {took:?}");
    // And it stays failed, on any node.
    let again = task_call(&b.url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(again["result"]["status"], "failed", "{again}");
}

/// A task's event stream across nodes (`docs/SPEC.md` §5.6, §8.11): the
/// task runs on a, its stream opens on b, is cut, and resumes through
/// HAProxy (round robin over a, b and c) with a cut every 25 events: every
/// seq exactly once, in order, then the empty result. Afterwards a late
/// joiner gets what the bound keeps (the newest 64), and a cursor before
/// that is `events_gone` with the exact earliest seq.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_stream_follows_its_task_across_nodes_and_resumes_anywhere() {
    let redis = RedisServer::start(&[]);
    let nodes: Vec<Node> = (0..3).map(|_| Node::start(&redis.url(), &["--task-events-max", "64"])).collect();
    let addrs: Vec<std::net::SocketAddr> = nodes
        .iter()
        .map(|n| n.url.trim_start_matches("http://").trim_end_matches("/mcp").parse().unwrap())
        .collect();
    let lb = common::haproxy::Haproxy::start(&addrs);
    let (a, b) = (&nodes[0], &nodes[1]);
    let created = task_call(
        &a.url,
        "tools/call",
        json!({"name": "task_events", "arguments": {"count": 200, "interval_ms": 10}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    let (mut seen, end) = task_stream(&b.url, json!({"taskId": id}), 25).await;
    assert!(end.is_none());
    let mut end = None;
    while end.is_none() {
        let after = *seen.last().expect("events");
        let (more, e) = task_stream(&lb.url(), json!({"taskId": id, "after": after}), 25).await;
        seen.extend(more);
        end = e;
    }
    assert_eq!(seen, (0..200).collect::<Vec<_>>(), "every seq once, in order");
    assert_eq!(ended(end), "ended", "the empty result: the task ended");
    let done = task_call(&nodes[2].url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    // The bound (64) kept 136..200.
    let (late, end) = task_stream(&nodes[2].url, json!({"taskId": id}), usize::MAX).await;
    assert_eq!((late, ended(end).as_str()), ((136..200).collect::<Vec<_>>(), "ended"));
    let (none, gone) = task_stream(&b.url, json!({"taskId": id, "after": 134}), usize::MAX).await;
    assert!(none.is_empty());
    let gone = gone.unwrap();
    assert_eq!(gone["error"]["code"], -32010, "{gone}");
    assert_eq!(gone["error"]["data"], json!({"reason": "events_gone", "taskId": id, "earliestSeq": 136}));
    let (rest, end) = task_stream(&lb.url(), json!({"taskId": id, "after": 135}), usize::MAX).await;
    assert_eq!((rest, ended(end).as_str()), ((136..200).collect::<Vec<_>>(), "ended"));
    let (none, end) = task_stream(&lb.url(), json!({"taskId": id, "after": 199}), usize::MAX).await;
    assert_eq!((none, ended(end).as_str()), (vec![], "ended"), "nothing after the last");
    let (_, ahead) = task_stream(&lb.url(), json!({"taskId": id, "after": 200}), usize::MAX).await;
    assert_eq!(ahead.unwrap()["error"]["code"], -32602, "a cursor past the last event");
}

/// Task event bounds that these tests' streams never reach (the default
/// keeps 1 024 events: on a loaded machine the failover test's task emits
/// more before the kill, and a late joiner then starts at the oldest kept).
const KEEP_ALL: &[&str] = &["--task-events-max", "1000000", "--task-events-max-bytes", "268435456"];

/// `kill -9` of the node running a task while another node streams its
/// events: the stream goes on to what the dead node's writes made safe,
/// then ends with the empty result within a few seconds (the lease), never
/// hangs; the task is `failed`; its events stay readable on any node.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_stream_of_a_killed_node_ends_and_its_events_stay() {
    let redis = RedisServer::start(&[]);
    let mut a = Node::start(&redis.url(), KEEP_ALL);
    let (b, c) = (Node::start(&redis.url(), KEEP_ALL), Node::start(&redis.url(), KEEP_ALL));
    let created = task_call(
        &a.url,
        "tools/call",
        json!({"name": "task_events", "arguments": {"count": 5000, "interval_ms": 5}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().expect("a task").to_owned();
    let (first, _) = task_stream(&b.url, json!({"taskId": id}), 20).await;
    assert_eq!(first, (0..20).collect::<Vec<_>>());
    let follower = {
        let (url, id) = (b.url.clone(), id.clone());
        tokio::spawn(async move { task_stream(&url, json!({"taskId": id, "after": 19}), usize::MAX).await })
    };
    tokio::time::sleep(Duration::from_millis(300)).await;
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    let killed = Instant::now();
    let (rest, end) = tokio::time::timeout(Duration::from_secs(15), follower)
        .await
        .expect("the stream ended, it did not hang")
        .unwrap();
    let took = killed.elapsed();
    assert_eq!(ended(end), "ended", "the stream ends normally");
    assert!(took < Duration::from_secs(8), "ended {took:?} after the kill");
    let last = *rest.last().expect("events after 19 before the kill");
    assert_eq!(rest, (20..=last).collect::<Vec<_>>(), "no hole");
    let status = task_call(&c.url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(
        (&status["result"]["status"], &status["result"]["error"]["code"]),
        (&json!("failed"), &json!(-31002))
    );
    // Its events stay: all of them again on c, then the end.
    let (all, end) = task_stream(&c.url, json!({"taskId": id}), usize::MAX).await;
    assert_eq!((all, ended(end).as_str()), ((0..=last).collect::<Vec<_>>(), "ended"));
}

/// What a `tasks/stream` reader is served is on a replica (`docs/SPEC.md`
/// §8.11): the replica's link is cut while the task's node goes on
/// emitting (the primary takes the events, no replica has them); the
/// follower on another node gets none of them. Then the task's node and
/// the primary die and the replica is promoted: the follower's stream ends
/// (the task failed, the stream sealed) with nothing after what it was
/// served missing from the store, so a resume at its cursor on a third
/// node is the end, not a cursor ahead of the stream, and a late joiner
/// gets the same events. Serving events a failover can lose fails this
/// test.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_stream_serves_only_what_a_failover_keeps() {
    let mut primary = RedisServer::start(&[]);
    let link = Switch::start(primary.port).await;
    let replica_of = link.port.to_string();
    let replica = RedisServer::start(&["--replicaof", "127.0.0.1", &replica_of]);
    let switch = Switch::start(primary.port).await;
    let mut a = Node::start(&switch.url(), KEEP_ALL);
    let (b, c) = (Node::start(&switch.url(), KEEP_ALL), Node::start(&switch.url(), KEEP_ALL));
    until_caught_up(primary.port, replica.port).await;
    let created = task_call(
        &a.url,
        "tools/call",
        json!({"name": "task_events", "arguments": {"count": 100000, "interval_ms": 5}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    // Across the failover: an error ends a stream, and the client resumes
    // at its cursor.
    let follower = tokio::spawn(follow(b.url.clone(), id.clone()));
    tokio::time::sleep(Duration::from_millis(500)).await;
    until_caught_up(primary.port, replica.port).await;
    // The replica lags from here on; the task's node goes on emitting.
    link.switch_to(free_port());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    a.child.kill().unwrap(); // SIGKILL
    a.child.wait().unwrap();
    primary.kill();
    gapless_redis::testing::command(replica.port, &["REPLICAOF", "NO", "ONE"]).await;
    switch.switch_to(replica.port);
    let (seen, end) =
        tokio::time::timeout(Duration::from_secs(30), follower).await.expect("the stream ended").unwrap();
    assert_eq!(ended(Some(end)), "ended");
    let last = *seen.last().expect("events before the cut");
    assert_eq!(seen, (0..=last).collect::<Vec<_>>(), "no hole, no duplicate");
    let status = task_call(&c.url, "tasks/get", json!({"taskId": id})).await;
    assert_eq!(status["result"]["status"], "failed", "{status}");
    let (none, end) = task_stream(&c.url, json!({"taskId": id, "after": last}), usize::MAX).await;
    assert_eq!((none, ended(end).as_str()), (vec![], "ended"), "the follower's cursor is in the store");
    // The stream was sealed once the node was found gone: a late joiner
    // gets exactly what the follower got.
    let (all, end) = task_stream(&c.url, json!({"taskId": id}), usize::MAX).await;
    assert_eq!((all, ended(end).as_str()), (seen, "ended"));
}

/// Redis's count of `cmd` calls since the last `CONFIG RESETSTAT`.
async fn calls(port: u16, cmd: &str) -> u64 {
    let v = gapless_redis::testing::command(port, &["INFO", "commandstats"]).await;
    let text = match v {
        redis::Value::BulkString(b) => String::from_utf8_lossy(&b).into_owned(),
        redis::Value::VerbatimString { text, .. } => text,
        _ => String::new(),
    };
    let line = format!("cmdstat_{cmd}:calls=");
    text.lines()
        .find_map(|l| l.strip_prefix(line.as_str()))
        .and_then(|rest| rest.split(',').next()?.parse().ok())
        .unwrap_or(0)
}

/// Listen streams share their reads of a watched task (§5.5): 40 streams
/// watching one running task cost Redis one read of it per wake-up (the
/// safety net's, once a second here), not one each, and each stream still
/// gets its change.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn listen_streams_share_their_reads_of_a_watched_task() {
    let redis = RedisServer::start(&[]);
    let node = Node::start(&redis.url(), &[]);
    let long =
        task_call(&node.url, "tools/call", json!({"name": "slow_compute", "arguments": {"seconds": 30}}))
            .await;
    let id = long["result"]["taskId"].as_str().expect("a task").to_owned();
    let mut streams = Vec::new();
    for _ in 0..40 {
        let r = task_request(&node.url, "subscriptions/listen", json!({"notifications": {"taskIds": [id]}}))
            .await;
        let mut sse = SseReader::new(r);
        for want in ["notifications/subscriptions/acknowledged", "notifications/tasks"] {
            let m = tokio::time::timeout(Duration::from_secs(5), sse.next()).await.unwrap().unwrap();
            assert_eq!(m.json().unwrap()["method"], want);
        }
        streams.push(sse);
    }
    gapless_redis::testing::command(redis.port, &["CONFIG", "RESETSTAT"]).await;
    tokio::time::sleep(Duration::from_secs(3)).await;
    let gets = calls(redis.port, "get").await;
    // Unshared: 40 streams × 1 nudge a second × 3 s = 120 reads. Shared:
    // one a nudge, and the work's own read (woken by the same nudge).
    assert!(gets <= 9, "{gets} GETs in 3 s for 40 streams watching one task");
    let ack = task_call(&node.url, "tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    for sse in &mut streams {
        let m = tokio::time::timeout(Duration::from_secs(3), sse.next()).await.unwrap().unwrap();
        let m = m.json().unwrap();
        assert_eq!(
            (&m["method"], &m["params"]["status"]),
            (&json!("notifications/tasks"), &json!("cancelled"))
        );
    }
    eprintln!("{gets} GETs in 3 s for 40 listen streams watching one task");
}
