//! [`RequestContext`]: what a request's handler gets: its stream (a
//! session's ring, or a 2026-07-28 request's exchange), its cancellation,
//! the session or the request's own declarations, and the way to ask the
//! client for input or to become a task.

use super::handle::{log_on, SessionHandle};
use super::LogLevel;
use crate::session::SessionState;
use crate::sessionless::exchange::LOG_METHOD;
use crate::vocab::error::{ClientRequestError, SendError};
use crate::vocab::jsonrpc;
use bytes::Bytes;
use gapless::session::Pacer;
use gapless::Seq;
use serde_json::{json, Value};
use std::fmt;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// What a request handler gets: its stream, its cancellation, and the
/// session (2025 revisions) or the request's own declarations (MCP
/// 2026-07-28, which has no sessions: `docs/SPEC.md` §5.4).
pub struct RequestContext {
    pub(crate) via: Via,
    pub(crate) request_id: Value,
    pub(crate) progress_token: Option<Value>,
    pub(crate) cancel: CancellationToken,
    /// The headers of the HTTP request that carried it (none over a
    /// WebSocket or the legacy transport).
    pub(crate) headers: Option<Arc<http::HeaderMap>>,
}

/// Where a request's messages go.
pub(crate) enum Via {
    /// A request of a session (2025 revisions): its stream on the ring.
    Session {
        sess: Arc<SessionState>,
        /// Pacing handle of the request's own stream.
        stream: Pacer,
    },
    /// A request without a session (2026-07-28): its response stream, no
    /// ring.
    Exchange(Arc<crate::sessionless::exchange::Exchange>),
}

impl fmt::Debug for RequestContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestContext").field("request_id", &self.request_id).finish_non_exhaustive()
    }
}

impl RequestContext {
    /// The headers of the HTTP request that carried this request, as the
    /// client sent them (`Authorization`, `MCP-Protocol-Version`, the
    /// 2026-07-28 mirrors, anything else); `None` for a request that came
    /// over a WebSocket or the legacy transport. For an application that
    /// passes them on (a gateway).
    pub fn headers(&self) -> Option<&http::HeaderMap> {
        self.headers.as_deref()
    }

    /// The JSON-RPC id of the request being handled.
    pub fn request_id(&self) -> &Value {
        &self.request_id
    }

    /// `params._meta.progressToken`, if the client sent one.
    pub fn progress_token(&self) -> Option<&Value> {
        self.progress_token.as_ref()
    }

    /// The session, for a request of the 2025 revisions; `None` for a
    /// request of MCP 2026-07-28, which has no sessions (no standalone
    /// stream, nothing kept between requests by the protocol).
    pub fn session(&self) -> Option<SessionHandle> {
        match &self.via {
            Via::Session { sess, .. } => Some(SessionHandle { sess: Arc::clone(sess) }),
            Via::Exchange(_) => None,
        }
    }

    /// The protocol version this request is served on: the session's
    /// (negotiated at `initialize`), or the one the request declares in
    /// `_meta` (2026-07-28).
    pub fn protocol_version(&self) -> String {
        match &self.via {
            Via::Session { sess, .. } => sess.protocol_version(),
            Via::Exchange(x) => x.version.clone(),
        }
    }

    /// The client's capabilities: those its session's `initialize` declared,
    /// or those the request declares in `_meta` (2026-07-28). `None` where
    /// this process did not receive the session's `initialize` (a cluster
    /// node serving a session another node created).
    pub fn client_capabilities(&self) -> Option<Value> {
        match &self.via {
            Via::Session { sess, .. } => {
                sess.initialize_params().map(|p| p.get("capabilities").cloned().unwrap_or(json!({})))
            }
            Via::Exchange(x) => Some(x.capabilities.clone()),
        }
    }

    /// Publishes a notification on this request's stream (paced: waits while
    /// an attached client lags far behind; never when none is attached). On
    /// a 2026-07-28 request it goes on the request's response stream, which
    /// has no event ids; the `Seq` is then the message's position on it
    /// (1, 2, ...), and the call waits while the client reads slowly. In
    /// cluster mode the event is queued for the store and the `Seq` is 0
    /// (not allocated yet); a refusal of it is told to the next publish on
    /// the stream (`docs/SPEC.md` §8.8).
    ///
    /// On a 2026-07-28 request a `notifications/message` goes through the
    /// request's log level as [`RequestContext::log`] does (none declared:
    /// no log messages); one it withholds is dropped, and the `Seq` is 0
    /// (once the request became a task, `Closed` as for any notification).
    pub async fn notify(&self, method: &str, params: Value) -> Result<Seq, SendError> {
        if let Via::Exchange(x) = &self.via {
            if method == LOG_METHOD
                && !x.is_task()
                && x.withholds_log(params.get("level").and_then(Value::as_str))
            {
                return Ok(Seq(0));
            }
        }
        let msg = jsonrpc::notification(method, params);
        match &self.via {
            Via::Session { sess, stream } => sess.publish_json(stream, &msg).await,
            Via::Exchange(x) => x.send(Bytes::from(msg.to_string())).await,
        }
    }

