//! The operator's metrics (`docs/SPEC.md` §9) over loopback: what a client
//! does shows up in `/metrics`, and who may read them.

mod common;
use common::*;
use gapless::ring::RingConfig;
use gapless_server::{McpServer, ObserveAccess, ServeConfig, ServerConfig};
use gapless_server_bin::demo::DemoHost;
use serde_json::json;
use std::time::Duration;

/// The server through `McpServer::serve` (which gives each request its
/// peer's address) with the metrics merged at `/metrics`.
async fn start_observed(config: ServerConfig, access: ObserveAccess) -> TestServer {
    let server = McpServer::builder(DemoHost).config(config).build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = server.router().merge(server.metrics_router("/metrics", access));
    let s2 = server.clone();
    tokio::spawn(async move {
        s2.serve(listener, app, ServeConfig::default(), std::future::pending()).await.unwrap()
    });
    TestServer::at(addr, "/mcp", server)
}

async fn scrape(s: &TestServer) -> String {
    let r = s.http.get(format!("http://{}/metrics", s.addr)).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(r.headers()["content-type"], "application/openmetrics-text; version=1.0.0; charset=utf-8");
    r.text().await.unwrap()
}

/// The value of the sample named `sample` (with its labels, as written),
/// 0 when the text has none.
fn value(text: &str, sample: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(sample).and_then(|rest| rest.strip_prefix(' ')))
        .map_or(0.0, |v| v.trim().parse().unwrap_or_else(|_| panic!("{sample}: {v:?}")))
}

