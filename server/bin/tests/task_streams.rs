//! Task event streams (`tasks/stream`, the draft SEP-2694; `docs/SPEC.md`
//! §5.6) over loopback with a real HTTP client, on the in-process store:
//! every event after the cursor, once, in order, then live, then the empty
//! result when the task ends; `events_gone` exactly when an event after
//! the cursor is no longer kept; the params, the authorization of
//! `tasks/get`, one stream per client and task, a cancelled stream that
//! leaves its task alone, a drop at every position resumed through the
//! client guard (`gapless::task_stream`), and the host API's refusals.

mod common;
use common::*;
use futures_util::future::BoxFuture;
use gapless::task_stream::{TaskStreamGuard, Verdict};
use gapless_server::host::{Host, RequestContext};
use gapless_server::tasks::{TaskEventError, TaskOptions, EVENT_METHOD, EXTENSION, RELATED_TASK};
use gapless_server::{McpServer, RpcError, ServerConfig};
use serde_json::{json, Value};
use std::time::Duration;

const V: &str = "2026-07-28";

/// A 2026-07-28 client of `who` (an `Authorization` value the server takes
/// for the identity, or none), declaring the tasks extension unless
/// `bare`.
#[derive(Clone, Copy)]
struct Client<'a> {
    s: &'a TestServer,
    who: Option<&'a str>,
    bare: bool,
    /// Another HTTP client than the server's (one over HTTP/2).
    http: Option<&'a reqwest::Client>,
}

/// What a `tasks/stream` answered: the events' notifications, then the
/// response (`None`: the stream ended without one).
struct Streamed {
    events: Vec<Value>,
    response: Option<Value>,
}

impl Streamed {
    fn seqs(&self) -> Vec<u64> {
        self.events.iter().map(|e| e["params"]["seq"].as_u64().unwrap()).collect()
    }
}

impl<'a> Client<'a> {
    fn new(s: &'a TestServer) -> Self {
        Client { s, who: None, bare: false, http: None }
    }

    async fn send(&self, method: &str, mut params: Value, accept: &str) -> reqwest::Response {
        let caps = if self.bare { json!({}) } else { json!({"extensions": {EXTENSION: {}}}) };
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": caps,
        });
        let name = params.get("name").or(params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let mut r = self
            .http
            .unwrap_or(&self.s.http)
            .post(&self.s.url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-protocol-version", V)
            .header("mcp-method", method);
        if let Some(n) = &name {
            r = r.header("mcp-name", n);
        }
        if let Some(w) = self.who {
            r = r.header("authorization", w);
        }
        r.body(body.to_string()).send().await.unwrap()
    }

    async fn call(&self, method: &str, params: Value) -> Value {
        self.send(method, params, "application/json").await.json().await.unwrap()
    }

    async fn task(&self, tool: &str, arguments: Value) -> String {
        let created = self.call("tools/call", json!({"name": tool, "arguments": arguments})).await;
        assert_eq!(created["result"]["resultType"], "task", "{created}");
        created["result"]["taskId"].as_str().unwrap().to_owned()
    }

    async fn status(&self, task: &str) -> Value {
        self.call("tasks/get", json!({"taskId": task})).await["result"]["status"].clone()
    }

    /// Opens `tasks/stream` with `params` (SSE accepted).
    async fn open(&self, params: Value) -> reqwest::Response {
        self.send("tasks/stream", params, ACCEPT_BOTH).await
    }

    /// Reads a `tasks/stream` response to its end (or `limit` events).
    async fn read(r: reqwest::Response, limit: usize) -> (Streamed, Option<SseReader>) {
        let json = header(r.headers(), "content-type").as_deref() == Some("application/json");
        if json {
            return (Streamed { events: vec![], response: Some(r.json().await.unwrap()) }, None);
        }
        let mut sse = SseReader::new(r);
        let mut events = vec![];
        while events.len() < limit {
            let Some(e) = sse.next().await else { return (Streamed { events, response: None }, None) };
            let m = e.json().expect("JSON messages");
            if m["method"] == EVENT_METHOD {
                events.push(m);
            } else {
                assert!(m.get("id").is_some(), "only task events and the response: {m}");
                return (Streamed { events, response: Some(m) }, None);
            }
        }
        (Streamed { events, response: None }, Some(sse))
    }

    async fn stream(&self, params: Value) -> Streamed {
        Self::read(self.open(params).await, usize::MAX).await.0
    }
}

