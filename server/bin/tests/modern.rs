//! MCP 2026-07-28 beside the 2025 revisions at one endpoint (`docs/SPEC.md`
//! §5.4), over loopback with a real HTTP client: no session, per-request
//! declarations, the revision's errors and statuses, responses as JSON or
//! as an SSE stream without ids, cancellation by closing the response, and
//! a bounded response stream.

mod common;
use common::*;
use futures_util::future::BoxFuture;
use gapless_server::host::{Host, RequestContext};
use gapless_server::{McpServer, RpcError, ServerConfig};
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const V: &str = "2026-07-28";

fn meta() -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}})
}

/// `params` with the request's declarations added.
fn with_meta(mut params: Value, extra: Value) -> Value {
    let mut m = meta();
    for (k, v) in extra.as_object().into_iter().flatten() {
        m[k] = v.clone();
    }
    params["_meta"] = m;
    params
}

/// The standard headers a 2026-07-28 client sends for `method` (and
/// `name`, the value `Mcp-Name` mirrors).
fn headers<'a>(method: &'a str, name: Option<&'a str>) -> Vec<(&'a str, &'a str)> {
    let mut h = vec![("mcp-protocol-version", V), ("mcp-method", method)];
    if let Some(n) = name {
        h.push(("mcp-name", n));
    }
    h
}

async fn modern(s: &TestServer, id: u64, method: &str, params: Value) -> reqwest::Response {
    let name = params.get("name").or(params.get("uri")).and_then(Value::as_str).map(str::to_owned);
    s.post_with(
        None,
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}),
        &headers(method, name.as_deref()),
    )
    .await
}

async fn body(r: reqwest::Response) -> (u16, Value) {
    let status = r.status().as_u16();
    assert_eq!(header(r.headers(), "content-type").as_deref(), Some("application/json"));
    (status, r.json().await.unwrap())
}

#[tokio::test]
async fn discover_and_lists_need_no_session_and_create_none() {
    let s = start(ServerConfig::default()).await;
    let r = modern(&s, 1, "server/discover", with_meta(json!({}), json!({}))).await;
    assert!(header(r.headers(), "mcp-session-id").is_none());
    let (status, b) = body(r).await;
    assert_eq!(status, 200);
    let res = &b["result"];
    assert_eq!(b["id"], 1);
    assert_eq!(res["supportedVersions"], json!(["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26"]));
    assert_eq!(
        (&res["resultType"], &res["ttlMs"], &res["cacheScope"]),
        (&json!("complete"), &json!(0), &json!("private"))
    );
    assert_eq!(res["_meta"]["io.modelcontextprotocol/serverInfo"]["name"], "gapless-server");
    // The application's own capabilities (listChanged is served by
    // subscriptions/listen), its tasks extension with the event streams
    // the server serves (`tasks/stream`).
    let mut caps = gapless_server_bin::demo::DemoHost.capabilities();
    caps["extensions"][gapless_server::tasks::EXTENSION]["eventStreams"] = json!({});
    assert_eq!(res["capabilities"], caps, "{res}");

    // A tool list, with a session id that names nothing: ignored.
    let r = s
        .post_with(
            None,
            json!({"jsonrpc": "2.0", "id": "t", "method": "tools/list", "params": with_meta(json!({}), json!({}))}),
            &[("mcp-protocol-version", V), ("mcp-method", "tools/list"), ("mcp-session-id", "00")],
        )
        .await;
    let (status, b) = body(r).await;
    assert_eq!(status, 200, "{b}");
    assert!(b["result"]["tools"].as_array().unwrap().iter().any(|t| t["name"] == "emit_events"));
    assert_eq!(b["result"]["resultType"], "complete");
    assert_eq!(s.server.hub().len(), 0, "no session was created");
    assert!(s.server.metrics_text().contains("gapless_stateless_requests_total 2"));
}

#[tokio::test]
async fn a_tool_streams_its_notifications_without_ids_then_its_result() {
    let s = start(ServerConfig::default()).await;
    let r = modern(
        &s,
        7,
        "tools/call",
        with_meta(
            json!({"name": "emit_events", "arguments": {"count": 300}}),
            json!({"io.modelcontextprotocol/logLevel": "info"}),
        ),
    )
    .await;
    assert_eq!(r.status(), 200);
    assert_eq!(header(r.headers(), "content-type").as_deref(), Some("text/event-stream"));
    assert!(header(r.headers(), "mcp-session-id").is_none());
    let mut sse = SseReader::new(r);
    let (mut seqs, mut result) = (vec![], None);
    while let Some(e) = sse.next().await {
        assert!(e.id.is_none() && e.retry.is_none(), "no event ids, no priming: {e:?}");
        match e.emit_seq() {
            Some(n) => seqs.push(n),
            None => result = e.json(),
        }
    }
    assert_eq!(seqs, (1..=300).collect::<Vec<_>>());
    let result = result.unwrap();
    assert_eq!((&result["id"], &result["result"]["resultType"]), (&json!(7), &json!("complete")));
    assert_eq!(result["result"]["content"][0]["text"], "emitted 300");
    assert_eq!(s.server.hub().len(), 0);
}

