//! The live status page (`docs/SPEC.md` §9.3): one self-contained HTML
//! file, and its data as JSON (the same figures the metrics read, the
//! newest refusals, the rates, the sessions nearest to losing history),
//! behind the access check.

use super::access::ObserveAccess;
use super::metrics::Figures;
use crate::app::AppState;
use crate::telemetry::Metrics;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use std::net::SocketAddr;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Weak};

/// Sessions the status page lists (those nearest to losing history).
const NEAREST: usize = 20;

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
    let refusals: Vec<_> = crate::vocab::sync::lock(&metrics.recent).iter().rev().cloned().collect();
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

/// What `McpServer::status_router` serves its routes from.
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
