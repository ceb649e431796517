//! [`RmcpHost`]: gapless-server's [`Host`] around an rmcp `ServerHandler`.
//!
//! How an rmcp handler runs on gapless:
//!
//! - **A handler per 2026-07-28 request.** That revision has no session:
//!   each of its requests runs on a handler the factory makes for it alone,
//!   with a peer of its own (below) that holds the request's protocol
//!   version, capabilities and `clientInfo`; rmcp's peer refuses
//!   server → client requests on that version, so such a handler asks for
//!   input by returning rmcp's `InputRequiredResult`.
//! - **One handler per session.** The factory runs when a session's first
//!   request or notification arrives (gapless answers `initialize` itself,
//!   from the handler's `get_info`), and the handler lives until the session
//!   ends ([`SessionHandle::closed`]). If that first message is not
//!   `notifications/initialized` (in cluster mode it may have gone to
//!   another node), the handler gets an `on_initialized` anyway (run, as
//!   rmcp runs every notification handler, in a task of its own).
//! - **A session-wide rmcp service** (`serve_directly` on the shared handler,
//!   over an in-memory [`link`](crate::link)) gets the client's
//!   notifications (`notifications/initialized` → `on_initialized`, roots
//!   changes, …), and its `Peer` — the one a `NotificationContext` carries —
//!   sends on the session's standalone stream: notifications, and
//!   server → client requests whose responses come back through
//!   [`SessionHandle::request`].
//! - **A peer per request.** rmcp's own streamable server sends a handler's
//!   `notifications/message` on the standalone stream, because its `Peer`
//!   carries nothing that names the request (only server → client requests
//!   carry an `OriginatingRequestId`, from a task-local, and progress is
//!   routed by its token). Here each request's `RequestContext` gets a
//!   `Peer` of its own: a second rmcp service loop, with a handler that is
//!   never called, whose every message belongs to that request. Its
//!   notifications (logging, progress, anything else) go on the request's
//!   own gapless stream, so they are replayed with it; its server → client
//!   requests (sampling, elicitation, roots) go through
//!   [`RequestContext::request`] and their responses back into the loop.
//!   The request's handler runs as `handle_request` on the session's
//!   handler, with that context; its result or error is the response.
//! - **Cancellation.** The rmcp context's `ct` is cancelled when gapless
//!   cancels the request (`notifications/cancelled`, or the session ended):
//!   the handler runs in a task of its own, so it sees the token and may
//!   stop; whatever it returns then is dropped, as MCP says.
//!
//! What differs from rmcp's own transport: a handler's `initialize`,
//! `ping` and `set_level` are not called (gapless answers them; the log
//! level filters the handler's `notifications/message` by their `level`); a
//! `Peer` kept from a request's context stops working when the request has
//! been answered (use the one `on_initialized` gets for later messages); the
//! client's `initialize` params reach the handler's peer only on the process
//! that received the `initialize` (in cluster mode another node's peer has
//! none).

use crate::link::{self, LinkError, Outbound, Publisher};
use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesUnordered, StreamExt};
use gapless_server::jsonrpc::code::INTERNAL_ERROR;
use gapless_server::{
    ClientRequestError, Host, LogLevel, RequestContext, RpcError, SendError, SessionHandle,
};
use rmcp::model::{
    ClientJsonRpcMessage, GetExtensions, GetMeta, InitializeRequestParams, JsonRpcMessage, JsonRpcRequest,
    ServerConfig as InitializeInfo, ServerJsonRpcMessage,
};
use rmcp::service::{serve_directly, RequestContext as RmcpContext, RoleServer, RunningService};
use rmcp::{ServerHandler, Service};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A factory of rmcp handlers, one per session, as rmcp's own
/// `StreamableHttpService::new` takes it.
pub trait HandlerFactory<S>: Fn() -> Result<S, std::io::Error> + Send + Sync + 'static {}
impl<S, F: Fn() -> Result<S, std::io::Error> + Send + Sync + 'static> HandlerFactory<S> for F {}

