//! The Streamable HTTP endpoint (SPEC §5): POST, GET, DELETE on one path.

use crate::config::SUPPORTED_VERSIONS;
use crate::error::ApiError;
use crate::host::{LogLevel, RequestContext, SessionHandle};
use crate::jsonrpc::{self, classify, Incoming, RpcError};
use crate::sse::SseBody;
use crate::state::{AppState, Conn};
use axum::body::Body;
use axum::extract::{Request, State};
use axum::http::{header, HeaderMap, HeaderValue, Method, StatusCode};
use axum::response::{IntoResponse, Response};
use gapless::{ResumeRequest, Seq, StreamHandle, Subscription};
use serde_json::{json, Value};
use std::sync::Arc;

pub(crate) const SESSION_HEADER: &str = "mcp-session-id";
const VERSION_HEADER: &str = "mcp-protocol-version";
const LAST_EVENT_ID: &str = "last-event-id";

fn header<'a>(h: &'a HeaderMap, name: &str) -> Option<&'a str> {
    h.get(name).and_then(|v| v.to_str().ok())
}

/// `Origin` and `Host` checks against DNS rebinding (403), and the header
/// size limit (431). Applied to every route, the WebSocket handshake too.
pub(crate) fn check_request(state: &AppState, h: &HeaderMap) -> Result<(), ApiError> {
    let size: usize = h.iter().map(|(k, v)| k.as_str().len() + v.len() + 4).sum();
    if size > state.config.max_header_bytes {
        return Err(ApiError::new(
            StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE,
            "headers_too_large",
            format!("request headers total {size} bytes; the limit is {}", state.config.max_header_bytes),
        ));
    }
    let forbidden = |what: &str| ApiError::new(StatusCode::FORBIDDEN, "origin_not_allowed", what.to_owned());
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

struct Accepts {
    json: bool,
    sse: bool,
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

fn check_version_header(h: &HeaderMap) -> Result<(), ApiError> {
    match header(h, VERSION_HEADER) {
        Some(v) if !SUPPORTED_VERSIONS.contains(&v) => Err(ApiError::new(
            StatusCode::BAD_REQUEST,
            "unsupported_protocol_version",
            format!("unsupported MCP-Protocol-Version {v:?}; supported: {}", SUPPORTED_VERSIONS.join(", ")),
        )
        .with("supported", json!(SUPPORTED_VERSIONS))),
        _ => Ok(()),
    }
}

fn owner(state: &AppState, h: &HeaderMap) -> Option<String> {
    state.identity.as_ref().and_then(|f| f(h))
}

/// The single MCP endpoint.
pub(crate) async fn endpoint(State(state): State<Arc<AppState>>, req: Request) -> Response {
    let result = match *req.method() {
        Method::POST => post(state, req).await,
        Method::GET => get(state, req).await,
        Method::DELETE => delete(state, req).await,
        _ => Err(ApiError::method_not_allowed("GET, POST, DELETE")),
    };
    result.unwrap_or_else(IntoResponse::into_response)
}

fn rpc_error_response(status: StatusCode, e: RpcError) -> Response {
    (status, axum::Json(jsonrpc::response(&Value::Null, Err(e)))).into_response()
}

async fn read_body(state: &AppState, req: Request) -> Result<bytes::Bytes, ApiError> {
    let limit = state.config.max_body_bytes;
    let too_large = || {
        ApiError::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body over {limit} bytes"),
        )
        .with("limit", json!(limit))
    };
    if let Some(len) =
        header(req.headers(), header::CONTENT_LENGTH.as_str()).and_then(|l| l.parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(too_large());
        }
    }
    axum::body::to_bytes(req.into_body(), limit).await.map_err(|_| too_large())
}

async fn post(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let h = req.headers().clone();
    check_request(&state, &h)?;
    let ct = header(&h, header::CONTENT_TYPE.as_str()).unwrap_or("");
    if !ct.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json") {
        return Err(ApiError::new(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "unsupported_media_type",
            "POST bodies must be application/json",
        ));
    }
    let acc = accepts(&h);
    if !acc.json && !acc.sse {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "Accept must allow application/json or text/event-stream",
        ));
    }
    let body = read_body(&state, req).await?;
    check_version_header(&h)?;
    let value: Value =
        serde_json::from_slice(&body).map_err(|e| ApiError::malformed(format!("body is not JSON: {e}")))?;
    let msg = match classify(value) {
        Ok(m) => m,
        Err(e) => return Ok(rpc_error_response(StatusCode::BAD_REQUEST, e)),
    };
    let owner = owner(&state, &h);
    let sid = header(&h, SESSION_HEADER);
    if let Incoming::Request { method, .. } = &msg {
        if method == "initialize" && sid.is_none() {
            return initialize(state, msg, acc, owner).await;
        }
    }
    let sid = sid.ok_or_else(ApiError::missing_session)?;
    let conn = state.conn(sid, owner.as_deref()).ok_or_else(ApiError::unknown_session)?;
    if conn.session.is_migrated() {
        return Err(ApiError::session_migrated());
    }
    conn.hub.touch(&conn.session);
    match msg {
        Incoming::Notification { method, params } => {
            handle_notification(&state, &conn, &method, &params);
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Incoming::Response { id, outcome } => {
            conn.deliver_response(&id, outcome);
            Ok(StatusCode::ACCEPTED.into_response())
        }
        Incoming::Request { id, method, params } => {
            let stream = conn.session.open_stream().map_err(|_| ApiError::unknown_session())?;
            start_request(&state, &conn, &stream, id, method, params);
            respond_on_stream(&state, conn, stream, acc).await
        }
    }
}

