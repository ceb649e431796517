//! Connection hygiene over loopback with raw sockets: header and body read
//! timeouts, the idle keep-alive timeout, connection caps that refuse
//! early, HTTP/2 prior knowledge, and a SIGTERM that finishes while clients
//! are stuck. Every wait is bounded.

mod common;
use common::*;
use gapless_server::{ServeConfig, ServerConfig};
use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::{Duration, Instant};

fn quick(header: u64, body: u64) -> (ServerConfig, ServeConfig) {
    let config = ServerConfig { body_read_timeout: Duration::from_millis(body), ..ServerConfig::default() };
    let serve = ServeConfig { header_read_timeout: Duration::from_millis(header), ..ServeConfig::default() };
    (config, serve)
}

fn raw(addr: SocketAddr) -> TcpStream {
    let s = TcpStream::connect(addr).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// Everything the server sends until it closes the connection (or 10 s).
fn read_to_close(s: &mut TcpStream) -> String {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match s.read(&mut buf) {
            Ok(0) => break,
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => break,
            Err(e) => panic!(
                "connection still open after the read timeout: {e}; read: {}",
                String::from_utf8_lossy(&out)
            ),
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A client that sends a partial request head and then one byte now and
/// then (slowloris) is disconnected once the header read timeout passes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn partial_headers_are_cut_off_at_the_header_timeout() {
    let (config, serve) = quick(500, 30_000);
    let s = start_served(config, serve).await;
    let addr = s.addr;
    let took = tokio::task::spawn_blocking(move || {
        let mut c = raw(addr);
        let start = Instant::now();
        c.write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nx: ").unwrap();
        // One byte every 100 ms: never a whole head.
        let mut dribbler = c.try_clone().unwrap();
        std::thread::spawn(move || {
            for _ in 0..50 {
                std::thread::sleep(Duration::from_millis(100));
                if dribbler.write_all(b"a").is_err() {
                    return;
                }
            }
        });
        read_to_close(&mut c);
        start.elapsed()
    })
    .await
    .unwrap();
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(3), "closed after {took:?}");
}

/// A kept-alive connection with no next request is closed once the header
/// read timeout passes (hyper starts that clock while it waits for a head).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn idle_keep_alive_connections_are_closed() {
    let (config, serve) = quick(500, 30_000);
    let s = start_served(config, serve).await;
    let addr = s.addr;
    let (reply, took) = tokio::task::spawn_blocking(move || {
        let mut c = raw(addr);
        c.write_all(b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n").unwrap();
        let start = Instant::now();
        (read_to_close(&mut c), start.elapsed())
    })
    .await
    .unwrap();
    assert!(reply.starts_with("HTTP/1.1 400"), "{reply}");
    assert!(reply.contains("missing_session"), "{reply}");
    assert!(took < Duration::from_secs(3), "idle connection open for {took:?}");
}

/// A connection that sends nothing at all is closed once the header read
/// timeout passes: telling its protocol from its first bytes waits no
/// longer than a request head may take.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn silent_connections_are_closed() {
    let (config, serve) = quick(500, 30_000);
    let s = start_served(config, serve).await;
    let addr = s.addr;
    let (reply, took) = tokio::task::spawn_blocking(move || {
        let mut c = raw(addr);
        let start = Instant::now();
        (read_to_close(&mut c), start.elapsed())
    })
    .await
    .unwrap();
    assert!(reply.is_empty(), "{reply}");
    assert!(took >= Duration::from_millis(400) && took < Duration::from_secs(3), "closed after {took:?}");
}

