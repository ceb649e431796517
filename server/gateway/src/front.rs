//! What the gateway adds in front of gapless-server's endpoint: the
//! upstream's OAuth protected-resource metadata (RFC 9728) served as seen
//! through the gateway, and the identity a bearer token gives a session.

use crate::upstream::Upstream;
use axum::extract::State;
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Json, Router};
use serde_json::json;
use sha2::{Digest, Sha256};
use std::sync::Arc;

/// The router of the upstream's protected-resource metadata: `GET
/// /.well-known/oauth-protected-resource` and the same followed by `path`
/// (the gateway's endpoint), answered with the upstream's document whose
/// `resource` is the gateway's endpoint as the client reaches it (its
/// `Host`); `404` where the upstream has none, `502` where it cannot be
/// asked. Merge it beside the gateway's MCP router.
pub fn metadata_router(upstream: Upstream, path: &str) -> Router {
    let state = Arc::new((upstream, path.trim_end_matches('/').to_owned()));
    let root = "/.well-known/oauth-protected-resource";
    let mut r = Router::new().route(root, get(metadata));
    if !state.1.is_empty() {
        r = r.route(&format!("{root}{}", state.1), get(metadata));
    }
    r.with_state(state)
}

async fn metadata(State(s): State<Arc<(Upstream, String)>>, headers: HeaderMap) -> Response {
    let (upstream, path) = &*s;
    match upstream.metadata().await {
        Ok(Some(mut doc)) => {
            if let Some(host) = headers.get("host").and_then(|h| h.to_str().ok()) {
                let https = headers
                    .get("x-forwarded-proto")
                    .is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"));
                let scheme = if https { "https" } else { "http" };
                doc["resource"] = json!(format!("{scheme}://{host}{path}"));
            }
            Json(doc).into_response()
        }
        Ok(None) => (
            StatusCode::NOT_FOUND,
            Json(json!({"error": "not_found", "message": "the upstream has no protected-resource metadata"})),
        )
            .into_response(),
        Err(f) => (
            StatusCode::BAD_GATEWAY,
            Json(json!({"error": "upstream_unavailable", "message": f.to_string()})),
        )
            .into_response(),
    }
}

/// The identity a request's bearer credentials give it: a hash of its
/// `Authorization` header (none without one). With it, gapless-server binds
/// a session to the credentials that opened it, so that another client's
/// token cannot resume it (`McpServerBuilder::identity`).
pub fn bearer_identity(parts: &axum::http::request::Parts) -> Option<String> {
    let auth = parts.headers.get("authorization")?;
    let digest = Sha256::digest(auth.as_bytes());
    Some(format!("bearer:{}", digest[..16].iter().map(|b| format!("{b:02x}")).collect::<String>()))
}
