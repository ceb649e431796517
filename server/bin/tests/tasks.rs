//! The tasks extension of MCP 2026-07-28 (`docs/SPEC.md` §5.5), over
//! loopback with a real HTTP client, on the in-process task store: what the
//! official suite's scenarios do not check (the conformance run checks the
//! wire shapes): a task bound to its caller, expired told apart from
//! unknown, the per-client bound, input keys never reissued and answers
//! checked, a cancel that stops the work, a 2025 session that gets no
//! task, and status notifications on a listen stream.

mod common;
use common::*;
use futures_util::future::BoxFuture;
use gapless_server::host::{Host, RequestContext};
use gapless_server::tasks::{TaskOptions, EXTENSION};
use gapless_server::{McpServer, RpcError, ServerConfig};
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

const V: &str = "2026-07-28";

/// A 2026-07-28 client of `who` (an `Authorization` value the server takes
/// for the identity, or none), declaring the tasks extension and
/// elicitation.
struct Client<'a> {
    s: &'a TestServer,
    who: Option<&'a str>,
}

impl Client<'_> {
    async fn call(&self, method: &str, mut params: Value) -> Value {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": {"elicitation": {}, "extensions": {EXTENSION: {}}},
        });
        let name = params.get("name").or(params.get("taskId")).and_then(Value::as_str).map(str::to_owned);
        let mut hs = vec![("mcp-protocol-version", V), ("mcp-method", method)];
        if let Some(n) = &name {
            hs.push(("mcp-name", n));
        }
        if let Some(w) = self.who {
            hs.push(("authorization", w));
        }
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        let r = self.s.post_with(None, body, &hs).await;
        assert_eq!(header(r.headers(), "content-type").as_deref(), Some("application/json"));
        r.json().await.unwrap()
    }

    async fn tool(&self, name: &str, arguments: Value) -> Value {
        self.call("tools/call", json!({"name": name, "arguments": arguments})).await
    }

    async fn get(&self, task: &str) -> Value {
        self.call("tasks/get", json!({"taskId": task})).await
    }

    /// Polls `tasks/get` until `done` holds of the result (5 s at most).
    async fn until(&self, task: &str, done: impl Fn(&Value) -> bool) -> Value {
        for _ in 0..250 {
            let r = self.get(task).await;
            if done(&r["result"]) {
                return r["result"].clone();
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        panic!("task {task} never got there: {}", self.get(task).await);
    }
}

fn task_id(created: &Value) -> String {
    assert_eq!(created["result"]["resultType"], "task", "{created}");
    created["result"]["taskId"].as_str().unwrap().to_owned()
}

/// The demo server with identities from `Authorization`.
async fn with_identities(config: ServerConfig) -> TestServer {
    let server = McpServer::builder(gapless_server_bin::demo::DemoHost)
        .config(config)
        .identity(|p| p.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build()
        .unwrap();
    TestServer::at(serve(server.router()).await, "/mcp", server)
}

/// Another caller's poll, update or cancel finds no task (the same
/// -32602 as an id never issued), and changes nothing; the owner's works.
#[tokio::test]
async fn a_task_is_bound_to_its_caller() {
    let s = with_identities(ServerConfig::default()).await;
    let (alice, bob) = (Client { s: &s, who: Some("alice") }, Client { s: &s, who: Some("bob") });
    let anonymous = Client { s: &s, who: None };
    let id = task_id(&alice.tool("confirm_delete", json!({"filename": "a.txt"})).await);
    assert_eq!(id.len(), 32, "128 random bits in hex: {id}");
    alice.until(&id, |r| r["status"] == "input_required").await;
    for other in [&bob, &anonymous] {
        let got = other.get(&id).await;
        assert_eq!(
            (&got["error"]["code"], &got["error"]["data"]["reason"]),
            (&json!(-32602), &json!("unknown")),
            "{got}"
        );
        let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
        let upd = other.call("tasks/update", json!({"taskId": id, "inputResponses": answer})).await;
        assert_eq!(upd["error"]["code"], -32602, "{upd}");
        let cancel = other.call("tasks/cancel", json!({"taskId": id})).await;
        assert_eq!(cancel["error"]["code"], -32602, "{cancel}");
    }
    // Nothing of it changed.
    let mine = alice.get(&id).await;
    assert_eq!(mine["result"]["status"], "input_required", "{mine}");
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    let ack = alice.call("tasks/update", json!({"taskId": id, "inputResponses": answer})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    let done = alice.until(&id, |r| r["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "deleted a.txt", "{done}");
}

/// A task whose TTL ran out is refused as expired (-32602, reason
/// "expired"), not as unknown; an id never issued is unknown.
#[tokio::test]
async fn an_expired_task_is_told_apart_from_an_unknown_one() {
    let config = ServerConfig { task_ttl: Duration::from_millis(300), ..ServerConfig::default() };
    let s = start(config).await;
    let c = Client { s: &s, who: None };
    let created = c.tool("slow_compute", json!({"seconds": 5, "label": "x"})).await;
    assert_eq!(created["result"]["ttlMs"], 300, "{created}");
    let id = task_id(&created);
    assert_eq!(c.get(&id).await["result"]["status"], "working");
    tokio::time::sleep(Duration::from_millis(450)).await;
    let late = c.get(&id).await;
    assert_eq!(
        (&late["error"]["code"], &late["error"]["data"]["reason"]),
        (&json!(-32602), &json!("expired")),
        "{late}"
    );
    assert!(late["error"]["message"].as_str().unwrap().contains("expired"), "{late}");
    let never = c.get("0123456789abcdef0123456789abcdef").await;
    assert_eq!(never["error"]["data"]["reason"], "unknown", "{never}");
    // A cancel of the expired task says the same.
    let cancel = c.call("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(cancel["error"]["data"]["reason"], "expired", "{cancel}");
}

/// One client holds at most `max_tasks_per_client` unexpired tasks: one
/// more is refused to the handler (-31001 from the demo's task-only tool),
/// while another client still gets its own.
#[tokio::test]
async fn tasks_per_client_are_bounded() {
    let config = ServerConfig { max_tasks_per_client: 2, ..ServerConfig::default() };
    let s = with_identities(config).await;
    let (alice, bob) = (Client { s: &s, who: Some("alice") }, Client { s: &s, who: Some("bob") });
    for _ in 0..2 {
        task_id(&alice.tool("failing_job", json!({})).await);
    }
    let over = alice.tool("failing_job", json!({})).await;
    assert_eq!(over["error"]["code"], -31001, "{over}");
    assert!(over["error"]["message"].as_str().unwrap().contains("2 tasks"), "{over}");
    task_id(&bob.tool("failing_job", json!({})).await);
}

/// An application that asks the same key twice from one task, and counts
/// while it works (to see that a cancel stops it).
struct Asker {
    ticks: Arc<AtomicU64>,
}

fn elicit(field: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": format!("{field}?"), "requestedSchema": {
        "type": "object", "properties": {field: {"type": "string"}}, "required": [field]}}})
}

impl Host for Asker {
    fn capabilities(&self) -> Value {
        json!({"tools": {}, "extensions": {EXTENSION: {}}})
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        let ticks = Arc::clone(&self.ticks);
        Box::pin(async move {
            if method != "tools/call" {
                return Err(RpcError::method_not_found(&method));
            }
            if params["name"] == "race" {
                // An ask that ends the attempt, and a create racing it: the
                // attempt's answer is the input-required result, no task.
                let ask = ctx.ask(Map::from_iter([("k".to_owned(), elicit("word"))]));
                let (_, created) = tokio::join!(ask, ctx.create_task(TaskOptions::default()));
                return Err(RpcError::new(-32603, format!("unreachable: {created:?}")));
            }
            ctx.create_task(TaskOptions::default()).await?;
            match params["name"].as_str() {
                Some("twice") => {
                    let mut said = vec![];
                    for _ in 0..2 {
                        let a = ctx
                            .ask(Map::from_iter([("k".to_owned(), elicit("word"))]))
                            .await
                            .map_err(|e| RpcError::new(-32603, e.to_string()))?;
                        said.push(a["k"]["content"]["word"].as_str().unwrap_or_default().to_owned());
                    }
                    Ok(json!({"content": [{"type": "text", "text": said.join(" ")}]}))
                }
                Some("instant") => Ok(json!({"content": [{"type": "text", "text": "at once"}]})),
                Some("quiet") => {
                    // Nothing goes out once the handle has.
                    let sent =
                        ctx.notify("notifications/message", json!({"level": "info", "data": "x"})).await;
                    let closed = sent == Err(gapless_server::SendError::Closed);
                    Ok(json!({"content": [{"type": "text", "text": format!("closed={closed}")}]}))
                }
                Some("panic") => {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    panic!("the tool broke")
                }
                _ => loop {
                    ticks.fetch_add(1, Ordering::Relaxed);
                    tokio::time::sleep(Duration::from_millis(5)).await;
                },
            }
        })
    }
}

async fn asker() -> (TestServer, Arc<AtomicU64>) {
    let ticks = Arc::new(AtomicU64::new(0));
    let server = McpServer::builder(Asker { ticks: Arc::clone(&ticks) })
        .config(ServerConfig::default())
        .build()
        .unwrap();
    (TestServer::at(serve(server.router()).await, "/mcp", server), ticks)
}

/// A key is never reissued within a task: the second ask of "k" shows as
/// "k#2", and the handler still reads its answer under "k". An answer that
/// is not a result of its request's method is -32602 and leaves the
/// request outstanding; an answer to a key not outstanding is ignored.
#[tokio::test]
async fn input_keys_are_never_reissued_and_answers_are_checked() {
    let (s, _) = asker().await;
    let c = Client { s: &s, who: None };
    let id = task_id(&c.tool("twice", json!({})).await);
    let first = c.until(&id, |r| r["status"] == "input_required").await;
    assert_eq!(first["inputRequests"].as_object().unwrap().keys().collect::<Vec<_>>(), ["k"], "{first}");
    let bad =
        c.call("tasks/update", json!({"taskId": id, "inputResponses": {"k": {"action": "maybe"}}})).await;
    assert_eq!(bad["error"]["code"], -32602, "{bad}");
    assert_eq!(c.get(&id).await["result"]["inputRequests"]["k"]["method"], "elicitation/create");
    let answer = |w: &str| json!({"action": "accept", "content": {"word": w}});
    let ack = c
        .call(
            "tasks/update",
            json!({"taskId": id, "inputResponses": {"k": answer("hello"), "zz": answer("no")}}),
        )
        .await;
    assert_eq!(ack["result"], json!({"resultType": "complete", "_meta": ack["result"]["_meta"]}), "{ack}");
    let second = c.until(&id, |r| r["inputRequests"].get("k#2").is_some()).await;
    assert_eq!(second["inputRequests"].as_object().unwrap().len(), 1, "{second}");
    // The old key again: not outstanding, ignored.
    c.call("tasks/update", json!({"taskId": id, "inputResponses": {"k": answer("stale")}})).await;
    assert_eq!(c.get(&id).await["result"]["status"], "input_required");
    c.call("tasks/update", json!({"taskId": id, "inputResponses": {"k#2": answer("world")}})).await;
    let done = c.until(&id, |r| r["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "hello world", "{done}");
}

/// `tasks/cancel` makes the task cancelled at once and stops its work (the
/// handler's future is dropped: it counts no more), and the status stays.
#[tokio::test]
async fn cancel_stops_the_work() {
    let (s, ticks) = asker().await;
    let c = Client { s: &s, who: None };
    let id = task_id(&c.tool("spin", json!({})).await);
    tokio::time::sleep(Duration::from_millis(100)).await;
    assert!(ticks.load(Ordering::Relaxed) > 0, "the work runs after the handle went out");
    let ack = c.call("tasks/cancel", json!({"taskId": id})).await;
    assert_eq!(ack["result"]["resultType"], "complete", "{ack}");
    assert_eq!(c.get(&id).await["result"]["status"], "cancelled");
    tokio::time::sleep(Duration::from_millis(50)).await;
    let at = ticks.load(Ordering::Relaxed);
    tokio::time::sleep(Duration::from_millis(200)).await;
    assert_eq!(ticks.load(Ordering::Relaxed), at, "the work went on after the cancel");
    assert_eq!(c.get(&id).await["result"]["status"], "cancelled");
    // The operator's figures: one created, one cancelled, none running.
    let m = s.server.metrics_text();
    for line in [
        "gapless_tasks_created_total 1",
        "gapless_tasks_ended_total{status=\"cancelled\"} 1",
        "gapless_tasks_running 0",
    ] {
        assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
    }
}

/// A request of a 2025 session never becomes a task: the demo's task-only
/// tool answers -32021 naming the extension.
#[tokio::test]
async fn a_session_request_gets_no_task() {
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 2, "failing_job", json!({})).await;
    let mut sse = SseReader::new(r);
    let msg = loop {
        let e = sse.next().await.expect("a response");
        if let Some(m) = e.json().filter(|m| m.get("id").is_some()) {
            break m;
        }
    };
    assert_eq!(msg["error"]["code"], -32021, "{msg}");
    assert_eq!(msg["error"]["data"]["requiredCapabilities"]["extensions"][EXTENSION], json!({}), "{msg}");
}

/// `subscriptions/listen` with `taskIds` (the extension declared): the
/// acknowledgment names the caller's tasks among them (an unknown id is
/// left out), then each one's `DetailedTask` as it is and at every change
/// of its status, to its terminal one; without the extension declared it
/// is -32021.
#[tokio::test]
async fn task_status_notifications_on_a_listen_stream() {
    let s = start(ServerConfig::default()).await;
    let c = Client { s: &s, who: None };
    let id = task_id(&c.tool("confirm_delete", json!({"filename": "n.txt"})).await);
    c.until(&id, |r| r["status"] == "input_required").await;
    let s = &s;
    let id = &id;
    let listen = |caps: Value| {
        let params = json!({"notifications": {"taskIds": [id, "0000000000000000000000000000dead"]}, "_meta": {
            "io.modelcontextprotocol/protocolVersion": V,
            "io.modelcontextprotocol/clientCapabilities": caps,
        }});
        async move {
            let hs = [("mcp-protocol-version", V), ("mcp-method", "subscriptions/listen")];
            let body = json!({"jsonrpc": "2.0", "id": 9, "method": "subscriptions/listen", "params": params});
            s.post_with(None, body, &hs).await
        }
    };
    let refused: Value = listen(json!({})).await.json().await.unwrap();
    assert_eq!(refused["error"]["code"], -32021, "{refused}");

    let mut sse = SseReader::new(listen(json!({"extensions": {EXTENSION: {}}})).await);
    async fn next(sse: &mut SseReader) -> Value {
        let e = tokio::time::timeout(Duration::from_secs(5), sse.next()).await.expect("a message in time");
        e.and_then(|e| e.json()).expect("a JSON message")
    }
    let ack = next(&mut sse).await;
    assert_eq!(ack["method"], "notifications/subscriptions/acknowledged", "{ack}");
    assert_eq!(ack["params"]["notifications"]["taskIds"], json!([id]), "{ack}");
    let first = next(&mut sse).await;
    assert_eq!(
        (&first["method"], &first["params"]["status"]),
        (&json!("notifications/tasks"), &json!("input_required")),
        "{first}"
    );
    assert_eq!(first["params"]["taskId"], json!(id));
    assert_eq!(first["params"]["_meta"]["io.modelcontextprotocol/subscriptionId"], 9, "{first}");
    let answer = json!({"confirm": {"action": "accept", "content": {"confirm": true}}});
    c.call("tasks/update", json!({"taskId": id, "inputResponses": answer})).await;
    // Working again (unless the poll only caught its end), then completed
    // with its result; nothing after the terminal status.
    let mut n = next(&mut sse).await;
    if n["params"]["status"] == "working" {
        n = next(&mut sse).await;
    }
    assert_eq!(n["params"]["status"], "completed", "{n}");
    assert_eq!(n["params"]["result"]["content"][0]["text"], "deleted n.txt", "{n}");
    let more = tokio::time::timeout(Duration::from_millis(700), sse.next()).await;
    assert!(
        more.is_err() || more.unwrap().is_none_or(|e| e.json().is_none()),
        "a notification after the terminal one"
    );
}

/// A task whose handler panics is `failed` (-32603), not left `working`.
#[tokio::test]
async fn a_panicking_handler_fails_its_task() {
    let (s, _) = asker().await;
    let c = Client { s: &s, who: None };
    let id = task_id(&c.tool("panic", json!({})).await);
    let done = c.until(&id, |r| r["status"] != "working").await;
    assert_eq!(done["status"], "failed", "{done}");
    assert_eq!(done["error"]["code"], -32603, "{done}");
    assert!(done["error"]["message"].as_str().unwrap().contains("panicked"), "{done}");
}

/// A handler that returns the moment it became a task still hands out the
/// task, whose outcome is its result; once the handle is out, a
/// notification has nowhere to go (`SendError::Closed`) and the response
/// stays JSON.
#[tokio::test]
async fn a_task_that_ends_at_once_and_one_that_notifies() {
    let (s, _) = asker().await;
    let c = Client { s: &s, who: None };
    let id = task_id(&c.tool("instant", json!({})).await);
    let done = c.until(&id, |r| r["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "at once", "{done}");
    let id = task_id(&c.tool("quiet", json!({})).await); // Client::call checks the JSON content type
    let done = c.until(&id, |r| r["status"] == "completed").await;
    assert_eq!(done["result"]["content"][0]["text"], "closed=true", "{done}");
}

/// An ask that ends the attempt while a create races it: the answer is the
/// input-required result, and no task was created (none runs, none counted).
#[tokio::test]
async fn a_create_racing_an_ask_that_ended_the_attempt_makes_no_task() {
    let (s, _) = asker().await;
    let c = Client { s: &s, who: None };
    let r = c.tool("race", json!({})).await;
    assert_eq!(r["result"]["resultType"], "input_required", "{r}");
    let m = s.server.metrics_text();
    for line in ["gapless_tasks_created_total 0", "gapless_tasks_running 0"] {
        assert!(m.lines().any(|l| l == line), "{line} in\n{m}");
    }
}

/// An application that does not serve the extension (its capabilities do
/// not name it) has no tasks methods: -32601 (404).
#[tokio::test]
async fn no_tasks_methods_without_the_extension() {
    let server = McpServer::builder(gapless_server_bin::rmcp_conformance().unwrap())
        .config(ServerConfig::default())
        .build()
        .unwrap();
    let s = TestServer::at(serve(server.router()).await, "/mcp", server);
    let c = Client { s: &s, who: None };
    let r = c.get("0123456789abcdef0123456789abcdef").await;
    assert_eq!(r["error"]["code"], -32601, "{r}");
}