/// A request whose first bytes arrive one by one, starting like HTTP/2's
/// preface (`P`), is told apart as HTTP/1.1 once they diverge, and
/// answered whole: the protocol is read without taking any byte from hyper.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_request_trickling_in_is_answered() {
    let (config, serve) = quick(5_000, 30_000);
    let s = start_served(config, serve).await;
    let addr = s.addr;
    let reply = tokio::task::spawn_blocking(move || {
        let mut c = raw(addr);
        let head = b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        for b in &head[..4] {
            c.write_all(std::slice::from_ref(b)).unwrap();
            std::thread::sleep(Duration::from_millis(30));
        }
        c.write_all(&head[4..]).unwrap();
        read_to_close(&mut c)
    })
    .await
    .unwrap();
    // The guard's answer to a POST without the MCP headers: a JSON refusal,
    // so the head reached the router intact.
    assert!(reply.starts_with("HTTP/1.1 4"), "{reply}");
    assert!(reply.contains("\"error\":"), "{reply}");
}

/// A body that stops short of its `Content-Length`, or a chunked body that
/// never ends, gets 408 `request_timeout` with the JSON body once the body
/// read timeout passes; the connection does not hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_that_never_finish_get_a_408() {
    let (config, serve) = quick(10_000, 500);
    let s = start_served(config, serve).await;
    let addr = s.addr;
    let heads = [
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{\"jsonrpc\"",
        "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n5\r\n{\"jso\r\n",
    ];
    for head in heads {
        let (reply, took) = tokio::task::spawn_blocking(move || {
            let mut c = raw(addr);
            let start = Instant::now();
            c.write_all(head.as_bytes()).unwrap();
            (read_to_close(&mut c), start.elapsed())
        })
        .await
        .unwrap();
        assert!(reply.starts_with("HTTP/1.1 408"), "{reply}");
        assert!(reply.contains("\"error\":\"request_timeout\""), "{reply}");
        assert!(took < Duration::from_secs(3), "answered after {took:?}");
    }
}

/// A connection from `source` (a loopback address) to `addr`.
async fn raw_from(source: &str, addr: SocketAddr) -> TcpStream {
    let sock = tokio::net::TcpSocket::new_v4().unwrap();
    sock.bind(format!("{source}:0").parse().unwrap()).unwrap();
    let s = sock.connect(addr).await.unwrap().into_std().unwrap();
    s.set_nonblocking(false).unwrap();
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    s
}

