//! Follows a task's event stream (`tasks/stream`, the draft SEP-2694;
//! `docs/SPEC.md` §5.6) across dropped connections with the client guard
//! `gapless::task_stream` (from the std-only crate `gapless-wire`): every
//! event processed once, in order, or a loss said out loud.
//!
//! ```sh
//! cargo run -p gapless-server-bin -- --bind 127.0.0.1:8080 &
//! cargo run -p gapless-server-bin --example follow_task -- http://127.0.0.1:8080/mcp --count 500 --cut-every 37
//! ```
//!
//! It starts the demo's `task_events` tool as a task (a 2026-07-28
//! `tools/call` that declares the tasks extension: `count` events of type
//! `dev.gapless.demo.tick`, payload `{"i": seq, "pad": ...}`), follows it with
//! `tasks/stream`, drops its own connection after every `--cut-every`
//! events, and after every drop (its own, or a broken connection: run it
//! through a proxy that cuts) opens the stream again with the guard's
//! `after`. It prints one summary line.
//!
//! Exit status: 0 when it processed every seq `0..count` exactly once, in
//! order, and the stream ended with the empty result; 3 when events are
//! lost (`events_gone`), unless `--accept-loss`; 1 on anything else.

use clap::Parser;
use futures_util::StreamExt;
use gapless::task_stream::{EventError, Loss, TaskStreamGuard, Verdict};
use serde_json::{json, Value};
use std::process::ExitCode;
use std::time::{Duration, Instant};

const VERSION: &str = "2026-07-28";
const TASKS_EXTENSION: &str = "io.modelcontextprotocol/tasks";
const EVENT_METHOD: &str = "notifications/tasks/event";
/// Longer than the server's keep-alive period (15 s): a quiet stream that
/// long is broken.
const READ_TIMEOUT: Duration = Duration::from_secs(30);

#[derive(Parser)]
#[command(about = "Follow a task's event stream across dropped connections (tasks/stream, SEP-2694 draft)")]
struct Args {
    /// The server's MCP endpoint, e.g. http://127.0.0.1:8080/mcp.
    url: String,
    /// How many events the task emits.
    #[arg(long, default_value_t = 200)]
    count: u64,
    /// Milliseconds between the task's events.
    #[arg(long, default_value_t = 5)]
    interval_ms: u64,
    /// Drop the connection after every K events processed on it (0: never).
    #[arg(long, default_value_t = 0)]
    cut_every: u64,
    /// On lost events, say so and go on from the earliest kept one.
    #[arg(long)]
    accept_loss: bool,
    /// Give up after this many streams.
    #[arg(long, default_value_t = 10_000)]
    max_streams: u64,
}

/// How one `tasks/stream` request ended.
enum Outcome {
    /// The empty result: the task ended and every event was sent.
    Ended,
    /// We dropped the connection on purpose (`--cut-every`).
    Cut,
    /// The connection broke, or the stream ended without a response.
    Broken(String),
    /// `events_gone`: the server no longer keeps an event we need.
    Gone { earliest: u64 },
    /// The guard refused an event: seqs did not come in order.
    Refused(EventError),
    /// Anything else: a refusal of the request, a malformed message.
    Failed(String),
}

#[derive(Default)]
struct Tally {
    streams: u64,
    cuts: u64,
    broken: u64,
    duplicates: u64,
}

