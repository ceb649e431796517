//! A `gapless-server` process in cluster mode, as the cluster tests start
//! it, and the requests they send it (a module of the cluster tests only: the gateway's tests share
//! `common` without this binary).
#![allow(dead_code, unreachable_pub)]

use super::common::SseReader;
use gapless_redis::testing::free_port;
use serde_json::{json, Value};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `gapless-server` process in cluster mode, killed on drop.
pub struct Node {
    pub child: Child,
    pub url: String,
}

impl Node {
    pub fn start(redis: &str, extra: &[&str]) -> Node {
        Node::start_with_env(redis, extra, &[])
    }

    /// [`Node::start`] with more environment variables. The node's log
    /// (warnings; its standard output) is shown when the test runs with
    /// `GAPLESS_TEST_NODE_LOGS` set, else dropped.
    pub fn start_with_env(redis: &str, extra: &[&str], env: &[(&str, &str)]) -> Node {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_gapless-server"))
            .args(["--bind", &format!("127.0.0.1:{port}"), "--redis-url", redis])
            .args(extra)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(if std::env::var_os("GAPLESS_TEST_NODE_LOGS").is_some() {
                Stdio::inherit()
            } else {
                Stdio::null()
            })
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the gapless-server binary");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "node on port {port} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Node { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A client that keeps no idle connection (each request its own).
pub fn http() -> reqwest::Client {
    reqwest::Client::builder().pool_max_idle_per_host(0).build().unwrap()
}

/// A POST of `body` to `url` (with the session's id, if any).
pub async fn post(url: &str, sid: Option<&str>, body: Value) -> reqwest::Response {
    post_with(&http(), url, sid, body).await
}

/// [`post`] on client `c`.
pub async fn post_with(c: &reqwest::Client, url: &str, sid: Option<&str>, body: Value) -> reqwest::Response {
    let mut r = c
        .post(url)
        .header("content-type", "application/json")
        .header("accept", super::common::ACCEPT_BOTH)
        .body(body.to_string());
    if let Some(s) = sid {
        r = r.header("mcp-session-id", s);
    }
    r.send().await.unwrap()
}

/// The session's GET stream (the standalone one, or a resume at `cursor`).
pub async fn get(url: &str, sid: &str, cursor: Option<&str>) -> reqwest::Response {
    get_with(&http(), url, sid, cursor).await
}

/// [`get`] on client `c`.
pub async fn get_with(c: &reqwest::Client, url: &str, sid: &str, cursor: Option<&str>) -> reqwest::Response {
    let mut r = c.get(url).header("accept", "text/event-stream").header("mcp-session-id", sid);
    if let Some(cur) = cursor {
        r = r.header("last-event-id", cur);
    }
    r.send().await.unwrap()
}

/// A new session on `url`.
pub async fn initialize(url: &str) -> String {
    try_initialize(url).await.unwrap_or_else(|status| panic!("initialize answered {status}"))
}

/// A new session's id, or the status `initialize` got instead of 200.
pub async fn try_initialize(url: &str) -> Result<String, u16> {
    try_initialize_with(&http(), url).await
}

/// [`try_initialize`] on client `c`.
pub async fn try_initialize_with(c: &reqwest::Client, url: &str) -> Result<String, u16> {
    let r = post_with(
        c,
        url,
        None,
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
            "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"test","version":"1"}}}),
    )
    .await;
    if r.status() != 200 {
        return Err(r.status().as_u16());
    }
    let sid = r.headers()["mcp-session-id"].to_str().unwrap().to_owned();
    let mut sse = SseReader::new(r);
    let mut result = false;
    while let Some(e) = sse.next().await {
        result |= e.json().is_some_and(|m| m["result"]["protocolVersion"] == "2025-06-18");
    }
    assert!(result, "the initialize result arrived");
    Ok(sid)
}

/// `emit_events` with `args` in session `sid`.
pub async fn call(url: &str, sid: &str, id: u64, args: Value) -> reqwest::Response {
    post(url, Some(sid), json!({"jsonrpc":"2.0","id":id,"method":"tools/call","params":{"name":"emit_events","arguments":args}}))
        .await
}
