//! `gapless-gateway-bench`: gapless-gateway in front of the official
//! TypeScript SDK's server (`server/gateway/tests/upstreams/ts_upstream.mjs`,
//! no event store: its fastest form), against that same server alone, over
//! loopback HTTP/1.1 (hyper, one connection per exchange in flight).
//!
//! Workloads, each on both paths in one run (alternating, so that drifting
//! load hits both alike):
//! 1. **One stream**: one session, `emit_events {count, payload_bytes: 64}`
//!    on the call's own stream; events/s from the POST to the response,
//!    every `data.seq` checked in order.
//! 2. **N sessions**: N sessions each emit `per` events at once; events/s in
//!    all, the gateway's CPU per delivered event (`/proc/<pid>/stat`), its
//!    peak RSS.
//! 3. **Latency**: N sessions paced to a steady rate in all; each event is
//!    stamped by the upstream when sent (`stamp: true`, wall clock in µs)
//!    and the client subtracts it from its own clock at read: p50, p99,
//!    p99.9 on both paths, and the difference (what the gateway adds).
//!
//! The client's, the gateway's and the upstream's CPU are reported apart
//! (they share the machine). Only 127.0.0.1 is contacted; a watchdog ends
//! the tool after `--deadline-secs`.

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::Request;
use hyper_util::rt::TokioIo;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};
use tokio::io::{AsyncBufReadExt, BufReader};

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

struct Opts {
    gateway_bin: PathBuf,
    upstream_script: PathBuf,
    count: u64,
    runs: usize,
    sessions: usize,
    per_session: u64,
    latency_sessions: usize,
    latency_rate: u64,
    latency_secs: u64,
    deadline: Duration,
}

fn usage() -> ! {
    eprintln!(
        "usage: gapless-gateway-bench --gateway-bin PATH --upstream-script PATH [options]
  --count N             events per one-stream run (default 20000)
  --runs N              measured one-stream runs per path (default 5; one warm-up more)
  --sessions N          concurrent sessions of the N-session run (default 100)
  --per-session N       events per session in it (default 500)
  --latency-sessions N  sessions of the latency run (default 100)
  --latency-rate N      events/s in all in the latency run (default 1000)
  --latency-secs N      its length (default 10)
  --deadline-secs N     hard stop (default 600)"
    );
    std::process::exit(2)
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        gateway_bin: PathBuf::new(),
        upstream_script: PathBuf::new(),
        count: 20_000,
        runs: 5,
        sessions: 100,
        per_session: 500,
        latency_sessions: 100,
        latency_rate: 1000,
        latency_secs: 10,
        deadline: Duration::from_secs(600),
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| usage());
        let mut n = || v().parse::<u64>().unwrap_or_else(|_| usage());
        match a.as_str() {
            "--gateway-bin" => o.gateway_bin = args.next().unwrap_or_else(|| usage()).into(),
            "--upstream-script" => o.upstream_script = args.next().unwrap_or_else(|| usage()).into(),
            "--count" => o.count = n(),
            "--runs" => o.runs = n() as usize,
            "--sessions" => o.sessions = n() as usize,
            "--per-session" => o.per_session = n(),
            "--latency-sessions" => o.latency_sessions = n() as usize,
            "--latency-rate" => o.latency_rate = n(),
            "--latency-secs" => o.latency_secs = n(),
            "--deadline-secs" => o.deadline = Duration::from_secs(n()),
            _ => usage(),
        }
    }
    if o.gateway_bin.as_os_str().is_empty() || o.upstream_script.as_os_str().is_empty() || o.runs == 0 {
        usage()
    }
    o
}

// ---------------------------------------------------------------- processes

struct Proc {
    child: tokio::process::Child,
    pid: u32,
    addr: SocketAddr,
}

async fn start_upstream(script: &PathBuf) -> Result<Proc> {
    let mut child = tokio::process::Command::new("node")
        .arg(script)
        .args(["--port", "0"])
        .current_dir(script.parent().ok_or("script dir")?)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("no pid")?;
    let mut line = String::new();
    let out = child.stdout.take().ok_or("stdout")?;
    tokio::time::timeout(Duration::from_secs(20), BufReader::new(out).read_line(&mut line)).await??;
    let port: u16 = line.trim().strip_prefix("listening ").ok_or("no listening line")?.parse()?;
    Ok(Proc { child, pid, addr: format!("127.0.0.1:{port}").parse()? })
}

