//! Where task records live (`docs/SPEC.md` §5.5): the store seam and the
//! in-process store.
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

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;
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
}

/// The in-process store: a map under one mutex, expired records dropped
/// when met and by [`MemoryTasks::sweep`].
#[derive(Debug, Default)]
pub(crate) struct MemoryTasks {
    inner: Mutex<Inner>,
}

#[derive(Debug, Default)]
struct Inner {
    /// Invariant: no record here has expired as of the last sweep or
    /// lookup that met it (a lookup checks before it answers).
    tasks: HashMap<String, Record>,
    per_owner: HashMap<String, usize>,
    /// Expired ids with when they expired, oldest first, at most
    /// [`EXPIRED_PER_TASK`] × `max` (the `create` bound) of them; `gone`
    /// holds the same ids, for lookups.
    expired: VecDeque<(String, u64)>,
    gone: HashSet<String>,
    max_expired: usize,
}

impl Inner {
    fn remove(&mut self, id: &str, at_ms: u64) {
        if let Some(r) = self.tasks.remove(id) {
            if let Some(o) = &r.client {
                if let Some(n) = self.per_owner.get_mut(o) {
                    *n -= 1;
                    if *n == 0 {
                        self.per_owner.remove(o);
                    }
                }
            }
            self.gone.insert(r.id.clone());
            self.expired.push_back((r.id, at_ms));
            while self.expired.len() > self.max_expired.max(1) {
                self.forget_oldest();
            }
        }
    }

    /// Drops what expired by `now_ms`, and forgets expired ids older than
    /// [`EXPIRED_MEMORY`].
    fn sweep(&mut self, now_ms: u64) -> usize {
        let gone: Vec<(String, u64)> = self
            .tasks
            .values()
            .filter_map(|r| r.expires_at_ms().filter(|&e| e <= now_ms).map(|e| (r.id.clone(), e)))
            .collect();
        for (id, at) in &gone {
            self.remove(id, *at);
        }
        let memory = EXPIRED_MEMORY.as_millis() as u64;
        while self.expired.front().is_some_and(|(_, at)| at.saturating_add(memory) <= now_ms) {
            self.forget_oldest();
        }
        gone.len()
    }

    fn forget_oldest(&mut self) {
        if let Some((id, _)) = self.expired.pop_front() {
            self.gone.remove(&id);
        }
    }

    fn lookup(&mut self, id: &str, now_ms: u64) -> Option<&mut Record> {
        let expired = self.tasks.get(id).and_then(Record::expires_at_ms).is_some_and(|e| e <= now_ms);
        if expired {
            let at = self.tasks[id].expires_at_ms().unwrap_or(now_ms);
            self.remove(id, at);
            return None;
        }
        self.tasks.get_mut(id)
    }

    fn miss(&self, id: &str) -> Lookup {
        if self.gone.contains(id) {
            Lookup::Expired
        } else {
            Lookup::Unknown
        }
    }
}

impl MemoryTasks {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// Drops the records whose TTL ran out by `now_ms`; how many.
    pub(crate) fn sweep(&self, now_ms: u64) -> usize {
        crate::vocab::sync::lock(&self.inner).sweep(now_ms)
    }

    /// How many records it holds (expired ones not yet swept included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        crate::vocab::sync::lock(&self.inner).tasks.len()
    }
}

