//! [`Sessions`]: this node's table of sessions of the 2025 revisions, and
//! every operation that finds, creates, resumes, migrates or ends one. What
//! differs between one process and a cluster is the backend's
//! (`backend/`); the table is the backend's [`Table`].

use super::fairness::ClientSlot;
use super::lanes::{Claim, Lane};
use super::state::{SessionState, Shared};
use crate::backend::cluster::{BusMessage, OnGone};
use crate::backend::{Backend, Feed, SessionStore, Table, Ticketed};
use crate::telemetry::Metrics;
use crate::vocab::change::Announcer;
use crate::vocab::config::ServerConfig;
use crate::vocab::error::ApiError;
use crate::vocab::sync::lock;
use gapless::{Hub, ResumeRequest, Session, SessionId, StreamId};
use serde_json::Value;
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio_util::sync::CancellationToken;

/// What the application is told when this node takes up a session another
/// node created (`Host::on_attach`).
pub(crate) type OnAttach = Box<dyn Fn(&Arc<SessionState>) + Send + Sync>;

/// What a task change heard on the bus does on this node: `(id, ended)`.
pub(crate) type OnTask = Box<dyn Fn(&str, bool) + Send + Sync>;

/// This node's sessions.
pub(crate) struct Sessions {
    /// What every session's state shares: the hub, the limits, the
    /// metrics, the shutdown, the announcements.
    pub(crate) shared: Shared,
    /// Where sessions live.
    pub(crate) backend: Backend,
    states: Mutex<HashMap<SessionId, Arc<SessionState>>>,
    on_attach: OnAttach,
    /// Where the bus's task changes go (the tasks' work of this node).
    on_task: Mutex<Option<OnTask>>,
    /// This table, for the callbacks it hands the backend.
    me: Weak<Sessions>,
}

impl std::fmt::Debug for Sessions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sessions")
            .field("hub", &self.shared.hub)
            .field("backend", &self.backend)
            .finish_non_exhaustive()
    }
}

impl Sessions {
    pub(crate) fn new(
        hub: Arc<Hub>,
        backend: Backend,
        config: Arc<ServerConfig>,
        metrics: Arc<Metrics>,
        shutdown: CancellationToken,
        changes: Announcer,
        on_attach: OnAttach,
    ) -> Arc<Self> {
        Arc::new_cyclic(|me| Sessions {
            shared: Shared { hub, config, metrics, shutdown, changes },
            backend,
            states: Mutex::default(),
            on_attach,
            on_task: Mutex::default(),
            me: me.clone(),
        })
    }

    /// Starts the backend's own work (in a cluster: the node's lease, the
    /// reaper, the bus, whose messages this table handles, its task changes
    /// by `on_task`) until shutdown.
    pub(crate) fn start(&self, on_task: OnTask) {
        *lock(&self.on_task) = Some(on_task);
        let me = self.me.clone();
        let on_bus = Arc::new(move |msg: BusMessage| {
            if let Some(table) = me.upgrade() {
                table.on_bus(msg);
            }
        });
        self.backend.start(on_bus, self.shared.shutdown.clone());
    }

    /// Every session's state on this node now.
    pub(crate) fn all(&self) -> Vec<Arc<SessionState>> {
        lock(&self.states).values().cloned().collect()
    }

    /// This node's state of session `id`, whoever owns it (for the cluster
    /// bus, whose messages come from other nodes' checked requests).
    fn by_id(&self, id: &str) -> Option<Arc<SessionState>> {
        let id = SessionId::parse(id)?;
        lock(&self.states).get(&id).cloned()
    }

    fn insert(&self, state: Arc<SessionState>) {
        lock(&self.states).insert(state.session.id(), state);
    }

    /// Creates a session of `owner` on `version` (its `initialize`'s
    /// `params`, if it had any), holding the client's place `client`.
    pub(crate) async fn create(
        &self,
        owner: Option<&str>,
        version: &str,
        client: Option<ClientSlot>,
        params: Option<Value>,
    ) -> Result<Arc<SessionState>, ApiError> {
        let (session, store) = self.backend.create(&self.shared.hub, owner, version, self.on_gone()).await?;
        let state = Arc::new(SessionState::new(&self.shared, session, version.to_owned(), client, store));
        if let Some(p) = params {
            state.set_initialize_params(p);
        }
        self.insert(Arc::clone(&state));
        Ok(state)
    }

    /// A resume of the cursor's stream per the decision table, taking over
    /// an older connection of that stream.
    pub(crate) async fn resume_lane(
        &self,
        req: ResumeRequest<'_>,
    ) -> Result<(Arc<SessionState>, Feed, StreamId, Claim), ApiError> {
        let (state, feed, stream) = self.backend.resume_stream(self, req).await?;
        let claim = state.attach(Lane::Stream(stream), false).expect("non-exclusive attach");
        Ok((state, feed, stream, claim))
    }

    /// The standalone stream from its first undelivered event, one
    /// connection at a time (else 409 `stream_busy`). With `prime`, a
    /// priming event comes first when there is no such backlog.
    pub(crate) async fn open_standalone(
        &self,
        state: &Arc<SessionState>,
        prime: bool,
    ) -> Result<(Feed, StreamId, Claim), ApiError> {
        let stream = state.session.standalone().id();
        let lane = Lane::Stream(stream);
        let claim = state.attach(lane, true).ok_or_else(ApiError::stream_busy)?;
        match state.store.standalone(state, prime, claim.0, &claim.1).await {
            Ok(feed) => Ok((feed, stream, claim)),
            Err(e) => {
                state.detach(lane, claim.0);
                Err(e)
            }
        }
    }