#[tokio::test]
async fn log_messages_only_with_a_declared_level() {
    let s = start(ServerConfig::default()).await;
    // No level: no notifications/message, so the response is plain JSON.
    let call = json!({"name": "test_tool_with_logging", "arguments": {}});
    let (status, b) = body(modern(&s, 1, "tools/call", with_meta(call.clone(), json!({}))).await).await;
    assert_eq!(
        (status, &b["result"]["content"][0]["text"]),
        (200, &json!("Tool with logging executed successfully"))
    );
    // "info": the three messages, then the result.
    let r = modern(
        &s,
        2,
        "tools/call",
        with_meta(call.clone(), json!({"io.modelcontextprotocol/logLevel": "info"})),
    )
    .await;
    let mut sse = SseReader::new(r);
    let mut methods = vec![];
    while let Some(e) = sse.next().await {
        let m = e.json().unwrap();
        methods
            .push(m["method"].as_str().map(str::to_owned).unwrap_or_else(|| format!("result {}", m["id"])));
    }
    assert_eq!(
        methods,
        ["notifications/message", "notifications/message", "notifications/message", "result 2"]
    );
    // Above the messages' level: filtered again.
    let r =
        modern(&s, 3, "tools/call", with_meta(call, json!({"io.modelcontextprotocol/logLevel": "error"})))
            .await;
    assert_eq!(body(r).await.0, 200);
}

#[tokio::test]
async fn the_revisions_errors_carry_the_request_id_and_their_status() {
    let s = start(ServerConfig::default()).await;
    let call = |params: Value, hs: Vec<(&'static str, &'static str)>| {
        let s = &s;
        async move {
            body(
                s.post_with(
                    None,
                    json!({"jsonrpc": "2.0", "id": 9, "method": "tools/list", "params": params}),
                    &hs,
                )
                .await,
            )
            .await
        }
    };
    let std_headers = || vec![("mcp-protocol-version", V), ("mcp-method", "tools/list")];
    // Declarations missing: -32602, 400.
    for params in [json!({}), json!({"_meta": {"io.modelcontextprotocol/protocolVersion": V}})] {
        let (status, b) = call(params, std_headers()).await;
        assert_eq!((status, &b["id"], &b["error"]["code"]), (400, &json!(9), &json!(-32602)), "{b}");
    }
    // Header and body disagree: -32020, 400.
    let (status, b) = call(
        with_meta(json!({}), json!({})),
        vec![("mcp-protocol-version", V), ("mcp-method", "prompts/list")],
    )
    .await;
    assert_eq!((status, &b["error"]["code"]), (400, &json!(-32020)), "{b}");
    let (status, b) = call(with_meta(json!({}), json!({})), vec![("mcp-protocol-version", V)]).await;
    assert_eq!((status, &b["error"]["code"]), (400, &json!(-32020)), "{b}");
    let (status, b) = call(
        with_meta(json!({}), json!({"io.modelcontextprotocol/protocolVersion": "v999"})),
        vec![("mcp-protocol-version", V), ("mcp-method", "tools/list")],
    )
    .await;
    assert_eq!((status, &b["error"]["code"]), (400, &json!(-32020)), "{b}");
    // A version not served: -32022 naming the versions served and the one asked.
    let (status, b) = call(
        with_meta(json!({}), json!({"io.modelcontextprotocol/protocolVersion": "v999"})),
        vec![("mcp-protocol-version", "v999"), ("mcp-method", "tools/list")],
    )
    .await;
    assert_eq!((status, &b["error"]["code"]), (400, &json!(-32022)), "{b}");
    assert_eq!(b["error"]["data"]["requested"], "v999");
    assert_eq!(b["error"]["data"]["supported"][0], V);
    // Removed and unknown methods: -32601, 404.
    for method in ["initialize", "ping", "logging/setLevel", "resources/subscribe", "no/such"] {
        let r = s
            .post_with(
                None,
                json!({"jsonrpc": "2.0", "id": 4, "method": method, "params": with_meta(json!({}), json!({}))}),
                &headers(method, None),
            )
            .await;
        let (status, b) = body(r).await;
        assert_eq!(
            (status, &b["id"], &b["error"]["code"]),
            (404, &json!(4), &json!(-32601)),
            "{method}: {b}"
        );
    }
    // A capability the client did not declare: -32021, 400, and which.
    let r = modern(
        &s,
        5,
        "tools/call",
        with_meta(json!({"name": "test_missing_capability", "arguments": {}}), json!({})),
    )
    .await;
    let (status, b) = body(r).await;
    assert_eq!((status, &b["error"]["code"]), (400, &json!(-32021)), "{b}");
    assert_eq!(b["error"]["data"]["requiredCapabilities"], json!({"sampling": {}}));
    let declared = json!({"io.modelcontextprotocol/clientCapabilities": {"sampling": {}}});
    let r = modern(
        &s,
        6,
        "tools/call",
        with_meta(json!({"name": "test_missing_capability", "arguments": {}}), declared),
    )
    .await;
    assert_eq!(body(r).await.0, 200);
    // A resource not found is -32602 from this revision on (SEP-2164), in
    // the body of a 200 like any error of the application's.
    let r = modern(&s, 8, "resources/read", with_meta(json!({"uri": "test://nope"}), json!({}))).await;
    let (status, b) = body(r).await;
    assert_eq!(
        (status, &b["error"]["code"], &b["error"]["data"]["uri"]),
        (200, &json!(-32602), &json!("test://nope"))
    );
    // Mcp-Name must mirror the tool's name (Base64 sentinel decoded).
    let r = s
        .post_with(
            None,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": with_meta(json!({"name": "test_simple_text"}), json!({}))}),
            &headers("tools/call", Some("=?base64?dGVzdF9zaW1wbGVfdGV4dA==?=")),
        )
        .await;
    assert_eq!(body(r).await.0, 200);
    let r = s
        .post_with(
            None,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": with_meta(json!({"name": "test_simple_text"}), json!({}))}),
            &headers("tools/call", Some("test_image_content")),
        )
        .await;
    assert_eq!(body(r).await.1["error"]["code"], -32020);
}

