//! WebSocket migration (SPEC §4.3, seed 000): the upgrade check that issues
//! a ticket pinning the gap, and the socket that replays it and then
//! carries the whole session.
//!
//! The client names its own processed cursor in the upgrade request's body;
//! headers are never used as a cursor. A frame counts as delivered once its
//! send (feed and flush) completed, and delivery is recorded per stream.

use crate::error::ApiError;
use crate::jsonrpc::{classify, Incoming};
use crate::routes::{check_request, handle_notification, start_request};
use crate::state::{AppState, Conn};

use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade};
use axum::extract::{FromRequestParts, Path, Query, Request, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use futures_util::{SinkExt, StreamExt};
use gapless::{Event, Next, StreamId, Subscription};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::Arc;

/// The key under which the session's socket is registered among its
/// connections (stream ids start at 1).
const SOCKET: StreamId = StreamId(0);
/// Most frames sent before one flush.
const BATCH: usize = 64;

/// Close codes (SPEC §5).
mod close {
    pub(super) const SESSION_ENDED: u16 = 1000;
    pub(super) const SHUTTING_DOWN: u16 = 1001;
    pub(super) const FELL_BEHIND: u16 = 4409;
    pub(super) const BAD_FRAME: u16 = 4400;
}

/// `POST P/session/{id}/upgrade` with `{"cursor": "<event id>" | null}`.
pub(crate) async fn upgrade(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    upgrade_inner(state, id, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn upgrade_inner(state: Arc<AppState>, id: String, req: Request) -> Result<Response, ApiError> {
    if req.method() != axum::http::Method::POST {
        return Err(ApiError::method_not_allowed("POST"));
    }
    let h = req.headers().clone();
    check_request(&state, &h)?;
    let ct = h.get(header::CONTENT_TYPE).and_then(|v| v.to_str().ok()).unwrap_or("");
    if !ct.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "upgrade bodies must be application/json",
        ));
    }
    let limit = state.config.max_body_bytes;
    let body = axum::body::to_bytes(req.into_body(), limit).await.map_err(|_| {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body over {limit} bytes"),
        )
    })?;
    let cursor = parse_upgrade_body(&body)?;
    let owner = state.identity.as_ref().and_then(|f| f(&h));
    let req =
        gapless::ResumeRequest { session_id: Some(&id), cursor: cursor.as_deref(), owner: owner.as_deref() };
    let issued = state.hub.migrate(req).map_err(|e| match e {
        gapless::session::MigrateError::Refused(r) => ApiError::from(r),
        gapless::session::MigrateError::Ticket(t) => ApiError::from(t),
    })?;
    // Issuing a ticket ends the session's SSE streams: from now on events
    // wait in the ring for the socket.
    if let Some(conn) = state.conn(&issued.session.id().to_string(), owner.as_deref()) {
        conn.end_all_sse_streams();
    }
    let ticket = issued.ticket.to_string();
    Ok(axum::Json(json!({
        "ticket": ticket,
        "websocket": format!("{}/ws?ticket={ticket}", state.path),
        "replay_from": issued.replay_from.map(|e| e.to_string()),
        "replay_count": issued.replay_count,
    }))
    .into_response())
}

/// The upgrade body: an object with exactly the key `cursor`, a string or
/// null. Anything else is `malformed_request`.
pub fn parse_upgrade_body(body: &[u8]) -> Result<Option<String>, ApiError> {
    let v: Value =
        serde_json::from_slice(body).map_err(|e| ApiError::malformed(format!("body is not JSON: {e}")))?;
    let Value::Object(m) = v else {
        return Err(ApiError::malformed("the upgrade body must be an object {\"cursor\": ...}"));
    };
    if m.len() != 1 {
        return Err(ApiError::malformed("the upgrade body must have exactly one field, \"cursor\""));
    }
    match m.get("cursor") {
        Some(Value::String(s)) => Ok(Some(s.clone())),
        Some(Value::Null) => Ok(None),
        Some(_) => Err(ApiError::malformed("\"cursor\" must be an event id string or null")),
        None => Err(ApiError::malformed("missing \"cursor\"")),
    }
}

/// `GET P/ws?ticket=T`: refuses bad tickets before upgrading.
pub(crate) async fn socket(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    let (mut parts, _body) = req.into_parts();
    if let Err(e) = check_request(&state, &parts.headers) {
        return e.into_response();
    }
    let owner = state.identity.as_ref().and_then(|f| f(&parts.headers));
    let Some(ticket) = q.get("ticket").filter(|t| gapless::session::Ticket::parse(t).is_some()) else {
        return ApiError::new(StatusCode::FORBIDDEN, "ticket_invalid", "missing or malformed ?ticket=")
            .into_response();
    };
    let upgrade = match WebSocketUpgrade::from_request_parts(&mut parts, &state).await {
        Ok(u) => u,
        Err(rej) => {
            return ApiError::new(
                StatusCode::BAD_REQUEST,
                "malformed_request",
                format!("not a WebSocket handshake: {rej}"),
            )
            .into_response()
        }
    };
    let migration = match state.hub.redeem(ticket, None, owner.as_deref()) {
        Ok(m) => m,
        Err(e) => return ApiError::from(e).into_response(),
    };
    let Some(conn) = state.conn(&migration.session.id().to_string(), owner.as_deref()) else {
        return ApiError::unknown_session().into_response();
    };
    let shutdown = state.shutdown.clone();
    let max = state.config.max_body_bytes;
    upgrade.max_message_size(max).max_frame_size(max).on_upgrade(move |ws| async move {
        // Attach: the session is migrated, its SSE streams end, a previous
        // socket is replaced.
        conn.session.set_migrated();
        conn.end_all_sse_streams();
        let attach = conn.attach(SOCKET, false).expect("non-exclusive attach");
        let sub = migration.into_subscription();
        run_socket(state, conn, ws, sub, attach, shutdown).await;
    })
}

