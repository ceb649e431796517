//! Server configuration; every field has the `docs/SPEC.md` §5 default.

use gapless::{HubConfig, RingConfig};
use std::time::Duration;

/// Limits and knobs of the transport.
#[derive(Debug, Clone)]
pub struct ServerConfig {
    /// Engine limits: ring size, sessions, idle timeout, tickets.
    pub hub: HubConfig,
    /// SSE `retry:` sent in priming events (default 1000 ms).
    pub sse_retry: Duration,
    /// Serve the legacy HTTP+SSE transport (protocol 2024-11-05) at
    /// `P/sse` and `P/messages` beside Streamable HTTP (default true).
    pub legacy_sse: bool,
    /// Largest accepted request body (default 4 MiB).
    pub max_body_bytes: usize,
    /// A request body must have arrived whole within this long after the
    /// handler starts reading it (default 30 s): a body that never ends, or
    /// stops short of its `Content-Length`, is answered 408
    /// `request_timeout` instead of holding its connection.
    pub body_read_timeout: Duration,
    /// Most bytes of request bodies being received at once (default 64
    /// MiB), a quarter of it per client (identity, else IP address; a
    /// caller with neither is held to the total only); both at least
    /// `max_body_bytes`. A body holds the bytes that have arrived until it
    /// has been read; one whose declared length does not fit what is left,
    /// or that grows past it, is answered 503 `too_many_body_bytes` with
    /// `Retry-After: 1`.
    pub max_body_bytes_in_flight: usize,
    /// Largest accepted total size of request headers (default 16 KiB).
    pub max_header_bytes: usize,
    /// Allowed `Origin` values (exact, e.g. `https://app.example`). Origins
    /// on a loopback host (`localhost`, `127.0.0.1`, `[::1]`) are allowed
    /// unless `allow_loopback_origins` is false. Requests without `Origin`
    /// (non-browser clients) are allowed.
    pub allowed_origins: Vec<String>,
    /// Allow `http(s)://localhost|127.0.0.1|[::1][:port]` origins.
    pub allow_loopback_origins: bool,
    /// Allowed `Host` header names (without port). Empty: only loopback
    /// names, which is right for a server bound to loopback (DNS-rebinding
    /// protection); `*` allows any.
    pub allowed_hosts: Vec<String>,
    /// A paced publish waits while the attached reader of its stream (or a
    /// migrated session's WebSocket, which reads every stream) has this many
    /// events unread (default: half the ring).
    pub pace_high_water: u64,
    /// SSE keep-alive comment interval (default 15 s); it also detects dead
    /// connections.
    pub keepalive: Duration,
    /// How long a server → client request waits for its response (60 s).
    pub client_request_timeout: Duration,
    /// Most live sessions one client may hold (its identity, else its peer
    /// address; default 1000, a tenth of the session limit). One more
    /// `initialize` is 429
    /// `client_session_limit`.
    pub max_sessions_per_client: usize,
    /// `initialize` requests one client may send per second, on average
    /// (default 20); over it, 429 `rate_limited` with `Retry-After`.
    pub initialize_per_sec: f64,
    /// How many `initialize` requests one client may send at once before
    /// the rate applies (default 100).
    pub initialize_burst: u32,
    /// Most requests in flight per session, over HTTP and the socket
    /// together (default 64). One more is answered at once with the
    /// JSON-RPC error -31001 "too many requests in flight".
    pub max_inflight_requests: usize,
    /// Most ping (and pong) frames a socket may send per second, averaged
    /// over a burst of ten times that (default 50). A client over it, such
    /// as one that floods pings and never reads, is closed with 1008.
    pub max_socket_pings_per_sec: u32,
    /// Most bytes a socket's writer may hold unsent (default 1 MiB): a
    /// client that does not read cannot grow the server's memory past it.
    pub max_socket_write_buffer: usize,
    /// Most MCP 2026-07-28 requests (each without a session) in flight at
    /// once, `subscriptions/listen` streams included (default 4096); one
    /// more is answered 429 with the JSON-RPC error -31001.
    pub max_stateless_inflight: usize,
    /// Most of those one client may have in flight (its identity, else its
    /// peer address; default 256).
    pub max_stateless_inflight_per_client: usize,
    /// The secret that seals MCP 2026-07-28's `requestState` (an
    /// input-required result's earlier answers, `docs/SPEC.md` §5.4); `None`
    /// (the default): random per process, so a retry that reaches another
    /// process is refused (-32602). The nodes of a cluster need the same.
    pub request_state_secret: Option<Vec<u8>>,
    /// How long a `requestState` stays valid (default 10 min).
    pub request_state_ttl: Duration,
    /// How long a task of the tasks extension (`docs/SPEC.md` §5.5) and its
    /// result are kept from its creation, unless its handler says otherwise
    /// (default 1 h); its `ttlMs`.
    pub task_ttl: Duration,
    /// The longest TTL a handler may give a task (default 24 h).
    pub max_task_ttl: Duration,
    /// The `pollIntervalMs` suggested to clients (default 500 ms).
    pub task_poll_interval: Duration,
    /// Most unexpired tasks kept at once (default 4096); one more is
    /// refused to its handler ([`crate::tasks::TaskError::Full`]).
    pub max_tasks: usize,
    /// Most of those one client may hold (its identity, else its peer
    /// address; default 256).
    pub max_tasks_per_client: usize,
    /// Largest result a task keeps (serialized; default 1 MiB): a larger
    /// one fails the task instead. With `max_tasks`, it bounds the memory
    /// of the in-process task store.
    pub max_task_result_bytes: usize,
    /// Most events a task's event stream keeps (`tasks/stream`, SEP-2694,
    /// `docs/SPEC.md` §5.6; default 1024): the oldest go first.
    pub task_events_max: usize,
    /// Most payload bytes a task's event stream keeps (default 1 MiB).
    pub task_events_max_bytes: usize,
    /// How long a task's event is served after it was emitted (default
    /// 1 h); at most as long as the task is kept.
    pub task_events_max_age: Duration,
    /// Largest payload of one task event, serialized (default 64 KiB; at
    /// most `task_events_max_bytes`).
    pub max_task_event_bytes: usize,
}

