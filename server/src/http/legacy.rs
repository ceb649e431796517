//! The legacy HTTP+SSE transport (protocol 2024-11-05) on the same ring:
//! `GET P/sse` opens a session and its event stream, `POST
//! P/messages?sessionId=<id>` carries the client's messages (`docs/SPEC.md`
//! §5.3).
//!
//! The legacy stream is the session's standalone stream: every response
//! and notification of a legacy session is an event of it, with an event id
//! in the session's namespace. So one cursor addresses one buffer whichever
//! transport presents it: a legacy reconnect (`GET P/sse?sessionId=<id>`
//! with `Last-Event-ID`) and a Streamable HTTP resume (`GET P` with
//! `Mcp-Session-Id` and `Last-Event-ID`) resume the same stream, per the
//! decision table, and a cursor without a session id is refused as ever.

use super::guard::{caller, read_body, NewSession};
use super::sse::{Framing, SseBody};
use crate::app::AppState;
use crate::backend::Table as _;
use crate::host::{InitializeError, SessionHandle};
use crate::protocol::builtin;
use crate::protocol::dispatch_2025::{handle_notification, start_request, Call, RequestStream};
use crate::session::SessionState;
use crate::vocab::config::{LEGACY_VERSION, SUPPORTED_VERSIONS};
use crate::vocab::error::ApiError;
use crate::vocab::headers::LAST_EVENT_ID;
use crate::vocab::jsonrpc::{self, classify, Incoming};
use crate::vocab::sync::lock;
use axum::extract::{OriginalUri, Query, Request, State};
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use gapless::{ErrorKind, Refusal, ResumeRequest};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::Arc;

