//! An application's holds of a session in a cluster (`SessionHandle::hold`,
//! `docs/SPEC.md` §10.6): a field `h:<name>` of the session's meta naming
//! the node that holds it, valid while that node's lease is, renewed by
//! nobody (`gapless_redis::RedisStore::take_hold`).
//!
//! A node that waits for a hold ([`Cluster::acquire`]) costs nothing per
//! session while it waits: a node that lets go of a hold says so on the bus
//! (`HoldFreed`), and the keeper looks once a second at whether each node
//! holding something a waiter here wants is alive (one `EXISTS` per such
//! node) and wakes the waiters of a dead one, who take the hold over; it
//! also wakes [`WAKES_PER_SECOND`] waiters in turn (a bus message may be
//! lost).
//! A node that takes a hold over says so on the bus (`HoldTaken`): the node
//! it took it from, should it be alive after all (taken for dead), is told
//! it lost it ([`Cluster::lost`]).

use super::{BusMessage, Cluster};
use crate::vocab::sync::lock;
use gapless::SessionId;
use gapless_redis::{holder_node, Hold, StoreError};
use std::collections::HashMap;
use std::sync::{Arc, Mutex, Weak};
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// How long a hold taken from a dead node waits for that node's open
/// requests to be answered (the reaper looks every 500 ms).
const REAPED_WAIT: std::time::Duration = std::time::Duration::from_secs(5);

/// How many waiters the keeper wakes per second in turn.
const WAKES_PER_SECOND: usize = 4;

/// The waiters and holders of this node.
#[derive(Default)]
pub(crate) struct Holds {
    /// Waiters for a hold another node has: that node, and how to wake it.
    waiters: Mutex<Vec<Weak<Waiter>>>,
    /// This node's holds, by session and field: cancelled when another node
    /// took one over.
    held: Mutex<HashMap<(SessionId, String), CancellationToken>>,
    /// The keeper's turn through the waiters.
    turn: Mutex<usize>,
}

struct Waiter {
    id: SessionId,
    field: String,
    /// The holder's node, once known.
    node: Mutex<String>,
    wake: Notify,
}

/// Whose a hold is, as [`Cluster::hold`] found it.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Holder {
    /// This node's.
    Me,
    /// Node `.0`'s, alive when it was looked at.
    Other(String),
}

/// The meta field of the application's hold `name`.
fn field(name: &str) -> String {
    format!("h:{name}")
}

impl Cluster {
    /// Takes hold `name` of session `id` for this node if nobody holds it,
    /// or its holder's node is dead (said on the bus then); whose it is. A
    /// hold taken from a dead node is this node's once a reaper answered
    /// the requests that node left open (at most [`REAPED_WAIT`] later):
    /// what this node then does (a gateway ends the session) comes after
    /// those answers.
    pub(crate) async fn hold(&self, id: &SessionId, name: &str) -> Result<Holder, StoreError> {
        let f = field(name);
        match self.store.take_hold(id, &f, &self.node, self.judge.may_judge(), |_| false).await? {
            Hold::Taken { replaced } => {
                lock(&self.holds.held).entry((*id, f.clone())).or_default();
                if let Some(from) = replaced {
                    let dead = holder_node(&from).to_owned();
                    self.broadcast(&BusMessage::HoldTaken { sid: id.to_string(), field: f, holder: from })
                        .await;
                    let deadline = tokio::time::Instant::now() + REAPED_WAIT;
                    while self.store.node_is_listed(&dead).await.unwrap_or(false)
                        && tokio::time::Instant::now() < deadline
                    {
                        tokio::time::sleep(super::REAP_EVERY / 5).await;
                    }
                }
                Ok(Holder::Me)
            }
            Hold::Busy { holder } => Ok(Holder::Other(holder_node(&holder).to_owned())),
        }
    }

    /// Waits until this node holds `name` of session `id`: at once if
    /// nobody does, else when the keeper finds its holder's node dead (or
    /// `closed` is cancelled: then `Ok(false)`).
    pub(crate) async fn acquire(
        &self,
        id: &SessionId,
        name: &str,
        closed: &CancellationToken,
    ) -> Result<bool, StoreError> {
        loop {
            // Waiting before the try: a `HoldFreed` after it is not missed.
            let waiter =
                Arc::new(Waiter { id: *id, field: field(name), node: Mutex::default(), wake: Notify::new() });
            lock(&self.holds.waiters).push(Arc::downgrade(&waiter));
            match self.hold(id, name).await? {
                Holder::Me => return Ok(true),
                Holder::Other(node) => *lock(&waiter.node) = node,
            }
            tokio::select! {
                _ = waiter.wake.notified() => {}
                _ = closed.cancelled() => return Ok(false),
            }
        }
    }

