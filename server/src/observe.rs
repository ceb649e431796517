//! What an operator sees (`docs/SPEC.md` §9): Prometheus metrics in the
//! OpenMetrics text format (`prometheus-client`), behind an access check.
//!
//! Two kinds of figures:
//! - **counted as they happen**, once per request or connection (sessions
//!   created, refusals by kind, resumes and migrations by outcome, open
//!   streams and sockets, socket closes by code): plain counters and gauges;
//! - **read at scrape time** from the sessions themselves ([`View`]): live
//!   sessions, retained events and bytes, each ring's fill ratio, evictions,
//!   each open stream's delivery lag, and the events and payload bytes
//!   published by target. Publishing writes only its own session's
//!   counters ([`Published`]); nothing global is written per event. A
//!   session's counts join the totals of the sessions that ended when it
//!   ends.
//!
//! Labels are bounded: kinds are the contract's, outcomes a kind or `ok`,
//! close codes the server's own. No session id is ever a label.

use crate::error::ApiError;
use crate::state::AppState;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::{ConstGauge, Gauge};
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Weak};

/// A label naming a refusal kind (`ErrorKind::as_str`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Kind {
    kind: &'static str,
}

/// A label naming an outcome: `ok` or a refusal kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Outcome {
    outcome: &'static str,
}

/// A label naming why a session was not created.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Reason {
    reason: &'static str,
}

/// A label naming a task's terminal status, or why one was not created.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TaskLabel {
    status: &'static str,
}

/// A label naming how a gap was replayed: `resume` (an SSE resume) or
/// `socket` (a migration's WebSocket).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Via {
    via: &'static str,
}

/// Set on the response of a legacy `GET /sse` that created a session.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LegacyCreated;

/// What a granted resume or migration replays before it goes live: set
/// on its response by the handler, observed by [`count`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct Replayed(pub(crate) usize);

/// Bucket bounds of the replayed-events histogram.
const REPLAY_BUCKETS: [f64; 10] = [0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0];

fn replay_histogram() -> Histogram {
    Histogram::new(REPLAY_BUCKETS)
}

/// A label naming a WebSocket close code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Code {
    code: u16,
}

/// A label naming where an event went.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Target {
    target: &'static str,
}

/// Where an event is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// A request's own stream (a POST's SSE response).
    Request = 0,
    /// The session's standalone stream (the GET, or the legacy transport).
    Standalone = 1,
    /// A stream of a session that migrated to a WebSocket.
    Socket = 2,
}

/// The session id header (`docs/SPEC.md` §5).
const SESSION_HEADER: &str = "mcp-session-id";

const TARGETS: [&str; 3] = ["request", "standalone", "socket"];

/// One session's publish counts by target: written by its publishers
/// only (relaxed adds on the session's own memory), read at scrape time.
#[derive(Debug, Default)]
pub(crate) struct Published {
    events: [AtomicU64; 3],
    bytes: [AtomicU64; 3],
}

impl Published {
    /// Counts one event of `len` payload bytes.
    pub(crate) fn count(&self, target: TargetKind, len: usize) {
        self.events[target as usize].fetch_add(1, Ordering::Relaxed);
        self.bytes[target as usize].fetch_add(len as u64, Ordering::Relaxed);
    }

    fn add_to(&self, events: &mut [u64; 3], bytes: &mut [u64; 3]) {
        for i in 0..3 {
            events[i] += self.events[i].load(Ordering::Relaxed);
            bytes[i] += self.bytes[i].load(Ordering::Relaxed);
        }
    }
}

/// What the sessions that ended had counted.
#[derive(Debug, Default)]
struct Departed {
    published: Published,
    evicted: AtomicU64,
    evicted_bytes: AtomicU64,
}

