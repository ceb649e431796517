//! Streamable HTTP end to end over loopback: the rows of `docs/SPEC.md` §5
//! (without the WebSocket rows; §4.2 row by row is `decision_table.rs`),
//! with a real HTTP client.

mod common;
use common::*;
use gapless::{RingConfig, Seq};
use gapless_server::ServerConfig;
use serde_json::{json, Value};
use std::collections::BTreeSet;

fn small_ring(events: usize) -> ServerConfig {
    ServerConfig::default().with_ring(RingConfig::new(events, 1 << 20))
}

#[tokio::test]
async fn initialize_and_tool_call_stream_every_event_in_order() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    assert_eq!(sid.len(), 32, "128-bit id as hex");
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 500, "payload_bytes": 64})).await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(r.headers(), "content-type").unwrap(), "text/event-stream");
    let mut sse = SseReader::new(r);
    let priming = sse.next().await.unwrap();
    assert!(priming.id.is_some() && priming.data.is_empty() && priming.retry == Some(1000), "{priming:?}");
    let mut seqs = vec![];
    let mut result = None;
    while let Some(e) = sse.next().await {
        match e.emit_seq() {
            Some(n) => seqs.push(n),
            None => result = e.json(),
        }
    }
    assert_eq!(seqs, (1..=500).collect::<Vec<_>>());
    assert_eq!(result.unwrap()["result"]["content"][0]["text"], "emitted 500");
}

#[tokio::test]
async fn json_only_client_gets_the_response_as_json() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let r = s.post_accepting(&sid, json!({"jsonrpc":"2.0","id":5,"method":"ping"}), "application/json").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(r.headers(), "content-type").unwrap(), "application/json");
    assert_eq!(r.json::<Value>().await.unwrap(), json!({"jsonrpc":"2.0","id":5,"result":{}}));
}

/// A JSON-only request whose own notifications overrun the ring still gets
/// its response: it is handed over by the handler, not read back from the
/// ring (it once was, and got a 500). The byte budget holds three of these
/// events, so pacing (by event count) does not hold the tool back. The
/// session stays usable, and a migration is not held up by the
/// notifications this client could never receive.
#[tokio::test]
async fn json_only_response_survives_its_own_notifications() {
    let s = start(ServerConfig::default().with_ring(RingConfig::new(4096, 200_000))).await;
    let sid = s.initialize().await;
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call",
        "params":{"name":"emit_events","arguments":{"count": 50, "payload_bytes": 65536}}});
    let r = s.post_accepting(&sid, call, "application/json").await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(r.headers(), "content-type").unwrap(), "application/json");
    let v: Value = r.json().await.unwrap();
    assert_eq!(v["id"], 7, "{v}");
    assert_eq!(v["result"]["content"][0]["text"], "emitted 50", "{v}");
    let r = s.post_accepting(&sid, json!({"jsonrpc":"2.0","id":8,"method":"ping"}), "application/json").await;
    assert_eq!(r.status(), 200);
    let session = s.server.hub().get_str(&sid, None).unwrap();
    let head = session.reader().head();
    let at = session.event_id(session.reader().stream_of(head).unwrap(), head).to_string();
    let r = s
        .http
        .post(format!("{}/session/{sid}/upgrade", s.url))
        .header("content-type", "application/json")
        .body(json!({"cursor": at}).to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{}", r.text().await.unwrap());
}

/// A JSON-only request that the client cancels gets no JSON-RPC response
/// (MCP sends none to a cancelled request): 202 with no body, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_only_request_cancelled_by_the_client_is_a_202() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let call = json!({"jsonrpc":"2.0","id":"slow","method":"tools/call",
        "params":{"name":"emit_events","arguments":{"count": 100, "interval_ms": 100}}});
    let pending = {
        let (http, url, sid) = (s.http.clone(), s.url.clone(), sid.clone());
        tokio::spawn(async move {
            http.post(url)
                .header("content-type", "application/json")
                .header("accept", "application/json")
                .header("mcp-session-id", sid)
                .body(call.to_string())
                .send()
                .await
                .unwrap()
        })
    };
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let cancel = json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":"slow"}});
    assert_eq!(s.post(Some(&sid), cancel).await.status(), 202);
    let r =
        tokio::time::timeout(std::time::Duration::from_secs(2), pending).await.expect("answered").unwrap();
    assert_eq!(r.status(), 202);
    assert!(r.text().await.unwrap().is_empty());
}

