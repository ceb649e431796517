//! rmcp handlers on gapless, driven over loopback HTTP by rmcp 3.11's own
//! streamable HTTP client: schemas, logging and progress on the call's own
//! stream, a cut stream resumed with every event once, cancellation reaching
//! the handler's token, server → client requests (sampling, roots) answered
//! by the client, a handler ending its SSE response early (SEP-1699) and the
//! client resuming it,
//! each session's handler dropped when the session ends, and a refused
//! resume: rmcp's own client hangs on it, `GaplessClient` returns it.

#![allow(deprecated)] // rmcp 3.11 marks the logging API deprecated (SEP-2577); it is the API.

#[path = "../examples/counter/mod.rs"]
mod counter;

use gapless_rmcp::{Config, RmcpHost, StreamableHttpService};
use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ClientRequest, ContentBlock,
    CreateMessageRequestParams, CreateMessageResult, Implementation, LoggingMessageNotificationParam,
    ProgressNotificationParam, SamplingMessage, ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, PeerRequestOptions, RequestContext, RunningService};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{
    schemars, tool, tool_handler, tool_router, ClientHandler, ErrorData, Peer, RoleClient, RoleServer,
    ServerHandler, ServiceExt,
};
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

const LIMIT: Duration = Duration::from_secs(20);

/// Serves `svc` at `/mcp` on a loopback port.
async fn serve(svc: StreamableHttpService) -> SocketAddr {
    let app = axum::Router::new().nest_service("/mcp", svc);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

async fn counter_server() -> SocketAddr {
    serve(StreamableHttpService::new(|| Ok(counter::Counter::new()), Config::default()).unwrap()).await
}

/// What the client saw, and how it answers sampling.
#[derive(Clone, Default)]
struct Seen {
    logs: Arc<Mutex<Vec<Value>>>,
    progress: Arc<Mutex<Vec<f64>>>,
}

impl ClientHandler for Seen {
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _: NotificationContext<RoleClient>,
    ) {
        self.logs.lock().unwrap().push(params.data);
    }

    async fn on_progress(&self, params: ProgressNotificationParam, _: NotificationContext<RoleClient>) {
        self.progress.lock().unwrap().push(params.progress);
    }

    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _: RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, ErrorData> {
        let asked = serde_json::to_value(&params.messages[0]).unwrap();
        let text = format!("the client read: {}", asked["content"]["text"].as_str().unwrap_or("?"));
        Ok(CreateMessageResult::new(SamplingMessage::assistant_text(text), "test-model".into()))
    }

    async fn list_roots(
        &self,
        _: RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, ErrorData> {
        Ok(rmcp::model::ListRootsResult::new(vec![rmcp::model::Root::new("file:///the/client/root")]))
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::builder().enable_roots().enable_sampling().build(),
            Implementation::new("gapless-rmcp-test", "0"),
        )
    }
}

async fn connect(addr: SocketAddr, seen: &Seen) -> RunningService<RoleClient, Seen> {
    let transport = StreamableHttpClientTransport::from_uri(format!("http://{addr}/mcp"));
    tokio::time::timeout(LIMIT, seen.clone().serve(transport)).await.expect("initialize in time").unwrap()
}

