//! Test harness: the real server on an ephemeral loopback port, a real
//! HTTP client, and a small SSE reader.
#![allow(dead_code, unreachable_pub)]

pub mod haproxy;

use futures_util::StreamExt;
use gapless_server::{McpServer, ServerConfig};
use gapless_server_bin::demo::DemoHost;
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use std::net::SocketAddr;
use std::time::Duration;
use tokio_tungstenite::tungstenite::Message;

pub struct TestServer {
    pub addr: SocketAddr,
    pub url: String,
    pub server: McpServer,
    pub http: reqwest::Client,
}

pub async fn start(config: ServerConfig) -> TestServer {
    let server = McpServer::builder(DemoHost).config(config).build().unwrap();
    let addr = serve(server.router()).await;
    TestServer::at(addr, "/mcp", server)
}

/// A cluster-mode server (`docs/SPEC.md` §8) on the Redis at `redis_url`,
/// on an ephemeral loopback port.
pub async fn start_cluster(config: ServerConfig, redis_url: &str) -> TestServer {
    let store_config = gapless_redis::StoreConfig {
        ring: config.hub.ring,
        idle_timeout: config.hub.idle_timeout,
        ..gapless_redis::StoreConfig::default()
    };
    let store = gapless_redis::RedisStore::connect(redis_url, store_config).await.unwrap();
    let server = McpServer::builder(DemoHost).config(config).store(store, redis_url).build().unwrap();
    let addr = serve(server.router()).await;
    TestServer::at(addr, "/mcp", server)
}

/// The real server through `McpServer::serve` (connection limits,
/// timeouts) on an ephemeral loopback port, never shut down.
pub async fn start_served(config: ServerConfig, serve: gapless_server::ServeConfig) -> TestServer {
    let server = McpServer::builder(DemoHost).config(config).build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (s2, app) = (server.clone(), server.router());
    tokio::spawn(async move { s2.serve(listener, app, serve, std::future::pending()).await.unwrap() });
    TestServer::at(addr, "/mcp", server)
}

/// Serves `app` on an ephemeral loopback port; returns the address.
pub async fn serve(app: axum::Router) -> SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
    addr
}

impl TestServer {
    /// A client of `server`, served at `addr` with its endpoint at `path`.
    pub fn at(addr: SocketAddr, path: &str, server: McpServer) -> TestServer {
        TestServer {
            addr,
            url: format!("http://{addr}{path}"),
            server,
            http: reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap(),
        }
    }
}

pub const ACCEPT_BOTH: &str = "application/json, text/event-stream";

#[derive(Debug, Clone)]
pub struct SseEvent {
    /// The `event:` type, if the frame named one.
    pub event: Option<String>,
    pub id: Option<String>,
    pub data: String,
    pub retry: Option<u64>,
}

impl SseEvent {
    pub fn json(&self) -> Option<Value> {
        serde_json::from_str(&self.data).ok()
    }
    /// `params.data.seq` of an `emit_events` notification.
    pub fn emit_seq(&self) -> Option<u64> {
        self.json()?.get("params")?.get("data")?.get("seq")?.as_u64()
    }
}

/// Reads SSE events off a response body.
pub struct SseReader {
    stream: futures_util::stream::BoxStream<'static, reqwest::Result<bytes::Bytes>>,
    buf: String,
    /// Whether the body broke (a transport error) rather than ended.
    broken: bool,
}

impl SseReader {
    pub fn new(resp: reqwest::Response) -> Self {
        SseReader { stream: resp.bytes_stream().boxed(), buf: String::new(), broken: false }
    }

    /// Whether [`SseReader::next`]'s `None` was a broken body (the
    /// connection failed mid-response) rather than its end.
    pub fn broken(&self) -> bool {
        self.broken
    }

    /// The next event, `None` at the end of the body.
    pub async fn next(&mut self) -> Option<SseEvent> {
        loop {
            if let Some(pos) = self.buf.find("\n\n") {
                let block: String = self.buf.drain(..pos + 2).collect();
                let mut ev = SseEvent { event: None, id: None, data: String::new(), retry: None };
                let mut any = false;
                for line in block.lines() {
                    if let Some(v) = line.strip_prefix("event:") {
                        ev.event = Some(v.trim_start().to_owned());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("id:") {
                        ev.id = Some(v.trim_start().to_owned());
                        any = true;
                    } else if let Some(v) = line.strip_prefix("data:") {
                        ev.data.push_str(v.strip_prefix(' ').unwrap_or(v));
                        any = true;
                    } else if let Some(v) = line.strip_prefix("retry:") {
                        ev.retry = v.trim().parse().ok();
                    }
                }
                if any {
                    return Some(ev);
                }
                continue; // a comment (keep-alive)
            }
            match tokio::time::timeout(Duration::from_secs(20), self.stream.next())
                .await
                .expect("SSE stalled")
            {
                Some(Ok(b)) => self.buf.push_str(std::str::from_utf8(&b).unwrap()),
                Some(Err(_)) => {
                    self.broken = true;
                    return None;
                }
                None => return None,
            }
        }
    }
}

impl TestServer {
    pub async fn post(&self, sid: Option<&str>, body: Value) -> reqwest::Response {
        self.post_with(sid, body, &[]).await
    }