/// The counters and gauges counted as things happen.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) sessions_created: Counter,
    pub(crate) sessions_deleted: Counter,
    pub(crate) sessions_expired: Counter,
    pub(crate) sessions_refused: Family<Reason, Counter>,
    /// Requests of MCP 2026-07-28 that passed the revision's checks.
    pub(crate) modern_requests: Counter,
    /// Tasks created on this node (tasks extension).
    pub(crate) tasks_created: Counter,
    /// Tasks this node refused to create, by why (`full`, `unavailable`).
    pub(crate) tasks_refused: Family<TaskLabel, Counter>,
    /// Terminal statuses this node recorded, by status.
    pub(crate) tasks_ended: Family<TaskLabel, Counter>,
    pub(crate) refusals: Family<Kind, Counter>,
    pub(crate) resumes: Family<Outcome, Counter>,
    pub(crate) migrations: Family<Outcome, Counter>,
    pub(crate) redeems: Family<Outcome, Counter>,
    pub(crate) sse_open: Gauge,
    pub(crate) sockets_open: Gauge,
    pub(crate) socket_closes: Family<Code, Counter>,
    /// Paced publishes that waited for a lagging reader, and how long.
    pub(crate) paced_waits: Histogram,
    /// Events each granted resume or migration replayed, by how.
    replayed: Family<Via, Histogram, fn() -> Histogram>,
    departed: Departed,
    /// The newest refusals, for the status page (at most [`RECENT`]).
    recent: std::sync::Mutex<std::collections::VecDeque<serde_json::Value>>,
    /// Every refusal counted.
    refused: AtomicU64,
    /// (when, events published, refusals) every [`SAMPLE_EVERY`] or
    /// more, while the page or the metrics are read (at most [`SAMPLES`]).
    samples: std::sync::Mutex<std::collections::VecDeque<(std::time::Instant, u64, u64)>>,
}

/// The close codes the server sends (`http/socket.rs`, `docs/SPEC.md` §5),
/// and 1005 for a peer that closed or left first.
const CLOSE_CODES: [u16; 6] = [1000, 1001, 1005, 1008, 4400, 4409];

/// Refusals the status page lists.
const RECENT: usize = 50;
/// The shortest time between two samples of the rates.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// Samples kept: 10 minutes at the shortest spacing.
const SAMPLES: usize = 300;
/// Sessions the status page lists (those nearest to losing history).
const NEAREST: usize = 20;

