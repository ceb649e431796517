//! Where task records live (`docs/SPEC.md` §5.5): the store seam
//! ([`TaskStore`]), the in-process store (`memory.rs`) and cluster mode's
//! (`redis.rs`). Which one a server uses is the backend's choice.
//!
//! A record is written whole by whoever changes it, through
//! [`TaskStore::modify`], which applies a change to the current record
//! atomically (under the store's lock here; a store shared by several
//! nodes does the same with a transaction). A record is readable by
//! [`TaskStore::get`] from the moment [`TaskStore::create`] returns: that is
//! what lets a `CreateTaskResult` go out only once its task is durable.
//!
//! Expiry: a record is gone once its TTL has run from its creation. Its id
//! is then remembered as expired for a while ([`EXPIRED_MEMORY`], bounded
//! in count), so that a client polling late is told "expired", not
//! "unknown".

mod events;
mod memory;
mod redis;

pub(crate) use events::{Follow, FollowError, RedisEvents};
pub(crate) use memory::MemoryTasks;
pub(crate) use redis::RedisTasks;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use std::time::Duration;

/// How long an expired task's id is still answered "expired".
pub(crate) const EXPIRED_MEMORY: Duration = Duration::from_secs(3600);

/// How many expired ids the in-process store remembers per task it may
/// hold (a few MiB at the default bound), in case more than that many
/// expire within [`EXPIRED_MEMORY`].
pub(crate) const EXPIRED_PER_TASK: usize = 16;

/// A task's status (`Task.status`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Status {
    Working,
    InputRequired,
    Completed,
    Failed,
    Cancelled,
}

impl Status {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Status::Working => "working",
            Status::InputRequired => "input_required",
            Status::Completed => "completed",
            Status::Failed => "failed",
            Status::Cancelled => "cancelled",
        }
    }

    /// Completed, failed and cancelled never change again.
    pub(crate) fn is_terminal(self) -> bool {
        matches!(self, Status::Completed | Status::Failed | Status::Cancelled)
    }
}

/// One task, as stored.
///
/// Invariants (kept by the functions of `tasks/mod.rs` that change it):
/// `status` is `InputRequired` exactly when `input_requests` is not empty;
/// once `status` is terminal nothing changes but the store's removal at
/// expiry; `result` is set only with `Completed`, `error` only with
/// `Failed`; a key of `input_requests` was never used before by this task
/// (`keys_used` counts them, so a key is never reissued).
#[derive(Clone, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub(crate) struct Record {
    /// ≥ 128 random bits, hex.
    pub(crate) id: String,
    /// The identity of the caller that created it; `None` when the server
    /// has no identities (then the id alone grants access).
    pub(crate) owner: Option<String>,
    pub(crate) status: Status,
    pub(crate) status_message: Option<String>,
    /// Unix time in milliseconds.
    pub(crate) created_at_ms: u64,
    pub(crate) updated_at_ms: u64,
    /// From creation; `None`: kept until the server's own bound.
    pub(crate) ttl_ms: Option<u64>,
    pub(crate) poll_interval_ms: Option<u64>,
    /// Outstanding server → client requests, by key.
    pub(crate) input_requests: Map<String, Value>,
    /// Answers given by `tasks/update`, not yet taken by the task's work.
    pub(crate) answers: Map<String, Value>,
    pub(crate) keys_used: Vec<String>,
    pub(crate) result: Option<Value>,
    pub(crate) error: Option<Value>,
    /// The node whose process runs the work (cluster mode), else `None`.
    pub(crate) node: Option<String>,
    /// Whose quota it counts against: the caller's identity, else its
    /// peer address (`None`: only the total bounds it).
    pub(crate) client: Option<String>,
}

impl Record {
    /// Makes it terminal with `status`, its `payload` (the result of a
    /// completed task, the error of a failed one) and `message`, unless it
    /// is terminal already: then nothing changes. Whether it changed.
    pub(crate) fn end(
        &mut self,
        status: Status,
        payload: Option<Value>,
        message: Option<String>,
        now_ms: u64,
    ) -> bool {
        debug_assert!(status.is_terminal());
        if self.status.is_terminal() {
            return false;
        }
        self.status = status;
        match status {
            Status::Completed => self.result = payload,
            Status::Failed => self.error = payload,
            _ => {}
        }
        self.status_message = message;
        self.input_requests.clear();
        self.answers.clear();
        self.updated_at_ms = now_ms;
        true
    }

    /// When the store lets go of it (Unix ms), if ever.
    pub(crate) fn expires_at_ms(&self) -> Option<u64> {
        self.ttl_ms.map(|t| self.created_at_ms.saturating_add(t))
    }
}

/// What a lookup found.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Lookup {
    Found(Box<Record>),
    /// It existed, and its TTL ran out.
    Expired,
    /// No such task (or never one this store knew).
    Unknown,
}

/// The store could not answer (cluster mode: Redis unreachable or slow).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct StoreError(pub(crate) String);

/// Why a task could not be created.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum CreateError {
    /// The store holds its most tasks in all (`max`), or the owner its most.
    Full {
        max: usize,
        per_owner: bool,
    },
    Store(StoreError),
}

/// A change to one record: it edits the record and says whether it
/// changed anything (an unchanged record is not written back).
pub(crate) type Change<'a> = &'a mut (dyn FnMut(&mut Record) -> bool + Send);

/// The seam between the tasks extension and where its records live: this
/// process's memory ([`MemoryTasks`]) or, in cluster mode, Redis.
pub(crate) trait TaskStore: Send + Sync + std::fmt::Debug {
    /// Stores a new record; once this returns `Ok`, [`TaskStore::get`] on any
    /// node finds it. Refused when the store holds `max` unexpired tasks,
    /// or the record's client `max_per_owner`.
    fn create(
        &self,
        record: Record,
        max: usize,
        max_per_owner: usize,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<(), CreateError>>;

    /// The record of `id` as of `now_ms`.
    fn get<'a>(&'a self, id: &'a str, now_ms: u64) -> BoxFuture<'a, Result<Lookup, StoreError>>;

    /// Applies `change` to the record of `id` atomically and returns it as
    /// it is after (unchanged when `change` returned `false`).
    fn modify<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
        change: Change<'a>,
    ) -> BoxFuture<'a, Result<Lookup, StoreError>>;

    /// Drops what expired by `now_ms` where the store does not expire
    /// records itself (the in-process store); how many.
    fn sweep(&self, _now_ms: u64) -> usize {
        0
    }

    /// A wake-up at every change of task `id`'s record, whichever node
    /// made it (`None`: every change is this process's, the in-process
    /// store's).
    fn watch(&self, _id: &str) -> Option<Box<dyn TaskWatch>> {
        None
    }

    /// Whether node `node`, named by a record as running its work, is
    /// alive (or the store cannot tell now); always where there are no
    /// nodes.
    fn node_alive<'a>(&'a self, _node: &'a str) -> BoxFuture<'a, bool> {
        Box::pin(async { true })
    }
}

/// See [`TaskStore::watch`]. Dropping it stops the watch.
pub(crate) trait TaskWatch: Send + Sync {
    /// Waits for the next change of the record (one made while nobody
    /// waited is remembered); it also wakes when changes may have gone
    /// unheard (the store's connection was re-established).
    fn changed(&self) -> BoxFuture<'_, ()>;
}
