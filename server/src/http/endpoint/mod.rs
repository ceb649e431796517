//! The Streamable HTTP endpoint (`docs/SPEC.md` §5): POST, GET, DELETE on
//! one path. The request guard (`guard.rs`) has run. A POST's body says
//! which generation it is of: a session's message of the 2025 revisions
//! (`post_2025.rs`), or a request of MCP 2026-07-28 (`post_2026.rs`). A GET
//! is a resume or the standalone stream; a DELETE ends a session. What to
//! do with each JSON-RPC message is the protocol layer's (`protocol/`).

mod post_2025;
mod post_2026;

use super::guard::{caller, header, read_body, session_header, Accepts, NewSession};
use super::sse::{Framing, SseBody};
use crate::app::AppState;
use crate::backend::Table as _;
use crate::sessionless::{era, Era};
use crate::vocab::config::MODERN_VERSIONS;
use crate::vocab::error::ApiError;
use crate::vocab::headers::{LAST_EVENT_ID, PROTOCOL_VERSION};
use crate::vocab::jsonrpc::{self, classify, RpcError};
use crate::vocab::sync::lock;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use gapless::ResumeRequest;
use serde_json::Value;
use std::net::SocketAddr;
use std::sync::Arc;

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

fn rpc_error_response(status: StatusCode, e: RpcError) -> Response {
    (status, axum::Json(jsonrpc::response(&Value::Null, Err(e)))).into_response()
}

/// A POST: its body read and classified, then served as the generation it
/// is of.
async fn post(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let (acc, owner) = checked(&req);
    let sid = session_header(req.headers()).map(str::to_owned);
    let slot = req.extensions().get::<NewSession>().and_then(|n| lock(&n.0).take());
    let mirrored = post_2026::Mirrored::of(req.headers());
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0);
    // The guard left the version header to here: which error an unknown
    // version gets depends on the era the body is of.
    let version_ok = super::guard::check_version(req.headers(), false);
    let (parts, body) = req.into_parts();
    // The request's headers, for an application that passes them on.
    let headers = Some(Arc::new(parts.headers));
    let body = read_body(&state, body).await?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::malformed(format!("body is not JSON: {e}")))?;
    // The parsed message is what goes on: the body's bytes are not kept for
    // the request's lifetime (a long tool call).
    drop(body);
    let msg = match classify(value) {
        Ok(m) => m,
        Err(e) => return Ok(rpc_error_response(StatusCode::BAD_REQUEST, e)),
    };
    if state.protocol.host.serves_sessionless() && era(mirrored.version(), &msg) == Era::Sessionless {
        // No session: `Mcp-Session-Id` is ignored, none is created.
        drop(slot);
        return Ok(post_2026::post(state, mirrored, msg, acc, (owner, peer), headers).await);
    }
    version_ok?;
    post_2025::post(state, msg, sid, acc, owner, slot, headers).await
}

/// Whether a GET or DELETE is of 2026-07-28 (answered 405).
fn of_2026(state: &AppState, req: &Request) -> bool {
    state.protocol.host.serves_sessionless()
        && header(req.headers(), PROTOCOL_VERSION).is_some_and(|v| MODERN_VERSIONS.contains(&v.trim()))
}

async fn get(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    if of_2026(&state, &req) {
        return Err(ApiError::sessionless_post_only());
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
    if of_2026(&state, &req) {
        return Err(ApiError::sessionless_post_only());
    }
    let (_, owner) = checked(&req);
    let sid = session_header(req.headers()).ok_or_else(ApiError::missing_session)?;
    state.sessions.delete(sid, owner.as_deref()).await?;
    Ok(StatusCode::NO_CONTENT.into_response())
}