    /// `POST P/session/{id}/upgrade`: a migration ticket, or the refusal.
    pub(crate) async fn upgrade(&self, req: ResumeRequest<'_>) -> Result<Ticketed, ApiError> {
        self.backend.upgrade(self, req).await
    }

    /// `GET P/ws?ticket=T`: the ticket redeemed, and the socket's feed.
    pub(crate) async fn redeem(
        &self,
        ticket: &str,
        owner: Option<&str>,
    ) -> Result<(Arc<SessionState>, Feed), ApiError> {
        self.backend.redeem(self, ticket, owner).await
    }

    /// `DELETE`: the session goes.
    pub(crate) async fn delete(&self, sid: &str, owner: Option<&str>) -> Result<(), ApiError> {
        self.backend.delete(self, sid, owner).await
    }

    /// Expires idle sessions and tickets, and drops the state of sessions
    /// the hub no longer has.
    pub(crate) fn sweep(&self) {
        self.shared.metrics.sessions_expired.inc_by(self.shared.hub.sweep_idle() as u64);
        self.shared.hub.sweep_tickets();
        let dead: Vec<Arc<SessionState>> = {
            let mut states = lock(&self.states);
            let ids: Vec<SessionId> =
                states.iter().filter(|(_, s)| s.session.is_closed()).map(|(id, _)| *id).collect();
            ids.iter().filter_map(|id| states.remove(id)).collect()
        };
        for s in dead {
            self.shared.metrics.departed(&s.published, s.evicted());
            s.close();
        }
    }

    /// What the cluster bus brings: a response or a cancellation for a
    /// request of this node, or a session migrating.
    fn on_bus(&self, msg: BusMessage) {
        match msg {
            BusMessage::Response { sid, id, result, error } => {
                if let Some(s) = self.by_id(&sid) {
                    let outcome = match (result, error) {
                        (_, Some(e)) => Err(e),
                        (r, None) => Ok(r.unwrap_or(Value::Null)),
                    };
                    s.deliver_response(&id, outcome);
                }
            }
            BusMessage::Cancel { sid, id } => {
                if let Some(s) = self.by_id(&sid) {
                    s.cancel_request(&id);
                }
            }
            BusMessage::Migrating { sid } => {
                if let Some(s) = self.by_id(&sid) {
                    s.end_all_sse_streams();
                }
            }
            BusMessage::Migrated { sid } => {
                if let Some(s) = self.by_id(&sid) {
                    s.session.set_migrated();
                    s.end_all_sse_streams();
                }
            }
            BusMessage::HoldTaken { sid, field, holder } => {
                if let Some(s) = self.by_id(&sid) {
                    s.hold_taken(&field, &holder);
                }
            }
            BusMessage::HoldFreed { sid, field } => {
                if let Some(s) = self.by_id(&sid) {
                    s.store.hold_freed(&s.session.id(), &field);
                }
            }
            BusMessage::TaskChanged { id, ended } => {
                if let Some(f) = lock(&self.on_task).as_ref() {
                    f(&id, ended);
                }
            }
        }
    }
}

impl Table for Sessions {
    type State = SessionState;

    fn hub(&self) -> &Arc<Hub> {
        &self.shared.hub
    }

    /// The state of a live session visible to `owner`.
    fn local(&self, sid: &str, owner: Option<&str>) -> Option<Arc<SessionState>> {
        let session = self.shared.hub.get_str(sid, owner).ok()?;
        let states = lock(&self.states);
        let s = states.get(&session.id())?;
        Arc::ptr_eq(&s.session, &session).then(|| Arc::clone(s))
    }

    /// The state of a live session visible to `owner`: this node's, or one
    /// the backend attaches (`None`: no such session; `Err`: the store is
    /// unavailable).
    async fn find(&self, sid: &str, owner: Option<&str>) -> Result<Option<Arc<SessionState>>, ApiError> {
        if let Some(s) = self.local(sid, owner) {
            return Ok(Some(s));
        }
        self.backend.attach(self, sid, owner).await
    }

    async fn live(&self, sid: &str, owner: Option<&str>) -> Result<Arc<SessionState>, ApiError> {
        let state = self.find(sid, owner).await?.ok_or_else(ApiError::unknown_session)?;
        if state.session.is_migrated() {
            return Err(ApiError::session_migrated());
        }
        Ok(state)
    }

    fn adopt(&self, session: Arc<Session>, version: String, store: SessionStore) -> Arc<SessionState> {
        let state = Arc::new(SessionState::new(&self.shared, session, version, None, store));
        self.insert(Arc::clone(&state));
        (self.on_attach)(&state);
        state
    }

    /// This node drops the session and its state, if the replica that left
    /// is still the one it serves (a replaced follower must not drop its
    /// successor).
    fn on_gone(&self) -> OnGone {
        let me = self.me.clone();
        Arc::new(move |session: &Arc<Session>| {
            let Some(table) = me.upgrade() else { return };
            if table.shared.hub.remove_exact(session) {
                table.remove(&session.id());
            }
        })
    }

    fn remove(&self, id: &SessionId) {
        self.shared.hub.remove(id);
        if let Some(s) = lock(&self.states).remove(id) {
            self.shared.metrics.departed(&s.published, s.evicted());
            s.close();
        }
    }
}
