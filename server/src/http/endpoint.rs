//! The Streamable HTTP endpoint (`docs/SPEC.md` §5): POST, GET, DELETE on
//! one path. The request guard (`guard.rs`) has run; this file turns
//! requests into sessions, streams and responses, and leaves what to do
//! with each JSON-RPC message to `dispatch.rs`.

use super::guard::{caller, read_body, session_header, Accepts, NewSession};
use super::sse::{Feed, Framing, SseBody};
use crate::dispatch;
use crate::modern::{self, Era};
use crate::state::{AppState, Conn, Lane};
use crate::vocab::error::ApiError;
use crate::vocab::jsonrpc::{self, classify, Incoming, RpcError};
use axum::extract::{Request, State};
use axum::http::{header, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use gapless::ring::SnapshotError;
use gapless::{ErrorKind, ResumeRequest, Seq, StreamHandle, StreamId};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::oneshot;

use crate::vocab::config::{negotiate, SUPPORTED_VERSIONS};
use crate::vocab::headers::{LAST_EVENT_ID, PROTOCOL_VERSION, SESSION_HEADER};

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
    let mut conn = state.find_conn(&sid, owner.as_deref()).await?.ok_or_else(ApiError::unknown_session)?;
    if conn.session.is_migrated() {
        return Err(ApiError::session_migrated());
    }
    conn.hub.touch(&conn.session);
    match msg {
        Incoming::Notification { method, params } => {
            dispatch::handle_notification(&state, &conn, &method, &params);
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Incoming::Response { id, outcome } => {
            if !conn.deliver_response(&id, outcome.clone()) {
                // In a cluster the request may wait on another node.
                if let Some(c) = &conn.cluster {
                    let (result, error) = match outcome {
                        Ok(r) => (Some(r), None),
                        Err(e) => (None, Some(e)),
                    };
                    let sid = conn.session.id().to_string();
                    c.broadcast(&crate::cluster::BusMessage::Response { sid, id, result, error }).await;
                }
            }
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Incoming::Request { id, method, params } => {
            let stream = match conn.open_stream().await {
                Err(crate::vocab::error::SendError::Refused(r)) if r == crate::state::STALE => {
                    // Drop the stale replica, follow the store afresh, retry.
                    state.remove(&conn.session.id());
                    conn = state
                        .find_conn(&sid, owner.as_deref())
                        .await?
                        .ok_or_else(ApiError::unknown_session)?;
                    conn.open_stream().await
                }
                other => other,
            }
            .map_err(|e| ApiError::send(&e))?;
            let (tx, rx) = if acc.sse { (None, None) } else { split(oneshot::channel()) };
            dispatch::start_request(
                &state,
                &conn,
                dispatch::RequestStream::Own(&stream),
                id,
                method,
                params,
                tx,
            )
            .await;
            respond_on_stream(conn, stream, acc, rx).await
        }
    }
}

/// Answers a request: SSE following its stream, or, for a client that
/// accepts only JSON, the response alone, taken from `reply`.
async fn respond_on_stream(
    conn: Arc<Conn>,
    stream: StreamHandle,
    acc: Accepts,
    reply: Option<oneshot::Receiver<Value>>,
) -> Result<Response, ApiError> {
    match reply {
        Some(rx) if !acc.sse => json_response(conn, stream, rx).await,
        _ => {
            let (sub, attach) = subscribe_own(&conn, &stream)?;
            Ok(sse_response(conn, sub, stream, attach))
        }
    }
}

/// The SSE feed of a request's own stream from its first event, attached
/// to its lane. The first event is the priming event; if other publishes on
/// a small ring evicted it before this subscribed, the feed starts after it
/// (an empty event no client needs). Any other event of the stream evicted
/// already is the explicit 409 `gap_not_covered`, never an empty stream.
fn subscribe_own(conn: &Arc<Conn>, stream: &StreamHandle) -> Result<(Feed, Attached), ApiError> {
    let first = stream.info().first;
    let sub = match conn.session.subscribe_stream(stream.id(), Seq(0)) {
        Err(SnapshotError::Evicted { .. }) if first.0 > 0 => {
            conn.session.subscribe_stream(stream.id(), first).map_err(unread_gap)?
        }
        other => other.map_err(unread_gap)?,
    };
    let attach = conn.attach(Lane::Stream(stream.id()), false).expect("non-exclusive attach");
    Ok((Feed::live(sub), attach))
}

/// The response of a JSON-only request, handed over by the handler
/// directly: its stream's events (the priming event, notifications) can
/// never reach this client, and however many it published, none can evict
/// the response first. Once written, the stream's events count as
/// delivered (they never will be), so that they hold up no migration.
async fn json_response(
    conn: Arc<Conn>,
    stream: StreamHandle,
    reply: oneshot::Receiver<Value>,
) -> Result<Response, ApiError> {
    let Ok(msg) = reply.await else {
        // No response will come: the session ended, or the client cancelled
        // the request (MCP sends no response to a cancelled request).
        if conn.session.is_closed() {
            return Err(ApiError::unknown_session());
        }
        return Ok(StatusCode::ACCEPTED.into_response());
    };
    conn.mark_all_delivered(&stream).await;
    let mut r = axum::Json(msg).into_response();
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(r)
}

pub(super) fn sse_response(
    conn: Arc<Conn>,
    sub: Feed,
    stream: StreamHandle,
    attach: (u64, tokio_util::sync::CancellationToken),
) -> Response {
    SseBody::new(conn, sub, stream.id(), attach, Framing::Streamable, None).into_response()
}

async fn initialize(
    state: Arc<AppState>,
    msg: Incoming,
    acc: Accepts,
    owner: Option<String>,
    slot: Option<crate::fairness::ClientSlot>,
) -> Result<Response, ApiError> {
    let Incoming::Request { id, params, .. } = msg else { unreachable!("checked by caller") };
    let version =
        negotiate(params.get("protocolVersion").and_then(Value::as_str).unwrap_or(""), SUPPORTED_VERSIONS[0]);
    let (session, cluster) = match &state.cluster {
        None => (state.hub.create(owner.as_deref())?, None),
        Some(c) => {
            // The store creates the session (any node may serve it from
            // now on); this node follows it from its first event.
            let id = gapless::SessionId::random();
            let stored = c
                .store
                .create_versioned(id, owner.as_deref(), version)
                .await
                .map_err(|e| ApiError::store_unavailable(&e))?;
            let session = c.replica_of_new(&state.hub, id, stored.ns, owner.as_deref(), state.on_gone())?;
            (session, Some(Arc::clone(c)))
        }
    };
    let conn = Arc::new(Conn::new(&state, Arc::clone(&session), version.to_owned(), slot, cluster));
    conn.set_initialize_params(params);
    state.insert(Arc::clone(&conn));
    let result = dispatch::initialize_result(&state, version);
    let sid = session.id().to_string();
    let stream = conn.open_stream().await.map_err(|e| ApiError::send(&e))?;
    let msg = jsonrpc::response(&id, Ok(result));
    conn.publish_now(&stream, None).await.map_err(|e| ApiError::send(&e))?;
    conn.publish_now(&stream, Some(&msg)).await.map_err(|e| ApiError::send(&e))?;
    let _ = conn.end_stream(&stream).await;
    let (tx, rx) = split(oneshot::channel());
    if let Some(tx) = tx {
        let _ = tx.send(msg);
    }
    // On a one-event ring the response has evicted the priming event: the
    // SSE feed then starts after it (`subscribe_own`).
    let mut r = respond_on_stream(conn, stream, acc, rx).await?;
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
        let (conn, sub, stream, attach) = resume_lane(&state, sid, cursor, owner.as_deref()).await?;
        let replayed = crate::telemetry::Replayed(sub.replay_len());
        let mut r = SseBody::new(conn, sub, stream, attach, Framing::Streamable, None).into_response();
        r.extensions_mut().insert(replayed);
        return Ok(r);
    }
    let conn = live_conn(&state, sid.ok_or_else(ApiError::missing_session)?, owner.as_deref()).await?;
    let (sub, stream, attach) = open_standalone(&conn, true).await?;
    Ok(SseBody::new(conn, sub, stream, attach, Framing::Streamable, None).into_response())
}

/// The transport state of a live session visible to `owner`; refused if it
/// migrated to a WebSocket.
pub(super) async fn live_conn(
    state: &Arc<AppState>,
    sid: &str,
    owner: Option<&str>,
) -> Result<Arc<Conn>, ApiError> {
    let conn = state.find_conn(sid, owner).await?.ok_or_else(ApiError::unknown_session)?;
    if conn.session.is_migrated() {
        return Err(ApiError::session_migrated());
    }
    Ok(conn)
}

/// A connection's claim on a lane: its generation and the token that ends it.
pub(super) type Attached = (u64, tokio_util::sync::CancellationToken);

/// A resume of the cursor's stream per the decision table, taking over an
/// older connection of that stream.
pub(super) async fn resume_lane(
    state: &Arc<AppState>,
    sid: Option<&str>,
    cursor: &str,
    owner: Option<&str>,
) -> Result<(Arc<Conn>, Feed, StreamId, Attached), ApiError> {
    let req = ResumeRequest { session_id: sid, cursor: Some(cursor), owner };
    if state.cluster.is_some() {
        return crate::http::cluster::resume_lane(state, req).await;
    }
    let resume = state.hub.resume_stream(req)?;
    let conn = live_conn(state, sid.unwrap_or_default(), owner).await?;
    let stream = resume.stream.expect("stream resume");
    let attach = conn.attach(Lane::Stream(stream), false).expect("non-exclusive attach");
    Ok((conn, Feed::live(resume.into_subscription()), stream, attach))
}

/// The standalone stream from its first undelivered event (kept in the ring
/// while no connection was open), one connection at a time (else 409
/// `stream_busy`). With `prime`, a priming event comes first when there is
/// no such backlog.
pub(super) async fn open_standalone(
    conn: &Arc<Conn>,
    prime: bool,
) -> Result<(Feed, StreamId, Attached), ApiError> {
    if conn.cluster.is_some() {
        return crate::http::cluster::open_standalone(conn, prime).await;
    }
    let standalone = conn.session.standalone().clone();
    let lane = Lane::Stream(standalone.id());
    let attach = conn.attach(lane, true).ok_or_else(ApiError::stream_busy)?;
    let info = standalone.info();
    if prime && info.high <= info.delivered {
        let _ = conn.publish_now(&standalone, None).await;
    }
    match conn.session.subscribe_stream(standalone.id(), info.delivered) {
        Ok(sub) => Ok((Feed::live(sub), standalone.id(), attach)),
        Err(e) => {
            conn.detach(lane, attach.0);
            Err(unread_gap(e))
        }
    }
}

/// The refusal of a stream whose events were (partly) evicted before any
/// connection was open to read them: the standalone stream's undelivered
/// backlog, or a request stream's first events.
pub(super) fn unread_gap(e: SnapshotError) -> ApiError {
    match e {
        SnapshotError::Evicted { wanted, oldest, missing } => ApiError::new(
            ErrorKind::GapNotCovered,
            format!("{missing} event(s) of the stream from seq {wanted} were evicted before any connection was open"),
        )
        .with("cursor", Value::Null)
        .with("oldest", json!(oldest.get()))
        .with("missing", json!(missing.count())),
        _ => ApiError::unknown_session(),
    }
}

async fn delete(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    if of_modern(&state, &req) {
        return Err(ApiError::modern_post_only());
    }
    let (_, owner) = checked(&req);
    let sid = session_header(req.headers()).ok_or_else(ApiError::missing_session)?;
    if let Some(c) = &state.cluster {
        // The store's session goes; every node following it drops its
        // replica when its follower reads that.
        let id = gapless::SessionId::parse(sid).ok_or_else(ApiError::unknown_session)?;
        let deleted =
            c.store.delete(&id, owner.as_deref()).await.map_err(|e| ApiError::store_unavailable(&e))?;
        if !deleted {
            return Err(ApiError::unknown_session());
        }
        state.remove(&id);
        return Ok(StatusCode::NO_CONTENT.into_response());
    }
    let conn = state.conn(sid, owner.as_deref()).ok_or_else(ApiError::unknown_session)?;
    state.remove(&conn.session.id());
    Ok(StatusCode::NO_CONTENT.into_response())
}

#[cfg(test)]
mod tests {
    use super::unread_gap;
    use gapless::ring::SnapshotError;
    use gapless::{Missing, Seq, StreamId};
    use serde_json::json;

    /// A standalone backlog evicted before any GET was open is refused with
    /// the gap's numbers (no cursor: the client named none).
    #[test]
    fn an_evicted_standalone_backlog_is_gap_not_covered() {
        let e = unread_gap(SnapshotError::Evicted {
            wanted: Seq(3),
            oldest: Seq(10),
            missing: Missing::AtLeast(2),
        });
        assert_eq!(e.status().as_u16(), 409);
        let b = e.body();
        assert_eq!(
            (&b["error"], &b["cursor"], &b["oldest"], &b["missing"]),
            (&json!("gap_not_covered"), &json!(null), &json!(10), &json!(2))
        );
        // The standalone stream's record is never reclaimed while its
        // session lives: not finding it means the session is gone.
        let e = unread_gap(SnapshotError::UnknownStream { stream: StreamId(1) });
        assert_eq!((e.status().as_u16(), &e.body()["error"]), (404, &json!("unknown_session")));
    }
}