impl Metrics {
    pub(crate) fn new() -> Self {
        let m = Metrics {
            sessions_created: Counter::default(),
            sessions_deleted: Counter::default(),
            sessions_expired: Counter::default(),
            sessions_refused: Family::default(),
            modern_requests: Counter::default(),
            tasks_created: Counter::default(),
            tasks_refused: Family::default(),
            tasks_ended: Family::default(),
            refusals: Family::default(),
            resumes: Family::default(),
            migrations: Family::default(),
            redeems: Family::default(),
            sse_open: Gauge::default(),
            sockets_open: Gauge::default(),
            socket_closes: Family::default(),
            paced_waits: Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.001, 4.0, 8,
            )),
            replayed: Family::new_with_constructor(replay_histogram),
            departed: Departed::default(),
            recent: Default::default(),
            refused: AtomicU64::new(0),
            samples: Default::default(),
        };
        // Every label value there can be, at 0, so that a scrape lists each
        // series before its first event (a dashboard shows 0, not "no data").
        for k in gapless::ErrorKind::ALL {
            drop(m.refusals.get_or_create(&Kind { kind: k.as_str() }));
        }
        for outcome in std::iter::once("ok").chain(gapless::ErrorKind::ALL.iter().map(|k| k.as_str())) {
            drop(m.resumes.get_or_create(&Outcome { outcome }));
            drop(m.migrations.get_or_create(&Outcome { outcome }));
            drop(m.redeems.get_or_create(&Outcome { outcome }));
        }
        for k in NO_ROOM {
            drop(m.sessions_refused.get_or_create(&Reason { reason: k.as_str() }));
        }
        for code in CLOSE_CODES {
            drop(m.socket_closes.get_or_create(&Code { code }));
        }
        for via in ["resume", "socket"] {
            drop(m.replayed.get_or_create(&Via { via }));
        }
        for status in ["completed", "failed", "cancelled"] {
            drop(m.tasks_ended.get_or_create(&TaskLabel { status }));
        }
        for status in ["full", "unavailable"] {
            drop(m.tasks_refused.get_or_create(&TaskLabel { status }));
        }
        m
    }

    /// Counts a terminal status this node recorded.
    pub(crate) fn task_ended(&self, status: &'static str) {
        self.tasks_ended.get_or_create(&TaskLabel { status }).inc();
    }

    /// Counts a task this node did not create (`full` or `unavailable`).
    pub(crate) fn task_refused(&self, why: &'static str) {
        self.tasks_refused.get_or_create(&TaskLabel { status: why }).inc();
    }

    /// Counts and keeps a refusal (`session`: the tag of the session the
    /// request named).
    pub(crate) fn refusal(&self, e: &ApiError, session: Option<SessionTag>) {
        self.refusals.get_or_create(&Kind { kind: e.kind.as_str() }).inc();
        self.refused.fetch_add(1, Ordering::Relaxed);
        let at =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let entry = serde_json::json!({
            "at_ms": at as u64,
            "kind": e.kind.as_str(),
            "status": e.kind.http_status(),
            "numbers": serde_json::Value::Object(e.extra.clone()),
            "reason": e.message,
            "session": session.map(|t| t.to_string()),
        });
        let mut recent = crate::state::lock(&self.recent);
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(entry);
    }

    /// Records a sample of the totals if the last one is old enough, and
    /// returns the rates between consecutive samples: (seconds before now,
    /// events/s, refusals/s), oldest first.
    fn rates(&self, events: u64) -> Vec<(f64, f64, f64)> {
        let now = std::time::Instant::now();
        let refused = self.refused.load(Ordering::Relaxed);
        let mut samples = crate::state::lock(&self.samples);
        if samples.back().is_none_or(|&(t, _, _)| now.duration_since(t) >= SAMPLE_EVERY) {
            if samples.len() == SAMPLES {
                samples.pop_front();
            }
            samples.push_back((now, events, refused));
        }
        let v: Vec<_> = samples.iter().copied().collect();
        v.windows(2)
            .map(|w| {
                let ((t0, e0, r0), (t1, e1, r1)) = (w[0], w[1]);
                let dt = t1.duration_since(t0).as_secs_f64().max(1e-3);
                (
                    now.duration_since(t1).as_secs_f64(),
                    e1.saturating_sub(e0) as f64 / dt,
                    r1.saturating_sub(r0) as f64 / dt,
                )
            })
            .collect()
    }

    /// Adds what an ending session counted to the totals (`evicted`: its
    /// ring's evicted events and payload bytes).
    pub(crate) fn departed(&self, published: &Published, (evicted, evicted_bytes): (u64, u64)) {
        for i in 0..3 {
            let d = &self.departed.published;
            d.events[i].fetch_add(published.events[i].load(Ordering::Relaxed), Ordering::Relaxed);
            d.bytes[i].fetch_add(published.bytes[i].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.departed.evicted.fetch_add(evicted, Ordering::Relaxed);
        self.departed.evicted_bytes.fetch_add(evicted_bytes, Ordering::Relaxed);
    }

    /// Counts a socket closed with `code` (`None`: the peer left first).
    pub(crate) fn socket_closed(&self, code: Option<u16>) {
        self.socket_closes.get_or_create(&Code { code: code.unwrap_or(1005) }).inc();
    }

    /// The registry of every metric, with `state`'s sessions read at
    /// scrape time.
    pub(crate) fn registry(self: &Arc<Self>, state: Weak<AppState>) -> Registry {
        let mut r = Registry::with_prefix("gapless");
        r.register("sessions_created", "Sessions created", self.sessions_created.clone());
        r.register(
            "stateless_requests",
            "Requests of MCP 2026-07-28 served without a session",
            self.modern_requests.clone(),
        );
        r.register(
            "tasks_created",
            "Tasks created on this node (tasks extension)",
            self.tasks_created.clone(),
        );
        r.register(
            "tasks_refused",
            "Tasks this node did not create, by why: full (a bound) or unavailable (the store)",
            self.tasks_refused.clone(),
        );
        r.register(
            "tasks_ended",
            "Terminal statuses this node recorded (its work's outcome, a cancel, a dead node's task), by status",
            self.tasks_ended.clone(),
        );
        r.register(
            "sessions_deleted",
            "Sessions deleted by a DELETE on this node",
            self.sessions_deleted.clone(),
        );
        r.register("sessions_expired", "Sessions expired (idle timeout)", self.sessions_expired.clone());
        r.register(
            "sessions_refused",
            "initialize requests refused for lack of room, by reason (the refusal's kind)",
            self.sessions_refused.clone(),
        );
        r.register("refusals", "Refusals answered, by kind (docs/SPEC.md §4.2, §5)", self.refusals.clone());
        r.register(
            "resumes",
            "Resumes (GET with Last-Event-ID), by outcome: ok or the refusal's kind",
            self.resumes.clone(),
        );
        r.register(
            "migrations",
            "Migration upgrades (ticket requests), by outcome: ok (a ticket issued) or the refusal's kind",
            self.migrations.clone(),
        );
        r.register(
            "ticket_redeems",
            "WebSocket connections with a ticket, by outcome: ok (redeemed) or the refusal's kind",
            self.redeems.clone(),
        );
        r.register("sse_streams_open", "Open SSE responses", self.sse_open.clone());
        r.register("sockets_open", "Open WebSockets", self.sockets_open.clone());
        r.register(
            "socket_closes",
            "WebSocket closes by code (1005: the peer closed without a code or left)",
            self.socket_closes.clone(),
        );
        r.register(
            "paced_wait_seconds",
            "Paced publishes that waited for a lagging reader (docs/SPEC.md §2), by how long",
            self.paced_waits.clone(),
        );
        r.register(
            "replayed_events",
            "Events each granted resume (via=resume) or migration (via=socket) replayed before going live",
            self.replayed.clone(),
        );
        r.register_collector(Box::new(View { metrics: Arc::clone(self), state }));
        r
    }
}

/// The figures read from the sessions at scrape time.
#[derive(Debug)]
struct View {
    metrics: Arc<Metrics>,
    state: Weak<AppState>,
}

/// Bucket bounds of the fill-ratio histogram.
const FILL_BUCKETS: [f64; 7] = [0.1, 0.25, 0.5, 0.75, 0.9, 0.99, 1.0];
/// Bucket bounds of the delivery-lag histogram, in events.
const LAG_BUCKETS: [f64; 9] = [0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0];

fn encode<M: EncodeMetric>(
    encoder: &mut DescriptorEncoder,
    name: &str,
    help: &str,
    metric: &M,
) -> Result<(), std::fmt::Error> {
    let e = encoder.encode_descriptor(name, help, None, metric.metric_type())?;
    metric.encode(e)
}

/// One session's figures at one moment.
#[derive(Debug)]
struct SessionFigures {
    tag: SessionTag,
    /// The larger of events/capacity and bytes/byte budget, at most 1.
    fill: f64,
    oldest: u64,
    head: u64,
    held: u64,
    bytes: u64,
    /// Each open stream's lag (see [`stream_lag`]).
    lags: Vec<(u64, u64)>,
}

/// Everything read from the sessions at one moment, with what the ended
/// ones left.
#[derive(Debug, Default)]
struct Figures {
    sessions: Vec<SessionFigures>,
    events: [u64; 3],
    bytes: [u64; 3],
    evicted: u64,
    evicted_bytes: u64,
    tickets_expired: u64,
}

impl Figures {
    fn read(metrics: &Metrics, state: &AppState) -> Figures {
        let mut f = Figures::default();
        metrics.departed.published.add_to(&mut f.events, &mut f.bytes);
        f.evicted = metrics.departed.evicted.load(Ordering::Relaxed);
        f.evicted_bytes = metrics.departed.evicted_bytes.load(Ordering::Relaxed);
        f.tickets_expired = state.hub.tickets_expired();
        let ring = state.hub.config().ring;
        let conns: Vec<_> = crate::state::lock(&state.conns).values().cloned().collect();
        for c in &conns {
            c.published.add_to(&mut f.events, &mut f.bytes);
            let (events, bytes) = c.evicted();
            f.evicted += events;
            f.evicted_bytes += bytes;
            let r = c.session.reader();
            let (head, oldest) = (r.head().get(), r.oldest().get());
            let held = (head + 1).saturating_sub(oldest);
            let bytes = c.session.footprint() as u64;
            let by_events = held as f64 / ring.capacity.max(1) as f64;
            let by_bytes = bytes as f64 / ring.byte_budget.max(1) as f64;
            let lags = r.streams().iter().filter(|s| !s.ended).map(|s| (s.id.0, stream_lag(s))).collect();
            f.sessions.push(SessionFigures {
                tag: SessionTag::of_id(&c.session.id()),
                fill: by_events.max(by_bytes).min(1.0),
                oldest,
                head,
                held,
                bytes,
                lags,
            });
        }
        f
    }
}

/// Seqs from the first undelivered event of a stream to its newest (an
/// upper bound on its undelivered events).
fn stream_lag(s: &gapless::ring::StreamInfo) -> u64 {
    let undelivered_from = s.delivered.get().max(s.first.get().saturating_sub(1));
    s.high.get().saturating_sub(undelivered_from)
}

impl Collector for View {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let Some(state) = self.state.upgrade() else { return Ok(()) };
        let f = Figures::read(&self.metrics, &state);
        let (events, bytes, evicted) = (f.events, f.bytes, f.evicted);
        let (mut retained_events, mut retained_bytes) = (0u64, 0u64);
        let fill = Histogram::new(FILL_BUCKETS);
        let lag = Histogram::new(LAG_BUCKETS);
        for s in &f.sessions {
            retained_events += s.held;
            retained_bytes += s.bytes;
            fill.observe(s.fill);
            for &(_, l) in &s.lags {
                lag.observe(l as f64);
            }
        }
        let conns = &f.sessions;
        encode(
            &mut encoder,
            "sessions_live",
            "Sessions this node holds",
            &ConstGauge::new(conns.len() as i64),
        )?;
        encode(
            &mut encoder,
            "tasks_running",
            "Tasks whose work runs on this node (tasks extension)",
            &ConstGauge::new(state.tasks.running() as i64),
        )?;
        let published = Family::<Target, Counter>::default();
        let published_bytes = Family::<Target, Counter>::default();
        for (i, t) in TARGETS.iter().enumerate() {
            published.get_or_create(&Target { target: t }).inc_by(events[i]);
            published_bytes.get_or_create(&Target { target: t }).inc_by(bytes[i]);
        }
        encode(&mut encoder, "events_published", "Events published, by target", &published)?;
        encode(
            &mut encoder,
            "payload_bytes_published",
            "Payload bytes published, by target",
            &published_bytes,
        )?;
        encode(
            &mut encoder,
            "retained_events",
            "Events the rings hold",
            &ConstGauge::new(retained_events as i64),
        )?;
        encode(
            &mut encoder,
            "retained_bytes",
            "Bytes the rings keep alive (their memory budget's count)",
            &ConstGauge::new(retained_bytes as i64),
        )?;
        encode(
            &mut encoder,
            "evicted_events",
            "Events the rings evicted (window or budget)",
            &ConstCounter::new(evicted),
        )?;
        encode(
            &mut encoder,
            "evicted_bytes",
            "Payload bytes of the events the rings evicted",
            &ConstCounter::new(f.evicted_bytes),
        )?;
        encode(
            &mut encoder,
            "tickets_expired",
            "Migration tickets that expired unredeemed (in-process tickets; a cluster's expire in the store)",
            &ConstCounter::new(f.tickets_expired),
        )?;
        encode(
            &mut encoder,
            "ring_fill_ratio",
            "Each session's ring: the larger of events/capacity and bytes/byte budget (1: it evicts to take more)",
            &fill,
        )?;
        encode(
            &mut encoder,
            "delivery_lag_events",
            "Each open stream: seqs from its first undelivered event to its newest (an upper bound on its undelivered events)",
            &lag,
        )?;
        if let Some(c) = &state.cluster {
            store_figures(&mut encoder, &c.store.figures())?;
        }
        Ok(())
    }
}

