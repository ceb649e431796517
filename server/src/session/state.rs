//! [`SessionState`]: what the transport keeps of one session of the 2025
//! revisions on this node, beside the engine's [`Session`] (its ring):
//! the negotiated version and log level, server → client requests awaiting
//! a response, client requests in flight, which connection carries which
//! lane, the publish counts, and where its events go ([`SessionStore`]).

use super::fairness::ClientSlot;
use super::lanes::{Claim, Lane, Lanes};
use crate::backend::{Attached, OpenError, RequestAt, SessionStore};
use crate::telemetry::{Metrics, Published, TargetKind};
use crate::vocab::change::Announcer;
use crate::vocab::config::ServerConfig;
use crate::vocab::error::{ClientRequestError, SendError};
use crate::vocab::jsonrpc;
use crate::vocab::log_level::LogLevel;
use crate::vocab::sync::lock;
use bytes::Bytes;
use gapless::ring::EventRef;
use gapless::session::Pacer;
use gapless::{EventId, Hub, Seq, Session, StreamHandle, StreamId};
use serde_json::Value;
use std::collections::HashMap;
use std::future::Future;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// A message as a payload whose allocation is its length (what the ring's
/// budgets count).
pub(crate) fn json_bytes(msg: &Value) -> Bytes {
    gapless::ring::exact_bytes(serde_json::to_vec(msg).expect("JSON values serialize"))
}

/// What the state of every session on this node shares (the table holds
/// it).
pub(crate) struct Shared {
    pub(crate) hub: Arc<Hub>,
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) metrics: Arc<Metrics>,
    /// Cancelled on shutdown: every open stream ends.
    pub(crate) shutdown: CancellationToken,
    /// The server's announcements (a session's requests may announce).
    pub(crate) changes: Announcer,
}

/// The transport's state of one session on this node.
pub(crate) struct SessionState {
    /// The engine's session: its ring (in a cluster, this node's replica).
    pub(crate) session: Arc<Session>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) config: Arc<ServerConfig>,
    /// Where the session's events go.
    pub(crate) store: SessionStore,
    /// The negotiated protocol version (a legacy session's is set by its
    /// `initialize`, which comes after the session exists).
    protocol_version: Mutex<String>,
    /// The `params` of the session's `initialize` as the client sent them,
    /// as JSON text (a parsed value took about ten times the bytes, kept
    /// for the session's life and read rarely); `None` on a node that did
    /// not receive it (cluster mode).
    initialize_params: Mutex<Option<Box<str>>>,
    /// A legacy (HTTP+SSE) session answered its `initialize` already.
    pub(crate) legacy_initialized: AtomicBool,
    /// Pacing handle of the standalone stream.
    pub(crate) standalone: Pacer,
    log_level: AtomicU8,
    /// The session's place in its client's allowance; given back when the
    /// state goes.
    _client: Option<ClientSlot>,
    /// Server → client requests awaiting a response, by id.
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>,
    /// Client requests being handled, by id (for `notifications/cancelled`).
    inflight: Mutex<HashMap<String, CancellationToken>>,
    /// Which connection carries each lane now.
    lanes: Lanes,
    /// The application's values of the session, in process (a cluster's
    /// are the store's: `SessionHandle::set_value`).
    pub(crate) values: Mutex<HashMap<String, String>>,
    next_request: AtomicU64,
    /// Cancelled when the session ends or the server shuts down; parent of
    /// every connection token of the session.
    pub(crate) closed: CancellationToken,
    /// This session's publish counts (`telemetry/`).
    pub(crate) published: Published,
    /// The server's announcements to 2026-07-28 listen streams.
    pub(crate) changes: Announcer,
    /// The ring's oldest seq when this state was made: what is evicted
    /// since is `oldest - start`.
    start: u64,
    /// The ring's evicted payload bytes when this state was made.
    start_evicted_bytes: u64,
    /// The server's metrics.
    pub(crate) metrics: Arc<Metrics>,
}

impl SessionState {
    /// The session's own token is a child of the server's shutdown token,
    /// so every connection token of the session ends on shutdown too and a
    /// connection polls only its own (uncontended) token.
    pub(crate) fn new(
        shared: &Shared,
        session: Arc<Session>,
        protocol_version: String,
        client: Option<ClientSlot>,
        store: SessionStore,
    ) -> Self {
        SessionState {
            changes: shared.changes.clone(),
            published: Default::default(),
            start: session.reader().oldest().get(),
            start_evicted_bytes: session.reader().evicted_bytes(),
            metrics: Arc::clone(&shared.metrics),
            store,
            standalone: session.pacer(session.standalone()),
            session,
            hub: Arc::clone(&shared.hub),
            config: Arc::clone(&shared.config),
            protocol_version: Mutex::new(protocol_version),
            initialize_params: Mutex::new(None),
            legacy_initialized: AtomicBool::new(false),
            log_level: AtomicU8::new(0),
            _client: client,
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            lanes: Lanes::default(),
            values: Mutex::default(),
            next_request: AtomicU64::new(1),
            closed: shared.shutdown.child_token(),
        }
    }

