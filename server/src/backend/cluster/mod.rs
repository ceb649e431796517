//! Cluster mode (`docs/SPEC.md` §8): every node of a cluster keeps its
//! sessions in one Redis store ([`gapless_redis::RedisStore`]), so that any
//! request of a session may land on any node.
//!
//! The store is the source of truth: sessions, seqs, the window, stream
//! marks. A node keeps, for each session it serves, a local replica
//! (`replica.rs`): a ring whose seqs are the store's, filled only by the
//! session's follower. Every reader on the node (SSE responses, sockets)
//! reads that ring, never Redis per event. Publishing goes to the store;
//! the event reaches local readers through the follower like any other
//! node's. Resumes, the standalone stream and migrations are decided by the
//! store (`resume.rs`). The node's lease, the reaper of dead nodes'
//! requests and the cluster bus (`bus.rs`) run in the background.

mod apply;
mod bus;
mod holds;
mod keeper;
mod keyed_lock;
mod replica;
mod resume;

pub(crate) use apply::Applier;
pub(crate) use apply::{OnGone, PREFIX};
pub(crate) use bus::BusMessage;
pub(crate) use gapless_redis::STANDALONE_HOLD;
pub(crate) use holds::Holder;
pub(crate) use keeper::Pinned;
pub(super) use resume::{redeem, resume_stream, standalone, upgrade};

use super::{OnBus, SessionStore, Table};
use crate::vocab::error::ApiError;
use crate::vocab::sync::lock;
use bytes::Bytes;
use gapless::ring::EventRef;
use gapless::{Event, EventId, Hub, Session, SessionId};
use gapless_redis::{Notifier, RedisStore, StoreError};
use keyed_lock::KeyedLock;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// A node's lease in the store. A live node renews it every
/// [`HEARTBEAT_EVERY`] (six times a lease): only a node that stops, or
/// stalls for most of a lease, lets it run out. With [`REAP_EVERY`] and one
/// read of the log it bounds how long a dead node's request stays
/// unanswered: under 5 s (`docs/SPEC.md` §8.6).
pub(crate) const NODE_LEASE: Duration = Duration::from_secs(3);

/// How often a node renews its lease: two commands (`SET PX`, `ZADD`).
pub(crate) const HEARTBEAT_EVERY: Duration = Duration::from_millis(500);

/// How often a node looks for dead nodes' open requests: a `ZRANGE` of the
/// node set and an `EXISTS` per other node.
pub(crate) const REAP_EVERY: Duration = Duration::from_millis(500);

/// How soon a renewal that failed is tried again.
const RENEW_RETRY: Duration = Duration::from_millis(100);

/// How long a node's own renewals must have gone on without a break before
/// it takes another node for dead ([`Judge`]): ten of the others' renewal
/// retries after a store outage that stopped theirs too.
const JUDGE_AFTER: Duration = Duration::from_secs(1);

/// How long a stream's delivery mark is tried again while the store is
/// unavailable (a Redis Cluster failover: about twice `cluster-node-timeout`)
/// before the stream ends; with one try's own timeout (the store's, 2 s),
/// a stream waits at most about 4.5 s.
const DELIVERY_PATIENCE: Duration = Duration::from_millis(2500);

/// How soon a delivery mark the store did not take is tried again.
const DELIVERY_RETRY: Duration = Duration::from_millis(100);

/// The store and this node's followers.
pub(crate) struct Cluster {
    pub(crate) store: RedisStore,
    /// This node's name in leases (random per process).
    pub(crate) node: String,
    notifier: Notifier,
    /// Followers by session: the seq each has applied so far.
    followers: Mutex<HashMap<SessionId, replica::Follower>>,
    /// One attach at a time on this node (two requests of a new session
    /// arriving together would otherwise make two replicas).
    attaching: KeyedLock,
    /// This node's open connections by session, its pins, and the safety
    /// net's turn (`keeper.rs`).
    pins: keeper::Pins,
    /// This node's waiters for holds and the holds it has (`holds.rs`).
    holds: holds::Holds,
    /// Whether this node may take another for dead now.
    pub(crate) judge: Arc<Judge>,
}

