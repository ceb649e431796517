//! JSON-RPC dispatch: what the transport does with each message once the
//! HTTP layer (`http/`) has checked, parsed and classified it. Nothing here
//! knows about requests, headers or status codes; the same functions serve
//! a POST and a WebSocket frame.

use crate::host::{RequestContext, SessionHandle, Via};
use crate::state::{AppState, Conn};
use crate::vocab::jsonrpc::{self, RpcError};
use crate::vocab::log_level::LogLevel;
use gapless::StreamHandle;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::oneshot;

/// The `initialize` result for a session on `version`.
pub(crate) fn initialize_result(state: &AppState, version: &str) -> Value {
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": state.host.capabilities(),
        "serverInfo": state.host.server_info(),
    });
    if let Some(i) = state.host.instructions() {
        result["instructions"] = json!(i);
    }
    result
}

/// Handles a client notification (answered 202 over HTTP).
pub(crate) fn handle_notification(state: &AppState, conn: &Arc<Conn>, method: &str, params: &Value) {
    match method {
        "notifications/cancelled" => {
            if let Some(id) = params.get("requestId") {
                if !conn.cancel_request(id) {
                    // In a cluster the request may run on another node.
                    if let Some(c) = &conn.cluster {
                        let (c, sid, id) = (Arc::clone(c), conn.session.id().to_string(), id.clone());
                        tokio::spawn(async move {
                            c.broadcast(&crate::cluster::BusMessage::Cancel { sid, id }).await;
                        });
                    }
                }
            }
        }
        _ => state.host.on_notification(method, params, &SessionHandle { conn: Arc::clone(conn) }),
    }
}

/// Where a request's response goes besides its stream: a JSON-only
/// response takes it directly from the handler, so that its own
/// notifications can never evict it before it is written.
pub(crate) type Reply = Option<oneshot::Sender<Value>>;

/// Publishes the response message on the request's stream (ending the
/// stream when it is the request's own) and hands it to `reply` if there is
/// one. In cluster mode the answer and the end are one idempotent step in
/// the store, retried while the store is down (a response never stored
/// would leave the stream without an end) until the client-request timeout.
/// Returns `false` when, in cluster mode, the response could not be
/// stored before the client-request timeout (the request's registration
/// then stays, so that the reaper answers it if this node dies).
async fn respond(conn: &Conn, stream: &StreamHandle, own: bool, msg: Value, reply: Reply) -> bool {
    let mut stored = true;
    if conn.cluster.is_some() && own {
        let deadline = tokio::time::Instant::now() + conn.config.client_request_timeout;
        loop {
            match conn.answer(stream, &msg).await {
                Err(crate::vocab::error::SendError::Refused(e)) if tokio::time::Instant::now() < deadline => {
                    tracing::warn!(session = %crate::vocab::secret::SessionTag::of_id(&conn.session.id()), error = %e, "response not stored yet; retrying");
                    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
                }
                Err(crate::vocab::error::SendError::Refused(e)) => {
                    tracing::error!(session = %crate::vocab::secret::SessionTag::of_id(&conn.session.id()), error = %e, "response not stored; giving up");
                    stored = false;
                    break;
                }
                _ => break,
            }
        }
    } else {
        let _ = conn.publish_now(stream, Some(&msg)).await;
        if own {
            let _ = conn.end_stream(stream).await;
        }
    }
    if let Some(tx) = reply {
        let _ = tx.send(msg);
    }
    stored
}

/// Which stream a request's events go on.
#[derive(Clone, Copy, Debug)]
pub(crate) enum RequestStream<'a> {
    /// Its own (Streamable HTTP, the socket): primed first, ended after the
    /// response.
    Own(&'a StreamHandle),
    /// One it shares with the session's other requests (the legacy
    /// HTTP+SSE stream): no priming event, never ended by the request.
    Shared(&'a StreamHandle),
}

/// Publishes the priming event (on a stream of its own) and spawns the
/// handler, which publishes the request's notifications and finally its
/// response on the stream (and hands the response to `reply`).
pub(crate) async fn start_request(
    state: &AppState,
    conn: &Arc<Conn>,
    target: RequestStream<'_>,
    id: Value,
    method: String,
    params: Value,
    reply: Reply,
) {
    let (stream, own) = match target {
        RequestStream::Own(s) => (s, true),
        RequestStream::Shared(s) => (s, false),
    };
    // Before the response subscribes to the stream (the caller does that
    // when this returns): a subscription that begins at the priming event
    // is not ended by other streams' evictions before it reads it.
    if own {
        let _ = conn.publish_now(stream, None).await;
    }
    let Some(cancel) = conn.start_request(&id) else {
        // Over the session's cap: answered at once, the handler never runs.
        let max = conn.config.max_inflight_requests;
        let e = RpcError::new(
            jsonrpc::code::TOO_MANY_IN_FLIGHT,
            format!(
                "too many requests in flight on this session (at most {max}); retry when one has finished"
            ),
        );
        let (conn, stream) = (Arc::clone(conn), stream.clone());
        tokio::spawn(async move {
            respond(&conn, &stream, own, jsonrpc::response(&id, Err(e)), reply).await;
        });
        return;
    };
    let ctx = RequestContext {
        via: Via::Session { conn: Arc::clone(conn), stream: conn.session.pacer(stream) },
        progress_token: params.get("_meta").and_then(|m| m.get("progressToken")).cloned(),
        request_id: id.clone(),
        cancel: cancel.clone(),
    };
    // In a cluster, the node's open requests are in the store: if this node
    // dies, another answers them with an explicit error (`docs/SPEC.md` §8.5).
    let registered = match (&conn.cluster, own) {
        (Some(c), true) => {
            let r = c.store.register_request(&c.node, &conn.session.id(), stream.id(), &id.to_string()).await;
            if let Err(e) = &r {
                tracing::warn!(session = %crate::vocab::secret::SessionTag::of_id(&conn.session.id()), error = %e, "request not registered in the store");
            }
            // Even a failed registration may have reached the primary (a
            // write no replica acknowledged): forget it when done.
            true
        }
        _ => false,
    };
    let host = Arc::clone(&state.host);
    let conn = Arc::clone(conn);
    let stream = stream.clone();
    let span = tracing::info_span!(
        "request",
        session = %crate::vocab::secret::SessionTag::of_id(&conn.session.id()),
        id = %id,
        method = %method,
        stream = stream.id().0,
    );
    tokio::spawn(tracing::Instrument::instrument(
        async move {
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
                    let r = tokio::select! {
                        r = fut => Some(r),
                        _ = cancel.cancelled() => None,
                    };
                    // Cancelled: no response is sent (MCP cancellation),
                    // also when the handler returned because it saw the
                    // cancellation (both can be ready at the same poll, and
                    // the select picks either).
                    r.filter(|_| !cancel.is_cancelled())
                }
            };
            let stored = match outcome {
                Some(outcome) => respond(&conn, &stream, own, jsonrpc::response(&id, outcome), reply).await,
                None if own => conn.end_stream(&stream).await.is_ok(),
                None => true,
            };
            conn.finish_request(&id);
            if let (true, true, Some(c)) = (registered, stored, &conn.cluster) {
                let _ = c.store.finish_request(&c.node, &conn.session.id(), stream.id()).await;
            }
        },
        span,
    ));
}
