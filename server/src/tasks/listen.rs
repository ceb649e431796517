//! Task status notifications on a `subscriptions/listen` stream
//! (`docs/SPEC.md` §5.5): the tasks a stream watches, each sent as it is
//! and at every change, to its terminal status. A stream reads a task
//! again when woken for it (`watchers.rs`), never on a timer.

use super::watchers::Listener;
use super::{now_ms, visible, wire, Tasks};
use crate::backend::task_store::{Lookup, Status, StoreError};
use crate::vocab::sync::lock;
use serde_json::{Map, Value};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// How soon a listen stream reads again a task the store did not answer
/// for.
pub(crate) const LISTEN_RETRY: Duration = Duration::from_millis(500);

/// How long a read of a watched task serves every listen stream of this
/// node that looks at the task.
const SHARED_FOR: Duration = Duration::from_millis(250);

/// How often the reads are swept while streams look.
const SWEEP_EVERY: Duration = Duration::from_secs(1);

/// A read of a task: when it was made, the task's generation when it
/// started, and what it found.
type Read = Option<(Instant, u64, Arc<Result<Lookup, StoreError>>)>;

/// The shared read of one task, and the task's generation: raised at each
/// wake-up for the task, so that a read made before the change it was
/// woken for is not served after.
#[derive(Default)]
struct Slot {
    generation: AtomicU64,
    read: tokio::sync::Mutex<Read>,
}

/// The reads of watched tasks, shared by every listen stream of this node:
/// a task read within [`SHARED_FOR`] is not read again, and streams that
/// look at once wait for the one read, so the store is asked about each
/// watched task about once per change however many streams watch it (one
/// client's 256 streams of 64 tasks each were 32 768 reads a second when
/// each polled, each a Redis round trip and a parse in a cluster).
#[derive(Default)]
pub(crate) struct SharedReads {
    reads: Mutex<Reads>,
}

impl std::fmt::Debug for SharedReads {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedReads").field("tasks", &lock(&self.reads).by_id.len()).finish()
    }
}

struct Reads {
    by_id: HashMap<String, Arc<Slot>>,
    /// How many entries there were after the last sweep, and when.
    swept_to: usize,
    swept_at: Instant,
}

impl Default for Reads {
    fn default() -> Self {
        Reads { by_id: HashMap::new(), swept_to: 0, swept_at: Instant::now() }
    }
}

impl Reads {
    /// Drops the reads no stream is waiting on that are no longer fresh
    /// (a record kept here may hold a task's result: none stays long).
    fn sweep(&mut self) {
        self.by_id.retain(|_, s| {
            Arc::strong_count(s) > 1
                || s.read
                    .try_lock()
                    .map_or(true, |r| r.as_ref().is_some_and(|(at, ..)| at.elapsed() < SHARED_FOR))
        });
        self.swept_to = self.by_id.len();
        self.swept_at = Instant::now();
    }
}

impl SharedReads {
    /// Task `id` as the store has it now, or as it had it within
    /// [`SHARED_FOR`].
    async fn get(&self, tasks: &Tasks, id: &str) -> Arc<Result<Lookup, StoreError>> {
        let slot = {
            let mut reads = lock(&self.reads);
            // Entries go once stale: swept whenever their number has doubled
            // since the last sweep, or a second has passed (and by the
            // server's sweeper, [`SharedReads::sweep`], when nobody looks).
            if reads.by_id.len() >= 2 * reads.swept_to.max(64) || reads.swept_at.elapsed() > SWEEP_EVERY {
                reads.sweep();
            }
            Arc::clone(reads.by_id.entry(id.to_owned()).or_default())
        };
        let mut read = slot.read.lock().await;
        let generation = slot.generation.load(Ordering::Acquire);
        if let Some((at, g, l)) = &*read {
            if at.elapsed() < SHARED_FOR && *g == generation {
                return Arc::clone(l);
            }
        }
        let l = Arc::new(tasks.store.get(id, now_ms()).await);
        *read = Some((Instant::now(), generation, Arc::clone(&l)));
        l
    }

    /// Task `id` may have changed: a read of it made so far is not served
    /// again.
    pub(crate) fn stale(&self, id: &str) {
        if let Some(s) = lock(&self.reads).by_id.get(id) {
            s.generation.fetch_add(1, Ordering::AcqRel);
        }
    }

    /// Drops the stale reads (the server's sweeper calls it).
    pub(crate) fn sweep(&self) {
        lock(&self.reads).sweep();
    }

    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.reads).by_id.len()
    }
}

/// The tasks a `subscriptions/listen` stream watches (`taskIds`), and what
/// it last sent of each.
pub(crate) struct Watched {
    tasks: Arc<Tasks>,
    caller: Option<String>,
    /// Task id → (status, last update, outstanding keys) last sent.
    seen: HashMap<String, Option<(Status, u64, Vec<String>)>>,
    /// Its wake-up.
    listener: Arc<Listener>,
}

impl Watched {
    pub(crate) fn new(tasks: Arc<Tasks>, caller: Option<String>) -> Self {
        Watched { tasks, caller, seen: HashMap::new(), listener: Arc::default() }
    }

