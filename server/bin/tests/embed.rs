//! The router embeds: merged into an application that has its own fallback
//! and another route, nested under `/api`, it serves a real client through
//! initialize, a tool call, a resume and a WebSocket migration, all at the
//! nested path, and the socket path it advertises is the nested one.

mod common;
use axum::routing::get;
use axum::Router;
use common::*;
use gapless_server::{CallerIdentity, McpServer};
use gapless_server_bin::demo::DemoHost;
use serde_json::json;

async fn app() -> TestServer {
    let mcp = McpServer::builder(DemoHost).path("/mcp").build().unwrap();
    // An application that already has a fallback, merged with the MCP
    // router nested under /api (axum panics on merging two fallbacks).
    let own = Router::new()
        .route("/health", get(|| async { "ok" }))
        .fallback(|| async { (axum::http::StatusCode::IM_A_TEAPOT, "the app's own fallback") });
    let app = own.merge(Router::new().nest("/api", mcp.router()));
    let addr = serve(app).await;
    TestServer::at(addr, "/api/mcp", mcp)
}

#[tokio::test]
async fn nested_router_serves_a_whole_session_at_its_prefix() {
    let s = app().await;
    // The application's own routes still answer.
    let base = format!("http://{}", s.addr);
    assert_eq!(s.http.get(format!("{base}/health")).send().await.unwrap().text().await.unwrap(), "ok");
    let r = s.http.get(format!("{base}/nowhere")).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 418, "the app's fallback, not the library's");
    // Neither the un-nested path nor another path under the prefix is the
    // library's: both reach the application's fallback.
    assert_eq!(s.http.post(format!("{base}/mcp")).send().await.unwrap().status().as_u16(), 418);
    assert_eq!(s.http.get(format!("{base}/api/nowhere")).send().await.unwrap().status().as_u16(), 418);

    // initialize and a tool call at /api/mcp.
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 5})).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let mut ids = vec![];
    while let Some(e) = sse.next().await {
        ids.push((e.id.clone().unwrap(), e.emit_seq()));
    }
    assert_eq!(ids.iter().filter_map(|(_, n)| *n).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);

    // Resume after the second notification: the rest of the stream, then its end.
    let (cursor, _) = ids.iter().find(|(_, n)| *n == Some(2)).unwrap().clone();
    let r = s.get(Some(&sid), Some(&cursor)).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let mut rest = vec![];
    while let Some(e) = sse.next().await {
        rest.push(e.emit_seq());
    }
    assert_eq!(rest.iter().flatten().copied().collect::<Vec<_>>(), [3, 4, 5], "{rest:?}");

    // Migrate after everything: the advertised socket path is nested too,
    // and the socket opens there.
    let last = ids.last().unwrap().0.clone();
    let r = upgrade(&s, &sid, &json!({"cursor": last}).to_string()).await;
    assert_eq!(r.status(), 200);
    let grant: serde_json::Value = r.json().await.unwrap();
    let ws_path = grant["websocket"].as_str().unwrap().to_owned();
    assert!(ws_path.starts_with("/api/mcp/ws?ticket="), "{ws_path}");
    let mut ws = connect(&s, &ws_path).await;
    // A request over the socket: its priming frame, then its result.
    use futures_util::SinkExt;
    let call = json!({"message": {"jsonrpc": "2.0", "id": 9, "method": "tools/call",
        "params": {"name": "emit_events", "arguments": {"count": 2}}}});
    ws.send(tokio_tungstenite::tungstenite::Message::Text(call.to_string().into())).await.unwrap();
    let mut seen = vec![];
    while let Some((_, _, msg)) = frame(&mut ws).await {
        if msg.get("id") == Some(&json!(9)) {
            assert_eq!(msg["result"]["content"][0]["text"], "emitted 2");
            break;
        }
        seen.push(msg);
    }
    assert_eq!(seen.iter().filter(|m| m["method"] == "notifications/message").count(), 2, "{seen:?}");
}

/// A `CallerIdentity` set by the application's own auth layer binds the
/// session: the same request without it sees no session.
#[tokio::test]
async fn identity_comes_from_the_auth_layers_extension() {
    let mcp = McpServer::builder(DemoHost).build().unwrap();
    let app = mcp.router().layer(axum::middleware::from_fn(
        |mut req: axum::extract::Request, next: axum::middleware::Next| async move {
            let who = req.headers().get("x-user").and_then(|v| v.to_str().ok()).map(str::to_owned);
            if let Some(who) = who {
                req.extensions_mut().insert(CallerIdentity(who));
            }
            next.run(req).await
        },
    ));
    let addr = serve(app).await;
    let s = TestServer::at(addr, "/mcp", mcp);
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}});
    let r = s.post_with(None, init, &[("x-user", "alice")]).await;
    assert_eq!(r.status(), 200);
    let sid = header(r.headers(), "mcp-session-id").unwrap();
    let ping = json!({"jsonrpc":"2.0","id":1,"method":"ping"});
    assert_eq!(s.post_with(Some(&sid), ping.clone(), &[("x-user", "alice")]).await.status(), 200);
    expect_error(
        s.post_with(Some(&sid), ping.clone(), &[("x-user", "mallory")]).await,
        404,
        "unknown_session",
    )
    .await;
    expect_error(s.post(Some(&sid), ping).await, 404, "unknown_session").await;
}

/// `--host rmcp-counter`: the rmcp counter example behind the same router,
/// with `emit_events` on the call's own stream and a resume of it.
#[tokio::test]
async fn the_rmcp_counter_host_serves_its_tools_and_resumes() {
    let mcp = McpServer::builder(gapless_server_bin::rmcp_counter().unwrap()).build().unwrap();
    let addr = serve(mcp.router()).await;
    let s = TestServer::at(addr, "/mcp", mcp);
    let sid = s.initialize().await;
    let r = s.post(Some(&sid), json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})).await;
    let mut sse = SseReader::new(r);
    let mut names = vec![];
    while let Some(e) = sse.next().await {
        if let Some(tools) = e.json().and_then(|m| m["result"]["tools"].as_array().cloned()) {
            names = tools.iter().map(|t| t["name"].as_str().unwrap().to_owned()).collect();
        }
    }
    names.sort();
    assert_eq!(names, ["decrement", "emit_events", "get_value", "increment"]);
    let r = s.call_tool(&sid, 2, "emit_events", json!({"count": 4})).await;
    let mut sse = SseReader::new(r);
    let mut ids = vec![];
    let mut result = None;
    while let Some(e) = sse.next().await {
        if let Some(m) = e.json().filter(|m| m.get("result").is_some()) {
            result = Some(m["result"]["content"][0]["text"].clone());
        }
        ids.push((e.id.clone().unwrap(), e.emit_seq()));
    }
    assert_eq!(ids.iter().filter_map(|(_, n)| *n).collect::<Vec<_>>(), [1, 2, 3, 4]);
    assert_eq!(result, Some(json!("emitted 4")));
    let (cursor, _) = ids.iter().find(|(_, n)| *n == Some(1)).unwrap().clone();
    let mut sse = SseReader::new(s.get(Some(&sid), Some(&cursor)).await);
    let mut rest = vec![];
    while let Some(e) = sse.next().await {
        rest.extend(e.emit_seq());
    }
    assert_eq!(rest, [2, 3, 4]);
}
