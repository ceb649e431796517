//! The request checks, applied once, as a layer on every route of the MCP
//! router (the WebSocket upgrade and the socket included), before any
//! handler runs. In this order:
//!
//! 1. the method the route serves (405 `method_not_allowed`, with `Allow`);
//! 2. the total size of the headers (431 `headers_too_large`);
//! 3. `Host` and `Origin` against DNS rebinding: two of either is 400
//!    `malformed_request`, one not allowed 403 `origin_not_allowed`;
//! 4. for a POST, a JSON content type (415 `unsupported_media_type`);
//! 5. for the endpoint, an `Accept` the method can answer (406
//!    `not_acceptable`); what it allows goes to the handler;
//! 6. for a POST, a declared `Content-Length` over the body limit (413
//!    `payload_too_large`); the body itself is wrapped so that reading more
//!    than the limit fails the same way (once the caller is known, below,
//!    the body also takes its share of the budget for bodies being
//!    received, `bodies.rs`: 503 `too_many_body_bytes`);
//! 7. an `MCP-Protocol-Version` header naming a version not served (400
//!    `unsupported_protocol_version`), except on the endpoint's POST, which
//!    checks it once the body says which era the request is of, and on a
//!    GET or DELETE of 2026-07-28 (the endpoint answers 405);
//!
//! then it resolves the caller's identity (see `identity.rs`) once, and for
//! a POST to the endpoint without a session id (an `initialize`) it applies
//! the per-client limits (`fairness.rs`: 429 `rate_limited` or
//! `client_session_limit`), all before the body is read.

use super::bodies::{self, Charged};
use crate::app::AppState;
use crate::session::fairness::ClientSlot;
use crate::vocab::byte_budget::OverBudget;
use crate::vocab::config::{LEGACY_VERSION, MODERN_VERSIONS, SUPPORTED_VERSIONS};
use crate::vocab::error::ApiError;
use crate::vocab::identity::{self, Caller};
use axum::body::Body;
use axum::extract::{ConnectInfo, Request, State};
use axum::http::{header, HeaderMap, Method};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use gapless::ErrorKind;
use serde_json::json;
use std::net::SocketAddr;
use std::sync::Arc;

use crate::vocab::headers::{PROTOCOL_VERSION, SESSION_HEADER};

/// Which route a request is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    /// `P`: POST, GET, DELETE.
    Endpoint,
    /// `P/session/{id}/upgrade`: POST.
    Upgrade,
    /// `P/ws`: the WebSocket handshake (its own checks say what is wrong
    /// with a request that is not one).
    Socket,
    /// `P/sse`: the legacy transport's event stream (GET).
    LegacySse,
    /// `P/messages`: the legacy transport's requests (POST).
    LegacyMessages,
}

/// What the client's `Accept` allows (the endpoint's POST answers JSON or
/// SSE; its GET only SSE).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Accepts {
    pub(crate) json: bool,
    pub(crate) sse: bool,
}

pub(crate) fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// The request's session id: `None` only when the header is absent. A
/// value that is not UTF-8 names no session (it reads as one no session
/// has: 404 `unknown_session`), and is never taken for "no session": a
/// request carrying one must not create a session past the limits the
/// layer applies to session-less requests.
pub(crate) fn session_header(h: &HeaderMap) -> Option<&str> {
    h.get(SESSION_HEADER).map(|v| v.to_str().unwrap_or("\u{0}"))
}

/// The layer's function: checks, then the handler.
pub(crate) async fn guard(
    State((state, route)): State<(Arc<AppState>, Route)>,
    mut req: Request,
    next: Next,
) -> Response {
    match check(&state, route, &mut req) {
        Ok(()) => next.run(req).await,
        Err(e) => e.into_response(),
    }
}

