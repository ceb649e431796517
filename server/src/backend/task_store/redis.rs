//! The task store of cluster mode (`docs/SPEC.md` §5.5, §8): each record a
//! JSON value in Redis (`gapless_redis::RedisStore::task_create` and
//! friends), changed by compare-and-set, so that a task created on one node
//! is polled, fed and cancelled on any other.
//!
//! A task whose node died: a record that is not terminal names the node
//! running its work; whoever reads it while that node's lease has expired
//! records it `failed` (`-31002`, the node stopped before the task
//! completed), with the same compare-and-set, so it never stays `working`
//! for ever, and never vanishes while its TTL runs.

use super::{Change, CreateError, Lookup, Record, Status, StoreError, TaskStore, EXPIRED_MEMORY};
use crate::vocab::jsonrpc::code;
use futures_util::future::BoxFuture;
use gapless_redis::{NewTask, RedisStore, TaskBounds, TaskCreated};
use serde_json::json;

/// How many times a change is tried against records that keep changing
/// under it before the store is reported unavailable.
const MAX_TRIES: usize = 32;

/// Tasks in Redis; `me` is this node's name in leases.
#[derive(Clone)]
pub(crate) struct RedisTasks {
    pub(crate) store: RedisStore,
    pub(crate) me: String,
    /// Whether this node may take the node of a task for dead now (not
    /// while its own view of the store is unreliable).
    pub(crate) judge: std::sync::Arc<crate::backend::cluster::Judge>,
    /// The store's announcements (a record's replacement is announced on
    /// its task's channel).
    pub(crate) notifier: gapless_redis::Notifier,
}

/// A task's record's announcements ([`TaskStore::watch`]): on the task's
/// channel, where its event stream's appends announce their acked count (a
/// number, not the record's news: skipped) and a replacement of the record
/// a word (`status`), as does a reconnection.
struct Announced(gapless_redis::Watch);

impl super::TaskWatch for Announced {
    fn changed(&self) -> BoxFuture<'_, ()> {
        Box::pin(async move {
            loop {
                self.0.changed().await;
                if self.0.heard().other {
                    return;
                }
            }
        })
    }
}

impl std::fmt::Debug for RedisTasks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisTasks").field("me", &self.me).finish_non_exhaustive()
    }
}

fn store_error(e: gapless_redis::StoreError) -> StoreError {
    StoreError(e.to_string())
}

/// Marks `r` failed because its node's lease expired.
fn lost(r: &mut Record, now_ms: u64) {
    let node = r.node.clone().unwrap_or_default();
    let error = json!({
        "code": code::REQUEST_LOST,
        "message": format!("the node running the task ({node}) stopped before the task completed (its lease expired)"),
    });
    r.end(Status::Failed, Some(error), Some("the node running it stopped".into()), now_ms);
}

impl RedisTasks {
    /// Whether `r`'s work ran on a node that is gone. Never while this
    /// node's own lease has not been renewed without a break for a while
    /// (a failover under way: every lease may have run out).
    async fn orphaned(&self, r: &Record) -> Result<bool, StoreError> {
        match &r.node {
            Some(n) if !r.status.is_terminal() && *n != self.me && self.judge.may_judge() => {
                Ok(!self.store.node_is_alive(n).await.map_err(store_error)?)
            }
            _ => Ok(false),
        }
    }

    async fn change(&self, id: &str, now_ms: u64, change: Option<Change<'_>>) -> Result<Lookup, StoreError> {
        let mut change = change;
        for _ in 0..MAX_TRIES {
            let Some(old) = self.store.task_get(id).await.map_err(store_error)? else {
                return Ok(Lookup::Unknown);
            };
            let mut r: Record = serde_json::from_str(&old)
                .map_err(|e| StoreError(format!("task {id}: a record that does not parse: {e}")))?;
            if r.expires_at_ms().is_some_and(|e| e <= now_ms) {
                return Ok(Lookup::Expired);
            }
            let mut changed = false;
            if self.orphaned(&r).await? {
                lost(&mut r, now_ms);
                changed = true;
            }
            if let Some(c) = change.as_mut() {
                changed |= c(&mut r);
            }
            if !changed {
                return Ok(Lookup::Found(Box::new(r)));
            }
            let new = serde_json::to_string(&r).expect("a record serializes");
            if self.store.task_replace(id, &old, &new).await.map_err(store_error)? {
                return Ok(Lookup::Found(Box::new(r)));
            }
            // Changed meanwhile: read it again and apply the change to that.
        }
        Err(StoreError(format!("task {id} kept changing under {MAX_TRIES} tries")))
    }
}

impl TaskStore for RedisTasks {
    fn create(
        &self,
        record: Record,
        max: usize,
        max_per_owner: usize,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<(), CreateError>> {
        Box::pin(async move {
            let value = serde_json::to_string(&record).expect("a record serializes");
            let expires = record.expires_at_ms().unwrap_or(u64::MAX / 2);
            let bounds = TaskBounds { max, max_per_client: max_per_owner };
            let keep = EXPIRED_MEMORY.as_millis() as u64;
            let task = NewTask {
                id: &record.id,
                value: &value,
                client: record.client.as_deref(),
                expires_ms: expires,
                keep_ms: keep,
            };
            match self.store.task_create(task, bounds, now_ms).await {
                Ok(TaskCreated::Stored) => Ok(()),
                Ok(TaskCreated::Full { max, per_client }) => {
                    Err(CreateError::Full { max, per_owner: per_client })
                }
                Err(e) => Err(CreateError::Store(store_error(e))),
            }
        })
    }

    fn get<'a>(&'a self, id: &'a str, now_ms: u64) -> BoxFuture<'a, Result<Lookup, StoreError>> {
        Box::pin(self.change(id, now_ms, None))
    }

    fn modify<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
        change: Change<'a>,
    ) -> BoxFuture<'a, Result<Lookup, StoreError>> {
        Box::pin(self.change(id, now_ms, Some(change)))
    }

    fn watch(&self, id: &str) -> Option<Box<dyn super::TaskWatch>> {
        Some(Box::new(Announced(self.notifier.watch_task(id))))
    }

    fn node_alive<'a>(&'a self, node: &'a str) -> BoxFuture<'a, bool> {
        // Not while this node's own view is unreliable; a store that does
        // not answer is no news either.
        Box::pin(
            async move { !self.judge.may_judge() || self.store.node_is_alive(node).await.unwrap_or(true) },
        )
    }
}
