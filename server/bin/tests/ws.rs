//! WebSocket migration end to end over loopback (seed 000), with a real
//! WebSocket client.

mod common;
use common::*;
use futures_util::{SinkExt, StreamExt};
use gapless::RingConfig;
use gapless_server::ServerConfig;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::time::Duration;
use tokio_tungstenite::tungstenite::protocol::frame::coding::CloseCode;
use tokio_tungstenite::tungstenite::Message;

fn emit_seq(m: &Value) -> Option<u64> {
    m.get("params")?.get("data")?.get("seq")?.as_u64()
}

/// Reads a tool's SSE stream until `stop` notifications were processed;
/// returns the processed ids (with seqs) and drops the connection.
async fn read_some(s: &TestServer, sid: &str, args: Value, stop: usize) -> Vec<(u64, String, Option<u64>)> {
    let r = s.call_tool(sid, 1, "emit_events", args).await;
    let mut sse = SseReader::new(r);
    let mut got = vec![];
    while let Some(e) = sse.next().await {
        let id = e.id.clone().unwrap();
        let seq: u64 = id.rsplit_once('-').unwrap().1.parse().unwrap();
        got.push((seq, id, e.emit_seq()));
        if got.iter().filter(|g| g.2.is_some()).count() >= stop {
            break;
        }
    }
    got
}

/// The contiguous processed prefix of what a client saw on its streams.
fn prefix_cursor(processed: &[(u64, String, Option<u64>)]) -> String {
    // In these tests the client reads one stream and everything before it
    // belongs to streams it fully read, so its last id is the prefix.
    processed.last().unwrap().1.clone()
}

#[tokio::test]
async fn seed_000_variant_1_gap_emitted_mid_reconnect_arrives_first() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let processed = read_some(&s, &sid, json!({"count": 400, "interval_ms": 1}), 50).await;
    // Events keep being emitted while the client is between its SSE break
    // and its upgrade.
    tokio::time::sleep(Duration::from_millis(100)).await;
    let cursor = prefix_cursor(&processed);
    let (cseq, _) = (processed.last().unwrap().0, ());
    // A Last-Event-ID header on the upgrade is never used as the cursor.
    let r = s
        .http
        .post(format!("{}/session/{sid}/upgrade", s.url))
        .header("content-type", "application/json")
        .header("last-event-id", "ffffffffffffffff_1-1")
        .body(json!({"cursor": cursor}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200);
    let b: Value = r.json().await.unwrap();
    assert!(b["replay_count"].as_u64().unwrap() > 0, "{b}");
    assert!(b["replay_from"].as_str().unwrap().ends_with(&format!("-{}", cseq + 1)));
    let mut ws = connect(&s, b["websocket"].as_str().unwrap()).await;
    let mut expect = cseq + 1;
    let mut seen: Vec<u64> = processed.iter().filter_map(|p| p.2).collect();
    let mut done = false;
    while !done {
        let (seq, _, msg) = frame(&mut ws).await.expect("socket ended early");
        assert_eq!(seq, expect, "first frame is cursor+1 and seqs rise by one");
        expect += 1;
        if let Some(n) = emit_seq(&msg) {
            seen.push(n);
        }
        done = msg["result"]["content"][0]["text"] == "emitted 400";
    }
    assert_eq!(seen, (1..=400).collect::<Vec<_>>(), "every data.seq once across SSE and WebSocket");
    // After attach: SSE resumes and POSTs get 409 session_migrated.
    expect_error(s.get(Some(&sid), Some(&cursor)).await, 409, "session_migrated").await;
    expect_error(
        s.post(Some(&sid), json!({"jsonrpc":"2.0","id":7,"method":"ping"})).await,
        409,
        "session_migrated",
    )
    .await;
    // Requests over the socket are answered over it.
    ws.send(Message::Text(
        json!({"message": {"jsonrpc":"2.0","id":"p1","method":"ping"}}).to_string().into(),
    ))
    .await
    .unwrap();
    ws.send(Message::Text(json!({"ack": cursor}).to_string().into())).await.unwrap();
    loop {
        let (_, _, msg) = frame(&mut ws).await.unwrap();
        if msg["id"] == "p1" {
            assert_eq!(msg["result"], json!({}));
            break;
        }
    }
}

