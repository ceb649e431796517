//! Session binding to a caller identity, and slow clients under TCP
//! backpressure.

mod common;
use common::*;
use gapless::RingConfig;
use gapless_server::{McpServer, ServerConfig};
use gapless_server_bin::demo::DemoHost;
use serde_json::{json, Value};
use std::time::Duration;

async fn start_with_identity() -> TestServer {
    let server = McpServer::builder(DemoHost)
        .identity(|parts| parts.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build()
        .unwrap();
    let addr = serve(server.router()).await;
    TestServer::at(addr, "/mcp", server)
}

/// A session created under one identity answers 404 to requests, resumes
/// and upgrades that carry another, exactly as if it did not exist.
#[tokio::test]
async fn session_is_bound_to_its_creator() {
    let s = start_with_identity().await;
    let alice = [("authorization", "Bearer alice")];
    let mallory = [("authorization", "Bearer mallory")];
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let r = s.post_with(None, init, &alice).await;
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let mut sse = SseReader::new(r);
    let mut last = None;
    while let Some(e) = sse.next().await {
        last = e.id;
    }
    let last = last.unwrap();
    let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
    assert_eq!(s.post_with(Some(&sid), ping.clone(), &alice).await.status(), 200);
    let unknown =
        expect_error(s.post_with(Some(&sid), ping.clone(), &mallory).await, 404, "unknown_session").await;
    let nobody = expect_error(s.post_with(Some(&sid), ping.clone(), &[]).await, 404, "unknown_session").await;
    let truly = expect_error(
        s.post_with(Some("0123456789abcdef0123456789abcdef"), ping, &mallory).await,
        404,
        "unknown_session",
    )
    .await;
    assert_eq!(unknown, truly, "indistinguishable from a session that does not exist");
    assert_eq!(nobody, truly);
    let get = |h: &'static str| {
        s.http
            .get(&s.url)
            .header("accept", "text/event-stream")
            .header("mcp-session-id", &sid)
            .header("last-event-id", &last)
            .header("authorization", h)
            .send()
    };
    expect_error(get("Bearer mallory").await.unwrap(), 404, "unknown_session").await;
    assert_eq!(get("Bearer alice").await.unwrap().status(), 200);
    let up = |h: &'static str| {
        s.http
            .post(format!("{}/session/{sid}/upgrade", s.url))
            .header("content-type", "application/json")
            .header("authorization", h)
            .body(r#"{"cursor":null}"#)
            .send()
    };
    expect_error(up("Bearer mallory").await.unwrap(), 404, "unknown_session").await;
    let b: Value = up("Bearer alice").await.unwrap().json().await.unwrap();
    // A ticket presented by another caller is refused before the upgrade.
    let r = s
        .http
        .get(format!("http://{}{}", s.addr, b["websocket"].as_str().unwrap()))
        .header("authorization", "Bearer mallory")
        .header("connection", "upgrade")
        .header("upgrade", "websocket")
        .header("sec-websocket-version", "13")
        .header("sec-websocket-key", "dGhlIHNhbXBsZSBub25jZQ==")
        .send()
        .await
        .unwrap();
    expect_error(r, 403, "ticket_invalid").await;
    let r = s
        .http
        .delete(&s.url)
        .header("mcp-session-id", &sid)
        .header("authorization", "Bearer mallory")
        .send()
        .await
        .unwrap();
    expect_error(r, 404, "unknown_session").await;
    assert!(s.server.hub().get_str(&sid, Some("Bearer alice")).is_ok(), "mallory could not delete it");
}

/// A client that stops reading (TCP backpressure) never blocks the
/// session's other writers; if it falls behind eviction its stream ends and
/// its resume is refused with the explicit 409.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn slow_client_falls_behind_and_gets_409_on_resume() {
    let s = start(ServerConfig::default().with_ring(RingConfig::new(64, 64 << 20))).await;
    let sid = s.initialize().await;
    // A big stream the client reads only the first event of, then stalls.
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 3000, "payload_bytes": 8192})).await;
    let mut slow = SseReader::new(r);
    let priming = slow.next().await.unwrap();
    let mut last = priming.id.clone().unwrap();
    tokio::time::sleep(Duration::from_millis(300)).await; // socket buffers fill up
                                                          // Meanwhile another writer of the same session is not blocked: 200
                                                          // standalone events (no GET open, so nothing paces them) evict the slow
                                                          // stream's retained events.
    let other = tokio::time::timeout(
        Duration::from_secs(30),
        s.call_tool(&sid, 2, "emit_events", json!({"count": 200, "target": "standalone"})),
    )
    .await
    .expect("a stalled client blocked another writer");
    assert!(other.text().await.unwrap().contains("emitted 200"));
    // The slow client reads on: what was buffered, then the end of a
    // stream that fell behind eviction, without the result.
    let mut got_result = false;
    let mut seqs = vec![];
    while let Some(e) = slow.next().await {
        if let Some(n) = e.emit_seq() {
            seqs.push(n);
        } else if !e.data.is_empty() {
            got_result = true;
        }
        last = e.id.unwrap();
    }
    assert!(!got_result, "the stream cannot have completed through a 64-event ring");
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "no hole inside what was delivered");
    let b = expect_error(s.get(Some(&sid), Some(&last)).await, 409, "gap_not_covered").await;
    assert!(b["missing"].as_u64().unwrap() >= 1);
}
