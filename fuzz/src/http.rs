//! What the `http_router` target needs besides the reference decision table
//! ([`crate::decide`]) and ring ([`crate::model_ring`]): a small deterministic
//! [`Host`], an SSE frame parser, and the shape of a refusal's JSON body
//! (`docs/SPEC.md` §5).
//!
//! The host's tools publish only what their arguments say, and every
//! payload names the request that published it, so the target's model knows
//! each stream's events byte for byte:
//!
//! | tool | publishes on its request's stream (or `standalone`) | then |
//! |---|---|---|
//! | `emit {n, tag, standalone}` | `n` × [`notification`]`(tag, i)` | answers `{"emitted": n}` |
//! | `hold {n, tag}` | `n` × [`notification`]`(tag, i)` | waits until cancelled (no answer) |
//! | `ask {tag}` | one server → client request `sampling/createMessage` | answers `{"answer": <the client's result>}`, or error -32000 for a client error |
//!
//! Any other tool is -32602 and any other method -32601. Nothing waits on
//! a timer, so on a current-thread runtime a tool runs to its end (or to its
//! wait) the first time it is polled.

use bytes::Bytes;
use futures_util::future::BoxFuture;
use gapless::ErrorKind;
use gapless_server::{ClientRequestError, Host, RequestContext, RpcError};
use serde_json::{json, Value};

/// Most events one `emit` or `hold` publishes.
pub const MAX_EMIT: u64 = 24;

/// Error code of an `ask` whose client answered with an error.
pub const ASK_CLIENT_ERROR: i64 = -32000;

/// The exact payload of the `i`-th notification of the request tagged `tag`.
pub fn notification(tag: &str, i: u64) -> Bytes {
    Bytes::from(format!(
        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","data":"{tag}.{i}"}}}}"#
    ))
}

/// `serverInfo` of [`FuzzHost`].
pub fn server_info() -> Value {
    json!({"name": "gapless-fuzz", "version": "0"})
}

/// `capabilities` of [`FuzzHost`].
pub fn capabilities() -> Value {
    json!({"tools": {}})
}

/// The target's application (see the module docs).
#[derive(Debug, Default, Clone, Copy)]
pub struct FuzzHost;

impl Host for FuzzHost {
    fn server_info(&self) -> Value {
        server_info()
    }

    /// The reference model is of the session era's rules only.
    fn serves_sessionless(&self) -> bool {
        false
    }

    fn capabilities(&self) -> Value {
        capabilities()
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin(async move {
            if method != "tools/call" {
                return Err(RpcError::method_not_found(&method));
            }
            let args = &params["arguments"];
            let n = args["n"].as_u64().unwrap_or(0).min(MAX_EMIT);
            let tag = args["tag"].as_str().unwrap_or("").to_owned();
            let failed = |e: gapless_server::SendError| RpcError::new(-32603, e.to_string());
            match params["name"].as_str().unwrap_or("") {
                "emit" => {
                    let standalone = args["standalone"].as_bool() == Some(true);
                    for i in 1..=n {
                        let sent = if standalone {
                            // `serves_sessionless` is false: every request has one.
                            ctx.session().expect("a session's request").notify_raw(notification(&tag, i)).await
                        } else {
                            ctx.notify_raw(notification(&tag, i)).await
                        };
                        sent.map_err(failed)?;
                    }
                    Ok(json!({"emitted": n}))
                }
                "hold" => {
                    for i in 1..=n {
                        ctx.notify_raw(notification(&tag, i)).await.map_err(failed)?;
                    }
                    // The transport drops this future when the request is
                    // cancelled or the session ends.
                    std::future::pending().await
                }
                "ask" => match ctx.request("sampling/createMessage", json!({"tag": tag})).await {
                    Ok(v) => Ok(json!({"answer": v})),
                    Err(ClientRequestError::Error(_)) => Err(RpcError::new(ASK_CLIENT_ERROR, "client error")),
                    // The transport's own select drops this future on a
                    // cancellation; never race it with an answer.
                    Err(ClientRequestError::Cancelled) => std::future::pending().await,
                    Err(e) => Err(RpcError::new(-32001, e.to_string())),
                },
                _ => Err(RpcError::invalid_params("no such tool")),
            }
        })
    }
}

/// One SSE event of a response body.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SseEvent {
    /// The `id:` field.
    pub id: Option<String>,
    /// The `retry:` field.
    pub retry: Option<u64>,
    /// The `data:` lines, joined by `\n`.
    pub data: String,
}

/// What one body chunk holds.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Chunk {
    /// Its events, in order.
    pub events: Vec<SseEvent>,
    /// Comment lines (keep-alives).
    pub comments: usize,
}

