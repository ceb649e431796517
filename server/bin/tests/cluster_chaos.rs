//! Combined chaos (`docs/SPEC.md` §8.6): a Redis Cluster of 3 masters with
//! a replica each, three gapless nodes behind HAProxy, clients making
//! calls over SSE (breaking and resuming them through the balancer) and
//! over WebSocket lanes; then a Redis master is killed (its replica takes
//! over) while a gapless node dies with requests in flight. Every request
//! the dead node orphaned gets `-31002`, and every open or resumed stream
//! makes progress, or gets an explicit error, within 5 s: no call sits
//! silent. Events of each call arrive once and in order. Each wait a client
//! makes is bounded by [`SILENCE`]; one that runs out fails the test.
//! `GAPLESS_CHAOS_ROUNDS` rounds (default 1), each on a fresh cluster.

mod common;
#[path = "common/node.rs"]
mod node;

use common::haproxy::Haproxy;
use common::SseReader;
use futures_util::{SinkExt as _, StreamExt as _};
use gapless_redis::testing::RedisCluster;
use node::Node;
use serde_json::{json, Value};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

/// The longest a client may wait for anything: an answer's headers, the
/// next event, a frame.
const SILENCE: Duration = Duration::from_secs(5);

/// Events per call, 5 ms apart.
const EVENTS: u64 = 300;

/// A small deterministic random source (the seed is printed).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n
    }
}

/// What a client did.
#[derive(Debug, Default)]
struct Tally {
    /// Calls answered with their result.
    completed: u64,
    /// Calls answered `-31002` (their node died).
    orphaned: u64,
    /// Calls answered with another JSON-RPC error.
    failed: u64,
    /// Explicit refusals and errors met and survived (`503`, a refused
    /// resume, a connection the balancer could not make).
    explicit: u64,
    /// Resumes (SSE) and reattachments (WebSocket).
    resumes: u64,
}

/// The time of day, UTC, to the ms (as the nodes' logs show it), for a
/// failing call's trace.
fn now() -> String {
    let ms =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis() % 86_400_000;
    format!("{:02}:{:02}:{:02}.{:03}", ms / 3_600_000, ms / 60_000 % 60, ms / 1000 % 60, ms % 1000)
}

fn client() -> reqwest::Client {
    reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap()
}

/// Waits at most [`SILENCE`] for `f`; `Err` names what was silent.
async fn bounded<T>(what: &str, f: impl std::future::Future<Output = T>) -> Result<T, String> {
    tokio::time::timeout(SILENCE, f).await.map_err(|_| format!("silent for {SILENCE:?}: {what}"))
}

/// POSTs `body` through the balancer; `None` for an explicit failure (a
/// connection refused or reset, a 5xx).
async fn post(
    c: &reqwest::Client,
    url: &str,
    sid: Option<&str>,
    body: &Value,
) -> Result<Option<reqwest::Response>, String> {
    let mut r = c
        .post(url)
        .header("content-type", "application/json")
        .header("accept", common::ACCEPT_BOTH)
        .body(body.to_string());
    if let Some(s) = sid {
        r = r.header("mcp-session-id", s);
    }
    match bounded("a POST's answer", r.send()).await? {
        Ok(r) if r.status() == 200 => Ok(Some(r)),
        Ok(r) if r.status().is_server_error() => Ok(None),
        Ok(r) => Err(format!("POST answered {}: {}", r.status(), r.text().await.unwrap_or_default())),
        Err(_) => Ok(None),
    }
}

/// A new 2025-06-18 session through the balancer.
async fn initialize(c: &reqwest::Client, url: &str, t: &mut Tally) -> Result<String, String> {
    let init = json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"chaos","version":"1"}}});
    loop {
        let Some(r) = post(c, url, None, &init).await? else {
            t.explicit += 1;
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let mut sse = SseReader::new(r);
        while bounded("the initialize response", sse.next()).await?.is_some() {}
        return Ok(sid);
    }
}

/// How a call's stream ended.
enum End {
    /// Its response (a result or an error) arrived.
    Answered(Value),
    /// The stream stopped without it: resume from the cursor.
    Cut,
}