#[tokio::main(flavor = "current_thread")]
async fn main() -> ExitCode {
    let args = Args::parse();
    // A new connection per request: the draft allows one open
    // `tasks/stream` per task and connection, and a fresh connection cannot
    // race the server's release of the stream it just ended.
    let http = reqwest::Client::builder().pool_max_idle_per_host(0).build().expect("an HTTP client");
    let mcp = Mcp { http, url: args.url.clone() };
    let started = Instant::now();

    let task = match mcp.start_task(args.count, args.interval_ms).await {
        Ok(task) => task,
        Err(e) => return fail(&format!("could not start the task: {e}")),
    };
    let mut guard = TaskStreamGuard::new(task.as_str());
    let mut processed: Vec<u64> = Vec::new(); // what the application did, in order
    let mut tally = Tally::default();

    loop {
        if tally.streams == args.max_streams {
            return fail(&format!("gave up after {} streams, {}", tally.streams, resuming(&guard)));
        }
        tally.streams += 1;
        let after = guard.new_stream(); // the cursor stays, the stream's order starts afresh
        let outcome = mcp.follow(&mut guard, after, args.cut_every, &mut processed, &mut tally).await;
        let loss = match outcome {
            Outcome::Ended => break,
            Outcome::Cut => {
                tally.cuts += 1;
                continue;
            }
            Outcome::Broken(why) => {
                tally.broken += 1;
                eprintln!("follow_task: connection broke ({why}); {}", resuming(&guard));
                continue;
            }
            Outcome::Gone { earliest } => match guard.on_events_gone(earliest) {
                Ok(loss) => loss,
                Err(e) => return fail(&format!("server fault: {e}")),
            },
            // A stream opened without `after` starts at the server's
            // earliest kept event: a first seq above 0 means the start is
            // gone. With a cursor, a hole is a server fault: resume, and the
            // server sends the events again or answers `events_gone`.
            Outcome::Refused(e) => match e.loss() {
                Some(loss) if guard.after().is_none() => loss,
                _ => {
                    eprintln!("follow_task: {e}; {}", resuming(&guard));
                    continue;
                }
            },
            Outcome::Failed(why) => return fail(&why),
        };
        if !args.accept_loss {
            return lost(loss);
        }
        eprintln!("follow_task: {loss}: accepted (--accept-loss)");
        if let Err(e) = guard.accept_loss(loss) {
            return fail(&e.to_string());
        }
    }

    let expected: Vec<u64> = (0..args.count).collect();
    let whole = guard.lost() == 0 && processed == expected;
    println!(
        "follow_task: task {task}: processed {} of {} events{}, {} streams ({} cuts of ours, {} broken), \
         {} duplicates skipped, {} lost, ended with the empty result in {:.1} s",
        processed.len(),
        args.count,
        if whole { " (each seq once, in order)" } else { "" },
        tally.streams,
        tally.cuts,
        tally.broken,
        tally.duplicates,
        guard.lost(),
        started.elapsed().as_secs_f64(),
    );
    if whole || (args.accept_loss && processed.windows(2).all(|w| w[0] < w[1])) {
        ExitCode::SUCCESS
    } else {
        fail("the processed seqs are not 0..count")
    }
}

/// A 2026-07-28 client without a session: the protocol version and the
/// client's capabilities ride in each request's `_meta`.
struct Mcp {
    http: reqwest::Client,
    url: String,
}

impl Mcp {
    async fn post(
        &self,
        method: &str,
        mut params: Value,
        accept: &str,
    ) -> reqwest::Result<reqwest::Response> {
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": VERSION,
            "io.modelcontextprotocol/clientCapabilities": {"extensions": {TASKS_EXTENSION: {}}},
        });
        // `Mcp-Name` repeats the tool's name or the task's id (2026-07-28).
        let name = params.get("name").or(params.get("taskId")).and_then(Value::as_str).unwrap_or("");
        let name = name.to_owned();
        let body = json!({"jsonrpc": "2.0", "id": 1, "method": method, "params": params});
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-protocol-version", VERSION)
            .header("mcp-method", method)
            .header("mcp-name", name)
            .body(body.to_string())
            .send()
            .await
    }

    /// Calls `task_events` and returns the task's id.
    async fn start_task(&self, count: u64, interval_ms: u64) -> Result<String, String> {
        let params =
            json!({"name": "task_events", "arguments": {"count": count, "interval_ms": interval_ms}});
        let r = self.post("tools/call", params, "application/json").await.map_err(|e| e.to_string())?;
        let answer: Value = r.json().await.map_err(|e| e.to_string())?;
        match answer["result"]["taskId"].as_str() {
            Some(id) if answer["result"]["resultType"] == "task" => Ok(id.to_owned()),
            _ => Err(format!("not a task: {answer}")),
        }
    }

    /// One `tasks/stream` request: each event through the guard, processed
    /// and marked processed, until the response, a drop or a refusal.
    async fn follow(
        &self,
        guard: &mut TaskStreamGuard,
        after: Option<u64>,
        cut_every: u64,
        processed: &mut Vec<u64>,
        tally: &mut Tally,
    ) -> Outcome {
        let mut params = json!({"taskId": guard.task_id()});
        if let Some(after) = after {
            params["after"] = json!(after);
        }
        let response = match self.post("tasks/stream", params, "application/json, text/event-stream").await {
            Ok(r) => r,
            Err(e) => return Outcome::Broken(causes(&e)),
        };
        // A terminal task with nothing after the cursor answers at once, as JSON.
        if response
            .headers()
            .get("content-type")
            .is_some_and(|v| v.as_bytes().starts_with(b"application/json"))
        {
            return match response.json::<Value>().await {
                Ok(answer) => finish(guard, &answer),
                Err(e) => Outcome::Broken(causes(&e)),
            };
        }
        let mut sse = SseData::new(response);
        let mut here = 0; // events processed on this connection
        loop {
            let message = match sse.next().await {
                Ok(Some(data)) => data,
                Ok(None) => return Outcome::Broken("the stream ended without a response".to_owned()),
                Err(e) => return Outcome::Broken(e),
            };
            let Ok(message) = serde_json::from_str::<Value>(&message) else {
                return Outcome::Failed(format!("not JSON: {message}"));
            };
            if message["method"] != EVENT_METHOD {
                return finish(guard, &message); // the response ends the stream
            }
            let event = &message["params"];
            let (Some(task), Some(seq)) = (event["taskId"].as_str(), event["seq"].as_u64()) else {
                return Outcome::Failed(format!("a task event without taskId or seq: {message}"));
            };
            match guard.on_event(task, seq) {
                Ok(Verdict::Process(ticket)) => {
                    // The application's work: here, check the demo's payload.
                    if event["payload"]["i"] != seq {
                        return Outcome::Failed(format!("seq {seq} carries {}", event["payload"]));
                    }
                    processed.push(seq);
                    // Only now does the cursor move (persist what it returns).
                    if let Err(e) = guard.processed(ticket) {
                        return Outcome::Failed(e.to_string());
                    }
                    here += 1;
                    if here == cut_every {
                        return Outcome::Cut; // dropping `sse` closes the connection
                    }
                }
                Ok(Verdict::Duplicate(_)) => tally.duplicates += 1,
                Err(EventError::Regress { .. }) => {} // a repeat on one stream: skip it
                Err(e @ EventError::Gap { .. }) => return Outcome::Refused(e),
                Err(e) => return Outcome::Failed(e.to_string()),
            }
        }
    }
}

