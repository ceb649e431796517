//! The resume decision table (`docs/SPEC.md` §4.2) over HTTP, one test row
//! per row of the table: as an SSE resume (`GET` with `Last-Event-ID`) and
//! as a migration's check (`POST P/session/{id}/upgrade`). Each row gets a
//! fresh session, so its answer depends on nothing but its own request.

mod common;
use common::*;
use gapless::RingConfig;
use gapless_server::ServerConfig;
use serde_json::{json, Value};

/// Which session a row's request names.
#[derive(Clone, Copy, Debug)]
enum Sid {
    /// None (a `GET` without `Mcp-Session-Id`).
    Absent,
    /// A well-formed id no session has.
    Unknown,
    /// The row's session, deleted before the request.
    Deleted,
    /// The row's session.
    Own,
}

/// Which cursor a row's request carries.
#[derive(Clone, Copy, Debug)]
enum Cursor {
    /// The id of the request stream's first notification (delivered).
    First,
    /// The id of its last event (delivered; the stream has ended).
    Last,
    /// Not an event id.
    Garbage,
    /// An event id of another session.
    Foreign,
    /// The first notification's tag with a seq never emitted.
    Ahead,
    /// The newest standalone event, never delivered (no GET was open).
    Undelivered,
    /// The first notification's id, after 40 more events evicted the rest
    /// of its stream.
    Evicted,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    Stream,
    Migration,
}

struct Row {
    name: &'static str,
    form: Form,
    sid: Sid,
    cursor: Cursor,
    status: u16,
    /// The `error` kind of a refusal; `None` for a granted resume.
    kind: Option<&'static str>,
}

const fn row(
    name: &'static str,
    form: Form,
    sid: Sid,
    cursor: Cursor,
    status: u16,
    kind: Option<&'static str>,
) -> Row {
    Row { name, form, sid, cursor, status, kind }
}

use Cursor as C;
use Form::{Migration as M, Stream as S};

const ROWS: &[Row] = &[
    row(
        "1 cursor present, session id absent",
        S,
        Sid::Absent,
        C::First,
        400,
        Some("resume_requires_session"),
    ),
    row("2 session id unknown", S, Sid::Unknown, C::First, 404, Some("unknown_session")),
    row("2 session id unknown (migration)", M, Sid::Unknown, C::First, 404, Some("unknown_session")),
    row("2 session deleted", S, Sid::Deleted, C::First, 404, Some("unknown_session")),
    row("2 session deleted (migration)", M, Sid::Deleted, C::First, 404, Some("unknown_session")),
    row("3 cursor unparsable", S, Sid::Own, C::Garbage, 400, Some("malformed_cursor")),
    row("3 cursor unparsable (migration)", M, Sid::Own, C::Garbage, 400, Some("malformed_cursor")),
    row("4 cursor of another session", S, Sid::Own, C::Foreign, 409, Some("namespace_mismatch")),
    row("4 cursor of another session (migration)", M, Sid::Own, C::Foreign, 409, Some("namespace_mismatch")),
    row("5 seq beyond the head", S, Sid::Own, C::Ahead, 409, Some("cursor_ahead")),
    row("5 seq beyond the head (migration)", M, Sid::Own, C::Ahead, 409, Some("cursor_ahead")),
    row("6 never delivered", S, Sid::Own, C::Undelivered, 409, Some("cursor_not_delivered")),
    row("6 never delivered (migration)", M, Sid::Own, C::Undelivered, 409, Some("cursor_not_delivered")),
    row("7 gap evicted", S, Sid::Own, C::Evicted, 409, Some("gap_not_covered")),
    row("7 gap evicted (migration)", M, Sid::Own, C::Evicted, 409, Some("gap_not_covered")),
    row("8 covered: the rest of the stream", S, Sid::Own, C::First, 200, None),
    row("8 covered: at the stream's end, an empty replay", S, Sid::Own, C::Last, 200, None),
    row("8 covered: everything after the cursor (migration)", M, Sid::Own, C::Last, 200, None),
];

/// Ids of every event of a 3-notification `emit_events` call (priming,
/// three notifications, the result), all read and so delivered.
async fn call_and_read(s: &TestServer, sid: &str) -> Vec<String> {
    let r = s.call_tool(sid, 1, "emit_events", json!({"count": 3})).await;
    let mut sse = SseReader::new(r);
    let mut ids = vec![];
    while let Some(e) = sse.next().await {
        ids.push(e.id.unwrap());
    }
    assert_eq!(ids.len(), 5, "{ids:?}");
    ids
}

fn config() -> ServerConfig {
    ServerConfig::default().with_ring(RingConfig::new(16, 1 << 20))
}

#[tokio::test]
async fn every_row_of_the_decision_table_over_http() {
    rows(&start(config()).await, &[]).await;
}

/// The same rows, the same answers, on a cluster node (`docs/SPEC.md` §8.3):
/// the store decides.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_of_the_decision_table_on_a_cluster_node() {
    let redis = gapless_redis::testing::RedisServer::start(&[]);
    let s = start_cluster(config(), &redis.url()).await;
    rows(&s, std::slice::from_ref(&s.server)).await;
}

