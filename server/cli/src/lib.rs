//! The command line every gapless binary shares: each limit of
//! `ServerConfig` and `ServeConfig` as a flag ([`ServerFlags`], flattened
//! into a binary's own `clap` parser), and [`serve`], which builds the
//! server from them around the binary's application and serves it until
//! SIGTERM or SIGINT. `gapless-server` and `gapless-gateway` both use it,
//! so a flag means the same in both. [`jemalloc!`] declares jemalloc a
//! binary's allocator with the options every gapless binary runs with.
//!
//! A binary of your own around your application (a `gapless_server::Host`),
//! with every flag of `gapless-server`:
//!
//! ```no_run
//! use clap::Parser;
//! use gapless_cli::{init_logging, serve, ServerFlags};
//! use gapless_server::McpServer;
//! # use futures_util::future::BoxFuture;
//! # use gapless_server::{Host, RequestContext, RpcError};
//! # use serde_json::Value;
//! # struct MyHost;
//! # impl Host for MyHost {
//! #     fn capabilities(&self) -> Value { serde_json::json!({}) }
//! #     fn handle(&self, method: String, _: Value, _: RequestContext) -> BoxFuture<'static, Result<Value, RpcError>> {
//! #         Box::pin(async move { Err(RpcError::method_not_found(&method)) })
//! #     }
//! # }
//!
//! /// My MCP server, with gapless's resumption.
//! #[derive(Parser)]
//! struct Args {
//!     #[command(flatten)]
//!     server: ServerFlags,
//! }
//!
//! #[tokio::main]
//! async fn main() -> std::io::Result<()> {
//!     let a = Args::parse();
//!     init_logging(a.server.log_format);
//!     // Listens on --bind (127.0.0.1:8080) until SIGTERM or SIGINT.
//!     serve("my-server", a.server, McpServer::builder(MyHost), None).await
//! }
//! ```

use axum::response::IntoResponse;
use gapless::{ErrorKind, RingConfig};
use gapless_server::{ApiError, McpServerBuilder, ServeConfig, ServerConfig};
use std::net::SocketAddr;
use std::time::Duration;
use tracing_subscriber::EnvFilter;

