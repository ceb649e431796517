//! gapless-gateway in front of a stdio MCP server (`--upstream-cmd`): the
//! official TypeScript SDK's server over stdio (`tests/upstreams/
//! ts_upstream.mjs --stdio`), one child process per gateway session.

#[path = "../../bin/tests/common/mod.rs"]
mod common;
mod support;

use common::{SseReader, TestServer};
use gapless_gateway::upstream::stdio::StdioCommand;
use gapless_gateway::StdioHost;
use gapless_server::{McpServer, ServerConfig};
use serde_json::{json, Value};
use std::path::Path;
use std::time::{Duration, Instant};
use support::drain;

/// The bridge in process, each session's child writing its pid to
/// `pids` (a file per child) so that a test can kill one.
async fn bridge(pids: &Path) -> TestServer {
    bridge_to(pids, "ts_upstream.mjs --stdio").await
}

/// The bridge to `node <script>` (in `tests/upstreams`).
async fn bridge_to(pids: &Path, script: &str) -> TestServer {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/upstreams");
    assert!(dir.join("node_modules/@modelcontextprotocol/sdk").is_dir(), "run scripts/setup.sh");
    let cmd = format!("echo $$ > {}/$$ && cd {} && exec node {script}", pids.display(), dir.display());
    let host = StdioHost::new(StdioCommand::new(&cmd).unwrap());
    let server = McpServer::builder(host).config(ServerConfig::default()).build().unwrap();
    let addr = common::serve(server.router()).await;
    TestServer::at(addr, "/mcp", server)
}

fn pids(dir: &Path) -> Vec<u32> {
    std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().parse().unwrap())
        .collect()
}

fn emit(count: u64, interval_ms: u64, target: &str) -> Value {
    json!({"count": count, "interval_ms": interval_ms, "target": target})
}

/// Two sessions, two children: each call's events reach its own request
/// stream only (never the other session's), a cut stream resumes at the
/// gateway with every later event once, and a DELETE kills the child.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_session_has_its_child_and_its_events_only() {
    let dir = tempdir();
    let g = bridge(&dir).await;
    let (a, b) = (g.initialize().await, g.initialize().await);
    assert_eq!(pids(&dir).len(), 2, "a child per session");
    let ra = g.call_tool(&a, 1, "emit_events", emit(30, 2, "request")).await;
    let rb = g.call_tool(&b, 1, "emit_events", emit(20, 2, "request")).await;
    let (mut sa, mut sb) = (SseReader::new(ra), SseReader::new(rb));
    let (first, _, ids) = drain(&mut sa, Some(10)).await;
    drop(sa);
    let (bs, bdone, _) = drain(&mut sb, None).await;
    assert_eq!(bs, (1..=20).collect::<Vec<_>>(), "session b's own 20 events only");
    assert_eq!(bdone.unwrap()["result"]["content"][0]["text"], "emitted 20");
    let cursor = ids.iter().rev().flatten().next().unwrap().clone();
    let (rest, done, _) = drain(&mut SseReader::new(g.get(Some(&a), Some(&cursor)).await), None).await;
    let all: Vec<u64> = first.into_iter().chain(rest).collect();
    assert_eq!(all, (1..=30).collect::<Vec<_>>(), "every event of a's call once, in order");
    assert_eq!(done.unwrap()["result"]["content"][0]["text"], "emitted 30");

    let pid = pids(&dir);
    let r = g.http.delete(&g.url).header("mcp-session-id", &a).send().await.unwrap();
    assert!(r.status().is_success());
    let deadline = Instant::now() + Duration::from_secs(5);
    while pid.iter().filter(|p| alive(**p)).count() > 1 {
        assert!(Instant::now() < deadline, "the deleted session's child still runs");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The bridge's routing of a stdio server's one stream (SPEC §10.4): with
/// one request in flight, its notifications are that request's, and none
/// reaches the standalone stream; with two in flight, a notification that
/// names neither goes to the standalone stream. Each arrives once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stdio_servers_notifications_are_routed_by_what_is_in_flight() {
    let dir = tempdir();
    let g = bridge(&dir).await;
    let sid = g.initialize().await;
    let mut standalone = SseReader::new(g.get(Some(&sid), None).await);
    let r = g.call_tool(&sid, 2, "emit_events", emit(5, 2, "standalone")).await;
    let (on_request, done, _) = drain(&mut SseReader::new(r), None).await;
    assert_eq!(done.unwrap()["result"]["content"][0]["text"], "emitted 5");
    assert_eq!(on_request, vec![1, 2, 3, 4, 5], "the one request in flight takes them");
    // (Its priming event, which carries no message, aside.)
    while let Ok(Some(e)) = tokio::time::timeout(Duration::from_millis(300), standalone.next()).await {
        assert!(e.json().is_none(), "nothing on the standalone stream: {}", e.data);
    }

    let (a, b) = tokio::join!(
        g.call_tool(&sid, 3, "emit_events", emit(20, 5, "request")),
        g.call_tool(&sid, 4, "emit_events", emit(20, 5, "request"))
    );
    let ((mut sa, da, _), (sb, db, _)) =
        tokio::join!(async { drain(&mut SseReader::new(a), None).await }, async {
            drain(&mut SseReader::new(b), None).await
        });
    assert_eq!((da.unwrap()["id"].clone(), db.unwrap()["id"].clone()), (json!(3), json!(4)));
    let expected = 40 - sa.len() - sb.len();
    assert!(expected > 0, "with two in flight, some went to the standalone stream");
    let (on_standalone, _, _) = drain(&mut standalone, Some(expected)).await;
    sa.extend(sb);
    sa.extend(on_standalone);
    sa.sort();
    let twice: Vec<u64> = (1..=20).flat_map(|i| [i, i]).collect();
    assert_eq!(sa, twice, "each of both calls' events once, across the streams");
}