/// Reads a stream until `stop` events of emit_events were processed, then
/// drops the connection; returns the last processed id and the seqs seen.
async fn read_then_break(mut sse: SseReader, stop: usize, seen: &mut Vec<u64>) -> String {
    let mut last = None;
    while let Some(e) = sse.next().await {
        if let Some(n) = e.emit_seq() {
            seen.push(n);
        }
        last = e.id.clone().or(last);
        if seen.len() >= stop {
            break;
        }
    }
    drop(sse);
    last.unwrap()
}

#[tokio::test]
async fn resume_after_mid_stream_disconnect_request_stream() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 300, "interval_ms": 1})).await;
    let mut seen = vec![];
    let cursor = read_then_break(SseReader::new(r), 100, &mut seen).await;
    // Events keep coming while the client is away.
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    let r = s.get(Some(&sid), Some(&cursor)).await;
    assert_eq!(r.status(), 200, "{:?}", r.text().await);
    let mut sse = SseReader::new(r);
    let mut result = false;
    while let Some(e) = sse.next().await {
        assert!(!e.data.is_empty(), "no new priming event on a resume");
        match e.emit_seq() {
            Some(n) => seen.push(n),
            None => result = e.json().unwrap()["result"]["content"][0]["text"] == "emitted 300",
        }
    }
    assert_eq!(seen, (1..=300).collect::<Vec<_>>(), "every data.seq exactly once, in order");
    assert!(result, "the tool result arrives on the resumed stream");
}

#[tokio::test]
async fn resume_after_mid_stream_disconnect_standalone_stream() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let get = s.get(Some(&sid), None).await;
    assert_eq!(get.status(), 200);
    let mut get = SseReader::new(get);
    let priming = get.next().await.unwrap();
    assert!(priming.data.is_empty());
    let s2 = s.http.clone();
    let (url, sid2) = (s.url.clone(), sid.clone());
    let call = tokio::spawn(async move {
        s2.post(&url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("mcp-session-id", sid2)
            .body(json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":300,"interval_ms":1,"target":"standalone"}}}).to_string())
            .send()
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    });
    let mut seen = vec![];
    let mut last = priming.id.unwrap();
    while seen.len() < 120 {
        let e = get.next().await.unwrap();
        seen.push(e.emit_seq().unwrap());
        last = e.id.unwrap();
    }
    drop(get);
    let out = call.await.unwrap();
    assert!(out.contains("emitted 300"), "{out}");
    let r = s.get(Some(&sid), Some(&last)).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    while seen.len() < 300 {
        seen.push(sse.next().await.unwrap().emit_seq().unwrap());
    }
    assert_eq!(seen, (1..=300).collect::<Vec<_>>());
}

#[tokio::test]
async fn standalone_backlog_is_kept_until_a_get_opens_and_second_get_is_busy() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 5, "target": "standalone"})).await;
    assert!(r.text().await.unwrap().contains("emitted 5"));
    let get = s.get(Some(&sid), None).await;
    assert_eq!(get.status(), 200);
    let second = s.get(Some(&sid), None).await;
    expect_error(second, 409, "stream_busy").await;
    let mut sse = SseReader::new(get);
    let first = sse.next().await.unwrap();
    assert_eq!(first.emit_seq(), Some(1), "backlog first, no priming event before it");
    for n in 2..=5 {
        assert_eq!(sse.next().await.unwrap().emit_seq(), Some(n));
    }
}

