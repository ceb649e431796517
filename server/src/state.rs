//! Server-side state: the hub, the application, and per-session transport
//! state ([`Conn`]) that the engine does not know about (log level, pending
//! server → client requests, in-flight requests, which HTTP connection
//! carries which stream).

use crate::host::Host;
use crate::vocab::config::ServerConfig;
use crate::vocab::error::{ClientRequestError, SendError};
use crate::vocab::identity::IdentityFn;
use crate::vocab::jsonrpc;
use bytes::Bytes;
use gapless::session::Pacer;
use gapless::{Hub, Seq, Session, SessionId, StreamHandle, StreamId};

use crate::vocab::sync::lock;
use serde_json::Value;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicU8, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// Everything the handlers share.
pub(crate) struct AppState {
    pub(crate) hub: Arc<Hub>,
    pub(crate) host: Arc<dyn Host>,
    pub(crate) config: Arc<ServerConfig>,
    pub(crate) identity: Option<IdentityFn>,
    pub(crate) conns: Mutex<HashMap<SessionId, Arc<Conn>>>,
    /// Cancelled on shutdown: every open stream ends.
    pub(crate) shutdown: CancellationToken,
    /// Per-client limits on `initialize` and live sessions.
    pub(crate) fairness: Arc<crate::fairness::Fairness>,
    /// The endpoint's route inside the router (`/mcp` by default; `/` when
    /// the application nests the router at the endpoint's path itself).
    pub(crate) path: String,
    /// The cluster's store, in cluster mode (`docs/SPEC.md` §8).
    pub(crate) cluster: Option<Arc<crate::cluster::Cluster>>,
    /// What the operator's metrics count (`observe.rs`).
    pub(crate) metrics: Arc<crate::telemetry::Metrics>,
    /// Seals the `requestState` of input-required results.
    pub(crate) input_key: crate::vocab::request_state::StateKey,
    /// Changes announced to 2026-07-28 `subscriptions/listen` streams.
    pub(crate) changes: crate::vocab::change::Announcer,
    /// The bound on 2026-07-28 requests in flight.
    pub(crate) stateless: Arc<crate::modern::Inflight>,
    /// The tools' mirrored parameters (`x-mcp-header`), as last listed.
    pub(crate) mirrors: Mutex<crate::modern::MirrorCache>,
    /// The tasks extension's records and the work this process runs.
    pub(crate) tasks: Arc<crate::tasks::Tasks>,
    /// The in-process task store, when it is the one in use (swept here).
    pub(crate) memory_tasks: Option<Arc<crate::tasks::store::MemoryTasks>>,
}

impl AppState {
    /// The transport state of a live session visible to `owner`.
    pub(crate) fn conn(&self, id: &str, owner: Option<&str>) -> Option<Arc<Conn>> {
        let session = self.hub.get_str(id, owner).ok()?;
        let conns = lock(&self.conns);
        let c = conns.get(&session.id())?;
        Arc::ptr_eq(&c.session, &session).then(|| Arc::clone(c))
    }

    /// This node's transport state of session `id`, whoever owns it (for
    /// the cluster bus, whose messages come from other nodes' checked
    /// requests).
    pub(crate) fn local_conn(&self, id: &str) -> Option<Arc<Conn>> {
        let id = SessionId::parse(id)?;
        lock(&self.conns).get(&id).cloned()
    }

    pub(crate) fn insert(&self, conn: Arc<Conn>) {
        lock(&self.conns).insert(conn.session.id(), conn);
    }

    /// The transport state of a live session visible to `owner`: this
    /// node's, or, in cluster mode, a new one attached to the store's
    /// session (`None`: no such session; `Err`: the store is unavailable).
    pub(crate) async fn find_conn(
        self: &Arc<Self>,
        id: &str,
        owner: Option<&str>,
    ) -> Result<Option<Arc<Conn>>, crate::vocab::error::ApiError> {
        if let Some(c) = self.conn(id, owner) {
            return Ok(Some(c));
        }
        let Some(cluster) = &self.cluster else { return Ok(None) };
        let Some(sid) = SessionId::parse(id) else { return Ok(None) };
        let _one = cluster.attach_lock(sid).await;
        if let Some(c) = self.conn(id, owner) {
            return Ok(Some(c));
        }
        match cluster.attach(&self.hub, sid, owner, self.on_gone()).await {
            Ok(Some((session, version))) => {
                let conn = Arc::new(Conn::new(self, session, version, None, Some(Arc::clone(cluster))));
                self.insert(Arc::clone(&conn));
                Ok(Some(conn))
            }
            Ok(None) => Ok(None),
            Err(crate::cluster::AttachError::Store(e)) => {
                Err(crate::vocab::error::ApiError::store_unavailable(&e))
            }
            Err(crate::cluster::AttachError::Local(e)) => Err(e.into()),
        }
    }