/// The empty result of a `tasks/stream` that ended normally.
fn assert_ended(s: &Streamed) {
    let r = s.response.as_ref().expect("a response");
    assert_eq!(r["result"]["resultType"], "complete", "{r}");
    let mut fields: Vec<&str> = r["result"].as_object().unwrap().keys().map(String::as_str).collect();
    fields.sort_unstable();
    assert_eq!(fields, ["_meta", "resultType"], "an empty result: {r}");
}

fn assert_gone(s: &Streamed, task: &str, earliest: u64) {
    let r = s.response.as_ref().expect("a response");
    assert_eq!(r["error"]["code"], -32010, "{r}");
    assert_eq!(r["error"]["data"], json!({"reason": "events_gone", "taskId": task, "earliestSeq": earliest}));
}

/// Every event of a live task, from the start, then the empty result when
/// it completes; each is the draft's shape. Afterwards the terminal task
/// replays after a cursor and ends at once, and a cursor at its last event
/// gets the empty result at once, as JSON.
#[tokio::test]
async fn a_stream_follows_a_task_live_then_replays_after_a_cursor() {
    let s = start(ServerConfig::default()).await;
    let c = Client::new(&s);
    let discovered = c.call("server/discover", json!({})).await;
    assert_eq!(
        discovered["result"]["capabilities"]["extensions"][EXTENSION]["eventStreams"],
        json!({}),
        "{discovered}"
    );
    let task = c.task("task_events", json!({"count": 50, "interval_ms": 5, "payload_bytes": 10})).await;
    let live = c.stream(json!({"taskId": task})).await;
    assert_eq!(live.seqs(), (0..50).collect::<Vec<_>>(), "every event once, in order");
    for e in &live.events {
        let p = &e["params"];
        assert_eq!(p["taskId"], task.as_str());
        assert_eq!(p["type"], "dev.gapless.demo.tick");
        assert_eq!(p["payload"], json!({"i": p["seq"], "pad": "xxxxxxxxxx"}));
        assert_eq!(p["_meta"][RELATED_TASK], json!({"taskId": task}), "{e}");
    }
    assert_ended(&live);
    assert_eq!(c.status(&task).await, "completed", "the end came with the terminal status");
    let done = c.call("tasks/get", json!({"taskId": task})).await;
    assert_eq!(done["result"]["result"]["content"][0]["text"], "emitted 50", "{done}");
    let tail = c.stream(json!({"taskId": task, "after": 44})).await;
    assert_eq!(tail.seqs(), [45, 46, 47, 48, 49]);
    assert_ended(&tail);
    let r = c.open(json!({"taskId": task, "after": 49})).await;
    assert_eq!(header(r.headers(), "content-type").as_deref(), Some("application/json"), "at once");
    let (none, _) = Client::read(r, usize::MAX).await;
    assert!(none.events.is_empty());
    assert_ended(&none);
}

/// A stream cut mid-task and resumed with the last seq it processed gets
/// exactly what followed: no hole, no duplicate.
#[tokio::test]
async fn a_cut_stream_resumes_after_its_cursor() {
    let s = start(ServerConfig::default()).await;
    let c = Client::new(&s);
    let task = c.task("task_events", json!({"count": 200, "interval_ms": 2})).await;
    let (first, sse) = Client::read(c.open(json!({"taskId": task})).await, 30).await;
    assert_eq!(first.seqs(), (0..30).collect::<Vec<_>>());
    drop(sse); // the connection breaks
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(c.status(&task).await, "working", "closing the stream does not cancel the task");
    let rest = c.stream(json!({"taskId": task, "after": 29})).await;
    assert_eq!(rest.seqs(), (30..200).collect::<Vec<_>>());
    assert_ended(&rest);
}