    /// Events and payload bytes this session's ring evicted since this
    /// state was made.
    pub(crate) fn evicted(&self) -> (u64, u64) {
        let r = self.session.reader();
        (
            r.oldest().get().saturating_sub(self.start),
            r.evicted_bytes().saturating_sub(self.start_evicted_bytes),
        )
    }

    /// Counts an event published on `stream` (`telemetry/`).
    fn count(&self, stream: StreamId, len: usize) {
        let target = if self.session.is_migrated() {
            TargetKind::Socket
        } else if stream == self.session.standalone().id() {
            TargetKind::Standalone
        } else {
            TargetKind::Request
        };
        self.published.count(target, len);
    }

    pub(crate) fn protocol_version(&self) -> String {
        lock(&self.protocol_version).clone()
    }

    pub(crate) fn set_protocol_version(&self, v: &str) {
        *lock(&self.protocol_version) = v.to_owned();
    }

    pub(crate) fn initialize_params(&self) -> Option<Value> {
        let text = lock(&self.initialize_params).clone()?;
        Some(serde_json::from_str(&text).expect("the params were written from a JSON value"))
    }

    pub(crate) fn set_initialize_params(&self, params: Value) {
        *lock(&self.initialize_params) = Some(params.to_string().into_boxed_str());
    }

    pub(crate) fn log_level(&self) -> LogLevel {
        LogLevel::ALL[self.log_level.load(Ordering::Relaxed) as usize]
    }

    pub(crate) fn set_log_level(&self, l: LogLevel) {
        self.log_level.store(l as u8, Ordering::Relaxed);
    }

    /// Publishes `bytes` on `pacer`'s stream, paced (see
    /// [`SessionStore::publish_paced`]).
    pub(crate) async fn publish_bytes(&self, pacer: &Pacer, bytes: Bytes) -> Result<Seq, SendError> {
        let (stream, len) = (pacer.stream().id(), bytes.len());
        let high_water = self.config.pace_high_water;
        let seq = self.store.publish_paced(&self.session, pacer, bytes, high_water, &self.metrics).await?;
        self.count(stream, len);
        Ok(seq)
    }

    pub(crate) async fn publish_json(&self, pacer: &Pacer, msg: &Value) -> Result<Seq, SendError> {
        self.publish_bytes(pacer, json_bytes(msg)).await
    }

    /// Publishes without pacing (results, priming events: never held back);
    /// `None` is a priming event.
    pub(crate) async fn publish_now(
        &self,
        stream: &StreamHandle,
        msg: Option<&Value>,
    ) -> Result<Seq, SendError> {
        let bytes = msg.map_or_else(Bytes::new, json_bytes);
        let len = bytes.len();
        let seq = self.store.publish_now(&self.session, stream, bytes).await?;
        self.count(stream.id(), len);
        Ok(seq)
    }

    /// Publishes a request's response on its stream, ending the stream if
    /// it is the request's `own`, once if the request is `registered` in a
    /// cluster's store (see [`SessionStore::respond`]); `false`
    /// when, in a cluster, the response could not be stored in time.
    pub(crate) async fn respond(
        &self,
        stream: &StreamHandle,
        own: bool,
        registered: Option<RequestAt>,
        msg: &Value,
    ) -> bool {
        let deadline = self.config.client_request_timeout;
        let r = self.store.respond(&self.session, stream, own, registered, json_bytes(msg), deadline).await;
        if let Some(len) = r.published {
            self.count(stream.id(), len);
        }
        r.stored
    }

    /// Opens a stream of the session.
    pub(crate) async fn open_stream(&self) -> Result<StreamHandle, OpenError> {
        self.store.open_stream(&self.session).await
    }

    /// Ends a stream of the session.
    pub(crate) async fn end_stream(&self, stream: &StreamHandle) -> Result<(), SendError> {
        self.store.end_stream(&self.session, stream).await
    }