/// The Redis store's figures, in cluster mode (`docs/SPEC.md` §9.1).
fn store_figures(
    encoder: &mut DescriptorEncoder,
    f: &gapless_redis::StoreFigures,
) -> Result<(), std::fmt::Error> {
    let requests = Family::<Outcome, Counter>::default();
    for (outcome, n) in
        [("ok", f.requests_ok), ("unavailable", f.requests_unavailable), ("failed", f.requests_failed)]
    {
        requests.get_or_create(&Outcome { outcome }).inc_by(n);
    }
    encode(
        encoder,
        "store_requests",
        "Requests this node sent the store (commands, script calls, pipelines), by outcome: ok, unavailable (no answer in time, or no connection), failed (an error answer)",
        &requests,
    )?;
    encode(
        encoder,
        "store_request_seconds",
        "Seconds this node's store requests took, in all (divided by their count: the mean)",
        &ConstCounter::new(f.request_seconds),
    )?;
    let durable = Family::<Outcome, Counter>::default();
    for (outcome, n) in [("ok", f.durable_acknowledged), ("unavailable", f.durable_unavailable)] {
        durable.get_or_create(&Outcome { outcome }).inc_by(n);
    }
    encode(
        encoder,
        "store_durable_writes",
        "Writes a failover must not lose (registrations, answers, orphan errors; docs/SPEC.md §8.6), by outcome: ok (a replica has it, or there is none to wait for) or unavailable (none acknowledged in time)",
        &durable,
    )
}