/// Waits (at most 10 s) until the client's handler saw `n` log
/// notifications and progress notifications, then a little longer for any
/// repeat: rmcp's client runs each notification's handler in a task of its
/// own, which may still run after the call returned.
async fn settle(seen: &Seen, logs: usize, progress: usize) {
    let t0 = tokio::time::Instant::now();
    while seen.logs.lock().unwrap().len() < logs || seen.progress.lock().unwrap().len() < progress {
        assert!(t0.elapsed() < Duration::from_secs(10), "notifications missing: {:?}", seqs(seen));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
}

/// The `data.seq` of every log notification the client saw, sorted (a
/// repeat shows as a duplicate, a loss as a hole).
fn seqs(seen: &Seen) -> Vec<u64> {
    let mut s: Vec<u64> = seen.logs.lock().unwrap().iter().map(|d| d["seq"].as_u64().unwrap()).collect();
    s.sort_unstable();
    s
}

fn args(v: Value) -> serde_json::Map<String, Value> {
    v.as_object().unwrap().clone()
}

fn text(r: &CallToolResult) -> String {
    r.content.iter().filter_map(|c| c.as_text().map(|t| t.text.clone())).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tools_list_carries_the_handlers_schemas_and_initialize_its_info() {
    let addr = counter_server().await;
    let client = connect(addr, &Seen::default()).await;
    let info = client.peer_info().expect("server info");
    assert_eq!(info.server_info.as_ref().expect("serverInfo").name, "rmcp-counter");
    assert!(info.instructions.as_deref().unwrap_or("").contains("counter"), "{info:?}");
    assert!(info.capabilities.tools.is_some() && info.capabilities.logging.is_some(), "{info:?}");
    let tools = client.list_tools(None).await.unwrap().tools;
    let names: Vec<&str> = tools.iter().map(|t| t.name.as_ref()).collect();
    for n in ["increment", "decrement", "get_value", "emit_events"] {
        assert!(names.contains(&n), "{names:?}");
    }
    let emit = tools.iter().find(|t| t.name == "emit_events").unwrap();
    let schema = Value::Object((*emit.input_schema).clone());
    for p in ["count", "interval_ms", "payload_bytes", "target"] {
        assert!(schema["properties"].get(p).is_some(), "{schema}");
    }
    assert_eq!(schema["required"], json!(["count"]), "{schema}");
    // The per-session state is the handler's own.
    for _ in 0..2 {
        client.call_tool(CallToolRequestParams::new("increment")).await.unwrap();
    }
    let v = client.call_tool(CallToolRequestParams::new("get_value")).await.unwrap();
    assert_eq!(text(&v), "2");
    client.cancel().await.unwrap();
}

/// POSTs `body` on a fresh connection and returns the whole response.
async fn raw_post(addr: SocketAddr, sid: Option<&str>, body: &Value) -> String {
    let body = body.to_string();
    let mut s = TcpStream::connect(addr).await.unwrap();
    let sid = sid.map(|s| format!("mcp-session-id: {s}\r\n")).unwrap_or_default();
    let req = format!(
        "POST /mcp HTTP/1.1\r\nhost: {addr}\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\n{sid}content-length: {}\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    s.write_all(req.as_bytes()).await.unwrap();
    let mut out = Vec::new();
    tokio::time::timeout(LIMIT, s.read_to_end(&mut out)).await.unwrap().unwrap();
    String::from_utf8_lossy(&out).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_calls_logging_and_progress_reach_the_client_on_its_own_stream() {
    let addr = counter_server().await;
    let seen = Seen::default();
    let client = connect(addr, &seen).await;
    let call = CallToolRequestParams::new("emit_events").with_arguments(args(json!({"count": 20})));
    let r = tokio::time::timeout(LIMIT, client.call_tool(call)).await.unwrap().unwrap();
    assert_eq!(text(&r), "emitted 20");
    // rmcp's client hands each notification to its handler in a task of
    // its own, so the handler may see them out of order; the wire order is
    // checked below.
    settle(&seen, 20, 20).await;
    assert_eq!(seqs(&seen), (1..=20).collect::<Vec<_>>());
    let mut progress = seen.progress.lock().unwrap().clone();
    progress.sort_by(f64::total_cmp);
    assert_eq!(progress, (1..=20).map(f64::from).collect::<Vec<_>>());
    client.cancel().await.unwrap();

    // On the wire: the POST's own SSE body carries the notifications, then
    // the result (rmcp's transport sends them on the standalone stream).
    let init = raw_post(
        addr,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
    )
    .await;
    let sid =
        init.lines().find_map(|l| l.strip_prefix("mcp-session-id: ")).expect("session id").trim().to_owned();
    let body = raw_post(
        addr,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
            "params": {"name": "emit_events", "arguments": {"count": 3}, "_meta": {"progressToken": "p"}}}),
    )
    .await;
    let data: Vec<Value> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str(d).ok())
        .collect();
    let kinds: Vec<String> = data
        .iter()
        .map(|m| match (&m["method"], &m["params"]["data"]["seq"]) {
            (Value::String(meth), Value::Number(n)) => format!("{meth}:{n}"),
            (Value::String(meth), _) => meth.clone(),
            _ => format!("result:{}", m["result"]["content"][0]["text"]),
        })
        .collect();
    assert_eq!(
        kinds,
        [
            "notifications/message:1",
            "notifications/progress",
            "notifications/message:2",
            "notifications/progress",
            "notifications/message:3",
            "notifications/progress",
            "result:\"emitted 3\""
        ],
        "{body}"
    );
    assert!(body.contains("retry: "), "a priming event first: {body}");
    // The handler's info messages go through the session's level: under
    // `warning` only the progress notifications and the result are sent.
    raw_post(
        addr,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 3, "method": "logging/setLevel", "params": {"level": "warning"}}),
    )
    .await;
    let body = raw_post(
        addr,
        Some(&sid),
        &json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call",
            "params": {"name": "emit_events", "arguments": {"count": 2}, "_meta": {"progressToken": "q"}}}),
    )
    .await;
    let methods: Vec<String> = body
        .lines()
        .filter_map(|l| l.strip_prefix("data: "))
        .filter_map(|d| serde_json::from_str::<Value>(d).ok())
        .map(|m| m["method"].as_str().unwrap_or("result").to_owned())
        .collect();
    assert_eq!(methods, ["notifications/progress", "notifications/progress", "result"], "{body}");
}