/// Follows `task` through `guard` (`gapless::task_stream`, the client's
/// side) until a stream ends with the empty result: stream `i` (from 0) is
/// opened with the guard's `after` and dropped after `cut(i)` events.
/// Returns the seqs processed, in order, and how many streams it took.
async fn follow(
    c: &Client<'_>,
    guard: &mut TaskStreamGuard,
    cut: impl Fn(usize) -> usize,
) -> (Vec<u64>, usize) {
    let mut processed = vec![];
    for i in 0.. {
        let mut params = json!({"taskId": guard.task_id()});
        if let Some(after) = guard.new_stream() {
            params["after"] = json!(after);
        }
        let (got, _dropped) = Client::read(c.open(params).await, cut(i)).await;
        for e in &got.events {
            let p = &e["params"];
            let seq = p["seq"].as_u64().unwrap();
            match guard.on_event(p["taskId"].as_str().unwrap(), seq) {
                Ok(Verdict::Process(ticket)) => {
                    assert_eq!(p["payload"]["i"], seq, "processing seq {seq}");
                    processed.push(seq);
                    guard.processed(ticket).unwrap();
                }
                Ok(Verdict::Duplicate(_)) => {}
                Err(e) => panic!("stream {i} after {:?}: {e}", guard.after()),
            }
        }
        if got.response.is_some() {
            assert_ended(&got);
            guard.on_end().unwrap();
            return (processed, i + 1);
        }
        // Else `_dropped` (the connection) is dropped here: the cut.
    }
    unreachable!()
}

/// A drop at every position of a 200-event stream, resumed with `after`
/// (issue 33): a live task followed with a cut after every event (200
/// reconnections), then, on the completed task, for every k in 0..=200: k
/// events, a drop, a resume. Each time every seq comes exactly once, in
/// order (the client's guard refuses a hole, a repeat or a step back), and
/// the stream ends with the empty result.
#[tokio::test]
async fn a_drop_at_every_position_of_a_200_event_stream_resumes_exactly() {
    let s = start(ServerConfig::default()).await;
    let c = Client::new(&s);
    let all: Vec<u64> = (0..200).collect();
    let task = c.task("task_events", json!({"count": 200, "interval_ms": 1})).await;
    let mut live = TaskStreamGuard::new(task.as_str());
    let (seqs, streams) = follow(&c, &mut live, |_| 1).await;
    assert_eq!(seqs, all, "live, one event per connection");
    assert_eq!(streams, 201, "200 cuts, then the end at once");
    assert_eq!((live.after(), live.lost()), (Some(199), 0));
    assert_eq!(c.status(&task).await, "completed");
    for k in 0..=200 {
        let mut guard = TaskStreamGuard::new(task.as_str());
        let (seqs, streams) = follow(&c, &mut guard, |i| if i == 0 { k } else { usize::MAX }).await;
        assert_eq!(seqs, all, "dropped after {k} events");
        assert_eq!(streams, 2, "dropped after {k} events");
    }
}