    /// What a follower calls when its session left the store: this node
    /// drops the session and its transport state.
    pub(crate) fn on_gone(self: &Arc<Self>) -> crate::cluster::OnGone {
        let me = Arc::downgrade(self);
        Arc::new(move |session: &Arc<Session>| {
            let Some(state) = me.upgrade() else { return };
            // Only if it is still the replica the node serves: a replaced
            // follower must not drop its successor.
            if state.hub.remove_exact(session) {
                state.remove(&session.id());
            }
        })
    }

    /// Drops transport state of sessions the hub no longer has.
    pub(crate) fn sweep(&self) {
        self.metrics.sessions_expired.inc_by(self.hub.sweep_idle() as u64);
        self.hub.sweep_tickets();
        if let Some(t) = &self.memory_tasks {
            t.sweep(crate::tasks::now_ms());
        }
        let dead: Vec<Arc<Conn>> = {
            let mut conns = lock(&self.conns);
            let ids: Vec<SessionId> =
                conns.iter().filter(|(_, c)| c.session.is_closed()).map(|(id, _)| *id).collect();
            ids.iter().filter_map(|id| conns.remove(id)).collect()
        };
        for c in dead {
            self.metrics.departed(&c.published, c.evicted());
            c.close();
        }
    }

    pub(crate) fn remove(&self, id: &SessionId) {
        self.hub.remove(id);
        if let Some(c) = lock(&self.conns).remove(id) {
            self.metrics.departed(&c.published, c.evicted());
            c.close();
        }
    }
}

/// A message as a payload whose allocation is its length (what the ring's
/// budgets count).
fn json_bytes(msg: &Value) -> Bytes {
    gapless::ring::exact_bytes(serde_json::to_vec(msg).expect("JSON values serialize"))
}

/// Why [`Conn::open_stream`] refused on a replica a failover made stale.
pub(crate) const STALE: &str = "this node's replica of the session is stale (a failover lost events)";

/// What one connection of a session carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    /// An SSE response following one stream.
    Stream(StreamId),
    /// The migrated session's WebSocket (every stream).
    Socket,
}

/// Transport state of one session.
pub(crate) struct Conn {
    pub(crate) session: Arc<Session>,
    pub(crate) hub: Arc<Hub>,
    pub(crate) config: Arc<ServerConfig>,
    /// The negotiated protocol version (a legacy session's is set by its
    /// `initialize`, which comes after the session exists).
    protocol_version: Mutex<String>,
    /// The `params` of the session's `initialize` as the client sent them;
    /// `None` on a node that did not receive it (cluster mode).
    initialize_params: Mutex<Option<Value>>,
    /// A legacy (HTTP+SSE) session answered its `initialize` already.
    pub(crate) legacy_initialized: std::sync::atomic::AtomicBool,
    /// Pacing handle of the standalone stream.
    pub(crate) standalone: Pacer,
    log_level: AtomicU8,
    /// The session's place in its client's allowance; given back when the
    /// transport state goes.
    _client: Option<crate::fairness::ClientSlot>,
    /// Server → client requests awaiting a response, by id.
    pending: Mutex<HashMap<String, oneshot::Sender<Result<Value, Value>>>>,
    /// Client requests being handled, by id (for `notifications/cancelled`).
    inflight: Mutex<HashMap<String, CancellationToken>>,
    /// Which connection carries each lane now: a generation number and the
    /// token that ends it. A newer connection on the same lane takes over
    /// (`docs/SPEC.md` §5: the older one is ended).
    connections: Mutex<HashMap<Lane, (u64, CancellationToken)>>,
    next_conn: AtomicU64,
    next_request: AtomicU64,
    /// Cancelled when the session ends or the server shuts down; parent of
    /// every connection token of the session.
    pub(crate) closed: CancellationToken,
    /// The cluster's store, when the session lives there: publishing goes
    /// to it, and the local ring is its replica (`cluster.rs`).
    pub(crate) cluster: Option<Arc<crate::cluster::Cluster>>,
    /// Cluster mode: the session's append queue, so that concurrent
    /// publishes share script calls (`docs/SPEC.md` §8.8).
    appender: Option<gapless_redis::Appender>,
    /// This session's publish counts (`observe.rs`).
    pub(crate) published: crate::telemetry::Published,
    /// The server's announcements to 2026-07-28 listen streams.
    pub(crate) changes: crate::vocab::change::Announcer,
    /// The ring's oldest seq when this state was made: what is evicted
    /// since is `oldest - start`.
    start: u64,
    /// The ring's evicted payload bytes when this state was made.
    start_evicted_bytes: u64,
    /// The server's metrics.
    pub(crate) metrics: Arc<crate::telemetry::Metrics>,
}

