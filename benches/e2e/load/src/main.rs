//! `gapless-load`: end-to-end load tool for gapless-server and an rmcp peer.
//!
//! It starts each server itself (release binaries given on the command line)
//! on a free port of 127.0.0.1 and drives it with
//! real HTTP/1.1 over loopback (hyper's client connection API, one TCP
//! connection per HTTP exchange in flight). Every server gets exactly the same
//! client work: the same requests, the same SSE parser, the same checks.
//!
//! The servers: gapless-server with its demo application; gapless-server
//! with `--host rmcp-counter`, i.e. rmcp's counter handler
//! (`server/rmcp/examples/counter/mod.rs`) on gapless-rmcp; and `rmcp-peer`,
//! the same handler on rmcp's stock `StreamableHttpService`. The last two
//! columns are the one-line change of gapless-rmcp, measured.
//!
//! Workloads (per server):
//! 1. **One SSE stream** (all servers up, runs alternating A B C A B C … so that
//!    drifting background load hits all alike): one session per server, its
//!    standalone GET stream open, then
//!    `emit_events {count, payload_bytes: 64, target: "standalone"}`; the clock
//!    runs from sending the POST to receiving the event with `data.seq == count`
//!    on the GET stream. Every event is parsed (SSE framing, `id`, and
//!    `data.seq`) and checked for order, holes and duplicates.
//! 2. **Resume** (one server process at a time; gapless-server with
//!    `--ring-events 16384` so the ring holds the gap): open GET, emit 1 event and read it (its id is the cursor),
//!    close the GET, emit a gap of G events with no GET open, then open a new
//!    connection and time `GET` + `Last-Event-ID: <cursor>` until the event
//!    with `data.seq == G` arrives; count what was replayed.
//! 3. **N sessions** (a fresh server process per N): N sessions each with its GET stream open (RSS idle), then
//!    all N emit at once (full speed, and paced at `interval_ms`), with server
//!    CPU from /proc/<pid>/stat and RSS from /proc/<pid>/status.
//!
//! Everything is bounded: each wait has a timeout and a watchdog kills the
//! servers and exits when `--deadline-secs` is exceeded. Only 127.0.0.1 is
//! contacted.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::{Bytes, BytesMut};
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::client::conn::http1::SendRequest;
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use memchr::memmem;
use tokio::task::JoinHandle;

type BoxError = Box<dyn std::error::Error + Send + Sync>;
type Result<T, E = BoxError> = std::result::Result<T, E>;

const PROTOCOL_VERSION: &str = "2025-06-18";

macro_rules! bail {
    ($($t:tt)*) => { return Err(format!($($t)*).into()) };
}

mod drive;
mod latency;

// ---------------------------------------------------------------------------
// Options

#[derive(Debug, Clone)]
struct Opts {
    gapless_bin: PathBuf,
    rmcp_bin: PathBuf,
    count: u64,
    payload: u64,
    runs: usize,
    warmup: usize,
    gaps: Vec<u64>,
    resume_reps: usize,
    sessions: Vec<usize>,
    session_events_total: u64,
    paced_interval_ms: u64,
    paced_count: u64,
    resume_ring_events: u64,
    deadline: Duration,
    log_dir: PathBuf,
    only: Option<String>,
    markdown: Option<PathBuf>,
}

fn usage() -> ! {
    eprintln!(
        "usage: gapless-load --gapless-bin PATH --rmcp-bin PATH [options]
       gapless-load drive …    (gapless-load drive --help)
       gapless-load latency …  (gapless-load latency --help)
  --count N              events per single-stream run (default 100000)
  --payload N            payload_bytes (default 64)
  --runs N               measured single-stream runs (default 5), --warmup N (default 1)
  --gaps A,B             resume gaps (default 1000,10000), --resume-reps N (default 5)
  --resume-ring-events N gapless --ring-events for the resume phase (default 16384)
  --sessions A,B         concurrent session counts (default 100,1000)
  --session-events N     total events per full-speed N-session run (default 200000)
  --paced-interval-ms N  interval_ms of the paced N-session run (default 50; 0 = skip)
  --paced-count N        events per session in the paced run (default 40)
  --deadline-secs N      hard stop for the whole tool (default 900)
  --log-dir DIR          server logs (default: temp dir)
  --only gapless|gapless-rmcp|rmcp
                         run one server only
  --markdown PATH        also write the report as markdown"
    );
    std::process::exit(2)
}

fn parse_list<T: std::str::FromStr>(s: &str) -> Vec<T> {
    s.split(',').filter(|x| !x.is_empty()).map(|x| x.trim().parse().unwrap_or_else(|_| usage())).collect()
}

fn parse_opts() -> Opts {
    let mut o = Opts {
        gapless_bin: PathBuf::new(),
        rmcp_bin: PathBuf::new(),
        count: 100_000,
        payload: 64,
        runs: 5,
        warmup: 1,
        gaps: vec![1000, 10_000],
        resume_reps: 5,
        sessions: vec![100, 1000],
        session_events_total: 200_000,
        paced_interval_ms: 50,
        paced_count: 40,
        resume_ring_events: 16384,
        deadline: Duration::from_secs(900),
        log_dir: std::env::temp_dir(),
        only: None,
        markdown: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut v = || args.next().unwrap_or_else(|| usage());
        match a.as_str() {
            "--gapless-bin" => o.gapless_bin = v().into(),
            "--rmcp-bin" => o.rmcp_bin = v().into(),
            "--count" => o.count = v().parse().unwrap_or_else(|_| usage()),
            "--payload" => o.payload = v().parse().unwrap_or_else(|_| usage()),
            "--runs" => o.runs = v().parse().unwrap_or_else(|_| usage()),
            "--warmup" => o.warmup = v().parse().unwrap_or_else(|_| usage()),
            "--gaps" => o.gaps = parse_list(&v()),
            "--resume-reps" => o.resume_reps = v().parse().unwrap_or_else(|_| usage()),
            "--resume-ring-events" => o.resume_ring_events = v().parse().unwrap_or_else(|_| usage()),
            "--sessions" => o.sessions = parse_list(&v()),
            "--session-events" => o.session_events_total = v().parse().unwrap_or_else(|_| usage()),
            "--paced-interval-ms" => o.paced_interval_ms = v().parse().unwrap_or_else(|_| usage()),
            "--paced-count" => o.paced_count = v().parse().unwrap_or_else(|_| usage()),
            "--deadline-secs" => o.deadline = Duration::from_secs(v().parse().unwrap_or_else(|_| usage())),
            "--log-dir" => o.log_dir = v().into(),
            "--only" => o.only = Some(v()),
            "--markdown" => o.markdown = Some(v().into()),
            _ => usage(),
        }
    }
    if o.runs == 0 || o.resume_reps == 0 {
        usage()
    }
    if let Some(only) = o.only.as_deref() {
        if !Kind::ALL.iter().any(|k| key(*k) == only) {
            usage()
        }
    }
    let need_g = o.only.as_deref().is_none_or(|k| k != "rmcp");
    let need_r = o.only.as_deref().is_none_or(|k| k == "rmcp");
    if (need_g && o.gapless_bin.as_os_str().is_empty()) || (need_r && o.rmcp_bin.as_os_str().is_empty()) {
        usage()
    }
    o
}

