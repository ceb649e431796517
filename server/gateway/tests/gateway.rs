//! gapless-gateway in front of a real upstream: the official TypeScript
//! SDK 1.32.2's Streamable HTTP server (`tests/upstreams/ts_upstream.mjs`,
//! installed by `scripts/setup.sh`), started on a free loopback port, with
//! the gateway in process on gapless-server's router. Clients speak plain
//! HTTP to the gateway, as any MCP client does.

#[path = "../../bin/tests/common/mod.rs"]
mod common;
mod support;

use common::{SseReader, TestServer};
use gapless::RingConfig;
use gapless_gateway::{bearer_identity, metadata_router, upstream::Upstream, GatewayHost};
use gapless_server::{McpServer, ServerConfig};
use serde_json::{json, Value};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};
use support::{drain, Node};

/// A TCP proxy between the gateway and its upstream whose live connections
/// the test cuts: the upstream lives on, its streams to the gateway break.
struct Cutter {
    port: u16,
    live: std::sync::Arc<std::sync::Mutex<Vec<tokio_util::sync::CancellationToken>>>,
}

impl Cutter {
    async fn start(to: u16) -> Cutter {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let live: std::sync::Arc<std::sync::Mutex<Vec<tokio_util::sync::CancellationToken>>> =
            Default::default();
        let l2 = live.clone();
        tokio::spawn(async move {
            while let Ok((mut down, _)) = listener.accept().await {
                let Ok(mut up) = tokio::net::TcpStream::connect(("127.0.0.1", to)).await else { continue };
                let cut = tokio_util::sync::CancellationToken::new();
                l2.lock().unwrap().push(cut.clone());
                tokio::spawn(async move {
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut down, &mut up) => {}
                        _ = cut.cancelled() => {}
                    }
                });
            }
        });
        Cutter { port, live }
    }

    fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    /// Breaks every connection open now; returns how many.
    fn cut_all(&self) -> usize {
        let cut: Vec<_> = std::mem::take(&mut *self.live.lock().unwrap());
        cut.iter().for_each(|c| c.cancel());
        cut.len()
    }
}

/// The gateway to `upstream`, in process on a free loopback port.
async fn gateway(upstream: &str, config: ServerConfig) -> TestServer {
    let host = GatewayHost::new(Upstream::new(upstream).unwrap());
    let server = McpServer::builder(host).config(config).build().unwrap();
    let addr = common::serve(server.router()).await;
    TestServer::at(addr, "/mcp", server)
}

fn emit(count: u64, interval_ms: u64) -> Value {
    json!({"count": count, "interval_ms": interval_ms})
}

/// `initialize` and a streaming call pass through; the client's session id
/// is the gateway's own (not the upstream's UUID); the events carry
/// gapless's ids; a cut stream resumed at the gateway brings every later
/// event once, in order, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_streams_through_and_resumes_at_the_gateway() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    assert_eq!(sid.len(), 32, "a gapless session id, not the upstream's UUID: {sid}");
    assert!(!sid.contains('-'), "{sid}");

    let r = g.call_tool(&sid, 7, "emit_events", emit(40, 3)).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let (first, done, ids) = drain(&mut sse, Some(10)).await;
    assert_eq!(done, None);
    assert_eq!(first, (1..=10).collect::<Vec<_>>());
    let cursor = ids.iter().rev().flatten().next().expect("gapless event ids").clone();
    assert!(cursor.parse::<gapless::EventId>().is_ok(), "{cursor} is not a gapless event id");
    drop(sse);

    tokio::time::sleep(Duration::from_millis(50)).await;
    let r = g.get(Some(&sid), Some(&cursor)).await;
    assert_eq!(r.status(), 200);
    let (rest, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(rest, (11..=40).collect::<Vec<_>>(), "every later event once, in order");
    let done = done.expect("the response");
    assert_eq!((&done["id"], &done["result"]["content"][0]["text"]), (&json!(7), &json!("emitted 40")));
}