impl Default for ServerConfig {
    fn default() -> Self {
        let hub = HubConfig::default();
        ServerConfig {
            hub,
            sse_retry: Duration::from_millis(1000),
            legacy_sse: true,
            max_body_bytes: 4 << 20,
            body_read_timeout: Duration::from_secs(30),
            max_body_bytes_in_flight: 64 << 20,
            max_header_bytes: 16 << 10,
            allowed_origins: Vec::new(),
            allow_loopback_origins: true,
            allowed_hosts: Vec::new(),
            pace_high_water: (hub.ring.capacity as u64 / 2).max(1),
            keepalive: Duration::from_secs(15),
            client_request_timeout: Duration::from_secs(60),
            max_sessions_per_client: 1000,
            initialize_per_sec: 20.0,
            initialize_burst: 100,
            max_inflight_requests: 64,
            max_socket_pings_per_sec: 50,
            max_socket_write_buffer: 1 << 20,
            max_stateless_inflight: 4096,
            max_stateless_inflight_per_client: 256,
            request_state_secret: None,
            request_state_ttl: Duration::from_secs(600),
            task_ttl: Duration::from_secs(3600),
            max_task_ttl: Duration::from_secs(24 * 3600),
            task_poll_interval: Duration::from_millis(500),
            max_tasks: 4096,
            max_tasks_per_client: 256,
            max_task_result_bytes: 1 << 20,
            task_events_max: 1024,
            task_events_max_bytes: 1 << 20,
            task_events_max_age: Duration::from_secs(3600),
            max_task_event_bytes: 64 << 10,
        }
    }
}

impl ServerConfig {
    /// Sets the ring bounds, keeping the pacing mark at half the ring.
    pub fn with_ring(mut self, ring: RingConfig) -> Self {
        self.hub.ring = ring;
        self.pace_high_water = (ring.capacity as u64 / 2).max(1);
        self
    }
}

/// The protocol version of the legacy HTTP+SSE transport, which a legacy
/// session may also negotiate (besides [`SUPPORTED_VERSIONS`]).
pub const LEGACY_VERSION: &str = "2024-11-05";

/// MCP protocol versions served without a session, each request declaring
/// its own (`docs/SPEC.md` §5.4), newest first.
pub const MODERN_VERSIONS: [&str; 1] = ["2026-07-28"];

/// MCP protocol versions this transport speaks, newest first.
pub const SUPPORTED_VERSIONS: [&str; 3] = ["2025-11-25", "2025-06-18", "2025-03-26"];

/// The protocol version a session answers an `initialize` asking for
/// `asked` with: the client's if it is one of [`SUPPORTED_VERSIONS`], else
/// `fallback` (the newest for Streamable HTTP, [`LEGACY_VERSION`] for the
/// legacy transport).
pub(crate) fn negotiate(asked: &str, fallback: &'static str) -> &'static str {
    SUPPORTED_VERSIONS.iter().copied().find(|v| *v == asked).unwrap_or(fallback)
}