/// A short, opaque name of a session for logs and spans: 8 hex digits of
/// a keyed hash of its id (the key is random per process). The id itself
/// is a bearer secret and never appears in a log.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SessionTag(u32);

impl SessionTag {
    /// The tag of the session id `id` (as sent; need not be valid).
    pub(crate) fn of(id: &str) -> Self {
        use std::hash::BuildHasher;
        static KEY: std::sync::OnceLock<std::collections::hash_map::RandomState> = std::sync::OnceLock::new();
        SessionTag(KEY.get_or_init(Default::default).hash_one(id) as u32)
    }

    /// The tag of `id`.
    pub(crate) fn of_id(id: &gapless::SessionId) -> Self {
        Self::of(&id.to_string())
    }
}

impl std::fmt::Display for SessionTag {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:08x}", self.0)
    }
}

/// What the status page shows, as JSON.
fn status_json(metrics: &Metrics, state: &AppState) -> serde_json::Value {
    use serde_json::json;
    let mut f = Figures::read(metrics, state);
    let events: u64 = f.events.iter().sum();
    let rates = metrics.rates(events);
    let live = f.sessions.len();
    let (held, bytes) = f.sessions.iter().fold((0, 0), |(e, b), s| (e + s.held, b + s.bytes));
    f.sessions.sort_by(|a, b| b.fill.total_cmp(&a.fill).then(b.held.cmp(&a.held)));
    f.sessions.truncate(NEAREST);
    let sessions: Vec<_> = f
        .sessions
        .iter()
        .map(|s| {
            json!({
                "session": s.tag.to_string(),
                "fill": s.fill,
                "oldest": s.oldest,
                "head": s.head,
                "events": s.held,
                "bytes": s.bytes,
                "lags": s.lags.iter().map(|&(stream, lag)| json!({"stream": stream, "lag": lag})).collect::<Vec<_>>(),
            })
        })
        .collect();
    let refusals: Vec<_> = crate::state::lock(&metrics.recent).iter().rev().cloned().collect();
    json!({
        "counters": {
            "sessions_live": live,
            "sessions_created": metrics.sessions_created.get(),
            "sessions_deleted": metrics.sessions_deleted.get(),
            "sessions_expired": metrics.sessions_expired.get(),
            "sse_streams_open": metrics.sse_open.get(),
            "sockets_open": metrics.sockets_open.get(),
            "events_published": events,
            "payload_bytes_published": f.bytes.iter().sum::<u64>(),
            "retained_events": held,
            "retained_bytes": bytes,
            "evicted_events": f.evicted,
            "evicted_bytes": f.evicted_bytes,
            "tickets_expired": f.tickets_expired,
            "refusals": metrics.refused.load(Ordering::Relaxed),
        },
        "sessions": sessions,
        "refusals": refusals,
        "rates": rates.iter().map(|&(ago, e, r)| json!({"ago_s": ago, "events_per_s": e, "refusals_per_s": r})).collect::<Vec<_>>(),
    })
}

