//! [`SessionStore`]: where one session's events go, in process or in the
//! cluster's store. Every publish of the session, every stream it opens or
//! ends, the wire id of every event it sends and the delivery mark of every
//! write pass through it.

use super::cluster::{self, Cluster};
use super::feed::Feed;
use super::{Attached, Outcome, RequestAt, StoreError};
use crate::telemetry::Metrics;
use crate::vocab::error::{ApiError, SendError, ValueError};
use crate::vocab::secret::SessionTag;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use gapless::ring::EventRef;
use gapless::session::Pacer;
use gapless::{Event, EventId, Seq, Session, StreamHandle, StreamId};
use serde_json::Value;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Where one session's events go.
pub(crate) enum SessionStore {
    /// The session's own ring.
    Local,
    /// The cluster's store; the ring is this node's replica of it.
    Cluster {
        /// The store and this node's followers.
        cluster: Arc<Cluster>,
        /// The session's append queue: a publish queues its event and
        /// returns (group commit, `docs/SPEC.md` §8.8); the store's answers
        /// bring the events into the replica.
        appender: gapless_redis::Appender,
        /// The replica's writer: what the queue holds ahead of it paces
        /// publishes.
        applier: Arc<cluster::Applier>,
    },
}

/// Why [`SessionStore::open_stream`] opened no stream.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum OpenError {
    /// The session is gone, or the store refused.
    Send(SendError),
    /// This node's replica of the session is stale: a failover lost events
    /// it holds. The caller drops the replica, attaches afresh and tries
    /// again.
    Stale,
}

impl From<SendError> for OpenError {
    fn from(e: SendError) -> Self {
        OpenError::Send(e)
    }
}

impl OpenError {
    /// What the request that needed the stream is told (the store, or the
    /// replica it follows, could not take the event).
    fn as_send_error(&self) -> SendError {
        match self {
            OpenError::Send(e) => e.clone(),
            OpenError::Stale => SendError::Refused(
                "this node's replica of the session is stale (a failover lost events)".into(),
            ),
        }
    }
}

impl std::fmt::Display for OpenError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.as_send_error().fmt(f)
    }
}

impl From<OpenError> for ApiError {
    fn from(e: OpenError) -> Self {
        ApiError::send(&e.as_send_error())
    }
}

/// What [`SessionStore::respond`] did.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Responded {
    /// `false` when, in a cluster, the response could not be stored before
    /// the deadline (the request's registration then stays, so that the
    /// reaper answers it if this node dies).
    pub(crate) stored: bool,
    /// The payload length of the event published, if one was.
    pub(crate) published: Option<usize>,
}

/// The JSON-RPC error that stands for a response of `len` bytes (`response`)
/// the session's byte budget cannot hold: its id, `-32603`.
fn too_large_answer(response: &[u8], len: usize) -> Bytes {
    let id = serde_json::from_slice::<Value>(response).ok().and_then(|v| v.get("id").cloned());
    let e = crate::vocab::jsonrpc::RpcError::new(
        crate::vocab::jsonrpc::code::INTERNAL_ERROR,
        format!("the response of {len} bytes exceeds the session's byte budget"),
    );
    Bytes::from(crate::vocab::jsonrpc::response(&id.unwrap_or(Value::Null), Err(e)).to_string())
}

/// The error that takes the place of a request's response (`response`)
/// when an event queued on its stream was refused (`why`) and no publish
/// was told: the response would otherwise follow a hole in the stream.
fn refused_answer(response: &[u8], why: &gapless_redis::AppendError) -> Bytes {
    let id = serde_json::from_slice::<Value>(response).ok().and_then(|v| v.get("id").cloned());
    let e = crate::vocab::jsonrpc::RpcError::new(
        crate::vocab::jsonrpc::code::INTERNAL_ERROR,
        format!("event refused: {why}; the request's response is withheld, since an event it published before it is not stored"),
    );
    Bytes::from(crate::vocab::jsonrpc::response(&id.unwrap_or(Value::Null), Err(e)).to_string())
}

fn store_send_error(e: StoreError) -> SendError {
    match e {
        StoreError::UnknownSession => SendError::Closed,
        e => SendError::Refused(e.to_string()),
    }
}