// ---------------------------------------------------------------------------
// Server processes

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    /// gapless-server, its demo application.
    Gapless,
    /// gapless-server `--host rmcp-counter`: the rmcp handler on gapless-rmcp.
    GaplessRmcp,
    /// rmcp-peer: the same rmcp handler on rmcp's stock service.
    Rmcp,
}

impl Kind {
    /// In the report's column order.
    const ALL: [Kind; 3] = [Kind::Gapless, Kind::GaplessRmcp, Kind::Rmcp];

    fn name(self) -> &'static str {
        match self {
            Kind::Gapless => "gapless-server",
            Kind::GaplessRmcp => "rmcp handler on gapless-rmcp",
            Kind::Rmcp => "same handler on rmcp 3.11",
        }
    }
}

/// Pids of running servers, for the deadline watchdog.
static CHILDREN: Mutex<Vec<u32>> = Mutex::new(Vec::new());

struct Server {
    child: tokio::process::Child,
    pid: u32,
    addr: SocketAddr,
}

fn free_port() -> Result<u16> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")?;
    Ok(l.local_addr()?.port())
}

impl Server {
    async fn start(opts: &Opts, kind: Kind, extra: &[String], tag: &str) -> Result<Server> {
        let port = free_port()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let (bin, mut args) = match kind {
            Kind::Gapless => (&opts.gapless_bin, vec!["--bind".to_owned(), addr.to_string()]),
            Kind::GaplessRmcp => (
                &opts.gapless_bin,
                vec!["--bind".to_owned(), addr.to_string(), "--host".to_owned(), "rmcp-counter".to_owned()],
            ),
            Kind::Rmcp => (&opts.rmcp_bin, vec!["--bind".to_owned(), addr.to_string()]),
        };
        args.extend(extra.iter().cloned());
        let log_path = opts.log_dir.join(format!("e2e-{}-{tag}.log", key(kind)));
        let log = std::fs::File::create(&log_path)?;
        let mut cmd = tokio::process::Command::new(bin);
        cmd.args(&args)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .env("RUST_LOG", "warn")
            .kill_on_drop(true);
        let child = cmd.spawn().map_err(|e| format!("spawn {}: {e}", bin.display()))?;
        let pid = child.id().ok_or("no pid")?;
        CHILDREN.lock().unwrap().push(pid);
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if tokio::net::TcpStream::connect(addr).await.is_ok() {
                break;
            }
            if Instant::now() > deadline {
                bail!("{} did not listen on {addr} within 20 s (log: {})", kind.name(), log_path.display());
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        eprintln!("  started {} pid {pid} on {addr} {}", kind.name(), args[2..].join(" "));
        Ok(Server { child, pid, addr })
    }

    async fn stop(mut self) {
        let _ = self.child.start_kill();
        let _ = tokio::time::timeout(Duration::from_secs(5), self.child.wait()).await;
        CHILDREN.lock().unwrap().retain(|p| *p != self.pid);
    }
}

// ---------------------------------------------------------------------------
// /proc

fn clk_tck() -> f64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 {
        t as f64
    } else {
        100.0
    }
}

/// utime + stime of a process, in seconds.
fn proc_cpu_secs(pid: u32) -> f64 {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else { return f64::NAN };
    let Some(after) = s.rfind(')').map(|i| &s[i + 2..]) else { return f64::NAN };
    let f: Vec<&str> = after.split_whitespace().collect();
    // After "(comm) ": field 3 (state) is f[0]; utime (14) is f[11], stime (15) f[12].
    let ut: f64 = f.get(11).and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
    let st: f64 = f.get(12).and_then(|x| x.parse().ok()).unwrap_or(f64::NAN);
    (ut + st) / clk_tck()
}

/// (VmRSS, VmHWM, Threads) in KiB / count.
fn proc_mem(pid: u32) -> (u64, u64, u64) {
    let Ok(s) = std::fs::read_to_string(format!("/proc/{pid}/status")) else { return (0, 0, 0) };
    let get = |k: &str| {
        s.lines()
            .find(|l| l.starts_with(k))
            .and_then(|l| l[k.len()..].split_whitespace().next().and_then(|v| v.parse().ok()))
            .unwrap_or(0)
    };
    (get("VmRSS:"), get("VmHWM:"), get("Threads:"))
}

/// Context switches (voluntary + involuntary) of all threads of `pid`.
fn proc_ctx_switches(pid: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/task")) else { return 0 };
    let mut total = 0;
    for t in dir.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("status")) {
            for l in s.lines() {
                if l.starts_with("voluntary_ctxt_switches:") || l.starts_with("nonvoluntary_ctxt_switches:") {
                    total += l.split_whitespace().nth(1).and_then(|v| v.parse::<u64>().ok()).unwrap_or(0);
                }
            }
        }
    }
    total
}

/// This process's own CPU time (user + system), seconds.
fn self_cpu_secs() -> f64 {
    // SAFETY: getrusage writes into the zeroed struct we own.
    unsafe {
        let mut ru: libc::rusage = std::mem::zeroed();
        libc::getrusage(libc::RUSAGE_SELF, &mut ru);
        let tv = |t: libc::timeval| t.tv_sec as f64 + t.tv_usec as f64 / 1e6;
        tv(ru.ru_utime) + tv(ru.ru_stime)
    }
}

/// Samples peak VmRSS of `pid` every 10 ms until stopped.
struct RssSampler {
    peak: Arc<AtomicU64>,
    task: JoinHandle<()>,
}