#[tokio::test]
async fn what_clients_do_is_counted() {
    let config = ServerConfig {
        hub: gapless::HubConfig { ring: RingConfig::new(8, 1 << 20), ..Default::default() },
        ..ServerConfig::default()
    };
    let s = start_observed(config, ObserveAccess::Loopback).await;
    let m = scrape(&s).await;
    assert!(m.ends_with("# EOF\n"), "{m}");
    assert_eq!(value(&m, "gapless_sessions_live"), 0.0, "{m}");
    assert_eq!(value(&m, "gapless_sessions_created_total"), 0.0);

    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 3})).await;
    let mut sse = SseReader::new(r);
    let mut ids = vec![];
    while let Some(e) = sse.next().await {
        ids.extend(e.id);
    }
    // 20 more events in a ring of 8: the oldest are evicted.
    let r = s.call_tool(&sid, 2, "emit_events", json!({"count": 20, "payload_bytes": 10})).await;
    let _ = r.text().await;
    let m = scrape(&s).await;
    assert_eq!(value(&m, "gapless_sessions_created_total"), 1.0, "{m}");
    assert_eq!(value(&m, "gapless_sessions_live"), 1.0);
    // initialize: priming + result; the calls: priming, 3 or 20 events, result.
    assert_eq!(value(&m, r#"gapless_events_published_total{target="request"}"#), 29.0, "{m}");
    assert_eq!(value(&m, r#"gapless_events_published_total{target="standalone"}"#), 0.0);
    assert!(value(&m, r#"gapless_payload_bytes_published_total{target="request"}"#) > 20.0 * 10.0, "{m}");
    assert_eq!(value(&m, "gapless_retained_events"), 8.0, "{m}");
    assert_eq!(value(&m, "gapless_evicted_events_total"), 29.0 - 8.0, "{m}");
    // The evicted events' payloads: some, never more than was published
    // (the engine's ring test checks the sum exactly).
    let evicted_bytes = value(&m, "gapless_evicted_bytes_total");
    assert!(evicted_bytes > 0.0, "{m}");
    assert!(evicted_bytes < value(&m, r#"gapless_payload_bytes_published_total{target="request"}"#), "{m}");
    assert!(value(&m, "gapless_retained_bytes") > 0.0);
    assert_eq!(value(&m, "gapless_ring_fill_ratio_count"), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_ring_fill_ratio_bucket{le="0.99"}"#), 0.0, "a full ring: {m}");
    assert_eq!(value(&m, r#"gapless_ring_fill_ratio_bucket{le="1.0"}"#), 1.0, "{m}");

    // An evicted cursor: refused, and counted by kind.
    expect_error(s.get(Some(&sid), Some(&ids[1])).await, 409, "gap_not_covered").await;
    // A resume at the stream's end: ok.
    let r = s.call_tool(&sid, 3, "emit_events", json!({"count": 1})).await;
    let mut sse = SseReader::new(r);
    let (mut first, mut last) = (None, None);
    while let Some(e) = sse.next().await {
        first = first.or(e.id.clone());
        last = e.id;
    }
    let r = s.get(Some(&sid), last.as_deref()).await;
    assert_eq!(r.status(), 200);
    assert!(SseReader::new(r).next().await.is_none());
    // A resume after the priming event: the event and the result again.
    let r = s.get(Some(&sid), first.as_deref()).await;
    assert_eq!(r.status(), 200);
    let mut sse = SseReader::new(r);
    let mut replayed = 0;
    while sse.next().await.is_some() {
        replayed += 1;
    }
    assert_eq!(replayed, 2);
    // A request without a session: refused (and not a resume).
    expect_error(s.get(None, None).await, 400, "missing_session").await;
    let m = scrape(&s).await;
    assert_eq!(value(&m, r#"gapless_refusals_total{kind="gap_not_covered"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_refusals_total{kind="missing_session"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_resumes_total{outcome="gap_not_covered"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_resumes_total{outcome="ok"}"#), 2.0, "{m}");
    // What the two granted resumes replayed: nothing, then 2 events.
    assert_eq!(value(&m, r#"gapless_replayed_events_count{via="resume"}"#), 2.0, "{m}");
    assert_eq!(value(&m, r#"gapless_replayed_events_sum{via="resume"}"#), 2.0, "{m}");
    assert_eq!(value(&m, r#"gapless_replayed_events_bucket{le="0.0",via="resume"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_replayed_events_count{via="socket"}"#), 0.0, "{m}");
    assert_eq!(value(&m, r#"gapless_resumes_total{outcome="missing_session"}"#), 0.0, "{m}");

    // An open standalone GET: an open SSE stream, and its lag.
    let open = s.get(Some(&sid), None).await;
    assert_eq!(open.status(), 200);
    let m = scrape(&s).await;
    assert_eq!(value(&m, "gapless_sse_streams_open"), 1.0, "{m}");
    drop(open);
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while value(&scrape(&s).await, "gapless_sse_streams_open") != 0.0 {
        assert!(std::time::Instant::now() < deadline, "the closed stream still counts as open");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }

    // Two events on the standalone stream, which no GET reads now: the
    // one open stream lags by them (the request streams have ended).
    let r = s.call_tool(&sid, 4, "emit_events", json!({"count": 2, "target": "standalone"})).await;
    let _ = r.text().await;
    let m = scrape(&s).await;
    assert_eq!(value(&m, "gapless_delivery_lag_events_count"), 1.0, "{m}");
    let lag = value(&m, "gapless_delivery_lag_events_sum");
    assert!((2.0..=4.0).contains(&lag), "{m}");

    // DELETE: the session is gone, what it published stays counted.
    let r = s.http.delete(&s.url).header("mcp-session-id", &sid).send().await.unwrap();
    assert!(r.status().is_success(), "{}", r.status());
    let m = scrape(&s).await;
    assert_eq!(value(&m, "gapless_sessions_deleted_total"), 1.0, "{m}");
    assert_eq!(value(&m, "gapless_sessions_live"), 0.0, "{m}");
    assert_eq!(value(&m, r#"gapless_events_published_total{target="request"}"#), 34.0, "{m}");
    // The standalone GET primed its stream; then two events.
    assert_eq!(value(&m, r#"gapless_events_published_total{target="standalone"}"#), 3.0, "{m}");
    assert_eq!(value(&m, "gapless_evicted_events_total"), 37.0 - 8.0, "{m}");
    assert!(value(&m, "gapless_evicted_bytes_total") > evicted_bytes, "more were evicted since: {m}");
    assert_eq!(value(&m, "gapless_retained_events"), 0.0, "{m}");
}

#[tokio::test]
async fn sessions_refused_for_lack_of_room_are_counted_by_reason() {
    let config = ServerConfig {
        hub: gapless::HubConfig { max_sessions: 1, ..Default::default() },
        ..ServerConfig::default()
    };
    let s = start_observed(config, ObserveAccess::Loopback).await;
    s.initialize().await;
    let r = s
        .post(
            None,
            json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
                "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}),
        )
        .await;
    expect_error(r, 503, "too_many_sessions").await;
    let m = scrape(&s).await;
    assert_eq!(value(&m, r#"gapless_sessions_refused_total{reason="too_many_sessions"}"#), 1.0, "{m}");
    assert_eq!(value(&m, "gapless_sessions_created_total"), 1.0, "{m}");
}

#[tokio::test]
async fn a_token_guards_the_metrics() {
    let s = start_observed(ServerConfig::default(), ObserveAccess::Token("s3cret".into())).await;
    let url = format!("http://{}/metrics", s.addr);
    let r = s.http.get(&url).send().await.unwrap();
    assert_eq!(r.status(), 401, "no token");
    assert_eq!(r.headers()["www-authenticate"], "Bearer");
    let r = s.http.get(&url).bearer_auth("s3cre").send().await.unwrap();
    assert_eq!(r.status(), 401, "a wrong token");
    let r = s.http.get(&url).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert!(r.text().await.unwrap().contains("gapless_sessions_live"));
    let r = s.http.post(&url).bearer_auth("s3cret").send().await.unwrap();
    assert_eq!(r.status(), 405);
}

/// The bundled binary serves them on its listener, and refuses a metrics
/// path inside the endpoint's routes or an empty token (exit code 2).
#[tokio::test]
async fn the_binary_serves_metrics_and_refuses_bad_flags() {
    let bin = env!("CARGO_BIN_EXE_gapless-server");
    for bad in [
        &["--metrics-path", "/mcp"][..],
        &["--metrics-path", "/mcp/ws"],
        &["--metrics-path", "metrics"],
        &["--metrics-path", "/a/{b}"],
        &["--metrics-token", ""],
    ] {
        let out = std::process::Command::new(bin).args(bad).output().unwrap();
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", String::from_utf8_lossy(&out.stderr));
        assert!(String::from_utf8_lossy(&out.stderr).contains("--metrics-"), "{bad:?}");
    }
    let port = gapless_redis::testing::free_port();
    let mut child = std::process::Command::new(bin)
        .args(["--bind", &format!("127.0.0.1:{port}"), "--metrics-path", "/ops/metrics"])
        .env("RUST_LOG", "warn")
        .spawn()
        .unwrap();
    let http = reqwest::Client::new();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let text = loop {
        match http.get(format!("http://127.0.0.1:{port}/ops/metrics")).send().await {
            Ok(r) => {
                assert_eq!(r.status(), 200);
                break r.text().await.unwrap();
            }
            Err(_) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(50)).await
            }
            Err(e) => panic!("the binary did not answer: {e}"),
        }
    };
    let _ = child.kill();
    let _ = child.wait();
    assert!(text.contains("gapless_sessions_live 0"), "{text}");
}

/// Migrations, ticket redeems, open sockets and socket closes.
#[tokio::test]
async fn migrations_and_sockets_are_counted() {
    use futures_util::SinkExt;
    let s = start_observed(ServerConfig::default(), ObserveAccess::Loopback).await;
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 2})).await;
    let mut sse = SseReader::new(r);
    let mut cursor = None;
    while let Some(e) = sse.next().await {
        cursor = cursor.or(e.id);
    }
    let r = upgrade(&s, &sid, &json!({"cursor": cursor.unwrap()}).to_string()).await;
    assert_eq!(r.status(), 200);
    let grant: serde_json::Value = r.json().await.unwrap();
    expect_error(upgrade(&s, &sid, r#"{"cursor": "nonsense"}"#).await, 400, "malformed_cursor").await;
    // A used-up or made-up ticket is refused.
    let bad = tokio_tungstenite::connect_async(format!("ws://{}/mcp/ws?ticket=00", s.addr)).await;
    assert!(bad.is_err(), "a made-up ticket");
    let mut ws = connect(&s, grant["websocket"].as_str().unwrap()).await;
    assert!(frame(&mut ws).await.is_some(), "the socket replays");
    let m = scrape(&s).await;
    assert_eq!(value(&m, r#"gapless_migrations_total{outcome="ok"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_migrations_total{outcome="malformed_cursor"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_ticket_redeems_total{outcome="ok"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_ticket_redeems_total{outcome="ticket_invalid"}"#), 1.0, "{m}");
    assert_eq!(value(&m, "gapless_sockets_open"), 1.0, "{m}");
    let count = grant["replay_count"].as_u64().unwrap();
    assert!(count >= 2, "the two events at least: {grant}");
    assert_eq!(value(&m, r#"gapless_replayed_events_count{via="socket"}"#), 1.0, "{m}");
    assert_eq!(value(&m, r#"gapless_replayed_events_sum{via="socket"}"#), count as f64, "{m}");
    // A binary frame is refused with close 4400 (docs/SPEC.md §5).
    ws.send(tokio_tungstenite::tungstenite::Message::Binary(vec![1].into())).await.unwrap();
    while frame(&mut ws).await.is_some() {}
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let m = scrape(&s).await;
        if value(&m, "gapless_sockets_open") == 0.0 {
            assert_eq!(value(&m, r#"gapless_socket_closes_total{code="4400"}"#), 1.0, "{m}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "the socket still counts as open: {m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A ticket nobody redeems counts as expired once the sweeper finds it
/// past its TTL; a redeemed one never does.
#[tokio::test]
async fn expired_tickets_are_counted() {
    let ttl = Duration::from_millis(300);
    let config = ServerConfig {
        hub: gapless::HubConfig { ticket_ttl: ttl, ..Default::default() },
        ..ServerConfig::default()
    };
    let s = start_observed(config, ObserveAccess::Loopback).await;
    let _sweeper = s.server.spawn_sweeper(Duration::from_millis(50));
    let sid = s.initialize().await;
    let grant = |r: reqwest::Response| async move {
        assert_eq!(r.status(), 200);
        r.json::<serde_json::Value>().await.unwrap()
    };
    let _unused = grant(upgrade(&s, &sid, r#"{"cursor": null}"#).await).await;
    let used = grant(upgrade(&s, &sid, r#"{"cursor": null}"#).await).await;
    let ws = connect(&s, used["websocket"].as_str().unwrap()).await;
    assert_eq!(value(&scrape(&s).await, "gapless_tickets_expired_total"), 0.0);
    tokio::time::sleep(ttl).await;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    loop {
        let m = scrape(&s).await;
        if value(&m, "gapless_tickets_expired_total") > 0.0 {
            assert_eq!(value(&m, "gapless_tickets_expired_total"), 1.0, "the redeemed one is not: {m}");
            break;
        }
        assert!(std::time::Instant::now() < deadline, "no expired ticket counted: {m}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    drop(ws);
}

/// `--log-format json`: one JSON object per line; each refusal logged once
/// with its kind and numbers, in a span that names the session by its tag;
/// each SSE response in a span of its own; the session id (a bearer
/// secret) in no line.
#[tokio::test]
async fn json_logs_name_refusals_and_never_the_session_id() {
    use std::io::BufRead;
    let port = gapless_redis::testing::free_port();
    let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_gapless-server"))
        .args(["--bind", &format!("127.0.0.1:{port}"), "--ring-events", "8", "--log-format", "json"])
        .env("RUST_LOG", "info,gapless_server=debug")
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let out = child.stdout.take().unwrap();
    let lines = std::thread::spawn(move || {
        std::io::BufReader::new(out).lines().map_while(Result::ok).collect::<Vec<_>>()
    });
    let s = TestServer::at(
        format!("127.0.0.1:{port}").parse().unwrap(),
        "/mcp",
        McpServer::builder(DemoHost).build().unwrap(), // unused: the child serves
    );
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    while s.http.get(format!("http://127.0.0.1:{port}/metrics")).send().await.is_err() {
        assert!(std::time::Instant::now() < deadline, "the binary did not start");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let sid = s.initialize().await;
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 2})).await;
    let mut sse = SseReader::new(r);
    let first = sse.next().await.and_then(|e| e.id).unwrap();
    while sse.next().await.is_some() {}
    let r = s.call_tool(&sid, 2, "emit_events", json!({"count": 20})).await;
    let _ = r.text().await;
    let body = expect_error(s.get(Some(&sid), Some(&first)).await, 409, "gap_not_covered").await;
    let _ = child.kill();
    let _ = child.wait();
    let lines = lines.join().unwrap();
    assert!(lines.len() > 3, "{lines:?}");
    for l in &lines {
        let _: serde_json::Value = serde_json::from_str(l).unwrap_or_else(|e| panic!("not JSON ({e}): {l}"));
        assert!(!l.contains(&sid), "the session id in a log line: {l}");
    }
    let refused: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["fields"]["message"] == "refused")
        .collect();
    assert_eq!(refused.len(), 1, "one refusal, logged once: {lines:#?}");
    let r = &refused[0];
    assert_eq!(r["level"], "INFO");
    assert_eq!(r["fields"]["kind"], "gap_not_covered", "{r}");
    let numbers: serde_json::Value = serde_json::from_str(r["fields"]["numbers"].as_str().unwrap()).unwrap();
    assert_eq!(numbers["missing"], body["missing"], "{r}");
    assert_eq!(numbers["cursor"], json!(first), "{r}");
    let tag = r["span"]["session"].as_str().expect("the span names the session");
    assert_eq!(tag.len(), 8, "{r}");
    assert!(!sid.contains(tag), "the tag is no part of the id");
    // Each SSE response has a span of its own (debug: opened, closed),
    // naming the session by the same tag, and its stream.
    let closed: Vec<serde_json::Value> = lines
        .iter()
        .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
        .filter(|v| v["fields"]["message"] == "stream closed")
        .collect();
    assert!(closed.len() >= 3, "initialize and two calls: {lines:#?}");
    for c in &closed {
        assert_eq!(c["span"]["name"], "stream", "{c}");
        assert_eq!(c["span"]["session"], tag, "{c}");
        assert!(c["span"]["stream"].as_u64().is_some(), "{c}");
    }
}

/// The status page and its data: loopback by default; with a token the
/// static page is served to anyone, its data only with the token.
#[tokio::test]
async fn the_status_page_and_its_data_are_guarded() {
    let server = McpServer::builder(DemoHost).build().unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = server
        .router()
        .merge(server.status_router("/status", ObserveAccess::Token("t0k".into())))
        .merge(server.status_router("/open", ObserveAccess::Loopback));
    let s2 = server.clone();
    tokio::spawn(async move {
        s2.serve(listener, app, ServeConfig::default(), std::future::pending()).await.unwrap()
    });
    let http = reqwest::Client::new();
    let page = http.get(format!("http://{addr}/status")).send().await.unwrap();
    assert_eq!(page.status(), 200);
    assert_eq!(page.headers()["content-type"], "text/html; charset=utf-8");
    assert!(page.headers()["content-security-policy"].to_str().unwrap().contains("default-src 'none'"));
    let html = page.text().await.unwrap();
    assert!(html.contains("gapless status"));
    // Self-contained: no link, no asset or script from elsewhere (the one
    // URL is SVG's namespace name, which is never fetched).
    let urls: Vec<&str> =
        html.match_indices("http").map(|(i, _)| &html[i..(i + 30).min(html.len())]).collect();
    assert!(urls.iter().all(|u| u.starts_with("http://www.w3.org/2000/svg")), "{urls:?}");
    assert!(!html.contains("<link") && !html.contains(" src="), "self-contained");
    let data = format!("http://{addr}/status/data.json");
    assert_eq!(http.get(&data).send().await.unwrap().status(), 401);
    assert_eq!(http.get(&data).bearer_auth("t0").send().await.unwrap().status(), 401);
    let r = http.get(&data).bearer_auth("t0k").send().await.unwrap();
    assert_eq!(r.status(), 200);
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["counters"]["sessions_live"], 0, "{v}");
    assert!(
        v["sessions"].as_array().unwrap().is_empty() && v["refusals"].as_array().unwrap().is_empty(),
        "{v}"
    );
    // Loopback access: this client is on loopback.
    let r = http.get(format!("http://{addr}/open/data.json")).send().await.unwrap();
    assert_eq!(r.status(), 200);
    assert_eq!(http.post(format!("http://{addr}/open/data.json")).send().await.unwrap().status(), 405);
}

/// A paced publish that waits for a reader that does not read is counted
/// with its wait; the reader then gets every event.
#[tokio::test]
async fn paced_publishes_that_waited_are_counted() {
    let config = ServerConfig::default().with_ring(RingConfig::new(8, 1 << 20));
    let s = common::start(config).await;
    let sid = s.initialize().await;
    let wait_count = |m: &str| value(m, "gapless_paced_wait_seconds_count");
    assert_eq!(wait_count(&s.server.metrics_text()), 0.0);
    // 200 events of 64 KiB: far more than the socket buffers hold, so
    // the publisher catches up with a reader that reads nothing yet.
    let r = s.call_tool(&sid, 1, "emit_events", json!({"count": 200, "payload_bytes": 65536})).await;
    assert_eq!(r.status(), 200);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let mut sse = SseReader::new(r);
    let mut seqs = vec![];
    while let Some(e) = sse.next().await {
        seqs.extend(e.emit_seq());
    }
    assert_eq!(seqs, (1..=200).collect::<Vec<_>>(), "every event, once, in order");
    let m = s.server.metrics_text();
    assert!(wait_count(&m) >= 1.0, "{m}");
    assert!(value(&m, "gapless_paced_wait_seconds_sum") > 0.0, "{m}");
}

/// Every metric the Grafana dashboard (`docs/grafana/gapless.json`) asks
/// for is one the server exports.
#[tokio::test]
async fn the_dashboard_uses_only_exported_metrics() {
    let s = common::start(ServerConfig::default()).await;
    let text = s.server.metrics_text();
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../../docs/grafana/gapless.json");
    let dashboard: serde_json::Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    let mut names = std::collections::BTreeSet::new();
    for panel in dashboard["panels"].as_array().unwrap() {
        for target in panel["targets"].as_array().unwrap() {
            let expr = target["expr"].as_str().unwrap();
            let mut rest = expr;
            while let Some(i) = rest.find("gapless_") {
                let name: String =
                    rest[i..].chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
                rest = &rest[i + name.len()..];
                names.insert(name);
            }
        }
    }
    assert!(names.len() >= 15, "{names:?}");
    for name in &names {
        let family =
            ["_bucket", "_count", "_sum", "_total"].iter().find_map(|s| name.strip_suffix(s)).unwrap_or(name);
        assert!(
            text.contains(&format!("# TYPE {family} ")),
            "the dashboard's {name} is not exported:\n{text}"
        );
    }
}