    /// The wire id and payload of an event read from the session's ring.
    #[inline]
    pub(crate) fn wire<'a>(&self, e: EventRef<'a>) -> (EventId, &'a [u8]) {
        self.store.wire(&self.session, e)
    }

    /// Every event of `stream` so far counts as delivered (a JSON-only
    /// response stands for them).
    pub(crate) async fn mark_all_delivered(&self, stream: &StreamHandle) {
        self.store.mark_all_delivered(&self.session, stream).await
    }

    /// Sends a request to the client on `stream` and waits for its
    /// response, until `cancel`, the session's end, or the client-request
    /// timeout.
    pub(crate) async fn client_request(
        &self,
        stream: &Pacer,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, ClientRequestError> {
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        let id = Value::String(self.store.request_id(n));
        let key = id.to_string();
        let (tx, rx) = oneshot::channel();
        lock(&self.pending).insert(key.clone(), tx);
        let sent = self.publish_json(stream, &jsonrpc::request(&id, method, params)).await;
        if let Err(e) = sent {
            lock(&self.pending).remove(&key);
            return Err(ClientRequestError::Send(e));
        }
        let out = tokio::select! {
            r = rx => match r {
                Ok(Ok(v)) => Ok(v),
                Ok(Err(e)) => Err(ClientRequestError::Error(e)),
                Err(_) => Err(ClientRequestError::Cancelled),
            },
            _ = cancel.cancelled() => Err(ClientRequestError::Cancelled),
            _ = self.closed.cancelled() => Err(ClientRequestError::Cancelled),
            _ = tokio::time::sleep(self.config.client_request_timeout) => Err(ClientRequestError::Timeout),
        };
        lock(&self.pending).remove(&key);
        out
    }

    /// Routes a client's response to the waiting request; `false` if none waits.
    pub(crate) fn deliver_response(&self, id: &Value, outcome: Result<Value, Value>) -> bool {
        match lock(&self.pending).remove(&id.to_string()) {
            Some(tx) => tx.send(outcome).is_ok(),
            None => false,
        }
    }

    /// Registers request `id` as in flight and returns its cancellation
    /// token, or `None` when the session already has
    /// `max_inflight_requests` in flight.
    pub(crate) fn track_request(&self, id: &Value) -> Option<CancellationToken> {
        let mut inflight = lock(&self.inflight);
        if inflight.len() >= self.config.max_inflight_requests {
            return None;
        }
        let t = self.closed.child_token();
        inflight.insert(id.to_string(), t.clone());
        Some(t)
    }

    /// Request `id` is no longer in flight.
    pub(crate) fn untrack_request(&self, id: &Value) {
        lock(&self.inflight).remove(&id.to_string());
    }

    /// Cancels request `id` if it runs here; `false` if it does not.
    pub(crate) fn cancel_request(&self, id: &Value) -> bool {
        match lock(&self.inflight).get(&id.to_string()) {
            Some(t) => {
                t.cancel();
                true
            }
            None => false,
        }
    }

    /// Registers a new connection for `lane`, ending the one that carried
    /// it before. With `exclusive`, refuses (returns `None`) if a live
    /// connection carries it.
    pub(crate) fn attach(&self, lane: Lane, exclusive: bool) -> Option<Claim> {
        self.lanes.claim(&self.closed, lane, exclusive)
    }

    /// Forgets connection `gen` of `lane` if it is still the current one.
    pub(crate) fn detach(&self, lane: Lane, gen: u64) {
        self.lanes.release(lane, gen)
    }

    /// Waits until what was published on `stream` so far was delivered
    /// (bounded wait), then ends its current connection.
    pub(crate) async fn close_stream_connection(&self, stream: &StreamHandle) {
        let target = stream.info().high;
        for _ in 0..200 {
            if stream.info().delivered >= target {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        self.lanes.end(Lane::Stream(stream.id()));
    }

    /// Another node took hold `field` of the session over from `holder`
    /// (this node, taken for dead?): the standalone stream's connection
    /// ends if it is `holder`; an application's hold is lost.
    pub(crate) fn hold_taken(&self, field: &str, holder: &str) {
        if field == crate::backend::cluster::STANDALONE_HOLD {
            if let Some(gen) = self.store.generation_of(holder) {
                self.lanes.end_gen(Lane::Stream(self.session.standalone().id()), gen);
            }
        } else {
            self.store.hold_taken(&self.session.id(), field, holder);
        }
    }

    /// Ends every SSE connection of the session (migration to a WebSocket);
    /// the socket's own registration stays.
    pub(crate) fn end_all_sse_streams(&self) {
        self.lanes.end_all_sse();
    }

    /// Ends everything of this session: streams, pending requests.
    pub(crate) fn close(&self) {
        self.closed.cancel();
        lock(&self.pending).clear();
    }
}

impl Attached for SessionState {
    fn session(&self) -> &Arc<Session> {
        &self.session
    }

    fn prime(&self, stream: &StreamHandle) -> impl Future<Output = Result<Seq, SendError>> + Send {
        self.publish_now(stream, None)
    }

    fn end_all_sse_streams(&self) {
        SessionState::end_all_sse_streams(self)
    }

    fn drop_replica(&self) {
        self.hub.remove(&self.session.id());
        SessionState::close(self)
    }
}