/// The status page: self-contained HTML (no external asset) that reads
/// `<path>/data.json` every 2 seconds and shows it, every value as text.
const STATUS_PAGE: &str = include_str!("status.html");

/// What [`status_router`] serves its routes from.
#[derive(Clone)]
pub(crate) struct StatusState {
    pub(crate) metrics: Arc<Metrics>,
    pub(crate) state: Weak<AppState>,
    pub(crate) access: Arc<ObserveAccess>,
}

/// `GET` of the status page. With a token, the page itself (static, no
/// figures) is served to anyone; its data is not.
pub(crate) async fn serve_status_page(State(s): State<StatusState>, req: Request) -> Response {
    if !matches!(*s.access, ObserveAccess::Token(_)) {
        let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
        if let Some(refused) = s.access.check(peer, req.headers()) {
            return refused;
        }
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET, HEAD")]).into_response();
    }
    let mut r = STATUS_PAGE.into_response();
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    // Nothing from elsewhere: no script, style, image or connection but
    // the page's own.
    h.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(
            "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
        ),
    );
    r
}

/// `GET` of the status page's data, behind the access check.
pub(crate) async fn serve_status_data(State(s): State<StatusState>, req: Request) -> Response {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    if let Some(refused) = s.access.check(peer, req.headers()) {
        return refused;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET, HEAD")]).into_response();
    }
    let Some(state) = s.state.upgrade() else {
        return StatusCode::SERVICE_UNAVAILABLE.into_response();
    };
    let mut r = axum::Json(status_json(&s.metrics, &state)).into_response();
    r.headers_mut().insert(header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    r
}

/// Which route a request came in on, for counting its outcome.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Counted {
    /// `P`: sessions, requests, resumes, DELETE.
    Endpoint,
    /// `P/session/{id}/upgrade`.
    Upgrade,
    /// `P/ws`.
    Socket,
    /// The legacy transport's routes.
    Legacy,
}

