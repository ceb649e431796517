//! A POST of MCP 2026-07-28 to the endpoint (`docs/SPEC.md` §5.4): the
//! request headers checked against the body, then the response, as one
//! JSON object when the handler sent nothing before it, else as an SSE
//! stream of the handler's notifications ending with it. No session, no
//! event ids (that revision's streams are not resumable), and closing the
//! response cancels the request.

use crate::app::AppState;
use crate::http::guard::Accepts;
use crate::protocol::dispatch_2026::{self, Call};
use crate::protocol::mirrors::mirrors;
use crate::sessionless::exchange::Running;
use crate::sessionless::mirror::Mirror;
use crate::sessionless::{declared, unsupported_version};
use crate::vocab::config::MODERN_VERSIONS;
use crate::vocab::error::ApiError;
use crate::vocab::headers::PROTOCOL_VERSION;
use crate::vocab::jsonrpc::{self, code, Incoming, RpcError};
use axum::body::Body;
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use base64::Engine as _;
use bytes::{BufMut, Bytes, BytesMut};
use gapless::ErrorKind;
use serde_json::Value;
use std::sync::Arc;

/// The request headers of 2026-07-28 this file checks, taken before the
/// body is read.
pub(crate) struct Mirrored {
    version: Option<HeaderValue>,
    method: Option<HeaderValue>,
    name: Option<HeaderValue>,
    /// Every `Mcp-Param-*` header, its name in lower case.
    params: Vec<(String, HeaderValue)>,
    /// A mirrored header given more than once (a proxy may read another
    /// of the values than this server does).
    repeated: Option<String>,
}

impl Mirrored {
    pub(crate) fn of(h: &HeaderMap) -> Self {
        Mirrored {
            version: h.get(PROTOCOL_VERSION).cloned(),
            method: h.get("mcp-method").cloned(),
            name: h.get("mcp-name").cloned(),
            params: h
                .iter()
                .filter(|(k, _)| k.as_str().starts_with("mcp-param-"))
                .map(|(k, v)| (k.as_str().to_owned(), v.clone()))
                .collect(),
            repeated: h
                .keys()
                .find(|k| {
                    let k = k.as_str();
                    (k.starts_with("mcp-param-") || [PROTOCOL_VERSION, "mcp-method", "mcp-name"].contains(&k))
                        && h.get_all(k).iter().nth(1).is_some()
                })
                .map(|k| k.as_str().to_owned()),
        }
    }

    /// `MCP-Protocol-Version`, if present and visible ASCII.
    pub(crate) fn version(&self) -> Option<&str> {
        self.version.as_ref().and_then(|v| v.to_str().ok())
    }
}

fn rpc_error(status: StatusCode, id: &Value, e: RpcError) -> Response {
    (status, axum::Json(jsonrpc::response(id, Err(e)))).into_response()
}

/// `HeaderMismatch`.
fn mismatch(message: String) -> RpcError {
    RpcError::new(code::HEADER_MISMATCH, format!("Header mismatch: {message}"))
}

/// A header's value as the body's: trimmed of optional whitespace, and
/// decoded where it uses the Base64 sentinel `=?base64?...?=`.
fn header_text(name: &str, v: &HeaderValue, sentinel: bool) -> Result<String, RpcError> {
    let s = v
        .to_str()
        .map_err(|_| mismatch(format!("{name} contains characters a header value may not carry")))?;
    let s = s.trim_matches([' ', '\t']);
    if !sentinel {
        return Ok(s.to_owned());
    }
    match s.strip_prefix("=?base64?").and_then(|r| r.strip_suffix("?=")) {
        Some(b64) => base64::engine::general_purpose::STANDARD
            .decode(b64)
            .ok()
            .and_then(|b| String::from_utf8(b).ok())
            .ok_or_else(|| mismatch(format!("{name} is not valid Base64 of UTF-8 text"))),
        None => Ok(s.to_owned()),
    }
}

