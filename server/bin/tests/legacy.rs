//! The legacy HTTP+SSE transport (protocol 2024-11-05) on the same ring,
//! over loopback with a real HTTP client: a whole session, the seed 003
//! variants at the boundary between the two transports, and the hostile
//! cases.

mod common;
use common::*;
use gapless_server::{McpServer, ServerConfig};
use gapless_server_bin::demo::DemoHost;
use serde_json::{json, Value};

/// A legacy client: its SSE stream and the POST URL the endpoint event
/// named.
struct Legacy {
    sse: SseReader,
    post_url: String,
    sid: String,
}

async fn open(s: &TestServer, extra: &[(&str, &str)]) -> Legacy {
    let mut r = s.http.get(format!("{}/sse", s.url)).header("accept", "text/event-stream");
    for (k, v) in extra {
        r = r.header(*k, *v);
    }
    let r = r.send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(header(r.headers(), "content-type").unwrap(), "text/event-stream");
    let mut sse = SseReader::new(r);
    let ep = sse.next().await.unwrap();
    assert_eq!(ep.event.as_deref(), Some("endpoint"), "{ep:?}");
    assert!(ep.id.is_none(), "the endpoint event is not a ring event");
    let path = ep.data.clone();
    assert!(path.starts_with("/mcp/messages?sessionId="), "{path}");
    let sid = path.rsplit_once('=').unwrap().1.to_owned();
    assert_eq!(sid.len(), 32, "an ordinary 128-bit session id");
    Legacy { sse, post_url: format!("http://{}{path}", s.addr), sid }
}

async fn send(s: &TestServer, l: &Legacy, msg: Value) -> reqwest::Response {
    s.http
        .post(&l.post_url)
        .header("content-type", "application/json")
        .body(msg.to_string())
        .send()
        .await
        .unwrap()
}

/// The next `message` event: (its id, its JSON).
async fn message(l: &mut Legacy) -> (String, Value) {
    let e = l.sse.next().await.expect("the stream ended");
    assert_eq!(e.event.as_deref(), Some("message"), "{e:?}");
    (e.id.clone().expect("legacy events carry ids"), e.json().expect("JSON-RPC"))
}

