//! The in-process task store: a map under one mutex, expired records
//! dropped when met and by [`TaskStore::sweep`].

use super::{Change, CreateError, Lookup, Record, StoreError, TaskStore, EXPIRED_MEMORY, EXPIRED_PER_TASK};
use crate::vocab::sync::lock;
use futures_util::future::BoxFuture;
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::Mutex;

/// The in-process store: a map under one mutex, expired records dropped
/// when met and by [`TaskStore::sweep`].
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

    /// How many records it holds (expired ones not yet swept included).
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        lock(&self.inner).tasks.len()
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
        let mut inner = lock(&self.inner);
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
        let mut inner = lock(&self.inner);
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
        let mut inner = lock(&self.inner);
        let out = match inner.lookup(id, now_ms) {
            Some(r) => {
                change(r);
                Lookup::Found(Box::new(r.clone()))
            }
            None => inner.miss(id),
        };
        Box::pin(std::future::ready(Ok(out)))
    }
    fn sweep(&self, now_ms: u64) -> usize {
        lock(&self.inner).sweep(now_ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::task_store::Status;
    use serde_json::Map;

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
