//! A message of a session of the 2025 revisions (a POST, a WebSocket
//! frame, a legacy `messages` POST): a request runs on a stream of the
//! session's ring (its own, primed first and ended after the response; or
//! the legacy transport's shared one), a notification is the
//! application's (a cancel is the transport's).

use super::{builtin, Protocol};
use crate::backend::RequestAt;
use crate::host::{Host, RequestContext, SessionHandle, Via};
use crate::session::SessionState;
use crate::vocab::jsonrpc::{self, RpcError};
use crate::vocab::secret::SessionTag;
use gapless::StreamHandle;
use serde_json::Value;
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Handles a client notification (answered 202 over HTTP).
pub(crate) fn handle_notification(p: &Protocol, sess: &Arc<SessionState>, method: &str, params: &Value) {
    match method {
        "notifications/cancelled" => {
            if let Some(id) = params.get("requestId") {
                if !sess.cancel_request(id) {
                    // In a cluster the request may run on another node.
                    sess.store.cancel_elsewhere(&sess.session, id.clone());
                }
            }
        }
        _ => p.host.on_notification(method, params, &SessionHandle { sess: Arc::clone(sess) }),
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
async fn respond(
    sess: &SessionState,
    stream: &StreamHandle,
    own: bool,
    registered: Option<RequestAt>,
    msg: Value,
    reply: Reply,
) -> bool {
    let stored = sess.respond(stream, own, registered, &msg).await;
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

/// A request of a session, as the handler's task takes it.
pub(crate) struct Call {
    pub(crate) id: Value,
    pub(crate) method: String,
    pub(crate) params: Value,
    /// The headers of the HTTP request that carried it, if one did.
    pub(crate) headers: Option<Arc<http::HeaderMap>>,
}

/// Publishes the priming event (on a stream of its own) and spawns the
/// handler, which publishes the request's notifications and finally its
/// response on the stream (and hands the response to `reply`).
pub(crate) async fn start_request(
    p: &Protocol,
    sess: &Arc<SessionState>,
    target: RequestStream<'_>,
    req: Call,
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
    let Some(cancel) = sess.track_request(&req.id) else {
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
            respond(&sess, &stream, own, None, jsonrpc::response(&req.id, Err(e)), reply).await;
        });
        return;
    };
    let ctx = RequestContext {
        headers: req.headers.clone(),
        via: Via::Session { sess: Arc::clone(sess), stream: sess.session.pacer(stream) },
        progress_token: req.params.get("_meta").and_then(|m| m.get("progressToken")).cloned(),
        request_id: req.id.clone(),
        cancel: cancel.clone(),
    };
    // In a cluster, the node's open requests are in the store: if this node
    // dies, another answers them with an explicit error (`docs/SPEC.md` §8.6).
    let registered = sess.store.register_request(&sess.session, stream, own, &req.id).await;
    let span = tracing::info_span!(
        "request",
        session = %SessionTag::of_id(&sess.session.id()),
        id = %req.id,
        method = %req.method,
        stream = stream.id().0,
    );
    let run = Running { sess: Arc::clone(sess), stream: stream.clone(), own, registered, cancel };
    let host = Arc::clone(&p.host);
    tokio::spawn(tracing::Instrument::instrument(run.answer(host, req, ctx, reply), span));
}

/// A request of a session once its handler runs.
struct Running {
    sess: Arc<SessionState>,
    stream: StreamHandle,
    /// The stream is the request's own (ended after the response).
    own: bool,
    /// Where the request is registered in the cluster's store.
    registered: Option<RequestAt>,
    cancel: CancellationToken,
}

impl Running {
    /// The outcome (a built-in method's, else the application's), the
    /// response published, and the request forgotten. A cancelled request
    /// gets no response (MCP cancellation), also when its handler returned
    /// because it saw the cancellation (both can be ready at the same
    /// poll, and the select picks either).
    async fn answer(self, host: Arc<dyn Host>, req: Call, ctx: RequestContext, reply: Reply) {
        let Call { id, method, params, .. } = req;
        let own = builtin::on_session(&self.sess, &method, &params);
        // An application that forwards them answers `ping` and
        // `logging/setLevel` itself (the level is the session's already).
        let forwarded =
            host.forwards_session_methods() && matches!(&own, Some(Ok(_))) && method != "initialize";
        let outcome = match own.filter(|_| !forwarded) {
            Some(outcome) => Some(outcome),
            None => {
                let r = tokio::select! {
                    r = host.handle(method, params, ctx) => Some(r),
                    _ = self.cancel.cancelled() => None,
                };
                r.filter(|_| !self.cancel.is_cancelled())
            }
        };
        let (sess, stream) = (&self.sess, &self.stream);
        let stored = match outcome {
            Some(outcome) => {
                respond(sess, stream, self.own, self.registered, jsonrpc::response(&id, outcome), reply).await
            }
            None if self.own => sess.end_stream(stream).await.is_ok(),
            // Marked, then forgotten even if the mark failed: a
            // registration gone is answered by no reaper either.
            None => {
                sess.store.mark_cancelled(&sess.session, self.registered).await;
                true
            }
        };
        sess.untrack_request(&id);
        if let (Some(at), true) = (self.registered, stored) {
            sess.store.forget_request(&sess.session, at).await;
        }
    }
}