/// `GET P/sse[?sessionId=<id>]`.
pub(crate) async fn sse(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    sse_inner(state, q, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn sse_inner(
    state: Arc<AppState>,
    q: HashMap<String, String>,
    req: Request,
) -> Result<Response, ApiError> {
    let owner = caller(&req);
    let cursor = req.headers().get(LAST_EVENT_ID).map(|c| c.to_str().unwrap_or("\u{0}").to_owned());
    let messages = messages_path(&req);
    let Some(sid) = q.get("sessionId") else {
        // A reconnect that kept its cursor but lost its session id: never
        // a fresh session (seed 003).
        if cursor.is_some() {
            return Err(ApiError::from(Refusal::ResumeRequiresSession));
        }
        let slot = req.extensions().get::<NewSession>().and_then(|n| lock(&n.0).take());
        let sess = state.sessions.create(owner.as_deref(), LEGACY_VERSION, slot, None).await?;
        let mut r = standalone(&state, sess, &messages).await?;
        r.extensions_mut().insert(crate::telemetry::LegacyCreated);
        return Ok(r);
    };
    if let Some(cursor) = cursor {
        // An EventSource reconnect: the cursor's stream, per the table.
        let req = ResumeRequest { session_id: Some(sid), cursor: Some(&cursor), owner: owner.as_deref() };
        let (sess, sub, stream, attach) = state.sessions.resume_lane(req).await?;
        let preface = endpoint_event(&messages, &sess);
        let replayed = crate::telemetry::Replayed(sub.replay_len());
        let mut r = SseBody::new(sess, sub, stream, attach, Framing::Legacy, Some(preface)).into_response();
        r.extensions_mut().insert(replayed);
        return Ok(r);
    }
    standalone(&state, state.sessions.live(sid, owner.as_deref()).await?, &messages).await
}

/// The legacy stream from its first undelivered event (no priming event:
/// a legacy client parses every message), the `endpoint` event first.
async fn standalone(state: &AppState, sess: Arc<SessionState>, messages: &str) -> Result<Response, ApiError> {
    let (sub, stream, attach) = state.sessions.open_standalone(&sess, false).await?;
    let preface = endpoint_event(messages, &sess);
    Ok(SseBody::new(sess, sub, stream, attach, Framing::Legacy, Some(preface)).into_response())
}

/// Where this GET's client posts its messages: the request's own path (as
/// the outermost router saw it) with `/sse` replaced by `/messages`.
fn messages_path(req: &Request) -> String {
    let full = req.extensions().get::<OriginalUri>().map_or_else(|| req.uri().path(), |u| u.0.path());
    format!("{}/messages", full.strip_suffix("/sse").unwrap_or(full).trim_end_matches('/'))
}

/// The `endpoint` event: the URL to POST messages to.
fn endpoint_event(messages: &str, sess: &SessionState) -> Bytes {
    Bytes::from(format!("event: endpoint\ndata: {messages}?sessionId={}\n\n", sess.session.id()))
}

/// `POST P/messages?sessionId=<id>`: 202 for every message; responses and
/// notifications are events of the legacy stream.
pub(crate) async fn messages(
    State(state): State<Arc<AppState>>,
    Query(q): Query<HashMap<String, String>>,
    req: Request,
) -> Response {
    messages_inner(state, q, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn messages_inner(
    state: Arc<AppState>,
    q: HashMap<String, String>,
    req: Request,
) -> Result<Response, ApiError> {
    let owner = caller(&req);
    let sid = q.get("sessionId").ok_or_else(|| {
        ApiError::new(
            ErrorKind::MissingSession,
            "POST messages?sessionId=<id>, the id the endpoint event named",
        )
    })?;
    let sess = state.sessions.live(sid, owner.as_deref()).await?;
    let (parts, body) = req.into_parts();
    let body = read_body(&state, body).await?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::malformed(format!("body is not JSON: {e}")))?;
    // The parsed message is what goes on: the body's bytes are not kept for
    // the request's lifetime (a long tool call).
    drop(body);
    let msg = match classify(value) {
        Ok(m) => m,
        Err(e) => {
            return Ok((StatusCode::BAD_REQUEST, axum::Json(jsonrpc::response(&Value::Null, Err(e))))
                .into_response())
        }
    };
    sess.hub.touch(&sess.session);
    let stream = sess.session.standalone().clone();
    match msg {
        Incoming::Request { id, method, params } if method == "initialize" => {
            let outcome = match builtin::legacy_initialize(&*state.protocol.host, &sess, params.clone()) {
                Ok(own) => match application_initialize(&state, &sess, &params, &parts.headers).await {
                    None => Ok(own),
                    Some(Ok(result)) => Ok(result),
                    Some(Err(InitializeError::Rpc(e))) => Err(e),
                    // An HTTP answer (an upstream's 401) goes to the POST
                    // as it is; the session was created for nothing.
                    Some(Err(InitializeError::Http(r))) => {
                        SessionHandle { sess: Arc::clone(&sess) }.end();
                        return Ok(r.map(axum::body::Body::from));
                    }
                },
                Err(e) => Err(e),
            };
            sess.publish_now(&stream, Some(&jsonrpc::response(&id, outcome)))
                .await
                .map_err(|_| ApiError::unknown_session())?;
        }
        Incoming::Request { id, method, params } => {
            let call = Call { id, method, params, headers: None };
            start_request(&state.protocol, &sess, RequestStream::Shared(&stream), call, None).await;
        }
        Incoming::Notification { method, params } => {
            handle_notification(&state.protocol, &sess, &method, &params)
        }
        Incoming::Response { id, outcome } => {
            sess.deliver_response(&id, outcome);
        }
    }
    Ok((StatusCode::ACCEPTED, "Accepted").into_response())
}

/// The application's own answer to a legacy session's `initialize`
/// (`Host::initialize`, a gateway's), if it gives one; its result's
/// `protocolVersion`, when served, becomes the session's.
async fn application_initialize(
    state: &AppState,
    sess: &Arc<SessionState>,
    params: &Value,
    headers: &http::HeaderMap,
) -> Option<Result<Value, InitializeError>> {
    let handle = SessionHandle { sess: Arc::clone(sess) };
    let answer = state.protocol.host.initialize(params, &handle, headers)?.await;
    if let Ok(result) = &answer {
        match result.get("protocolVersion").and_then(Value::as_str) {
            Some(v) if v == LEGACY_VERSION || SUPPORTED_VERSIONS.contains(&v) => sess.set_protocol_version(v),
            _ => {}
        }
    }
    Some(answer)
}