/// gapless-server's [`Host`] around the rmcp handlers a factory makes: mount
/// it with [`gapless_server::McpServer::builder`] for every builder option
/// (caller identity, a cluster store), or use
/// [`StreamableHttpService`](crate::StreamableHttpService), which does so.
pub struct RmcpHost<S: ServerHandler> {
    inner: Arc<Inner<S>>,
}

impl<S: ServerHandler> fmt::Debug for RmcpHost<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RmcpHost")
            .field("server_info", &self.inner.info.server_info)
            .field("sessions", &lock(&self.inner.sessions).len())
            .finish()
    }
}

struct Inner<S: ServerHandler> {
    factory: Box<dyn Fn() -> Result<S, std::io::Error> + Send + Sync>,
    /// The `initialize` result's parts, from one handler's `get_info` when
    /// the host was made.
    info: InitializeInfo,
    /// The live sessions' handlers, by session id. Written when a session's
    /// first message arrives and when it ends.
    sessions: Mutex<HashMap<String, Arc<Session<S>>>>,
}

/// One session's handler and its session-wide rmcp service.
struct Session<S: ServerHandler> {
    handler: Arc<S>,
    /// The client's `initialize` params, when this process received them.
    client: Option<InitializeRequestParams>,
    /// Into the session-wide service: the client's notifications, responses
    /// to the requests its peer sent.
    inbound: tokio::sync::mpsc::UnboundedSender<Box<ClientJsonRpcMessage>>,
    /// Dropping it stops the service loop.
    _service: RunningService<RoleServer, Arc<S>>,
}

impl<S: ServerHandler> RmcpHost<S> {
    /// A host whose sessions each get a handler from `factory`. The factory
    /// runs once now, for the `initialize` result (capabilities, server
    /// info, instructions: the handler's `get_info`), and its error is
    /// returned.
    pub fn new(factory: impl HandlerFactory<S>) -> Result<Self, std::io::Error> {
        let info = factory()?.get_info();
        Ok(RmcpHost {
            inner: Arc::new(Inner { factory: Box::new(factory), info, sessions: Mutex::default() }),
        })
    }

    /// How many sessions have a live handler (for tests and metrics).
    pub fn live_sessions(&self) -> usize {
        lock(&self.inner.sessions).len()
    }
}

impl<S: ServerHandler> Clone for RmcpHost<S> {
    fn clone(&self) -> Self {
        RmcpHost { inner: Arc::clone(&self.inner) }
    }
}

impl<S: ServerHandler> Host for RmcpHost<S> {
    fn server_info(&self) -> Value {
        serde_json::to_value(&self.inner.info.server_info).unwrap_or_else(|_| json!({}))
    }

    fn capabilities(&self) -> Value {
        serde_json::to_value(&self.inner.info.capabilities).unwrap_or_else(|_| json!({}))
    }

    fn instructions(&self) -> Option<String> {
        self.inner.info.instructions.clone()
    }

    /// An rmcp handler runs its own rounds on 2026-07-28 (it returns rmcp's
    /// `InputRequiredResult` and reads `inputResponses` and `requestState`).
    fn seals_request_state(&self) -> bool {
        false
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        let inner = Arc::clone(&self.inner);
        Box::pin(async move { inner.call(method, params, ctx).await })
    }

    fn on_notification(&self, method: &str, params: &Value, session: &SessionHandle) {
        let msg = message(None, method, params);
        let parsed = match serde_json::from_value::<ClientJsonRpcMessage>(msg) {
            Ok(m @ JsonRpcMessage::Notification(_)) => m,
            Ok(_) | Err(_) => {
                tracing::debug!(method, "client notification rmcp does not know; dropped");
                return;
            }
        };
        match Inner::session(&self.inner, session, method == "notifications/initialized") {
            Ok(s) => {
                let _ = s.inbound.send(Box::new(parsed));
            }
            Err(e) => tracing::warn!(error = %e.message, "no handler for the session"),
        }
    }
}

