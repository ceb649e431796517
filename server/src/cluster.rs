//! Cluster mode (`docs/SPEC.md` §8): every node of a cluster keeps its
//! sessions in one Redis store ([`gapless_redis::RedisStore`]), so that any
//! request of a session may land on any node.
//!
//! The store is the source of truth: sessions, seqs, the window, stream
//! marks. A node keeps, for each session it serves, a local replica: a ring
//! whose seqs are the store's, filled only by the session's follower task,
//! which tails the store's log (woken by the store's announcements). Every
//! reader on the node (SSE responses) reads that ring, never Redis per
//! event. Publishing goes to the store; the event reaches local readers
//! through the follower like any other node's.
//!
//! A replica's payloads carry a prefix of [`PREFIX`] bytes: the event's
//! nonce (its wire id's check) and its index in its stream, as the store
//! has them; the transport strips it when it writes an event.

use bytes::{BufMut, Bytes, BytesMut};
use gapless::{Hub, Namespace, Seq, Session, SessionId, StreamId};
use gapless_redis::{Attach, Notifier, RedisStore, StoreError, TailEntry};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Bytes before a replica event's payload: its check and its index in its
/// stream, both little-endian u64.
pub(crate) const PREFIX: usize = 16;

/// Log entries a follower reads per call.
const TAIL_BATCH: usize = 512;

/// A follower re-reads the log this often even without an announcement
/// (an expired session announces nothing).
const TAIL_POLL: Duration = Duration::from_millis(500);

/// A node's lease in the store. A live node renews it every
/// [`HEARTBEAT_EVERY`]: only a node that stops (or stalls for most of a
/// lease) lets it run out.
pub(crate) const NODE_LEASE: Duration = Duration::from_secs(10);

/// How often a node renews its lease.
pub(crate) const HEARTBEAT_EVERY: Duration = Duration::from_secs(1);

/// How often a node looks for dead nodes' open requests.
pub(crate) const REAP_EVERY: Duration = Duration::from_secs(1);

/// A replica payload: `check`, `index`, then `payload`.
pub(crate) fn wrap(check: u64, index: u64, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(PREFIX + payload.len());
    b.put_u64_le(check);
    b.put_u64_le(index);
    b.put_slice(payload);
    b.freeze()
}

/// One async lock per session, made when first asked for and dropped when
/// no one holds or waits for it (the map holds only weak references).
#[derive(Default)]
pub(crate) struct KeyedLock(Mutex<HashMap<SessionId, Weak<tokio::sync::Mutex<()>>>>);

impl KeyedLock {
    pub(crate) async fn lock(&self, id: SessionId) -> tokio::sync::OwnedMutexGuard<()> {
        let one = {
            let mut m = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            m.retain(|_, w| w.strong_count() > 0);
            match m.get(&id).and_then(Weak::upgrade) {
                Some(one) => one,
                None => {
                    let one = Arc::new(tokio::sync::Mutex::new(()));
                    m.insert(id, Arc::downgrade(&one));
                    one
                }
            }
        };
        one.lock_owned().await
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        self.0.lock().unwrap().values().filter(|w| w.strong_count() > 0).count()
    }
}

/// The check and the index in its stream of a replica event (`None` for one
/// no follower wrote).
pub(crate) fn position(payload: &[u8]) -> Option<(u64, u64)> {
    let (c, i) = (payload.get(..8)?, payload.get(8..PREFIX)?);
    Some((u64::from_le_bytes(c.try_into().ok()?), u64::from_le_bytes(i.try_into().ok()?)))
}

/// The store and this node's followers.
pub(crate) struct Cluster {
    pub(crate) store: RedisStore,
    /// This node's name in leases (random per process).
    pub(crate) node: String,
    notifier: Notifier,
    /// Followers by session: the seq each has applied so far.
    followers: Mutex<HashMap<SessionId, Follower>>,
    /// One attach at a time on this node (two requests of a new session
    /// arriving together would otherwise make two replicas).
    attaching: KeyedLock,
}

struct Follower {
    session: Weak<Session>,
    applied: watch::Receiver<u64>,
    stop: CancellationToken,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("store", &self.store).finish_non_exhaustive()
    }
}

/// What a replica's follower calls when its session is gone from the store
/// (or its replica is stale): drops that replica, if it is still the one
/// the node serves.
pub(crate) type OnGone = Arc<dyn Fn(&Arc<Session>) + Send + Sync>;