impl Conn {
    /// The session's own token is a child of the server's (`state`'s
    /// shutdown), so every connection token of the session ends on shutdown
    /// too and a connection polls only its own (uncontended) token.
    pub(crate) fn new(
        state: &AppState,
        session: Arc<Session>,
        protocol_version: String,
        client: Option<crate::fairness::ClientSlot>,
        cluster: Option<Arc<crate::cluster::Cluster>>,
    ) -> Self {
        let (hub, config, shutdown) = (Arc::clone(&state.hub), Arc::clone(&state.config), &state.shutdown);
        Conn {
            changes: state.changes.clone(),
            published: Default::default(),
            start: session.reader().oldest().get(),
            start_evicted_bytes: session.reader().evicted_bytes(),
            metrics: Arc::clone(&state.metrics),
            appender: cluster.as_ref().map(|c| gapless_redis::Appender::new(c.store.clone(), session.id())),
            cluster,
            standalone: session.pacer(session.standalone()),
            session,
            hub,
            config,
            protocol_version: Mutex::new(protocol_version),
            initialize_params: Mutex::new(None),
            legacy_initialized: std::sync::atomic::AtomicBool::new(false),
            log_level: AtomicU8::new(0),
            _client: client,
            pending: Mutex::new(HashMap::new()),
            inflight: Mutex::new(HashMap::new()),
            connections: Mutex::new(HashMap::new()),
            next_conn: AtomicU64::new(1),
            next_request: AtomicU64::new(1),
            closed: shutdown.child_token(),
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

    /// Counts an event published on `stream` (`observe.rs`).
    fn count(&self, stream: StreamId, len: usize) {
        use crate::telemetry::TargetKind;
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
        lock(&self.initialize_params).clone()
    }

    pub(crate) fn set_initialize_params(&self, params: Value) {
        *lock(&self.initialize_params) = Some(params);
    }

    pub(crate) fn log_level(&self) -> crate::vocab::log_level::LogLevel {
        crate::vocab::log_level::LogLevel::ALL[self.log_level.load(Ordering::Relaxed) as usize]
    }

    pub(crate) fn set_log_level(&self, l: crate::vocab::log_level::LogLevel) {
        self.log_level.store(l as u8, Ordering::Relaxed);
    }

    pub(crate) async fn publish_bytes(&self, pacer: &Pacer, bytes: Bytes) -> Result<Seq, SendError> {
        let (stream, len) = (pacer.stream().id(), bytes.len());
        let seq = match &self.cluster {
            // The store has no pacing: the cluster's readers are on many
            // nodes (`docs/SPEC.md` §8.9).
            Some(_) => self.append(stream, bytes).await?,
            None => {
                // Polled once first: only a publish that has to wait is timed.
                let publish = self.session.publish_paced_with(pacer, bytes, self.config.pace_high_water);
                let mut publish = std::pin::pin!(publish);
                match futures_util::poll!(publish.as_mut()) {
                    std::task::Poll::Ready(r) => r?,
                    std::task::Poll::Pending => {
                        let waited = std::time::Instant::now();
                        let r = publish.await;
                        self.metrics.paced_waits.observe(waited.elapsed().as_secs_f64());
                        r?
                    }
                }
            }
        };
        self.count(stream, len);
        Ok(seq)
    }

    pub(crate) async fn publish_json(&self, pacer: &Pacer, msg: &Value) -> Result<Seq, SendError> {
        self.publish_bytes(pacer, json_bytes(msg)).await
    }

    /// Publishes without pacing (results, priming events: never held back).
    pub(crate) async fn publish_now(
        &self,
        stream: &StreamHandle,
        msg: Option<&Value>,
    ) -> Result<Seq, SendError> {
        let bytes = msg.map_or_else(Bytes::new, json_bytes);
        let len = bytes.len();
        let seq = match &self.cluster {
            Some(_) => self.append(stream.id(), bytes).await?,
            None => self.session.publish(stream, bytes)?,
        };
        self.count(stream.id(), len);
        Ok(seq)
    }

    async fn append(&self, stream: StreamId, bytes: Bytes) -> Result<Seq, SendError> {
        let queue = self.appender.as_ref().expect("cluster mode");
        match queue.push(stream, bytes).await {
            Ok(a) => Ok(a.seq),
            Err(gapless_redis::AppendError::Store(gapless_redis::StoreError::UnknownSession)) => {
                Err(SendError::Closed)
            }
            Err(e) => Err(SendError::Refused(e.to_string())),
        }
    }

    /// Cluster mode: answers a request on its own stream and ends the
    /// stream in one step (`RedisStore::answer`); `Ok(false)` if it had
    /// ended already (answered, or by the reaper).
    pub(crate) async fn answer(&self, stream: &StreamHandle, msg: &Value) -> Result<bool, SendError> {
        let c = self.cluster.as_ref().expect("cluster mode");
        let bytes = json_bytes(msg);
        let wrote = c.store.answer(&self.session.id(), stream.id(), &bytes).await.map_err(|e| match e {
            gapless_redis::StoreError::UnknownSession => SendError::Closed,
            e => SendError::Refused(e.to_string()),
        })?;
        if wrote {
            self.count(stream.id(), bytes.len());
        }
        Ok(wrote)
    }

    /// Opens a stream (in the store, in cluster mode; the replica mirrors
    /// it at once).
    pub(crate) async fn open_stream(&self) -> Result<StreamHandle, SendError> {
        match &self.cluster {
            Some(c) => {
                let seen = self.session.reader().head();
                let (id, head) =
                    c.store.open_stream_seen(&self.session.id(), seen).await.map_err(|e| match e {
                        gapless_redis::StoreError::UnknownSession => SendError::Closed,
                        e => SendError::Refused(e.to_string()),
                    })?;
                if head < seen {
                    // The store's head is below what this replica has: a
                    // failover lost events, and the replica is stale. Never
                    // serve a new stream from it (its id may be one of the
                    // lost streams' here).
                    let (c, sid) = (Arc::clone(c), self.session.id());
                    tokio::spawn(async move {
                        let _ = c.store.end_stream(&sid, id).await;
                    });
                    return Err(SendError::Refused(STALE.to_owned()));
                }
                self.session.open_streams_to(id)?.ok_or(SendError::Closed)
            }
            None => Ok(self.session.open_stream()?),
        }
    }

    /// Ends a stream (in the store, in cluster mode: the replica ends it
    /// after its last event, when its follower reads the end).
    pub(crate) async fn end_stream(&self, stream: &StreamHandle) -> Result<(), SendError> {
        match &self.cluster {
            Some(c) => c.store.end_stream(&self.session.id(), stream.id()).await.map_err(|e| match e {
                gapless_redis::StoreError::UnknownSession => SendError::Closed,
                e => SendError::Refused(e.to_string()),
            }),
            None => Ok(self.session.end_stream(stream)?),
        }
    }

    /// The wire id and payload of an event read from the session's ring,
    /// the payload borrowed from it (in cluster mode, without the store's
    /// position prefix).
    pub(crate) fn wire<'a>(&self, e: gapless::ring::EventRef<'a>) -> (gapless::EventId, &'a [u8]) {
        match &self.cluster {
            Some(_) => {
                let id = gapless::EventId::new(self.session.namespace(), e.stream, e.seq);
                match crate::cluster::position(e.payload) {
                    Some((check, _)) => (id.with_check(check), &e.payload[crate::cluster::PREFIX..]),
                    // Never written by a follower; shown as it is.
                    None => (id.with_check(0), e.payload),
                }
            }
            None => (self.session.event_id(e.stream, e.seq), e.payload),
        }
    }

    /// In cluster mode, records in the store that `e` (and every earlier
    /// event of its stream) is delivered, before the transport sends it:
    /// the client may resume on another node the moment it has it. `None`
    /// outside cluster mode (delivery is then recorded after the write).
    pub(crate) fn mark_ahead(
        &self,
        e: &gapless::Event,
    ) -> Option<futures_util::future::BoxFuture<'static, Result<bool, gapless_redis::StoreError>>> {
        let c = Arc::clone(self.cluster.as_ref()?);
        let (check, index) = match crate::cluster::position(&e.payload) {
            Some((check, index)) => (Some(check), index),
            None => (None, 0),
        };
        let (id, stream, seq) = (self.session.id(), e.stream, e.seq);
        Some(Box::pin(async move { c.store.mark_delivered(&id, stream, seq, index, check).await }))
    }