/// A JSON-RPC message as rmcp parses it (no `params` key when there are
/// none, as a client sends it).
fn message(id: Option<&Value>, method: &str, params: &Value) -> Value {
    let mut m = json!({"jsonrpc": "2.0", "method": method});
    if let Some(id) = id {
        m["id"] = id.clone();
    }
    if !params.is_null() {
        m["params"] = params.clone();
    }
    m
}

fn rpc_error(e: rmcp::ErrorData) -> RpcError {
    RpcError { code: i64::from(e.code.0), message: e.message.into_owned(), data: e.data }
}

impl<S: ServerHandler> Inner<S> {
    /// The session's handler, made (with its session-wide service) on the
    /// session's first message.
    /// `initialized`: the message that makes it is the client's
    /// `notifications/initialized`.
    fn session(
        me: &Arc<Self>,
        handle: &SessionHandle,
        initialized: bool,
    ) -> Result<Arc<Session<S>>, RpcError> {
        let id = handle.id();
        let mut sessions = lock(&me.sessions);
        if let Some(s) = sessions.get(&id) {
            return Ok(Arc::clone(s));
        }
        if handle.is_closed() {
            return Err(RpcError::new(INTERNAL_ERROR, "the session ended"));
        }
        let handler =
            Arc::new((me.factory)().map_err(|e| {
                RpcError::new(INTERNAL_ERROR, format!("the rmcp handler factory failed: {e}"))
            })?);
        // As negotiated, not as asked: rmcp's peer decides by it (e.g. no
        // server → client requests on 2026-07-28, which gapless does not serve).
        let client = handle.initialize_params().and_then(|mut p| {
            p["protocolVersion"] = json!(handle.protocol_version());
            serde_json::from_value::<InitializeRequestParams>(p).ok()
        });
        let (transport, link) = link::pair(Arc::new(handle.clone()));
        let service = serve_directly(Arc::clone(&handler), transport, client.clone());
        let session = Arc::new(Session { handler, client, inbound: link.inbound.clone(), _service: service });
        if !initialized {
            // The client's `notifications/initialized` went to another node
            // (cluster mode), or this is not it: the handler still gets its
            // `on_initialized`, and with it the session's peer. rmcp's loop
            // runs it in a task of its own, as it runs every notification's,
            // so it may finish after the request that made the session began.
            let n = message(None, "notifications/initialized", &Value::Null);
            if let Ok(n) = serde_json::from_value::<ClientJsonRpcMessage>(n) {
                let _ = link.inbound.send(Box::new(n));
            }
        }
        sessions.insert(id.clone(), Arc::clone(&session));
        drop(sessions);
        tokio::spawn(standalone(Arc::downgrade(me), id, handle.clone(), link));
        Ok(session)
    }