/// What the cutting proxy saw.
#[derive(Default)]
struct Cut {
    /// It cut a connection.
    done: AtomicBool,
    /// A request with a `Last-Event-ID` went upstream.
    resumed: AtomicBool,
}

/// A TCP proxy to `upstream` that cuts, once, the connection whose
/// response carries `marker`, right after forwarding it, and holds each
/// request with a `Last-Event-ID` for `hold` before it goes upstream.
async fn cutting_proxy(upstream: SocketAddr, marker: &'static str, hold: Duration) -> (SocketAddr, Arc<Cut>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let cut = Arc::new(Cut::default());
    let c = Arc::clone(&cut);
    tokio::spawn(async move {
        loop {
            let (down, _) = listener.accept().await.unwrap();
            let up = TcpStream::connect(upstream).await.unwrap();
            let cut = Arc::clone(&c);
            tokio::spawn(async move {
                let (mut dr, mut dw) = down.into_split();
                let (mut ur, mut uw) = up.into_split();
                let seen = Arc::clone(&cut);
                let to_up = tokio::spawn(async move {
                    let mut buf = vec![0u8; 16 * 1024];
                    while let Ok(n @ 1..) = dr.read(&mut buf).await {
                        if String::from_utf8_lossy(&buf[..n]).to_ascii_lowercase().contains("last-event-id:")
                        {
                            seen.resumed.store(true, Ordering::SeqCst);
                            tokio::time::sleep(hold).await;
                        }
                        if uw.write_all(&buf[..n]).await.is_err() {
                            break;
                        }
                    }
                });
                let mut buf = vec![0u8; 16 * 1024];
                let mut tail = String::new();
                loop {
                    let n = match ur.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => n,
                    };
                    if dw.write_all(&buf[..n]).await.is_err() {
                        break;
                    }
                    tail.push_str(&String::from_utf8_lossy(&buf[..n]));
                    if tail.contains(marker) && !cut.done.swap(true, Ordering::SeqCst) {
                        break; // both halves dropped: the client sees a reset stream
                    }
                    let keep = tail.len().saturating_sub(marker.len());
                    tail.drain(..keep);
                }
                to_up.abort();
            });
        }
    });
    (addr, cut)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cut_call_stream_resumes_with_every_event_once_and_the_call_returns() {
    let upstream = counter_server().await;
    let (proxy, cut) = cutting_proxy(upstream, "\"seq\":8}", Duration::ZERO).await;
    let seen = Seen::default();
    let client = connect(proxy, &seen).await;
    let call = CallToolRequestParams::new("emit_events")
        .with_arguments(args(json!({"count": 30, "interval_ms": 10})));
    let r = tokio::time::timeout(LIMIT, client.call_tool(call)).await.expect("the call returns").unwrap();
    assert!(cut.done.load(Ordering::SeqCst), "the proxy cut the stream");
    assert!(cut.resumed.load(Ordering::SeqCst), "the client resumed with Last-Event-ID");
    assert_eq!(text(&r), "emitted 30");
    settle(&seen, 30, 30).await;
    assert_eq!(seqs(&seen), (1..=30).collect::<Vec<_>>(), "every event once");
    client.cancel().await.unwrap();
}