impl SessionStore {
    /// Publishes `bytes` on `pacer`'s stream, paced: waits while the
    /// stream's attached reader (or a whole-session one) has `high_water`
    /// events unread (a wait is timed in `metrics`). In a cluster the
    /// readers are this node's, on its replica, and the events queued for
    /// the store count as unread; the event is then queued (§8.8, §8.9).
    pub(crate) async fn publish_paced(
        &self,
        session: &Session,
        pacer: &Pacer,
        bytes: Bytes,
        high_water: u64,
        metrics: &Metrics,
    ) -> Result<Seq, SendError> {
        match self {
            SessionStore::Cluster { cluster, appender, applier } => {
                pace(session, pacer, applier, high_water, metrics).await;
                enqueue(cluster, appender, pacer.stream().id(), bytes).await
            }
            SessionStore::Local => {
                // Polled once first: only a publish that has to wait is timed.
                let publish = session.publish_paced_with(pacer, bytes, high_water);
                let mut publish = std::pin::pin!(publish);
                match futures_util::poll!(publish.as_mut()) {
                    std::task::Poll::Ready(r) => Ok(r?),
                    std::task::Poll::Pending => {
                        let waited = std::time::Instant::now();
                        let r = publish.await;
                        metrics.paced_waits.observe(waited.elapsed().as_secs_f64());
                        Ok(r?)
                    }
                }
            }
        }
    }

    /// Publishes without pacing (results, priming events: never held back).
    /// In a cluster the event is queued for the store: `Seq(0)`, its seq is
    /// not known yet (§8.8).
    pub(crate) async fn publish_now(
        &self,
        session: &Session,
        stream: &StreamHandle,
        bytes: Bytes,
    ) -> Result<Seq, SendError> {
        match self {
            SessionStore::Cluster { cluster, appender, .. } => {
                enqueue(cluster, appender, stream.id(), bytes).await
            }
            SessionStore::Local => Ok(session.publish(stream, bytes)?),
        }
    }

    /// In a cluster, waits until the store has answered every event queued
    /// so far (what follows goes after them); the refusal of a queued event
    /// of `stream` that no publish was told, if any (told now; `over`: the
    /// stream ends, its record of refusals goes).
    async fn settle(
        &self,
        session: &Session,
        stream: StreamId,
        over: bool,
    ) -> Option<gapless_redis::AppendError> {
        let SessionStore::Cluster { appender, .. } = self else { return None };
        appender.barrier().await;
        let refused = if over { appender.forget(stream) } else { appender.tell(stream) };
        if let Some(e) = &refused {
            tracing::warn!(session = %SessionTag::of_id(&session.id()), %stream, error = %e, "an event queued on this stream was refused, and no later publish on it was told");
        }
        refused
    }

    /// Publishes a request's response on its stream and, if the stream is
    /// the request's `own`, ends it. In a cluster the answer and the end
    /// are one idempotent step in the store, retried while the store is
    /// down (a response never stored would leave the stream without an
    /// end) until `deadline` from now; so is the answer of a request on a
    /// shared stream that was `registered` (answered once: by this node or,
    /// if it dies first, by the reaper).
    pub(crate) async fn respond(
        &self,
        session: &Session,
        stream: &StreamHandle,
        own: bool,
        registered: Option<RequestAt>,
        bytes: Bytes,
        deadline: Duration,
    ) -> Responded {
        match self {
            SessionStore::Cluster { cluster, .. } if own || registered.is_some() => {
                let at = registered.filter(|_| !own).unwrap_or(RequestAt::Own(stream.id()));
                // After what the request queued (a shared stream goes on,
                // with its other requests' bookkeeping). A refused event
                // that no publish was told makes the response an error:
                // never a response after a hole.
                let refused = self.settle(session, stream.id(), own).await;
                let bytes = match refused {
                    Some(e) => refused_answer(&bytes, &e),
                    None => bytes,
                };
                let deadline = tokio::time::Instant::now() + deadline;
                let (mut bytes, mut replaced) = (bytes, false);
                let mut len = bytes.len();
                loop {
                    let r = cluster.store.answer(&session.id(), at, &bytes).await;
                    // A refusal for good: the client gets an explicit error
                    // in its place, once (a budget too small even for that
                    // leaves the request to the client's timeout).
                    if let Err(StoreError::AnswerTooLarge { len: big }) = r {
                        tracing::error!(session = %SessionTag::of_id(&session.id()), len = big, "response larger than the session's byte budget; answering an error instead");
                        if replaced {
                            return Responded { stored: true, published: None };
                        }
                        (bytes, replaced) = (too_large_answer(&bytes, big), true);
                        len = bytes.len();
                        continue;
                    }
                    match r.map_err(store_send_error) {
                        Ok(wrote) => return Responded { stored: true, published: wrote.then_some(len) },
                        Err(SendError::Refused(e)) if tokio::time::Instant::now() < deadline => {
                            tracing::warn!(session = %SessionTag::of_id(&session.id()), error = %e, "response not stored yet; retrying");
                            tokio::time::sleep(Duration::from_millis(200)).await;
                        }
                        Err(SendError::Refused(e)) => {
                            tracing::error!(session = %SessionTag::of_id(&session.id()), error = %e, "response not stored; giving up");
                            return Responded { stored: false, published: None };
                        }
                        Err(SendError::Closed) => return Responded { stored: true, published: None },
                    }
                }
            }
            _ => {
                let len = bytes.len();
                let published = self.publish_now(session, stream, bytes).await.ok().map(|_| len);
                if own {
                    let _ = self.end_stream(session, stream).await;
                }
                Responded { stored: true, published }
            }
        }
    }