/// The server's flags: where it listens, every limit, the cluster's
/// Redis, logging, metrics and the status page.
#[derive(clap::Args, Debug)]
pub struct ServerFlags {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1:8080")]
    pub bind: SocketAddr,
    /// Endpoint path.
    #[arg(long, default_value = "/mcp")]
    pub path: String,
    /// Events retained per session ring.
    #[arg(long, default_value_t = gapless::ring::DEFAULT_CAPACITY)]
    pub ring_events: usize,
    /// Payload bytes retained per session ring.
    #[arg(long, default_value_t = gapless::ring::DEFAULT_BYTE_BUDGET)]
    pub ring_bytes: usize,
    /// Most live sessions.
    #[arg(long, default_value_t = 10_000)]
    pub max_sessions: usize,
    /// Most bytes all sessions' rings together may keep: a number with an
    /// optional K, M, G or T (powers of 1024), or `unlimited`. Default: a
    /// quarter of the machine's memory (/proc/meminfo), 1G where unknown.
    #[arg(long, value_parser = parse_size)]
    pub max_memory: Option<usize>,
    /// Seconds a session may sit with no connection and no request.
    #[arg(long, default_value_t = 600)]
    pub idle_timeout_secs: u64,
    /// Seconds a WebSocket migration ticket stays valid.
    #[arg(long, default_value_t = 30)]
    pub ticket_ttl_secs: u64,
    /// SSE `retry:` hint in milliseconds.
    #[arg(long, default_value_t = 1000)]
    pub sse_retry_ms: u64,
    /// Largest request body in bytes.
    #[arg(long, default_value_t = 4 << 20)]
    pub max_body_bytes: usize,
    /// Extra allowed Origin (repeatable); loopback origins are always allowed.
    #[arg(long = "allow-origin")]
    pub allowed_origins: Vec<String>,
    /// Extra allowed Host name (repeatable; `*` for any); loopback names are always allowed.
    #[arg(long = "allow-host")]
    pub allowed_hosts: Vec<String>,
    /// Seconds a connection may take to send a request head (also the idle
    /// keep-alive timeout).
    #[arg(long, default_value_t = 10)]
    pub header_timeout_secs: u64,
    /// Seconds a request body may take to arrive whole.
    #[arg(long, default_value_t = 30)]
    pub body_timeout_secs: u64,
    /// Most bytes of request bodies being received at once (a quarter of it
    /// per client; both at least --max-body-bytes): a number with an
    /// optional K, M, G or T.
    #[arg(long, value_parser = parse_size, default_value = "64M")]
    pub max_body_bytes_in_flight: usize,
    /// Most open connections (lowered to fit the open-file limit).
    #[arg(long, default_value_t = 4096)]
    pub max_connections: usize,
    /// Most open connections from one IP address.
    #[arg(long, default_value_t = 256)]
    pub max_connections_per_ip: usize,
    /// Most live sessions per client (its identity, else its IP address).
    #[arg(long, default_value_t = 1000)]
    pub max_sessions_per_client: usize,
    /// `initialize` requests per second one client may send, on average.
    #[arg(long, default_value_t = 20.0)]
    pub initialize_per_sec: f64,
    /// `initialize` requests one client may send at once.
    #[arg(long, default_value_t = 100)]
    pub initialize_burst: u32,
    /// Most requests in flight per session.
    #[arg(long, default_value_t = 64)]
    pub max_inflight_requests: usize,
    /// Most MCP 2026-07-28 requests (no session; listen streams included)
    /// in flight at once.
    #[arg(long, default_value_t = 4096)]
    pub max_stateless_inflight: usize,
    /// Most of those one client (identity, else IP address) may have in
    /// flight.
    #[arg(long, default_value_t = 256)]
    pub max_stateless_inflight_per_client: usize,
    /// A file whose bytes seal MCP 2026-07-28's `requestState` (the answers
    /// of an input-required result's earlier rounds). Without it, a random
    /// secret per process: the nodes of a cluster need the same file for a
    /// retry to be served by any of them.
    #[arg(long)]
    pub request_state_secret_file: Option<std::path::PathBuf>,
    /// Seconds a `requestState` stays valid.
    #[arg(long, default_value_t = 600)]
    pub request_state_ttl_secs: u64,
    /// Seconds a task (the tasks extension of MCP 2026-07-28) and its
    /// result are kept from its creation (its `ttlMs`), unless the tool
    /// says otherwise.
    #[arg(long, default_value_t = 3600)]
    pub task_ttl_secs: u64,
    /// Most unexpired tasks kept at once.
    #[arg(long, default_value_t = 4096)]
    pub max_tasks: usize,
    /// Most of those one client (identity, else IP address) may hold.
    #[arg(long, default_value_t = 256)]
    pub max_tasks_per_client: usize,
    /// Most events a task's event stream keeps for `tasks/stream`
    /// (SEP-2694); the oldest go first.
    #[arg(long, default_value_t = 1024)]
    pub task_events_max: usize,
    /// Most payload bytes a task's event stream keeps.
    #[arg(long, default_value_t = 1 << 20)]
    pub task_events_max_bytes: usize,
    /// Seconds a task's event is served after it was emitted.
    #[arg(long, default_value_t = 3600)]
    pub task_events_max_age_secs: u64,
    /// Largest payload of one task event, serialized (bytes).
    #[arg(long, default_value_t = 64 << 10)]
    pub max_task_event_bytes: usize,
    /// Largest total size of a request's headers (bytes).
    #[arg(long, default_value_t = 16 << 10)]
    pub max_header_bytes: usize,
    /// Largest result of a task, serialized (bytes); a larger one fails the
    /// task.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_task_result_bytes: usize,
    /// Most bytes a WebSocket's writer may hold unsent before the socket is
    /// closed.
    #[arg(long, default_value_t = 1 << 20)]
    pub max_socket_write_buffer: usize,
    /// Most ping (and pong) frames a WebSocket may send per second (bursts
    /// of ten times that).
    #[arg(long, default_value_t = 50)]
    pub max_socket_pings_per_sec: u32,
    /// Seconds a server → client request (sampling, elicitation) waits for
    /// its response.
    #[arg(long, default_value_t = 60)]
    pub client_request_timeout_secs: u64,
    /// Seconds in-flight requests may run on after SIGTERM or SIGINT.
    #[arg(long, default_value_t = 10)]
    pub shutdown_grace_secs: u64,
    /// Join the cluster of every node on this Redis (`redis://HOST:PORT/DB`):
    /// sessions live there, and any request of a session may land on any
    /// node. Without it, sessions live in this process. For a Redis
    /// Cluster, give several of its nodes as seeds (the flag repeated, or
    /// a comma-separated list): the first that answers is used, and the
    /// client learns the rest.
    #[arg(long, env = "GAPLESS_REDIS_URL", value_delimiter = ',')]
    pub redis_url: Vec<String>,
    /// How long a node starting while no `--redis-url` seed answers keeps
    /// trying (logging each attempt) before it exits non-zero.
    #[arg(long, default_value_t = 30)]
    pub redis_wait_secs: u64,
    /// Prefix of every key and channel in Redis.
    #[arg(long, default_value = gapless_redis::DEFAULT_PREFIX)]
    pub redis_prefix: String,
    /// Log lines for people (`pretty`) or one JSON object per line
    /// (`json`, with the spans: session tag, request id and method). The
    /// level comes from `RUST_LOG` (default `info`).
    #[arg(long, value_enum, default_value_t = LogFormat::Pretty)]
    pub log_format: LogFormat,
    /// Path of the Prometheus metrics (OpenMetrics text), on the main
    /// listener or on `--metrics-bind`; `off` serves none.
    #[arg(long, default_value = "/metrics")]
    pub metrics_path: String,
    /// Path of the live status page (its data at `<path>/data.json`), beside
    /// the metrics; `off` serves none.
    #[arg(long, default_value = "/status")]
    pub status_path: String,
    /// Serve the metrics and the status page on this address instead of the
    /// main listener.
    #[arg(long)]
    pub metrics_bind: Option<std::net::SocketAddr>,
    /// A bearer token for the metrics and the status page's data: any
    /// client that presents it may read them, and no other. Without it,
    /// loopback clients only.
    #[arg(long, env = "GAPLESS_METRICS_TOKEN")]
    pub metrics_token: Option<String>,
}