    /// Runs one request on the session's handler with a peer of its own.
    async fn call(
        self: Arc<Self>,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> Result<Value, RpcError> {
        let (handler, client) = match ctx.session() {
            Some(handle) => {
                let session = Inner::session(&self, &handle, false)?;
                (Arc::clone(&session.handler), session.client.clone())
            }
            // MCP 2026-07-28: no session, so a handler of this request's
            // own, whose peer knows the request's declarations.
            None => {
                let handler = Arc::new((self.factory)().map_err(|e| {
                    RpcError::new(INTERNAL_ERROR, format!("the rmcp handler factory failed: {e}"))
                })?);
                (handler, declared_client(&ctx, &params))
            }
        };
        let msg = message(Some(ctx.request_id()), &method, &params);
        let (id, mut request) = match serde_json::from_value::<ClientJsonRpcMessage>(msg) {
            Ok(JsonRpcMessage::Request(JsonRpcRequest { id, request, .. })) => (id, request),
            Ok(_) => {
                return Err(RpcError::new(
                    gapless_server::jsonrpc::code::INVALID_REQUEST,
                    "not a request rmcp knows",
                ))
            }
            Err(e) => return Err(RpcError::invalid_params(format!("{method}: {e}"))),
        };
        let ctx = Arc::new(ctx);
        let (transport, mut link) = link::pair(Arc::clone(&ctx));
        let own = serve_directly(Unused, transport, client);
        let mut rctx = RmcpContext::new(id, own.peer().clone());
        rctx.meta = std::mem::take(request.get_meta_mut());
        rctx.extensions = std::mem::take(request.extensions_mut());
        rctx.extensions.insert(RequestStream { ctx: Arc::clone(&ctx) });
        let ct = tokio_util::sync::CancellationToken::new();
        rctx.ct = ct.clone();
        // Dropped when gapless drops this future (the request was
        // cancelled) or when it returns: the handler's token fires either way.
        let _cancel = ct.drop_guard();
        let mut running = tokio::spawn(async move { handler.handle_request(request, rctx).await });
        let mut asks = FuturesUnordered::new();
        let outcome = loop {
            tokio::select! {
                // Notifications are published by the loop's sends (`link`).
                Some(Outbound { message, ack }) = link.outbound.recv() => {
                    asks.extend(ask(&*ctx, *message, ack, &link.inbound));
                }
                Some(()) = asks.next(), if !asks.is_empty() => {}
                r = &mut running => break r,
            }
        };
        // What the handler sent without waiting for it (a spawned send)
        // and the loop passed on before the response goes out ahead of it.
        link.finish().await;
        drop(link);
        drop(own);
        match outcome {
            Ok(Ok(result)) => serde_json::to_value(result).map_err(|e| {
                RpcError::new(INTERNAL_ERROR, format!("the handler's result does not serialize: {e}"))
            }),
            Ok(Err(e)) => Err(rpc_error(e)),
            Err(e) => Err(RpcError::new(INTERNAL_ERROR, format!("the handler failed: {e}"))),
        }
    }
}

/// What a 2026-07-28 request declares of its client, as rmcp's peer holds
/// it: the request's protocol version and capabilities, and the
/// `clientInfo` of its `_meta` when there is one.
fn declared_client(ctx: &RequestContext, params: &Value) -> Option<InitializeRequestParams> {
    let declared = |info: Value| {
        serde_json::from_value(json!({
            "protocolVersion": ctx.protocol_version(),
            "capabilities": ctx.client_capabilities().unwrap_or_else(|| json!({})),
            "clientInfo": info,
        }))
        .ok()
    };
    // A `clientInfo` rmcp does not take (it lacks a field) leaves the rest.
    params
        .get("_meta")
        .and_then(|m| m.get("io.modelcontextprotocol/clientInfo"))
        .and_then(|info| declared(info.clone()))
        .or_else(|| declared(json!({"name": "unknown", "version": "0"})))
}

/// The request's own gapless stream, in its rmcp `RequestContext`'s
/// `extensions`: what gapless's transport offers a handler beyond rmcp's
/// API.
///
/// ```no_run
/// # async fn tool(ctx: rmcp::service::RequestContext<rmcp::RoleServer>) {
/// if let Some(stream) = ctx.extensions.get::<gapless_rmcp::RequestStream>() {
///     // The client resumes with Last-Event-ID and gets the rest there.
///     stream.close_sse_stream().await;
/// }
/// # }
/// ```
#[derive(Clone)]
pub struct RequestStream {
    ctx: Arc<RequestContext>,
}

impl fmt::Debug for RequestStream {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RequestStream").field("request_id", self.ctx.request_id()).finish()
    }
}

impl RequestStream {
    /// Ends the HTTP response that carries this request's stream, once the
    /// client has received what was published on it so far, or after about
    /// a second if it has not (SEP-1699 polling, `docs/SPEC.md` §5): the
    /// client reconnects with `Last-Event-ID` and what the handler sends
    /// afterwards, its response included, is replayed there. The request
    /// goes on running. Keep it no longer than the request: it holds the
    /// request's context (and with it the session's state) alive, and
    /// called later it would only make a client that is still reading the
    /// stream's end come back for it.
    pub async fn close_sse_stream(&self) {
        self.ctx.close_sse_stream().await
    }

