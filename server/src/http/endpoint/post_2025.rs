//! A POST of a session of the 2025 revisions: `initialize` creates the
//! session; any other message names it (`Mcp-Session-Id`). A request is
//! answered on its own stream, as SSE (its priming event, its
//! notifications, its response) or, for a client that accepts only JSON,
//! the response alone.

use crate::app::AppState;
use crate::backend::{Feed, OpenError, Table as _};
use crate::host::{InitializeError, SessionHandle};
use crate::http::guard::Accepts;
use crate::http::sse::{Framing, SseBody};
use crate::protocol::builtin;
use crate::protocol::dispatch_2025::{handle_notification, start_request, Call, RequestStream};
use crate::session::fairness::ClientSlot;
use crate::session::{Claim, Lane, SessionState};
use crate::vocab::config::SUPPORTED_VERSIONS;
use crate::vocab::error::ApiError;
use crate::vocab::headers::SESSION_HEADER;
use crate::vocab::jsonrpc::{self, Incoming};
use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use gapless::ring::SnapshotError;
use gapless::{Seq, StreamHandle};
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::oneshot;

/// A message of a session: `msg`, for session `sid` (none: an
/// `initialize`), from `owner`, whose `initialize` holds the client's place
/// `slot`.
pub(super) async fn post(
    state: Arc<AppState>,
    msg: Incoming,
    sid: Option<String>,
    acc: Accepts,
    owner: Option<String>,
    slot: Option<ClientSlot>,
    headers: Option<Arc<http::HeaderMap>>,
) -> Result<Response, ApiError> {
    if let Incoming::Request { method, .. } = &msg {
        if method == "initialize" && sid.is_none() {
            return initialize(state, msg, acc, (owner, slot), headers).await;
        }
    }
    let sid = sid.ok_or_else(ApiError::missing_session)?;
    let mut sess = state.sessions.live(&sid, owner.as_deref()).await?;
    sess.hub.touch(&sess.session);
    match msg {
        Incoming::Notification { method, params } => {
            handle_notification(&state.protocol, &sess, &method, &params);
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
            let call = Call { id, method, params, headers };
            start_request(&state.protocol, &sess, RequestStream::Own(&stream), call, tx).await;
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

pub(crate) fn sse_response(
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
    (owner, slot): (Option<String>, Option<ClientSlot>),
    headers: Option<Arc<http::HeaderMap>>,
) -> Result<Response, ApiError> {
    let Incoming::Request { id, params, .. } = msg else { unreachable!("checked by caller") };
    let version = builtin::initialize_version(&params);
    // In a cluster the store creates the session (any node may serve it
    // from now on); this node follows it from its first event.
    let sess = state.sessions.create(owner.as_deref(), version, slot, Some(params)).await?;
    let session = Arc::clone(&sess.session);
    let handle = SessionHandle { sess: Arc::clone(&sess) };
    let empty = http::HeaderMap::new();
    let asked =
        state.protocol.host.initialize(&params_of(&sess), &handle, headers.as_deref().unwrap_or(&empty));
    let result = match asked {
        None => builtin::initialize_result(&*state.protocol.host, version),
        Some(answer) => match answer.await {
            Ok(result) => {
                match result.get("protocolVersion").and_then(Value::as_str) {
                    Some(v) if SUPPORTED_VERSIONS.contains(&v) => sess.set_protocol_version(v),
                    _ => {}
                }
                result
            }
            Err(InitializeError::Rpc(e)) => {
                handle.end();
                return Ok(axum::Json(jsonrpc::response(&id, Err(e))).into_response());
            }
            Err(InitializeError::Http(r)) => {
                handle.end();
                return Ok(r.map(axum::body::Body::from));
            }
        },
    };
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

/// The params of the session's `initialize`, as the session keeps them.
fn params_of(sess: &SessionState) -> Value {
    sess.initialize_params().unwrap_or(Value::Null)
}

/// A channel's ends, each as an `Option` (for the `Reply` plumbing).
fn split<T>(
    (tx, rx): (oneshot::Sender<T>, oneshot::Receiver<T>),
) -> (Option<oneshot::Sender<T>>, Option<oneshot::Receiver<T>>) {
    (Some(tx), Some(rx))
}