#[tokio::test]
async fn get_and_delete_of_the_revision_are_405_and_2025_sessions_are_untouched() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    for method in [reqwest::Method::GET, reqwest::Method::DELETE] {
        let r = s
            .http
            .request(method.clone(), &s.url)
            .header("accept", "text/event-stream")
            .header("mcp-protocol-version", V)
            .header("mcp-session-id", &sid)
            .send()
            .await
            .unwrap();
        assert_eq!(header(r.headers(), "allow").as_deref(), Some("POST"));
        expect_error(r, 405, "method_not_allowed").await;
    }
    // The session is still there and serves its requests as before.
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 3})).await;
    let mut sse = SseReader::new(r);
    let priming = sse.next().await.unwrap();
    assert!(priming.id.is_some(), "a 2025 stream is resumable: {priming:?}");
    assert_eq!(s.server.hub().len(), 1);
    // A 2025 request naming a version served by neither era is refused as
    // before (the guard's refusal, now given once the body was read).
    let r = s
        .post_with(
            Some(&sid),
            json!({"jsonrpc": "2.0", "id": 2, "method": "ping"}),
            &[("mcp-protocol-version", "1999-01-01")],
        )
        .await;
    expect_error(r, 400, "unsupported_protocol_version").await;
    // The standalone stream needs a session: refused on 2026-07-28.
    let r = modern(
        &s,
        3,
        "tools/call",
        with_meta(
            json!({"name": "emit_events", "arguments": {"count": 1, "target": "standalone"}}),
            json!({}),
        ),
    )
    .await;
    assert_eq!(body(r).await.1["error"]["code"], -32602);
}

/// A request that declares no log level gets no log messages, those a
/// handler sends raw included (`emit_events` sends its info-level ones with
/// `notify_raw`); one that declares a level above theirs gets none either.
#[tokio::test]
async fn raw_log_messages_only_with_a_declared_level_at_or_below_theirs() {
    let s = start(ServerConfig::default()).await;
    let call = json!({"name": "emit_events", "arguments": {"count": 5}});
    for meta in [json!({}), json!({"io.modelcontextprotocol/logLevel": "error"})] {
        let (status, b) =
            body(modern(&s, 1, "tools/call", with_meta(call.clone(), meta.clone())).await).await;
        assert_eq!((status, &b["result"]["content"][0]["text"]), (200, &json!("emitted 5")), "{meta}");
    }
    let r = modern(&s, 2, "tools/call", with_meta(call, json!({"io.modelcontextprotocol/logLevel": "info"})))
        .await;
    let mut sse = SseReader::new(r);
    let (mut seqs, mut result) = (vec![], None);
    while let Some(e) = sse.next().await {
        match e.emit_seq() {
            Some(n) => seqs.push(n),
            None => result = e.json(),
        }
    }
    assert_eq!(seqs, [1, 2, 3, 4, 5]);
    assert_eq!(result.unwrap()["result"]["content"][0]["text"], "emitted 5");
}

/// A host whose one tool sends 64 KiB notifications until it is cancelled,
/// counting them.
#[derive(Clone, Default)]
struct Flood {
    sent: Arc<AtomicU64>,
    cancelled: Arc<AtomicBool>,
}

impl Host for Flood {
    fn capabilities(&self) -> Value {
        json!({"tools": {}})
    }

    fn handle(
        &self,
        _method: String,
        _params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        let me = self.clone();
        Box::pin(async move {
            assert!(ctx.session().is_none());
            let pad = "x".repeat(64 << 10);
            let msg = bytes::Bytes::from(format!(
                r#"{{"jsonrpc":"2.0","method":"notifications/x.flood","params":{{"data":"{pad}"}}}}"#
            ));
            loop {
                tokio::select! {
                    r = ctx.notify_raw(msg.clone()) => {
                        if r.is_err() { break; }
                        me.sent.fetch_add(1, Ordering::SeqCst);
                    }
                    _ = ctx.cancelled() => break,
                }
            }
            me.cancelled.store(ctx.is_cancelled(), Ordering::SeqCst);
            Ok(json!({}))
        })
    }
}