/// A call whose stream is cut and whose cursor is evicted before the
/// client comes back (a ring of 16 events, 55 more published while the
/// resume is held up).
async fn refused_resume_setup() -> (SocketAddr, Arc<Cut>, CallToolRequestParams) {
    let config = Config {
        server: gapless_rmcp::gapless_server::ServerConfig::default()
            .with_ring(gapless::RingConfig::new(16, 1 << 20)),
        ..Config::default()
    };
    let upstream = serve(StreamableHttpService::new(|| Ok(counter::Counter::new()), config).unwrap()).await;
    // The resume waits 2 s at the proxy: the call's 60 events (300 ms)
    // are all out by then, and the cursor's evicted.
    let (proxy, cut) = cutting_proxy(upstream, "\"seq\":5}", Duration::from_secs(2)).await;
    let call = CallToolRequestParams::new("emit_events")
        .with_arguments(args(json!({"count": 60, "interval_ms": 5})));
    (proxy, cut, call)
}

/// rmcp's own client retries a refused resume with the same cursor and
/// leaves the call pending: what `GaplessClient` exists for (the next
/// test). Shown for 8 s, long past the server's refusal.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rmcps_own_client_hangs_on_a_refused_resume() {
    let (proxy, cut, call) = refused_resume_setup().await;
    let seen = Seen::default();
    let client = connect(proxy, &seen).await;
    let r = tokio::time::timeout(Duration::from_secs(8), client.call_tool(call)).await;
    assert!(cut.done.load(Ordering::SeqCst) && cut.resumed.load(Ordering::SeqCst), "cut, then resumed");
    assert!(r.is_err(), "rmcp 3.11's client returned: {r:?} (if it now surfaces refusals, update the docs)");
    drop(client);
}

/// `GaplessClient`: the refused resume answers the call, with the
/// refusal's kind and numbers, in bounded time (rmcp's first retry comes
/// within seconds).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_refused_resume_fails_the_call_with_the_refusal() {
    use gapless_rmcp::client::{GaplessClient, Refusal};
    use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
    let (proxy, cut, call) = refused_resume_setup().await;
    let seen = Seen::default();
    let http = GaplessClient::new();
    let transport = StreamableHttpClientTransport::with_client(
        http.clone(),
        StreamableHttpClientTransportConfig::with_uri(format!("http://{proxy}/mcp")),
    );
    let client = tokio::time::timeout(LIMIT, seen.clone().serve(transport)).await.unwrap().unwrap();
    let e = tokio::time::timeout(LIMIT, client.call_tool(call))
        .await
        .expect("the call returns")
        .expect_err("refused");
    assert!(cut.done.load(Ordering::SeqCst) && cut.resumed.load(Ordering::SeqCst), "cut, then resumed");
    let refusal = Refusal::from_error(&e).unwrap_or_else(|| panic!("not a refusal: {e:?}"));
    assert_eq!((refusal.status, refusal.kind.as_str()), (409, "gap_not_covered"), "{refusal:?}");
    assert!(refusal.body["missing"].as_u64().unwrap() > 0, "{refusal:?}");
    assert!(refusal.body["oldest"].as_str().is_some(), "{refusal:?}");
    assert_eq!(
        refusal.body["cursor"].as_str(),
        refusal.cursor.as_deref(),
        "the cursor the client resumed with"
    );
    assert_eq!(http.refusals(), vec![refusal]);
    // The session goes on: another call works.
    let call = CallToolRequestParams::new("emit_events").with_arguments(args(json!({"count": 2})));
    let r = tokio::time::timeout(LIMIT, client.call_tool(call)).await.expect("returns").unwrap();
    assert_eq!(text(&r), "emitted 2");
    client.cancel().await.unwrap();
}