async fn start_gateway(bin: &PathBuf, upstream: SocketAddr) -> Result<Proc> {
    let port = std::net::TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
    let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
    // Every load client shares one address: the per-client limits lifted.
    let child = tokio::process::Command::new(bin)
        .args(["--upstream", &format!("http://{upstream}/mcp"), "--bind", &addr.to_string()])
        .args(["--max-sessions-per-client", "100000", "--initialize-burst", "100000"])
        .args(["--max-connections-per-ip", "100000"])
        .env("RUST_LOG", "warn")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .kill_on_drop(true)
        .spawn()?;
    let pid = child.id().ok_or("no pid")?;
    let until = Instant::now() + Duration::from_secs(20);
    while tokio::net::TcpStream::connect(addr).await.is_err() {
        if Instant::now() > until {
            return Err("the gateway did not listen".into());
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    Ok(Proc { child, pid, addr })
}

fn cpu_secs(pid: u32) -> f64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    let f: Vec<&str> = s.rsplit_once(')').map(|(_, r)| r.split_whitespace().collect()).unwrap_or_default();
    let t = |i: usize| f.get(i).and_then(|x| x.parse::<f64>().ok()).unwrap_or(0.0);
    (t(11) + t(12)) / 100.0
}

fn self_cpu_secs() -> f64 {
    cpu_secs(std::process::id())
}

fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

// ---------------------------------------------------------------- client

struct Conn {
    send: SendRequest<Full<Bytes>>,
    addr: SocketAddr,
}

impl Conn {
    async fn open(addr: SocketAddr) -> Result<Conn> {
        let tcp = tokio::net::TcpStream::connect(addr).await?;
        tcp.set_nodelay(true)?;
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        tokio::spawn(conn);
        Ok(Conn { send, addr })
    }

    async fn post(&mut self, session: Option<&str>, body: String) -> Result<hyper::Response<Incoming>> {
        let mut r = Request::post("/mcp")
            .header("host", self.addr.to_string())
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .header("mcp-protocol-version", "2025-06-18");
        if let Some(s) = session {
            r = r.header("mcp-session-id", s);
        }
        self.send.ready().await?;
        Ok(self.send.send_request(r.body(Full::new(Bytes::from(body)))?).await?)
    }
}

/// The `data:` payloads of an SSE body, a message at a time.
struct Sse {
    body: Incoming,
    buf: BytesMut,
}

impl Sse {
    async fn next(&mut self) -> Result<Option<Bytes>> {
        loop {
            if let Some(i) = find(&self.buf, b"\n\n") {
                let block = self.buf.split_to(i + 2);
                let mut data = Vec::new();
                for line in block[..].split(|b: &u8| *b == b'\n') {
                    let line = line.strip_suffix(b"\r").unwrap_or(line);
                    if let Some(d) = line.strip_prefix(b"data:") {
                        data.extend_from_slice(d.strip_prefix(b" ").unwrap_or(d));
                    }
                }
                if !data.is_empty() {
                    return Ok(Some(Bytes::from(data)));
                }
                continue;
            }
            match self.body.frame().await {
                None => return Ok(None),
                Some(f) => {
                    if let Ok(d) = f?.into_data() {
                        self.buf.extend_from_slice(&d);
                    }
                }
            }
        }
    }
}

fn find(h: &[u8], n: &[u8]) -> Option<usize> {
    h.windows(n.len()).position(|w| w == n)
}

fn now_us() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default().as_micros() as u64
}

struct Session {
    conn: Conn,
    id: String,
    next: u64,
}