    /// Publishes raw, already serialized JSON-RPC bytes on this request's
    /// stream (paced). The caller guarantees they are one JSON message.
    /// The ring's budget counts their length: make them from a `Vec` with
    /// `gapless::ring::exact_bytes`.
    ///
    /// On a 2026-07-28 request a `notifications/message` goes through the
    /// request's log level as [`RequestContext::notify`] says (the message
    /// is parsed for its method, then a log message for its level).
    pub async fn notify_raw(&self, message: Bytes) -> Result<Seq, SendError> {
        match &self.via {
            Via::Session { sess, stream } => sess.publish_bytes(stream, message).await,
            Via::Exchange(x) if !x.is_task() && x.withholds_raw(&message) => Ok(Seq(0)),
            Via::Exchange(x) => x.send(message).await,
        }
    }

    /// Sends `notifications/message` on this request's stream if the log
    /// level lets it through (`Ok(None)` when filtered): the session's
    /// (`logging/setLevel`), or on a 2026-07-28 request the one its `_meta`
    /// names, where no level means no log messages at all.
    pub async fn log(
        &self,
        level: LogLevel,
        logger: Option<&str>,
        data: Value,
    ) -> Result<Option<Seq>, SendError> {
        match &self.via {
            Via::Session { sess, stream } => log_on(sess, stream, level, logger, data).await,
            Via::Exchange(x) => {
                if x.withholds_log(Some(level.as_str())) {
                    return Ok(None);
                }
                x.send(super::handle::log_message(level, logger, &data)).await.map(Some)
            }
        }
    }

    /// Sends `notifications/progress` if the client asked for progress
    /// (`Ok(None)` when it sent no progress token).
    pub async fn progress(
        &self,
        progress: f64,
        total: Option<f64>,
        message: Option<&str>,
    ) -> Result<Option<Seq>, SendError> {
        let Some(token) = &self.progress_token else { return Ok(None) };
        let mut p = json!({"progressToken": token, "progress": progress});
        if let Some(t) = total {
            p["total"] = json!(t);
        }
        if let Some(m) = message {
            p["message"] = json!(m);
        }
        self.notify("notifications/progress", p).await.map(Some)
    }

