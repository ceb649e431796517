//! The HTTP side: the router, the request guard every route passes through
//! (`guard.rs`) and its budget for request bodies being received
//! (`bodies.rs`), a refusal as a response (`error.rs`), and one file or
//! folder per route.
//!
//! | route | file |
//! |---|---|
//! | `P` (POST, GET, DELETE) | `endpoint/` (a session's POST in `post_2025.rs`, a POST of MCP 2026-07-28 in `post_2026.rs`; SSE bodies in `sse.rs`) |
//! | `P/session/{id}/upgrade` (POST) | `upgrade.rs` |
//! | `P/ws` (WebSocket) | `socket.rs` |
//! | `P/sse` (GET), `P/messages` (POST): the legacy HTTP+SSE transport | `legacy.rs` |
//!
//! Where sessions live (this process or a cluster's store) is the
//! backend's (`backend/`); every route is served the same on either
//! (the legacy transport in a cluster: §8.9).

mod bodies;
mod endpoint;
mod error;
mod guard;
mod legacy;
mod socket;
mod sse;
mod upgrade;

use crate::app::AppState;
use crate::operator::count::Counted;
use axum::middleware::from_fn_with_state;
use axum::routing::{any, MethodRouter};
use axum::Router;
use guard::Route;
use std::sync::Arc;

/// The MCP router: the routes under `state.path`, each behind the guard,
/// and no fallback (the application's own fallback merges).
pub(crate) fn router(state: &Arc<AppState>) -> Router {
    let base = state.path.trim_end_matches('/');
    let endpoint = if base.is_empty() { "/".to_owned() } else { base.to_owned() };
    let guarded = |route: Route, h: MethodRouter<Arc<AppState>>| {
        let counted = match route {
            Route::Endpoint => Counted::Endpoint,
            Route::Upgrade => Counted::Upgrade,
            Route::Socket => Counted::Socket,
            Route::LegacySse | Route::LegacyMessages => Counted::Legacy,
        };
        h.layer(from_fn_with_state((Arc::clone(state), route), guard::guard))
            .layer(from_fn_with_state((Arc::clone(&state.metrics), counted), crate::operator::count::count))
    };
    let mut router = Router::new()
        .route(&endpoint, guarded(Route::Endpoint, any(endpoint::endpoint)))
        .route(&format!("{base}/session/{{id}}/upgrade"), guarded(Route::Upgrade, any(upgrade::upgrade)))
        .route(&format!("{base}/ws"), guarded(Route::Socket, any(socket::socket)));
    if state.config.legacy_sse {
        router = router
            .route(&format!("{base}/sse"), guarded(Route::LegacySse, any(legacy::sse)))
            .route(&format!("{base}/messages"), guarded(Route::LegacyMessages, any(legacy::messages)));
    }
    router.with_state(Arc::clone(state))
}
