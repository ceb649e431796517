//! gapless-gateway as a cluster (`docs/SPEC.md` §10.6): three
//! `gapless-gateway` processes on one Redis (`redis-server` children on
//! free ports), in front of the official TypeScript SDK's server with its
//! event store (`tests/upstreams/ts_upstream.mjs`), behind HAProxy with
//! `docs/haproxy.cfg` (round robin, no stickiness). Any node serves a
//! session's requests, and a node `kill -9`ed mid-stream loses nothing
//! silently: its pending call is answered `-31002` within the bound, and
//! another node takes the upstream's standalone stream over from the cursor
//! the store kept.

#[path = "../../bin/tests/common/mod.rs"]
mod common;
mod support;

use common::haproxy::Haproxy;
use common::SseReader;
use gapless_redis::testing::{free_port, RedisServer};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};
use support::{drain, Node};

/// A `gapless-gateway` process in cluster mode, killed on drop.
struct Gateway {
    child: Child,
    addr: SocketAddr,
}

impl Gateway {
    fn start(redis: &str, upstream: &str) -> Gateway {
        Gateway::with(redis, &["--upstream", upstream])
    }

    /// A node with `args` (its upstream).
    fn with(redis: &str, args: &[&str]) -> Gateway {
        let addr: SocketAddr = ([127, 0, 0, 1], free_port()).into();
        let child = Command::new(env!("CARGO_BIN_EXE_gapless-gateway"))
            .args(args)
            .args(["--bind", &addr.to_string(), "--redis-url", redis])
            // GATEWAY_LOG=debug shows what the nodes do.
            .env("RUST_LOG", std::env::var("GATEWAY_LOG").unwrap_or_else(|_| "warn".into()))
            // Its log (on stdout) beside the test's output.
            .stdout(Stdio::inherit())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the gapless-gateway binary");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(addr).is_err() {
            assert!(Instant::now() < deadline, "the gateway at {addr} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Gateway { child, addr }
    }

    fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    fn kill(&mut self) {
        self.child.kill().unwrap(); // SIGKILL
        self.child.wait().unwrap();
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client of one URL (a node, or HAProxy), a new connection per request.
struct Client {
    url: String,
    http: reqwest::Client,
}

impl Client {
    fn of(url: String) -> Client {
        Client { url, http: reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap() }
    }

    async fn post(&self, sid: Option<&str>, body: Value) -> reqwest::Response {
        let mut r = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", common::ACCEPT_BOTH)
            .header("mcp-protocol-version", "2025-06-18")
            .body(body.to_string());
        if let Some(s) = sid {
            r = r.header("mcp-session-id", s);
        }
        r.send().await.unwrap()
    }

    async fn get(&self, sid: &str, cursor: Option<&str>) -> reqwest::Response {
        let mut r = self
            .http
            .get(&self.url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", "2025-06-18")
            .header("mcp-session-id", sid);
        if let Some(c) = cursor {
            r = r.header("last-event-id", c);
        }
        r.send().await.unwrap()
    }

    async fn initialize(&self) -> String {
        let r = self
            .post(
                None,
                json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                    "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}),
            )
            .await;
        assert_eq!(r.status(), 200);
        let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let mut sse = SseReader::new(r);
        while sse.next().await.is_some() {}
        sid
    }

    async fn emit(&self, sid: &str, id: u64, args: Value) -> reqwest::Response {
        let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"emit_events","arguments":args}});
        self.post(Some(sid), call).await
    }
}

/// Every request of a session may go through any node: the session is
/// made on one node, notified on a second, called on each, its log level
/// set on a third (and held to there), and deleted on one, after which
/// every node answers 404.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn any_node_serves_a_sessions_requests() {
    let redis = RedisServer::start(&[]);
    let up = Node::start(0);
    let nodes: Vec<Gateway> = (0..3).map(|_| Gateway::start(&redis.url(), &up.url())).collect();
    let clients: Vec<Client> = nodes.iter().map(|n| Client::of(n.url())).collect();
    let sid = clients[0].initialize().await;
    let r = clients[1].post(Some(&sid), json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await;
    assert_eq!(r.status(), 202);
    for (i, c) in clients.iter().enumerate() {
        let r = c.emit(&sid, 10 + i as u64, json!({"count": 5, "interval_ms": 2})).await;
        assert_eq!(r.status(), 200, "node {i}");
        let (seqs, done, _) = drain(&mut SseReader::new(r), None).await;
        assert_eq!(seqs, vec![1, 2, 3, 4, 5], "node {i}");
        let done = done.unwrap_or_else(|| panic!("node {i}: no response"));
        assert_eq!(done["result"]["content"][0]["text"], json!("emitted 5"), "node {i}: {done}");
    }
    // A level set on node 2 passes upstream, and node 2 holds the
    // upstream's info messages back.
    let level = json!({"jsonrpc":"2.0","id":20,"method":"logging/setLevel","params":{"level":"warning"}});
    let r = clients[2].post(Some(&sid), level).await;
    assert_eq!(r.status(), 200);
    let r = clients[2].emit(&sid, 21, json!({"count": 3, "interval_ms": 2})).await;
    let (seqs, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!((seqs, done.is_some()), (vec![], true), "below the session's level");

    let r = clients[1].http.delete(&clients[1].url).header("mcp-session-id", &sid).send().await.unwrap();
    assert_eq!(r.status(), 204);
    for (i, c) in clients.iter().enumerate() {
        let r = c.emit(&sid, 30, json!({"count": 1})).await;
        assert_eq!(r.status(), 404, "node {i} after the DELETE");
    }
}

/// The node running a call is `kill -9`ed mid-stream: the client resumes
/// through HAProxy on another node and gets every event the dead node put
/// in the store after its cursor, once, in order, then the call's explicit
/// `-31002` within 5 s; the session goes on working through the others.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_node_answers_its_call_explicitly_and_the_session_goes_on() {
    let redis = RedisServer::start(&[]);
    let up = Node::start(0);
    let mut nodes: Vec<Gateway> = (0..3).map(|_| Gateway::start(&redis.url(), &up.url())).collect();
    let lb = Haproxy::start(&nodes.iter().map(|n| n.addr).collect::<Vec<_>>());
    let client = Client::of(lb.url());
    let sid = client.initialize().await;
    let before = lb.sessions();
    let r = client.emit(&sid, 7, json!({"count": 2000, "interval_ms": 5})).await;
    assert_eq!(r.status(), 200);
    let serving = busiest_since(&before, &lb.sessions());
    let mut sse = SseReader::new(r);
    let (mut got, done, ids) = drain(&mut sse, Some(20)).await;
    assert_eq!(done, None);
    let cursor = ids.iter().rev().flatten().next().expect("event ids").clone();
    nodes[serving].kill();
    let killed = Instant::now();
    drop(sse);

    let r = client.get(&sid, Some(&cursor)).await;
    assert_eq!(r.status(), 200, "resumed on a live node");
    let mut sse = SseReader::new(r);
    let (rest, done, _) = tokio::time::timeout(Duration::from_secs(25), drain(&mut sse, None))
        .await
        .expect("the resumed stream of the dead node's call ended");
    let took = killed.elapsed();
    got.extend(rest);
    let n = got.len() as u64;
    assert!(n < 2000, "the node was killed mid-call");
    assert_eq!(got, (1..=n).collect::<Vec<_>>(), "what the dead node stored, once, in order");
    let done = done.expect("an answer for the dead node's call");
    assert_eq!((&done["id"], &done["error"]["code"]), (&json!(7), &json!(-31002)), "{done}");
    assert!(took < Duration::from_secs(5), "answered after {took:?}");

    // The session lives on: a call through the balancer (on a live node).
    let r = client.emit(&sid, 8, json!({"count": 3, "interval_ms": 2})).await;
    assert_eq!(r.status(), 200);
    let (seqs, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(
        (seqs, done.unwrap()["result"]["content"][0]["text"].clone()),
        (vec![1, 2, 3], json!("emitted 3"))
    );
}

/// The node that reads the upstream's standalone stream (the one that
/// made the session) is `kill -9`ed while the upstream sends on it:
/// another node takes the stream over from the cursor the store kept, and
/// the client, resuming through HAProxy, gets every event: none lost,
/// in order, at most the few the dead node stored after its last recorded
/// cursor twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_holder_hands_the_standalone_stream_over_and_nothing_is_lost() {
    let redis = RedisServer::start(&[]);
    // An upstream whose standalone stream resumes (the SDK's example store
    // answers every standalone resume with an empty stream: events it lost
    // before the gateway saw them, which no gateway can bring back).
    let up = Node::with(0, &["--replaying-store"]);
    let mut nodes: Vec<Gateway> = (0..3).map(|_| Gateway::start(&redis.url(), &up.url())).collect();
    let lb = Haproxy::start(&nodes.iter().map(|n| n.addr).collect::<Vec<_>>());
    let client = Client::of(lb.url());
    let before = lb.sessions();
    let sid = client.initialize().await;
    let holder = busiest_since(&before, &lb.sessions());
    let mut standalone = SseReader::new(client.get(&sid, None).await);
    // The call goes to a node that lives: HAProxy's next in turn may be
    // the holder, so it is sent to another node directly.
    let caller = Client::of(nodes[(holder + 1) % 3].url());
    let total = 600;
    let r = caller.emit(&sid, 9, json!({"count": total, "interval_ms": 10, "target": "standalone"})).await;
    assert_eq!(r.status(), 200);
    let call = tokio::spawn(async move { drain(&mut SseReader::new(r), None).await });

    let (mut seen, _, ids) = drain(&mut standalone, Some(50)).await;
    let mut cursor = ids.iter().rev().flatten().next().cloned();
    nodes[holder].kill();
    // The client's standalone stream, wherever it was, is read event by
    // event and resumed through the balancer whenever it ends or is quiet
    // for 3 s, until every event came or the deadline passed.
    let deadline = Instant::now() + Duration::from_secs(40);
    while seen.last() != Some(&(total as u64)) {
        assert!(Instant::now() < deadline, "stalled at {:?}", seen.last());
        match tokio::time::timeout(Duration::from_secs(3), standalone.next()).await {
            Ok(Some(e)) => {
                cursor = e.id.clone().or(cursor);
                seen.extend(e.emit_seq());
            }
            Ok(None) | Err(_) => {
                let r = client.get(&sid, cursor.as_deref()).await;
                assert_eq!(r.status(), 200, "the standalone stream resumed on a live node");
                standalone = SseReader::new(r);
            }
        }
    }
    // Every event, in order; a repeat only as a step back to an event the
    // stream had already brought (the takeover's replay from the cursor).
    let mut next = 1;
    let mut repeated = 0;
    for &s in &seen {
        if s == next {
            next += 1;
        } else {
            assert!(s < next, "event {next} is missing: {s} came instead");
            repeated += 1;
        }
    }
    assert_eq!(next, total as u64 + 1, "every event came");
    eprintln!("{total} standalone events across the takeover, {repeated} of them twice");
    assert!(repeated < 100, "{repeated} repeats: more than the events between two recorded cursors");
    let (_, done, _) = call.await.unwrap();
    assert_eq!(done.unwrap()["result"]["content"][0]["text"], json!(format!("emitted {total}")));
}

/// A stdio upstream in a cluster: the child runs on the node that made the
/// session. That node `kill -9`ed mid-call: the call is answered `-31002`
/// within 5 s on another node, and the session ends there with `404`
/// within the hold's bound (the client initializes anew).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_sessions_node_killed_ends_the_session_explicitly() {
    let redis = RedisServer::start(&[]);
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstreams");
    let cmd = format!("cd {} && exec node ts_upstream.mjs --stdio", dir.display());
    let mut nodes: Vec<Gateway> =
        (0..2).map(|_| Gateway::with(&redis.url(), &["--upstream-cmd", &cmd])).collect();
    let (a, b) = (Client::of(nodes[0].url()), Client::of(nodes[1].url()));
    let sid = a.initialize().await;
    // On another node the session is served, but its child is not there.
    let r = b.emit(&sid, 1, json!({"count": 1})).await;
    let (_, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(done.expect("an answer")["error"]["code"], json!(-31002));

    let r = a.emit(&sid, 2, json!({"count": 2000, "interval_ms": 5})).await;
    let mut sse = SseReader::new(r);
    let (got, _, ids) = drain(&mut sse, Some(10)).await;
    assert_eq!(got, (1..=10).collect::<Vec<_>>());
    let cursor = ids.iter().rev().flatten().next().expect("event ids").clone();
    nodes[0].kill();
    let killed = Instant::now();
    drop(sse);
    let r = b.get(&sid, Some(&cursor)).await;
    assert_eq!(r.status(), 200);
    let (_, done, _) = tokio::time::timeout(Duration::from_secs(25), drain(&mut SseReader::new(r), None))
        .await
        .expect("the dead node's call was answered");
    let done = done.expect("an answer for the dead node's call");
    assert_eq!((&done["id"], &done["error"]["code"]), (&json!(2), &json!(-31002)), "{done}");
    assert!(killed.elapsed() < Duration::from_secs(5), "answered after {:?}", killed.elapsed());
    // Hold 5 s + one retry 2 s, and the end's grace.
    let deadline = killed + Duration::from_secs(12);
    loop {
        let r = b.emit(&sid, 3, json!({"count": 1})).await;
        if r.status() == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "the session lives on without its child: {}", r.status());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let again = b.initialize().await;
    let r = b.emit(&again, 4, json!({"count": 2})).await;
    let (seqs, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(
        (seqs, done.unwrap()["result"]["content"][0]["text"].clone()),
        (vec![1, 2], json!("emitted 2"))
    );
}

/// The backend server (0-based) whose connection count grew the most
/// between two HAProxy snapshots: the one that took the last request.
fn busiest_since(before: &[(String, u64, String)], after: &[(String, u64, String)]) -> usize {
    let grown = |i: usize| after[i].1 - before.iter().find(|b| b.0 == after[i].0).map_or(0, |b| b.1);
    let i = (0..after.len()).max_by_key(|&i| grown(i)).expect("servers");
    assert!(grown(i) > 0, "no server took a connection: {before:?} {after:?}");
    after[i].0.trim_start_matches("node").parse::<usize>().unwrap() - 1
}