fn close_frame(code: u16, reason: String) -> Message {
    Message::Close(Some(CloseFrame { code, reason: reason.into() }))
}

/// Close 4409 before any hole is sent; plain seqs fit the 123-byte reason.
fn fell_behind(lag: gapless::Lagged) -> Message {
    let reason = format!(
        "{{\"error\":\"gap_not_covered\",\"next\":{},\"oldest\":{}}}",
        lag.wanted.get(),
        lag.oldest.get()
    );
    close_frame(close::FELL_BEHIND, reason)
}

fn encode(conn: &Conn, e: &Event) -> Message {
    let id = conn.session.event_id(e.stream, e.seq).to_string();
    let text = if e.payload.is_empty() {
        format!("{{\"id\":\"{id}\",\"message\":null}}")
    } else {
        let payload = std::str::from_utf8(&e.payload).expect("events are JSON text");
        format!("{{\"id\":\"{id}\",\"message\":{payload}}}")
    };
    Message::Text(text.into())
}

async fn run_socket(
    state: Arc<AppState>,
    conn: Arc<Conn>,
    ws: WebSocket,
    mut sub: Subscription,
    attach: (u64, tokio_util::sync::CancellationToken),
    shutdown: tokio_util::sync::CancellationToken,
) {
    let _guard = conn.hub.connect(&conn.session);
    let (mut tx, mut rx) = ws.split();
    let (gen, ended) = attach;
    let closing: Option<Message> = loop {
        tokio::select! {
            item = sub.recv() => match item {
                Some(Ok(first)) => {
                    let mut batch = vec![first];
                    let mut after: Option<Result<(), gapless::Lagged>> = None;
                    while batch.len() < BATCH {
                        match sub.try_recv() {
                            Ok(Next::Event(e)) => batch.push(e),
                            Ok(Next::Pending) => break,
                            Ok(Next::End) => {
                                after = Some(Ok(()));
                                break;
                            }
                            Err(lag) => {
                                after = Some(Err(lag));
                                break;
                            }
                        }
                    }
                    let mut ok = true;
                    for e in &batch {
                        if tx.feed(encode(&conn, e)).await.is_err() {
                            ok = false;
                            break;
                        }
                    }
                    if !ok || tx.flush().await.is_err() {
                        break None; // the peer is gone; nothing counts as delivered
                    }
                    let reader = conn.session.reader();
                    for e in &batch {
                        reader.mark_delivered(e);
                    }
                    match after {
                        Some(Err(lag)) => break Some(fell_behind(lag)),
                        Some(Ok(())) => break Some(close_frame(close::SESSION_ENDED, "session ended".into())),
                        None => {}
                    }
                }
                Some(Err(lag)) => break Some(fell_behind(lag)),
                None => break Some(close_frame(close::SESSION_ENDED, "session ended".into())),
            },
            frame = rx.next() => match frame {
                Some(Ok(Message::Text(t))) => {
                    if let Err(reason) = handle_frame(&state, &conn, t.as_bytes()) {
                        break Some(close_frame(close::BAD_FRAME, reason));
                    }
                }
                Some(Ok(Message::Binary(_))) => break Some(close_frame(close::BAD_FRAME, "binary frames are not accepted".into())),
                Some(Ok(Message::Ping(_) | Message::Pong(_))) => {}
                Some(Ok(Message::Close(_))) | None => break None,
                Some(Err(e)) => {
                    let reason: String = format!("bad frame: {e}").chars().take(100).collect();
                    break Some(close_frame(close::BAD_FRAME, reason));
                }
            },
            // The connection token is a child of the server's: tell apart.
            _ = ended.cancelled() => break Some(if shutdown.is_cancelled() {
                close_frame(close::SHUTTING_DOWN, "server shutting down".into())
            } else {
                close_frame(close::SESSION_ENDED, "replaced or session ended".into())
            }),
        }
    };
    if let Some(frame) = closing {
        let _ = tx.send(frame).await;
    }
    let _ = tx.close().await;
    conn.detach(SOCKET, gen);
}

/// A client → server frame: `{"message": <JSON-RPC>}` or `{"ack": "<id>"}`.
fn handle_frame(state: &AppState, conn: &Arc<Conn>, text: &[u8]) -> Result<(), String> {
    let v: Value = serde_json::from_slice(text).map_err(|_| "frame is not JSON".to_owned())?;
    let Value::Object(mut m) = v else { return Err("frame must be a JSON object".into()) };
    if m.len() != 1 {
        return Err("frame must have exactly one of \"message\" or \"ack\"".into());
    }
    if let Some(ack) = m.remove("ack") {
        return match ack.as_str().map(gapless::EventId::parse) {
            Some(Ok(id)) if id.ns == conn.session.namespace() => Ok(()),
            _ => Err("\"ack\" must be an event id of this session".into()),
        };
    }
    let msg = m.remove("message").ok_or("frame must have \"message\" or \"ack\"")?;
    match classify(msg)
        .map_err(|e| format!("invalid JSON-RPC: {}", e.message).chars().take(100).collect::<String>())?
    {
        Incoming::Request { id, method, params } => {
            let stream = conn.session.open_stream().map_err(|_| "session closed".to_owned())?;
            start_request(state, conn, &stream, id, method, params);
        }
        Incoming::Notification { method, params } => handle_notification(state, conn, &method, &params),
        Incoming::Response { id, outcome } => {
            conn.deliver_response(&id, outcome);
        }
    }
    Ok(())
}