#[tokio::test]
async fn a_slow_reader_holds_the_handler_back_and_closing_cancels_it() {
    let host = Flood::default();
    let server = McpServer::builder(host.clone()).config(ServerConfig::default()).build().unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let r =
        modern(&s, 1, "tools/call", with_meta(json!({"name": "flood", "arguments": {}}), json!({}))).await;
    assert_eq!(header(r.headers(), "content-type").as_deref(), Some("text/event-stream"));
    // Unread, the response stream fills up: the queue (256 KiB) plus
    // what the sockets buffer, some megabytes, not the gigabytes the loop
    // would send in this second.
    tokio::time::sleep(Duration::from_secs(1)).await;
    let held = host.sent.load(Ordering::SeqCst);
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(host.sent.load(Ordering::SeqCst), held, "the handler waits for the reader");
    assert!(held < 2000, "{held} messages of 64 KiB sent to a client that read none");
    // Closing the response cancels the request: the handler sees it.
    drop(r);
    for _ in 0..100 {
        if host.cancelled.load(Ordering::SeqCst) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(host.cancelled.load(Ordering::SeqCst), "closing the response cancels the request");
}

/// A `tools/call` of `name` with no arguments and `extra` params (the
/// retry's `inputResponses` and `requestState`), declaring `caps`.
async fn call_with(s: &TestServer, id: u64, name: &str, extra: Value, caps: Value) -> (u16, Value) {
    let mut params = json!({"name": name, "arguments": {}});
    for (k, v) in extra.as_object().into_iter().flatten() {
        params[k] = v.clone();
    }
    let params = with_meta(params, json!({"io.modelcontextprotocol/clientCapabilities": caps}));
    body(modern(s, id, "tools/call", params).await).await
}

fn all_caps() -> Value {
    json!({"elicitation": {}, "sampling": {}, "roots": {}})
}

fn accept(content: Value) -> Value {
    json!({"action": "accept", "content": content})
}

#[tokio::test]
async fn input_is_asked_for_by_an_input_required_result_and_brought_by_the_retry() {
    let s = start(ServerConfig::default()).await;
    let tool = "test_input_required_result_elicitation";
    let (status, r1) = call_with(&s, 1, tool, json!({}), all_caps()).await;
    let res = &r1["result"];
    assert_eq!((status, &res["resultType"]), (200, &json!("input_required")), "{r1}");
    assert_eq!(res["inputRequests"]["user_name"]["method"], "elicitation/create");
    let state = res["requestState"].as_str().expect("a sealed requestState").to_owned();
    // The retry: a new id, the answer, the state echoed.
    let extra =
        json!({"inputResponses": {"user_name": accept(json!({"name": "Alice"}))}, "requestState": state});
    let (status, r2) = call_with(&s, 2, tool, extra, all_caps()).await;
    assert_eq!((status, &r2["result"]["resultType"]), (200, &json!("complete")), "{r2}");
    assert_eq!(r2["result"]["content"][0]["text"], "Hello, Alice!");
    // Missing or wrong keys: asked again, not an error.
    let extra = json!({"inputResponses": {"wrong": accept(json!({}))}});
    let (_, r3) = call_with(&s, 3, tool, extra, all_caps()).await;
    assert_eq!(r3["result"]["resultType"], "input_required", "{r3}");
    // The same tool on a 2025 session: the ask is a server → client request
    // on the request's stream, answered by a POST.
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 4, tool, json!({})).await;
    let mut sse = SseReader::new(r);
    let ask = loop {
        let m = sse.next().await.expect("the elicitation").json();
        if let Some(m) = m.filter(|m| m["method"] == "elicitation/create") {
            break m;
        }
    };
    let reply = json!({"jsonrpc": "2.0", "id": ask["id"], "result": accept(json!({"name": "Bob"}))});
    assert_eq!(s.post(Some(&sid), reply).await.status(), 202);
    let mut result = None;
    while let Some(e) = sse.next().await {
        result = e.json().filter(|m| m["id"] == 4).or(result);
    }
    assert_eq!(result.unwrap()["result"]["content"][0]["text"], "Hello, Bob!");
}

