//! What the gateway's test files share: the TypeScript upstream as a
//! process, reading a call's stream.
#![allow(unreachable_pub)]
// Each test file uses its part.
#![allow(dead_code)]

use crate::common::{SseReader, TestServer};
use serde_json::{json, Value};
use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

/// The TypeScript upstream, killed when dropped.
pub struct Node {
    pub child: Child,
    pub port: u16,
}

impl Node {
    /// `ts_upstream.mjs` on `port` (0: a free one), with its event store.
    pub fn start(port: u16) -> Node {
        Node::with(port, &["--event-store"])
    }

    /// `ts_upstream.mjs` on `port` with `flags` (`--event-store`,
    /// `--forget-events`, none: no event ids).
    pub fn with(port: u16, flags: &[&str]) -> Node {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstreams");
        assert!(
            dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(),
            "run scripts/setup.sh: the upstream's packages are not installed in {}",
            dir.display()
        );
        let mut child = Command::new("node")
            .args(["ts_upstream.mjs", "--port", &port.to_string()])
            .args(flags)
            .current_dir(&dir)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("node");
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        let port =
            line.trim().strip_prefix("listening ").unwrap_or_else(|| panic!("{line:?}")).parse().unwrap();
        Node { child, port }
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/mcp", self.port)
    }

    pub fn kill(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Reads a call's stream to its end: the seqs of its notifications, its
/// response, and the id of each event.
pub async fn drain(
    sse: &mut SseReader,
    upto: Option<usize>,
) -> (Vec<u64>, Option<Value>, Vec<Option<String>>) {
    let (mut seqs, mut ids) = (vec![], vec![]);
    while let Some(e) = sse.next().await {
        ids.push(e.id.clone());
        if let Some(s) = e.emit_seq() {
            seqs.push(s);
        } else if let Some(m) = e.json().filter(|m| m.get("id").is_some()) {
            return (seqs, Some(m), ids);
        }
        if upto.is_some_and(|n| seqs.len() >= n) {
            break;
        }
    }
    (seqs, None, ids)
}

/// `@modelcontextprotocol/server-everything`'s long-running tool through
/// the gateway `g`: its progress notifications (routed by their
/// `progressToken`) reach the call's stream, which is cut after 5 of them
/// and resumed at the gateway; every later one comes once, in order, then
/// the result.
pub async fn server_everything_progress_through_a_cut(g: &TestServer) {
    let sid = g.initialize().await;
    let call = json!({"jsonrpc":"2.0","id":7,"method":"tools/call","params":{
        "name":"trigger-long-running-operation","arguments":{"duration":2,"steps":20},
        "_meta":{"progressToken":"p-7"}}});
    let r = g.post(Some(&sid), call).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let progress = |e: &crate::common::SseEvent| {
        e.json()
            .filter(|m| m["method"] == "notifications/progress")
            .map(|m| m["params"]["progress"].as_u64().unwrap())
    };
    let (mut seen, mut cursor) = (vec![], None);
    while let Some(e) = sse.next().await {
        cursor = e.id.clone().or(cursor);
        seen.extend(progress(&e));
        if seen.len() == 5 {
            break;
        }
    }
    drop(sse);
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let mut sse = SseReader::new(g.get(Some(&sid), cursor.as_deref()).await);
    let mut done = None;
    while let Some(e) = sse.next().await {
        if let Some(p) = progress(&e) {
            seen.push(p);
        } else if let Some(m) = e.json().filter(|m| m.get("id").is_some()) {
            done = Some(m);
            break;
        }
    }
    assert_eq!(seen, (1..=20).collect::<Vec<_>>(), "every progress notification once, in order");
    let text = done.expect("the result")["result"]["content"][0]["text"].as_str().unwrap().to_owned();
    assert!(text.starts_with("Long running operation completed"), "{text}");
}