#[tokio::test]
async fn seed_000_variant_2_evicted_gap_is_refused_and_no_socket() {
    let s = start(ServerConfig::default().with_ring(RingConfig::new(32, 1 << 20))).await;
    let sid = s.initialize().await;
    let processed = read_some(&s, &sid, json!({"count": 300}), 5).await;
    let cursor = prefix_cursor(&processed);
    let cseq = processed.last().unwrap().0;
    tokio::time::sleep(Duration::from_millis(200)).await; // the rest is emitted, the gap evicted
    let b =
        expect_error(upgrade(&s, &sid, &json!({"cursor": cursor}).to_string()).await, 409, "gap_not_covered")
            .await;
    assert_eq!(b["cursor"], json!(cursor));
    let session = s.server.hub().get_str(&sid, None).unwrap();
    let oldest = session.reader().oldest().get();
    assert_eq!(b["missing"], json!(oldest - cseq - 1));
    assert!(b["oldest"].as_str().unwrap().ends_with(&format!("-{oldest}")));
    assert!(!session.is_migrated(), "the session stays on SSE");
}

#[tokio::test]
async fn seed_000_variant_3_echoed_server_id_is_not_delivered() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    // Standalone events are emitted with no GET open: never delivered.
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 3, "target": "standalone"})).await;
    let _ = r.text().await;
    let session = s.server.hub().get_str(&sid, None).unwrap();
    let st = session.standalone().id();
    let echoed = session.event_id(st, session.reader().stream(st).unwrap().high).to_string();
    expect_error(
        upgrade(&s, &sid, &json!({"cursor": echoed}).to_string()).await,
        409,
        "cursor_not_delivered",
    )
    .await;
}

#[tokio::test]
async fn seed_000_forged_cursor_below_delivered_seq_of_other_stream() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    // Standalone event (undelivered), then a request stream fully read.
    let _ =
        s.call_tool(&sid, 1, "emit_events", json!({"count": 1, "target": "standalone"})).await.text().await;
    let processed = read_some(&s, &sid, json!({"count": 3}), 3).await;
    let cursor = prefix_cursor(&processed);
    // The request stream was delivered up to the cursor, but the standalone
    // event below it never was.
    let b = expect_error(
        upgrade(&s, &sid, &json!({"cursor": cursor}).to_string()).await,
        409,
        "cursor_not_delivered",
    )
    .await;
    assert_eq!(b["cursor"], json!(cursor));
}

#[tokio::test]
async fn quiescent_migration_and_socket_resume() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let r = upgrade(&s, &sid, r#"{"cursor": null}"#).await;
    assert_eq!(r.status(), 200);
    let b: Value = r.json().await.unwrap();
    // "processed nothing": the initialize stream's events are the gap.
    assert_eq!(b["replay_from"].as_str().unwrap().rsplit_once('-').unwrap().1, "1");
    let mut ws = connect(&s, b["websocket"].as_str().unwrap()).await;
    let mut last = String::new();
    for expect in 1..=2 {
        let (seq, id, _) = frame(&mut ws).await.unwrap();
        assert_eq!(seq, expect);
        last = id;
    }
    // A tool call over the socket; events flow on it.
    ws.send(Message::Text(json!({"message": {"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":20}}}}).to_string().into())).await.unwrap();
    let mut seqs = vec![];
    for _ in 0..8 {
        let (seq, id, m) = frame(&mut ws).await.unwrap();
        seqs.push(seq);
        if emit_seq(&m).is_some() {
            last = id;
        }
    }
    drop(ws); // the socket drops mid-stream
    tokio::time::sleep(Duration::from_millis(100)).await;
    // Resume the socket with the newer cursor: the rest, nothing twice.
    let r = upgrade(&s, &sid, &json!({"cursor": last}).to_string()).await;
    assert_eq!(r.status(), 200);
    let b: Value = r.json().await.unwrap();
    let mut ws = connect(&s, b["websocket"].as_str().unwrap()).await;
    let lseq: u64 = last.rsplit_once('-').unwrap().1.parse().unwrap();
    let mut expect = lseq + 1;
    loop {
        let (seq, _, m) = frame(&mut ws).await.unwrap();
        assert_eq!(seq, expect);
        expect += 1;
        if m["result"]["content"][0]["text"] == "emitted 20" {
            break;
        }
    }
}