#[tokio::test]
async fn earlier_rounds_travel_sealed_in_the_request_state() {
    let s = start(ServerConfig::default()).await;
    let tool = "test_input_required_result_multi_round";
    let (_, r1) = call_with(&s, 1, tool, json!({}), all_caps()).await;
    assert!(r1["result"]["inputRequests"]["step1"].is_object(), "{r1}");
    let extra = json!({"inputResponses": {"step1": accept(json!({"name": "Ada"}))}, "requestState": r1["result"]["requestState"]});
    let (_, r2) = call_with(&s, 2, tool, extra, all_caps()).await;
    let res2 = &r2["result"];
    assert_eq!(res2["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), ["step2"], "{r2}");
    let state2 = res2["requestState"].clone();
    // Round 3 brings only step2's answer: step1's comes from the state.
    let extra =
        json!({"inputResponses": {"step2": accept(json!({"color": "teal"}))}, "requestState": state2});
    let (_, r3) = call_with(&s, 3, tool, extra, all_caps()).await;
    assert_eq!(r3["result"]["content"][0]["text"], "Ada's favorite color is teal", "{r3}");
    // Without the state, step1 is asked again.
    let extra = json!({"inputResponses": {"step2": accept(json!({"color": "teal"}))}});
    let (_, r4) = call_with(&s, 4, tool, extra, all_caps()).await;
    assert!(r4["result"]["inputRequests"]["step1"].is_object(), "{r4}");
    // An altered state, or one presented on another request, is refused.
    let tampered = format!("{}x", state2.as_str().unwrap());
    for (name, state) in [
        (tool, json!(tampered)),
        ("test_input_required_result_request_state", state2.clone()),
        (tool, json!(7)),
    ] {
        let extra =
            json!({"inputResponses": {"step2": accept(json!({"color": "teal"}))}, "requestState": state});
        let (status, r) = call_with(&s, 5, name, extra, all_caps()).await;
        assert_eq!((status, &r["error"]["code"]), (200, &json!(-32602)), "{name}: {r}");
    }
    // A state sealed by another server (another key) is refused too.
    let other = start(ServerConfig::default()).await;
    let extra =
        json!({"inputResponses": {"step2": accept(json!({"color": "teal"}))}, "requestState": state2});
    let (_, r) = call_with(&other, 6, tool, extra.clone(), all_caps()).await;
    assert!(r["error"]["message"].as_str().unwrap().contains("does not verify"), "{r}");
    // Unless both share the configured secret.
    let secret = || ServerConfig {
        request_state_secret: Some(b"one secret for the whole cluster".to_vec()),
        ..ServerConfig::default()
    };
    let (a, b) = (start(secret()).await, start(secret()).await);
    let (_, r1) = call_with(&a, 1, tool, json!({}), all_caps()).await;
    let extra = json!({"inputResponses": {"step1": accept(json!({"name": "Ada"}))}, "requestState": r1["result"]["requestState"]});
    let (_, r2) = call_with(&b, 2, tool, extra, all_caps()).await;
    assert!(r2["result"]["inputRequests"]["step2"].is_object(), "{r2}");
}

#[tokio::test]
async fn input_the_client_cannot_give_or_gave_wrong_is_an_error() {
    let s = start(ServerConfig::default()).await;
    // No elicitation capability declared: -32021 naming it, at 400.
    let (status, r) =
        call_with(&s, 1, "test_input_required_result_elicitation", json!({}), json!({"sampling": {}})).await;
    assert_eq!((status, &r["error"]["code"]), (400, &json!(-32021)), "{r}");
    assert_eq!(r["error"]["data"]["requiredCapabilities"], json!({"elicitation": {}}));
    // All three at once need all three.
    let (_, r) =
        call_with(&s, 2, "test_input_required_result_multiple_inputs", json!({}), json!({"elicitation": {}}))
            .await;
    assert_eq!(r["error"]["data"]["requiredCapabilities"], json!({"sampling": {}, "roots": {}}), "{r}");
    // Answers that are not results of their input request's method.
    for bad in [json!(12345), json!({"content": {"name": "x"}}), json!({"action": "maybe"})] {
        let extra = json!({"inputResponses": {"user_name": bad}});
        let (status, r) = call_with(&s, 3, "test_input_required_result_elicitation", extra, all_caps()).await;
        assert_eq!((status, &r["error"]["code"]), (200, &json!(-32602)), "{r}");
    }
    // A method that cannot take input never answers with an input-required
    // result; tools/list is served as usual with inputResponses present.
    let params = with_meta(json!({"inputResponses": {"x": {}}}), json!({}));
    let (_, r) = body(modern(&s, 4, "tools/list", params).await).await;
    assert_eq!(r["result"]["resultType"], "complete");
}

/// Opens a `subscriptions/listen` stream (request `id`) for `notifications`.
async fn listen(s: &TestServer, id: u64, notifications: Value) -> SseReader {
    let r =
        modern(s, id, "subscriptions/listen", with_meta(json!({"notifications": notifications}), json!({})))
            .await;
    assert_eq!(header(r.headers(), "content-type").as_deref(), Some("text/event-stream"));
    SseReader::new(r)
}

#[tokio::test]
async fn listen_streams_get_what_they_asked_for_tagged_and_end_gracefully() {
    let s = start(ServerConfig::default()).await;
    let mut tools = listen(&s, 41, json!({"toolsListChanged": true, "resourcesListChanged": true})).await;
    let ack = tools.next().await.unwrap().json().unwrap();
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged");
    assert_eq!(ack["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41);
    // The demo offers no resources.listChanged: not acknowledged.
    assert_eq!(ack["params"]["notifications"], json!({"toolsListChanged": true}));
    let mut prompts = listen(&s, 42, json!({"promptsListChanged": true})).await;
    assert_eq!(
        prompts.next().await.unwrap().json().unwrap()["method"],
        "notifications/subscriptions/acknowledged"
    );
    // A tool of another request announces a change of the tool list.
    let r = modern(
        &s,
        1,
        "tools/call",
        with_meta(json!({"name": "test_trigger_tool_change", "arguments": {}}), json!({})),
    )
    .await;
    assert_eq!(body(r).await.0, 200);
    let n = tools.next().await.unwrap().json().unwrap();
    assert_eq!(n["method"], "notifications/tools/list_changed");
    assert_eq!(n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 41);
    s.server.announce(gapless_server::Change::PromptsListChanged);
    // The prompts stream got the prompts change and not the tools one.
    let n = prompts.next().await.unwrap().json().unwrap();
    assert_eq!(
        (&n["method"], &n["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"]),
        (&json!("notifications/prompts/list_changed"), &json!(42))
    );
    // Shutdown ends each with a response naming its subscription.
    s.server.shutdown();
    for (mut sse, id) in [(tools, 41), (prompts, 42)] {
        let mut last = None;
        while let Some(e) = sse.next().await {
            last = e.json();
        }
        let last = last.expect("a graceful end");
        assert_eq!(
            (&last["id"], &last["result"]["_meta"]["io.modelcontextprotocol/subscriptionId"]),
            (&json!(id), &json!(id)),
            "{last}"
        );
    }
}

#[tokio::test]
async fn a_listen_stream_that_falls_behind_is_told_of_every_kind_it_listens_to() {
    let s = start(ServerConfig::default()).await;
    let mut sse = listen(&s, 5, json!({"toolsListChanged": true, "promptsListChanged": true})).await;
    assert_eq!(
        sse.next().await.unwrap().json().unwrap()["method"],
        "notifications/subscriptions/acknowledged"
    );
    // The tools change first, then far more changes than the stream holds,
    // none read meanwhile: the tools change falls out of the backlog, and
    // what comes after says both lists changed, so it is not lost.
    s.server.announce(gapless_server::Change::ToolsListChanged);
    for _ in 0..2000 {
        s.server.announce(gapless_server::Change::PromptsListChanged);
    }
    s.server.shutdown();
    let mut seen = vec![];
    while let Some(e) = sse.next().await {
        let m = e.json().unwrap();
        seen.push(m["method"].as_str().unwrap_or("(the end)").to_owned());
    }
    assert!(
        seen.iter().any(|m| m == "notifications/tools/list_changed"),
        "the tools change was lost: {seen:?}"
    );
    assert_eq!(seen.last().map(String::as_str), Some("(the end)"));
    assert!(seen.len() < 2000, "{} notifications: the backlog was coalesced", seen.len());
}

#[tokio::test]
async fn mirrored_parameters_are_checked_against_their_headers() {
    let s = start(ServerConfig::default()).await;
    let call = |region: Value, param: Option<&'static str>| {
        let s = &s;
        async move {
            let mut hs = headers("tools/call", Some("test_x_mcp_header"));
            if let Some(p) = param {
                hs.push(("mcp-param-region", p));
            }
            let params =
                with_meta(json!({"name": "test_x_mcp_header", "arguments": {"region": region}}), json!({}));
            body(
                s.post_with(
                    None,
                    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}),
                    &hs,
                )
                .await,
            )
            .await
        }
    };
    let (status, r) = call(json!("eu-1"), Some("eu-1")).await;
    assert_eq!((status, &r["result"]["content"][0]["text"]), (200, &json!("region=eu-1")), "{r}");
    // "Hello" in the Base64 sentinel; the same unpadded is refused.
    assert_eq!(call(json!("Hello"), Some("=?base64?SGVsbG8=?=")).await.0, 200);
    for (region, param) in
        [(json!("eu-1"), None), (json!("eu-1"), Some("us-2")), (json!("Hello"), Some("=?base64?SGVsbG8?="))]
    {
        let (status, r) = call(region, param).await;
        assert_eq!((status, &r["error"]["code"]), (400, &json!(-32020)), "{r}");
    }
}

/// A host whose one tool mirrors its `key` argument into a header only
/// once `annotated` is set.
#[derive(Clone, Default)]
struct Switch {
    annotated: Arc<AtomicBool>,
}

impl Host for Switch {
    fn capabilities(&self) -> Value {
        json!({"tools": {"listChanged": true}})
    }

    fn handle(
        &self,
        method: String,
        _params: Value,
        _ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        let annotated = self.annotated.load(Ordering::SeqCst);
        Box::pin(async move {
            match method.as_str() {
                "tools/list" => {
                    let mut key = json!({"type": "string"});
                    if annotated {
                        key["x-mcp-header"] = json!("Key");
                    }
                    Ok(
                        json!({"tools": [{"name": "t", "inputSchema": {"type": "object", "properties": {"key": key}}}]}),
                    )
                }
                _ => Ok(json!({"content": []})),
            }
        })
    }
}

#[tokio::test]
async fn the_mirrored_parameters_are_listed_again_when_the_tools_change() {
    let host = Switch::default();
    let server = McpServer::builder(host.clone()).config(ServerConfig::default()).build().unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let call =
        || modern(&s, 1, "tools/call", with_meta(json!({"name": "t", "arguments": {"key": "k"}}), json!({})));
    assert_eq!(body(call().await).await.0, 200, "not annotated: no header needed");
    host.annotated.store(true, Ordering::SeqCst);
    assert_eq!(
        body(call().await).await.0,
        200,
        "the tool list as listed before, until a change is announced"
    );
    s.server.announce(gapless_server::Change::ToolsListChanged);
    let (status, r) = body(call().await).await;
    assert_eq!((status, &r["error"]["code"]), (400, &json!(-32020)), "{r}");
}

#[tokio::test]
async fn requests_in_flight_are_bounded_per_client() {
    let config = ServerConfig { max_stateless_inflight_per_client: 2, ..ServerConfig::default() };
    // Served as the binary serves (the peer address is known).
    let s = start_served(config, gapless_server::ServeConfig::default()).await;
    let (a, b) = (listen(&s, 1, json!({"toolsListChanged": true})).await, listen(&s, 2, json!({})).await);
    let r = modern(&s, 3, "tools/list", with_meta(json!({}), json!({}))).await;
    assert_eq!(header(r.headers(), "retry-after").as_deref(), Some("1"));
    let (status, b3) = body(r).await;
    assert_eq!((status, &b3["id"], &b3["error"]["code"]), (429, &json!(3), &json!(-31001)), "{b3}");
    // Closing a stream gives its place back.
    drop(a);
    let mut ok = false;
    for _ in 0..50 {
        if body(modern(&s, 4, "tools/list", with_meta(json!({}), json!({}))).await).await.0 == 200 {
            ok = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(ok, "the closed stream's place was given back");
    drop(b);
}

/// A 2026-07-28 request of `method` (no params but `_meta`) from a client
/// whose `Accept` is `accept`.
async fn accepting(s: &TestServer, accept: &str, id: u64, method: &str) -> reqwest::Response {
    let body =
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": with_meta(json!({}), json!({}))});
    let mut r = s.http.post(&s.url).header("content-type", "application/json").header("accept", accept);
    for (k, v) in headers(method, None) {
        r = r.header(k, v);
    }
    r.body(body.to_string()).send().await.unwrap()
}

#[tokio::test]
async fn accept_and_repeated_headers() {
    let s = start(ServerConfig::default()).await;
    // A listen stream needs SSE.
    let params = with_meta(json!({"notifications": {}}), json!({}));
    let r = s
        .post_with(
            None,
            json!({"jsonrpc": "2.0", "id": 1, "method": "subscriptions/listen", "params": params}),
            &headers("subscriptions/listen", None),
        )
        .await;
    assert_eq!(r.status(), 200, "both accepted");
    drop(r);
    let r = accepting(&s, "application/json", 1, "subscriptions/listen").await;
    expect_error(r, 406, "not_acceptable").await;
    // An SSE-only client gets even a bare response as an event.
    let r = accepting(&s, "text/event-stream", 2, "tools/list").await;
    assert_eq!(header(r.headers(), "content-type").as_deref(), Some("text/event-stream"));
    let e = SseReader::new(r).next().await.unwrap();
    assert_eq!(e.json().unwrap()["id"], 2);
    // A mirrored header given twice: a proxy might read the other one.
    let r = s
        .post_with(
            None,
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": with_meta(json!({}), json!({}))}),
            &[("mcp-protocol-version", V), ("mcp-method", "tools/list"), ("mcp-method", "tools/list")],
        )
        .await;
    let (status, b) = body(r).await;
    assert_eq!((status, &b["error"]["code"]), (400, &json!(-32020)), "{b}");
}

#[tokio::test]
async fn an_initialize_of_the_revision_creates_no_session_and_2025_limits_still_hold() {
    let config = ServerConfig { initialize_burst: 1, initialize_per_sec: 0.001, ..ServerConfig::default() };
    let s = start_served(config, gapless_server::ServeConfig::default()).await;
    let init = |meta: Value| {
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}, "_meta": meta}})
    };
    // With the 2026 header, whatever _meta says: never a session, and the
    // per-client initialize allowance is not spent.
    for meta in [json!({}), json!({"io.modelcontextprotocol/protocolVersion": "2025-11-25"}), meta()] {
        let r = s.post_with(None, init(meta.clone()), &headers("initialize", None)).await;
        assert!(header(r.headers(), "mcp-session-id").is_none(), "{meta}");
        assert!(r.status() == 400 || r.status() == 404, "{meta}: {}", r.status());
    }
    assert_eq!(s.server.hub().len(), 0);
    // A 2025 initialize is served, and the next is rate limited as before.
    assert_eq!(s.post(None, init(json!({}))).await.status(), 200);
    expect_error(s.post(None, init(json!({}))).await, 429, "rate_limited").await;
    assert_eq!(s.server.hub().len(), 1);
}