impl RssSampler {
    fn start(pid: u32) -> Self {
        let peak = Arc::new(AtomicU64::new(proc_mem(pid).0));
        let p = peak.clone();
        let task = tokio::spawn(async move {
            loop {
                p.fetch_max(proc_mem(pid).0, Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        });
        RssSampler { peak, task }
    }
    fn stop(self) -> u64 {
        self.task.abort();
        self.peak.load(Ordering::Relaxed)
    }
}

// ---------------------------------------------------------------------------
// HTTP

/// One HTTP/1.1 connection; dropping it closes the socket.
struct Conn {
    sender: SendRequest<Full<Bytes>>,
    task: JoinHandle<()>,
    addr: SocketAddr,
}

impl Drop for Conn {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Conn {
    async fn open(addr: SocketAddr) -> Result<Conn> {
        let tcp =
            tokio::time::timeout(Duration::from_secs(10), tokio::net::TcpStream::connect(addr)).await??;
        tcp.set_nodelay(true)?;
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp)).await?;
        let task = tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(Conn { sender, task, addr })
    }

    async fn send(&mut self, req: Request<Full<Bytes>>) -> Result<Response<Incoming>> {
        self.sender.ready().await?;
        Ok(tokio::time::timeout(Duration::from_secs(30), self.sender.send_request(req)).await??)
    }

    fn request(&self, method: &str, session: Option<&str>) -> hyper::http::request::Builder {
        let mut b = Request::builder().method(method).uri("/mcp").header("host", self.addr.to_string());
        if let Some(s) = session {
            b = b.header("mcp-session-id", s).header("mcp-protocol-version", PROTOCOL_VERSION);
        }
        b
    }

    async fn post(&mut self, session: Option<&str>, body: String) -> Result<Response<Incoming>> {
        let req = self
            .request("POST", session)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(Full::new(Bytes::from(body)))?;
        self.send(req).await
    }

    async fn get_stream(&mut self, session: &str, last_event_id: Option<&str>) -> Result<SseReader> {
        let mut b = self.request("GET", Some(session)).header("accept", "text/event-stream");
        if let Some(l) = last_event_id {
            b = b.header("last-event-id", l);
        }
        let resp = self.send(b.body(Full::new(Bytes::new()))?).await?;
        if resp.status() != StatusCode::OK {
            let st = resp.status();
            let body = resp.into_body().collect().await.map(|b| b.to_bytes()).unwrap_or_default();
            bail!("GET returned {st}: {}", String::from_utf8_lossy(&body));
        }
        Ok(SseReader::new(resp.into_body()))
    }
}

// ---------------------------------------------------------------------------
// SSE parsing (identical for both servers)

/// One SSE event: its `id` (if any) and its data (joined `data:` lines).
struct SseEvent {
    id: Option<Bytes>,
    data: Bytes,
}

struct SseReader {
    body: Incoming,
    buf: BytesMut,
    scanned: usize,
    done: bool,
    /// Bytes received on this stream.
    bytes: u64,
}

static SEP: std::sync::LazyLock<memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memmem::Finder::new(b"\n\n"));
static SEQ: std::sync::LazyLock<memmem::Finder<'static>> =
    std::sync::LazyLock::new(|| memmem::Finder::new(b"\"seq\":"));

impl SseReader {
    fn new(body: Incoming) -> Self {
        SseReader { body, buf: BytesMut::with_capacity(64 << 10), scanned: 0, done: false, bytes: 0 }
    }

    /// The next event with an id or data (comments and keep-alives are
    /// skipped); `None` at the end of the stream.
    async fn next(&mut self) -> Result<Option<SseEvent>> {
        loop {
            if let Some(pos) = SEP.find(&self.buf[self.scanned..]) {
                let end = self.scanned + pos + 2;
                let raw = self.buf.split_to(end).freeze();
                self.scanned = 0;
                if let Some(ev) = parse_event(raw) {
                    return Ok(Some(ev));
                }
                continue;
            }
            self.scanned = self.buf.len().saturating_sub(1);
            if self.done {
                return Ok(None);
            }
            match self.body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        self.bytes += data.len() as u64;
                        self.buf.extend_from_slice(&data);
                    }
                }
                Some(Err(e)) => return Err(e.into()),
                None => self.done = true,
            }
        }
    }

    async fn next_timeout(&mut self, t: Duration) -> Result<Option<SseEvent>> {
        match tokio::time::timeout(t, self.next()).await {
            Ok(r) => r,
            Err(_) => bail!("no SSE event within {t:?}"),
        }
    }
}

fn parse_event(raw: Bytes) -> Option<SseEvent> {
    let mut id = None;
    let mut data: Option<Bytes> = None;
    let mut start = 0;
    let body = &raw[..raw.len() - 2];
    while start <= body.len() {
        let end = memchr::memchr(b'\n', &body[start..]).map_or(body.len(), |i| start + i);
        let mut line = &body[start..end];
        if line.last() == Some(&b'\r') {
            line = &line[..line.len() - 1];
        }
        let field = |name: &[u8]| -> Option<usize> {
            if line.starts_with(name) {
                let mut o = name.len();
                if line.get(o) == Some(&b' ') {
                    o += 1;
                }
                Some(start + o)
            } else {
                None
            }
        };
        let line_end = start + line.len();
        if let Some(o) = field(b"data:") {
            let piece = raw.slice(o..line_end);
            data = Some(match data {
                None => piece,
                Some(prev) => {
                    let mut m = BytesMut::from(&prev[..]);
                    m.extend_from_slice(b"\n");
                    m.extend_from_slice(&piece);
                    m.freeze()
                }
            });
        } else if let Some(o) = field(b"id:") {
            id = Some(raw.slice(o..line_end));
        }
        start = end + 1;
    }
    if id.is_none() && data.is_none() {
        return None;
    }
    Some(SseEvent { id, data: data.unwrap_or_default() })
}

/// `data.seq` of a `notifications/message` event.
fn event_seq(data: &[u8]) -> Option<u64> {
    let i = SEQ.find(data)? + 6;
    let digits = &data[i..];
    let n = digits.iter().take_while(|b| b.is_ascii_digit()).count();
    if n == 0 {
        return None;
    }
    std::str::from_utf8(&digits[..n]).ok()?.parse().ok()
}