impl Cluster {
    /// A cluster on `store` (announcements from the same Redis).
    pub(crate) fn new(store: RedisStore, url: &str) -> Result<Self, StoreError> {
        let notifier = Notifier::start(url, &store.config().prefix)?;
        let node = format!("{:016x}", {
            let mut b = [0u8; 8];
            getrandom::getrandom(&mut b).expect("the OS CSPRNG is available");
            u64::from_le_bytes(b)
        });
        Ok(Cluster { store, node, notifier, followers: Mutex::default(), attaching: KeyedLock::default() })
    }

    /// Starts the node's background work: its lease, the reaper of dead
    /// nodes' requests, and the bus (responses to server → client requests
    /// and cancellations posted to another node). Ends on `shutdown`.
    pub(crate) fn start(self: &Arc<Self>, state: Weak<crate::state::AppState>, shutdown: CancellationToken) {
        let me = Arc::clone(self);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
            let mut reap = tokio::time::interval(REAP_EVERY);
            // Since when this node's lease has been renewed without a break:
            // after a store outage every lease has run out, and the other
            // nodes need a lease period to renew theirs before anyone may
            // call them dead.
            let mut healthy_since: Option<tokio::time::Instant> = None;
            loop {
                tokio::select! {
                    _ = beat.tick() => match me.store.heartbeat(&me.node, NODE_LEASE).await {
                        Ok(()) => {
                            healthy_since.get_or_insert_with(tokio::time::Instant::now);
                        }
                        Err(e) => {
                            healthy_since = None;
                            tracing::debug!(error = %e, "node lease not renewed");
                        }
                    },
                    _ = reap.tick(), if healthy_since.is_some_and(|t| t.elapsed() > NODE_LEASE + REAP_EVERY) => match me.store.reap(&me.node, orphan_answer).await {
                        Ok(0) => {}
                        Ok(n) => tracing::info!(answered = n, "answered the open requests of a node that stopped"),
                        Err(e) => tracing::debug!(error = %e, "reaper: store unavailable"),
                    },
                    _ = stop.cancelled() => break,
                }
            }
        });
        let mut bus = self.notifier.bus();
        tokio::spawn(async move {
            loop {
                let msg = tokio::select! {
                    m = bus.recv() => m,
                    _ = shutdown.cancelled() => break,
                };
                let msg = match msg {
                    Ok(m) => m,
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(lost = n, "cluster bus: messages lost");
                        continue;
                    }
                    Err(_) => break,
                };
                let Some(state) = state.upgrade() else { break };
                on_bus(&state, &msg);
            }
        });
    }

    /// Tells every node about `msg` (see [`BusMessage`]).
    pub(crate) async fn broadcast(&self, msg: &BusMessage) {
        let bytes = serde_json::to_vec(msg).expect("bus messages serialize");
        if let Err(e) = self.store.publish_bus(&bytes).await {
            tracing::warn!(error = %e, "cluster bus: message not sent");
        }
    }

    /// The seq this node's replica of `id` has applied, to wait on.
    pub(crate) fn applied(&self, id: &SessionId) -> Option<watch::Receiver<u64>> {
        crate::vocab::sync::lock(&self.followers).get(id).map(|f| f.applied.clone())
    }

    /// A local replica of a session the store has just created (head 0).
    pub(crate) fn replica_of_new(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        id: SessionId,
        ns: Namespace,
        owner: Option<&str>,
        on_gone: OnGone,
    ) -> Result<Arc<Session>, gapless::SessionError> {
        let at = Attach {
            ns,
            head: Seq(0),
            opened: StreamId(1),
            live: vec![StreamId(1)],
            position: (0, 0),
            version: String::new(),
            migrated: false,
            check: None,
        };
        self.start_replica(hub, id, owner, &at, on_gone)
    }

    /// Held while a request of session `id`, which this node has no
    /// transport state for, attaches one (two arriving together would make
    /// two replicas). One lock per session: a slow attach holds up only
    /// its own session's requests.
    pub(crate) async fn attach_lock(&self, id: SessionId) -> tokio::sync::OwnedMutexGuard<()> {
        self.attaching.lock(id).await
    }

    /// A local replica of session `id` as the store has it now, if `owner`
    /// sees it there, with its negotiated protocol version. Call it under
    /// [`Cluster::attach_lock`].
    pub(crate) async fn attach(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        id: SessionId,
        owner: Option<&str>,
        on_gone: OnGone,
    ) -> Result<Option<(Arc<Session>, String)>, AttachError> {
        let Some(at) = self.store.attach(&id, owner).await.map_err(AttachError::Store)? else {
            return Ok(None);
        };
        let session = self.start_replica(hub, id, owner, &at, on_gone).map_err(AttachError::Local)?;
        Ok(Some((session, at.version)))
    }

    fn start_replica(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        id: SessionId,
        owner: Option<&str>,
        at: &Attach,
        on_gone: OnGone,
    ) -> Result<Arc<Session>, gapless::SessionError> {
        let session = hub.create_replica(id, at.ns, owner, Seq(at.head.0 + 1))?;
        if session.mirror_streams(&at.live, at.opened).is_err() {
            return Err(gapless::SessionError::Unknown);
        }
        if at.migrated {
            session.set_migrated();
        }
        let (tx, rx) = watch::channel(at.head.0);
        let stop = CancellationToken::new();
        let old = crate::vocab::sync::lock(&self.followers)
            .insert(id, Follower { session: Arc::downgrade(&session), applied: rx, stop: stop.clone() });
        if let Some(old) = old {
            old.stop.cancel();
        }
        let watch = self.notifier.watch(id);
        let me = Arc::clone(self);
        let s = Arc::clone(&session);
        let place = Place { position: at.position, check: at.check };
        tokio::spawn(async move {
            me.follow(s, place, tx, watch, stop, on_gone).await;
        });
        Ok(session)
    }

    /// The follower: applies the store's log to the replica, in order,
    /// until the replica closes, the session leaves the store, or the
    /// replica cannot represent the log any more (it fell behind the
    /// store's trim: the replica is closed, its readers end, and their
    /// clients' resumes are decided by the store).
    async fn follow(
        self: Arc<Self>,
        session: Arc<Session>,
        place: Place,
        applied: watch::Sender<u64>,
        watch: gapless_redis::Watch,
        stop: CancellationToken,
        on_gone: OnGone,
    ) {
        let id = session.id();
        let Place { mut position, check: mut last_check } = place;
        loop {
            if session.is_closed() || stop.is_cancelled() {
                break;
            }
            let local = session.reader().head();
            match self.store.tail(&id, position, TAIL_BATCH, local).await {
                Ok(Some(tail)) if rewritten(&session, &tail, position, last_check) => {
                    // Another incarnation, or the store lost events this
                    // replica holds (a failover; the store now knows up to
                    // which seq): the replica is stale.
                    tracing::warn!(session = %crate::vocab::secret::SessionTag::of_id(&id), store_head = ?tail.head, replica_head = ?local, "replica no longer matches the store; closing it");
                    on_gone(&session);
                    break;
                }
                Ok(Some(tail)) => {
                    if tail.migrated && !session.is_migrated() {
                        session.set_migrated();
                    }
                    let n = tail.entries.len();
                    let mut broken = false;
                    for (pos, entry) in tail.entries {
                        let check = match &entry {
                            TailEntry::Event(e) => Some(e.check),
                            TailEntry::Ended(_) => last_check,
                        };
                        if !apply(&session, entry) {
                            broken = true;
                            break;
                        }
                        (position, last_check) = (pos, check);
                    }
                    let _ = applied.send(session.reader().head().0);
                    if broken {
                        if !session.is_closed() {
                            tracing::warn!(session = %crate::vocab::secret::SessionTag::of_id(&id), "replica fell behind the store's window; closing it");
                        }
                        on_gone(&session);
                        break;
                    }
                    if n == TAIL_BATCH {
                        continue;
                    }
                }
                Ok(None) => {
                    // Deleted or expired in the store.
                    on_gone(&session);
                    break;
                }
                Err(e) => {
                    tracing::debug!(session = %crate::vocab::secret::SessionTag::of_id(&id), error = %e, "follower: store unavailable");
                }
            }
            tokio::select! {
                _ = watch.changed() => {}
                _ = tokio::time::sleep(TAIL_POLL) => {}
                _ = stop.cancelled() => break,
            }
        }
        let mut f = crate::vocab::sync::lock(&self.followers);
        if f.get(&id).is_some_and(|f| f.session.upgrade().is_none_or(|s| Arc::ptr_eq(&s, &session))) {
            f.remove(&id);
        }
    }
}