/// Tools for the cancellation and sampling tests.
#[derive(Clone)]
struct Probe {
    /// Set when `wait_for_cancel`'s token fired.
    cancelled: Arc<AtomicBool>,
    started: Arc<tokio::sync::Notify>,
    /// The session's peer, from `on_initialized`.
    session: Arc<Mutex<Option<Peer<RoleServer>>>>,
    tool_router: ToolRouter<Self>,
}

#[derive(serde::Deserialize, schemars::JsonSchema)]
struct Question {
    /// What to ask the client's model.
    question: String,
}

#[tool_router]
impl Probe {
    #[tool(description = "Wait until cancelled (at most 30 s)")]
    async fn wait_for_cancel(
        &self,
        ct: tokio_util::sync::CancellationToken,
    ) -> Result<CallToolResult, ErrorData> {
        self.started.notify_one();
        tokio::select! {
            _ = ct.cancelled() => self.cancelled.store(true, Ordering::SeqCst),
            _ = tokio::time::sleep(Duration::from_secs(30)) => {}
        }
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }

    #[tool(description = "Ask the client's model")]
    async fn ask_model(
        &self,
        Parameters(q): Parameters<Question>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let r = ctx
            .peer
            .create_message(CreateMessageRequestParams::new(vec![SamplingMessage::user_text(q.question)], 50))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let answer =
            r.message.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(answer)]))
    }

    #[tool(description = "Ask the client's model through the session's peer (on the standalone stream)")]
    async fn ask_on_session(&self, Parameters(q): Parameters<Question>) -> Result<CallToolResult, ErrorData> {
        // `on_initialized` runs in a task of its own (as in rmcp): it may
        // finish after this request started.
        let mut peer = None;
        for _ in 0..200 {
            peer = self.session.lock().unwrap().clone();
            if peer.is_some() {
                break;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        let peer = peer.ok_or_else(|| ErrorData::internal_error("no session peer", None))?;
        let r = peer
            .create_message(CreateMessageRequestParams::new(vec![SamplingMessage::user_text(q.question)], 50))
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let answer =
            r.message.content.first().and_then(|c| c.as_text()).map(|t| t.text.clone()).unwrap_or_default();
        Ok(CallToolResult::success(vec![ContentBlock::text(answer)]))
    }

    #[tool(description = "The client's roots")]
    async fn client_roots(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let r = ctx.peer.list_roots().await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let uris: Vec<&str> = r.roots.iter().map(|r| r.uri.as_str()).collect();
        Ok(CallToolResult::success(vec![ContentBlock::text(uris.join(" "))]))
    }

    #[tool(description = "Log, end the SSE response (SEP-1699), log again, return")]
    async fn close_then_finish(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let log = |m: &'static str| {
            ctx.peer.notify_logging_message(LoggingMessageNotificationParam::new(
                rmcp::model::LoggingLevel::Info,
                json!(m),
            ))
        };
        log("before").await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        let stream = ctx
            .extensions
            .get::<gapless_rmcp::RequestStream>()
            .ok_or_else(|| ErrorData::internal_error("no gapless_rmcp::RequestStream", None))?;
        stream.close_sse_stream().await;
        log("after").await.map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text("done")]))
    }

    #[tool(description = "The client's name and protocol version, as the handler's peer knows them")]
    async fn whoami(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let info = ctx.peer.peer_info().ok_or_else(|| ErrorData::internal_error("no client info", None))?;
        Ok(CallToolResult::success(vec![ContentBlock::text(format!(
            "{} {}",
            info.client_info.name, info.protocol_version
        ))]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Probe {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().build())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        *self.session.lock().unwrap() = Some(context.peer);
    }
}

fn probe() -> (Probe, Arc<AtomicBool>, Arc<tokio::sync::Notify>) {
    let cancelled = Arc::new(AtomicBool::new(false));
    let started = Arc::new(tokio::sync::Notify::new());
    let p = Probe {
        cancelled: Arc::clone(&cancelled),
        started: Arc::clone(&started),
        session: Arc::default(),
        tool_router: Probe::tool_router(),
    };
    (p, cancelled, started)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_cancelled_call_cancels_the_handlers_token() {
    let (p, cancelled, started) = probe();
    let addr = serve(StreamableHttpService::new(move || Ok(p.clone()), Config::default()).unwrap()).await;
    let client = connect(addr, &Seen::default()).await;
    let handle = client
        .send_cancellable_request(
            ClientRequest::CallToolRequest(rmcp::model::Request::new(CallToolRequestParams::new(
                "wait_for_cancel",
            ))),
            PeerRequestOptions::no_options(),
        )
        .await
        .unwrap();
    tokio::time::timeout(LIMIT, started.notified()).await.expect("the tool started");
    assert!(!cancelled.load(Ordering::SeqCst));
    handle.cancel(Some("test".into())).await.unwrap();
    let t0 = tokio::time::Instant::now();
    while !cancelled.load(Ordering::SeqCst) {
        assert!(t0.elapsed() < Duration::from_secs(10), "the handler's token never fired");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_roots_request_of_the_handler_is_answered_by_the_client() {
    let (p, _, _) = probe();
    let addr = serve(StreamableHttpService::new(move || Ok(p.clone()), Config::default()).unwrap()).await;
    let client = connect(addr, &Seen::default()).await;
    let r = tokio::time::timeout(LIMIT, client.call_tool(CallToolRequestParams::new("client_roots")))
        .await
        .expect("the call returns")
        .unwrap();
    assert_eq!(text(&r), "file:///the/client/root");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_that_closes_its_stream_is_resumed_by_the_client_with_nothing_lost() {
    // rmcp has no call for a handler to end its SSE response (SEP-1699);
    // gapless-rmcp puts one in the context. rmcp's own client resumes the
    // ended stream with Last-Event-ID and gets the rest, the response
    // included, each event once.
    let (p, _, _) = probe();
    let svc = StreamableHttpService::new(move || Ok(p.clone()), Config::default()).unwrap();
    let server = svc.server().clone();
    let addr = serve(svc).await;
    let seen = Seen::default();
    let client = connect(addr, &seen).await;
    let r = tokio::time::timeout(LIMIT, client.call_tool(CallToolRequestParams::new("close_then_finish")))
        .await
        .expect("the call returns")
        .unwrap();
    assert_eq!(text(&r), "done");
    // Each notification's handler runs in a task of its own: wait for both
    // (10 s at most), then a little longer for a repeat; compare unordered.
    let t0 = tokio::time::Instant::now();
    while seen.logs.lock().unwrap().len() < 2 && t0.elapsed() < Duration::from_secs(10) {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    tokio::time::sleep(Duration::from_millis(100)).await;
    let mut logs: Vec<String> = seen.logs.lock().unwrap().iter().map(Value::to_string).collect();
    logs.sort();
    assert_eq!(logs, ["\"after\"", "\"before\""]);
    // The stream did end early: the client came back for the rest.
    let granted = server
        .metrics_text()
        .lines()
        .find(|l| l.starts_with("gapless_resumes_total{") && l.contains("outcome=\"ok\""))
        .map(|l| l.rsplit(' ').next().unwrap().to_owned());
    assert_eq!(granted.as_deref(), Some("1"), "{}", server.metrics_text());
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sampling_request_of_the_handler_is_answered_by_the_client() {
    let (p, _, _) = probe();
    let addr = serve(StreamableHttpService::new(move || Ok(p.clone()), Config::default()).unwrap()).await;
    let client = connect(addr, &Seen::default()).await;
    let call = CallToolRequestParams::new("ask_model").with_arguments(args(json!({"question": "ping?"})));
    let r = tokio::time::timeout(LIMIT, client.call_tool(call)).await.expect("the call returns").unwrap();
    assert_eq!(text(&r), "the client read: ping?");
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sessions_peer_works_outside_requests_and_knows_the_client() {
    // Notifications of the peer `on_initialized` got: the standalone stream.
    let addr = counter_server().await;
    let seen = Seen::default();
    let client = connect(addr, &seen).await;
    let call = CallToolRequestParams::new("emit_events")
        .with_arguments(args(json!({"count": 5, "target": "standalone"})));
    let r = tokio::time::timeout(LIMIT, client.call_tool(call)).await.unwrap().unwrap();
    assert_eq!(text(&r), "emitted 5");
    settle(&seen, 5, 0).await;
    assert_eq!(seqs(&seen), [1, 2, 3, 4, 5]);
    client.cancel().await.unwrap();

    // Its requests: on the standalone stream, answered by a POST; and the
    // client's `initialize` params, with the negotiated version.
    let (p, _, _) = probe();
    let addr = serve(StreamableHttpService::new(move || Ok(p.clone()), Config::default()).unwrap()).await;
    let client = connect(addr, &Seen::default()).await;
    let call =
        CallToolRequestParams::new("ask_on_session").with_arguments(args(json!({"question": "later?"})));
    let r = tokio::time::timeout(LIMIT, client.call_tool(call)).await.expect("the call returns").unwrap();
    assert_eq!(text(&r), "the client read: later?");
    let r = client.call_tool(CallToolRequestParams::new("whoami")).await.unwrap();
    assert_eq!(text(&r), format!("gapless-rmcp-test {}", gapless_server::SUPPORTED_VERSIONS[0]));
    client.cancel().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_handler_whose_session_skipped_initialized_still_gets_on_initialized() {
    // As on a cluster node that never saw the client's
    // notifications/initialized: the first message is a request.
    let addr = counter_server().await;
    let init = raw_post(
        addr,
        None,
        &json!({"jsonrpc": "2.0", "id": 1, "method": "initialize",
            "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "raw", "version": "0"}}}),
    )
    .await;
    let sid =
        init.lines().find_map(|l| l.strip_prefix("mcp-session-id: ")).expect("session id").trim().to_owned();
    // The first request makes the handler; its on_initialized runs in a
    // task of its own (as rmcp runs it), so the call may come before it.
    let t0 = tokio::time::Instant::now();
    let body = loop {
        let body = raw_post(
            addr,
            Some(&sid),
            &json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                "params": {"name": "emit_events", "arguments": {"count": 1, "target": "standalone"}}}),
        )
        .await;
        if !body.contains("no peer yet") || t0.elapsed() > Duration::from_secs(5) {
            break body;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(body.contains("emitted 1"), "{body}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sessions_handler_lives_until_the_session_ends() {
    let host = RmcpHost::new(|| Ok(counter::Counter::new())).unwrap();
    let server = gapless_server::McpServer::builder(host.clone()).path("/").build().unwrap();
    let app = axum::Router::new().nest_service("/mcp", server.router());
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    assert_eq!(host.live_sessions(), 0);
    let client = connect(addr, &Seen::default()).await;
    client.call_tool(CallToolRequestParams::new("increment")).await.unwrap();
    assert_eq!(host.live_sessions(), 1);
    // rmcp's client DELETEs its session when it closes.
    client.cancel().await.unwrap();
    let t0 = tokio::time::Instant::now();
    while host.live_sessions() != 0 {
        assert!(t0.elapsed() < Duration::from_secs(10), "the handler outlived its session");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