/// A cursor whose later events the gateway's ring no longer holds is
/// refused with 409 and the numbers, never answered with a silent gap.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_evicted_cursor_is_refused() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default().with_ring(RingConfig::new(16, 1 << 20))).await;
    let sid = g.initialize().await;
    let r = g.call_tool(&sid, 2, "emit_events", emit(60, 0)).await;
    let mut sse = SseReader::new(r);
    let (_, _, ids) = drain(&mut sse, Some(1)).await;
    let cursor = ids.iter().rev().flatten().next().unwrap().clone();
    drop(sse);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let body = common::expect_error(g.get(Some(&sid), Some(&cursor)).await, 409, "gap_not_covered").await;
    assert!(body["missing"].as_u64().unwrap() > 0, "{body}");
}

/// The upstream killed mid-call: the call is answered with the explicit
/// `request_lost` (-31002) within the 5 s bound, not left silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_killed_upstream_fails_the_pending_call_explicitly() {
    let mut up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let r = g.call_tool(&sid, 3, "emit_events", emit(2000, 5)).await;
    let mut sse = SseReader::new(r);
    let (seen, _, _) = drain(&mut sse, Some(5)).await;
    assert_eq!(seen.len(), 5);
    up.kill();
    let killed = Instant::now();
    let (_, done, _) = drain(&mut sse, None).await;
    let done = done.expect("an explicit answer");
    assert_eq!(done["error"]["code"], -31002, "{done}");
    assert!(killed.elapsed() < Duration::from_secs(5), "{:?}", killed.elapsed());
}

/// The upstream restarted (its sessions gone): the next call gets the
/// explicit error (or 404 at once), and the session ends with 404 so the client
/// re-initializes; a new session works.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_restarted_upstream_ends_the_session_with_404() {
    let mut up = Node::start(0);
    let port = up.port;
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    up.kill();
    let _up = Node::start(port);
    // The gateway may have found the upstream's session gone already
    // (its standalone stream reopens within a second): then this call is
    // 404 at once; else it is answered with the explicit error.
    let r = g.call_tool(&sid, 4, "emit_events", emit(3, 0)).await;
    if r.status() != 404 {
        let mut sse = SseReader::new(r);
        let (_, done, _) = drain(&mut sse, None).await;
        assert_eq!(done.expect("an answer")["error"]["code"], -31002);
        let (_, again, _) = drain(&mut sse, None).await;
        assert_eq!(again, None, "one response per request");
    }
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let r = g.call_tool(&sid, 5, "emit_events", emit(1, 0)).await;
        if r.status() == 404 {
            break;
        }
        assert!(Instant::now() < deadline, "still {} for an ended session", r.status());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = g.initialize().await;
    let r = g.call_tool(&again, 6, "emit_events", emit(3, 0)).await;
    let (seqs, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(
        (seqs, done.unwrap()["result"]["content"][0]["text"].clone()),
        (vec![1, 2, 3], json!("emitted 3"))
    );
}

/// `DELETE` at the gateway ends the upstream's session too: the upstream's
/// standalone stream the gateway held ends, and the session is 404 here.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn standalone_events_reach_the_standalone_stream_and_delete_ends_both() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let get = g.get(Some(&sid), None).await;
    assert_eq!(get.status(), 200);
    let mut standalone = SseReader::new(get);
    // The gateway opens the upstream's standalone stream itself; give it
    // a moment, then have the tool publish there.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let r = g
        .call_tool(&sid, 8, "emit_events", json!({"count": 5, "interval_ms": 2, "target": "standalone"}))
        .await;
    let (_, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(done.unwrap()["result"]["content"][0]["text"], "emitted 5");
    let (seqs, _, _) = drain(&mut standalone, Some(5)).await;
    assert_eq!(seqs, vec![1, 2, 3, 4, 5]);
    let r = g.http.delete(&g.url).header("mcp-session-id", &sid).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    assert_eq!(g.call_tool(&sid, 9, "emit_events", emit(1, 0)).await.status(), 404);
}