/// Where a follower is in the log: the entry it read last, and the nonce of
/// the event at that entry's seq.
struct Place {
    position: (u64, u64),
    check: Option<u64>,
}

/// Whether the store's log is no longer the one this replica follows: another
/// incarnation; a head below the replica's (a failover lost events, and the
/// store now knows up to which seq); or another event at the seq the
/// follower last applied (a failover lost it and the seq was reused).
fn rewritten(
    session: &Session,
    tail: &gapless_redis::Tail,
    position: (u64, u64),
    last_check: Option<u64>,
) -> bool {
    if tail.ns != session.namespace() || tail.head < session.reader().head() {
        return true;
    }
    match last_check {
        Some(mine) if position.0 > 0 && position.0 >= tail.oldest.0 => tail.check_at != Some(mine),
        _ => false,
    }
}

/// Applies one log entry to a replica; `false` when it cannot (a hole: the
/// store trimmed events this replica never read).
fn apply(session: &Session, entry: TailEntry) -> bool {
    match entry {
        TailEntry::Event(e) => {
            let head = session.reader().head().0;
            if e.seq.0 <= head {
                return true; // read before
            }
            if e.seq.0 != head + 1 {
                return false;
            }
            let Ok(Some(h)) = session.open_streams_to(e.stream) else { return false };
            session.publish(&h, wrap(e.check, e.index_in_stream, &e.payload)).is_ok()
        }
        TailEntry::Ended(s) => {
            // A stream may end before any event of it reached this replica.
            let h = match session.reader().handle(s) {
                Some(h) => Some(h),
                None if s.0 > session.reader().streams_opened() => session.open_streams_to(s).ok().flatten(),
                None => None,
            };
            if let Some(h) = h {
                let _ = session.end_stream(&h);
            }
            true
        }
    }
}