impl Session {
    async fn open(addr: SocketAddr) -> Result<Session> {
        let mut conn = Conn::open(addr).await?;
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"bench","version":"1"}}}"#;
        let r = conn.post(None, init.into()).await?;
        let id = r
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or("no session id")?
            .to_owned();
        let _ = r.into_body().collect().await?;
        let r =
            conn.post(Some(&id), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.into()).await?;
        let _ = r.into_body().collect().await?;
        Ok(Session { conn, id, next: 2 })
    }

    /// `emit_events` on the call's stream; every event's `data.seq` checked
    /// in order; with `stamp`, each one's latency (µs) into `lat`.
    async fn emit(&mut self, count: u64, interval_ms: u64, stamp: bool, lat: &mut Vec<i64>) -> Result<u64> {
        let rid = self.next;
        self.next += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"emit_events","arguments":{{"count":{count},"payload_bytes":64,"interval_ms":{interval_ms},"stamp":{stamp}}}}}}}"#
        );
        let r = self.conn.post(Some(&self.id), body).await?;
        let mut sse = Sse { body: r.into_body(), buf: BytesMut::new() };
        let mut next = 1;
        while let Some(d) = sse.next().await? {
            let v: serde_json::Value = serde_json::from_slice(&d)?;
            if let Some(seq) = v.pointer("/params/data/seq").and_then(|s| s.as_u64()) {
                if seq != next {
                    return Err(format!("seq {seq} where {next} was due").into());
                }
                next += 1;
                if let Some(t) = v.pointer("/params/data/t").and_then(|t| t.as_u64()) {
                    // Signed: node's clock (its time origin plus a monotonic
                    // offset) may stand a little apart from this one; the
                    // offset is the same on both paths and cancels in their
                    // difference.
                    lat.push(now_us() as i64 - t as i64);
                }
            } else if v.get("id").is_some() {
                if v.pointer("/result/content/0/text").and_then(|t| t.as_str())
                    != Some(&format!("emitted {count}"))
                {
                    return Err(format!("unexpected response {v}").into());
                }
                // The stream ends after its response: read it to its end, so
                // that the connection carries the next request.
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    while let Ok(Some(_)) = sse.next().await {}
                })
                .await;
                return Ok(next - 1);
            }
        }
        Err(format!("the stream ended at seq {}", next - 1).into())
    }
}

// ---------------------------------------------------------------- workloads

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn pct(v: &[i64], p: f64) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    v[((v.len() as f64 * p) as usize).min(v.len() - 1)] as f64 / 1000.0
}

struct Paths {
    up: Proc,
    gw: Proc,
}

/// One stream, `runs` measured runs per path, alternating.
async fn one_stream(o: &Opts, p: &Paths) -> Result<String> {
    let mut direct = Session::open(p.up.addr).await?;
    let mut via = Session::open(p.gw.addr).await?;
    let (mut rd, mut rg, mut gw_cpu, mut events) = (vec![], vec![], 0.0, 0);
    for run in 0..=o.runs {
        let t = Instant::now();
        direct.emit(o.count, 0, false, &mut vec![]).await?;
        let d = o.count as f64 / t.elapsed().as_secs_f64();
        let c0 = cpu_secs(p.gw.pid);
        let t = Instant::now();
        via.emit(o.count, 0, false, &mut vec![]).await?;
        let g = o.count as f64 / t.elapsed().as_secs_f64();
        let c = cpu_secs(p.gw.pid) - c0;
        eprintln!("  one stream run {run}: upstream alone {d:.0}/s, through the gateway {g:.0}/s, gateway cpu {c:.2} s");
        if run > 0 {
            rd.push(d);
            rg.push(g);
            gw_cpu += c;
            events += o.count;
        }
    }
    let (md, mg) = (median(&mut rd), median(&mut rg));
    Ok(format!(
        "| one stream ({} events × {} runs) | {md:.0} | {mg:.0} | **{:.2}** | {:.2} |\n",
        o.count,
        o.runs,
        mg / md,
        gw_cpu * 1e6 / events as f64
    ))
}

/// `n` sessions each emitting `per` events at once at `addr`; (events/s,
/// events, peak RSS KiB of `watch`).
async fn many(
    addr: SocketAddr,
    n: usize,
    per: u64,
    interval_ms: u64,
    stamp: bool,
    watch: u32,
) -> Result<(f64, u64, u64, Vec<i64>)> {
    let mut sessions = Vec::with_capacity(n);
    for _ in 0..n {
        sessions.push(Session::open(addr).await?);
    }
    let rss0 = rss_kib(watch);
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(rss0));
    let (p2, stop) = (peak.clone(), std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false)));
    let s2 = stop.clone();
    let sampler = tokio::spawn(async move {
        while !s2.load(std::sync::atomic::Ordering::Relaxed) {
            p2.fetch_max(rss_kib(watch), std::sync::atomic::Ordering::Relaxed);
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    let t = Instant::now();
    let mut tasks = Vec::new();
    for mut s in sessions {
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            let r = s.emit(per, interval_ms, stamp, &mut lat).await;
            (r, lat)
        }));
    }
    let (mut total, mut lat) = (0, Vec::new());
    for t in tasks {
        let (r, l) = t.await?;
        total += r?;
        lat.extend(l);
    }
    let wall = t.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let _ = sampler.await;
    lat.sort_unstable();
    Ok((total as f64 / wall, total, peak.load(std::sync::atomic::Ordering::Relaxed), lat))
}