/// How log lines are written.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Pretty,
    /// One JSON object per line.
    Json,
}

/// Connects to the first of `seeds` that answers; while none does, tries
/// again (each attempt logged, waits doubling from 250 ms to 5 s) until
/// `wait` has passed, the last attempt at its end. A refusal that waiting
/// cannot mend (a bad URL or credentials, an evicting policy, a plain
/// Redis given as several seeds) ends it at once. Messages never show a
/// seed's password.
async fn connect_store(
    seeds: &[String],
    config: gapless_redis::StoreConfig,
    wait: Duration,
) -> Result<(gapless_redis::RedisStore, String), String> {
    let seeds: Vec<&str> = seeds.iter().map(String::as_str).collect();
    let deadline = tokio::time::Instant::now() + wait;
    let mut pause = Duration::from_millis(250);
    for attempt in 1.. {
        match gapless_redis::RedisStore::connect_seeds(&seeds, config.clone()).await {
            Ok(connected) => return Ok(connected),
            Err(gapless_redis::StoreError::Unavailable(e)) => {
                let left = deadline.saturating_duration_since(tokio::time::Instant::now());
                if left.is_zero() {
                    return Err(format!(
                        "no seed answered within {} s ({attempt} attempts): Redis is unavailable: {e}",
                        wait.as_secs()
                    ));
                }
                tracing::warn!(attempt, error = %e, "no Redis seed answers yet; trying again");
                tokio::time::sleep(pause.min(left)).await;
                pause = (pause * 2).min(Duration::from_secs(5));
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    unreachable!("the attempts are unbounded")
}

/// `off`, or an absolute path of plain segments outside the endpoint's
/// routes (`endpoint`, and everything under it).
fn check_metrics_path(metrics: &str, endpoint: &str) -> Result<(), String> {
    if metrics == "off" {
        return Ok(());
    }
    let plain =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"-._~".contains(&b));
    if !metrics.starts_with('/') || !metrics[1..].split('/').all(plain) {
        return Err("not an absolute path of plain segments (letters, digits, - . _ ~)".into());
    }
    let base = endpoint.trim_end_matches('/');
    if base.is_empty() || metrics == base || metrics.starts_with(&format!("{base}/")) {
        return Err(format!("inside the endpoint's routes ({endpoint})"));
    }
    Ok(())
}

/// `512M`, `2G`, `1048576`, `unlimited`.
pub fn parse_size(s: &str) -> Result<usize, String> {
    let t = s.trim();
    if t.eq_ignore_ascii_case("unlimited") {
        return Ok(usize::MAX);
    }
    let (digits, shift) = match t.char_indices().last() {
        Some((i, c)) if c.is_ascii_alphabetic() => {
            let shift = match c.to_ascii_uppercase() {
                'K' => 10,
                'M' => 20,
                'G' => 30,
                'T' => 40,
                _ => return Err(format!("unknown size suffix {c:?} (use K, M, G or T)")),
            };
            (&t[..i], shift)
        }
        _ => (t, 0),
    };
    let n: usize = digits.trim().parse().map_err(|_| format!("{s:?} is not a size like 512M or 2G"))?;
    n.checked_mul(1usize << shift).filter(|&b| b > 0).ok_or_else(|| format!("{s:?} is zero or too large"))
}

/// A quarter of the machine's memory (`MemTotal` of /proc/meminfo), or 1 GiB
/// where that cannot be read.
fn default_max_memory() -> usize {
    let total = std::fs::read_to_string("/proc/meminfo").ok().and_then(|m| {
        let kb = m
            .lines()
            .find_map(|l| l.strip_prefix("MemTotal:"))?
            .trim()
            .trim_end_matches("kB")
            .trim()
            .parse::<usize>()
            .ok()?;
        kb.checked_mul(1024)
    });
    total.map_or(1 << 30, |t| t / 4)
}

/// Raises the soft open-file limit to the hard one and returns the soft
/// limit now in force (`None` where it cannot be read).
// `rlim_t` is `u64` on Linux, not on every unix: the conversion is not
// useless everywhere.
#[allow(clippy::useless_conversion)]
fn raise_nofile_limit() -> Option<u64> {
    #[cfg(unix)]
    {
        let mut lim = libc::rlimit { rlim_cur: 0, rlim_max: 0 };
        // SAFETY: getrlimit and setrlimit only read and write the struct we
        // pass, which lives for the call.
        unsafe {
            if libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) != 0 {
                return None;
            }
            if lim.rlim_cur < lim.rlim_max {
                let raised = libc::rlimit { rlim_cur: lim.rlim_max, rlim_max: lim.rlim_max };
                if libc::setrlimit(libc::RLIMIT_NOFILE, &raised) == 0 {
                    lim = raised;
                }
            }
        }
        Some(u64::try_from(lim.rlim_cur).unwrap_or(u64::MAX))
    }
    #[cfg(not(unix))]
    {
        None
    }
}

/// Sets up logging: `format`, at the level of `RUST_LOG` (default `info`).
pub fn init_logging(format: LogFormat) {
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new("info"));
    match format {
        LogFormat::Pretty => tracing_subscriber::fmt().with_env_filter(filter).init(),
        LogFormat::Json => tracing_subscriber::fmt()
            .json()
            .with_current_span(true)
            .with_span_list(true)
            .with_env_filter(filter)
            .init(),
    }
}

