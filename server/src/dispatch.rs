//! JSON-RPC dispatch: what the transport does with each message once the
//! HTTP layer (`http/`) has checked, parsed and classified it. Nothing here
//! knows about requests, headers or status codes; the same functions serve
//! a POST and a WebSocket frame.

use crate::app::AppState;
use crate::host::{RequestContext, SessionHandle, Via};
use crate::session::SessionState;
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
pub(crate) fn handle_notification(state: &AppState, sess: &Arc<SessionState>, method: &str, params: &Value) {
    match method {
        "notifications/cancelled" => {
            if let Some(id) = params.get("requestId") {
                if !sess.cancel_request(id) {
                    // In a cluster the request may run on another node.
                    sess.store.cancel_elsewhere(&sess.session, id.clone());
                }
            }
        }
        _ => state.host.on_notification(method, params, &SessionHandle { sess: Arc::clone(sess) }),
    }
}

/// Where a request's response goes besides its stream: a JSON-only
/// response takes it directly from the handler, so that its own
/// notifications can never evict it before it is written.
pub(crate) type Reply = Option<oneshot::Sender<Value>>;

/// Publishes the response message on the request's stream (ending the
/// stream when it is the request's own, `SessionState::respond`) and hands
/// it to `reply` if there is one. `false` when, in cluster mode, the
/// response could not be stored before the client-request timeout (the
/// request's registration then stays, so that the reaper answers it if
/// this node dies).
async fn respond(sess: &SessionState, stream: &StreamHandle, own: bool, msg: Value, reply: Reply) -> bool {
    let stored = sess.respond(stream, own, &msg).await;
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
    sess: &Arc<SessionState>,
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
        let _ = sess.publish_now(stream, None).await;
    }
    let Some(cancel) = sess.track_request(&id) else {
        // Over the session's cap: answered at once, the handler never runs.
        let max = sess.config.max_inflight_requests;
        let e = RpcError::new(
            jsonrpc::code::TOO_MANY_IN_FLIGHT,
            format!(
                "too many requests in flight on this session (at most {max}); retry when one has finished"
            ),
        );
        let (sess, stream) = (Arc::clone(sess), stream.clone());
        tokio::spawn(async move {
            respond(&sess, &stream, own, jsonrpc::response(&id, Err(e)), reply).await;
        });
        return;
    };
    let ctx = RequestContext {
        via: Via::Session { sess: Arc::clone(sess), stream: sess.session.pacer(stream) },
        progress_token: params.get("_meta").and_then(|m| m.get("progressToken")).cloned(),
        request_id: id.clone(),
        cancel: cancel.clone(),
    };
    // In a cluster, the node's open requests are in the store: if this node
    // dies, another answers them with an explicit error (`docs/SPEC.md` §8.5).
    let registered = own && sess.store.register_request(&sess.session, stream, &id).await;
    let host = Arc::clone(&state.host);
    let sess = Arc::clone(sess);
    let stream = stream.clone();
    let span = tracing::info_span!(
        "request",
        session = %crate::vocab::secret::SessionTag::of_id(&sess.session.id()),
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
                            sess.set_log_level(l);
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
                Some(outcome) => respond(&sess, &stream, own, jsonrpc::response(&id, outcome), reply).await,
                None if own => sess.end_stream(&stream).await.is_ok(),
                None => true,
            };
            sess.untrack_request(&id);
            if registered && stored {
                sess.store.forget_request(&sess.session, &stream).await;
            }
        },
        span,
    ));
}