    pub async fn post_with(
        &self,
        sid: Option<&str>,
        body: Value,
        headers: &[(&str, &str)],
    ) -> reqwest::Response {
        let mut r = self
            .http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", ACCEPT_BOTH)
            .body(body.to_string());
        if let Some(s) = sid {
            r = r.header("mcp-session-id", s);
        }
        for (k, v) in headers {
            r = r.header(*k, *v);
        }
        r.send().await.unwrap()
    }

    /// POSTs `body` on session `sid` with this `Accept` header only.
    pub async fn post_accepting(&self, sid: &str, body: Value, accept: &str) -> reqwest::Response {
        self.http
            .post(&self.url)
            .header("content-type", "application/json")
            .header("accept", accept)
            .header("mcp-session-id", sid)
            .body(body.to_string())
            .send()
            .await
            .unwrap()
    }

    /// Initializes a session; returns its id.
    pub async fn initialize(&self) -> String {
        let r = self
            .post(
                None,
                json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                    "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}),
            )
            .await;
        assert_eq!(r.status(), 200);
        let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
        let mut sse = SseReader::new(r);
        while sse.next().await.is_some() {}
        let r = self.post(Some(&sid), json!({"jsonrpc":"2.0","method":"notifications/initialized"})).await;
        assert_eq!(r.status(), 202);
        sid
    }

    pub async fn call_tool(&self, sid: &str, id: u64, name: &str, args: Value) -> reqwest::Response {
        self.post(
            Some(sid),
            json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":name,"arguments":args}}),
        )
        .await
    }

    pub async fn get(&self, sid: Option<&str>, last_event_id: Option<&str>) -> reqwest::Response {
        let mut r = self.http.get(&self.url).header("accept", "text/event-stream");
        if let Some(s) = sid {
            r = r.header("mcp-session-id", s);
        }
        if let Some(l) = last_event_id {
            r = r.header("last-event-id", l);
        }
        r.send().await.unwrap()
    }
}

/// Asserts a refusal: status, `error` kind; returns the body.
pub async fn expect_error(r: reqwest::Response, status: u16, kind: &str) -> Value {
    assert_eq!(r.status().as_u16(), status, "status for {kind}");
    let body: Value = r.json().await.unwrap();
    assert_eq!(body["error"], json!(kind), "body {body}");
    assert!(body["message"].is_string());
    body
}

pub fn header(h: &HeaderMap, k: &str) -> Option<String> {
    h.get(k).map(|v| v.to_str().unwrap().to_owned())
}

// ---------------------------------------------------------------- WebSocket

pub type Ws = tokio_tungstenite::WebSocketStream<tokio_tungstenite::MaybeTlsStream<tokio::net::TcpStream>>;

pub async fn upgrade(s: &TestServer, sid: &str, body: &str) -> reqwest::Response {
    s.http
        .post(format!("{}/session/{sid}/upgrade", s.url))
        .header("content-type", "application/json")
        .body(body.to_owned())
        .send()
        .await
        .unwrap()
}

pub async fn connect(s: &TestServer, path: &str) -> Ws {
    tokio_tungstenite::connect_async(format!("ws://{}{path}", s.addr)).await.expect("ws connect").0
}

/// Next server frame as (event seq, id, message).
pub async fn frame(ws: &mut Ws) -> Option<(u64, String, Value)> {
    loop {
        let m = tokio::time::timeout(Duration::from_secs(20), ws.next()).await.expect("socket stalled")?;
        match m.ok()? {
            Message::Text(t) => {
                let v: Value = serde_json::from_str(&t).unwrap();
                let id = v["id"].as_str().unwrap().to_owned();
                let seq = id.rsplit_once('-').unwrap().1.parse().unwrap();
                return Some((seq, id, v["message"].clone()));
            }
            Message::Close(_) => return None,
            _ => continue,
        }
    }
}