/// A `requestState` is bound to the caller it was issued to, over HTTP:
/// another caller's retry with it is refused, the same caller's is served,
/// and one past its lifetime is refused too.
#[tokio::test]
async fn a_request_state_serves_only_its_caller_and_only_in_time() {
    let config = ServerConfig { request_state_ttl: Duration::from_secs(2), ..ServerConfig::default() };
    let server = McpServer::builder(gapless_server_bin::demo::DemoHost)
        .config(config)
        .identity(|p| p.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build()
        .unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let tool = "test_input_required_result_multi_round";
    let call = |who: &'static str, extra: Value| {
        let s = &s;
        async move {
            let mut params = json!({"name": tool, "arguments": {}});
            for (k, v) in extra.as_object().into_iter().flatten() {
                params[k] = v.clone();
            }
            let params = with_meta(params, json!({"io.modelcontextprotocol/clientCapabilities": all_caps()}));
            let mut hs = headers("tools/call", Some(tool));
            hs.push(("authorization", who));
            body(
                s.post_with(
                    None,
                    json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": params}),
                    &hs,
                )
                .await,
            )
            .await
        }
    };
    let (_, r1) = call("alice", json!({})).await;
    let retry = json!({"inputResponses": {"step1": accept(json!({"name": "Ada"}))}, "requestState": r1["result"]["requestState"]});
    let (_, other) = call("bob", retry.clone()).await;
    assert_eq!(other["error"]["code"], -32602, "{other}");
    assert!(other["error"]["message"].as_str().unwrap().contains("another caller"), "{other}");
    let (_, own) = call("alice", retry.clone()).await;
    assert!(own["result"]["inputRequests"]["step2"].is_object(), "{own}");
    tokio::time::sleep(Duration::from_millis(2100)).await;
    let (_, late) = call("alice", retry).await;
    assert!(late["error"]["message"].as_str().unwrap().contains("expired"), "{late}");
}

