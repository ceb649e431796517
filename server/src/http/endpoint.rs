//! The Streamable HTTP endpoint (`docs/SPEC.md` §5): POST, GET, DELETE on
//! one path. The request guard (`guard.rs`) has run; this file turns
//! requests into sessions, streams and responses, and leaves what to do
//! with each JSON-RPC message to `dispatch.rs`.

use super::guard::{caller, read_body, session_header, Accepts, NewSession};
use super::sse::{Framing, SseBody};
use crate::app::AppState;
use crate::backend::{Feed, OpenError, Table as _};
use crate::dispatch;
use crate::modern::{self, Era};
use crate::session::fairness::ClientSlot;
use crate::session::{Claim, Lane, SessionState};
use crate::vocab::config::{negotiate, SUPPORTED_VERSIONS};
use crate::vocab::error::ApiError;
use crate::vocab::headers::{LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_HEADER};
use crate::vocab::jsonrpc::{self, classify, Incoming, RpcError};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use gapless::ring::SnapshotError;
use gapless::{ResumeRequest, Seq, StreamHandle};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::oneshot;

/// The single MCP endpoint.
pub(crate) async fn endpoint(State(state): State<Arc<AppState>>, req: Request) -> Response {
    let result = match *req.method() {
        Method::POST => post(state, req).await,
        Method::GET => get(state, req).await,
        // The guard let only POST, GET and DELETE through.
        _ => delete(state, req).await,
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

/// What the guard stored: `Accept` and the caller.
fn checked(req: &Request) -> (Accepts, Option<String>) {
    let acc = *req.extensions().get::<Accepts>().expect("the guard runs first");
    (acc, caller(req))
}

/// A channel's ends, each as an `Option` (for the `Reply` plumbing).
fn split<T>(
    (tx, rx): (oneshot::Sender<T>, oneshot::Receiver<T>),
) -> (Option<oneshot::Sender<T>>, Option<oneshot::Receiver<T>>) {
    (Some(tx), Some(rx))
}

fn rpc_error_response(status: StatusCode, e: RpcError) -> Response {
    (status, axum::Json(jsonrpc::response(&Value::Null, Err(e)))).into_response()
}

async fn post(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let (acc, owner) = checked(&req);
    let sid = session_header(req.headers()).map(str::to_owned);
    let slot = req.extensions().get::<NewSession>().and_then(|n| crate::vocab::sync::lock(&n.0).take());
    let mirrored = super::modern::Mirrored::of(req.headers());
    let peer = req.extensions().get::<axum::extract::ConnectInfo<std::net::SocketAddr>>().map(|c| c.0.ip());
    // The guard left the version header to here: which error an unknown
    // version gets depends on the era the body is of.
    let version_ok = super::guard::check_version(req.headers(), false);
    let body = read_body(&state, req.into_body()).await?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::malformed(format!("body is not JSON: {e}")))?;
    let msg = match classify(value) {
        Ok(m) => m,
        Err(e) => return Ok(rpc_error_response(StatusCode::BAD_REQUEST, e)),
    };
    if state.host.serves_sessionless() && modern::era(mirrored.version(), &msg) == Era::Modern {
        // No session: `Mcp-Session-Id` is ignored, none is created.
        drop(slot);
        return Ok(super::modern::post(state, mirrored, msg, acc, owner, peer).await);
    }
    version_ok?;
    if let Incoming::Request { method, .. } = &msg {
        if method == "initialize" && sid.is_none() {
            return initialize(state, msg, acc, owner, slot).await;
        }
    }
    let sid = sid.ok_or_else(ApiError::missing_session)?;
    let mut sess =
        state.sessions.find(&sid, owner.as_deref()).await?.ok_or_else(ApiError::unknown_session)?;
    if sess.session.is_migrated() {
        return Err(ApiError::session_migrated());
    }
    sess.hub.touch(&sess.session);
    match msg {
        Incoming::Notification { method, params } => {
            dispatch::handle_notification(&state, &sess, &method, &params);
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Incoming::Response { id, outcome } => {
            if !sess.deliver_response(&id, outcome.clone()) {
                // In a cluster the request may wait on another node.
                sess.store.respond_elsewhere(&sess.session, id, outcome).await;
            }
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Incoming::Request { id, method, params } => {
            let stream = match sess.open_stream().await {
                Err(OpenError::Stale) => {
                    // Drop the stale replica, follow the store afresh, retry.
                    state.sessions.remove(&sess.session.id());
                    sess = state
                        .sessions
                        .find(&sid, owner.as_deref())
                        .await?
                        .ok_or_else(ApiError::unknown_session)?;
                    sess.open_stream().await
                }
                other => other,
            }?;
            let (tx, rx) = if acc.sse { (None, None) } else { split(oneshot::channel()) };
            dispatch::start_request(
                &state,
                &sess,
                dispatch::RequestStream::Own(&stream),
                id,
                method,
                params,
                tx,
            )
            .await;
            respond_on_stream(sess, stream, acc, rx).await
        }
    }
}

/// Answers a request: SSE following its stream, or, for a client that
/// accepts only JSON, the response alone, taken from `reply`.
async fn respond_on_stream(
    sess: Arc<SessionState>,
    stream: StreamHandle,
    acc: Accepts,
    reply: Option<oneshot::Receiver<Value>>,
) -> Result<Response, ApiError> {
    match reply {
        Some(rx) if !acc.sse => json_response(sess, stream, rx).await,
        _ => {
            let (sub, attach) = subscribe_own(&sess, &stream)?;
            Ok(sse_response(sess, sub, stream, attach))
        }
    }
}

/// The SSE feed of a request's own stream from its first event, attached
/// to its lane. The first event is the priming event; if other publishes on
/// a small ring evicted it before this subscribed, the feed starts after it
/// (an empty event no client needs). Any other event of the stream evicted
/// already is the explicit 409 `gap_not_covered`, never an empty stream.
fn subscribe_own(sess: &Arc<SessionState>, stream: &StreamHandle) -> Result<(Feed, Claim), ApiError> {
    let first = stream.info().first;
    let sub = match sess.session.subscribe_stream(stream.id(), Seq(0)) {
        Err(SnapshotError::Evicted { .. }) if first.0 > 0 => {
            sess.session.subscribe_stream(stream.id(), first).map_err(ApiError::unread_gap)?
        }
        other => other.map_err(ApiError::unread_gap)?,
    };
    let attach = sess.attach(Lane::Stream(stream.id()), false).expect("non-exclusive attach");
    Ok((Feed::live(sub), attach))
}

/// The response of a JSON-only request, handed over by the handler
/// directly: its stream's events (the priming event, notifications) can
/// never reach this client, and however many it published, none can evict
/// the response first. Once written, the stream's events count as
/// delivered (they never will be), so that they hold up no migration.
async fn json_response(
    sess: Arc<SessionState>,
    stream: StreamHandle,
    reply: oneshot::Receiver<Value>,
) -> Result<Response, ApiError> {
    let Ok(msg) = reply.await else {
        // No response will come: the session ended, or the client cancelled
        // the request (MCP sends no response to a cancelled request).
        if sess.session.is_closed() {
            return Err(ApiError::unknown_session());
        }
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    sess.mark_all_delivered(&stream).await;
    let mut r = axum::Json(msg).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(r)
}

pub(super) fn sse_response(
    sess: Arc<SessionState>,
    sub: Feed,
    stream: StreamHandle,
    attach: Claim,
) -> Response {
    SseBody::new(sess, sub, stream.id(), attach, Framing::Streamable, None).into_response()
}

async fn initialize(
    state: Arc<AppState>,
    msg: Incoming,
    acc: Accepts,
    owner: Option<String>,
    slot: Option<ClientSlot>,
) -> Result<Response, ApiError> {
    let Incoming::Request { id, params, .. } = msg else { unreachable!("checked by caller") };
    let version =
        negotiate(params.get("protocolVersion").and_then(Value::as_str).unwrap_or(""), SUPPORTED_VERSIONS[0]);
    // In a cluster the store creates the session (any node may serve it
    // from now on); this node follows it from its first event.
    let sess = state.sessions.create(owner.as_deref(), version, slot, Some(params)).await?;
    let session = Arc::clone(&sess.session);
    let result = dispatch::initialize_result(&state, version);
    let sid = session.id().to_string();
    let stream = sess.open_stream().await?;
    let msg = jsonrpc::response(&id, Ok(result));
    sess.publish_now(&stream, None).await.map_err(|e| ApiError::send(&e))?;
    sess.publish_now(&stream, Some(&msg)).await.map_err(|e| ApiError::send(&e))?;
    let _ = sess.end_stream(&stream).await;
    let (tx, rx) = split(oneshot::channel());
    if let Some(tx) = tx {
        let _ = tx.send(msg);
    }
    // On a one-event ring the response has evicted the priming event: the
    // SSE feed then starts after it (`subscribe_own`).
    let mut r = respond_on_stream(sess, stream, acc, rx).await?;
    r.headers_mut().insert(SESSION_HEADER, HeaderValue::from_str(&sid).expect("hex id"));
    Ok(r)
}

/// Whether a GET or DELETE is of 2026-07-28 (answered 405).
fn of_modern(state: &AppState, req: &Request) -> bool {
    state.host.serves_sessionless()
        && super::guard::header(req.headers(), PROTOCOL_VERSION)
            .is_some_and(|v| crate::vocab::config::MODERN_VERSIONS.contains(&v.trim()))
}

async fn get(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    if of_modern(&state, &req) {
        return Err(ApiError::modern_post_only());
    }
    let (_, owner) = checked(&req);
    let h = req.headers();
    let sid = session_header(h);
    if let Some(cursor) = h.get(LAST_EVENT_ID) {
        // A resume (`docs/SPEC.md` §4.2), even with a non-UTF-8 cursor
        // (malformed).
        let cursor = cursor.to_str().unwrap_or("\u{0}");
        let req = ResumeRequest { session_id: sid, cursor: Some(cursor), owner: owner.as_deref() };
        let (sess, sub, stream, attach) = state.sessions.resume_lane(req).await?;
        let replayed = crate::telemetry::Replayed(sub.replay_len());
        let mut r = SseBody::new(sess, sub, stream, attach, Framing::Streamable, None).into_response();
        r.extensions_mut().insert(replayed);
        return Ok(r);
    }
    let sess = state.sessions.live(sid.ok_or_else(ApiError::missing_session)?, owner.as_deref()).await?;
    let (sub, stream, attach) = state.sessions.open_standalone(&sess, true).await?;
    Ok(SseBody::new(sess, sub, stream, attach, Framing::Streamable, None).into_response())
}

async fn delete(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    if of_modern(&state, &req) {
        return Err(ApiError::modern_post_only());
    }
    let (_, owner) = checked(&req);
    let sid = session_header(req.headers()).ok_or_else(ApiError::missing_session)?;
    state.sessions.delete(sid, owner.as_deref()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