/// The gateway's own upstream connection breaks mid-call (the upstream
/// lives): it resumes the upstream's stream with the upstream's
/// `Last-Event-ID`, and the client, which saw no break, reads every event
/// once, in order, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_broken_upstream_stream_is_resumed_with_the_upstreams_cursor() {
    let up = Node::start(0);
    let cutter = Cutter::start(up.port).await;
    let g = gateway(&cutter.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let r = g.call_tool(&sid, 2, "emit_events", emit(60, 5)).await;
    let mut sse = SseReader::new(r);
    let (first, _, _) = drain(&mut sse, Some(20)).await;
    assert!(cutter.cut_all() > 0);
    let (rest, done, _) = drain(&mut sse, None).await;
    let all: Vec<u64> = first.into_iter().chain(rest).collect();
    assert_eq!(
        all,
        (1..=60).collect::<Vec<_>>(),
        "every event once, in order, across the upstream's break: {done:?}"
    );
    assert_eq!(done.expect("the result")["result"]["content"][0]["text"], "emitted 60");
}

/// A call of `count` events, 5 ms apart, on an upstream started with
/// `flags` behind a cutting proxy; the gateway's upstream connection cut
/// after 5 events; the call's answer and how long after the cut it came.
async fn answer_after_a_cut(flags: &[&str], count: u64) -> (Value, Duration) {
    let up = Node::with(0, flags);
    let cutter = Cutter::start(up.port).await;
    let g = gateway(&cutter.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let mut sse = SseReader::new(g.call_tool(&sid, 2, "emit_events", emit(count, 5)).await);
    drain(&mut sse, Some(5)).await;
    cutter.cut_all();
    let at = Instant::now();
    let (_, done, _) = drain(&mut sse, None).await;
    (done.expect("an explicit answer"), at.elapsed())
}

/// An upstream that gives no event ids: a break of its stream cannot be
/// resumed, and the pending call is answered -31002 at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_break_of_an_upstream_without_ids_fails_the_call_at_once() {
    let (done, after) = answer_after_a_cut(&[], 400).await;
    assert_eq!(done["error"]["code"], -31002, "{done}");
    assert!(done["error"]["message"].as_str().unwrap().contains("no event ids"), "{done}");
    assert!(after < Duration::from_secs(2), "{after:?}");
}

/// An upstream whose store kept nothing answers the resume with an empty
/// `200` (its stream stays open and silent) while the call is pending: the
/// call is answered -31002 within the 5 s bound, never left silent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_empty_resume_while_a_call_is_pending_is_an_explicit_error() {
    let (done, after) = answer_after_a_cut(&["--forget-events"], 2000).await;
    assert_eq!(done["error"]["code"], -31002, "{done}");
    assert!(done["error"]["message"].as_str().unwrap().contains("brought nothing"), "{done}");
    assert!(after < Duration::from_secs(5), "{after:?}");
}

/// A client migrates its session to a WebSocket mid-call (seed 000): the
/// socket's first frame is the one after its cursor, and every event of
/// the upstream's call reaches it once, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_websocket_migration_mid_call_loses_nothing() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let r = g.call_tool(&sid, 2, "emit_events", emit(200, 3)).await;
    let mut sse = SseReader::new(r);
    let (mut seen, _, ids) = drain(&mut sse, Some(30)).await;
    drop(sse);
    let cursor = ids.iter().rev().flatten().next().unwrap().clone();
    let cseq: u64 = cursor.rsplit_once('-').unwrap().1.parse().unwrap();
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = common::upgrade(&g, &sid, &json!({"cursor": cursor}).to_string()).await;
    assert_eq!(r.status(), 200);
    let ticket: Value = r.json().await.unwrap();
    let mut ws = common::connect(&g, ticket["websocket"].as_str().unwrap()).await;
    let mut expect = cseq + 1;
    loop {
        let (seq, _, msg) = common::frame(&mut ws).await.expect("the socket ended early");
        assert_eq!(seq, expect, "the first frame is the cursor's next, and seqs rise by one");
        expect += 1;
        if let Some(n) = msg["params"]["data"]["seq"].as_u64() {
            seen.push(n);
        }
        if msg["result"]["content"][0]["text"] == "emitted 200" {
            break;
        }
    }
    assert_eq!(seen, (1..=200).collect::<Vec<_>>(), "every event once across SSE and the socket");
}