/// Parses one chunk of a gapless SSE body. The server writes whole events
/// per chunk, so a chunk that does not end with a blank line, or holds a
/// line that is no SSE field gapless writes, is an error.
pub fn parse_chunk(bytes: &[u8]) -> Result<Chunk, String> {
    let text = std::str::from_utf8(bytes).map_err(|e| format!("chunk is not UTF-8: {e}"))?;
    if !text.ends_with("\n\n") {
        return Err(format!("chunk does not end with a blank line: {text:?}"));
    }
    let mut chunk = Chunk::default();
    for block in text[..text.len() - 2].split("\n\n") {
        let mut ev = SseEvent { id: None, retry: None, data: String::new() };
        let (mut has_data, mut is_event) = (false, false);
        for line in block.split('\n') {
            if line.starts_with(':') {
                chunk.comments += 1;
                continue;
            }
            is_event = true;
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "id" => ev.id = Some(value.to_owned()),
                "retry" => ev.retry = Some(value.parse().map_err(|_| format!("bad retry line {line:?}"))?),
                "data" => {
                    if has_data {
                        ev.data.push('\n');
                    }
                    ev.data.push_str(value);
                    has_data = true;
                }
                _ => return Err(format!("unexpected SSE line {line:?} in {text:?}")),
            }
        }
        if is_event {
            if !has_data {
                return Err(format!("SSE event without data: {block:?}"));
            }
            chunk.events.push(ev);
        }
    }
    Ok(chunk)
}

/// What a refusal's body says.
#[derive(Clone, Debug, PartialEq)]
pub enum Refused {
    /// `{"error": kind, "message": ..., ...}` with the kind's status.
    Kind(ErrorKind, serde_json::Map<String, Value>),
    /// A JSON-RPC error response (an invalid JSON-RPC message, §5).
    JsonRpc(i64),
}

/// Checks a 4xx/5xx response against §5: a JSON body `{"error": "<kind>",
/// "message": "<text>", ...}` whose kind is one of the contract's and whose
/// status is that kind's, or (`jsonrpc_ok`, a POST of a JSON body that is
/// no JSON-RPC message) a JSON-RPC error response with status 400.
pub fn check_refusal(
    status: u16,
    content_type: Option<&str>,
    body: &[u8],
    jsonrpc_ok: bool,
) -> Result<Refused, String> {
    if content_type != Some("application/json") {
        return Err(format!("refusal {status} has content type {content_type:?}, body {:?}", lossy(body)));
    }
    let v: Value = serde_json::from_slice(body)
        .map_err(|e| format!("refusal {status} body is not JSON ({e}): {:?}", lossy(body)))?;
    let Value::Object(m) = v else { return Err(format!("refusal {status} body is not an object: {v}")) };
    if let Some(err) = m.get("error").and_then(Value::as_str) {
        let kind =
            ErrorKind::from_wire(err).ok_or_else(|| format!("refusal {status}: unknown kind {err:?}"))?;
        if kind.http_status() != status {
            return Err(format!(
                "refusal kind {err} has status {status}, the contract says {}",
                kind.http_status()
            ));
        }
        if !m.get("message").is_some_and(Value::is_string) {
            return Err(format!("refusal {status} {err} without a string message: {m:?}"));
        }
        return Ok(Refused::Kind(kind, m));
    }
    if jsonrpc_ok
        && status == 400
        && m.get("jsonrpc") == Some(&json!("2.0"))
        && m.get("id") == Some(&Value::Null)
    {
        if let Some(code) = m.get("error").and_then(|e| e.get("code")).and_then(Value::as_i64) {
            if m["error"].get("message").is_some_and(Value::is_string) {
                return Ok(Refused::JsonRpc(code));
            }
        }
    }
    Err(format!("refusal {status} body has no contract shape: {}", Value::Object(m)))
}

/// A body for messages.
pub fn lossy(b: &[u8]) -> String {
    String::from_utf8_lossy(&b[..b.len().min(300)]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks() {
        let c = parse_chunk(b"id: a_2-1\nretry: 1000\ndata:\n\nid: a_2-2\ndata: {}\n\n").unwrap();
        assert_eq!(c.events.len(), 2);
        assert_eq!(
            c.events[0],
            SseEvent { id: Some("a_2-1".into()), retry: Some(1000), data: String::new() }
        );
        assert_eq!(c.events[1].data, "{}");
        assert_eq!(parse_chunk(b": keep-alive\n\n").unwrap(), Chunk { events: vec![], comments: 1 });
        assert!(parse_chunk(b"id: x\n").is_err());
    }
}