/// Builds the server of `builder` (the binary's application) with the
/// flags `a` and serves it until SIGTERM or SIGINT. A flag that cannot be
/// honoured (an unreadable secret, a Redis that does not answer, clashing
/// paths) ends the process with status 2 and a line on stderr naming
/// `name`, the binary.
/// `routes`, if any, are merged beside the endpoint (the binary's own, e.g.
/// a gateway's metadata).
pub async fn serve(
    name: &str,
    a: ServerFlags,
    mut builder: McpServerBuilder,
    routes: Option<axum::Router>,
) -> std::io::Result<()> {
    let ring = RingConfig::new(a.ring_events, a.ring_bytes);
    let mut config = ServerConfig::default().with_ring(ring);
    config.hub.max_sessions = a.max_sessions;
    config.hub.max_memory = a.max_memory.unwrap_or_else(default_max_memory);
    config.hub.idle_timeout = Duration::from_secs(a.idle_timeout_secs);
    config.hub.ticket_ttl = Duration::from_secs(a.ticket_ttl_secs);
    config.sse_retry = Duration::from_millis(a.sse_retry_ms);
    config.max_body_bytes = a.max_body_bytes;
    config.body_read_timeout = Duration::from_secs(a.body_timeout_secs);
    config.max_body_bytes_in_flight = a.max_body_bytes_in_flight;
    config.max_sessions_per_client = a.max_sessions_per_client;
    config.initialize_per_sec = a.initialize_per_sec;
    config.initialize_burst = a.initialize_burst;
    config.max_inflight_requests = a.max_inflight_requests;
    config.request_state_ttl = Duration::from_secs(a.request_state_ttl_secs);
    config.max_stateless_inflight = a.max_stateless_inflight;
    config.max_stateless_inflight_per_client = a.max_stateless_inflight_per_client;
    config.task_ttl = Duration::from_secs(a.task_ttl_secs.max(1));
    config.max_tasks = a.max_tasks;
    config.max_tasks_per_client = a.max_tasks_per_client;
    config.max_header_bytes = a.max_header_bytes;
    config.max_task_result_bytes = a.max_task_result_bytes;
    config.max_socket_write_buffer = a.max_socket_write_buffer;
    config.max_socket_pings_per_sec = a.max_socket_pings_per_sec;
    config.client_request_timeout = Duration::from_secs(a.client_request_timeout_secs.max(1));
    config.task_events_max = a.task_events_max;
    config.task_events_max_bytes = a.task_events_max_bytes;
    config.task_events_max_age = Duration::from_secs(a.task_events_max_age_secs.max(1));
    config.max_task_event_bytes = a.max_task_event_bytes;
    if let Some(f) = &a.request_state_secret_file {
        match std::fs::read(f) {
            Ok(s) if s.len() >= 16 => config.request_state_secret = Some(s),
            Ok(_) => {
                eprintln!("{name}: {} holds fewer than 16 bytes: too short a secret", f.display());
                std::process::exit(2);
            }
            Err(e) => {
                eprintln!("{name}: cannot read {}: {e}", f.display());
                std::process::exit(2);
            }
        }
    }
    config.allowed_origins = a.allowed_origins;
    config.allowed_hosts = a.allowed_hosts;
    if !a.redis_url.is_empty() && config.request_state_secret.is_none() {
        tracing::warn!(
            "cluster mode without --request-state-secret-file: each node seals MCP 2026-07-28 requestState \
             with its own random key, so a retry that reaches another node is refused (-32602); give every \
             node the same file"
        );
    }
    if !a.redis_url.is_empty() {
        let store_config = gapless_redis::StoreConfig {
            ring,
            idle_timeout: config.hub.idle_timeout,
            prefix: a.redis_prefix.clone(),
            ..gapless_redis::StoreConfig::default()
        };
        let wait = Duration::from_secs(a.redis_wait_secs);
        match connect_store(&a.redis_url, store_config, wait).await {
            Ok((store, seed)) => {
                let shown = gapless_redis::redacted(&seed);
                tracing::info!(prefix = %a.redis_prefix, seed = %shown, "cluster mode: sessions live in Redis");
                builder = builder.store(store, &seed);
            }
            Err(e) => {
                let shown: Vec<String> = a.redis_url.iter().map(|u| gapless_redis::redacted(u)).collect();
                eprintln!("{name}: --redis-url {}: {e}", shown.join(","));
                std::process::exit(2);
            }
        }
    }
    let access = match a.metrics_token.as_deref() {
        None => gapless_server::ObserveAccess::Loopback,
        Some("") => {
            eprintln!("{name}: --metrics-token must not be empty");
            std::process::exit(2);
        }
        Some(t) => gapless_server::ObserveAccess::Token(t.to_owned()),
    };
    for (flag, p) in [("--metrics-path", &a.metrics_path), ("--status-path", &a.status_path)] {
        if let Err(e) = check_metrics_path(p, &a.path) {
            eprintln!("{name}: {flag} {p:?}: {e}");
            std::process::exit(2);
        }
    }
    let status_data = format!("{}/data.json", a.status_path.trim_end_matches('/'));
    if a.metrics_path != "off"
        && a.status_path != "off"
        && (a.metrics_path == a.status_path || a.metrics_path == status_data)
    {
        eprintln!("{name}: --metrics-path and --status-path must differ");
        std::process::exit(2);
    }
    let server = match builder.config(config).path(&a.path).build() {
        Ok(s) => s,
        Err(e) => {
            eprintln!("{name}: {e}");
            std::process::exit(2);
        }
    };
    let mut serve = ServeConfig {
        header_read_timeout: Duration::from_secs(a.header_timeout_secs),
        max_connections: a.max_connections,
        max_connections_per_ip: a.max_connections_per_ip,
        shutdown_grace: Duration::from_secs(a.shutdown_grace_secs),
    };
    match raise_nofile_limit() {
        Some(files) => {
            // Room for the listener, logs, and the files a connection may
            // briefly hold beyond its socket.
            let fit = (files as usize).saturating_sub(64).max(1);
            if serve.max_connections > fit {
                serve.max_connections = fit;
            }
            tracing::info!(open_files = files, max_connections = serve.max_connections, "open-file limit");
        }
        None => tracing::warn!("could not read the open-file limit"),
    }
    let sweeper = server.spawn_sweeper(Duration::from_secs(10));
    let listener = tokio::net::TcpListener::bind(a.bind).await?;
    tracing::info!(addr = %listener.local_addr()?, path = %a.path, "{name} listening");
    match server.hub().config().max_memory {
        usize::MAX => tracing::info!("memory budget: unlimited (each ring is still bounded)"),
        b => tracing::info!(bytes = b, mib = b >> 20, "memory budget of all session rings"),
    }
    #[cfg(all(target_os = "linux", feature = "jemalloc"))]
    crate::purge::start(server.hub().config().max_memory);
    let mut observe: Option<axum::Router> = None;
    if a.metrics_path != "off" {
        observe = Some(server.metrics_router(&a.metrics_path, access.clone()));
    }
    if a.status_path != "off" {
        let status = server.status_router(&a.status_path, access);
        observe = Some(match observe {
            Some(m) => m.merge(status),
            None => status,
        });
    }
    let metrics = observe;
    // The library router has no fallback; the binary answers every other
    // path with the JSON error body too.
    let mut app = server.router();
    if let Some(r) = routes {
        app = app.merge(r);
    }
    match (metrics, a.metrics_bind) {
        (Some(m), None) => app = app.merge(m),
        (Some(m), Some(addr)) => {
            let l = tokio::net::TcpListener::bind(addr).await?;
            tracing::info!(addr = %l.local_addr()?, metrics = %a.metrics_path, status = %a.status_path, "metrics and status listening");
            let m = m.into_make_service_with_connect_info::<std::net::SocketAddr>();
            tokio::spawn(async move { axum::serve(l, m).with_graceful_shutdown(shutdown_signal()).await });
        }
        (None, _) => {}
    }
    let app =
        app.fallback(|| async { ApiError::new(ErrorKind::NotFound, "no such endpoint").into_response() });
    let result = server.serve(listener, app, serve, shutdown_signal()).await;
    sweeper.abort();
    tracing::info!("stopped");
    result
}