/// Why a replica could not be attached.
#[derive(Debug)]
pub(crate) enum AttachError {
    Store(StoreError),
    Local(gapless::SessionError),
}

/// What the error response of a request whose node stopped says.
fn orphan_answer(request_id: &str) -> Bytes {
    let id: serde_json::Value = serde_json::from_str(request_id).unwrap_or(serde_json::Value::Null);
    let e = crate::vocab::jsonrpc::RpcError::new(
        crate::vocab::jsonrpc::code::REQUEST_LOST,
        "the server node running this request stopped before it answered; whether it took effect is unknown",
    );
    gapless::ring::exact_bytes(
        serde_json::to_vec(&crate::vocab::jsonrpc::response(&id, Err(e))).expect("JSON"),
    )
}

/// A message on the cluster-wide bus, for the node running a request.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum BusMessage {
    /// A client's response to a server → client request.
    Response {
        /// The session.
        sid: String,
        /// The request's JSON-RPC id.
        id: serde_json::Value,
        /// `result` or `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<serde_json::Value>,
    },
    /// `notifications/cancelled` for request `id`.
    Cancel {
        /// The session.
        sid: String,
        /// The cancelled request's JSON-RPC id.
        id: serde_json::Value,
    },
    /// A migration ticket was issued: the session's SSE streams end on
    /// every node (`docs/SPEC.md` §4.3).
    Migrating {
        /// The session.
        sid: String,
    },
    /// A socket redeemed a ticket: the session is migrated on every node.
    Migrated {
        /// The session.
        sid: String,
    },
}

fn on_bus(state: &crate::state::AppState, msg: &[u8]) {
    let Ok(msg) = serde_json::from_slice::<BusMessage>(msg) else {
        tracing::warn!("cluster bus: a message this node does not understand");
        return;
    };
    match msg {
        BusMessage::Response { sid, id, result, error } => {
            if let Some(conn) = state.local_conn(&sid) {
                let outcome = match (result, error) {
                    (_, Some(e)) => Err(e),
                    (r, None) => Ok(r.unwrap_or(serde_json::Value::Null)),
                };
                conn.deliver_response(&id, outcome);
            }
        }
        BusMessage::Cancel { sid, id } => {
            if let Some(conn) = state.local_conn(&sid) {
                conn.cancel_request(&id);
            }
        }
        BusMessage::Migrating { sid } => {
            if let Some(conn) = state.local_conn(&sid) {
                conn.end_all_sse_streams();
            }
        }
        BusMessage::Migrated { sid } => {
            if let Some(conn) = state.local_conn(&sid) {
                conn.session.set_migrated();
                conn.end_all_sse_streams();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::KeyedLock;
    use gapless::SessionId;
    use std::time::Duration;

    #[tokio::test]
    async fn one_session_waits_for_its_own_lock_only() {
        let locks = std::sync::Arc::new(KeyedLock::default());
        let (a, b) = (SessionId::random(), SessionId::random());
        let held = locks.lock(a).await;
        // Another session's lock is free.
        tokio::time::timeout(Duration::from_secs(1), locks.lock(b)).await.expect("b is not held up by a");
        // The same session's waits.
        let l = std::sync::Arc::clone(&locks);
        let waiter = tokio::spawn(async move { drop(l.lock(a).await) });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!waiter.is_finished(), "a second holder of a's lock did not wait");
        drop(held);
        tokio::time::timeout(Duration::from_secs(1), waiter).await.expect("released").unwrap();
        assert_eq!(locks.len(), 0, "no lock kept once nobody holds or waits");
    }
}