/// `docs/SPEC.md` §4.2, row by row, over HTTP.
#[tokio::test]
async fn decision_table_refusals_over_http() {
    let s = start(small_ring(16)).await;
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 3})).await;
    let mut sse = SseReader::new(r);
    let mut ids = vec![];
    while let Some(e) = sse.next().await {
        ids.push(e.id.unwrap());
    }
    let last = ids.last().unwrap().clone();
    // 1. cursor without session id: 400, and no session created.
    let before = s.server.hub().len();
    expect_error(s.get(None, Some(&last)).await, 400, "resume_requires_session").await;
    assert_eq!(s.server.hub().len(), before);
    // 2. unknown session.
    expect_error(s.get(Some("00000000000000000000000000000000"), Some(&last)).await, 404, "unknown_session")
        .await;
    // 3. malformed cursors.
    for bad in
        ["garbage", "-1", "x-01", "x-99999999999999999999", "x--5", &format!("x-{}", "9".repeat(10_000))]
    {
        let b = expect_error(s.get(Some(&sid), Some(bad)).await, 400, "malformed_cursor").await;
        assert!(b["reason"].is_string());
    }
    // 4. another session's cursor.
    let other = s.initialize().await;
    let r = s.call_tool(&other, 1, "emit_events", json!({"count": 1})).await;
    let mut o = SseReader::new(r);
    let oid = o.next().await.unwrap().id.unwrap();
    while o.next().await.is_some() {}
    expect_error(s.get(Some(&sid), Some(&oid)).await, 409, "namespace_mismatch").await;
    // 5. ahead of head.
    let (tag, _) = last.rsplit_once('-').unwrap();
    let b = expect_error(s.get(Some(&sid), Some(&format!("{tag}-999"))).await, 409, "cursor_ahead").await;
    assert!(b["head"].is_u64());
    // 6. never delivered: publish on the standalone stream (no GET open),
    // then claim its id.
    let r = s.call_tool(&sid, 2, "emit_events", json!({"count": 2, "target": "standalone"})).await;
    let _ = r.text().await;
    let session = s.server.hub().get_str(&sid, None).unwrap();
    let st = session.standalone().id();
    let undelivered = session.event_id(st, session.reader().stream(st).unwrap().high);
    expect_error(s.get(Some(&sid), Some(&undelivered.to_string())).await, 409, "cursor_not_delivered").await;
    // 7. evicted gap: 409 with numbers, never an empty 200.
    let r = s.call_tool(&sid, 3, "emit_events", json!({"count": 40})).await;
    let _ = r.text().await;
    let b = expect_error(s.get(Some(&sid), Some(&ids[1])).await, 409, "gap_not_covered").await;
    assert_eq!(b["cursor"], json!(ids[1]));
    assert!(b["oldest"].is_string() && b["missing"].as_u64().unwrap() >= 1, "{b}");
    // A resume at the stream's end is an empty, clean 200 (the stream ended).
    let r = s.call_tool(&sid, 4, "emit_events", json!({"count": 1})).await;
    let mut sse = SseReader::new(r);
    let mut lid = None;
    while let Some(e) = sse.next().await {
        lid = e.id;
    }
    let r = s.get(Some(&sid), lid.as_deref()).await;
    assert_eq!(r.status(), 200);
    assert!(SseReader::new(r).next().await.is_none());
}

#[tokio::test]
async fn deleted_and_recreated_session_refuses_old_cursor() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 2})).await;
    let mut sse = SseReader::new(r);
    let mut last = None;
    while let Some(e) = sse.next().await {
        last = e.id;
    }
    let last = last.unwrap();
    let r = s.http.delete(&s.url).header("mcp-session-id", &sid).send().await.unwrap();
    assert_eq!(r.status(), 204);
    expect_error(s.get(Some(&sid), Some(&last)).await, 404, "unknown_session").await;
    expect_error(
        s.post(Some(&sid), json!({"jsonrpc":"2.0","id":9,"method":"ping"})).await,
        404,
        "unknown_session",
    )
    .await;
    // The engine re-creates the same id (a new incarnation): old cursor foreign.
    let id = gapless::SessionId::parse(&sid).unwrap();
    let again = s.server.hub().create_with_id(id, None).unwrap();
    again.publish(again.standalone(), bytes::Bytes::from_static(b"{}")).unwrap();
    again.publish(again.standalone(), bytes::Bytes::from_static(b"{}")).unwrap();
    let _ = Seq(0);
    // (no transport state for it: the hub knows it, the server does not)
    let r = s.get(Some(&sid), Some(&last)).await;
    let b = expect_error(r, 409, "namespace_mismatch").await;
    assert!(b.get("cursor").is_none() || b["cursor"].is_string());
}