    /// Sends a request to the client (e.g. `sampling/createMessage`,
    /// `elicitation/create`, `roots/list`) and waits for its result. On a
    /// session (2025 revisions) it goes on this request's stream and the
    /// response comes POSTed back (or over the WebSocket). On a 2026-07-28
    /// request it is [`RequestContext::ask`] with one input request of its
    /// own key: see there.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ClientRequestError> {
        match &self.via {
            Via::Session { sess, stream } => sess.client_request(stream, method, params, &self.cancel).await,
            Via::Exchange(x) => {
                let key = x.next_key(method);
                let asked =
                    serde_json::Map::from_iter([(key.clone(), json!({"method": method, "params": params}))]);
                let mut answers = x.ask(&asked).await?;
                answers.remove(&key).ok_or(ClientRequestError::Cancelled)
            }
        }
    }

    /// Asks the client for several inputs at once, `{key: {"method", "params"}}`
    /// (methods `elicitation/create`, `sampling/createMessage`, `roots/list`),
    /// and returns their results by key.
    ///
    /// On a session (2025 revisions) each is a server → client request, sent
    /// together; the first failure is the error. On a request of MCP
    /// 2026-07-28 (input-required results, SEP-2322) the request itself must
    /// bring the answers: if it does not, this attempt ends here (the call
    /// never returns) and the client gets an input-required result naming
    /// the missing inputs, with what earlier rounds answered sealed in its
    /// `requestState`. The client's retry runs the handler again from the
    /// start, where the same calls in the same order return the answers at
    /// once. So a handler that asks must reach its asks the same way on
    /// every attempt, and what it did before an ask it does again. Asking
    /// for what the client did not declare (its `elicitation`, `sampling` or
    /// `roots` capability) ends the attempt with -32021; asking from a
    /// method other than `tools/call`, `prompts/get` and `resources/read` is
    /// [`ClientRequestError::Unsupported`].
    pub async fn ask(
        &self,
        requests: serde_json::Map<String, Value>,
    ) -> Result<serde_json::Map<String, Value>, ClientRequestError> {
        match &self.via {
            Via::Session { sess, stream } => {
                let asks = requests.iter().map(|(key, r)| {
                    let method = r.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let params = r.get("params").cloned().unwrap_or(json!({}));
                    async move {
                        let v = sess.client_request(stream, &method, params, &self.cancel).await?;
                        Ok::<_, ClientRequestError>((key.clone(), v))
                    }
                });
                futures_util::future::try_join_all(asks).await.map(serde_json::Map::from_iter)
            }
            Via::Exchange(x) => x.ask(&requests).await,
        }
    }

    /// Makes this request a task (the tasks extension of MCP 2026-07-28,
    /// `docs/SPEC.md` §5.5): the task's record is stored first, then the
    /// client gets the `CreateTaskResult` as the response, and the handler
    /// goes on; what it returns becomes the task's result (an `Err`, its
    /// error: status `failed`). After this, [`RequestContext::ask`] and
    /// [`RequestContext::request`] put their input requests in the task
    /// (`tasks/get` shows them, `tasks/update` answers them) and wait;
    /// notifications have nowhere to go ([`SendError::Closed`]); the task's
    /// `tasks/cancel`, expiry or the server's shutdown stop the handler
    /// (it is dropped; [`RequestContext::cancelled`] resolves for what it
    /// spawned). Returns the task id.
    ///
    /// Only a `tools/call` of MCP 2026-07-28 whose client declared the
    /// extension on this request can become a task: else
    /// [`crate::tasks::TaskError::NotDeclared`], and the handler serves the
    /// call itself or refuses it with [`crate::tasks::required`] (-32021).
    /// Input asked before this call is asked the 2026-07-28 way
    /// (input-required results), so a tool resolves it before it becomes a
    /// task.
    pub async fn create_task(
        &self,
        options: crate::tasks::TaskOptions,
    ) -> Result<String, crate::tasks::TaskError> {
        match &self.via {
            Via::Session { .. } => Err(crate::tasks::TaskError::NotDeclared(
                "tasks are served to MCP 2026-07-28 requests only; this request is of a session".into(),
            )),
            Via::Exchange(x) => x.create_task(&options).await,
        }
    }

    /// Emits an event of this request's task on its event stream (the
    /// tasks extension's resumable event streams, SEP-2694, draft;
    /// `docs/SPEC.md` §5.6): a client's `tasks/stream` gets it as
    /// `notifications/tasks/event` with `type` `kind` and `payload`, now if
    /// it follows the task, or in a replay later, within the stream's
    /// bounds. Returns the event's seq (0 for the first, then one more
    /// each).
    ///
    /// `kind` must be vendor-prefixed (`com.example.step`: at least three
    /// dot-separated labels; unprefixed types are MCP's to define) and
    /// `payload` a JSON object within [`crate::ServerConfig::max_task_event_bytes`];
    /// else nothing is sent and the error says why. Only after
    /// [`RequestContext::create_task`] made the request a task, until the
    /// task is terminal.
    pub fn emit_task_event(&self, kind: &str, payload: Value) -> Result<u64, crate::tasks::TaskEventError> {
        match &self.via {
            Via::Session { .. } => Err(crate::tasks::TaskEventError::NotATask),
            Via::Exchange(x) => x.emit_task_event(kind, &payload),
        }
    }

    /// Announces `change` to every open `subscriptions/listen` stream of MCP
    /// 2026-07-28 that listens to it, as [`crate::McpServer::announce`] does.
    pub fn announce(&self, change: crate::vocab::change::Change) {
        let changes = match &self.via {
            Via::Session { sess, .. } => &sess.changes,
            Via::Exchange(x) => &x.changes,
        };
        changes.announce(change);
    }

    /// Whether the client cancelled this request (`notifications/cancelled`,
    /// or on 2026-07-28 by closing the response stream) or the session
    /// ended.
    pub fn is_cancelled(&self) -> bool {
        self.cancel.is_cancelled()
    }

    /// Resolves when [`RequestContext::is_cancelled`] becomes true.
    pub async fn cancelled(&self) {
        self.cancel.cancelled().await
    }

    /// Ends the HTTP connection currently carrying this request's stream
    /// once the client has received what was published so far (SEP-1699
    /// polling): the client reconnects with `Last-Event-ID` and the rest of
    /// the stream is replayed there. Does nothing on a 2026-07-28 request,
    /// whose stream cannot be resumed (closing it would cancel the request).
    pub async fn close_sse_stream(&self) {
        if let Via::Session { sess, stream } = &self.via {
            sess.close_stream_connection(stream.stream()).await
        }
    }
}