/// Handles a client notification (SPEC §5: 202).
pub(crate) fn handle_notification(state: &AppState, conn: &Arc<Conn>, method: &str, params: &Value) {
    match method {
        "notifications/initialized" => {}
        "notifications/cancelled" => {
            if let Some(id) = params.get("requestId") {
                conn.cancel_request(id);
            }
        }
        _ => state.host.on_notification(method, params, &SessionHandle { conn: Arc::clone(conn) }),
    }
}

/// Publishes the priming event and spawns the handler, which publishes
/// the request's notifications and finally its response on `stream`.
pub(crate) fn start_request(
    state: &AppState,
    conn: &Arc<Conn>,
    stream: &StreamHandle,
    id: Value,
    method: String,
    params: Value,
) {
    let _ = conn.publish_now(stream, None);
    let cancel = conn.start_request(&id);
    let ctx = RequestContext {
        conn: Arc::clone(conn),
        stream: conn.session.pacer(stream),
        progress_token: params.get("_meta").and_then(|m| m.get("progressToken")).cloned(),
        request_id: id.clone(),
        cancel: cancel.clone(),
    };
    let host = Arc::clone(&state.host);
    let conn = Arc::clone(conn);
    let stream = stream.clone();
    tokio::spawn(async move {
        let outcome = match method.as_str() {
            "ping" => Some(Ok(json!({}))),
            "logging/setLevel" => {
                Some(match params.get("level").and_then(Value::as_str).and_then(LogLevel::parse) {
                    Some(l) => {
                        conn.set_log_level(l);
                        Ok(json!({}))
                    }
                    None => Err(RpcError::invalid_params("level must be one of the MCP log levels")),
                })
            }
            "initialize" => {
                Some(Err(RpcError::new(jsonrpc::code::INVALID_REQUEST, "session is already initialized")))
            }
            _ => {
                let fut = host.handle(method, params, ctx);
                tokio::select! {
                    r = fut => Some(r),
                    // Cancelled: no response is sent (MCP cancellation).
                    _ = cancel.cancelled() => None,
                }
            }
        };
        if let Some(outcome) = outcome {
            let _ = conn.publish_now(&stream, Some(&jsonrpc::response(&id, outcome)));
        }
        conn.finish_request(&id);
        let _ = conn.session.end_stream(&stream);
    });
}

/// Answers a request: SSE following its stream, or (client accepts only
/// JSON) the response alone.
async fn respond_on_stream(
    state: &AppState,
    conn: Arc<Conn>,
    stream: StreamHandle,
    acc: Accepts,
) -> Result<Response, ApiError> {
    let sub = conn.session.subscribe_stream(stream.id(), Seq(0)).map_err(|_| ApiError::unknown_session())?;
    if acc.sse {
        let attach = conn.attach(stream.id(), false).expect("non-exclusive attach");
        return Ok(sse_response(state, conn, sub, stream, attach));
    }
    json_response(conn, sub).await
}

async fn json_response(conn: Arc<Conn>, mut sub: Subscription) -> Result<Response, ApiError> {
    let mut last = None;
    while let Some(item) = sub.recv().await {
        let e = item.map_err(|_| {
            ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "gap_not_covered", "response evicted")
        })?;
        if !e.payload.is_empty() {
            last = Some(e);
        }
    }
    let e = last.ok_or_else(|| {
        ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, "internal", "request ended without a response")
    })?;
    conn.session.reader().mark_delivered(&e);
    let mut r = Response::new(Body::from(e.payload));
    r.headers_mut().insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
    Ok(r)
}

fn sse_response(
    _state: &AppState,
    conn: Arc<Conn>,
    sub: Subscription,
    stream: StreamHandle,
    attach: (u64, tokio_util::sync::CancellationToken),
) -> Response {
    let body = SseBody::new(conn, sub, stream.id(), attach);
    let mut r = Response::new(Body::from_stream(body));
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    r
}

