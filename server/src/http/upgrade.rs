//! The migration check (`docs/SPEC.md` §4.3, seed 000):
//! `POST P/session/{id}/upgrade` with `{"cursor": "<event id>" | null}`
//! issues a ticket that pins the gap, or refuses with the decision table's
//! numbers. The client names its own processed cursor in the body; headers
//! are never used as a cursor.

use super::guard::{caller, read_body};
use crate::app::AppState;
use crate::vocab::error::ApiError;
use axum::extract::{OriginalUri, Path, Request, State};
use axum::response::{IntoResponse, Response};
use gapless::ResumeRequest;
use serde_json::{json, Value};
use std::sync::Arc;

/// `POST P/session/{id}/upgrade`.
pub(crate) async fn upgrade(
    State(state): State<Arc<AppState>>,
    Path(id): Path<String>,
    req: Request,
) -> Response {
    upgrade_inner(state, id, req).await.unwrap_or_else(IntoResponse::into_response)
}

async fn upgrade_inner(state: Arc<AppState>, id: String, req: Request) -> Result<Response, ApiError> {
    let owner = caller(&req);
    let ws_path = socket_path(&req, &id);
    let body = read_body(&state, req.into_body()).await?;
    let cursor = parse_upgrade_body(&body)?;
    let req = ResumeRequest { session_id: Some(&id), cursor: cursor.as_deref(), owner: owner.as_deref() };
    let t = state.sessions.upgrade(req).await?;
    Ok(axum::Json(json!({
        "ticket": t.ticket,
        "websocket": format!("{ws_path}?ticket={}", t.ticket),
        "replay_from": t.replay_from,
        "replay_count": t.replay_count,
    }))
    .into_response())
}

/// The socket's path as the client must ask for it: where this upgrade
/// request was addressed (the whole path, as the outermost router saw it,
/// so a router nested under a prefix advertises the prefixed path), with
/// `/session/{id}/upgrade` replaced by `/ws`.
fn socket_path(req: &Request, id: &str) -> String {
    let full = req.extensions().get::<OriginalUri>().map_or_else(|| req.uri().path(), |u| u.0.path());
    let suffix = format!("/session/{id}/upgrade");
    let base = full.strip_suffix(suffix.as_str()).unwrap_or(full);
    format!("{}/ws", base.trim_end_matches('/'))
}

/// The upgrade body: an object with exactly the key `cursor`, a string or
/// null. Anything else is `malformed_request`.
pub(crate) fn parse_upgrade_body(body: &[u8]) -> Result<Option<String>, ApiError> {
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