/// A fast tool over a migrated socket is paced by the socket's reader
/// (the whole-session subscription is attached to the session's pacing
/// gate): with a ring of 64 events, 3 000 events arrive in order, none
/// lost, no 4409 close, while the client reads with pauses.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fast_tool_over_the_socket_is_paced_not_cut() {
    let s = start(ServerConfig::default().with_ring(RingConfig::new(64, 1 << 20))).await;
    let sid = s.initialize().await;
    let r = upgrade(&s, &sid, r#"{"cursor": null}"#).await;
    assert_eq!(r.status(), 200);
    let b: Value = r.json().await.unwrap();
    let mut ws = connect(&s, b["websocket"].as_str().unwrap()).await;
    for expect in 1..=2 {
        assert_eq!(frame(&mut ws).await.unwrap().0, expect);
    }
    ws.send(Message::Text(json!({"message": {"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":3000}}}}).to_string().into())).await.unwrap();
    let (mut next_seq, mut next_emit) = (3, 1);
    loop {
        let Some((seq, _, m)) = frame(&mut ws).await else { panic!("socket closed at seq {next_seq}") };
        assert_eq!(seq, next_seq, "hole or duplicate");
        next_seq += 1;
        if let Some(e) = emit_seq(&m) {
            assert_eq!(e, next_emit);
            next_emit += 1;
            if e % 500 == 0 {
                tokio::time::sleep(Duration::from_millis(20)).await; // a slow reader
            }
        }
        if m["result"]["content"][0]["text"] == "emitted 3000" {
            break;
        }
    }
    assert_eq!(next_emit, 3001);
}

#[tokio::test]
async fn eviction_between_ticket_and_connect_is_covered_by_the_pin() {
    let s = start(ServerConfig::default().with_ring(RingConfig::new(64, 1 << 20))).await;
    let sid = s.initialize().await;
    let processed = read_some(&s, &sid, json!({"count": 40}), 10).await;
    let cursor = prefix_cursor(&processed);
    let cseq = processed.last().unwrap().0;
    tokio::time::sleep(Duration::from_millis(100)).await;
    let r = upgrade(&s, &sid, &json!({"cursor": cursor}).to_string()).await;
    assert_eq!(r.status(), 200);
    let b: Value = r.json().await.unwrap();
    let n = b["replay_count"].as_u64().unwrap();
    // Now the ring laps: the pinned gap is evicted before the socket connects.
    let session = s.server.hub().get_str(&sid, None).unwrap();
    for _ in 0..200 {
        session
            .publish(
                session.standalone(),
                bytes::Bytes::from_static(b"{\"jsonrpc\":\"2.0\",\"method\":\"x\"}"),
            )
            .unwrap();
    }
    assert!(session.reader().oldest().get() > cseq + n, "gap evicted from the ring");
    let mut ws = connect(&s, b["websocket"].as_str().unwrap()).await;
    for i in 0..n {
        let (seq, _, _) = frame(&mut ws).await.unwrap();
        assert_eq!(seq, cseq + 1 + i, "pinned gap first, in order");
    }
    // Then live: the events after the pin were evicted too, so the socket is
    // closed with 4409 before any hole is sent.
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap() {
        Some(Ok(Message::Close(Some(f)))) => {
            assert_eq!(f.code, CloseCode::from(4409));
            let r: Value = serde_json::from_str(&f.reason).unwrap();
            assert_eq!(r["error"], "gap_not_covered");
            assert_eq!(r["next"], json!(cseq + 1 + n));
        }
        other => panic!("expected a 4409 close, got {other:?}"),
    }
}

