//! The metrics as Prometheus serves them (`docs/SPEC.md` §9.1): the
//! registry of every counter (`telemetry/`), the figures read from the
//! sessions at scrape time ([`View`]: live sessions, retained events and
//! bytes, each ring's fill ratio, evictions, each open stream's delivery
//! lag, the events and payload bytes published by target, the store's
//! requests in cluster mode), in the OpenMetrics text format, behind the
//! access check.

use super::access::ObserveAccess;
use crate::app::AppState;
use crate::backend::StoreFigures;
use crate::telemetry::{Metrics, Outcome, Target, TARGETS};
use crate::vocab::secret::SessionTag;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeMetric};
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::ConstGauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::Registry;
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// The registry of every metric, with `state`'s sessions read at scrape
/// time.
pub(crate) fn registry(metrics: &Arc<Metrics>, state: Weak<AppState>) -> Registry {
    let mut r = Registry::with_prefix("gapless");
    r.register("sessions_created", "Sessions created", metrics.sessions_created.clone());
    r.register(
        "stateless_requests",
        "Requests of MCP 2026-07-28 served without a session",
        metrics.sessionless_requests.clone(),
    );
    r.register(
        "tasks_created",
        "Tasks created on this node (tasks extension)",
        metrics.tasks_created.clone(),
    );
    r.register(
        "tasks_refused",
        "Tasks this node did not create, by why: full (a bound) or unavailable (the store)",
        metrics.tasks_refused.clone(),
    );
    r.register(
        "tasks_ended",
        "Terminal statuses this node recorded (its work's outcome, a cancel, a dead node's task), by status",
        metrics.tasks_ended.clone(),
    );
    r.register(
        "sessions_deleted",
        "Sessions deleted by a DELETE on this node",
        metrics.sessions_deleted.clone(),
    );
    r.register("sessions_expired", "Sessions expired (idle timeout)", metrics.sessions_expired.clone());
    r.register(
        "sessions_refused",
        "initialize requests refused for lack of room, by reason (the refusal's kind)",
        metrics.sessions_refused.clone(),
    );
    r.register("refusals", "Refusals answered, by kind (docs/SPEC.md §4.2, §5)", metrics.refusals.clone());
    r.register(
        "resumes",
        "Resumes (GET with Last-Event-ID), by outcome: ok or the refusal's kind",
        metrics.resumes.clone(),
    );
    r.register(
        "migrations",
        "Migration upgrades (ticket requests), by outcome: ok (a ticket issued) or the refusal's kind",
        metrics.migrations.clone(),
    );
    r.register(
        "ticket_redeems",
        "WebSocket connections with a ticket, by outcome: ok (redeemed) or the refusal's kind",
        metrics.redeems.clone(),
    );
    r.register("sse_streams_open", "Open SSE responses", metrics.sse_open.clone());
    r.register("sockets_open", "Open WebSockets", metrics.sockets_open.clone());
    r.register(
        "socket_closes",
        "WebSocket closes by code (1005: the peer closed without a code or left)",
        metrics.socket_closes.clone(),
    );
    r.register(
        "paced_wait_seconds",
        "Paced publishes that waited for a lagging reader (docs/SPEC.md §2), by how long",
        metrics.paced_waits.clone(),
    );
    r.register(
        "replayed_events",
        "Events each granted resume (via=resume) or migration (via=socket) replayed before going live",
        metrics.replayed.clone(),
    );
    r.register_collector(Box::new(View { metrics: Arc::clone(metrics), state }));
    r
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
pub(crate) struct SessionFigures {
    pub(crate) tag: SessionTag,
    /// The larger of events/capacity and bytes/byte budget, at most 1.
    pub(crate) fill: f64,
    pub(crate) oldest: u64,
    pub(crate) head: u64,
    pub(crate) held: u64,
    pub(crate) bytes: u64,
    /// Each open stream's lag (see [`stream_lag`]).
    pub(crate) lags: Vec<(u64, u64)>,
}

/// Everything read from the sessions at one moment, with what the ended
/// ones left.
#[derive(Debug, Default)]
pub(crate) struct Figures {
    pub(crate) sessions: Vec<SessionFigures>,
    pub(crate) events: [u64; 3],
    pub(crate) bytes: [u64; 3],
    pub(crate) evicted: u64,
    pub(crate) evicted_bytes: u64,
    pub(crate) tickets_expired: u64,
}

impl Figures {
    pub(crate) fn read(metrics: &Metrics, state: &AppState) -> Figures {
        let mut f = Figures::default();
        metrics.departed.published.add_to(&mut f.events, &mut f.bytes);
        f.evicted = metrics.departed.evicted.load(Ordering::Relaxed);
        f.evicted_bytes = metrics.departed.evicted_bytes.load(Ordering::Relaxed);
        f.tickets_expired = state.sessions.shared.hub.tickets_expired();
        let ring = state.sessions.shared.hub.config().ring;
        let states = state.sessions.all();
        for c in &states {
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
        let states = &f.sessions;
        encode(
            &mut encoder,
            "sessions_live",
            "Sessions this node holds",
            &ConstGauge::new(states.len() as i64),
        )?;
        encode(
            &mut encoder,
            "tasks_running",
            "Tasks whose work runs on this node (tasks extension)",
            &ConstGauge::new(state.protocol.tasks.running() as i64),
        )?;
        encode(
            &mut encoder,
            "task_event_bytes",
            "Bytes the tasks' event streams (tasks/stream) hold on this node",
            &ConstGauge::new(state.protocol.tasks.events_footprint() as i64),
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
        if let Some(figures) = state.sessions.backend.store_figures() {
            store_figures(&mut encoder, &figures)?;
        }
        Ok(())
    }
}

/// The Redis store's figures, in cluster mode (`docs/SPEC.md` §9.1).
fn store_figures(encoder: &mut DescriptorEncoder, f: &StoreFigures) -> Result<(), std::fmt::Error> {
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