/// Whether a node sees the store reliably enough to take another node for
/// dead (`docs/SPEC.md` §8.6): only once its own lease has been renewed
/// without a break for [`JUDGE_AFTER`]. A store outage (a Redis Cluster
/// failover: `MOVED`, `CLUSTERDOWN`) may let other leases run out; the
/// others get that long to renew theirs (they retry every
/// [`RENEW_RETRY`]), and a node that died meanwhile is still answered for
/// within about 5 s of its death. The reaper, a task's
/// record read as `failed`, and a hold taken from a dead node all ask it.
#[derive(Debug, Default)]
pub(crate) struct Judge {
    healthy_since: Mutex<Option<tokio::time::Instant>>,
}

impl Judge {
    /// Whether this node may take a node whose lease is gone for dead.
    pub(crate) fn may_judge(&self) -> bool {
        lock(&self.healthy_since).is_some_and(|t| t.elapsed() > JUDGE_AFTER)
    }

    fn renewed(&self, ok: bool) {
        let mut h = lock(&self.healthy_since);
        match ok {
            true => drop(h.get_or_insert_with(tokio::time::Instant::now)),
            false => *h = None,
        }
    }
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster").field("store", &self.store).finish_non_exhaustive()
    }
}

impl Cluster {
    /// A cluster on `store` (announcements from the same Redis).
    pub(crate) fn new(store: RedisStore, url: &str) -> Result<Self, StoreError> {
        let notifier = Notifier::start(url, &store.config().prefix)?;
        let node = format!("{:016x}", {
            let mut b = [0u8; 8];
            getrandom::getrandom(&mut b).expect("the OS CSPRNG is available");
            u64::from_le_bytes(b)
        });
        Ok(Cluster {
            store,
            node,
            notifier,
            followers: Mutex::default(),
            attaching: KeyedLock::default(),
            pins: keeper::Pins::default(),
            holds: holds::Holds::default(),
            judge: Arc::default(),
        })
    }