impl TaskStore for MemoryTasks {
    fn create(
        &self,
        record: Record,
        max: usize,
        max_per_owner: usize,
        now_ms: u64,
    ) -> BoxFuture<'_, Result<(), CreateError>> {
        let mut inner = crate::vocab::sync::lock(&self.inner);
        inner.max_expired = max.saturating_mul(EXPIRED_PER_TASK);
        let owned =
            |i: &Inner| record.client.as_ref().map_or(0, |o| i.per_owner.get(o).copied().unwrap_or(0));
        if inner.tasks.len() >= max || owned(&inner) >= max_per_owner {
            inner.sweep(now_ms);
        }
        let out = if inner.tasks.len() >= max {
            Err(CreateError::Full { max, per_owner: false })
        } else if owned(&inner) >= max_per_owner {
            Err(CreateError::Full { max: max_per_owner, per_owner: true })
        } else {
            if let Some(o) = &record.client {
                *inner.per_owner.entry(o.clone()).or_insert(0) += 1;
            }
            debug_assert!(!inner.tasks.contains_key(&record.id), "task ids are 128 random bits");
            inner.tasks.insert(record.id.clone(), record);
            Ok(())
        };
        Box::pin(std::future::ready(out))
    }

    fn get<'a>(&'a self, id: &'a str, now_ms: u64) -> BoxFuture<'a, Result<Lookup, StoreError>> {
        let mut inner = crate::vocab::sync::lock(&self.inner);
        let out = match inner.lookup(id, now_ms) {
            Some(r) => Lookup::Found(Box::new(r.clone())),
            None => inner.miss(id),
        };
        Box::pin(std::future::ready(Ok(out)))
    }

    fn modify<'a>(
        &'a self,
        id: &'a str,
        now_ms: u64,
        change: Change<'a>,
    ) -> BoxFuture<'a, Result<Lookup, StoreError>> {
        let mut inner = crate::vocab::sync::lock(&self.inner);
        let out = match inner.lookup(id, now_ms) {
            Some(r) => {
                change(r);
                Lookup::Found(Box::new(r.clone()))
            }
            None => inner.miss(id),
        };
        Box::pin(std::future::ready(Ok(out)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str, owner: Option<&str>, ttl_ms: Option<u64>) -> Record {
        Record {
            id: id.into(),
            owner: owner.map(Into::into),
            status: Status::Working,
            status_message: None,
            created_at_ms: 1_000,
            updated_at_ms: 1_000,
            ttl_ms,
            poll_interval_ms: None,
            input_requests: Map::new(),
            answers: Map::new(),
            keys_used: vec![],
            result: None,
            error: None,
            node: None,
            client: owner.map(Into::into),
        }
    }

    fn block<T>(f: BoxFuture<'_, T>) -> T {
        futures_util::FutureExt::now_or_never(f).expect("the memory store never waits")
    }

    #[test]
    fn a_record_is_found_until_its_ttl_then_expired_then_forgotten() {
        let s = MemoryTasks::new();
        block(s.create(record("a", None, Some(500)), 10, 10, 1_000)).unwrap();
        assert!(matches!(block(s.get("a", 1_499)).unwrap(), Lookup::Found(_)));
        assert_eq!(block(s.get("a", 1_500)).unwrap(), Lookup::Expired);
        assert_eq!(block(s.get("b", 1_500)).unwrap(), Lookup::Unknown);
        let later = 1_500 + EXPIRED_MEMORY.as_millis() as u64;
        assert_eq!(s.sweep(later), 0);
        assert_eq!(block(s.get("a", later)).unwrap(), Lookup::Unknown);
    }

    #[test]
    fn the_bounds_count_unexpired_tasks_in_all_and_per_owner() {
        let s = MemoryTasks::new();
        block(s.create(record("a", Some("x"), Some(100)), 3, 2, 1_000)).unwrap();
        block(s.create(record("b", Some("x"), None), 3, 2, 1_000)).unwrap();
        assert_eq!(
            block(s.create(record("c", Some("x"), None), 3, 2, 1_000)),
            Err(CreateError::Full { max: 2, per_owner: true })
        );
        block(s.create(record("d", Some("y"), None), 3, 2, 1_000)).unwrap();
        assert_eq!(
            block(s.create(record("e", None, None), 3, 2, 1_000)),
            Err(CreateError::Full { max: 3, per_owner: false })
        );
        // "a" expires at 1 100: its place (in all and x's) is free again.
        block(s.create(record("c", Some("x"), None), 3, 2, 1_100)).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(block(s.get("a", 1_100)).unwrap(), Lookup::Expired);
    }

    #[test]
    fn modify_applies_the_change_atomically_and_returns_the_record_after() {
        let s = MemoryTasks::new();
        block(s.create(record("a", None, None), 10, 10, 1_000)).unwrap();
        let mut change = |r: &mut Record| {
            r.status = Status::Cancelled;
            true
        };
        let Lookup::Found(r) = block(s.modify("a", 2_000, &mut change)).unwrap() else { panic!() };
        assert_eq!(r.status, Status::Cancelled);
        let Lookup::Found(r) = block(s.get("a", 2_000)).unwrap() else { panic!() };
        assert_eq!(r.status, Status::Cancelled);
        let mut never = |_: &mut Record| -> bool { panic!("no record, no change") };
        assert_eq!(block(s.modify("zz", 2_000, &mut never)).unwrap(), Lookup::Unknown);
    }
}
