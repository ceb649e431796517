//! The layer on every route of the MCP router (outside the request
//! guard): each refusal counted by kind, logged once and kept for the
//! status page; each request counted by what it was and its outcome.

use crate::telemetry::{LegacyCreated, Metrics, Outcome, Reason, Replayed, Via, NO_ROOM};
use crate::vocab::error::ApiError;
use crate::vocab::headers::{LAST_EVENT_ID, SESSION_HEADER};
use crate::vocab::secret::SessionTag;
use axum::extract::{Request, State};
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use std::sync::Arc;

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

/// The layer on every route (outside the guard): counts each refusal by
/// kind, and what the request was by its outcome.
pub(crate) async fn count(
    State((metrics, route)): State<(Arc<Metrics>, Counted)>,
    req: Request,
    next: Next,
) -> Response {
    use tracing::Instrument as _;
    let method = req.method().clone();
    let resume = method == Method::GET && req.headers().contains_key(LAST_EVENT_ID);
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
