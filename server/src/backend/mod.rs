//! The session backend: where a server's sessions and tasks live. It is
//! chosen once, when the server is built, and this module is the one place
//! that asks which it is:
//!
//! - [`Backend::Local`]: this process. A session is the engine's
//!   [`Session`] in the server's [`Hub`]; its ring is the truth, and the
//!   engine decides resumes (`docs/SPEC.md` §4.2).
//! - [`Backend::Cluster`]: a Redis store that every node of a cluster
//!   shares (`docs/SPEC.md` §8). The store is the truth; a session this
//!   node serves has a local replica (a ring filled from the store's log,
//!   `cluster/replica.rs`) that its readers read, and the store decides
//!   resumes (`cluster/resume.rs`).
//!
//! What differs between the two is here and nowhere else:
//!
//! | operation | where |
//! |---|---|
//! | publishing, answering a request, opening and ending streams, an event's wire id, the delivery mark of each write, server → client request ids, the registration of running requests | [`SessionStore`], one per session (`store.rs`) |
//! | creating, attaching, deleting a session; resumes, the standalone stream, migration tickets | [`Backend`]'s methods, `local.rs` and `cluster/` |
//! | where task records live | [`Backend::task_store`] (`task_store/`) |
//!
//! The layer above (the session table, `session/`) is reached through two
//! traits, [`Table`] and [`Attached`], so that this layer names nothing
//! of it.

pub(crate) mod cluster;
mod feed;
mod local;
mod store;
pub(crate) mod task_store;

pub(crate) use feed::Feed;
pub(crate) use gapless_redis::{RedisStore, RequestAt, StoreError, StoreFigures};
pub(crate) use store::{OpenError, SessionStore};

use crate::vocab::error::{ApiError, SendError};
use gapless::ring::RingConfig;
use gapless::{Hub, ResumeRequest, Seq, Session, SessionId, StreamHandle, StreamId};
use serde_json::Value;
use std::future::Future;
use std::sync::Arc;
use tokio_util::sync::CancellationToken;

/// Where sessions and tasks live.
pub(crate) enum Backend {
    /// This process.
    Local,
    /// A Redis store shared by the nodes of a cluster.
    Cluster(Arc<cluster::Cluster>),
}

impl std::fmt::Debug for Backend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Backend::Local => f.write_str("Local"),
            Backend::Cluster(c) => f.debug_tuple("Cluster").field(c).finish(),
        }
    }
}

/// A session's state on this node, as the backend needs it (the session
/// layer's `SessionState`).
pub(crate) trait Attached: Send + Sync + 'static {
    /// The engine's session (the ring, or the local replica of the store's).
    fn session(&self) -> &Arc<Session>;
    /// Publishes a priming event on `stream` (an empty one: SEP-1699).
    fn prime(&self, stream: &StreamHandle) -> impl Future<Output = Result<Seq, SendError>> + Send;
    /// Ends every SSE connection of the session on this node (a migration).
    fn end_all_sse_streams(&self);
    /// Drops this node's replica of the session, which holds events the
    /// store lost (a failover), and ends its state here: the next request
    /// attaches afresh.
    fn drop_replica(&self);
}

/// The session table of this node, as the backend needs it.
pub(crate) trait Table: Send + Sync {
    /// A session's state.
    type State: Attached;
    /// The hub holding the sessions' rings.
    fn hub(&self) -> &Arc<Hub>;
    /// This node's state of a live session visible to `owner`, without
    /// asking the store.
    fn local(&self, sid: &str, owner: Option<&str>) -> Option<Arc<Self::State>>;
    /// This node's state of a live session visible to `owner`, or one
    /// attached from the store ([`Backend::attach`]); `None`: no such
    /// session.
    fn find(
        &self,
        sid: &str,
        owner: Option<&str>,
    ) -> impl Future<Output = Result<Option<Arc<Self::State>>, ApiError>> + Send;
    /// [`Table::find`], refusing a session that migrated to a WebSocket.
    fn live(
        &self,
        sid: &str,
        owner: Option<&str>,
    ) -> impl Future<Output = Result<Arc<Self::State>, ApiError>> + Send;
    /// Keeps a state for a session the backend attached on this node.
    fn adopt(&self, session: Arc<Session>, version: String, store: SessionStore) -> Arc<Self::State>;
    /// What a follower calls when its session left the store.
    fn on_gone(&self) -> cluster::OnGone;
    /// Drops the session and its state from this node.
    fn remove(&self, id: &SessionId);
}