/// The body value `Mcp-Name` mirrors, for the methods that have one.
fn named(method: &str, params: &Value) -> Option<(&'static str, String)> {
    let field = match method {
        "tools/call" | "prompts/get" => "name",
        "resources/read" => "uri",
        "tasks/get" | "tasks/update" | "tasks/cancel" => "taskId",
        _ => return None,
    };
    params.get(field).and_then(Value::as_str).map(|v| (field, v.to_owned()))
}

/// The standard request headers against the body (SEP-2243): each present,
/// well formed and equal to what it mirrors.
fn check_headers(h: &Mirrored, method: &str, params: &Value, version: &str) -> Result<(), RpcError> {
    if let Some(name) = &h.repeated {
        return Err(mismatch(format!("{name} is given more than once")));
    }
    let version_header =
        h.version.as_ref().ok_or_else(|| mismatch("MCP-Protocol-Version is required".into()))?;
    let v = header_text("MCP-Protocol-Version", version_header, false)?;
    if v != version {
        return Err(mismatch(format!(
            "MCP-Protocol-Version header value {v:?} does not match the body's {version:?}"
        )));
    }
    let m = h.method.as_ref().ok_or_else(|| mismatch("Mcp-Method is required".into()))?;
    let m = header_text("Mcp-Method", m, false)?;
    if m != method {
        return Err(mismatch(format!("Mcp-Method header value {m:?} does not match body method {method:?}")));
    }
    match (named(method, params), &h.name) {
        (Some(_), None) => Err(mismatch(format!("Mcp-Name is required for {method}"))),
        (Some((field, body)), Some(n)) => {
            let n = header_text("Mcp-Name", n, true)?;
            if n != body {
                return Err(mismatch(format!(
                    "Mcp-Name header value {n:?} does not match body params.{field} {body:?}"
                )));
            }
            Ok(())
        }
        (None, _) => Ok(()),
    }
}

/// The tool's mirrored parameters (`x-mcp-header`) against the call's
/// arguments: a value present (not null) needs its `Mcp-Param-*` header,
/// equal to it once decoded (numbers compared as numbers, booleans as
/// `true`/`false`); a header whose value is absent is not expected.
fn check_params(h: &Mirrored, mirrors: &[Mirror], args: &Value) -> Result<(), RpcError> {
    for m in mirrors {
        let value = m.path.iter().try_fold(args, |v, k| v.get(k));
        let Some(value) = value.filter(|v| !v.is_null()) else { continue };
        let Some((_, hv)) = h.params.iter().find(|(k, _)| *k == m.header) else {
            return Err(mismatch(format!(
                "{} is required: arguments.{} is present",
                m.header,
                m.path.join(".")
            )));
        };
        let text = header_text(&m.header, hv, true)?;
        let same = match value {
            Value::String(s) => *s == text,
            // Integers exactly (past 2^53 a float would equate neighbours),
            // else numerically ("42.0" is 42).
            Value::Number(n) => match (n.as_i64(), n.as_u64(), text.parse::<i64>(), text.parse::<u64>()) {
                (Some(a), _, Ok(b), _) => a == b,
                (_, Some(a), _, Ok(b)) => a == b,
                _ => text.parse::<f64>().ok().zip(n.as_f64()).is_some_and(|(a, b)| a == b),
            },
            Value::Bool(b) => text == if *b { "true" } else { "false" },
            // Not a primitive: no header value can mirror it.
            _ => false,
        };
        if !same {
            return Err(mismatch(format!(
                "{} header value {text:?} does not match arguments.{} {value}",
                m.header,
                m.path.join(".")
            )));
        }
    }
    Ok(())
}

