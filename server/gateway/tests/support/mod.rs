//! What the gateway's test files share: the TypeScript upstream as a
//! process, reading a call's stream.
#![allow(unreachable_pub)]
// Each test file uses its part.
#![allow(dead_code)]

use crate::common::SseReader;
use serde_json::Value;
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