async fn initialized(s: &TestServer, l: &mut Legacy) {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2024-11-05","capabilities":{},"clientInfo":{"name":"legacy","version":"1"}}});
    assert_eq!(send(s, l, init).await.status(), 202);
    let (_, v) = message(l).await;
    assert_eq!(v["result"]["protocolVersion"], "2024-11-05", "{v}");
    assert_eq!(send(s, l, json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await.status(), 202);
}

/// Calls emit_events (count `n`) and reads its notifications and result,
/// returning the ids of everything read.
async fn emit(s: &TestServer, l: &mut Legacy, id: u64, n: u64) -> Vec<(String, Option<u64>)> {
    let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":n}}});
    assert_eq!(send(s, l, call).await.status(), 202);
    let mut got = vec![];
    loop {
        let (eid, v) = message(l).await;
        let seq = v["params"]["data"]["seq"].as_u64();
        got.push((eid, seq));
        if v["id"] == json!(id) {
            assert_eq!(v["result"]["content"][0]["text"], format!("emitted {n}"));
            return got;
        }
    }
}

#[tokio::test]
async fn a_legacy_session_lists_tools_and_streams_a_tool_call() {
    let s = start(ServerConfig::default()).await;
    let mut l = open(&s, &[]).await;
    initialized(&s, &mut l).await;
    assert_eq!(send(&s, &l, json!({"jsonrpc":"2.0","id":1,"method":"tools/list"})).await.status(), 202);
    let (_, v) = message(&mut l).await;
    assert!(v["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "emit_events"), "{v}");
    let got = emit(&s, &mut l, 2, 5).await;
    assert_eq!(got.iter().filter_map(|g| g.1).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    // Every id is an event id of this session's namespace, on one stream.
    let session = s.server.hub().get_str(&l.sid, None).unwrap();
    for (eid, _) in &got {
        let id: gapless::EventId = eid.parse().unwrap();
        assert_eq!(id.ns, session.namespace());
        assert_eq!(id.stream, session.standalone().id(), "the legacy stream is the standalone stream");
    }
    // It is an ordinary session: Streamable HTTP requests work on it too.
    let r = s.post(Some(&l.sid), json!({"jsonrpc":"2.0","id":3,"method":"ping"})).await;
    assert_eq!(r.status(), 200);
}

/// Seed 003 at the legacy transport: an EventSource-style reconnect with the
/// session id and `Last-Event-ID` gets every later event, once.
#[tokio::test]
async fn seed_003_legacy_reconnect() {
    let s = start(ServerConfig::default()).await;
    let mut l = open(&s, &[]).await;
    initialized(&s, &mut l).await;
    let call = json!({"jsonrpc":"2.0","id":2,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":40,"interval_ms":5}}});
    assert_eq!(send(&s, &l, call).await.status(), 202);
    let mut last = String::new();
    let mut seen = vec![];
    while seen.len() < 10 {
        let (eid, v) = message(&mut l).await;
        if let Some(n) = v["params"]["data"]["seq"].as_u64() {
            seen.push(n);
            last = eid;
        }
    }
    let post_url = l.post_url.clone();
    drop(l); // the connection breaks
    let r = s
        .http
        .get(format!("{}/sse?sessionId={}", s.url, post_url.rsplit_once('=').unwrap().1))
        .header("accept", "text/event-stream")
        .header("last-event-id", &last)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    assert_eq!(sse.next().await.unwrap().event.as_deref(), Some("endpoint"));
    loop {
        let e = sse.next().await.unwrap();
        let v = e.json().unwrap();
        if let Some(n) = v["params"]["data"]["seq"].as_u64() {
            seen.push(n);
        }
        if v["id"] == json!(2) {
            break;
        }
    }
    assert_eq!(seen, (1..=40).collect::<Vec<_>>(), "every event once, in order");
    // Counted like the Streamable HTTP ones: the session the first GET
    // created, and the reconnect as a granted resume with its replay.
    let m = s.server.metrics_text();
    for line in [
        "gapless_sessions_created_total 1",
        r#"gapless_resumes_total{outcome="ok"} 1"#,
        r#"gapless_replayed_events_count{via="resume"} 1"#,
    ] {
        assert!(m.lines().any(|l| l == line), "{line} in:\n{m}");
    }
}

/// A legacy GET refused for lack of room is counted by reason, like an
/// initialize.
#[tokio::test]
async fn a_legacy_session_refused_for_lack_of_room_is_counted() {
    let config = ServerConfig {
        hub: gapless::HubConfig { max_sessions: 1, ..Default::default() },
        ..ServerConfig::default()
    };
    let s = start(config).await;
    let _l = open(&s, &[]).await;
    let r = s.http.get(format!("{}/sse", s.url)).header("accept", "text/event-stream").send().await.unwrap();
    expect_error(r, 503, "too_many_sessions").await;
    let m = s.server.metrics_text();
    for line in [
        "gapless_sessions_created_total 1",
        r#"gapless_sessions_refused_total{reason="too_many_sessions"} 1"#,
    ] {
        assert!(m.lines().any(|l| l == line), "{line} in:\n{m}");
    }
}

/// Seed 003, the move: a legacy session continued over Streamable HTTP with
/// both keys (`Mcp-Session-Id` = the legacy session id, `Last-Event-ID` =
/// its legacy cursor) resumes the same stream.
#[tokio::test]
async fn seed_003_legacy_to_streamable_with_both_keys() {
    let s = start(ServerConfig::default()).await;
    let mut l = open(&s, &[]).await;
    initialized(&s, &mut l).await;
    let got = emit(&s, &mut l, 2, 6).await;
    let cursor = got.iter().find(|g| g.1 == Some(2)).unwrap().0.clone();
    let sid = l.sid.clone();
    drop(l);
    let r = s.get(Some(&sid), Some(&cursor)).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let mut rest = vec![];
    while rest.len() < 5 {
        let e = sse.next().await.unwrap();
        assert!(e.event.is_none(), "Streamable framing on the Streamable endpoint");
        rest.push(e.id.unwrap());
    }
    let want: Vec<String> = got.iter().skip_while(|g| g.0 != cursor).skip(1).map(|g| g.0.clone()).collect();
    assert_eq!(rest, want, "the events after the legacy cursor, in order");
}

/// Seed 003, variant 2: a client that keeps its legacy habits and sends its
/// cursor without a session id is refused, on either transport, and no
/// session is created.
#[tokio::test]
async fn seed_003_legacy_cursor_without_session_id() {
    let s = start(ServerConfig::default()).await;
    let mut l = open(&s, &[]).await;
    initialized(&s, &mut l).await;
    let got = emit(&s, &mut l, 2, 2).await;
    let cursor = got[0].0.clone();
    let before = s.server.hub().len();
    let r = s
        .http
        .get(format!("{}/sse", s.url))
        .header("accept", "text/event-stream")
        .header("last-event-id", &cursor)
        .send()
        .await
        .unwrap();
    expect_error(r, 400, "resume_requires_session").await;
    expect_error(s.get(None, Some(&cursor)).await, 400, "resume_requires_session").await;
    assert_eq!(s.server.hub().len(), before, "no session created implicitly");
}

/// Seed 003: a legacy cursor presented as another stream's (its tag naming
/// a stream its event does not belong to) is a namespace mismatch.
#[tokio::test]
async fn seed_003_legacy_cursor_of_another_stream() {
    let s = start(ServerConfig::default()).await;
    let mut l = open(&s, &[]).await;
    initialized(&s, &mut l).await;
    // A Streamable request stream on the same session (stream 2).
    let r = s.call_tool(&l.sid, 5, "emit_events", json!({"count": 1})).await;
    let _ = r.text().await;
    let got = emit(&s, &mut l, 2, 2).await;
    let cursor = got[0].0.clone();
    let forged = cursor.replacen("_1-", "_2-", 1);
    assert_ne!(forged, cursor);
    let r = s
        .http
        .get(format!("{}/sse?sessionId={}", s.url, l.sid))
        .header("accept", "text/event-stream")
        .header("last-event-id", &forged)
        .send()
        .await
        .unwrap();
    expect_error(r, 409, "namespace_mismatch").await;
    expect_error(s.get(Some(&l.sid), Some(&forged)).await, 409, "namespace_mismatch").await;
}

#[tokio::test]
async fn hostile_legacy_requests() {
    let s = start(ServerConfig { max_body_bytes: 1024, ..ServerConfig::default() }).await;
    let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
    let post = |url: String, body: String| {
        let http = s.http.clone();
        async move { http.post(url).header("content-type", "application/json").body(body).send().await.unwrap() }
    };
    // A POST before any GET: its session does not exist.
    let r = post(format!("{}/messages?sessionId={}", s.url, "0".repeat(32)), ping.to_string()).await;
    expect_error(r, 404, "unknown_session").await;
    let r = post(format!("{}/messages", s.url), ping.to_string()).await;
    expect_error(r, 400, "missing_session").await;
    let r = s
        .http
        .get(format!("{}/sse?sessionId={}", s.url, "f".repeat(32)))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    expect_error(r, 404, "unknown_session").await;
    // Two GETs for one session: the second is busy.
    let l = open(&s, &[]).await;
    let r = s
        .http
        .get(format!("{}/sse?sessionId={}", s.url, l.sid))
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    expect_error(r, 409, "stream_busy").await;
    // A body over the limit.
    let r = post(l.post_url.clone(), format!("{{\"pad\":\"{}\"}}", "x".repeat(2000))).await;
    expect_error(r, 413, "payload_too_large").await;
    // Not JSON.
    let r = post(l.post_url.clone(), "{ nope".into()).await;
    expect_error(r, 400, "malformed_request").await;
    // The wrong method.
    let r = s.http.put(&l.post_url).send().await.unwrap();
    expect_error(r, 405, "method_not_allowed").await;
}

/// A legacy session is bound to the caller that opened it: another
/// caller's POST or reconnect sees no session.
#[tokio::test]
async fn legacy_sessions_are_bound_to_their_caller() {
    let server = McpServer::builder(DemoHost)
        .identity(|p| p.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build()
        .unwrap();
    let addr = serve(server.router()).await;
    let s = TestServer::at(addr, "/mcp", server);
    let l = open(&s, &[("authorization", "Bearer alice")]).await;
    let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
    let as_ = |who: &'static str| {
        let (http, url, body) = (s.http.clone(), l.post_url.clone(), ping.to_string());
        async move {
            http.post(url)
                .header("content-type", "application/json")
                .header("authorization", who)
                .body(body)
                .send()
                .await
                .unwrap()
        }
    };
    assert_eq!(as_("Bearer alice").await.status(), 202);
    expect_error(as_("Bearer mallory").await, 404, "unknown_session").await;
}