/// Serves a message the endpoint found to be of 2026-07-28.
pub(crate) async fn post(
    state: Arc<AppState>,
    headers: Mirrored,
    msg: Incoming,
    acc: Accepts,
    (caller, peer): (Option<String>, Option<std::net::SocketAddr>),
    request_headers: Option<Arc<http::HeaderMap>>,
) -> Response {
    let (id, method, params) = match msg {
        // The revision defines no client notification over HTTP; one is
        // accepted and has no effect.
        Incoming::Notification { .. } => return StatusCode::ACCEPTED.into_response(),
        // `era` gives responses to the session era.
        Incoming::Response { .. } => unreachable!("a response is never of 2026-07-28"),
        Incoming::Request { id, method, params } => (id, method, params),
    };
    let declared = match declared(&params) {
        Ok(d) => d,
        Err(e) => return rpc_error(StatusCode::BAD_REQUEST, &id, e),
    };
    if let Err(e) = check_headers(&headers, &method, &params, &declared.version) {
        return rpc_error(StatusCode::BAD_REQUEST, &id, e);
    }
    if !MODERN_VERSIONS.contains(&declared.version.as_str()) {
        return rpc_error(StatusCode::BAD_REQUEST, &id, unsupported_version(&declared.version));
    }
    if matches!(method.as_str(), "subscriptions/listen" | "tasks/stream") && !acc.sse {
        return ApiError::new(
            ErrorKind::NotAcceptable,
            format!("{method} answers with a stream: Accept must allow text/event-stream"),
        )
        .into_response();
    }
    let client = match (&caller, peer) {
        (Some(id), _) => Some(format!("id:{id}")),
        (None, Some(addr)) => Some(format!("ip:{}", addr.ip())),
        (None, None) => None,
    };
    let permit = match state.sessionless.admit(client) {
        Ok(p) => p,
        Err(e) => {
            let mut r = rpc_error(StatusCode::TOO_MANY_REQUESTS, &id, e);
            r.headers_mut().insert(header::RETRY_AFTER, HeaderValue::from_static("1"));
            return r;
        }
    };
    // After admission: listing the tools for their mirrored parameters is
    // work this request does, bounded with it.
    if method == "tools/call" {
        if let Some(tool) = params.get("name").and_then(Value::as_str) {
            let mirrors = mirrors(&state.protocol, tool).await;
            let args = params.get("arguments").cloned().unwrap_or(Value::Null);
            if let Err(e) = check_params(&headers, &mirrors, &args) {
                return rpc_error(StatusCode::BAD_REQUEST, &id, e);
            }
        }
    }
    state.metrics.sessionless_requests.inc();
    let call = Call { id, method, params, declared, caller, connection: peer, headers: request_headers };
    let early = call.method == "tasks/stream";
    respond(dispatch_2026::start(&state.protocol, call, permit), acc, state.config.keepalive, early).await
}

/// The response: JSON when the response comes before any notification (or
/// the client takes only JSON, when notifications are dropped), else SSE.
async fn respond(mut run: Running, acc: Accepts, keepalive: std::time::Duration, early: bool) -> Response {
    // Dropped with this future (the client went away) or with the SSE body.
    let cancel = run.cancel.clone().drop_guard();
    let mut open = true;
    // A stream whose first message may be long in coming (`early`: a
    // `tasks/stream` of a quiet task) starts after one keep-alive period
    // with a comment, so that clients and proxies see a live response.
    let quiet = tokio::time::sleep(keepalive);
    tokio::pin!(quiet);
    let first = loop {
        tokio::select! {
            biased;
            n = run.notifications.recv(), if open => match n {
                Some(b) if acc.sse => break frame(&b),
                // A JSON-only client gets no notifications: drained so that
                // the handler never waits on them.
                Some(_) => {}
                // The handler dropped its context: only the response is left.
                None => open = false,
            },
            r = &mut run.response => match r {
                // A client that takes only SSE gets the response as the
                // stream's one event.
                Ok(msg) if !acc.json => return sse(Body::from(frame(msg.to_string().as_bytes()))),
                r => return json_response(r),
            },
            _ = &mut quiet, if early && acc.sse => break Bytes::from_static(b":\n\n"),
        }
    };
    let mut keepalive = tokio::time::interval_at(tokio::time::Instant::now() + keepalive, keepalive);
    keepalive.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let stream = futures_util::stream::unfold(
        (Some(first), Some(run), Some(cancel), keepalive),
        |(pending, run, cancel, mut keepalive)| async move {
            if let Some(b) = pending {
                return Some((Ok::<_, std::convert::Infallible>(b), (None, run, cancel, keepalive)));
            }
            let mut run = run?;
            let next = tokio::select! {
                biased;
                n = run.notifications.recv() => n.map(|b| frame(&b)),
                r = &mut run.response => {
                    // Whatever the handler sent before answering is queued
                    // already: it goes first. No response (the server shut
                    // down) ends the stream without one.
                    let mut out = BytesMut::new();
                    while let Some(b) = run.notifications.try_recv() {
                        out.extend_from_slice(&frame(&b));
                    }
                    out.extend_from_slice(&frame(r.ok()?.to_string().as_bytes()));
                    return Some((Ok(out.freeze()), (None, None, cancel, keepalive)));
                }
                // A comment line keeps a quiet stream (a listen stream)
                // from being closed by intermediaries for idleness.
                _ = keepalive.tick() => Some(Bytes::from_static(b":\n\n")),
            };
            match next {
                Some(b) => Some((Ok(b), (None, Some(run), cancel, keepalive))),
                // The handler dropped its context; only the response is left.
                None => {
                    let msg = run.response.await.ok()?;
                    Some((Ok(frame(msg.to_string().as_bytes())), (None, None, cancel, keepalive)))
                }
            }
        },
    );
    sse(Body::from_stream(stream))
}