/// A request without params (`tools/list` as the Python SDK sends it) is
/// forwarded without them: `"params": null` is not a valid MCP request.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_without_params_is_forwarded_without_them() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let r = g.post(Some(&sid), json!({"jsonrpc": "2.0", "id": 4, "method": "tools/list"})).await;
    let (_, done, _) = drain(&mut SseReader::new(r), None).await;
    let done = done.expect("the response");
    assert_eq!(done["result"]["tools"][0]["name"], "emit_events", "{done}");
}

/// The gateway as its binary builds it: sessions bound to the bearer that
/// opened them, and the upstream's metadata served through it.
async fn authorizing_gateway(upstream: &str) -> TestServer {
    let u = Upstream::new(upstream).unwrap();
    let server = McpServer::builder(GatewayHost::new(u.clone()).path("/mcp"))
        .identity(bearer_identity)
        .build()
        .unwrap();
    let addr = common::serve(server.router().merge(metadata_router(u, "/mcp"))).await;
    TestServer::at(addr, "/mcp", server)
}

async fn initialize_with(g: &TestServer, token: Option<&str>) -> reqwest::Response {
    let auth = token.map(|t| format!("Bearer {t}"));
    let headers: Vec<(&str, &str)> = auth.iter().map(|a| ("authorization", a.as_str())).collect();
    let body = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}});
    g.post_with(None, body, &headers).await
}

/// An upstream that is an OAuth resource server works through the gateway
/// unchanged: without a token the client gets the upstream's 401, its
/// `WWW-Authenticate` naming the gateway's metadata, which the gateway
/// serves with its own endpoint as the resource; with the token it works;
/// another token cannot resume the session; and a token the upstream stops
/// accepting gets -31004 with the status, not a silent stream.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_oauth_upstream_works_through_the_gateway_and_binds_sessions_to_tokens() {
    let mut up = Node::with(0, &["--event-store", "--token", "good"]);
    let port = up.port;
    let g = authorizing_gateway(&up.url()).await;
    let r = initialize_with(&g, None).await;
    assert_eq!(r.status(), 401);
    let www = r.headers()["www-authenticate"].to_str().unwrap().to_owned();
    let own = format!("http://{}/.well-known/oauth-protected-resource/mcp", g.addr);
    assert_eq!(
        www,
        format!("Bearer resource_metadata=\"{own}\""),
        "the gateway's metadata, not the upstream's"
    );
    assert!(r.headers().get("mcp-session-id").is_none());
    let doc: Value = g.http.get(&own).send().await.unwrap().json().await.unwrap();
    assert_eq!(doc["resource"], format!("http://{}/mcp", g.addr), "{doc}");
    assert_eq!(doc["authorization_servers"][0], "https://auth.example.test");

    let r = initialize_with(&g, Some("good")).await;
    assert_eq!(r.status(), 200);
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    drain(&mut SseReader::new(r), None).await;
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"emit_events","arguments":emit(10, 0)}});
    let r = g.post_with(Some(&sid), call.clone(), &[("authorization", "Bearer good")]).await;
    let (seqs, done, ids) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(
        (seqs.len(), done.unwrap()["result"]["content"][0]["text"].clone()),
        (10, json!("emitted 10"))
    );
    let cursor = ids.iter().flatten().nth(2).unwrap().clone();
    let resume = |token: &'static str| {
        let (g, sid, cursor) = (&g, sid.clone(), cursor.clone());
        async move {
            g.http
                .get(&g.url)
                .header("accept", "text/event-stream")
                .header("mcp-session-id", sid)
                .header("last-event-id", cursor)
                .header("authorization", format!("Bearer {token}"))
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(resume("stolen").await.status(), 404, "another token cannot resume the session");
    assert_eq!(resume("good").await.status(), 200);

    // The upstream restarts accepting another token only.
    up.kill();
    let _up = Node::with(port, &["--event-store", "--token", "rotated"]);
    let r = g.post_with(Some(&sid), call, &[("authorization", "Bearer good")]).await;
    let (_, done, _) = drain(&mut SseReader::new(r), None).await;
    let done = done.expect("an explicit answer");
    assert_eq!(
        (&done["error"]["code"], &done["error"]["data"]["status"]),
        (&json!(-31004), &json!(401)),
        "{done}"
    );
    assert_eq!(done["error"]["data"]["wwwAuthenticate"], format!("Bearer resource_metadata=\"{own}\""));
}