async fn sessions(o: &Opts, p: &Paths) -> Result<String> {
    let (d, _, _, _) = many(p.up.addr, o.sessions, o.per_session, 0, false, p.up.pid).await?;
    let rss0 = rss_kib(p.gw.pid);
    let c0 = cpu_secs(p.gw.pid);
    let (g, events, peak, _) = many(p.gw.addr, o.sessions, o.per_session, 0, false, p.gw.pid).await?;
    let c = cpu_secs(p.gw.pid) - c0;
    eprintln!("  {} sessions: upstream alone {d:.0}/s, through the gateway {g:.0}/s, gateway cpu {c:.2} s, peak RSS {peak} KiB (from {rss0})", o.sessions);
    Ok(format!(
        "| {} sessions × {} events | {d:.0} | {g:.0} | **{:.2}** | {:.2} |\n\nGateway peak RSS in that run: {peak} KiB ({:.1} KiB per busy session over its {rss0} KiB before).\n",
        o.sessions,
        o.per_session,
        g / d,
        c * 1e6 / events as f64,
        (peak.saturating_sub(rss0)) as f64 / o.sessions as f64,
    ))
}

async fn latency(o: &Opts, p: &Paths) -> Result<String> {
    let n = o.latency_sessions;
    let per = (o.latency_rate * o.latency_secs / n as u64).max(1);
    let interval = (1000 * n as u64 / o.latency_rate).max(1);
    let (_, _, _, ld) = many(p.up.addr, n, per, interval, true, p.up.pid).await?;
    let (_, _, _, lg) = many(p.gw.addr, n, per, interval, true, p.gw.pid).await?;
    let row = |name: &str, l: &[i64]| {
        format!(
            "| {name} | {} | {:.3} | {:.3} | {:.3} |\n",
            l.len(),
            pct(l, 0.5),
            pct(l, 0.99),
            pct(l, 0.999)
        )
    };
    Ok(format!(
        "\nLatency from the upstream's send (its stamp: node's `performance.timeOrigin + now()`, which may stand apart from the client's clock by a constant that cancels in the difference) to the client's read, {n} sessions paced to {} events/s in all ({interval} ms apart each), {} s, in ms:\n\n| path | events | p50 | p99 | p99.9 |\n|---|---|---|---|---|\n{}{}| **added by the gateway** | | **{:.3}** | **{:.3}** | {:.3} |\n",
        o.latency_rate,
        o.latency_secs,
        row("upstream alone", &ld),
        row("through the gateway", &lg),
        pct(&lg, 0.5) - pct(&ld, 0.5),
        pct(&lg, 0.99) - pct(&ld, 0.99),
        pct(&lg, 0.999) - pct(&ld, 0.999),
    ))
}

fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split_whitespace()
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let o = parse_opts();
    let deadline = o.deadline;
    std::thread::spawn(move || {
        std::thread::sleep(deadline);
        eprintln!("gapless-gateway-bench: deadline exceeded");
        std::process::exit(3);
    });
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let code = rt.block_on(async {
        let before = loadavg();
        let run = async {
            let up = start_upstream(&o.upstream_script).await?;
            let gw = start_gateway(&o.gateway_bin, up.addr).await?;
            let p = Paths { up, gw };
            let (c0, u0) = (self_cpu_secs(), cpu_secs(p.up.pid));
            let mut md = String::from(
                "| workload | upstream alone (events/s) | through the gateway (events/s) | ratio | gateway CPU per event (µs) |\n|---|---|---|---|---|\n",
            );
            md += &one_stream(&o, &p).await?;
            md += &sessions(&o, &p).await?;
            md += &latency(&o, &p).await?;
            let (c1, u1) = (self_cpu_secs(), cpu_secs(p.up.pid));
            md += &format!(
                "\nCPU over the whole run: the load client {:.1} s, the upstream (node) {:.1} s, the gateway {:.1} s.\n",
                c1 - c0,
                u1 - u0,
                cpu_secs(p.gw.pid)
            );
            let Paths { mut up, mut gw } = p;
            let _ = gw.child.start_kill();
            let _ = up.child.start_kill();
            Ok::<_, BoxError>(md)
        };
        match run.await {
            Ok(md) => {
                println!("Load average before: {before}; after: {}.\n\n{md}", loadavg());
                0
            }
            Err(e) => {
                eprintln!("gapless-gateway-bench: {e}");
                1
            }
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    std::process::exit(code);
}