/// A POST head declaring `len` bytes of body, and the body's first bytes.
fn upload_head(len: usize) -> String {
    format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: {len}\r\n\r\n{{")
}

/// Sends a POST head declaring `len` bytes and all of its body but the
/// last byte, which the server then holds while it waits for the rest.
fn upload_all_but_one(c: &mut TcpStream, len: usize) {
    c.write_all(upload_head(len).as_bytes()).unwrap();
    c.write_all(" ".repeat(len - 2).as_bytes()).unwrap();
}

/// A whole initialize request of exactly `len` bytes (padded with spaces).
fn whole_initialize(len: usize) -> String {
    let body = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}"#;
    let head = "POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\naccept: application/json, text/event-stream\r\nconnection: close\r\n";
    format!("{head}content-length: {len}\r\n\r\n{body}{}", " ".repeat(len - body.len()))
}

fn assert_over_budget(reply: &str, says: &str) {
    assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
    assert!(reply.contains("\"error\":\"too_many_body_bytes\""), "{reply}");
    assert!(reply.to_ascii_lowercase().contains("retry-after: 1"), "{reply}");
    assert!(reply.contains(says), "{says:?} in {reply}");
}

/// Request bodies being received hold a budget (here 256 KiB, a quarter
/// per client) for the bytes that have arrived: a client's upload whose
/// declared length does not fit what its share has left is refused at once
/// with 503 `too_many_body_bytes`, before anything of it is read, while
/// other clients' uploads are served; past the whole budget every client is
/// refused; a chunked body is refused at the frame that does not fit; a
/// body given up gives its share back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bodies_being_received_hold_a_bounded_budget() {
    let config = ServerConfig {
        max_body_bytes: 64 << 10,
        max_body_bytes_in_flight: 256 << 10,
        ..ServerConfig::default()
    };
    let s = start_served(config, ServeConfig::default()).await;
    let addr = s.addr;
    // 127.0.0.1 holds 59 999 of its 65 536 bytes with an upload it does
    // not finish.
    let mut held = raw_from("127.0.0.1", addr).await;
    let mut others = Vec::new();
    for source in ["127.0.0.2", "127.0.0.3", "127.0.0.4"] {
        others.push(raw_from(source, addr).await);
    }
    let (mut more, mut chunked, mut fifth) = (
        raw_from("127.0.0.1", addr).await,
        raw_from("127.0.0.1", addr).await,
        raw_from("127.0.0.5", addr).await,
    );
    let mut served = raw_from("127.0.0.2", addr).await;
    let mut too_long = raw_from("127.0.0.6", addr).await;
    tokio::task::spawn_blocking(move || {
        // A chunked body past the body limit is still 413, not a refusal of
        // the budget (the limit is checked first).
        let chunk = format!("9c40\r\n{}\r\n", " ".repeat(40_000));
        too_long
            .write_all(
                format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n{chunk}{chunk}").as_bytes(),
            )
            .unwrap();
        let reply = read_to_close(&mut too_long);
        assert!(reply.starts_with("HTTP/1.1 413") && reply.contains("payload_too_large"), "{reply}");
        upload_all_but_one(&mut held, 60_000);
        std::thread::sleep(Duration::from_millis(200));
        // The same client: 10 000 more do not fit its share.
        more.write_all(upload_head(10_000).as_bytes()).unwrap();
        assert_over_budget(&read_to_close(&mut more), "(59999 of this client's 65536); 10000 more");
        // Another client's whole upload of the same size is served.
        served.write_all(whole_initialize(60_000).as_bytes()).unwrap();
        let reply = read_to_close(&mut served);
        assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
        // A chunked body of the first client: its one chunk (6 000 bytes)
        // does not fit in what its share has left (5 537).
        let chunk = format!("{{{}", " ".repeat(5999));
        chunked
            .write_all(
                format!("POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ntransfer-encoding: chunked\r\n\r\n1770\r\n{chunk}\r\n").as_bytes(),
            )
            .unwrap();
        assert_over_budget(&read_to_close(&mut chunked), "of this client's 65536");
        // Three more clients hold 59 999 each: 239 996 of 262 144 in all,
        // so a fifth client's 60 000 do not fit the whole budget.
        for c in &mut others {
            upload_all_but_one(c, 60_000);
        }
        std::thread::sleep(Duration::from_millis(200));
        fifth.write_all(upload_head(60_000).as_bytes()).unwrap();
        assert_over_budget(&read_to_close(&mut fifth), "hold 239996 of the 262144 bytes allowed");
        // The first client gives up its upload: its share comes back.
        drop(held);
        let start = Instant::now();
        loop {
            let mut again = std::net::TcpStream::connect(addr).unwrap();
            again.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
            again.write_all(whole_initialize(60_000).as_bytes()).unwrap();
            let reply = read_to_close(&mut again);
            if reply.starts_with("HTTP/1.1 200") {
                break;
            }
            assert_over_budget(&reply, "too_many_body_bytes");
            assert!(start.elapsed() < Duration::from_secs(5), "the share never came back: {reply}");
            std::thread::sleep(Duration::from_millis(50));
        }
        drop(others);
    })
    .await
    .unwrap();
}

/// Over the per-address cap, a new connection is answered 503
/// `too_many_connections` at once (before it sends anything) and closed;
/// once one of the others closes, a new one is served again.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_over_the_cap_are_refused_early() {
    let serve = ServeConfig { max_connections_per_ip: 3, ..ServeConfig::default() };
    let s = start_served(ServerConfig::default(), serve).await;
    let addr = s.addr;
    tokio::task::spawn_blocking(move || {
        let held: Vec<TcpStream> = (0..3).map(|_| raw(addr)).collect();
        std::thread::sleep(Duration::from_millis(100));
        let mut over = raw(addr);
        let reply = read_to_close(&mut over);
        assert!(reply.starts_with("HTTP/1.1 503"), "{reply}");
        assert!(reply.contains("\"error\":\"too_many_connections\""), "{reply}");
        assert!(reply.to_ascii_lowercase().contains("retry-after: 1"), "{reply}");
        drop(held);
        std::thread::sleep(Duration::from_millis(200));
        let mut again = raw(addr);
        again.write_all(b"DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\n\r\n").unwrap();
        let reply = read_to_close(&mut again);
        assert!(reply.starts_with("HTTP/1.1 400"), "served again: {reply}");
    })
    .await
    .unwrap();
}