/// A migration ticket issued (`docs/SPEC.md` §4.3).
#[derive(Debug)]
pub(crate) struct Ticketed {
    /// The ticket.
    pub(crate) ticket: String,
    /// The id of the first event the socket replays, if any.
    pub(crate) replay_from: Option<String>,
    /// How many events the socket replays before it goes live.
    pub(crate) replay_count: u64,
}

/// Tells every node of a cluster that a task's record changed (its id, and
/// whether it is terminal now); resolves once told.
#[derive(Clone)]
pub(crate) struct TaskNews(
    Arc<dyn Fn(String, bool) -> futures_util::future::BoxFuture<'static, ()> + Send + Sync>,
);

impl TaskNews {
    /// Tells every node that task `id` changed (`ended`: it is terminal).
    pub(crate) async fn tell(&self, id: String, ended: bool) {
        (self.0)(id, ended).await
    }
}

impl std::fmt::Debug for TaskNews {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("TaskNews")
    }
}

/// What the cluster bus brings this node (`cluster/bus.rs`), handled by
/// the session table.
pub(crate) type OnBus = Arc<dyn Fn(cluster::BusMessage) + Send + Sync>;

impl Backend {
    /// Cluster mode on `store` (announcements from the Redis at `url`).
    /// The local replicas' rings (`ring`) grow by the prefix each of their
    /// events carries.
    pub(crate) fn cluster(store: RedisStore, url: &str, ring: &mut RingConfig) -> Result<Self, StoreError> {
        ring.byte_budget = ring.byte_budget.saturating_add(cluster::PREFIX.saturating_mul(ring.capacity));
        Ok(Backend::Cluster(Arc::new(cluster::Cluster::new(store, url)?)))
    }

    /// Starts the backend's own work until `shutdown`: in a cluster, the
    /// node's lease, the reaper of dead nodes' requests, and the bus.
    pub(crate) fn start(&self, on_bus: OnBus, shutdown: CancellationToken) {
        if let Backend::Cluster(c) = self {
            c.start(on_bus, shutdown);
        }
    }

    /// This node's name in a cluster's leases.
    pub(crate) fn node(&self) -> Option<String> {
        match self {
            Backend::Local => None,
            Backend::Cluster(c) => Some(c.node.clone()),
        }
    }

    /// Where task records live: this process, or the cluster's store.
    pub(crate) fn task_store(&self) -> Arc<dyn task_store::TaskStore> {
        match self {
            Backend::Local => Arc::new(task_store::MemoryTasks::new()),
            Backend::Cluster(c) => Arc::new(task_store::RedisTasks {
                store: c.store.clone(),
                me: c.node.clone(),
                judge: Arc::clone(&c.judge),
                notifier: c.notifier().clone(),
            }),
        }
    }

    /// Where task event streams live in a cluster, beside the task records
    /// (`records`), each bounded by `config` (`None` in process: each task's
    /// stream is a ring of this process).
    pub(crate) fn task_events(
        &self,
        records: &Arc<dyn task_store::TaskStore>,
        config: gapless::task::TaskEventsConfig,
    ) -> Option<Arc<task_store::RedisEvents>> {
        match self {
            Backend::Local => None,
            Backend::Cluster(c) => Some(Arc::new(task_store::RedisEvents::new(
                c.store.clone(),
                c.notifier().clone(),
                Arc::clone(&c.judge),
                Arc::clone(records),
                config,
            ))),
        }
    }