    /// Watches those of `ids` the caller may see (and that are not
    /// terminal-and-sent yet); returns them, for the acknowledgment. Each
    /// is read again at once (see [`Watched::woken`]), then sent as it is.
    pub(crate) async fn agree(&mut self, ids: &[String]) -> Vec<String> {
        let mut agreed = vec![];
        for id in ids {
            if agreed.contains(id) {
                continue;
            }
            let found = self.tasks.store.get(id, now_ms()).await;
            if let Ok(Lookup::Found(_)) = found.map(|l| visible(l, self.caller.as_deref())) {
                self.seen.insert(id.clone(), None);
                self.tasks.watchers.watch(id, &self.listener);
                agreed.push(id.clone());
            }
        }
        agreed
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.seen.is_empty()
    }

    /// Waits until a watched task may have changed; which (those it no
    /// longer watches left out).
    pub(crate) async fn woken(&self) -> Vec<String> {
        let mut ids: Vec<String> =
            self.listener.woken().await.into_iter().filter(|id| self.seen.contains_key(id)).collect();
        ids.sort();
        ids
    }

    /// Reads task `id` again soon (the store did not answer).
    pub(crate) fn retry(&self, id: &str) {
        let listener = Arc::clone(&self.listener);
        let id = id.to_owned();
        tokio::spawn(async move {
            tokio::time::sleep(LISTEN_RETRY).await;
            listener.nudge(&id);
        });
    }

    /// The `DetailedTask` of watched task `id` if it changed since it was
    /// last sent (each is sent once as it is at first); a terminal one is
    /// sent once and no longer watched, an expired or vanished one is
    /// dropped. `Err` when the store did not answer. One at a time, so
    /// that a stream holds at most one built and what its queue holds.
    pub(crate) async fn change(&mut self, id: &str) -> Result<Option<Map<String, Value>>, ()> {
        let read = self.tasks.listen_reads.get(&self.tasks, id).await;
        let r = match &*read {
            Err(_) => return Err(()),
            Ok(Lookup::Found(r)) if r.owner.is_none() || r.owner == self.caller => r,
            Ok(_) => {
                self.forget(id);
                return Ok(None);
            }
        };
        self.tasks.watchers.note_node(id, r.node.as_deref());
        let mark = Some((r.status, r.updated_at_ms, r.input_requests.keys().cloned().collect()));
        let out = (self.seen.get(id) != Some(&mark)).then(|| wire(r, true));
        if r.status.is_terminal() {
            self.forget(id);
        } else {
            self.seen.insert(id.to_owned(), mark);
        }
        Ok(out)
    }

    fn forget(&mut self, id: &str) {
        self.seen.remove(id);
        self.tasks.watchers.unwatch(id, &self.listener);
    }
}

impl Drop for Watched {
    fn drop(&mut self) {
        let ids: HashSet<String> = self.seen.keys().cloned().collect();
        for id in ids {
            self.tasks.watchers.unwatch(&id, &self.listener);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::task_store::MemoryTasks;
    use crate::tasks::Limits;

    fn tasks() -> Tasks {
        let limits = Limits {
            ttl: Duration::from_secs(60),
            max_ttl: Duration::from_secs(60),
            poll_interval: Duration::from_millis(500),
            max_tasks: 10,
            max_per_client: 10,
            max_result_bytes: 1 << 10,
            events: None,
        };
        let hub = Arc::new(gapless::Hub::new(gapless::HubConfig::default()).unwrap());
        Tasks::new(
            Arc::new(MemoryTasks::new()),
            limits,
            None,
            Arc::new(crate::telemetry::Metrics::new()),
            hub,
            None,
            None,
        )
    }

    /// A read is shared while fresh, and a stale one is swept once the
    /// entries have doubled, so ids looked at once do not stay.
    #[tokio::test]
    async fn reads_are_shared_while_fresh_and_swept_once_stale() {
        let t = tasks();
        let first = t.listen_reads.get(&t, "a").await;
        assert!(Arc::ptr_eq(&first, &t.listen_reads.get(&t, "a").await), "a fresh read is shared");
        assert!(matches!(*first, Ok(Lookup::Unknown)));
        for i in 1..150 {
            t.listen_reads.get(&t, &format!("t{i}")).await;
        }
        // The sweep at 128 found them all fresh.
        assert_eq!(t.listen_reads.len(), 150);
        tokio::time::sleep(SHARED_FOR + Duration::from_millis(50)).await;
        assert!(!Arc::ptr_eq(&first, &t.listen_reads.get(&t, "a").await), "a stale read is made again");
        for i in 0..107 {
            t.listen_reads.get(&t, &format!("u{i}")).await;
        }
        // At 256 (before u106) the 149 stale ones went; "a" (read again)
        // and the new ones stay.
        assert_eq!(t.listen_reads.len(), 108);
        // The server's sweeper drops them all once stale.
        tokio::time::sleep(SHARED_FOR + Duration::from_millis(50)).await;
        t.listen_reads.sweep();
        assert_eq!(t.listen_reads.len(), 0);
    }
}