/// The JSON-RPC response that ends a `tasks/stream`.
fn finish(guard: &mut TaskStreamGuard, answer: &Value) -> Outcome {
    if answer["result"].is_object() {
        return match guard.on_end() {
            Ok(()) => Outcome::Ended,
            Err(e) => Outcome::Failed(e.to_string()),
        };
    }
    let error = &answer["error"];
    match error["data"]["earliestSeq"].as_u64() {
        Some(earliest) if error["code"] == -32010 && error["data"]["reason"] == "events_gone" => {
            Outcome::Gone { earliest }
        }
        _ => Outcome::Failed(format!("tasks/stream refused: {answer}")),
    }
}

/// Where the next stream starts, for the log.
fn resuming(guard: &TaskStreamGuard) -> String {
    match guard.after() {
        Some(after) => format!("resuming with after {after}"),
        None => "opening again without after".to_owned(),
    }
}

/// An error and its causes ("error decoding response body: ...: connection reset").
fn causes(e: &dyn std::error::Error) -> String {
    let mut text = e.to_string();
    let mut cause = e.source();
    while let Some(c) = cause {
        text = format!("{text}: {c}");
        cause = c.source();
    }
    text
}

fn lost(loss: Loss) -> ExitCode {
    eprintln!("follow_task: {loss} (the server no longer keeps them; --accept-loss goes on without them)");
    ExitCode::from(3)
}

fn fail(why: &str) -> ExitCode {
    eprintln!("follow_task: FAIL: {why}");
    ExitCode::FAILURE
}

/// The `data` of each event of an SSE body (comments, the keep-alives,
/// skipped).
struct SseData {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: Vec<u8>,
}

impl SseData {
    fn new(response: reqwest::Response) -> SseData {
        SseData { body: response.bytes_stream().boxed(), buf: Vec::new() }
    }

    /// The next event's data; `None` at the end of the body.
    async fn next(&mut self) -> Result<Option<String>, String> {
        loop {
            if let Some(end) = self.buf.windows(2).position(|w| w == b"\n\n") {
                let block: Vec<u8> = self.buf.drain(..end + 2).collect();
                let block = String::from_utf8(block).map_err(|e| e.to_string())?;
                let data: Vec<&str> = block
                    .lines()
                    .filter_map(|l| l.strip_prefix("data:"))
                    .map(|d| d.strip_prefix(' ').unwrap_or(d))
                    .collect();
                if !data.is_empty() {
                    return Ok(Some(data.join("\n")));
                }
                continue;
            }
            match tokio::time::timeout(READ_TIMEOUT, self.body.next()).await {
                Err(_) => return Err(format!("nothing for {} s", READ_TIMEOUT.as_secs())),
                Ok(None) => return Ok(None),
                Ok(Some(Err(e))) => return Err(causes(&e)),
                Ok(Some(Ok(bytes))) => self.buf.extend_from_slice(&bytes),
            }
        }
    }
}