    /// Opens a stream (in the store, in a cluster; the replica mirrors it
    /// at once).
    pub(crate) async fn open_stream(&self, session: &Session) -> Result<StreamHandle, OpenError> {
        match self {
            SessionStore::Local => Ok(session.open_stream().map_err(SendError::from)?),
            SessionStore::Cluster { cluster, .. } => {
                let seen = session.reader().head();
                let (id, head) =
                    cluster.store.open_stream_seen(&session.id(), seen).await.map_err(store_send_error)?;
                if head < seen {
                    // The store's head is below what this replica has: a
                    // failover lost events, and the replica is stale. Never
                    // serve a new stream from it (its id may be one of the
                    // lost streams' here).
                    let (c, sid) = (Arc::clone(cluster), session.id());
                    tokio::spawn(async move {
                        let _ = c.store.end_stream(&sid, id).await;
                    });
                    return Err(OpenError::Stale);
                }
                session
                    .open_streams_to(id)
                    .map_err(SendError::from)?
                    .ok_or(OpenError::Send(SendError::Closed))
            }
        }
    }

    /// Ends a stream (in the store, in a cluster, after the events queued
    /// on it: the replica ends it after its last event, when its follower
    /// reads the end).
    pub(crate) async fn end_stream(&self, session: &Session, stream: &StreamHandle) -> Result<(), SendError> {
        match self {
            SessionStore::Local => Ok(session.end_stream(stream)?),
            SessionStore::Cluster { cluster, .. } => {
                // Ended without a response (cancelled, or a stream no
                // request owns): a refusal nobody was told is logged.
                let _ = self.settle(session, stream.id(), true).await;
                cluster.store.end_stream(&session.id(), stream.id()).await.map_err(store_send_error)
            }
        }
    }