/// Reads a POST response (JSON or SSE) until the JSON-RPC response; returns it.
async fn read_rpc_response(resp: Response<Incoming>, timeout: Duration) -> Result<serde_json::Value> {
    let status = resp.status();
    let ct = resp.headers().get("content-type").and_then(|v| v.to_str().ok()).unwrap_or("").to_owned();
    if !status.is_success() {
        let body = resp.into_body().collect().await?.to_bytes();
        bail!("POST returned {status}: {}", String::from_utf8_lossy(&body));
    }
    if ct.starts_with("text/event-stream") {
        let mut r = SseReader::new(resp.into_body());
        let until = Instant::now() + timeout;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            let Some(ev) = r.next_timeout(left).await? else { bail!("POST stream ended without a response") };
            if ev.data.is_empty() {
                continue;
            }
            let v: serde_json::Value = serde_json::from_slice(&ev.data)?;
            if v.get("id").is_some() && (v.get("result").is_some() || v.get("error").is_some()) {
                // Drain the rest so the connection can be reused.
                let _ = tokio::time::timeout(Duration::from_secs(5), async {
                    while let Ok(Some(_)) = r.next().await {}
                })
                .await;
                return Ok(v);
            }
        }
    } else {
        let body = tokio::time::timeout(timeout, resp.into_body().collect()).await??.to_bytes();
        Ok(serde_json::from_slice(&body)?)
    }
}

// ---------------------------------------------------------------------------
// MCP session

struct Session {
    addr: SocketAddr,
    id: String,
    post: Conn,
    next_id: u64,
}