    /// Lets go of this node's hold `name` of session `id`, and says so on
    /// the bus (the nodes waiting for it try at once).
    pub(crate) async fn release(&self, id: &SessionId, name: &str) -> Result<(), StoreError> {
        let f = field(name);
        lock(&self.holds.held).remove(&(*id, f.clone()));
        self.store.drop_hold(id, &f, &self.node).await?;
        self.broadcast(&BusMessage::HoldFreed { sid: id.to_string(), field: f }).await;
        Ok(())
    }

    /// What the bus says: hold `field` of session `sid` is free; its
    /// waiters here try to take it.
    pub(crate) fn hold_freed(&self, sid: &str, field: &str) {
        let Some(id) = SessionId::parse(sid) else { return };
        for w in lock(&self.holds.waiters).iter().filter_map(Weak::upgrade) {
            if w.id == id && w.field == field {
                w.wake.notify_one();
            }
        }
    }

    /// Resolves when another node takes this node's hold `name` of session
    /// `id` over (this node was taken for dead), or at once if this node
    /// does not hold it (it was taken, or let go of, already).
    pub(crate) async fn lost(&self, id: &SessionId, name: &str) {
        let token = lock(&self.holds.held).get(&(*id, field(name))).cloned();
        if let Some(t) = token {
            t.cancelled().await
        }
    }

    /// After this node was taken for dead: each hold it thinks it has is
    /// asked of the store again, and one another node took is lost (the
    /// bus's `HoldTaken` may have been missed meanwhile).
    pub(super) async fn recheck_holds(&self) {
        let held: Vec<(SessionId, String)> = lock(&self.holds.held).keys().cloned().collect();
        for (id, f) in held {
            match self.store.take_hold(&id, &f, &self.node, false, |_| false).await {
                Ok(Hold::Taken { .. }) => {}
                Ok(Hold::Busy { .. }) | Err(StoreError::UnknownSession) => {
                    if let Some(t) = lock(&self.holds.held).remove(&(id, f)) {
                        t.cancel();
                    }
                }
                Err(e) => tracing::warn!(error = %e, "a hold could not be checked again"),
            }
        }
    }

    /// What the bus says: another node took hold `field` of session `sid`
    /// from `holder`. Returns whether the holder was this node's.
    pub(crate) fn hold_taken(&self, sid: &str, field: &str, holder: &str) -> bool {
        if holder_node(holder) != self.node {
            return false;
        }
        if let Some(id) = SessionId::parse(sid) {
            if let Some(t) = lock(&self.holds.held).remove(&(id, field.to_owned())) {
                t.cancel();
            }
        }
        true
    }

    /// The keeper's look at the holders its waiters wait for: one `EXISTS`
    /// per node; the waiters of a dead one are woken.
    pub(super) async fn wake_waiters_of_dead_holders(&self) {
        // The holds of sessions this node no longer follows are not
        // watched any more.
        lock(&self.holds.held).retain(|(id, _), _| lock(&self.followers).contains_key(id));
        let waiters: Vec<Arc<Waiter>> = {
            let mut w = lock(&self.holds.waiters);
            w.retain(|w| w.strong_count() > 0);
            w.iter().filter_map(Weak::upgrade).collect()
        };
        let mut nodes: Vec<String> = waiters.iter().map(|w| lock(&w.node).clone()).collect();
        nodes.sort_unstable();
        nodes.dedup();
        for node in nodes.iter().filter(|n| !n.is_empty()) {
            if let Ok(false) = self.store.node_is_alive(node).await {
                for w in waiters.iter().filter(|w| *lock(&w.node) == *node) {
                    w.wake.notify_one();
                }
            }
        }
        if !waiters.is_empty() {
            let mut turn = lock(&self.holds.turn);
            for _ in 0..WAKES_PER_SECOND.min(waiters.len()) {
                *turn = (*turn + 1) % waiters.len();
                waiters[*turn].wake.notify_one();
            }
        }
    }
}