/// The child killed mid-call: the call gets -31002 at once, and the session
/// ends with 404 (the client initializes again, to a new child).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dead_child_fails_the_call_and_ends_the_session() {
    let dir = tempdir();
    let g = bridge(&dir).await;
    let sid = g.initialize().await;
    let r = g.call_tool(&sid, 3, "emit_events", emit(2000, 5, "request")).await;
    let mut sse = SseReader::new(r);
    drain(&mut sse, Some(5)).await;
    for p in pids(&dir) {
        kill9(p);
    }
    let at = Instant::now();
    let (_, done, _) = drain(&mut sse, None).await;
    assert_eq!(done.expect("an explicit answer")["error"]["code"], -31002);
    assert!(at.elapsed() < Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(5);
    while g.call_tool(&sid, 4, "emit_events", emit(1, 0, "request")).await.status() != 404 {
        assert!(Instant::now() < deadline, "the session outlived its child");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let again = g.initialize().await;
    let (seqs, _, _) =
        drain(&mut SseReader::new(g.call_tool(&again, 5, "emit_events", emit(3, 0, "request")).await), None)
            .await;
    assert_eq!(seqs, vec![1, 2, 3]);
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!("gapless-stdio-{}-{}", std::process::id(), rand_suffix()));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn rand_suffix() -> u64 {
    use std::sync::atomic::{AtomicU64, Ordering};
    static N: AtomicU64 = AtomicU64::new(0);
    N.fetch_add(1, Ordering::Relaxed)
}

fn alive(pid: u32) -> bool {
    Path::new(&format!("/proc/{pid}")).exists()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default().contains(") Z ")
}

fn kill9(pid: u32) {
    let _ = std::process::Command::new("kill").args(["-9", &pid.to_string()]).status();
}

/// `@modelcontextprotocol/server-everything` (pinned in
/// `tests/upstreams/package.json`) as it is, over stdio: its long-running
/// tool's progress notifications (routed by their `progressToken`) reach
/// the call's stream, and a cut stream resumed at the gateway brings every
/// later one once, then the result.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_everything_progress_resumes_through_a_cut() {
    let dir = tempdir();
    let g = bridge_to(&dir, "node_modules/@modelcontextprotocol/server-everything/dist/index.js stdio").await;
    support::server_everything_progress_through_a_cut(&g).await;
}