/// An `https://` upstream with a self-signed certificate on loopback: with
/// the certificate as `--upstream-ca` the gateway works through it; without
/// it the client's `initialize` gets the explicit error naming the
/// certificate, and no session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_is_verified_against_the_given_ca() {
    let dir = std::env::temp_dir().join(format!("gapless-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    let made = Command::new("openssl")
        .args(["req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", "/CN=localhost"])
        .args([
            "-addext",
            "subjectAltName=IP:127.0.0.1,DNS:localhost",
            "-addext",
            "extendedKeyUsage=serverAuth",
        ])
        // A server's own certificate, not a CA's (webpki refuses a CA's as
        // the end entity).
        .args(["-addext", "basicConstraints=critical,CA:FALSE", "-keyout"])
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .stderr(Stdio::null())
        .status()
        .expect("openssl (scripts/setup.sh installs it)");
    assert!(made.success());
    let (c, k) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let up = Node::with(0, &["--event-store", "--tls", c, k]);
    let url = format!("https://127.0.0.1:{}/mcp", up.port);

    let pem = std::fs::read(&cert).unwrap();
    let host = GatewayHost::new(Upstream::with_ca(&url, Some(&pem)).unwrap());
    let server = McpServer::builder(host).build().unwrap();
    let g = TestServer::at(common::serve(server.router()).await, "/mcp", server);
    let sid = g.initialize().await;
    let (seqs, done, _) =
        drain(&mut SseReader::new(g.call_tool(&sid, 2, "emit_events", emit(5, 0)).await), None).await;
    assert_eq!(
        (seqs, done.unwrap()["result"]["content"][0]["text"].clone()),
        (vec![1, 2, 3, 4, 5], json!("emitted 5"))
    );

    let untrusted = gateway(&url, ServerConfig::default()).await;
    let r = untrusted
        .post(
            None,
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        )
        .await;
    assert!(r.headers().get("mcp-session-id").is_none());
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"]["code"], -31002, "{body}");
    let m = body["error"]["message"].as_str().unwrap().to_ascii_lowercase();
    assert!(m.contains("certificate"), "{m}");
}

/// `logging/setLevel` and `ping` are answered by the upstream, and the
/// gateway holds the upstream's log messages to the level set even though
/// this upstream does not filter the ones it sends raw: after `error`, the
/// tool's `info` messages no longer come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_log_level_holds_the_upstreams_log_messages() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let r = g
        .post(
            Some(&sid),
            json!({"jsonrpc":"2.0","id":1,"method":"logging/setLevel","params":{"level":"error"}}),
        )
        .await;
    let (_, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(done.unwrap()["result"], json!({}));
    let r = g.post(Some(&sid), json!({"jsonrpc":"2.0","id":2,"method":"ping"})).await;
    let (_, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(done.unwrap()["result"], json!({}));
    let (seqs, done, _) =
        drain(&mut SseReader::new(g.call_tool(&sid, 3, "emit_events", emit(5, 0)).await), None).await;
    assert_eq!(done.unwrap()["result"]["content"][0]["text"], "emitted 5");
    assert!(seqs.is_empty(), "info messages after setLevel error: {seqs:?}");
}

/// An upstream without sessions (the TypeScript SDK's stateless mode: no
/// session id, no standalone stream): the gateway's session keeps working
/// for call after call.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_upstream_without_sessions_serves_every_call() {
    let up = Node::with(0, &["--stateless"]);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    for id in 2..5 {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let (seqs, done, _) =
            drain(&mut SseReader::new(g.call_tool(&sid, id, "emit_events", emit(3, 0)).await), None).await;
        assert_eq!(seqs, vec![1, 2, 3]);
        assert_eq!(done.unwrap()["result"]["content"][0]["text"], "emitted 3", "call {id}");
    }
}

/// A client's `notifications/cancelled` reaches the upstream, whose tool
/// stops: its standalone events stop coming soon after.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancellation_reaches_the_upstream() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default()).await;
    let sid = g.initialize().await;
    let mut standalone = SseReader::new(g.get(Some(&sid), None).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let args = json!({"count": 3000, "interval_ms": 2, "target": "standalone"});
    let call = tokio::spawn({
        let (url, sid) = (g.url.clone(), sid.clone());
        async move {
            let body = json!({"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"emit_events","arguments":args}});
            let c = reqwest::Client::new();
            c.post(url)
                .header("content-type", "application/json")
                .header("accept", common::ACCEPT_BOTH)
                .header("mcp-session-id", sid)
                .body(body.to_string())
                .send()
                .await
                .unwrap()
        }
    });
    let (seen, _, _) = drain(&mut standalone, Some(20)).await;
    assert_eq!(seen.len(), 20);
    let r = g
        .post(
            Some(&sid),
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":9}}),
        )
        .await;
    assert_eq!(r.status(), 202);
    // What was in flight still comes; then nothing more.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut after = 0;
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(700), standalone.next()).await {
        after += e.emit_seq().is_some() as usize;
    }
    assert!(after < 100, "{after} events after the cancellation: the tool ran on");
    drop(call);
}

/// `@modelcontextprotocol/server-everything` (pinned in
/// `tests/upstreams/package.json`) as it is, in its Streamable HTTP mode
/// (`PORT`; it listens on every interface, and the gateway reaches it on
/// loopback): its long-running tool's progress, cut at the client and
/// resumed at the gateway, brings every later notification once, in
/// order, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_over_http_resumes_through_a_cut() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstreams");
    let port = gapless_redis::testing::free_port();
    // Killed when dropped, as the other upstreams are.
    let child = Command::new("node")
        .args(["node_modules/@modelcontextprotocol/server-everything/dist/index.js", "streamableHttp"])
        .env("PORT", port.to_string())
        .current_dir(&dir)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("node");
    let _up = Node { child, port };
    let deadline = Instant::now() + Duration::from_secs(20);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(Instant::now() < deadline, "server-everything did not listen on {port}");
        std::thread::sleep(Duration::from_millis(50));
    }
    let g = gateway(&format!("http://127.0.0.1:{port}/mcp"), ServerConfig::default()).await;
    support::server_everything_progress_through_a_cut(&g).await;
}

/// An upstream standalone event larger than the session's byte budget can
/// never be held: it is dropped (with an error in the log), and the
/// standalone events after it still come.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standalone_event_too_large_to_hold_does_not_stop_the_stream() {
    let up = Node::start(0);
    let g = gateway(&up.url(), ServerConfig::default().with_ring(RingConfig::new(64, 16 << 10))).await;
    let sid = g.initialize().await;
    let mut standalone = SseReader::new(g.get(Some(&sid), None).await);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let big = json!({"count": 1, "payload_bytes": 64 << 10, "target": "standalone"});
    let (_, done, _) = drain(&mut SseReader::new(g.call_tool(&sid, 1, "emit_events", big).await), None).await;
    assert_eq!(done.unwrap()["result"]["content"][0]["text"], "emitted 1");
    let small = json!({"count": 3, "interval_ms": 2, "target": "standalone"});
    let (_, done, _) =
        drain(&mut SseReader::new(g.call_tool(&sid, 2, "emit_events", small).await), None).await;
    assert_eq!(done.unwrap()["result"]["content"][0]["text"], "emitted 3");
    let (seqs, _, _) = drain(&mut standalone, Some(3)).await;
    assert_eq!(seqs, vec![1, 2, 3], "the small events after the one too large");
}