    /// How a node tells the others that it changed a task's record (`None`
    /// in process, where the work runs in the process that changed it).
    pub(crate) fn task_news(&self) -> Option<TaskNews> {
        match self {
            Backend::Local => None,
            Backend::Cluster(c) => {
                let c = Arc::clone(c);
                Some(TaskNews(Arc::new(move |id: String, ended: bool| {
                    let c = Arc::clone(&c);
                    Box::pin(
                        async move { c.broadcast(&cluster::BusMessage::TaskChanged { id, ended }).await },
                    )
                })))
            }
        }
    }

    /// What the cluster's store requests did (`None` in process).
    pub(crate) fn store_figures(&self) -> Option<StoreFigures> {
        match self {
            Backend::Local => None,
            Backend::Cluster(c) => Some(c.store.figures()),
        }
    }

    /// Creates a session of `owner` that negotiated `version`: its ring (its
    /// replica, in a cluster, after the store created it), and its store.
    pub(crate) async fn create(
        &self,
        hub: &Arc<Hub>,
        owner: Option<&str>,
        version: &str,
        on_gone: cluster::OnGone,
    ) -> Result<(Arc<Session>, SessionStore), ApiError> {
        match self {
            Backend::Local => Ok((hub.create(owner)?, SessionStore::Local)),
            Backend::Cluster(c) => cluster::create(c, hub, owner, version, on_gone).await,
        }
    }

    /// A state for session `sid` attached from the store, if `owner` sees
    /// it there (never in process: a session this node does not hold does
    /// not exist).
    pub(crate) async fn attach<T: Table>(
        &self,
        table: &T,
        sid: &str,
        owner: Option<&str>,
    ) -> Result<Option<Arc<T::State>>, ApiError> {
        match self {
            Backend::Local => Ok(None),
            Backend::Cluster(c) => cluster::attach(c, table, sid, owner).await,
        }
    }

    /// `DELETE`: the session goes (from the store, in a cluster: every
    /// node following it drops its replica when its follower reads that).
    pub(crate) async fn delete<T: Table>(
        &self,
        table: &T,
        sid: &str,
        owner: Option<&str>,
    ) -> Result<(), ApiError> {
        match self {
            Backend::Local => local::delete(table, sid, owner),
            Backend::Cluster(c) => cluster::delete(c, table, sid, owner).await,
        }
    }

    /// A resume of the cursor's stream per the decision table
    /// (`docs/SPEC.md` §4.2, §8.4): the session's state, what to send and
    /// the stream.
    pub(crate) async fn resume_stream<T: Table>(
        &self,
        table: &T,
        req: ResumeRequest<'_>,
    ) -> Result<(Arc<T::State>, Feed, StreamId), ApiError> {
        match self {
            Backend::Local => local::resume_stream(table, req).await,
            Backend::Cluster(c) => cluster::resume_stream(c, table, req).await,
        }
    }

    /// `POST P/session/{id}/upgrade`: the migration check, then a ticket
    /// (`docs/SPEC.md` §4.3); the session's SSE streams end.
    pub(crate) async fn upgrade<T: Table>(
        &self,
        table: &T,
        req: ResumeRequest<'_>,
    ) -> Result<Ticketed, ApiError> {
        match self {
            Backend::Local => local::upgrade(table, req),
            Backend::Cluster(c) => cluster::upgrade(c, table, req).await,
        }
    }

    /// `GET P/ws?ticket=T`: the ticket redeemed, and the socket's feed (the
    /// gap the ticket pinned, then the whole session live).
    pub(crate) async fn redeem<T: Table>(
        &self,
        table: &T,
        ticket: &str,
        owner: Option<&str>,
    ) -> Result<(Arc<T::State>, Feed), ApiError> {
        match self {
            Backend::Local => local::redeem(table, ticket, owner),
            Backend::Cluster(c) => cluster::redeem(c, table, ticket, owner).await,
        }
    }
}

/// A client's response to a server → client request, as the bus carries
/// it (`Ok(result)` or `Err(error object)`).
pub(crate) type Outcome = Result<Value, Value>;