fn check(state: &AppState, route: Route, req: &mut Request) -> Result<(), ApiError> {
    let method = req.method().clone();
    match route {
        Route::Endpoint if ![Method::POST, Method::GET, Method::DELETE].contains(&method) => {
            return Err(ApiError::method_not_allowed("GET, POST, DELETE"))
        }
        Route::Upgrade | Route::LegacyMessages if method != Method::POST => {
            return Err(ApiError::method_not_allowed("POST"))
        }
        Route::LegacySse if method != Method::GET => return Err(ApiError::method_not_allowed("GET")),
        _ => {}
    }
    let h = req.headers();
    check_origin(state, h)?;
    let post = method == Method::POST;
    if post {
        let ct = header(h, header::CONTENT_TYPE.as_str()).unwrap_or("");
        if !ct.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json") {
            return Err(ApiError::new(
                ErrorKind::UnsupportedMediaType,
                "POST bodies must be application/json",
            ));
        }
    }
    if route == Route::Endpoint {
        let acc = accepts(h);
        if post && !acc.json && !acc.sse {
            return Err(ApiError::new(
                ErrorKind::NotAcceptable,
                "Accept must allow application/json or text/event-stream",
            ));
        }
        if method == Method::GET && !acc.sse {
            return Err(ApiError::new(ErrorKind::NotAcceptable, "GET needs Accept: text/event-stream"));
        }
        req.extensions_mut().insert(acc);
    }
    if route == Route::LegacySse && !accepts(req.headers()).sse {
        return Err(ApiError::new(ErrorKind::NotAcceptable, "GET needs Accept: text/event-stream"));
    }
    if post {
        let limit = state.config.max_body_bytes;
        let declared =
            header(req.headers(), header::CONTENT_LENGTH.as_str()).and_then(|l| l.parse::<u64>().ok());
        if declared.is_some_and(|len| len > limit as u64) {
            return Err(ApiError::payload_too_large(limit));
        }
    }
    // The endpoint's POST checks the version once it has read the body: a
    // request of 2026-07-28 answers an unknown one with that revision's
    // error. A GET or DELETE of that revision reaches the endpoint (405).
    let sessionless = header(req.headers(), PROTOCOL_VERSION)
        .is_some_and(|v| MODERN_VERSIONS.contains(&v.trim()) && state.protocol.host.serves_sessionless());
    if route != Route::Endpoint || !(post || sessionless) {
        check_version(req.headers(), matches!(route, Route::LegacySse | Route::LegacyMessages))?;
    }
    let (parts, body) = std::mem::take(req).into_parts();
    let caller = Caller(identity::resolve(&parts, state.identity.as_ref()));
    *req = Request::from_parts(parts, body);
    // A request that creates a session: an initialize POST without a
    // session id (and not of 2026-07-28, which has no `initialize`), or a
    // legacy GET without `sessionId`.
    let creates = match route {
        Route::Endpoint => post && !sessionless && req.headers().get(SESSION_HEADER).is_none(),
        Route::LegacySse => {
            !req.uri().query().unwrap_or("").split('&').any(|kv| kv.starts_with("sessionId="))
        }
        _ => false,
    };
    let peer = req.extensions().get::<ConnectInfo<SocketAddr>>().map(|c| c.0.ip());
    let client = match (&caller.0, peer) {
        (Some(id), _) => Some(format!("id:{id}")),
        (None, Some(ip)) => Some(format!("ip:{ip}")),
        (None, None) => None,
    };
    if post {
        // The body holds its share of the budget for bodies being received
        // (`bodies.rs`) as its bytes arrive; a declared length that does not
        // fit what is left now is refused before anything is read.
        let declared = header(req.headers(), header::CONTENT_LENGTH.as_str()).and_then(|l| l.parse().ok());
        state.bodies.fits(client.as_deref(), declared.unwrap_or(0))?;
        let hold = state.bodies.hold(client.as_deref().map(Arc::from));
        let body = std::mem::take(req.body_mut());
        let limited = Body::new(http_body_util::Limited::new(body, state.config.max_body_bytes));
        *req.body_mut() = Body::new(Charged::new(limited, hold));
    }
    if creates {
        if let Some(client) = client {
            let slot = state.fairness.admit(&client)?;
            req.extensions_mut().insert(NewSession(Arc::new(std::sync::Mutex::new(Some(slot)))));
        }
    }
    req.extensions_mut().insert(caller);
    Ok(())
}

/// The caller's identity, as the guard resolved it.
pub(crate) fn caller(req: &Request) -> Option<String> {
    let Caller(owner) = req.extensions().get::<Caller>().cloned().expect("the guard runs first");
    owner
}

/// The client allowance a new session will hold, reserved by the guard for
/// an `initialize` (given back with the request if none is created).
#[derive(Clone, Debug)]
pub(crate) struct NewSession(pub(crate) Arc<std::sync::Mutex<Option<ClientSlot>>>);