    /// The wire id and payload of an event read from the session's ring,
    /// the payload borrowed from it (in a cluster, without the store's
    /// position prefix).
    #[inline]
    pub(crate) fn wire<'a>(&self, session: &Session, e: EventRef<'a>) -> (EventId, &'a [u8]) {
        match self {
            SessionStore::Local => (session.event_id(e.stream, e.seq), e.payload),
            SessionStore::Cluster { .. } => cluster::wire(session, e),
        }
    }

    /// Records in the store that one write (an SSE chunk, a socket batch)
    /// delivers `lasts` (each stream's last event in it, and with it every
    /// earlier event of that stream), before the transport sends it: the
    /// client may resume on another node the moment it has it. `None` in
    /// process (delivery is then recorded after the write).
    pub(crate) fn mark_write(
        &self,
        session: &Session,
        lasts: &[&Event],
    ) -> Option<BoxFuture<'static, Result<(), StoreError>>> {
        let SessionStore::Cluster { cluster, .. } = self else { return None };
        let marks: Vec<_> = lasts.iter().map(|e| cluster::mark_ahead(cluster, session, e)).collect();
        Some(Box::pin(async move {
            for r in futures_util::future::join_all(marks).await {
                r?;
            }
            Ok(())
        }))
    }

    /// Every event of `stream` so far counts as delivered (a JSON-only
    /// response stands for them).
    pub(crate) async fn mark_all_delivered(&self, session: &Session, stream: &StreamHandle) {
        stream.mark_all_delivered();
        if let SessionStore::Cluster { cluster, appender, .. } = self {
            // The events queued so far are among them.
            appender.barrier().await;
            if let Err(e) = cluster.store.mark_all_delivered(&session.id(), stream.id()).await {
                tracing::warn!(session = %SessionTag::of_id(&session.id()), error = %e, "could not record a JSON-only delivery");
            }
        }
    }

    /// The JSON-RPC id of the session's `n`th server → client request:
    /// unique in the cluster (a response may arrive on any node, and each
    /// node's state of the session counts on its own).
    pub(crate) fn request_id(&self, n: u64) -> String {
        match self {
            SessionStore::Local => format!("s{n}"),
            SessionStore::Cluster { cluster, .. } => format!("s{}.{n}", &cluster.node[..8]),
        }
    }

    /// Registers request `id`, running on this node on `stream` (its `own`,
    /// or one it shares with other requests), in the store: if this node
    /// dies, another answers it with an explicit error (`docs/SPEC.md`
    /// §8.6). Where it is registered, to answer it
    /// ([`SessionStore::respond`]) and forget it when done
    /// ([`SessionStore::forget_request`]); never in process.
    pub(crate) async fn register_request(
        &self,
        session: &Session,
        stream: &StreamHandle,
        own: bool,
        id: &Value,
    ) -> Option<RequestAt> {
        let SessionStore::Cluster { cluster, .. } = self else { return None };
        let at = if own { RequestAt::Own(stream.id()) } else { RequestAt::shared(stream.id()) };
        let r = cluster.store.register_request(&cluster.node, &session.id(), at, &id.to_string()).await;
        if let Err(e) = &r {
            tracing::warn!(session = %SessionTag::of_id(&session.id()), error = %e, "request not registered in the store");
        }
        // Even a failed registration may have reached the primary (a write
        // no replica acknowledged): forget it when done.
        Some(at)
    }

    /// Marks a cancelled request on a shared stream answered without an
    /// answer, so that no reaper answers it if this node dies before it
    /// forgets it (`docs/SPEC.md` §8.6). Nothing to do for a request on its
    /// own stream (its end marks it) or in process.
    pub(crate) async fn mark_cancelled(&self, session: &Session, at: Option<RequestAt>) {
        let (SessionStore::Cluster { cluster, .. }, Some(RequestAt::Shared(stream, token))) = (self, at)
        else {
            return;
        };
        if let Err(e) = cluster.store.mark_answered(&session.id(), stream, token).await {
            tracing::warn!(session = %SessionTag::of_id(&session.id()), error = %e, "cancelled request not marked in the store");
        }
    }

    /// Forgets a request [`SessionStore::register_request`] registered.
    pub(crate) async fn forget_request(&self, session: &Session, at: RequestAt) {
        if let SessionStore::Cluster { cluster, .. } = self {
            let _ = cluster.store.finish_request(&cluster.node, &session.id(), at).await;
        }
    }

    /// `notifications/cancelled` for a request that does not run on this
    /// node: in a cluster it may run on another, which the bus tells.
    pub(crate) fn cancel_elsewhere(&self, session: &Session, id: Value) {
        if let SessionStore::Cluster { cluster, .. } = self {
            let (c, sid) = (Arc::clone(cluster), session.id().to_string());
            tokio::spawn(async move {
                c.broadcast(&cluster::BusMessage::Cancel { sid, id }).await;
            });
        }
    }

    /// A client's response that no request of this node waits for: in a
    /// cluster the request may wait on another node, which the bus tells.
    pub(crate) async fn respond_elsewhere(&self, session: &Session, id: Value, outcome: Outcome) {
        if let SessionStore::Cluster { cluster, .. } = self {
            let (result, error) = match outcome {
                Ok(r) => (Some(r), None),
                Err(e) => (None, Some(e)),
            };
            let sid = session.id().to_string();
            cluster.broadcast(&cluster::BusMessage::Response { sid, id, result, error }).await;
        }
    }

    /// The standalone stream from its first undelivered event, for the
    /// connection that claimed its lane (generation `gen`, ended by
    /// `ended`). With `prime`, a priming event comes first when there is no
    /// such backlog. In a cluster, one connection in the whole cluster at a
    /// time (a lease in the store, renewed while the connection is open:
    /// losing it ends the connection).
    pub(crate) async fn standalone<A: Attached>(
        &self,
        state: &Arc<A>,
        prime: bool,
        gen: u64,
        ended: &CancellationToken,
    ) -> Result<Feed, ApiError> {
        match self {
            SessionStore::Local => super::local::standalone(state, prime).await,
            SessionStore::Cluster { cluster, .. } => {
                cluster::standalone(cluster, state, prime, gen, ended).await
            }
        }
    }
}