/// `docs/SPEC.md` §5's transport refusals.
#[tokio::test]
async fn transport_refusals_have_status_and_json_body() {
    let mut cfg = ServerConfig::default();
    cfg.hub.max_sessions = 3;
    cfg.max_body_bytes = 1024;
    let s = start(cfg).await;
    let sid = s.initialize().await;
    let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
    expect_error(s.post(None, ping.clone()).await, 400, "missing_session").await;
    let b = expect_error(
        s.post_with(Some(&sid), ping.clone(), &[("mcp-protocol-version", "1999-01-01")]).await,
        400,
        "unsupported_protocol_version",
    )
    .await;
    assert!(b["supported"].is_array());
    // A supported version other than the negotiated one is accepted.
    assert_eq!(
        s.post_with(Some(&sid), ping.clone(), &[("mcp-protocol-version", "2025-03-26")]).await.status(),
        200
    );
    expect_error(s.post_accepting(&sid, ping.clone(), "text/html").await, 406, "not_acceptable").await;
    let r = s
        .http
        .get(&s.url)
        .header("accept", "application/json")
        .header("mcp-session-id", &sid)
        .send()
        .await
        .unwrap();
    expect_error(r, 406, "not_acceptable").await;
    let r = s
        .http
        .post(&s.url)
        .header("content-type", "text/plain")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", &sid)
        .body(ping.to_string())
        .send()
        .await
        .unwrap();
    expect_error(r, 415, "unsupported_media_type").await;
    let r = s
        .http
        .post(&s.url)
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", &sid)
        .body("{not json")
        .send()
        .await
        .unwrap();
    expect_error(r, 400, "malformed_request").await;
    // JSON, but not JSON-RPC: a JSON-RPC error response.
    let r = s.post(Some(&sid), json!({"id": 1, "method": "ping"})).await;
    assert_eq!(r.status(), 400);
    let b: Value = r.json().await.unwrap();
    assert_eq!(b["error"]["code"], json!(-32600));
    let r = s.post(Some(&sid), json!({"jsonrpc":"2.0","id":1,"method":"ping","pad":"x".repeat(2000)})).await;
    expect_error(r, 413, "payload_too_large").await;
    let big = "a".repeat(20_000);
    let r = s
        .http
        .get(&s.url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &sid)
        .header("x-big", &big)
        .send()
        .await
        .unwrap();
    expect_error(r, 431, "headers_too_large").await;
    for m in [reqwest::Method::PUT, reqwest::Method::PATCH] {
        let r = s.http.request(m, &s.url).send().await.unwrap();
        expect_error(r, 405, "method_not_allowed").await;
    }
    let r = s.post_with(Some(&sid), ping.clone(), &[("origin", "http://evil.example")]).await;
    expect_error(r, 403, "origin_not_allowed").await;
    assert_eq!(
        s.post_with(Some(&sid), ping.clone(), &[("origin", "http://localhost:3000")]).await.status(),
        200
    );
    let r = s
        .http
        .post(&s.url)
        .header("host", "evil.example")
        .header("content-type", "application/json")
        .header("accept", ACCEPT_BOTH)
        .header("mcp-session-id", &sid)
        .body(ping.to_string())
        .send()
        .await
        .unwrap();
    expect_error(r, 403, "origin_not_allowed").await;
    // Two Host or two Origin headers, the first one allowed: 400, whatever
    // the second says (it is what a proxy or the app might read).
    for (name, good) in [("host", "127.0.0.1"), ("origin", "http://127.0.0.1")] {
        let r = s.post_with(Some(&sid), ping.clone(), &[(name, good), (name, "evil.example")]).await;
        let b = expect_error(r, 400, "malformed_request").await;
        assert!(b["message"].as_str().unwrap().contains("more than one"), "{b}");
    }
    // Notifications and responses: 202, no body.
    let r = s
        .post(
            Some(&sid),
            json!({"jsonrpc":"2.0","method":"notifications/cancelled","params":{"requestId":77}}),
        )
        .await;
    assert_eq!(r.status(), 202);
    let r = s.post(Some(&sid), json!({"jsonrpc":"2.0","id":"s999","result":{}})).await;
    assert_eq!(r.status(), 202);
    assert!(r.text().await.unwrap().is_empty());
    // Session limit.
    s.initialize().await;
    s.initialize().await;
    let r = s.post(None, json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})).await;
    expect_error(r, 503, "too_many_sessions").await;
    // Unknown JSON-RPC method: a JSON-RPC error on the stream.
    let r = s.post(Some(&sid), json!({"jsonrpc":"2.0","id":3,"method":"no/such"})).await;
    let mut sse = SseReader::new(r);
    let mut err = None;
    while let Some(e) = sse.next().await {
        if let Some(j) = e.json() {
            err = Some(j);
        }
    }
    assert_eq!(err.unwrap()["error"]["code"], json!(-32601));
    // emit_events bounds and bad arguments are JSON-RPC errors.
    for args in [
        json!({"count": 100_001}),
        json!({"count": 1, "payload_bytes": 65_537}),
        json!({"count": 1, "interval_ms": 10_001}),
        json!({"count": -1}),
        json!({}),
        json!({"count": 1, "target": "elsewhere"}),
        json!({"count": 1, "stamp": "yes"}),
    ] {
        let mut sse = SseReader::new(s.call_tool(&sid, 4, "emit_events", args.clone()).await);
        let mut last = None;
        while let Some(e) = sse.next().await {
            last = e.json().or(last);
        }
        assert_eq!(last.unwrap()["error"]["code"], json!(-32602), "{args}");
    }
}