fn outcome(r: &Response) -> Option<&'static str> {
    match r.extensions().get::<ApiError>() {
        Some(e) => Some(e.kind.as_str()),
        None if r.status().is_success() || r.status() == StatusCode::SWITCHING_PROTOCOLS => Some("ok"),
        None => None,
    }
}

/// Kinds an `initialize` is refused with for lack of room.
const NO_ROOM: [gapless::ErrorKind; 5] = [
    gapless::ErrorKind::TooManySessions,
    gapless::ErrorKind::MemoryExhausted,
    gapless::ErrorKind::RateLimited,
    gapless::ErrorKind::ClientSessionLimit,
    gapless::ErrorKind::StoreUnavailable,
];

/// The layer on every route (outside the guard): counts each refusal by
/// kind, and what the request was by its outcome.
pub(crate) async fn count(
    State((metrics, route)): State<(Arc<Metrics>, Counted)>,
    req: Request,
    next: Next,
) -> Response {
    use tracing::Instrument as _;
    let method = req.method().clone();
    let resume = method == Method::GET && req.headers().contains_key("last-event-id");
    let session = req.headers().get(SESSION_HEADER).map(|v| SessionTag::of(v.to_str().unwrap_or("")));
    let sessionless = session.is_none();
    let span = match session {
        Some(tag) => tracing::info_span!("http", %method, route = ?route, session = %tag),
        None => tracing::info_span!("http", %method, route = ?route),
    };
    let r = next.run(req).instrument(span.clone()).await;
    let refusal = r.extensions().get::<ApiError>();
    if let Some(e) = refusal {
        metrics.refusal(e, session);
        // Once per refusal, with its numbers (never the session id: the
        // span has its tag).
        let numbers = serde_json::Value::Object(e.extra.clone());
        span.in_scope(|| {
            tracing::info!(kind = e.kind.as_str(), status = e.kind.http_status(), numbers = %numbers, reason = %e.message, "refused");
        });
    }
    let refusal = refusal.map(|e| e.kind);
    let Some(outcome) = outcome(&r) else { return r };
    if let Some(&Replayed(n)) = r.extensions().get::<Replayed>() {
        let via = if route == Counted::Socket { "socket" } else { "resume" };
        metrics.replayed.get_or_create(&Via { via }).observe(n as f64);
    }
    match route {
        Counted::Endpoint if resume => {
            metrics.resumes.get_or_create(&Outcome { outcome }).inc();
        }
        Counted::Endpoint if method == Method::POST && sessionless => {
            if r.headers().contains_key(SESSION_HEADER) {
                metrics.sessions_created.inc();
            } else if let Some(k) = refusal.filter(|k| NO_ROOM.contains(k)) {
                metrics.sessions_refused.get_or_create(&Reason { reason: k.as_str() }).inc();
            }
        }
        Counted::Endpoint if method == Method::DELETE && outcome == "ok" => {
            metrics.sessions_deleted.inc();
        }
        // The legacy transport: a GET of `/sse` without `sessionId` creates
        // a session (its handler marks the response); one with a cursor is
        // a resume.
        Counted::Legacy if method == Method::GET => {
            if resume {
                metrics.resumes.get_or_create(&Outcome { outcome }).inc();
            } else if r.extensions().get::<LegacyCreated>().is_some() {
                metrics.sessions_created.inc();
            } else if let Some(k) = refusal.filter(|k| NO_ROOM.contains(k)) {
                metrics.sessions_refused.get_or_create(&Reason { reason: k.as_str() }).inc();
            }
        }
        Counted::Upgrade if method == Method::POST => {
            metrics.migrations.get_or_create(&Outcome { outcome }).inc();
        }
        Counted::Socket => {
            metrics.redeems.get_or_create(&Outcome { outcome }).inc();
        }
        _ => {}
    }
    r
}

/// Who may read `/metrics` (and, later, `/status`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum ObserveAccess {
    /// Loopback clients only (the default); others get `403`.
    #[default]
    Loopback,
    /// Any client with `Authorization: Bearer <token>`; without it, or
    /// with another token, `401`.
    Token(String),
}