async fn initialize(
    state: Arc<AppState>,
    msg: Incoming,
    acc: Accepts,
    owner: Option<String>,
) -> Result<Response, ApiError> {
    let Incoming::Request { id, params, .. } = msg else { unreachable!("checked by caller") };
    let asked = params.get("protocolVersion").and_then(Value::as_str).unwrap_or("");
    let version = if SUPPORTED_VERSIONS.contains(&asked) { asked } else { SUPPORTED_VERSIONS[0] }.to_owned();
    let session = state.hub.create(owner.as_deref())?;
    let conn = Arc::new(Conn::new(
        Arc::clone(&session),
        Arc::clone(&state.hub),
        Arc::clone(&state.config),
        version.clone(),
        &state.shutdown,
    ));
    state.insert(Arc::clone(&conn));
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": state.host.capabilities(),
        "serverInfo": state.host.server_info(),
    });
    if let Some(i) = state.host.instructions() {
        result["instructions"] = json!(i);
    }
    let sid = session.id().to_string();
    let stream = session.open_stream().map_err(|_| ApiError::unknown_session())?;
    let _ = conn.publish_now(&stream, None);
    let _ = conn.publish_now(&stream, Some(&jsonrpc::response(&id, Ok(result))));
    let _ = session.end_stream(&stream);
    let mut r = respond_on_stream(&state, conn, stream, acc).await?;
    r.headers_mut().insert(SESSION_HEADER, HeaderValue::from_str(&sid).expect("hex id"));
    Ok(r)
}

async fn get(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let h = req.headers();
    check_request(&state, h)?;
    if !accepts(h).sse {
        return Err(ApiError::new(
            StatusCode::NOT_ACCEPTABLE,
            "not_acceptable",
            "GET needs Accept: text/event-stream",
        ));
    }
    check_version_header(h)?;
    let owner = owner(&state, h);
    let sid = header(h, SESSION_HEADER);
    if let Some(cursor) = h.get(LAST_EVENT_ID) {
        // A resume (SPEC §4.2), even with a non-UTF-8 cursor (malformed).
        let cursor = cursor.to_str().unwrap_or("\u{0}");
        let req = ResumeRequest { session_id: sid, cursor: Some(cursor), owner: owner.as_deref() };
        let resume = state.hub.resume_stream(req)?;
        let conn =
            state.conn(sid.unwrap_or_default(), owner.as_deref()).ok_or_else(ApiError::unknown_session)?;
        if conn.session.is_migrated() {
            return Err(ApiError::session_migrated());
        }
        let stream = resume.stream.expect("stream resume");
        let handle = conn.session.reader().handle(stream).ok_or_else(ApiError::unknown_session)?;
        let attach = conn.attach(stream, false).expect("non-exclusive attach");
        let sub = resume.into_subscription();
        return Ok(sse_response(&state, conn, sub, handle, attach));
    }
    let sid = sid.ok_or_else(ApiError::missing_session)?;
    let conn = state.conn(sid, owner.as_deref()).ok_or_else(ApiError::unknown_session)?;
    if conn.session.is_migrated() {
        return Err(ApiError::session_migrated());
    }
    let standalone = conn.session.standalone().clone();
    let attach = conn.attach(standalone.id(), true).ok_or_else(ApiError::stream_busy)?;
    // Standalone events never delivered so far come first; a priming event
    // only when there is no such backlog.
    let info = standalone.info();
    if info.high <= info.delivered {
        let _ = conn.publish_now(&standalone, None);
    }
    let sub = conn.session.subscribe_stream(standalone.id(), info.delivered).map_err(|e| match e {
        gapless::SnapshotError::Evicted { wanted, oldest, missing } => ApiError::new(
            StatusCode::CONFLICT,
            "gap_not_covered",
            format!(
                "{missing} standalone event(s) from seq {wanted} were evicted before any GET stream was open"
            ),
        )
        .with("cursor", Value::Null)
        .with("oldest", json!(oldest.get()))
        .with("missing", json!(missing.count())),
        _ => ApiError::unknown_session(),
    });
    let sub = match sub {
        Ok(s) => s,
        Err(e) => {
            conn.detach(standalone.id(), attach.0);
            return Err(e);
        }
    };
    Ok(sse_response(&state, conn, sub, standalone, attach))
}

async fn delete(state: Arc<AppState>, req: Request) -> Result<Response, ApiError> {
    let h = req.headers();
    check_request(&state, h)?;
    let sid = header(h, SESSION_HEADER).ok_or_else(ApiError::missing_session)?;
    let owner = owner(&state, h);
    let conn = state.conn(sid, owner.as_deref()).ok_or_else(ApiError::unknown_session)?;
    state.remove(&conn.session.id());
    Ok(StatusCode::NO_CONTENT.into_response())
}

/// Any other path.
pub(crate) async fn not_found() -> Response {
    ApiError::new(StatusCode::NOT_FOUND, "not_found", "no such endpoint").into_response()
}