fn sse(body: Body) -> Response {
    let mut r = Response::new(body);
    let h = r.headers_mut();
    h.insert(header::CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
    h.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    h.insert("x-accel-buffering", HeaderValue::from_static("no"));
    r
}

fn json_response(r: Result<Value, tokio::sync::oneshot::error::RecvError>) -> Response {
    match r {
        Ok(msg) => {
            let status = StatusCode::from_u16(status_of(&msg)).expect("a valid status");
            (status, axum::Json(msg)).into_response()
        }
        // No response comes only when the server shuts down (a cancelled
        // request's client is gone).
        Err(_) => (StatusCode::SERVICE_UNAVAILABLE, "the server is shutting down").into_response(),
    }
}

/// One SSE event without an id: a `data:` line per line of the message.
fn frame(message: &[u8]) -> Bytes {
    let mut out = BytesMut::with_capacity(message.len() + 16);
    for line in message.split(|&b| b == b'\n') {
        out.put_slice(b"data: ");
        out.put_slice(line.strip_suffix(b"\r").unwrap_or(line));
        out.put_u8(b'\n');
    }
    out.put_u8(b'\n');
    out.freeze()
}

/// The HTTP status of a 2026-07-28 response message: 404 for a method not
/// served, 400 for the revision's request errors (header mismatch, a
/// capability the client did not declare, a version not served), else 200
/// (an application's other errors travel in the body, as results do).
fn status_of(response: &Value) -> u16 {
    match response.get("error").and_then(|e| e.get("code")).and_then(Value::as_i64) {
        Some(code::METHOD_NOT_FOUND) => 404,
        Some(
            code::HEADER_MISMATCH | code::MISSING_CLIENT_CAPABILITY | code::UNSUPPORTED_PROTOCOL_VERSION,
        ) => 400,
        _ => 200,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn mirrored(version: &str, method: &str, name: Option<&str>) -> Mirrored {
        Mirrored {
            version: Some(HeaderValue::from_str(version).unwrap()),
            method: Some(HeaderValue::from_str(method).unwrap()),
            name: name.map(|n| HeaderValue::from_str(n).unwrap()),
            params: vec![],
            repeated: None,
        }
    }

    #[test]
    fn headers_must_mirror_the_body() {
        let call = json!({"name": "get_weather"});
        let ok = |h: Mirrored| check_headers(&h, "tools/call", &call, "2026-07-28");
        assert!(ok(mirrored("2026-07-28", "tools/call", Some("get_weather"))).is_ok());
        assert!(ok(mirrored(" 2026-07-28", "tools/call ", Some("  get_weather  "))).is_ok());
        // "get_weather" in the Base64 sentinel.
        assert!(ok(mirrored("2026-07-28", "tools/call", Some("=?base64?Z2V0X3dlYXRoZXI=?="))).is_ok());
        for bad in [
            mirrored("2025-11-25", "tools/call", Some("get_weather")),
            mirrored("2026-07-28", "TOOLS/CALL", Some("get_weather")),
            mirrored("2026-07-28", "tools/call", Some("other")),
            mirrored("2026-07-28", "tools/call", None),
            mirrored("2026-07-28", "tools/call", Some("=?base64?not base64?=")),
            Mirrored { method: None, ..mirrored("2026-07-28", "tools/call", Some("get_weather")) },
            Mirrored { version: None, ..mirrored("2026-07-28", "tools/call", Some("get_weather")) },
        ] {
            assert_eq!(ok(bad).unwrap_err().code, code::HEADER_MISMATCH);
        }
        // A method without a mirrored name needs none.
        assert!(check_headers(
            &mirrored("2026-07-28", "tools/list", None),
            "tools/list",
            &json!({}),
            "2026-07-28"
        )
        .is_ok());
        let read = json!({"uri": "file:///a b"});
        assert!(check_headers(
            &mirrored("2026-07-28", "resources/read", Some("file:///a b")),
            "resources/read",
            &read,
            "2026-07-28"
        )
        .is_ok());
    }

    #[test]
    fn mirrored_parameters_must_match_the_arguments() {
        let mirrors = [
            Mirror { header: "mcp-param-region".into(), path: vec!["region".into()] },
            Mirror { header: "mcp-param-n".into(), path: vec!["opts".into(), "n".into()] },
            Mirror { header: "mcp-param-on".into(), path: vec!["on".into()] },
        ];
        let with = |hs: &[(&str, &str)]| Mirrored {
            params: hs.iter().map(|(k, v)| ((*k).to_owned(), HeaderValue::from_str(v).unwrap())).collect(),
            ..mirrored("2026-07-28", "tools/call", None)
        };
        let args = json!({"region": "us-west1", "opts": {"n": 42}, "on": true});
        let all = [("mcp-param-region", "us-west1"), ("mcp-param-n", "42.0"), ("mcp-param-on", "true")];
        assert!(check_params(&with(&all), &mirrors, &args).is_ok());
        // Base64 of "us-west1"; absent and null values need no header.
        assert!(check_params(
            &with(&[("mcp-param-region", "=?base64?dXMtd2VzdDE=?=")]),
            &mirrors,
            &json!({"region": "us-west1", "on": null})
        )
        .is_ok());
        assert!(check_params(&with(&[("mcp-param-n", "1")]), &mirrors, &json!({})).is_ok());
        for (hs, why) in [
            (vec![("mcp-param-n", "42"), ("mcp-param-on", "true")], "missing"),
            (vec![("mcp-param-region", "eu"), ("mcp-param-n", "42"), ("mcp-param-on", "true")], "differs"),
            (
                vec![("mcp-param-region", "us-west1"), ("mcp-param-n", "41"), ("mcp-param-on", "true")],
                "number",
            ),
            (vec![("mcp-param-region", "us-west1"), ("mcp-param-n", "42"), ("mcp-param-on", "TRUE")], "bool"),
            (
                vec![
                    ("mcp-param-region", "=?base64?dXMtd2VzdDE?="),
                    ("mcp-param-n", "42"),
                    ("mcp-param-on", "true"),
                ],
                "unpadded",
            ),
        ] {
            assert_eq!(
                check_params(&with(&hs), &mirrors, &args).unwrap_err().code,
                code::HEADER_MISMATCH,
                "{why}"
            );
        }
    }

    #[test]
    fn frames_have_no_id_and_one_data_line_per_line() {
        assert_eq!(&frame(b"{\"a\":1}")[..], b"data: {\"a\":1}\n\n");
        assert_eq!(&frame(b"{\r\n\"a\":1}")[..], b"data: {\ndata: \"a\":1}\n\n");
    }

    #[test]
    fn statuses() {
        let e = |c: i64| json!({"error": {"code": c, "message": ""}});
        assert_eq!(status_of(&e(code::METHOD_NOT_FOUND)), 404);
        for c in [code::HEADER_MISMATCH, code::MISSING_CLIENT_CAPABILITY, code::UNSUPPORTED_PROTOCOL_VERSION]
        {
            assert_eq!(status_of(&e(c)), 400);
        }
        assert_eq!(status_of(&e(code::INVALID_PARAMS)), 200);
        assert_eq!(status_of(&json!({"result": {}})), 200);
    }
}