impl ObserveAccess {
    /// `None` when the request may read, else the refusal.
    fn check(&self, peer: Option<SocketAddr>, headers: &HeaderMap) -> Option<Response> {
        match self {
            ObserveAccess::Loopback => match peer {
                Some(p) if p.ip().is_loopback() => None,
                _ => Some(
                    (
                        StatusCode::FORBIDDEN,
                        "metrics are served to loopback clients only (configure a token)",
                    )
                        .into_response(),
                ),
            },
            ObserveAccess::Token(token) => {
                let given = headers
                    .get(header::AUTHORIZATION)
                    .and_then(|v| v.to_str().ok())
                    .and_then(|v| v.strip_prefix("Bearer "));
                if given.is_some_and(|g| constant_time_eq(g.as_bytes(), token.as_bytes())) {
                    return None;
                }
                let mut r = (StatusCode::UNAUTHORIZED, "a valid bearer token is required").into_response();
                r.headers_mut().insert(header::WWW_AUTHENTICATE, HeaderValue::from_static("Bearer"));
                Some(r)
            }
        }
    }
}

/// Compares without an early exit on the first differing byte.
fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |d, (x, y)| d | (x ^ y)) == 0
}

/// The OpenMetrics text of `registry`.
pub(crate) fn text(registry: &Registry) -> String {
    let mut out = String::new();
    prometheus_client::encoding::text::encode(&mut out, registry).expect("writing to a String cannot fail");
    out
}

/// `GET` of the metrics, behind `access`.
pub(crate) async fn serve_metrics(
    State((registry, access)): State<(Arc<Registry>, Arc<ObserveAccess>)>,
    req: Request,
) -> Response {
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    if let Some(refused) = access.check(peer, req.headers()) {
        return refused;
    }
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return (StatusCode::METHOD_NOT_ALLOWED, [(header::ALLOW, "GET, HEAD")]).into_response();
    }
    let mut r = text(&registry).into_response();
    r.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/openmetrics-text; version=1.0.0; charset=utf-8"),
    );
    r
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_only_by_default() {
        let h = HeaderMap::new();
        let local: SocketAddr = "127.0.0.1:9".parse().unwrap();
        let local6: SocketAddr = "[::1]:9".parse().unwrap();
        let remote: SocketAddr = "192.0.2.7:9".parse().unwrap();
        let a = ObserveAccess::Loopback;
        assert!(a.check(Some(local), &h).is_none());
        assert!(a.check(Some(local6), &h).is_none());
        assert_eq!(a.check(Some(remote), &h).unwrap().status(), StatusCode::FORBIDDEN);
        assert_eq!(a.check(None, &h).unwrap().status(), StatusCode::FORBIDDEN, "no peer address: refused");
    }

    #[test]
    fn a_token_admits_anyone_who_has_it_and_nobody_else() {
        let remote: SocketAddr = "192.0.2.7:9".parse().unwrap();
        let a = ObserveAccess::Token("s3cret".into());
        let with = |v: &str| {
            let mut h = HeaderMap::new();
            h.insert(header::AUTHORIZATION, HeaderValue::from_str(v).unwrap());
            h
        };
        assert!(a.check(Some(remote), &with("Bearer s3cret")).is_none());
        for bad in ["Bearer s3cre", "Bearer s3cret2", "Bearer S3CRET", "Basic s3cret", "s3cret"] {
            let r = a.check(Some(remote), &with(bad)).expect(bad);
            assert_eq!(r.status(), StatusCode::UNAUTHORIZED, "{bad}");
        }
        assert_eq!(a.check(Some(remote), &HeaderMap::new()).unwrap().status(), StatusCode::UNAUTHORIZED);
        let local: SocketAddr = "127.0.0.1:9".parse().unwrap();
        assert_eq!(
            a.check(Some(local), &HeaderMap::new()).unwrap().status(),
            StatusCode::UNAUTHORIZED,
            "with a token, loopback needs it too"
        );
    }

    #[test]
    fn session_tags_are_stable_short_and_not_the_id() {
        let id = gapless::SessionId::random();
        let (a, b) = (SessionTag::of_id(&id), SessionTag::of(&id.to_string()));
        assert_eq!(a, b);
        let shown = a.to_string();
        assert_eq!(shown.len(), 8);
        assert!(!id.to_string().contains(&shown), "the tag is no part of the id");
        assert_ne!(SessionTag::of("a"), SessionTag::of("b"));
    }

    #[test]
    fn publish_counts_add_up_by_target() {
        let p = Published::default();
        p.count(TargetKind::Request, 10);
        p.count(TargetKind::Request, 5);
        p.count(TargetKind::Socket, 7);
        let (mut e, mut b) = ([0; 3], [0; 3]);
        p.add_to(&mut e, &mut b);
        assert_eq!((e, b), ([2, 0, 1], [15, 0, 7]));
    }
}