async fn shutdown_signal() {
    let ctrl_c = tokio::signal::ctrl_c();
    #[cfg(unix)]
    {
        let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .expect("SIGTERM handler");
        tokio::select! { _ = ctrl_c => {}, _ = term.recv() => {} }
    }
    #[cfg(not(unix))]
    {
        let _ = ctrl_c.await;
    }
}

/// jemalloc for a binary built on this crate (the `jemalloc` feature).
#[cfg(all(unix, feature = "jemalloc"))]
#[doc(hidden)]
pub mod alloc {
    pub use tikv_jemallocator::Jemalloc;
}

/// Declares jemalloc the binary's global allocator with the options every
/// gapless binary runs with (a background thread returning freed pages):
/// one line in each binary's `main.rs`. Without the `jemalloc` feature it
/// declares nothing.
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
#[macro_export]
macro_rules! jemalloc {
    () => {
        #[global_allocator]
        static ALLOC: $crate::alloc::Jemalloc = $crate::alloc::Jemalloc;

        /// jemalloc's options, read at its first allocation
        /// (`_RJEM_MALLOC_CONF` in the environment still overrides them): a
        /// background thread returns freed pages (after jemalloc's 10 s
        /// decay) while the server is idle too, so its RSS settles to what
        /// the retained events hold.
        #[export_name = "_rjem_malloc_conf"]
        static MALLOC_CONF: JemallocConf = JemallocConf(c"background_thread:true".as_ptr());

        /// A C string pointer that can be a `static` (jemalloc's
        /// `malloc_conf` is a `const char *`).
        #[repr(transparent)]
        struct JemallocConf(*const std::ffi::c_char);

        // SAFETY: it points at a 'static, immutable C string; nothing writes
        // through it.
        unsafe impl Sync for JemallocConf {}
    };
}

/// Without jemalloc (another OS, or the feature off): the system allocator.
#[cfg(not(all(target_os = "linux", feature = "jemalloc")))]
#[macro_export]
macro_rules! jemalloc {
    () => {};
}
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
mod purge;