/// The same rows through a real load balancer (HAProxy, `docs/haproxy.cfg`:
/// TCP, round robin, no stickiness) over three cluster nodes: every
/// request opens a connection of its own, so the requests of a row go to
/// different nodes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_row_of_the_decision_table_through_haproxy_over_three_nodes() {
    let redis = gapless_redis::testing::RedisServer::start(&[]);
    let mut nodes = vec![];
    for _ in 0..3 {
        nodes.push(start_cluster(config(), &redis.url()).await);
    }
    let lb = haproxy::Haproxy::start(&nodes.iter().map(|n| n.addr).collect::<Vec<_>>());
    let s = TestServer::at(lb.addr, "/mcp", nodes[0].server.clone());
    let servers: Vec<_> = nodes.iter().map(|n| n.server.clone()).collect();
    rows(&s, &servers).await;
    let took = lb.sessions();
    assert_eq!(took.len(), 3, "{took:?}");
    assert!(took.iter().all(|(_, n, _)| *n >= 20), "every node took its share of the connections: {took:?}");
}

/// The id of session `sid`'s newest standalone event, never delivered:
/// from `nodes` (the cluster nodes; none: `s`'s own process), the first
/// whose replica holds it.
async fn undelivered(s: &TestServer, sid: &str, nodes: &[gapless_server::McpServer]) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        let hubs = if nodes.is_empty() { std::slice::from_ref(&s.server) } else { nodes };
        for server in hubs {
            let Ok(session) = server.hub().get_str(sid, None) else { continue };
            let st = session.standalone().id();
            let high = session.reader().stream(st).map_or(0, |r| r.high.0);
            if high == 0 {
                continue;
            }
            let id = session.event_id(st, gapless::Seq(high));
            if nodes.is_empty() {
                return id.to_string();
            }
            // A cluster node's ring is the store's replica: each event's
            // payload starts with its check (the store's nonce).
            let snap = session.reader().snapshot(gapless::Seq(high - 1)).unwrap();
            let e = snap.iter().next().unwrap();
            let check = u64::from_le_bytes(e.payload[..8].try_into().unwrap());
            return id.with_check(check).to_string();
        }
        assert!(std::time::Instant::now() < deadline, "the standalone event did not arrive");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// Every row against `s`; `nodes`: the cluster nodes behind it (none: one
/// process, in memory).
async fn rows(s: &TestServer, nodes: &[gapless_server::McpServer]) {
    let other = s.initialize().await;
    let foreign = call_and_read(s, &other).await[1].clone();
    for row in ROWS {
        let sid = s.initialize().await;
        let ids = call_and_read(s, &sid).await;
        let cursor = match row.cursor {
            C::First => ids[1].clone(),
            C::Last => ids[4].clone(),
            C::Garbage => "garbage".to_owned(),
            C::Foreign => foreign.clone(),
            C::Ahead => format!("{}-999", ids[1].rsplit_once('-').unwrap().0),
            C::Undelivered => {
                let r =
                    s.call_tool(&sid, 2, "emit_events", json!({"count": 1, "target": "standalone"})).await;
                let _ = r.text().await;
                undelivered(s, &sid, nodes).await
            }
            C::Evicted => {
                let r = s.call_tool(&sid, 3, "emit_events", json!({"count": 40})).await;
                let _ = r.text().await;
                ids[1].clone()
            }
        };
        let named = match row.sid {
            Sid::Absent => None,
            Sid::Unknown => Some("0".repeat(32)),
            Sid::Deleted => {
                let r = s.http.delete(&s.url).header("mcp-session-id", &sid).send().await.unwrap();
                assert_eq!(r.status(), 204);
                Some(sid.clone())
            }
            Sid::Own => Some(sid.clone()),
        };
        let r = match row.form {
            S => s.get(named.as_deref(), Some(&cursor)).await,
            M => {
                let id = named.expect("the upgrade path always names a session");
                upgrade(s, &id, &json!({"cursor": cursor}).to_string()).await
            }
        };
        assert_eq!(r.status().as_u16(), row.status, "row {:?}", row.name);
        match row.kind {
            Some(kind) => {
                let body: Value = r.json().await.unwrap();
                assert_eq!(body["error"], json!(kind), "row {:?}: {body}", row.name);
                assert!(body["message"].is_string(), "row {:?}", row.name);
                if kind == "gap_not_covered" {
                    assert_eq!(body["cursor"], json!(cursor), "row {:?}", row.name);
                    assert!(body["oldest"].is_string() && body["missing"].as_u64() > Some(0), "{body}");
                }
            }
            None if row.form == S => {
                let mut sse = SseReader::new(r);
                let mut replay = vec![];
                while let Some(e) = sse.next().await {
                    replay.push(e.id.unwrap());
                }
                let after = ids.iter().position(|i| *i == cursor).unwrap();
                assert_eq!(replay, ids[after + 1..], "row {:?}", row.name);
            }
            None => {
                let body: Value = r.json().await.unwrap();
                assert!(body["ticket"].is_string(), "row {:?}: {body}", row.name);
                assert_eq!(
                    body["replay_count"],
                    json!(0),
                    "row {:?}: nothing after the last event",
                    row.name
                );
            }
        }
    }
}

/// The cluster reference (`docs/cluster.md`, "Run a cluster") shows the
/// HAProxy configuration these tests run.
#[test]
fn the_cluster_reference_shows_the_tested_haproxy_configuration() {
    let page = include_str!("../../../docs/cluster.md");
    let config = include_str!("../../../docs/haproxy.cfg");
    assert!(
        page.contains(&format!("```haproxy\n{config}```")),
        "docs/cluster.md must show docs/haproxy.cfg as it is"
    );
}