/// Reads a call's stream until its response or its end, checking that the
/// call's events come once and in order (`next` is the one expected);
/// stops early (a cut the client makes) after `cut_after` events.
async fn read_call(
    sse: &mut SseReader,
    id: u64,
    next: &mut u64,
    cursor: &mut Option<String>,
    cut_after: Option<u64>,
    trace: &mut Vec<String>,
) -> Result<End, String> {
    let mut read = 0;
    loop {
        if cut_after.is_some_and(|n| read >= n) {
            return Ok(End::Cut);
        }
        let Some(e) = bounded(&format!("call {id}'s stream"), sse.next()).await? else {
            trace.push(format!("{} {}", now(), if sse.broken() { "broken" } else { "ended" }));
            return Ok(End::Cut);
        };
        if e.id.is_some() {
            cursor.clone_from(&e.id);
        }
        trace.push(format!("{} {:?} {}", now(), e.id, e.data.chars().take(70).collect::<String>()));
        let Some(m) = e.json() else { continue };
        if let Some(seq) = e.emit_seq() {
            if seq != *next {
                return Err(format!("call {id}: event {seq} where {next} was due"));
            }
            *next += 1;
            read += 1;
        } else if m["id"] == json!(id) {
            return Ok(End::Answered(m));
        }
    }
}

/// Counts a call's response: its result with every event, or `-31002`.
fn answered(m: &Value, id: u64, next: u64, t: &mut Tally) -> Result<(), String> {
    if m.get("result").is_some() {
        if next != EVENTS + 1 {
            return Err(format!("call {id}: a result after {} events: {m}", next - 1));
        }
        t.completed += 1;
    } else if m["error"]["code"] == json!(-31002) {
        t.orphaned += 1;
    } else if m["error"]["code"].is_i64() {
        // Explicit: the call failed saying why (for example a publish the
        // store refused while its master was failing over).
        eprintln!("call {id}: {m}");
        t.failed += 1;
    } else {
        return Err(format!("call {id}: {m}"));
    }
    Ok(())
}

/// An SSE client: calls, each cut now and then and resumed through the
/// balancer with its cursor, until `stop`.
async fn sse_client(url: String, seed: u64, stop: Arc<AtomicBool>) -> Result<Tally, String> {
    let (c, mut rng, mut t) = (client(), Rng(seed), Tally::default());
    let sid = initialize(&c, &url, &mut t).await?;
    let mut id = 0;
    while !stop.load(Ordering::Acquire) {
        id += 1;
        let call = json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":EVENTS,"interval_ms":5}}});
        let Some(r) = post(&c, &url, Some(&sid), &call).await? else {
            // Refused before it streamed (its node died, the store was
            // away): explicit; the next call.
            t.explicit += 1;
            tokio::time::sleep(Duration::from_millis(300)).await;
            continue;
        };
        let (mut next, mut cursor) = (1, None);
        let mut trace = vec![format!("{} session {sid} posted call {id}", now())];
        if common::header(r.headers(), "content-type").as_deref() == Some("application/json") {
            // Answered at once, without a stream: an error, explicit.
            let m: Value = bounded("a JSON answer", r.json()).await?.map_err(|e| e.to_string())?;
            eprintln!("call {id} answered at once: {m}");
            answered(&m, id, next, &mut t)?;
            continue;
        }
        let mut sse = SseReader::new(r);
        loop {
            let cut = (rng.below(3) == 0).then(|| 1 + rng.below(EVENTS / 2));
            let r = read_call(&mut sse, id, &mut next, &mut cursor, cut, &mut trace).await;
            let r = r.map_err(|e| {
                format!("{e}; {}; trace: {:#?}", trace[0], &trace[trace.len().saturating_sub(8)..])
            })?;
            match r {
                End::Answered(m) => {
                    let r = answered(&m, id, next, &mut t);
                    r.map_err(|e| {
                        format!("{e}; {}; trace: {:#?}", trace[0], &trace[trace.len().saturating_sub(8)..])
                    })?;
                    break;
                }
                End::Cut => trace.push(format!("cut (planned {cut:?})")),
            }
            let Some(at) = cursor.clone() else {
                // Cut before its first event: no cursor to resume with.
                // Explicit only if the connection broke (its node died);
                // a response that ended cleanly with nothing is silent.
                if !sse.broken() {
                    let ping = json!({"jsonrpc":"2.0","id":99,"method":"ping"});
                    let probe = c
                        .post(&url)
                        .header("content-type", "application/json")
                        .header("accept", common::ACCEPT_BOTH)
                        .header("mcp-session-id", &sid)
                        .body(ping.to_string())
                        .send()
                        .await;
                    let probe = match probe {
                        Ok(r) => format!("{} {}", r.status(), r.text().await.unwrap_or_default()),
                        Err(e) => e.to_string(),
                    };
                    return Err(format!(
                        "call {id}: a 200 that ended before its first event ({}); a ping now: {probe}",
                        trace.join(" | ")
                    ));
                }
                t.explicit += 1;
                break;
            };
            // Resume until a stream opens; each refusal is explicit.
            sse = loop {
                t.resumes += 1;
                let r = c
                    .get(&url)
                    .header("accept", "text/event-stream")
                    .header("mcp-session-id", &sid)
                    .header("last-event-id", &at);
                match bounded(&format!("call {id}'s resume's answer"), r.send()).await? {
                    Ok(r) if r.status() == 200 => {
                        trace.push(format!("{} resumed at {at}", now()));
                        break SseReader::new(r);
                    }
                    Ok(r) if r.status().is_server_error() => t.explicit += 1,
                    Ok(r) => {
                        return Err(format!(
                            "call {id}: resume at {at} answered {}: {}",
                            r.status(),
                            r.text().await.unwrap_or_default()
                        ))
                    }
                    Err(_) => t.explicit += 1,
                }
                tokio::time::sleep(Duration::from_millis(300)).await;
            };
        }
    }
    Ok(t)
}