/// Bad input never takes the server down, and other sessions lose nothing.
#[tokio::test]
async fn bad_input_leaves_other_sessions_intact() {
    let s = start(ServerConfig::default()).await;
    let victim = s.initialize().await;
    let r = s.call_tool(&victim, 1, "emit_events", json!({"count": 2000, "interval_ms": 0})).await;
    let reader = tokio::spawn(async move {
        let mut sse = SseReader::new(r);
        let mut seen = BTreeSet::new();
        while let Some(e) = sse.next().await {
            if let Some(n) = e.emit_seq() {
                assert!(seen.insert(n), "duplicate {n}");
            }
        }
        seen.len()
    });
    let sid = s.initialize().await;
    let garbage: Vec<&[u8]> = vec![
        b"",
        b"null",
        b"[]",
        b"[1,2]",
        b"\"x\"",
        b"{\"jsonrpc\":\"1.0\"}",
        b"\xff\xfe",
        b"{\"jsonrpc\":\"2.0\",\"id\":{},\"method\":\"x\"}",
    ];
    for g in garbage {
        let r = s
            .http
            .post(&s.url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .header("mcp-session-id", &sid)
            .body(g.to_vec())
            .send()
            .await
            .unwrap();
        assert_eq!(r.status(), 400, "{g:?}");
        let _: Value = r.json().await.unwrap();
    }
    for lei in ["-1", "18446744073709551616", "0", "a b", "x-"] {
        let r = s.get(Some(&sid), Some(lei)).await;
        assert!(r.status().is_client_error(), "{lei}");
        let _: Value = r.json().await.unwrap();
    }
    assert_eq!(reader.await.unwrap(), 2000);
    assert_eq!(s.post(Some(&sid), json!({"jsonrpc":"2.0","id":1,"method":"ping"})).await.status(), 200);
}

/// A finished request stream whose record was reclaimed (all its events
/// evicted, everything delivered): a resume at its last event is an empty
/// 200 that ends at once, as the contract says, not a 404.
#[tokio::test]
async fn resume_at_the_end_of_a_reclaimed_stream_is_an_empty_200() {
    let s = start(small_ring(8)).await;
    let sid = s.initialize().await;
    let read_all = |r: reqwest::Response| async move {
        let mut sse = SseReader::new(r);
        let mut ids = vec![];
        while let Some(e) = sse.next().await {
            ids.push(e.id.unwrap());
        }
        ids
    };
    let first = read_all(s.call_tool(&sid, 1, "emit_events", json!({"count": 1})).await).await;
    let last = first.last().unwrap().clone();
    for id in 2..60 {
        read_all(s.call_tool(&sid, id, "emit_events", json!({"count": 1})).await).await;
    }
    let session = s.server.hub().get_str(&sid, None).unwrap();
    let stream: gapless::EventId = last.parse().unwrap();
    assert!(session.reader().stream(stream.stream).is_none(), "the record was reclaimed");
    let r = s.get(Some(&sid), Some(&last)).await;
    assert_eq!(r.status(), 200);
    assert!(SseReader::new(r).next().await.is_none(), "nothing after the stream's last event");
}

/// On a one-event ring an `initialize` answered over SSE: the response
/// evicts the stream's priming event before the body subscribes, and the
/// body starts after it (found by the `http_router` fuzz target; it was
/// `404 unknown_session`, for a session it had just created).
#[tokio::test]
async fn initialize_on_a_one_event_ring_streams_its_response() {
    let s = start(small_ring(1)).await;
    let r = s
        .post(
            None,
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}),
        )
        .await;
    assert_eq!(r.status(), 200);
    assert!(r.headers().get("mcp-session-id").is_some());
    let mut sse = SseReader::new(r);
    let e = sse.next().await.expect("the response");
    assert_eq!(e.json().unwrap()["result"]["protocolVersion"], "2025-06-18", "{e:?}");
    assert!(sse.next().await.is_none(), "the stream ends after the response");
}