#[tokio::test]
async fn bad_upgrades_tickets_and_frames() {
    let s = start(ServerConfig { max_body_bytes: 4096, ..ServerConfig::default() }).await;
    let sid = s.initialize().await;
    for body in ["", "nope", "[]", "{}", r#"{"cursor": 5}"#, r#"{"cursor": null, "extra": 1}"#] {
        expect_error(upgrade(&s, &sid, body).await, 400, "malformed_request").await;
    }
    expect_error(upgrade(&s, &sid, r#"{"cursor":"garbage"}"#).await, 400, "malformed_cursor").await;
    expect_error(upgrade(&s, &sid, r#"{"cursor":"abc-1"}"#).await, 409, "namespace_mismatch").await;
    expect_error(upgrade(&s, &sid, r#"{"cursor":"0123456789abcdef_1-99"}"#).await, 409, "namespace_mismatch")
        .await;
    let r = s
        .http
        .post(format!("{}/session/{sid}/upgrade", s.url))
        .header("content-type", "text/plain")
        .body("{\"cursor\":null}")
        .send()
        .await
        .unwrap();
    expect_error(r, 415, "unsupported_media_type").await;
    expect_error(
        upgrade(&s, "00000000000000000000000000000000", r#"{"cursor":null}"#).await,
        404,
        "unknown_session",
    )
    .await;
    let r = s.http.get(format!("{}/session/{sid}/upgrade", s.url)).send().await.unwrap();
    expect_error(r, 405, "method_not_allowed").await;
    // Tickets: bad, foreign-looking, replayed, excess.
    let r = s.http.get(format!("{}/ws?ticket=nope", s.url)).send().await.unwrap();
    assert_eq!(r.status(), 403);
    let mut tickets = vec![];
    for _ in 0..4 {
        let b: Value = upgrade(&s, &sid, r#"{"cursor":null}"#).await.json().await.unwrap();
        tickets.push(b["websocket"].as_str().unwrap().to_owned());
    }
    expect_error(upgrade(&s, &sid, r#"{"cursor":null}"#).await, 429, "too_many_tickets").await;
    let first = tickets.remove(0);
    let ws = connect(&s, &first).await;
    let e = tokio_tungstenite::connect_async(format!("ws://{}{}", s.addr, first)).await.unwrap_err();
    assert!(e.to_string().contains("403"), "replayed ticket refused before the upgrade: {e}");
    drop(ws);
    // Frames: non-JSON, wrong shape, oversized → close 4400; server stays up.
    for bad in [
        Message::Text("not json".into()),
        Message::Text("{\"x\":1}".into()),
        Message::Binary(vec![1u8, 2].into()),
        Message::Text("x".repeat(10_000).into()),
    ] {
        let ticket = match tickets.pop() {
            Some(t) => t,
            None => upgrade(&s, &sid, r#"{"cursor":null}"#).await.json::<Value>().await.unwrap()["websocket"]
                .as_str()
                .unwrap()
                .to_owned(),
        };
        let mut ws = connect(&s, &ticket).await;
        ws.send(bad.clone()).await.unwrap();
        let mut code = None;
        while let Some(Ok(m)) = tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap() {
            if let Message::Close(f) = m {
                code = f.map(|f| f.code);
                break;
            }
        }
        assert_eq!(code, Some(CloseCode::from(4400)), "{bad:?}");
    }
    // Expired tickets.
    let mut cfg = ServerConfig::default();
    cfg.hub.ticket_ttl = Duration::from_millis(1);
    let s2 = start(cfg).await;
    let sid2 = s2.initialize().await;
    let b: Value = upgrade(&s2, &sid2, r#"{"cursor":null}"#).await.json().await.unwrap();
    tokio::time::sleep(Duration::from_millis(20)).await;
    let r = s2
        .http
        .get(format!("http://{}{}", s2.addr, b["websocket"].as_str().unwrap()))
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    let body = expect_error(r, 403, "ticket_invalid").await;
    assert!(body["message"].as_str().unwrap().contains("expired"));
    // The server is still up.
    assert_eq!(
        s.post(Some(&sid), json!({"jsonrpc":"2.0","id":1,"method":"ping"})).await.status(),
        409,
        "migrated session"
    );
    let other = s.initialize().await;
    assert_eq!(s.post(Some(&other), json!({"jsonrpc":"2.0","id":1,"method":"ping"})).await.status(), 200);
}

#[tokio::test]
async fn sampling_over_the_socket() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let b: Value = upgrade(&s, &sid, r#"{"cursor":null}"#).await.json().await.unwrap();
    let mut ws = connect(&s, b["websocket"].as_str().unwrap()).await;
    ws.send(Message::Text(json!({"message": {"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"test_sampling","arguments":{"prompt":"hi"}}}}).to_string().into())).await.unwrap();
    loop {
        let (_, _, m) = frame(&mut ws).await.unwrap();
        if m["method"] == "sampling/createMessage" {
            let reply = json!({"message": {"jsonrpc":"2.0","id": m["id"], "result": {"role":"assistant","content":{"type":"text","text":"hello back"},"model":"m","stopReason":"endTurn"}}});
            ws.send(Message::Text(reply.to_string().into())).await.unwrap();
        }
        if m["id"] == 9 {
            assert_eq!(m["result"]["content"][0]["text"], "LLM response: hello back");
            break;
        }
    }
}

/// Many sessions, each streaming while its client breaks SSE at a random
/// point and migrates: every data.seq arrives exactly once across both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stress_break_and_migrate() {
    let sessions: usize =
        std::env::var("GAPLESS_STRESS_SESSIONS").ok().and_then(|v| v.parse().ok()).unwrap_or(24);
    let count = 300u64;
    let s = std::sync::Arc::new(start(ServerConfig::default()).await);
    let mut tasks = vec![];
    for i in 0..sessions {
        let s = std::sync::Arc::clone(&s);
        tasks.push(tokio::spawn(async move {
            let sid = s.initialize().await;
            let stop = 1 + (i * 7919) % (count as usize - 1);
            let processed =
                read_some(&s, &sid, json!({"count": count, "interval_ms": (i % 3) as u64}), stop).await;
            let mut seen: BTreeMap<u64, usize> = BTreeMap::new();
            for n in processed.iter().filter_map(|p| p.2) {
                *seen.entry(n).or_default() += 1;
            }
            let cursor = prefix_cursor(&processed);
            let b: Value =
                upgrade(&s, &sid, &json!({"cursor": cursor}).to_string()).await.json().await.unwrap();
            let mut ws = connect(&s, b["websocket"].as_str().expect("granted")).await;
            let mut expect = processed.last().unwrap().0 + 1;
            loop {
                let (seq, _, m) = frame(&mut ws).await.expect("socket ended early");
                assert_eq!(seq, expect);
                expect += 1;
                if let Some(n) = emit_seq(&m) {
                    *seen.entry(n).or_default() += 1;
                }
                if m.get("result").is_some() {
                    break;
                }
            }
            assert_eq!(seen.len() as u64, count, "session {i}: every seq");
            assert!(seen.values().all(|&c| c == 1), "session {i}: exactly once");
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

/// Shutdown ends open SSE streams and closes sockets with 1001.
#[tokio::test]
async fn shutdown_ends_streams_and_sockets() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let get = s.get(Some(&sid), None).await;
    assert_eq!(get.status(), 200);
    let mut sse = SseReader::new(get);
    assert!(sse.next().await.unwrap().data.is_empty(), "priming");
    let other = s.initialize().await;
    let b: Value = upgrade(&s, &other, r#"{"cursor":null}"#).await.json().await.unwrap();
    let mut ws = connect(&s, b["websocket"].as_str().unwrap()).await;
    for _ in 0..2 {
        frame(&mut ws).await.unwrap();
    }
    s.server.shutdown();
    assert!(sse.next().await.is_none(), "the SSE stream ends");
    match tokio::time::timeout(Duration::from_secs(10), ws.next()).await.unwrap() {
        Some(Ok(Message::Close(Some(f)))) => assert_eq!(f.code, CloseCode::Away),
        other => panic!("expected a 1001 close, got {other:?}"),
    }
}