    /// Makes this request a task of gapless's tasks extension (MCP
    /// 2026-07-28, `docs/SPEC.md` §5.5): the client gets the task's handle
    /// at once, and what the handler returns afterwards is the task's
    /// outcome. rmcp 3.11's handler API has no call for it (its own task
    /// support is rmcp's, not the transport's), so it is here;
    /// [`gapless_server::RequestContext::create_task`] says when it is
    /// refused. The handler's `ServerHandler::get_info` must declare the
    /// extension (`ServerCapabilities::builder().enable_tasks()`). Returns
    /// the task's id.
    pub async fn create_task(
        &self,
        options: gapless_server::tasks::TaskOptions,
    ) -> Result<String, gapless_server::tasks::TaskError> {
        self.ctx.create_task(options).await
    }

    /// Emits an event on the task this request became (`tasks/stream`, the
    /// draft SEP-2694, `docs/SPEC.md` §5.6): a vendor-prefixed `kind` and a
    /// JSON object `payload`, refused at the call otherwise
    /// ([`gapless_server::RequestContext::emit_task_event`]). Returns its
    /// seq.
    pub fn emit_task_event(
        &self,
        kind: &str,
        payload: Value,
    ) -> Result<u64, gapless_server::tasks::TaskEventError> {
        self.ctx.emit_task_event(kind, payload)
    }
}

/// The service behind a request's own peer: it never receives a request
/// (only responses to the ones its peer sends), so nothing of it runs.
struct Unused;

impl ServerHandler for Unused {}

/// Where a message goes.
trait Sink: Sync {
    fn notify(&self, message: bytes::Bytes) -> impl Future<Output = Result<(), SendError>> + Send;
    fn log(
        &self,
        level: LogLevel,
        logger: Option<&str>,
        data: Value,
    ) -> impl Future<Output = Result<(), SendError>> + Send;
    fn ask(
        &self,
        method: &str,
        params: Value,
    ) -> impl Future<Output = Result<Value, ClientRequestError>> + Send;
}

impl Sink for RequestContext {
    async fn notify(&self, message: bytes::Bytes) -> Result<(), SendError> {
        self.notify_raw(message).await.map(drop)
    }
    async fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) -> Result<(), SendError> {
        RequestContext::log(self, level, logger, data).await.map(drop)
    }
    async fn ask(&self, method: &str, params: Value) -> Result<Value, ClientRequestError> {
        self.request(method, params).await
    }
}

impl Sink for SessionHandle {
    async fn notify(&self, message: bytes::Bytes) -> Result<(), SendError> {
        self.notify_raw(message).await.map(drop)
    }
    async fn log(&self, level: LogLevel, logger: Option<&str>, data: Value) -> Result<(), SendError> {
        SessionHandle::log(self, level, logger, data).await.map(drop)
    }
    async fn ask(&self, method: &str, params: Value) -> Result<Value, ClientRequestError> {
        self.request(method, params).await
    }
}