/// An HTTP/2 prior-knowledge connection is served (h2c), not dropped: the
/// server answers the preface with its own SETTINGS frame.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn http2_prior_knowledge_is_answered() {
    let s = start_served(ServerConfig::default(), ServeConfig::default()).await;
    let addr = s.addr;
    tokio::task::spawn_blocking(move || {
        let mut c = raw(addr);
        c.write_all(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n").unwrap();
        c.write_all(&[0, 0, 0, 4, 0, 0, 0, 0, 0]).unwrap(); // an empty SETTINGS frame
        let mut head = [0u8; 9];
        c.read_exact(&mut head).unwrap();
        assert_eq!(head[3], 4, "the first frame is SETTINGS: {head:?}");
    })
    .await
    .unwrap();
}

/// SIGTERM finishes, with exit status 0, within the grace period, while
/// three clients are stuck: one sent half a request line, one an
/// unfinished upload, one an SSE stream it does not read.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_finishes_with_stuck_clients() {
    let (mut child, addr) = spawn_binary(&[
        "--shutdown-grace-secs",
        "1",
        "--header-timeout-secs",
        "60",
        "--body-timeout-secs",
        "60",
    ]);
    let s = TestServer::at(
        addr,
        "/mcp",
        gapless_server::McpServer::builder(gapless_server_bin::demo::DemoHost).build().unwrap(),
    );
    let mut half = raw(addr);
    half.write_all(b"GE").unwrap();
    let mut upload = raw(addr);
    upload
        .write_all(b"POST /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: 100000\r\n\r\n{")
        .unwrap();
    let sid = s.initialize().await;
    let mut sse = raw(addr);
    sse.write_all(
        format!("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\naccept: text/event-stream\r\nmcp-session-id: {sid}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    // Fill the stream it never reads.
    let r = s
        .call_tool(
            &sid,
            1,
            "emit_events",
            serde_json::json!({"count": 300, "payload_bytes": 65536, "target": "standalone"}),
        )
        .await;
    drop(r);
    tokio::time::sleep(Duration::from_millis(300)).await;
    let start = Instant::now();
    // SAFETY: kill(2) on our own child's pid, with a valid signal number.
    assert_eq!(unsafe { libc::kill(child.0.id() as i32, libc::SIGTERM) }, 0);
    let status = loop {
        if let Some(st) = child.0.try_wait().unwrap() {
            break st;
        }
        if start.elapsed() > Duration::from_secs(10) {
            child.0.kill().unwrap();
            panic!("still running 10 s after SIGTERM (grace 1 s)");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert!(status.success(), "exit status {status:?}");
    assert!(start.elapsed() < Duration::from_secs(5), "took {:?}", start.elapsed());
    drop((half, upload, sse));
}

/// A spawned server, killed however the test ends.
struct Killed(std::process::Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The binary, started with `args` on a free loopback port, once it accepts
/// connections.
fn spawn_binary(args: &[&str]) -> (Killed, SocketAddr) {
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let child = Killed(
        std::process::Command::new(env!("CARGO_BIN_EXE_gapless-server"))
            .args(["--bind", &format!("127.0.0.1:{port}")])
            .args(args)
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
    let up = Instant::now();
    while TcpStream::connect(addr).is_err() {
        assert!(up.elapsed() < Duration::from_secs(20), "the server did not start");
        std::thread::sleep(Duration::from_millis(50));
    }
    (child, addr)
}

/// CPU time (user and system) process `pid` has used.
fn cpu_time(pid: u32) -> Duration {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // After the command name's closing parenthesis: state is field 3, so
    // utime (14) and stime (15) are the 12th and 13th.
    let rest = &stat[stat.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest.split(' ').skip(11).take(2).map(|v| v.parse().unwrap()).collect();
    // SAFETY: sysconf with a valid name has no preconditions.
    let hz = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as u64;
    Duration::from_millis((f[0] + f[1]) * 1000 / hz)
}

/// A stream with nothing to send costs no CPU: an SSE body that holds a
/// small chunk back for a scheduler round (so that what is published
/// meanwhile joins the write) never makes a round of its own while it has
/// nothing. Its first form did, on every poll hyper made, and the server
/// spun on two cores with one idle stream open. The binary runs alone, so
/// its CPU time is the server's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_idle_stream_costs_no_cpu() {
    let (child, addr) = spawn_binary(&[]);
    let s = TestServer::at(
        addr,
        "/mcp",
        gapless_server::McpServer::builder(gapless_server_bin::demo::DemoHost).build().unwrap(),
    );
    let sid = s.initialize().await;
    let mut sse = raw(addr);
    sse.write_all(
        format!("GET /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\naccept: text/event-stream\r\nmcp-session-id: {sid}\r\n\r\n").as_bytes(),
    )
    .unwrap();
    // A few events through the stream first, one at a time (each a chunk
    // held back for its round), then nothing.
    for id in 1..=3 {
        let r = s
            .call_tool(&sid, id, "emit_events", serde_json::json!({"count": 2, "target": "standalone"}))
            .await;
        let body = r.text().await.unwrap();
        assert!(body.contains("emitted 2"), "{body}");
    }
    sse.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut got = String::new();
    let mut buf = [0u8; 4096];
    while got.matches("\nid: ").count() < 6 {
        let n = sse.read(&mut buf).unwrap();
        assert!(n > 0, "the stream ended: {got}");
        got.push_str(&String::from_utf8_lossy(&buf[..n]));
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    let before = cpu_time(child.0.id());
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let used = cpu_time(child.0.id()) - before;
    assert!(
        used < Duration::from_millis(150),
        "the server used {used:?} of CPU in 1.5 s with one idle stream"
    );
    drop(sse);
}

/// Resident memory of this process (the server runs in it), in bytes.
fn rss() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let kb: u64 = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap();
    kb * 1024
}

/// A socket client that floods pings and never reads is closed with 1008
/// once over its control-frame budget; memory stays bounded meanwhile.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ping_flood_without_reading_is_closed() {
    use futures_util::{SinkExt, StreamExt};
    use tokio_tungstenite::tungstenite::Message;
    let s = start(ServerConfig::default()).await;
    let sid = s.initialize().await;
    let grant: serde_json::Value = upgrade(&s, &sid, r#"{"cursor": null}"#).await.json().await.unwrap();
    let ws = connect(&s, grant["websocket"].as_str().unwrap()).await;
    let (mut sink, mut stream) = ws.split();
    let before = rss();
    let start = Instant::now();
    // The server closes over its budget (500 pings), then reads what the
    // peer still sends for up to a second before it drops the socket: only
    // then do the sends fail. A client sends about 200 000 pings in that
    // second here, so the loop runs until a send fails, bounded by time
    // (and by a count no client reaches in it).
    let mut sent = 0u64;
    let mut refused = false;
    while sent < 20_000_000 && start.elapsed() < Duration::from_secs(10) {
        if sink.send(Message::Ping(vec![0u8; 64].into())).await.is_err() {
            refused = true;
            break;
        }
        sent += 1;
    }
    let grew = rss().saturating_sub(before);
    assert!(refused, "the server took {sent} pings in {:?} without closing", start.elapsed());
    assert!(grew < 64 << 20, "RSS grew by {grew} bytes during the flood");
    // Now read: whatever was sent before, then the close with 1008.
    let code = tokio::time::timeout(Duration::from_secs(10), async {
        while let Some(m) = stream.next().await {
            match m {
                Ok(Message::Close(Some(f))) => return Some(u16::from(f.code)),
                Ok(_) => continue,
                Err(_) => return None,
            }
        }
        None
    })
    .await
    .expect("the socket neither closed nor ended");
    assert_eq!(code, Some(1008), "closed with {code:?} after {sent} pings");
}

/// One request more than the session's in-flight cap is answered at once
/// with the JSON-RPC error -31001; the others run on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_over_the_in_flight_cap_get_an_error_at_once() {
    let s = start(ServerConfig { max_inflight_requests: 2, ..ServerConfig::default() }).await;
    let sid = s.initialize().await;
    let slow = serde_json::json!({"count": 20, "interval_ms": 250});
    let mut running = vec![];
    for id in 1..=2 {
        let r = s.call_tool(&sid, id, "emit_events", slow.clone()).await;
        let mut sse = SseReader::new(r);
        sse.next().await.unwrap(); // the priming event: the request runs
        running.push(sse);
    }
    let start = Instant::now();
    let r = s.call_tool(&sid, 3, "emit_events", serde_json::json!({"count": 1})).await;
    let mut sse = SseReader::new(r);
    let mut response = None;
    while let Some(e) = sse.next().await {
        if let Some(v) = e.json() {
            response = Some(v);
        }
    }
    let v = response.expect("a response");
    assert_eq!(v["id"], 3);
    assert_eq!(v["error"]["code"], -31001, "{v}");
    assert!(start.elapsed() < Duration::from_secs(2), "answered after {:?}", start.elapsed());
    // The running ones still stream.
    for sse in &mut running {
        assert!(sse.next().await.unwrap().emit_seq().is_some());
    }
}

fn init_body() -> serde_json::Value {
    serde_json::json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}})
}

/// `initialize` is rate limited per client (429 `rate_limited` with
/// `Retry-After`), decided before the body is read: a garbage body over the
/// limit gets the 429, not a 400. Another client is not affected.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_is_rate_limited_per_client_before_the_body_is_read() {
    let config = ServerConfig { initialize_per_sec: 0.5, initialize_burst: 3, ..ServerConfig::default() };
    let s = start_served(config, ServeConfig::default()).await;
    for _ in 0..3 {
        assert_eq!(s.post(None, init_body()).await.status(), 200);
    }
    let r = s
        .http
        .post(&s.url)
        .header("content-type", "application/json")
        .body("{ not json")
        .send()
        .await
        .unwrap();
    let retry = header(r.headers(), "retry-after").expect("Retry-After");
    assert!(retry.parse::<u64>().unwrap() >= 1, "{retry}");
    let b = expect_error(r, 429, "rate_limited").await;
    assert!(b["retry_after"].as_u64() >= Some(1), "{b}");
    // Identities are separate clients, whatever their address.
    let r = s.post_with(None, init_body(), &[("authorization", "Bearer x")]).await;
    expect_error(r, 429, "rate_limited").await; // no identity function: still this address
    let mcp = gapless_server::McpServer::builder(gapless_server_bin::demo::DemoHost)
        .config(ServerConfig { initialize_per_sec: 0.5, initialize_burst: 1, ..ServerConfig::default() })
        .identity(|p| p.headers.get("authorization").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build()
        .unwrap();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let (m2, app) = (mcp.clone(), mcp.router());
    tokio::spawn(
        async move { m2.serve(listener, app, ServeConfig::default(), std::future::pending()).await },
    );
    let t = TestServer::at(addr, "/mcp", mcp);
    for who in ["Bearer alice", "Bearer bob"] {
        assert_eq!(t.post_with(None, init_body(), &[("authorization", who)]).await.status(), 200, "{who}");
    }
    let r = t.post_with(None, init_body(), &[("authorization", "Bearer alice")]).await;
    expect_error(r, 429, "rate_limited").await;
}

/// A client holds at most `max_sessions_per_client` live sessions; a
/// deleted one gives its place back.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_sessions_per_client_are_capped() {
    let config = ServerConfig { max_sessions_per_client: 2, ..ServerConfig::default() };
    let s = start_served(config, ServeConfig::default()).await;
    let a = s.initialize().await;
    let _b = s.initialize().await;
    let b = expect_error(s.post(None, init_body()).await, 429, "client_session_limit").await;
    assert_eq!(b["max"], 2);
    let r = s.http.delete(&s.url).header("mcp-session-id", &a).send().await.unwrap();
    assert_eq!(r.status(), 204);
    // The deleted session's transport state goes once its connections
    // have; give the last SSE body a moment.
    let start = Instant::now();
    loop {
        let r = s.post(None, init_body()).await;
        if r.status() == 200 {
            break;
        }
        assert!(start.elapsed() < Duration::from_secs(5), "the deleted session's place never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A session id that is not UTF-8 names no session: an initialize carrying
/// one is `unknown_session`, never a new session past the per-client cap
/// (the limits apply to requests without the header).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_id_that_is_not_utf8_creates_no_session() {
    let config = ServerConfig { max_sessions_per_client: 1, ..ServerConfig::default() };
    let s = start_served(config, ServeConfig::default()).await;
    let _a = s.initialize().await;
    let bad = reqwest::header::HeaderValue::from_bytes(b"\xff\xfe").unwrap();
    for _ in 0..3 {
        let r = s
            .http
            .post(&s.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-session-id", bad.clone())
            .body(init_body().to_string())
            .send()
            .await
            .unwrap();
        expect_error(r, 404, "unknown_session").await;
        let r = s.http.get(&s.url).header("mcp-session-id", bad.clone()).send().await.unwrap();
        expect_error(r, 404, "unknown_session").await;
    }
    let m = s.server.metrics_text();
    assert!(m.lines().any(|l| l == "gapless_sessions_live 1"), "nothing created: {m}");
}

/// With the memory budget spent and nothing left to evict, `initialize` is
/// refused 503 `memory_exhausted` with `Retry-After`; the sessions already
/// there keep working.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn initialize_is_refused_when_the_memory_budget_is_spent() {
    let mut config = ServerConfig::default().with_ring(gapless::RingConfig::new(64, 1 << 20));
    config.hub.max_memory = 64 << 10;
    let s = start(config).await;
    let mut sessions = vec![];
    let refused = loop {
        let r = s.post(None, init_body()).await;
        if r.status() != 200 {
            break r;
        }
        sessions.push(header(r.headers(), "mcp-session-id").unwrap());
        let _ = r.text().await;
        assert!(sessions.len() < 1000, "never refused");
    };
    assert!(header(refused.headers(), "retry-after").is_some());
    expect_error(refused, 503, "memory_exhausted").await;
    assert!(!sessions.is_empty());
    let ping = serde_json::json!({"jsonrpc":"2.0","id":1,"method":"ping"});
    assert_eq!(s.post(Some(&sessions[0]), ping).await.status(), 200);
}

/// The binary's flags for these limits reach the server: `--max-header-bytes`
/// (431) and `--max-body-bytes-in-flight` (503 once a client's share, here
/// the whole budget, is held).
#[test]
fn the_binarys_limit_flags_take_effect() {
    let (_child, addr) = spawn_binary(&[
        "--max-header-bytes",
        "1024",
        "--max-body-bytes",
        "65536",
        "--max-body-bytes-in-flight",
        "64K",
    ]);
    let mut big = raw(addr);
    let pad = "a".repeat(2000);
    big.write_all(
        format!("DELETE /mcp HTTP/1.1\r\nHost: 127.0.0.1\r\nconnection: close\r\nx-pad: {pad}\r\n\r\n")
            .as_bytes(),
    )
    .unwrap();
    let reply = read_to_close(&mut big);
    assert!(reply.starts_with("HTTP/1.1 431") && reply.contains("headers_too_large"), "{reply}");
    let mut held = raw(addr);
    upload_all_but_one(&mut held, 60_000);
    std::thread::sleep(Duration::from_millis(200));
    let mut more = raw(addr);
    more.write_all(upload_head(10_000).as_bytes()).unwrap();
    assert_over_budget(&read_to_close(&mut more), "hold 59999 of the 65536 bytes allowed");
    drop(held);
}