    /// Starts the node's background work: its lease, the reaper of dead
    /// nodes' requests, and the bus (responses to server → client requests
    /// and cancellations posted to another node). Ends on `shutdown`.
    pub(crate) fn start(self: &Arc<Self>, on_bus: OnBus, shutdown: CancellationToken) {
        self.keep(shutdown.clone());
        let me = Arc::clone(self);
        let stop = shutdown.clone();
        tokio::spawn(async move {
            let mut beat = tokio::time::interval(HEARTBEAT_EVERY);
            let mut reap = tokio::time::interval(REAP_EVERY);
            let mut beaten = false;
            loop {
                tokio::select! {
                    _ = beat.tick() => match me.store.heartbeat(&me.node, NODE_LEASE).await {
                        Ok(listed) => {
                            if beaten && !listed {
                                // Taken for dead and reaped while alive.
                                tracing::warn!("this node was taken for dead (its lease lapsed): it takes up its pins and checks its holds again");
                                me.repin_all();
                                let me = Arc::clone(&me);
                                tokio::spawn(async move { me.recheck_holds().await });
                            }
                            beaten = true;
                            me.judge.renewed(true);
                        }
                        Err(e) => {
                            me.judge.renewed(false);
                            tracing::debug!(error = %e, "node lease not renewed");
                            // Again soon rather than at the next beat: the
                            // store may be back through a new topology (a
                            // failover) before the lease runs out.
                            beat.reset_after(RENEW_RETRY);
                        }
                    },
                    _ = reap.tick(), if me.judge.may_judge() => match me.store.reap(&me.node, orphan_answer).await {
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
                if let Some(msg) = bus::decode(&msg) {
                    on_bus(msg);
                }
            }
        });
    }

    /// The node's subscriber to the store's announcements.
    pub(crate) fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// Tells every node about `msg` (see [`BusMessage`]).
    pub(crate) async fn broadcast(&self, msg: &BusMessage) {
        let bytes = serde_json::to_vec(msg).expect("bus messages serialize");
        if let Err(e) = self.store.publish_bus(&bytes).await {
            tracing::warn!(error = %e, "cluster bus: message not sent");
        }
    }

    /// The seq this node's replica of `id` has applied, to wait on. Its
    /// follower reads the log now (an announcement it waits for may have
    /// been lost).
    pub(crate) fn applied(&self, id: &SessionId) -> Option<watch::Receiver<u64>> {
        let applied = lock(&self.followers).get(id).map(|f| f.applier.applied());
        self.notifier.wake(id);
        applied
    }
}

/// A session created in the store, and this node's replica of it, which
/// follows it from its first event.
pub(super) async fn create(
    c: &Arc<Cluster>,
    hub: &Arc<Hub>,
    owner: Option<&str>,
    version: &str,
    on_gone: OnGone,
) -> Result<(Arc<Session>, SessionStore), ApiError> {
    let id = SessionId::random();
    let stored =
        c.store.create_versioned(id, owner, version).await.map_err(|e| ApiError::store_unavailable(&e))?;
    Ok(c.replica_of_new(hub, id, stored.ns, owner, on_gone)?)
}

/// A state for session `sid`, if `owner` sees it in the store: a replica
/// of it as the store has it now, with its negotiated protocol version.
/// One attach at a time per session on this node (two requests arriving
/// together would otherwise make two replicas).
pub(super) async fn attach<T: Table>(
    c: &Arc<Cluster>,
    table: &T,
    sid: &str,
    owner: Option<&str>,
) -> Result<Option<Arc<T::State>>, ApiError> {
    let Some(id) = SessionId::parse(sid) else { return Ok(None) };
    let _one = c.attaching.lock(id).await;
    if let Some(state) = table.local(sid, owner) {
        return Ok(Some(state));
    }
    let Some(at) = c.store.attach(&id, owner).await.map_err(|e| ApiError::store_unavailable(&e))? else {
        return Ok(None);
    };
    let (session, store) = c.start_replica(table.hub(), id, owner, &at, table.on_gone())?;
    Ok(Some(table.adopt(session, at.version, store)))
}

/// `DELETE`: the store's session goes; every node following it drops its
/// replica when its follower reads that.
pub(super) async fn delete<T: Table>(
    c: &Cluster,
    table: &T,
    sid: &str,
    owner: Option<&str>,
) -> Result<(), ApiError> {
    let id = SessionId::parse(sid).ok_or_else(ApiError::unknown_session)?;
    let deleted = c.store.delete(&id, owner).await.map_err(|e| ApiError::store_unavailable(&e))?;
    if !deleted {
        return Err(ApiError::unknown_session());
    }
    table.remove(&id);
    Ok(())
}

/// The wire id and payload of an event of a replica: the id carries the
/// store's check, and the payload goes without the replica's prefix.
pub(super) fn wire<'a>(session: &Session, e: EventRef<'a>) -> (EventId, &'a [u8]) {
    let id = EventId::new(session.namespace(), e.stream, e.seq);
    match apply::position(e.payload) {
        Some((check, _)) => (id.with_check(check), &e.payload[PREFIX..]),
        // Never written by a follower; shown as it is.
        None => (id.with_check(0), e.payload),
    }
}

/// Records in the store that `e`, and every earlier event of its stream,
/// is delivered.
pub(super) fn mark_ahead(
    c: &Arc<Cluster>,
    session: &Session,
    e: &Event,
) -> futures_util::future::BoxFuture<'static, Result<(), StoreError>> {
    let c = Arc::clone(c);
    let (check, index) = match apply::position(&e.payload) {
        Some((check, index)) => (Some(check), index),
        None => (None, 0),
    };
    let (id, stream, seq) = (session.id(), e.stream, e.seq);
    Box::pin(async move {
        let since = tokio::time::Instant::now();
        loop {
            match c.store.mark_delivered(&id, stream, seq, index, check).await {
                // A failover under way: the stream waits rather than ends
                // (a client cut before its first event has no cursor).
                Err(StoreError::Unavailable(_)) if since.elapsed() < DELIVERY_PATIENCE => {
                    tokio::time::sleep(DELIVERY_RETRY).await;
                }
                r => return r.map(drop),
            }
        }
    })
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