/// Reads a POST body that the guard limited: over the limit is 413, not
/// whole within the body read timeout 408.
pub(crate) async fn read_body(state: &AppState, body: Body) -> Result<bytes::Bytes, ApiError> {
    let timeout = state.config.body_read_timeout;
    match tokio::time::timeout(timeout, axum::body::to_bytes(body, usize::MAX)).await {
        Ok(Ok(b)) => Ok(b),
        Ok(Err(e)) => {
            let e = e.into_inner();
            if let Some(over) = bodies::find::<OverBudget>(&*e) {
                return Err(over.refusal());
            }
            if bodies::find::<http_body_util::LengthLimitError>(&*e).is_some() {
                return Err(ApiError::payload_too_large(state.config.max_body_bytes));
            }
            // The connection failed (the client left, or HTTP/2 reset the
            // stream): nobody may read the answer, but it says what
            // happened.
            Err(ApiError::malformed(format!("the request body could not be read: {e}")))
        }
        Err(_) => Err(ApiError::new(
            ErrorKind::RequestTimeout,
            format!("the request body did not arrive within {} ms", timeout.as_millis()),
        )),
    }
}

/// `Origin` and `Host` checks against DNS rebinding (403), and the header
/// size limit (431).
fn check_origin(state: &AppState, h: &HeaderMap) -> Result<(), ApiError> {
    let size: usize = h.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    if size > state.config.max_header_bytes {
        return Err(ApiError::new(
            ErrorKind::HeadersTooLarge,
            format!("request headers total {size} bytes; the limit is {}", state.config.max_header_bytes),
        ));
    }
    // Two of either would let a check of the first pass a second that the
    // application or a proxy reads instead.
    for name in [header::HOST, header::ORIGIN] {
        if h.get_all(&name).iter().nth(1).is_some() {
            return Err(ApiError::malformed(format!("more than one {name} header")));
        }
    }
    let forbidden = |what: &str| ApiError::new(ErrorKind::OriginNotAllowed, what.to_owned());
    if let Some(host) = h.get(header::HOST) {
        let host = host.to_str().map_err(|_| forbidden("Host header is not ASCII"))?;
        if !host_allowed(state, host) {
            return Err(forbidden(&format!("Host {host:?} is not allowed")));
        }
    }
    if let Some(origin) = h.get(header::ORIGIN) {
        let origin = origin.to_str().map_err(|_| forbidden("Origin header is not ASCII"))?;
        if !origin_allowed(state, origin) {
            return Err(forbidden(&format!("Origin {origin:?} is not allowed")));
        }
    }
    Ok(())
}

pub(crate) fn check_version(h: &HeaderMap, legacy: bool) -> Result<(), ApiError> {
    match header(h, PROTOCOL_VERSION) {
        Some(v) if !(SUPPORTED_VERSIONS.contains(&v) || legacy && v == LEGACY_VERSION) => Err(ApiError::new(
            ErrorKind::UnsupportedProtocolVersion,
            format!("unsupported MCP-Protocol-Version {v:?}; supported: {}", SUPPORTED_VERSIONS.join(", ")),
        )
        .with("supported", json!(SUPPORTED_VERSIONS))),
        _ => Ok(()),
    }
}

fn strip_port(hostport: &str) -> &str {
    if let Some(rest) = hostport.strip_prefix('[') {
        // [v6]:port
        return rest.split(']').next().map_or(hostport, |h| &hostport[..h.len() + 2]);
    }
    hostport.rsplit_once(':').map_or(hostport, |(h, p)| {
        if p.bytes().all(|b| b.is_ascii_digit()) {
            h
        } else {
            hostport
        }
    })
}

fn is_loopback_name(h: &str) -> bool {
    matches!(h.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "[::1]")
}

fn host_allowed(state: &AppState, host: &str) -> bool {
    let name = strip_port(host);
    let allowed = &state.config.allowed_hosts;
    if allowed.iter().any(|a| a == "*" || a.eq_ignore_ascii_case(name)) {
        return true;
    }
    is_loopback_name(name)
}

fn origin_allowed(state: &AppState, origin: &str) -> bool {
    if state.config.allowed_origins.iter().any(|o| o == "*" || o.eq_ignore_ascii_case(origin)) {
        return true;
    }
    if !state.config.allow_loopback_origins {
        return false;
    }
    let Some(rest) = origin.strip_prefix("http://").or_else(|| origin.strip_prefix("https://")) else {
        return false;
    };
    !rest.contains('/') && is_loopback_name(strip_port(rest))
}

fn accepts(h: &HeaderMap) -> Accepts {
    let Some(a) = header(h, header::ACCEPT.as_str()) else {
        return Accepts { json: true, sse: true };
    };
    let mut r = Accepts { json: false, sse: false };
    for part in a.split(',') {
        let mt = part.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
        match mt.as_str() {
            "*/*" => {
                r.json = true;
                r.sse = true;
            }
            "application/json" | "application/*" => r.json = true,
            "text/event-stream" | "text/*" => r.sse = true,
            _ => {}
        }
    }
    r
}