    /// Every event of `stream` so far counts as delivered (a JSON-only
    /// response stands for them).
    pub(crate) async fn mark_all_delivered(&self, stream: &StreamHandle) {
        stream.mark_all_delivered();
        if let Some(c) = &self.cluster {
            if let Err(e) = c.store.mark_all_delivered(&self.session.id(), stream.id()).await {
                tracing::warn!(session = %crate::vocab::secret::SessionTag::of_id(&self.session.id()), error = %e, "could not record a JSON-only delivery");
            }
        }
    }

    /// Waits (bounded) until this node's replica has applied the store's
    /// log up to `seq` (no wait outside cluster mode).
    pub(crate) async fn caught_up(&self, seq: Seq) -> bool {
        let Some(mut applied) = self.cluster.as_ref().and_then(|c| c.applied(&self.session.id())) else {
            return self.cluster.is_none();
        };
        let caught_up = tokio::time::timeout(Duration::from_secs(5), applied.wait_for(|a| *a >= seq.0)).await;
        matches!(caught_up, Ok(Ok(_)))
    }

    pub(crate) async fn client_request(
        &self,
        stream: &Pacer,
        method: &str,
        params: Value,
        cancel: &CancellationToken,
    ) -> Result<Value, ClientRequestError> {
        let n = self.next_request.fetch_add(1, Ordering::Relaxed);
        // Unique in the cluster: a response may arrive on any node, and
        // each node's transport state of the session counts on its own.
        let id = Value::String(match &self.cluster {
            Some(c) => format!("s{}.{n}", &c.node[..8]),
            None => format!("s{n}"),
        });
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
    pub(crate) fn start_request(&self, id: &Value) -> Option<CancellationToken> {
        let mut inflight = lock(&self.inflight);
        if inflight.len() >= self.config.max_inflight_requests {
            return None;
        }
        let t = self.closed.child_token();
        inflight.insert(id.to_string(), t.clone());
        Some(t)
    }

    pub(crate) fn finish_request(&self, id: &Value) {
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
    pub(crate) fn attach(&self, lane: Lane, exclusive: bool) -> Option<(u64, CancellationToken)> {
        let mut map = lock(&self.connections);
        if let Some((_, old)) = map.get(&lane) {
            if exclusive && !old.is_cancelled() {
                return None;
            }
            old.cancel();
        }
        let gen = self.next_conn.fetch_add(1, Ordering::Relaxed);
        let token = self.closed.child_token();
        map.insert(lane, (gen, token.clone()));
        Some((gen, token))
    }

    /// Forgets connection `gen` of `lane` if it is still the current one.
    pub(crate) fn detach(&self, lane: Lane, gen: u64) {
        let mut map = lock(&self.connections);
        if map.get(&lane).is_some_and(|(g, _)| *g == gen) {
            map.remove(&lane);
        }
    }

    /// Ends every SSE connection of the session (migration to a WebSocket);
    /// the socket's own registration stays.
    pub(crate) fn end_all_sse_streams(&self) {
        lock(&self.connections).retain(|lane, (_, t)| {
            if *lane == Lane::Socket {
                return true;
            }
            t.cancel();
            false
        });
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
        if let Some((_, t)) = lock(&self.connections).remove(&Lane::Stream(stream.id())) {
            t.cancel();
        }
    }

    /// Ends everything of this session: streams, pending requests.
    pub(crate) fn close(&self) {
        self.closed.cancel();
        lock(&self.pending).clear();
    }
}