/// With 8 events kept of 20: a cursor whose next event is gone is
/// `events_gone` with the earliest kept; one right before it replays all
/// 8; a late joiner without a cursor gets the 8.
#[tokio::test]
async fn events_gone_exactly_when_an_event_after_the_cursor_is_not_kept() {
    let s = start(ServerConfig { task_events_max: 8, ..ServerConfig::default() }).await;
    let c = Client::new(&s);
    let task = c.task("task_events", json!({"count": 20})).await;
    for _ in 0..250 {
        if c.status(&task).await == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_gone(&c.stream(json!({"taskId": task, "after": 10})).await, &task, 12);
    assert_gone(&c.stream(json!({"taskId": task, "after": 0})).await, &task, 12);
    let from = c.stream(json!({"taskId": task, "after": 11})).await;
    assert_eq!(from.seqs(), (12..20).collect::<Vec<_>>());
    assert_ended(&from);
    let late = c.stream(json!({"taskId": task})).await;
    assert_eq!(late.seqs(), (12..20).collect::<Vec<_>>(), "the earliest kept, then the end");
    assert_ended(&late);
}

/// A reader that falls behind what a live task keeps is told
/// `events_gone` with the earliest kept, never skipped forward.
#[tokio::test]
async fn a_reader_behind_the_window_gets_events_gone_not_a_skip() {
    let config = ServerConfig { task_events_max: 16, ..ServerConfig::default() };
    let server = McpServer::builder(Emitter).config(config).build().unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let c = Client::new(&s);
    let task = c.task("flood", json!({})).await;
    // Open, and read seq 0; then read nothing while the task emits 100 000
    // events (more than loopback buffers hold).
    let (first, sse) = Client::read(c.open(json!({"taskId": task})).await, 1).await;
    assert_eq!(first.seqs(), [0]);
    for _ in 0..500 {
        if c.status(&task).await == "completed" {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut sse = sse.unwrap();
    let mut seqs = vec![0];
    let end = loop {
        let m = sse.next().await.expect("an explicit end").json().unwrap();
        match m["params"]["seq"].as_u64() {
            Some(n) => seqs.push(n),
            None => break m,
        }
    };
    assert_eq!(seqs, (0..seqs.len() as u64).collect::<Vec<_>>(), "what came is dense from 0");
    assert!(seqs.len() < 100_001, "the reader fell behind");
    assert_eq!(end["error"]["code"], -32010, "{end}");
    let earliest = end["error"]["data"]["earliestSeq"].as_u64().unwrap();
    assert!(earliest > seqs.len() as u64, "the next event it needed is gone: {end}");
}

/// Bad params are -32602, the authorization is `tasks/get`'s (another
/// caller's task is unknown), the extension must be declared, and the
/// stream must be accepted as SSE.
#[tokio::test]
async fn params_and_authorization() {
    let server = McpServer::builder(gapless_server_bin::demo::DemoHost)
        .identity(|p| p.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build()
        .unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let alice = Client { s: &s, who: Some("alice"), bare: false, http: None };
    let bob = Client { who: Some("bob"), ..alice };
    let task = alice.task("task_events", json!({"count": 3, "interval_ms": 5000})).await;
    for after in [json!(-1), json!(1.5), json!("0"), json!(true)] {
        let r = alice.stream(json!({"taskId": task, "after": after})).await;
        let e = r.response.unwrap();
        assert_eq!(e["error"]["code"], -32602, "after {after}: {e}");
    }
    let e = alice.stream(json!({"task": task})).await.response.unwrap();
    assert_eq!(e["error"]["code"], -32602, "{e}");
    let e = alice.stream(json!({"taskId": task, "after": 5})).await.response.unwrap();
    assert_eq!(
        (&e["error"]["code"], &e["error"]["data"]["reason"]),
        (&json!(-32602), &json!("after_ahead")),
        "{e}"
    );
    for (who, id) in [(bob, task.as_str()), (alice, "0123456789abcdef0123456789abcdef")] {
        let e = who.stream(json!({"taskId": id})).await.response.unwrap();
        assert_eq!(
            (&e["error"]["code"], &e["error"]["data"]["reason"]),
            (&json!(-32602), &json!("unknown")),
            "{e}"
        );
    }
    let e = Client { bare: true, ..alice }.stream(json!({"taskId": task})).await.response.unwrap();
    assert_eq!(e["error"]["code"], -32021, "{e}");
    let r = alice.send("tasks/stream", json!({"taskId": task}), "application/json").await;
    assert_eq!(r.status(), 406);
    let e = alice.stream(json!({"taskId": task, "after": null})).await.response.unwrap();
    assert_eq!(e["error"]["code"], -32602, "after null: {e}");
}

/// One `tasks/stream` per task and connection (the draft's rule; HTTP/2
/// carries several requests on one connection): a second on the same
/// connection is refused while the first is open, and free once it ended;
/// a resume on another connection (after a cut the server has not seen
/// yet) is never refused. Neither cancels the task.
#[tokio::test]
async fn one_stream_per_task_and_connection() {
    let s = start_served(ServerConfig::default(), gapless_server::ServeConfig::default()).await;
    let h2 = reqwest::Client::builder().http2_prior_knowledge().build().unwrap();
    let one = Client { http: Some(&h2), ..Client::new(&s) };
    let task = one.task("task_events", json!({"count": 3, "interval_ms": 1500})).await;
    let (first, open) = Client::read(one.open(json!({"taskId": task})).await, 1).await;
    assert_eq!(first.seqs(), [0]);
    let e = one.stream(json!({"taskId": task})).await.response.unwrap();
    assert_eq!(e["error"]["code"], -32602, "a second stream on the connection: {e}");
    // Another connection (the server's own client opens one per request).
    let other = Client::new(&s);
    let (elsewhere, _kept) = Client::read(other.open(json!({"taskId": task})).await, 1).await;
    assert_eq!(elsewhere.seqs(), [0], "a resume on another connection is served");
    drop(open);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let (again, _open) = Client::read(one.open(json!({"taskId": task, "after": 0})).await, 1).await;
    assert_eq!(again.seqs(), [1], "free again on the connection once the first was closed");
    assert_eq!(one.status(&task).await, "working");
}

/// A stream with nothing to send yet starts after one keep-alive period
/// (a comment), so that a client and a proxy see a live response, then
/// carries the next event when it comes.
#[tokio::test]
async fn a_quiet_stream_starts_with_a_keep_alive() {
    let s = start(ServerConfig { keepalive: Duration::from_millis(200), ..ServerConfig::default() }).await;
    let c = Client::new(&s);
    let task = c.task("task_events", json!({"count": 2, "interval_ms": 1500})).await;
    let r = tokio::time::timeout(Duration::from_millis(1000), c.open(json!({"taskId": task, "after": 0})))
        .await
        .expect("the response began before the next event");
    assert_eq!(header(r.headers(), "content-type").as_deref(), Some("text/event-stream"));
    let (rest, _) = Client::read(r, usize::MAX).await;
    assert_eq!(rest.seqs(), [1]);
    assert_ended(&rest);
}

/// `tasks/cancel` ends the task's open streams with the empty result, and
/// a task that expires ends them too.
#[tokio::test]
async fn a_cancelled_or_expired_task_ends_its_streams() {
    let s = start(ServerConfig { task_ttl: Duration::from_millis(1500), ..ServerConfig::default() }).await;
    let c = Client::new(&s);
    let cancelled = c.task("task_events", json!({"count": 1000, "interval_ms": 50})).await;
    let (first, sse) = Client::read(c.open(json!({"taskId": cancelled})).await, 1).await;
    assert_eq!(first.seqs(), [0]);
    let ack = c.call("tasks/cancel", json!({"taskId": cancelled})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let mut sse = sse.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(5), async {
        loop {
            let m = sse.next().await.expect("the response").json().unwrap();
            if m.get("id").is_some() {
                break m;
            }
        }
    })
    .await
    .expect("the stream ended after the cancel");
    assert_eq!(end["result"]["resultType"], "complete", "{end}");
    // Expiry: a task still working when its TTL runs out.
    let expiring = c.task("task_events", json!({"count": 1000, "interval_ms": 50})).await;
    let r = c.open(json!({"taskId": expiring})).await;
    let got = tokio::time::timeout(Duration::from_secs(10), Client::read(r, usize::MAX)).await;
    let (got, _) = got.expect("the stream ended when the task expired");
    assert!(!got.events.is_empty() && got.events.len() < 1000, "{}", got.events.len());
    assert_ended(&got);
}

/// An application whose tool tries a bad event type and a non-object
/// payload (each refused at the call, nothing sent), then emits one good
/// event; a request that is not a task yet has no stream. Its `flood`
/// emits one event, waits, then 100 000 at once.
struct Emitter;

impl Host for Emitter {
    fn capabilities(&self) -> Value {
        json!({"tools": {}, "extensions": {EXTENSION: {}}})
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin(async move {
            if method != "tools/call" {
                return Err(RpcError::method_not_found(&method));
            }
            if params["name"] == "flood" {
                ctx.create_task(TaskOptions::default()).await?;
                ctx.emit_task_event("com.example.step", json!({})).unwrap();
                tokio::time::sleep(Duration::from_millis(500)).await;
                for _ in 0..100_000 {
                    ctx.emit_task_event("com.example.step", json!({})).unwrap();
                }
                return Ok(json!({"content": []}));
            }
            let before = ctx.emit_task_event("com.example.step", json!({}));
            ctx.create_task(TaskOptions::default()).await?;
            let refused = [
                ctx.emit_task_event("step", json!({})),
                ctx.emit_task_event("content.partial", json!({})),
                ctx.emit_task_event("io.modelcontextprotocol.status", json!({})),
                ctx.emit_task_event("com.example.step", json!("text")),
                ctx.emit_task_event("com.example.step", json!({"x": "y".repeat(70_000)})),
            ];
            let good = ctx.emit_task_event("com.example.step", json!({"ok": true}));
            let said = format!("before={before:?} refused={refused:?} good={good:?}");
            Ok(json!({"content": [{"type": "text", "text": said}]}))
        })
    }
}

#[tokio::test]
async fn the_host_api_refuses_bad_events_at_the_call() {
    let server = McpServer::builder(Emitter).build().unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let c = Client::new(&s);
    let task = c.task("any", json!({})).await;
    let all = c.stream(json!({"taskId": task})).await;
    assert_eq!(all.seqs(), [0], "only the good one was sent, as seq 0");
    assert_eq!(all.events[0]["params"]["payload"], json!({"ok": true}));
    assert_ended(&all);
    let done = c.call("tasks/get", json!({"taskId": task})).await;
    let said = done["result"]["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(said.starts_with(&format!("before={:?}", Err::<u64, _>(TaskEventError::NotATask))), "{said}");
    let too_large = TaskEventError::TooLarge { len: 70_008, max: 64 << 10 };
    assert!(said.contains(&format!("{:?}", Err::<u64, _>(too_large))), "{said}");
    assert_eq!(said.matches("InvalidType").count(), 3, "{said}");
    assert!(said.contains("NotAnObject"), "{said}");
    assert!(said.ends_with("good=Ok(0)"), "{said}");
}

/// An rmcp handler on gapless-rmcp (rmcp 3.11 has no call for a gapless
/// task): it makes its 2026-07-28 call a task and emits its events through
/// the `RequestStream` gapless puts in its context.
mod rmcp_tasks {
    use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
    use rmcp::model::{CallToolResult, ContentBlock, ServerCapabilities, ServerConfig};
    use rmcp::service::RequestContext;
    use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler};

    #[derive(Debug, serde::Deserialize, schemars::JsonSchema)]
    pub(super) struct Args {
        count: u64,
    }

    #[derive(Clone)]
    pub(super) struct Ticker {
        tool_router: ToolRouter<Self>,
    }

    #[tool_router]
    impl Ticker {
        pub(super) fn new() -> Self {
            Ticker { tool_router: Self::tool_router() }
        }

        #[tool(description = "A task that emits `count` task events")]
        async fn ticks(
            &self,
            Parameters(args): Parameters<Args>,
            ctx: RequestContext<RoleServer>,
        ) -> Result<CallToolResult, ErrorData> {
            let fail = |e: String| ErrorData::internal_error(e, None);
            let stream = ctx.extensions.get::<gapless_rmcp::RequestStream>().cloned();
            let stream = stream.ok_or_else(|| fail("no gapless transport".into()))?;
            stream.create_task(Default::default()).await.map_err(|e| fail(e.to_string()))?;
            for i in 0..args.count {
                tokio::time::sleep(std::time::Duration::from_millis(2)).await;
                let seq = stream
                    .emit_task_event("com.example.tick", serde_json::json!({"i": i}))
                    .map_err(|e| fail(e.to_string()))?;
                assert_eq!(seq, i);
            }
            let bad = stream.emit_task_event("tick", serde_json::json!({}));
            assert!(bad.is_err(), "an unprefixed type is refused at the call");
            Ok(CallToolResult::success(vec![ContentBlock::text(format!("ticked {}", args.count))]))
        }
    }

    #[tool_handler(router = self.tool_router)]
    impl ServerHandler for Ticker {
        fn get_info(&self) -> ServerConfig {
            ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_tasks().build())
        }
    }
}

#[tokio::test]
async fn an_rmcp_handler_on_gapless_rmcp_emits_task_events() {
    let host = gapless_rmcp::RmcpHost::new(|| Ok(rmcp_tasks::Ticker::new())).unwrap();
    let server = McpServer::builder(host).config(ServerConfig::default()).build().unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let c = Client::new(&s);
    let task = c.task("ticks", json!({"count": 40})).await;
    let (first, sse) = Client::read(c.open(json!({"taskId": task})).await, 10).await;
    assert_eq!(first.seqs(), (0..10).collect::<Vec<_>>());
    drop(sse);
    let rest = c.stream(json!({"taskId": task, "after": 9})).await;
    assert_eq!(rest.seqs(), (10..40).collect::<Vec<_>>());
    for e in first.events.iter().chain(&rest.events) {
        assert_eq!(
            (&e["params"]["type"], &e["params"]["payload"]["i"]),
            (&json!("com.example.tick"), &e["params"]["seq"])
        );
    }
    assert_ended(&rest);
    let done = c.call("tasks/get", json!({"taskId": task})).await;
    assert_eq!(done["result"]["status"], "completed", "{done}");
    assert_eq!(done["result"]["result"]["content"][0]["text"], "ticked 40", "{done}");
}