/// An application's values of a session and its holds (`SessionHandle`'s
/// `set_value`, `value`, `hold`, `flush`, `end`): in a cluster they are the
/// store's, for every node; in process (`None`) the session's state keeps
/// its values, and every hold is this process's.
impl SessionStore {
    /// Records `value` as the session's `name` in the store; `None` in
    /// process.
    pub(crate) async fn set_value(
        &self,
        session: &Session,
        name: &str,
        value: &str,
    ) -> Option<Result<(), ValueError>> {
        let SessionStore::Cluster { cluster, .. } = self else { return None };
        Some(cluster.store.set_value(&session.id(), name, value.as_bytes()).await.map_err(value_error))
    }

    /// The session's `name` in the store; `None` in process.
    pub(crate) async fn value(
        &self,
        session: &Session,
        name: &str,
    ) -> Option<Result<Option<String>, ValueError>> {
        let SessionStore::Cluster { cluster, .. } = self else { return None };
        let v = cluster.store.value(&session.id(), name).await.map_err(value_error);
        Some(v.and_then(|v| {
            v.map(String::from_utf8)
                .transpose()
                .map_err(|_| ValueError::Store(format!("the session's value {name:?} is not UTF-8")))
        }))
    }

    /// Takes the hold named `name` on the session for this node if it is
    /// free or its holder's node is dead: `true` while this node holds it.
    /// In process, always.
    pub(crate) async fn hold(&self, session: &Session, name: &str) -> Result<bool, ValueError> {
        let SessionStore::Cluster { cluster, .. } = self else { return Ok(true) };
        let holder = cluster.hold(&session.id(), name).await.map_err(value_error)?;
        Ok(holder == cluster::Holder::Me)
    }

    /// Waits until this node holds `name` (at once in process); `false`
    /// when `closed` ends the wait first.
    pub(crate) async fn acquire(
        &self,
        session: &Session,
        name: &str,
        closed: &CancellationToken,
    ) -> Result<bool, ValueError> {
        let SessionStore::Cluster { cluster, .. } = self else { return Ok(true) };
        cluster.acquire(&session.id(), name, closed).await.map_err(value_error)
    }

    /// Lets go of this node's hold `name` (nothing in process).
    pub(crate) async fn release(&self, session: &Session, name: &str) -> Result<(), ValueError> {
        let SessionStore::Cluster { cluster, .. } = self else { return Ok(()) };
        cluster.release(&session.id(), name).await.map_err(value_error)
    }

    /// Resolves when another node takes this node's hold `name` over
    /// (never in process).
    pub(crate) async fn lost(&self, session: &Session, name: &str) {
        match self {
            SessionStore::Cluster { cluster, .. } => cluster.lost(&session.id(), name).await,
            SessionStore::Local => std::future::pending().await,
        }
    }

    /// The bus said hold `field` of session `id` is free.
    pub(crate) fn hold_freed(&self, id: &gapless::SessionId, field: &str) {
        if let SessionStore::Cluster { cluster, .. } = self {
            cluster.hold_freed(&id.to_string(), field);
        }
    }