/// Sends a server → client request of an rmcp service loop through `sink`
/// (acknowledged at once) and returns the future that waits for the
/// client's answer and hands it to the loop; acknowledges anything else
/// (notifications never come here) and returns `None`.
fn ask<'a, K: Sink>(
    sink: &'a K,
    message: ServerJsonRpcMessage,
    ack: tokio::sync::oneshot::Sender<Result<(), LinkError>>,
    inbound: &tokio::sync::mpsc::UnboundedSender<Box<ClientJsonRpcMessage>>,
) -> Option<BoxFuture<'a, ()>> {
    let _ = ack.send(Ok(()));
    let JsonRpcMessage::Request(JsonRpcRequest { id, request, .. }) = message else {
        // A response of the session-wide service, which gets no requests.
        return None;
    };
    let v = serde_json::to_value(&request).unwrap_or(Value::Null);
    let method = v.get("method").and_then(Value::as_str).unwrap_or_default().to_owned();
    let params = v.get("params").cloned().unwrap_or_else(|| json!({}));
    let inbound = inbound.clone();
    Some(Box::pin(async move {
        let id_json = serde_json::to_value(&id).unwrap_or(Value::Null);
        let reply = match sink.ask(&method, params).await {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id_json, "result": result}),
            Err(ClientRequestError::Error(error)) => json!({"jsonrpc": "2.0", "id": id_json, "error": error}),
            Err(e) => json!({"jsonrpc": "2.0", "id": id_json,
                "error": {"code": INTERNAL_ERROR, "message": format!("{method}: {e}")}}),
        };
        let msg = serde_json::from_value::<ClientJsonRpcMessage>(reply).unwrap_or_else(|e| {
            ClientJsonRpcMessage::error(
                rmcp::ErrorData::internal_error(format!("the client's answer to {method}: {e}"), None),
                Some(id),
            )
        });
        let _ = inbound.send(Box::new(msg));
    }))
}

impl<K: Sink + Send + Sync + 'static> Publisher for Arc<K> {
    fn publish(&self, n: link::Notification) -> impl Future<Output = Result<(), LinkError>> + Send {
        publish_notification(&**self, n)
    }
}

/// Publishes a notification of an rmcp service loop on `sink`: a
/// `notifications/message` through the session's log level, anything else
/// as rmcp serializes it. Neither goes through a `serde_json::Value` of the
/// whole message: a log message's data moves to the sink, anything else is
/// serialized once, straight to its bytes.
// rmcp 3.11 marks the logging API deprecated (SEP-2577); clients still use it.
#[allow(deprecated)]
async fn publish_notification<K: Sink>(
    sink: &K,
    n: rmcp::model::JsonRpcNotification<rmcp::model::ServerNotification>,
) -> Result<(), LinkError> {
    use rmcp::model::{LoggingLevel as L, ServerNotification};
    let sent = match n.notification {
        // Filtered by the session's level (`logging/setLevel`).
        ServerNotification::LoggingMessageNotification(m) => {
            let p = m.params;
            let level = match p.level {
                L::Debug => LogLevel::Debug,
                L::Info => LogLevel::Info,
                L::Notice => LogLevel::Notice,
                L::Warning => LogLevel::Warning,
                L::Error => LogLevel::Error,
                L::Critical => LogLevel::Critical,
                L::Alert => LogLevel::Alert,
                L::Emergency => LogLevel::Emergency,
            };
            sink.log(level, p.logger.as_deref(), p.data).await
        }
        notification => {
            let msg = ServerJsonRpcMessage::Notification(rmcp::model::JsonRpcNotification {
                jsonrpc: n.jsonrpc,
                notification,
            });
            let bytes = serde_json::to_vec(&msg).map_err(|e| LinkError::Refused(e.to_string()))?;
            sink.notify(gapless::ring::exact_bytes(bytes)).await
        }
    };
    sent.map_err(|e| match e {
        SendError::Closed => LinkError::Closed,
        SendError::Refused(r) => LinkError::Refused(r),
    })
}

/// The session-wide service's messages, on the standalone stream, until
/// the session ends; then the session's handler is dropped.
async fn standalone<S: ServerHandler>(
    host: Weak<Inner<S>>,
    id: String,
    session: SessionHandle,
    mut link: link::Link<Arc<SessionHandle>>,
) {
    let mut asks = FuturesUnordered::new();
    loop {
        tokio::select! {
            out = link.outbound.recv() => match out {
                // Notifications are published by the loop's sends (`link`).
                Some(Outbound { message, ack }) => asks.extend(ask(&session, *message, ack, &link.inbound)),
                None => break,
            },
            Some(()) = asks.next(), if !asks.is_empty() => {}
            _ = session.closed() => break,
        }
    }
    if let Some(host) = host.upgrade() {
        lock(&host.sessions).remove(&id);
    }
}