impl Session {
    async fn open(addr: SocketAddr) -> Result<Session> {
        let mut post = Conn::open(addr).await?;
        let init = r#"{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"gapless-load","version":"0.1.0"}}}"#;
        let resp = post.post(None, init.to_owned()).await?;
        let id = resp
            .headers()
            .get("mcp-session-id")
            .and_then(|v| v.to_str().ok())
            .ok_or("initialize: no Mcp-Session-Id")?
            .to_owned();
        let v = read_rpc_response(resp, Duration::from_secs(10)).await?;
        if v.get("result").is_none() {
            bail!("initialize failed: {v}");
        }
        let resp = post
            .post(Some(&id), r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#.to_owned())
            .await?;
        let st = resp.status();
        let _ = resp.into_body().collect().await;
        if st != StatusCode::ACCEPTED {
            bail!("notifications/initialized: {st}");
        }
        Ok(Session { addr, id, post, next_id: 2 })
    }

    /// `tools/call emit_events`; returns the result text.
    async fn emit(
        &mut self,
        count: u64,
        payload: u64,
        interval_ms: u64,
        timeout: Duration,
    ) -> Result<String> {
        let rid = self.next_id;
        self.next_id += 1;
        let body = format!(
            r#"{{"jsonrpc":"2.0","id":{rid},"method":"tools/call","params":{{"name":"emit_events","arguments":{{"count":{count},"payload_bytes":{payload},"interval_ms":{interval_ms},"target":"standalone"}}}}}}"#
        );
        let resp = self.post.post(Some(&self.id), body).await?;
        let v = read_rpc_response(resp, timeout).await?;
        let text = v
            .pointer("/result/content/0/text")
            .and_then(|t| t.as_str())
            .ok_or_else(|| format!("emit_events failed: {v}"))?;
        Ok(text.to_owned())
    }

    async fn open_get(&self, last_event_id: Option<&str>) -> Result<(Conn, SseReader)> {
        let mut c = Conn::open(self.addr).await?;
        let r = c.get_stream(&self.id, last_event_id).await?;
        Ok((c, r))
    }

    async fn delete(mut self) {
        if let Ok(req) = self.post.request("DELETE", Some(&self.id)).body(Full::new(Bytes::new())) {
            if let Ok(Ok(resp)) = tokio::time::timeout(Duration::from_secs(5), self.post.send(req)).await {
                let _ = resp.into_body().collect().await;
            }
        }
    }
}

/// Delivery check of `data.seq` on a stream: expects 1, 2, …, `last`.
#[derive(Debug, Default, Clone)]
struct Tally {
    received: u64,
    in_order: u64,
    holes: u64,
    dups_or_reorder: u64,
    next: u64,
    last_id: Option<Bytes>,
}

impl Tally {
    fn new() -> Self {
        Tally { next: 1, ..Default::default() }
    }
    fn see(&mut self, seq: u64) {
        self.received += 1;
        if seq == self.next {
            self.in_order += 1;
            self.next += 1;
        } else if seq > self.next {
            self.holes += seq - self.next;
            self.next = seq + 1;
        } else {
            self.dups_or_reorder += 1;
        }
    }
}

/// Reads `r` until `data.seq == last`; returns the tally.
async fn read_until_seq(r: &mut SseReader, last: u64, idle: Duration) -> Result<Tally> {
    let mut t = Tally::new();
    loop {
        let Some(ev) = r.next_timeout(idle).await? else {
            bail!("stream ended at seq {} of {last}", t.next - 1)
        };
        if ev.id.is_some() {
            t.last_id = ev.id.clone();
        }
        if let Some(seq) = event_seq(&ev.data) {
            t.see(seq);
            if seq == last {
                return Ok(t);
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Workloads

#[derive(Debug, Default, Clone)]
struct StreamResult {
    rates: Vec<f64>,
    server_cpu_us_per_event: f64,
    client_cpu_us_per_event: f64,
    server_ctx_per_event: f64,
    ok: bool,
    note: String,
}

/// One session with its standalone GET stream open, for the single-stream
/// workload.
struct StreamBench {
    session: Session,
    _get_conn: Conn,
    get: SseReader,
    pid: u32,
    res: StreamResult,
    cpu: f64,
    ccpu: f64,
    ctx: u64,
    events: u64,
}

impl StreamBench {
    async fn open(srv: &Server) -> Result<StreamBench> {
        let session = Session::open(srv.addr).await?;
        let (gc, get) = session.open_get(None).await?;
        Ok(StreamBench {
            session,
            _get_conn: gc,
            get,
            pid: srv.pid,
            res: StreamResult { ok: true, ..Default::default() },
            cpu: 0.0,
            ccpu: 0.0,
            ctx: 0,
            events: 0,
        })
    }

    /// One `emit_events` of `count` events, timed from the POST to the last
    /// event on the GET stream.
    async fn run(&mut self, opts: &Opts, label: &str, measured: bool) -> Result<()> {
        let (c0, cc0, x0) = (proc_cpu_secs(self.pid), self_cpu_secs(), proc_ctx_switches(self.pid));
        let b0 = self.get.bytes;
        let t0 = Instant::now();
        // The POST (its own connection) and the GET reader run concurrently;
        // the clock stops when the GET stream delivers seq == count.
        let get = &mut self.get;
        let reader = async {
            let t = read_until_seq(get, opts.count, Duration::from_secs(30)).await;
            (t, t0.elapsed())
        };
        let (text, (tally, dt)) =
            tokio::join!(self.session.emit(opts.count, opts.payload, 0, Duration::from_secs(120)), reader);
        let (text, tally) = (text?, tally?);
        let (c1, cc1, x1) = (proc_cpu_secs(self.pid), self_cpu_secs(), proc_ctx_switches(self.pid));
        if text != format!("emitted {}", opts.count) {
            bail!("unexpected result {text:?}");
        }
        if tally.received != opts.count || tally.holes != 0 || tally.dups_or_reorder != 0 {
            self.res.ok = false;
            let _ = write!(
                self.res.note,
                "{label}: received {} holes {} dups {}; ",
                tally.received, tally.holes, tally.dups_or_reorder
            );
        }
        let rate = opts.count as f64 / dt.as_secs_f64();
        eprintln!(
            "    {label}{}: {:.0} events/s ({:.1} ms, {} events, {} bytes, server cpu {:.2} s, client cpu {:.2} s, server context switches {})",
            if measured { "" } else { " (warm-up)" },
            rate,
            dt.as_secs_f64() * 1e3,
            tally.received,
            self.get.bytes - b0,
            c1 - c0,
            cc1 - cc0,
            x1 - x0,
        );
        if measured {
            self.res.rates.push(rate);
            self.cpu += c1 - c0;
            self.ccpu += cc1 - cc0;
            self.ctx += x1 - x0;
            self.events += opts.count;
        }
        Ok(())
    }

    async fn finish(mut self) -> StreamResult {
        self.res.server_cpu_us_per_event = self.cpu * 1e6 / self.events.max(1) as f64;
        self.res.client_cpu_us_per_event = self.ccpu * 1e6 / self.events.max(1) as f64;
        self.res.server_ctx_per_event = self.ctx as f64 / self.events.max(1) as f64;
        drop(self.get);
        drop(self._get_conn);
        self.session.delete().await;
        self.res
    }
}

/// The single-stream workload on all servers at once, runs alternating
/// between them (A B C A B C …) so that drifting background load hits all alike.
async fn single_stream_all(opts: &Opts, kinds: &[Kind], reports: &mut BTreeMap<&'static str, ServerReport>) {
    let mut servers = Vec::new();
    for &k in kinds {
        match Server::start(opts, k, &[], "stream").await {
            Ok(srv) => match StreamBench::open(&srv).await {
                Ok(b) => servers.push((k, srv, Some(b))),
                Err(e) => {
                    reports.entry(key(k)).or_default().errors.push(format!("one SSE stream: {e}"));
                    srv.stop().await;
                }
            },
            Err(e) => reports.entry(key(k)).or_default().errors.push(format!("start: {e}")),
        }
    }
    for run in 0..opts.warmup + opts.runs {
        for (k, _, bench) in servers.iter_mut() {
            let Some(b) = bench.as_mut() else { continue };
            let label = format!("{} run {run}", key(*k));
            if let Err(e) = b.run(opts, &label, run >= opts.warmup).await {
                reports.entry(key(*k)).or_default().errors.push(format!("one SSE stream: {e}"));
                *bench = None;
            }
        }
    }
    for (k, srv, bench) in servers {
        if let Some(b) = bench {
            reports.entry(key(k)).or_default().stream = Some(b.finish().await);
        }
        srv.stop().await;
    }
}

fn key(k: Kind) -> &'static str {
    match k {
        Kind::Gapless => "gapless",
        Kind::GaplessRmcp => "gapless-rmcp",
        Kind::Rmcp => "rmcp",
    }
}

#[derive(Debug, Clone)]
struct ResumeResult {
    /// Latency of each rep (ms), only reps where the last event arrived.
    latencies_ms: Vec<f64>,
    replayed: Vec<u64>,
    complete: bool,
    note: String,
}

async fn resume_once(srv: &Server, gap: u64, payload: u64) -> Result<(f64, Tally, Option<String>)> {
    let mut s = Session::open(srv.addr).await?;
    // 1. A cursor the client processed: open GET, emit 1 event, read it.
    let cursor = {
        let (gc, mut get) = s.open_get(None).await?;
        let (text, t) = tokio::join!(
            s.emit(1, payload, 0, Duration::from_secs(10)),
            read_until_seq(&mut get, 1, Duration::from_secs(10))
        );
        let (_, t) = (text?, t?);
        drop(get);
        drop(gc);
        String::from_utf8(t.last_id.ok_or("event without id")?.to_vec())?
    };
    // 2. Let the server notice the closed GET, then publish the gap with no GET open.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let text = s.emit(gap, payload, 0, Duration::from_secs(60)).await?;
    if text != format!("emitted {gap}") {
        bail!("unexpected result {text:?}");
    }
    // 3. Resume: the clock runs from sending the GET to the event seq == gap.
    let mut c = Conn::open(srv.addr).await?;
    let t0 = Instant::now();
    let mut r = c.get_stream(&s.id, Some(&cursor)).await?;
    let mut t = Tally::new();
    let mut dup_cursor = 0;
    let mut fail = None;
    loop {
        match r.next_timeout(Duration::from_secs(3)).await {
            Ok(Some(ev)) => {
                if ev.id.as_deref() == Some(cursor.as_bytes()) && !ev.data.is_empty() {
                    dup_cursor += 1; // the cursor event itself, sent again
                    continue;
                }
                if let Some(seq) = event_seq(&ev.data) {
                    t.see(seq);
                    if seq == gap {
                        break;
                    }
                }
            }
            Ok(None) => {
                fail = Some(format!("stream ended after {} events", t.received));
                break;
            }
            Err(_) => {
                fail = Some(format!("nothing for 3 s after {} events", t.received));
                break;
            }
        }
    }
    let ms = t0.elapsed().as_secs_f64() * 1e3;
    t.dups_or_reorder += dup_cursor;
    drop(r);
    drop(c);
    s.delete().await;
    Ok((ms, t, fail))
}

async fn resume(opts: &Opts, srv: &Server) -> Result<Vec<ResumeResult>> {
    let mut out = Vec::new();
    for &gap in &opts.gaps {
        let mut rr =
            ResumeResult { latencies_ms: vec![], replayed: vec![], complete: true, note: String::new() };
        for rep in 0..opts.resume_reps {
            let (ms, t, fail) = resume_once(srv, gap, opts.payload).await?;
            let complete = fail.is_none() && t.received == gap && t.holes == 0 && t.dups_or_reorder == 0;
            eprintln!(
                "    gap {gap} rep {rep}: {ms:.2} ms, replayed {} (in order {}, holes {}, dups {}){}",
                t.received,
                t.in_order,
                t.holes,
                t.dups_or_reorder,
                fail.as_deref().map(|f| format!(" — {f}")).unwrap_or_default()
            );
            if !complete {
                rr.complete = false;
                if rr.note.is_empty() {
                    rr.note = format!(
                        "replayed {} of {gap} (first seq {}; {} missing{}){}",
                        t.received,
                        if t.holes > 0 { t.holes + 1 } else { 1 },
                        gap.saturating_sub(t.received),
                        if t.dups_or_reorder > 0 {
                            format!(", {} duplicate", t.dups_or_reorder)
                        } else {
                            String::new()
                        },
                        fail.as_deref().map(|f| format!("; {f}")).unwrap_or_default()
                    );
                }
            }
            if t.received > 0 && fail.is_none() {
                rr.latencies_ms.push(ms);
            }
            rr.replayed.push(t.received);
        }
        out.push(rr);
    }
    Ok(out)
}

#[derive(Debug, Clone, Default)]
struct SessionsResult {
    n: usize,
    base_rss_kib: u64,
    idle_rss_kib: u64,
    setup_secs: f64,
    full: Option<LoadRow>,
    paced: Option<LoadRow>,
}

#[derive(Debug, Clone, Default)]
struct LoadRow {
    per_session: u64,
    interval_ms: u64,
    wall: f64,
    delivered: u64,
    expected: u64,
    server_cpu: f64,
    client_cpu: f64,
    peak_rss_kib: u64,
    threads: u64,
    errors: usize,
}

async fn load_round(
    srv: &Server,
    sessions: &mut Vec<Session>,
    readers: &mut Vec<SseReader>,
    per: u64,
    interval: u64,
    payload: u64,
) -> Result<LoadRow> {
    let (c0, cc0) = (proc_cpu_secs(srv.pid), self_cpu_secs());
    let sampler = RssSampler::start(srv.pid);
    let t0 = Instant::now();
    let timeout = Duration::from_secs(120);
    let mut posts = Vec::new();
    let mut ss = std::mem::take(sessions);
    for mut s in ss.drain(..) {
        posts.push(tokio::spawn(async move {
            let r = s.emit(per, payload, interval, timeout).await;
            (s, r)
        }));
    }
    let mut gets = Vec::new();
    for mut r in readers.drain(..) {
        gets.push(tokio::spawn(async move {
            let t = read_until_seq(&mut r, per, Duration::from_secs(30)).await;
            (r, t)
        }));
    }
    let mut delivered = 0;
    let mut errors = 0;
    for g in gets {
        let (r, t) = g.await?;
        match t {
            Ok(t) => delivered += t.in_order,
            Err(e) => {
                errors += 1;
                if errors <= 3 {
                    eprintln!("    GET error: {e}");
                }
            }
        }
        readers.push(r);
    }
    let wall = t0.elapsed().as_secs_f64();
    for p in posts {
        let (s, r) = p.await?;
        if let Err(e) = r {
            errors += 1;
            if errors <= 3 {
                eprintln!("    POST error: {e}");
            }
        }
        sessions.push(s);
    }
    let peak = sampler.stop();
    let (c1, cc1) = (proc_cpu_secs(srv.pid), self_cpu_secs());
    Ok(LoadRow {
        per_session: per,
        interval_ms: interval,
        wall,
        delivered,
        expected: per * sessions.len() as u64,
        server_cpu: c1 - c0,
        client_cpu: cc1 - cc0,
        peak_rss_kib: peak,
        threads: proc_mem(srv.pid).2,
        errors,
    })
}

async fn many_sessions(opts: &Opts, srv: &Server, n: usize) -> Result<SessionsResult> {
    let base = proc_mem(srv.pid).0;
    let t0 = Instant::now();
    // Open sessions and their GET streams, 64 at a time.
    let mut sessions = Vec::with_capacity(n);
    let mut conns = Vec::with_capacity(n);
    let mut readers = Vec::with_capacity(n);
    let addr = srv.addr;
    let mut i = 0;
    while i < n {
        let k = (n - i).min(64);
        let mut hs = Vec::new();
        for _ in 0..k {
            hs.push(tokio::spawn(async move {
                let s = Session::open(addr).await?;
                let (c, r) = s.open_get(None).await?;
                Ok::<_, BoxError>((s, c, r))
            }));
        }
        for h in hs {
            let (s, c, r) = h.await??;
            sessions.push(s);
            conns.push(c);
            readers.push(r);
        }
        i += k;
    }
    let setup = t0.elapsed().as_secs_f64();
    tokio::time::sleep(Duration::from_millis(300)).await;
    let idle = proc_mem(srv.pid).0;
    eprintln!("    {n} sessions + GET streams open in {setup:.2} s; RSS {base} KiB -> {idle} KiB");
    let mut res =
        SessionsResult { n, base_rss_kib: base, idle_rss_kib: idle, setup_secs: setup, ..Default::default() };
    let per = (opts.session_events_total / n as u64).max(1);
    let row = load_round(srv, &mut sessions, &mut readers, per, 0, opts.payload).await?;
    eprintln!(
        "    full speed: {} x {per} events in {:.2} s = {:.0} events/s, server cpu {:.2} s ({:.0}%), client cpu {:.2} s, peak RSS {} KiB, errors {}",
        n,
        row.wall,
        row.delivered as f64 / row.wall,
        row.server_cpu,
        100.0 * row.server_cpu / row.wall,
        row.client_cpu,
        row.peak_rss_kib,
        row.errors
    );
    res.full = Some(row);
    if opts.paced_interval_ms > 0 && opts.paced_count > 0 {
        let row = load_round(
            srv,
            &mut sessions,
            &mut readers,
            opts.paced_count,
            opts.paced_interval_ms,
            opts.payload,
        )
        .await?;
        eprintln!(
            "    paced ({} ms): {} x {} events in {:.2} s = {:.0} events/s, server cpu {:.2} s ({:.0}%), peak RSS {} KiB, errors {}",
            opts.paced_interval_ms,
            n,
            opts.paced_count,
            row.wall,
            row.delivered as f64 / row.wall,
            row.server_cpu,
            100.0 * row.server_cpu / row.wall,
            row.peak_rss_kib,
            row.errors
        );
        res.paced = Some(row);
    }
    drop(readers);
    drop(conns);
    for s in sessions {
        s.delete().await;
    }
    Ok(res)
}

// ---------------------------------------------------------------------------
// Report

#[derive(Debug, Default)]
struct ServerReport {
    stream: Option<StreamResult>,
    resume: Vec<ResumeResult>,
    sessions: Vec<SessionsResult>,
    errors: Vec<String>,
}

fn median(v: &[f64]) -> f64 {
    if v.is_empty() {
        return f64::NAN;
    }
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.partial_cmp(b).unwrap());
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

fn fmt_int(x: f64) -> String {
    if !x.is_finite() {
        return "n/a".into();
    }
    let s = format!("{:.0}", x);
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i > 0 && (s.len() - i) % 3 == 0 {
            out.push(' ');
        }
        out.push(c);
    }
    out
}

fn mib(kib: u64) -> String {
    format!("{:.1} MiB", kib as f64 / 1024.0)
}

fn report(opts: &Opts, reports: &BTreeMap<&'static str, ServerReport>, machine: &str) -> String {
    let cols: Vec<Option<&ServerReport>> = Kind::ALL.iter().map(|k| reports.get(key(*k))).collect();
    // The ratio column: the rmcp handler on gapless-rmcp over the same
    // handler on rmcp's own service (the one-line change).
    let (g, r) = (reports.get(key(Kind::GaplessRmcp)), reports.get(key(Kind::Rmcp)));
    let cells = |f: &dyn Fn(&ServerReport) -> String| -> String {
        cols.iter().map(|x| x.map_or("–".to_owned(), f)).collect::<Vec<_>>().join(" | ")
    };
    let mut md = String::new();
    let _ = writeln!(
        md,
        "Machine: {machine}. Client and servers share it. One-stream runs alternate between the \
         servers (all processes up, idle ones waiting); resume and N-session phases run one server \
         process at a time, a fresh one per phase. Both gapless columns run gapless-server with its \
         defaults except `--ring-events {}` for the resume phase and its per-client limits lifted \
         (every load client shares one address); the middle column is `--host rmcp-counter`, rmcp's \
         counter handler on gapless-rmcp, and the last the same handler on rmcp's stock \
         `StreamableHttpService` with rmcp's defaults.\n",
        opts.resume_ring_events
    );
    let _ = writeln!(
        md,
        "| workload | {} | {} | {} | gapless-rmcp / rmcp |",
        Kind::ALL[0].name(),
        Kind::ALL[1].name(),
        Kind::ALL[2].name()
    );
    let _ = writeln!(md, "|---|---:|---:|---:|---:|");
    // Single stream.
    let rate = |x: &ServerReport| x.stream.as_ref().map_or(f64::NAN, |s| median(&s.rates));
    let best = |x: &ServerReport| {
        x.stream.as_ref().map_or(f64::NAN, |s| s.rates.iter().cloned().fold(f64::NAN, f64::max))
    };
    let ratio = |a: f64, b: f64| {
        if a.is_finite() && b.is_finite() && b > 0.0 {
            format!("{:.2}×", a / b)
        } else {
            "n/a".into()
        }
    };
    let checked = |x: &ServerReport| {
        x.stream.as_ref().map_or("".to_owned(), |s| if s.ok { "".into() } else { format!(" ⚠ {}", s.note) })
    };
    let _ = writeln!(
        md,
        "| one SSE stream, events/s (median of {} × {} events, {} B payload) | {} | {} |",
        opts.runs,
        fmt_int(opts.count as f64),
        opts.payload,
        cells(&|x| format!("{}{}", fmt_int(rate(x)), checked(x))),
        ratio(g.map_or(f64::NAN, rate), r.map_or(f64::NAN, rate))
    );
    let _ = writeln!(
        md,
        "| one SSE stream, best run, events/s | {} | {} |",
        cells(&|x| fmt_int(best(x))),
        ratio(g.map_or(f64::NAN, best), r.map_or(f64::NAN, best))
    );
    let cpu = |x: &ServerReport| {
        x.stream.as_ref().map_or("–".into(), |s| {
            format!("{:.2} / {:.2}", s.server_cpu_us_per_event, s.client_cpu_us_per_event)
        })
    };
    let _ = writeln!(md, "| one SSE stream, CPU µs per event (server / client) | {} | |", cells(&cpu));
    let ctx = |x: &ServerReport| {
        x.stream.as_ref().map_or("–".into(), |s| format!("{:.3}", s.server_ctx_per_event))
    };
    let _ = writeln!(md, "| one SSE stream, server context switches per event | {} | |", cells(&ctx));
    // Resume.
    for (i, gap) in opts.gaps.iter().enumerate() {
        let cell = |x: &ServerReport| {
            let Some(rr) = x.resume.get(i) else { return "–".into() };
            if rr.complete {
                format!("{:.2} ms", median(&rr.latencies_ms))
            } else {
                format!("n/a: {}", rr.note)
            }
        };
        let _ = writeln!(
            md,
            "| resume, gap of {} events: GET with Last-Event-ID → last replayed event (median of {}) | {} | |",
            fmt_int(*gap as f64),
            opts.resume_reps,
            cells(&cell)
        );
    }
    // Sessions.
    for (i, n) in opts.sessions.iter().enumerate() {
        let get = |x: &ServerReport| x.sessions.get(i).cloned();
        let cell_idle = |x: &ServerReport| {
            get(x).map_or("–".into(), |s| {
                format!(
                    "{} (+{:.1} KiB/session; opened in {:.2} s)",
                    mib(s.idle_rss_kib),
                    (s.idle_rss_kib as f64 - s.base_rss_kib as f64) / s.n as f64,
                    s.setup_secs
                )
            })
        };
        let _ = writeln!(md, "| {n} sessions, each with its GET open, idle: RSS | {} | |", cells(&cell_idle));
        let row_cells = |x: &ServerReport, paced: bool| -> Option<LoadRow> {
            get(x).and_then(|s| if paced { s.paced } else { s.full })
        };
        for paced in [false, true] {
            let any = cols.iter().flatten().find_map(|x| row_cells(x, paced));
            let Some(sample) = any else { continue };
            let label = if paced {
                format!(
                    "{n} sessions streaming, paced {} events × {} ms each",
                    sample.per_session, sample.interval_ms
                )
            } else {
                format!(
                    "{n} sessions streaming at full speed, {} events each",
                    fmt_int(sample.per_session as f64)
                )
            };
            let rate =
                |x: &ServerReport| row_cells(x, paced).map_or(f64::NAN, |l| l.delivered as f64 / l.wall);
            let warn = |l: &LoadRow| {
                if l.errors > 0 || l.delivered != l.expected {
                    format!(" ⚠ {} of {} delivered, {} errors", l.delivered, l.expected, l.errors)
                } else {
                    String::new()
                }
            };
            let _ = writeln!(
                md,
                "| {label}: events/s delivered | {} | {} |",
                cells(&|x| row_cells(x, paced).map_or("–".into(), |l| format!(
                    "{}{}",
                    fmt_int(rate(x)),
                    warn(&l)
                ))),
                ratio(g.map_or(f64::NAN, rate), r.map_or(f64::NAN, rate))
            );
            let cpu_cell = |x: &ServerReport| {
                row_cells(x, paced).map_or("–".into(), |l| {
                    format!(
                        "{:.0}% ({:.2} s in {:.2} s; {:.2} µs/event)",
                        100.0 * l.server_cpu / l.wall,
                        l.server_cpu,
                        l.wall,
                        l.server_cpu * 1e6 / l.delivered.max(1) as f64
                    )
                })
            };
            let _ = writeln!(md, "| {label}: server CPU | {} | |", cells(&cpu_cell));
            let rss_cell = |x: &ServerReport| {
                row_cells(x, paced)
                    .map_or("–".into(), |l| format!("{} ({} threads)", mib(l.peak_rss_kib), l.threads))
            };
            let _ = writeln!(md, "| {label}: server peak RSS | {} | |", cells(&rss_cell));
        }
    }
    for (name, rep) in reports {
        for e in &rep.errors {
            let _ = writeln!(md, "\n⚠ {name}: {e}");
        }
    }
    md
}

// ---------------------------------------------------------------------------

async fn run_server(opts: &Opts, kind: Kind, mut rep: ServerReport) -> ServerReport {
    eprintln!("== {}", kind.name());
    // Every load client shares one address: lift the per-client limits,
    // which would otherwise refuse the 1000-session phase.
    let lifted = [
        "--max-sessions-per-client",
        "100000",
        "--initialize-burst",
        "100000",
        "--max-connections-per-ip",
        "100000",
    ];
    let gapless_default: Vec<String> = lifted.iter().map(|s| s.to_string()).collect();
    // Phase 2: resume; gapless with a ring that holds the largest gap.
    let extra = match kind {
        Kind::Gapless | Kind::GaplessRmcp => {
            let mut v = vec!["--ring-events".to_owned(), opts.resume_ring_events.to_string()];
            v.extend(lifted.iter().map(|s| s.to_string()));
            v
        }
        Kind::Rmcp => vec![],
    };
    let gapless_default = if kind == Kind::Rmcp { vec![] } else { gapless_default };
    match Server::start(opts, kind, &extra, "resume").await {
        Ok(srv) => {
            eprintln!("  resume");
            match resume(opts, &srv).await {
                Ok(r) => rep.resume = r,
                Err(e) => rep.errors.push(format!("resume: {e}")),
            }
            srv.stop().await;
        }
        Err(e) => rep.errors.push(format!("start: {e}")),
    }
    // Phase 3: N sessions, a fresh process for each N.
    for &n in &opts.sessions {
        match Server::start(opts, kind, &gapless_default, &format!("sessions{n}")).await {
            Ok(srv) => {
                eprintln!("  {n} sessions");
                match many_sessions(opts, &srv, n).await {
                    Ok(r) => rep.sessions.push(r),
                    Err(e) => {
                        rep.errors.push(format!("{n} sessions: {e}"));
                        rep.sessions.push(SessionsResult { n, ..Default::default() });
                    }
                }
                srv.stop().await;
            }
            Err(e) => rep.errors.push(format!("start: {e}")),
        }
    }
    rep
}

fn machine() -> String {
    let cpu = std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .map(|l| l.split(':').nth(1).unwrap_or("").trim().to_owned())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism().map(|n| n.get()).unwrap_or(0);
    let load = std::fs::read_to_string("/proc/loadavg").unwrap_or_default();
    let load: Vec<&str> = load.split_whitespace().take(3).collect();
    format!("{n} × {cpu}; load average at the end {}", load.join(" "))
}

fn main() {
    // The modes that drive a server already running: one thread each.
    let mode = std::env::args().nth(1);
    if matches!(mode.as_deref(), Some("drive" | "latency")) {
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        let r = if mode.as_deref() == Some("drive") {
            rt.block_on(drive::run(drive::parse(std::env::args().skip(2))))
        } else {
            rt.block_on(latency::run(latency::parse(std::env::args().skip(2))))
        };
        if let Err(e) = r {
            eprintln!("gapless-load {}: {e}", mode.unwrap_or_default());
            std::process::exit(1);
        }
        return;
    }
    let opts = parse_opts();
    // Watchdog: the tool stops by itself.
    let deadline = opts.deadline;
    std::thread::spawn(move || {
        std::thread::sleep(deadline);
        eprintln!("gapless-load: deadline of {deadline:?} exceeded; killing servers");
        for pid in CHILDREN.lock().unwrap().iter() {
            // SAFETY: kill(2) on a pid we spawned.
            unsafe {
                libc::kill(*pid as i32, libc::SIGKILL);
            }
        }
        std::process::exit(3);
    });
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    let code = rt.block_on(async {
        let mut reports = BTreeMap::new();
        let kinds: Vec<Kind> =
            Kind::ALL.into_iter().filter(|k| opts.only.as_deref().is_none_or(|o| o == key(*k))).collect();
        eprintln!("== one SSE stream (all servers up, runs alternate)");
        single_stream_all(&opts, &kinds, &mut reports).await;
        for &k in &kinds {
            let rep = reports.remove(key(k)).unwrap_or_default();
            reports.insert(key(k), run_server(&opts, k, rep).await);
        }
        let md = report(&opts, &reports, &machine());
        println!("{md}");
        if let Some(p) = &opts.markdown {
            if let Err(e) = std::fs::write(p, &md) {
                eprintln!("write {}: {e}", p.display());
            }
        }
        if reports.values().any(|r| !r.errors.is_empty()) {
            1
        } else {
            0
        }
    });
    rt.shutdown_timeout(Duration::from_secs(2));
    std::process::exit(code);
}