/// A handler that asks for a name, then for a confirmation, and answers
/// with the keys of the params it was given.
struct Keys;

impl Host for Keys {
    fn capabilities(&self) -> Value {
        json!({"tools": {}})
    }

    fn handle(
        &self,
        _method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin(async move {
            let keys: Vec<String> = params.as_object().unwrap().keys().cloned().collect();
            let ask = |key: &str| {
                let schema = json!({"type": "object", "properties": {key: {"type": "string"}}});
                let mut m = serde_json::Map::new();
                m.insert(key.into(), json!({"method": "elicitation/create", "params": {"message": key, "requestedSchema": schema}}));
                m
            };
            let failed = |e: gapless_server::ClientRequestError| RpcError::invalid_params(e.to_string());
            let name = ctx.ask(ask("name")).await.map_err(failed)?;
            let more = ctx.ask(ask("more")).await.map_err(failed)?;
            Ok(
                json!({"content": [], "keys": keys, "name": name["name"]["content"]["name"], "more": more["more"]["content"]["more"]}),
            )
        })
    }
}

/// A retry's answers are taken out of the params the handler gets (moved,
/// not copied: an `inputResponses` may be megabytes), and what it brought
/// beyond what was asked is not carried into the next round's
/// `requestState`.
#[tokio::test]
async fn a_retrys_answers_leave_the_params_and_only_asked_ones_are_sealed() {
    let server = McpServer::builder(Keys).build().unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let (_, first) = call_with(&s, 1, "keys", json!({}), all_caps()).await;
    assert_eq!(first["result"]["resultType"], "input_required", "{first}");
    let mut responses = serde_json::Map::new();
    for i in 0..2000 {
        responses.insert(format!("junk{i}"), accept(json!({"name": "x".repeat(100)})));
    }
    responses.insert("name".into(), accept(json!({"name": "Ada"})));
    let retry = json!({"inputResponses": responses, "requestState": first["result"]["requestState"]});
    let (_, second) = call_with(&s, 2, "keys", retry, all_caps()).await;
    assert_eq!(second["result"]["resultType"], "input_required", "{second}");
    assert!(second["result"]["inputRequests"]["more"].is_object(), "{second}");
    let state = second["result"]["requestState"].as_str().unwrap();
    assert!(state.len() < 1024, "only the asked answer is sealed: {} bytes", state.len());
    let last = json!({"inputResponses": {"more": accept(json!({"more": "yes"}))}, "requestState": state});
    let (_, done) = call_with(&s, 3, "keys", last, all_caps()).await;
    assert_eq!(done["result"]["name"], "Ada", "{done}");
    assert_eq!(done["result"]["more"], "yes", "{done}");
    assert_eq!(done["result"]["keys"], json!(["_meta", "arguments", "name"]), "{done}");
}