    /// The bus said another node took hold `field` of session `id` from
    /// `holder`.
    pub(crate) fn hold_taken(&self, id: &gapless::SessionId, field: &str, holder: &str) {
        if let SessionStore::Cluster { cluster, .. } = self {
            cluster.hold_taken(&id.to_string(), field, holder);
        }
    }

    /// Waits until the store answered every event published on the
    /// session before the call (at once in process): `Err` when one of
    /// them was refused (not stored) and its publisher not told yet.
    pub(crate) async fn flush(&self) -> Result<(), SendError> {
        if let SessionStore::Cluster { appender, .. } = self {
            appender.barrier().await;
            if appender.refused_untold() {
                return Err(SendError::Refused("the store refused an event published before".into()));
            }
        }
        Ok(())
    }

    /// This node's connection generation in a standalone stream's holder
    /// (`<node>:<generation>`), if the holder is of this node.
    pub(crate) fn generation_of(&self, holder: &str) -> Option<u64> {
        let SessionStore::Cluster { cluster, .. } = self else { return None };
        holder.strip_prefix(cluster.node.as_str())?.strip_prefix(':')?.parse().ok()
    }

    /// Counts a connection of this node open on the session until the guard
    /// drops: in a cluster one that stays open pins the session in the
    /// store, so that it does not expire (`docs/SPEC.md` §8.1).
    pub(crate) fn connected(&self, session: &Session) -> Option<cluster::Pinned> {
        let SessionStore::Cluster { cluster, .. } = self else { return None };
        Some(cluster.connected(session.id()))
    }

    /// Whether the session lives in a cluster's store.
    pub(crate) fn shared(&self) -> bool {
        matches!(self, SessionStore::Cluster { .. })
    }

    /// Deletes the session from the store, for every node (nothing to do in
    /// process: the caller removes it from the hub).
    pub(crate) async fn delete(&self, session: &Session) -> Result<(), ValueError> {
        let SessionStore::Cluster { cluster, .. } = self else { return Ok(()) };
        cluster.store.delete(&session.id(), session.owner()).await.map(drop).map_err(value_error)
    }
}

fn value_error(e: StoreError) -> ValueError {
    match e {
        StoreError::UnknownSession => ValueError::Closed,
        e => ValueError::Store(e.to_string()),
    }
}

/// How often a paced publish in a cluster looks again at its lag while it
/// waits: the events queued ahead of the replica leave the count as the
/// store answers, which wakes no one.
const PACE_RECHECK: Duration = Duration::from_millis(20);

/// A cluster's paced publish: waits while an attached reader of this node's
/// replica lags `high_water` or more, the events queued for the store
/// counted (a wait is timed in `metrics`).
async fn pace(
    session: &Session,
    pacer: &Pacer,
    applier: &cluster::Applier,
    high_water: u64,
    metrics: &Metrics,
) {
    let ahead = || applier.ahead();
    let mut waited = None;
    loop {
        let mut paced = std::pin::pin!(session.pace(pacer, high_water, &ahead));
        if futures_util::poll!(paced.as_mut()).is_ready() {
            break;
        }
        waited.get_or_insert_with(std::time::Instant::now);
        if tokio::time::timeout(PACE_RECHECK, paced).await.is_ok() {
            break;
        }
    }
    if let Some(t) = waited {
        metrics.paced_waits.observe(t.elapsed().as_secs_f64());
    }
}

/// Queues one event for the store (§8.8): `Seq(0)`, its seq is not known
/// yet. Refused here when it could never be stored (larger than the byte
/// budget), or with the store's refusal of an earlier queued event of its
/// stream.
async fn enqueue(
    cluster: &Cluster,
    queue: &gapless_redis::Appender,
    stream: StreamId,
    bytes: Bytes,
) -> Result<Seq, SendError> {
    let budget = cluster.store.config().ring.byte_budget;
    if bytes.len() > budget {
        let e = gapless_redis::AppendError::PayloadTooLarge { index: 0, len: bytes.len(), budget };
        return Err(SendError::Refused(e.to_string()));
    }
    match queue.enqueue(stream, bytes).await {
        Ok(()) => Ok(Seq(0)),
        Err(gapless_redis::AppendError::Store(StoreError::UnknownSession)) => Err(SendError::Closed),
        Err(e) => Err(SendError::Refused(e.to_string())),
    }
}