type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

/// A socket for session `sid` through the balancer, replaying after
/// `cursor`; `None` for an explicit refusal.
async fn attach(
    c: &reqwest::Client,
    base: &str,
    url: &str,
    sid: &str,
    cursor: &str,
) -> Result<Option<Ws>, String> {
    let r = c
        .post(format!("{url}/session/{sid}/upgrade"))
        .header("content-type", "application/json")
        .body(json!({"cursor": cursor}).to_string());
    let grant: Value = match bounded("an upgrade's answer", r.send()).await? {
        Ok(r) if r.status() == 200 => r.json().await.map_err(|e| e.to_string())?,
        Ok(r) if r.status().is_server_error() => return Ok(None),
        Ok(r) => {
            return Err(format!(
                "upgrade at {cursor} answered {}: {}",
                r.status(),
                r.text().await.unwrap_or_default()
            ))
        }
        Err(_) => return Ok(None),
    };
    let ws = format!("ws://{base}{}", grant["websocket"].as_str().expect("a ticket's path"));
    match bounded("a socket's handshake", tokio_tungstenite::connect_async(ws)).await? {
        Ok((ws, _)) => Ok(Some(ws)),
        Err(_) => Ok(None),
    }
}

/// A WebSocket client: a session migrated to a socket, calls over it, the
/// socket reattached through the balancer (a new ticket at its cursor)
/// whenever it closes, until `stop`.
async fn ws_client(url: String, base: String, stop: Arc<AtomicBool>) -> Result<Tally, String> {
    let (c, mut t) = (client(), Tally::default());
    let sid = initialize(&c, &url, &mut t).await?;
    // A first call over HTTP, for a cursor to migrate at.
    let first = json!({"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":2}}});
    let r = post(&c, &url, Some(&sid), &first).await?.ok_or("the first call was refused")?;
    let (mut next, mut cursor) = (1, None);
    let End::Answered(m) =
        read_call(&mut SseReader::new(r), 1, &mut next, &mut cursor, None, &mut vec![]).await?
    else {
        return Err("the first call's stream was cut".into());
    };
    assert!(m.get("result").is_some(), "{m}");
    let mut cursor = cursor.expect("a cursor");
    let mut ws: Option<Ws> = None;
    let mut id = 1;
    'calls: while !stop.load(Ordering::Acquire) {
        id += 1;
        let mut next = 1;
        let mut sent = false;
        loop {
            let socket = match ws.as_mut() {
                Some(s) => s,
                None => {
                    t.resumes += 1;
                    match attach(&c, &base, &url, &sid, &cursor).await? {
                        Some(s) => ws.insert(s),
                        None => {
                            t.explicit += 1;
                            tokio::time::sleep(Duration::from_millis(300)).await;
                            continue;
                        }
                    }
                }
            };
            if !sent {
                let call = json!({"message": {"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"emit_events","arguments":{"count":EVENTS,"interval_ms":5}}}});
                if socket.send(Message::Text(call.to_string().into())).await.is_err() {
                    ws = None;
                    continue;
                }
                sent = true;
            }
            let frame = bounded(&format!("socket call {id}'s next frame"), socket.next()).await?;
            let text = match frame {
                Some(Ok(Message::Text(text))) => text,
                Some(Ok(Message::Close(_))) | Some(Err(_)) | None => {
                    ws = None;
                    continue;
                }
                Some(Ok(_)) => continue,
            };
            let v: Value = serde_json::from_str(&text).map_err(|e| e.to_string())?;
            let (Some(fid), m) = (v["id"].as_str(), &v["message"]) else {
                // A refusal on the socket (its own explicit error).
                return Err(format!("socket call {id}: {v}"));
            };
            cursor = fid.to_owned();
            if let Some(seq) = m["params"]["data"]["seq"].as_u64() {
                if seq != next {
                    return Err(format!("socket call {id}: event {seq} where {next} was due"));
                }
                next += 1;
            } else if m["id"] == json!(id) {
                answered(m, id, next, &mut t)?;
                continue 'calls;
            }
        }
    }
    Ok(t)
}

async fn round(n: usize, seed: u64) {
    let mut cluster = RedisCluster::start_with_replicas(3, 1);
    let seeds = (0..3).map(|i| cluster.url(i)).collect::<Vec<_>>().join(",");
    let mut nodes: Vec<Node> = (0..3).map(|_| Node::start(&seeds, &[])).collect();
    let addrs: Vec<std::net::SocketAddr> = nodes
        .iter()
        .map(|n| n.url.trim_start_matches("http://").trim_end_matches("/mcp").parse().unwrap())
        .collect();
    let lb = Haproxy::start(&addrs);
    let stop = Arc::new(AtomicBool::new(false));
    let mut clients = Vec::new();
    for k in 0..6 {
        clients.push(tokio::spawn(sse_client(lb.url(), seed.wrapping_mul(k + 3) | 1, Arc::clone(&stop))));
    }
    for _ in 0..2 {
        clients.push(tokio::spawn(ws_client(lb.url(), lb.addr.to_string(), Arc::clone(&stop))));
    }
    let mut rng = Rng(seed | 1);
    tokio::time::sleep(Duration::from_secs(3)).await;
    // A master and a node at once, with calls in flight everywhere.
    let master = cluster.nodes[rng.below(3) as usize].port;
    let doomed = rng.below(3) as usize;
    eprintln!("round {n} (seed {seed}): killing Redis master {master} and gapless node {doomed}");
    cluster.node(master).kill();
    nodes[doomed].child.kill().unwrap(); // SIGKILL
    nodes[doomed].child.wait().unwrap();
    tokio::time::sleep(Duration::from_secs(8)).await;
    cluster.node(master).restart(); // back as its successor's replica
    tokio::time::sleep(Duration::from_secs(4)).await;
    stop.store(true, Ordering::Release);
    let mut all = Tally::default();
    for (k, c) in clients.into_iter().enumerate() {
        let t = c.await.unwrap().unwrap_or_else(|e| panic!("round {n} (seed {seed}), client {k}: {e}"));
        // Every client, SSE and WebSocket, goes on through the chaos.
        assert!(t.completed >= 2, "round {n} (seed {seed}), client {k}: {t:?}");
        all.completed += t.completed;
        all.orphaned += t.orphaned;
        all.failed += t.failed;
        all.explicit += t.explicit;
        all.resumes += t.resumes;
    }
    eprintln!("round {n} (seed {seed}): {all:?}");
    assert!(all.orphaned >= 1, "the killed node had calls in flight, each answered -31002: {all:?}");
    assert!(all.completed >= 8, "calls went on after the chaos: {all:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chaos_leaves_no_call_silent() {
    let rounds: usize = std::env::var("GAPLESS_CHAOS_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(1);
    let seed: u64 =
        std::env::var("GAPLESS_CHAOS_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or_else(|| {
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_nanos() as u64
        });
    for n in 0..rounds {
        round(n, seed.wrapping_add(n as u64)).await;
    }
}
