//! What tells a reader of task records that one changed (`docs/SPEC.md`
//! §5.5, §8.11): a `subscriptions/listen` stream watching tasks, and a
//! task's running work watching its own record (a cancel, an expiry). No
//! reader polls. Each is woken
//! - when this node changes a record ([`Watchers::wake`], from every change
//!   [`super::Tasks`] makes);
//! - in a cluster, when the store announces a change any node made (one
//!   subscription per watched task on this node, however many read it:
//!   [`TaskStore::watch`]), or may have lost announcements (a reconnection);
//! - by a safety net behind lost announcements, one loop per node while
//!   anything is watched: each second, one look per node that runs a
//!   watched task (a task whose node died is read as `failed` by whoever
//!   reads it, §8.6) and [`NUDGES_PER_SECOND`] watched tasks in turn.
//!
//! A wake-up names the task: the reader reads that record again.

use crate::backend::task_store::TaskStore;
use crate::vocab::sync::lock;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio::sync::Notify;
use tokio::task::AbortHandle;

/// How many watched tasks the safety net has read again each second, in
/// turn, on each node.
pub(crate) const NUDGES_PER_SECOND: usize = 4;

/// One reader's wake-up, and the tasks it was woken for.
#[derive(Default)]
pub(crate) struct Listener {
    woken: Mutex<HashSet<String>>,
    notify: Notify,
}

impl Listener {
    /// Waits until a watched task may have changed; which ones (the set
    /// is emptied).
    pub(crate) async fn woken(&self) -> HashSet<String> {
        loop {
            let got = std::mem::take(&mut *lock(&self.woken));
            if !got.is_empty() {
                return got;
            }
            self.notify.notified().await;
        }
    }

    /// Marks task `id` for reading again, as if woken for it.
    pub(crate) fn nudge(&self, id: &str) {
        lock(&self.woken).insert(id.to_owned());
        self.notify.notify_one();
    }
}

/// One task's reader, watching while it lives ([`Watchers::watching`]).
pub(crate) struct Watching {
    watchers: Arc<Watchers>,
    id: String,
    reader: Arc<Listener>,
}

impl Watching {
    /// Waits until the task may have changed.
    pub(crate) async fn woken(&self) {
        self.reader.woken().await;
    }
}

impl Drop for Watching {
    fn drop(&mut self) {
        self.watchers.unwatch(&self.id, &self.reader);
    }
}

/// The readers of one task on this node.
struct Entry {
    readers: Vec<Weak<Listener>>,
    /// The node running its work, as last read.
    node: Option<String>,
    /// What hears the store's announcements of it (a cluster's).
    pump: Option<AbortHandle>,
}

impl Drop for Entry {
    fn drop(&mut self) {
        if let Some(p) = &self.pump {
            p.abort();
        }
    }
}

#[derive(Default)]
struct Inner {
    by_task: HashMap<String, Entry>,
    turn: usize,
}

/// The node's readers of task records, by task.
pub(crate) struct Watchers {
    store: Arc<dyn TaskStore>,
    inner: Mutex<Inner>,
    /// Whether the safety net's loop runs.
    netting: AtomicBool,
    /// Called with a task's id before its readers are woken (the shared
    /// reads of it are no longer fresh).
    on_wake: Box<dyn Fn(&str) + Send + Sync>,
}

impl std::fmt::Debug for Watchers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watchers").field("tasks", &lock(&self.inner).by_task.len()).finish()
    }
}

impl Watchers {
    pub(crate) fn new(store: Arc<dyn TaskStore>, on_wake: Box<dyn Fn(&str) + Send + Sync>) -> Self {
        Watchers { store, inner: Mutex::default(), netting: AtomicBool::new(false), on_wake }
    }

    /// `reader` watches task `id` from now on (until it drops, or
    /// [`Watchers::unwatch`]). It is woken once at once: a change made
    /// before the store's subscription took effect went unheard.
    pub(crate) fn watch(self: &Arc<Self>, id: &str, reader: &Arc<Listener>) {
        {
            let mut inner = lock(&self.inner);
            let e = inner.by_task.entry(id.to_owned()).or_insert_with(|| Entry {
                readers: Vec::new(),
                node: None,
                pump: self.store.watch(id).map(|w| {
                    let (me, id) = (Arc::downgrade(self), id.to_owned());
                    tokio::spawn(async move {
                        loop {
                            w.changed().await;
                            let Some(me) = me.upgrade() else { return };
                            me.wake(&id);
                        }
                    })
                    .abort_handle()
                }),
            });
            e.readers.retain(|r| r.strong_count() > 0);
            if !e.readers.iter().any(|r| std::ptr::eq(r.as_ptr(), Arc::as_ptr(reader))) {
                e.readers.push(Arc::downgrade(reader));
            }
            if !self.netting.swap(true, Ordering::AcqRel) {
                tokio::spawn(safety_net(Arc::downgrade(self)));
            }
        }
        reader.nudge(id);
    }

    /// A reader of its own that watches task `id` until it drops.
    pub(crate) fn watching(self: &Arc<Self>, id: &str) -> Watching {
        let reader = Arc::new(Listener::default());
        self.watch(id, &reader);
        Watching { watchers: Arc::clone(self), id: id.to_owned(), reader }
    }

    /// `reader` no longer watches task `id`.
    pub(crate) fn unwatch(&self, id: &str, reader: &Arc<Listener>) {
        let mut inner = lock(&self.inner);
        if let Some(e) = inner.by_task.get_mut(id) {
            e.readers.retain(|r| r.strong_count() > 0 && !std::ptr::eq(r.as_ptr(), Arc::as_ptr(reader)));
            if e.readers.is_empty() {
                inner.by_task.remove(id);
            }
        }
    }

    /// Task `id`'s record may have changed: its readers read it again.
    pub(crate) fn wake(&self, id: &str) {
        let readers: Vec<Arc<Listener>> = match lock(&self.inner).by_task.get(id) {
            Some(e) => e.readers.iter().filter_map(Weak::upgrade).collect(),
            None => return,
        };
        (self.on_wake)(id);
        for r in readers {
            r.nudge(id);
        }
    }

    /// A reader read task `id`'s record: its work runs on `node`.
    pub(crate) fn note_node(&self, id: &str, node: Option<&str>) {
        if let Some(e) = lock(&self.inner).by_task.get_mut(id) {
            if e.node.as_deref() != node {
                e.node = node.map(str::to_owned);
            }
        }
    }

    /// One round of the safety net: drops the tasks nobody reads any more;
    /// which to wake (those of the nodes `dead` says are gone, and
    /// [`NUDGES_PER_SECOND`] in turn); whether anything is watched.
    fn round(&self, dead: &HashSet<String>) -> (Vec<String>, bool) {
        let mut inner = lock(&self.inner);
        inner.by_task.retain(|_, e| {
            e.readers.retain(|r| r.strong_count() > 0);
            !e.readers.is_empty()
        });
        if inner.by_task.is_empty() {
            // Under the lock: a watch from now on starts the loop again.
            self.netting.store(false, Ordering::Release);
            return (Vec::new(), false);
        }
        let mut wake: Vec<String> = inner
            .by_task
            .iter()
            .filter(|(_, e)| e.node.as_ref().is_some_and(|n| dead.contains(n)))
            .map(|(id, _)| id.clone())
            .collect();
        let mut ids: Vec<&String> = inner.by_task.keys().collect();
        ids.sort();
        let n = ids.len();
        let turn = inner.turn;
        let in_turn: Vec<String> =
            (0..NUDGES_PER_SECOND.min(n)).map(|k| ids[(turn + k) % n].clone()).collect();
        inner.turn = (turn + in_turn.len()) % n;
        wake.extend(in_turn);
        (wake, true)
    }

    /// The nodes that run watched tasks.
    fn nodes(&self) -> HashSet<String> {
        lock(&self.inner).by_task.values().filter_map(|e| e.node.clone()).collect()
    }
}

/// The safety net's loop, while anything is watched.
async fn safety_net(me: Weak<Watchers>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(w) = me.upgrade() else { return };
        let mut dead = HashSet::new();
        for node in w.nodes() {
            if !w.store.node_alive(&node).await {
                dead.insert(node);
            }
        }
        let (wake, watched) = w.round(&dead);
        if !watched {
            return;
        }
        for id in wake {
            w.wake(&id);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backend::task_store::MemoryTasks;

    fn watchers() -> Arc<Watchers> {
        Arc::new(Watchers::new(Arc::new(MemoryTasks::new()), Box::new(|_| {})))
    }

    /// A reader is woken at once when it starts to watch, then for each
    /// wake-up of a task it watches, and not for others.
    #[tokio::test]
    async fn a_reader_is_woken_for_the_tasks_it_watches() {
        let w = watchers();
        let r = Arc::new(Listener::default());
        w.watch("a", &r);
        w.watch("b", &r);
        assert_eq!(r.woken().await, HashSet::from(["a".to_owned(), "b".to_owned()]));
        w.wake("c");
        w.wake("b");
        assert_eq!(r.woken().await, HashSet::from(["b".to_owned()]));
        w.unwatch("b", &r);
        w.wake("b");
        w.wake("a");
        assert_eq!(r.woken().await, HashSet::from(["a".to_owned()]));
    }

    /// The safety net nudges the watched tasks in turn, those of a dead
    /// node at once, and stops when nothing is watched.
    #[test]
    fn the_safety_net_nudges_in_turn_and_the_dead_nodes_tasks_at_once() {
        let w = watchers();
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        let _guard = rt.enter();
        let r = Arc::new(Listener::default());
        for id in ["t0", "t1", "t2", "t3", "t4", "t5"] {
            w.watch(id, &r);
        }
        w.note_node("t5", Some("n1"));
        let none = HashSet::new();
        let (first, _) = w.round(&none);
        let (second, _) = w.round(&none);
        assert_eq!(first, ["t0", "t1", "t2", "t3"]);
        assert_eq!(second, ["t4", "t5", "t0", "t1"]);
        let (third, _) = w.round(&HashSet::from(["n1".to_owned()]));
        assert_eq!(third, ["t5", "t2", "t3", "t4", "t5"]);
        drop(r);
        assert_eq!(w.round(&none), (vec![], false), "nobody reads: nothing left");
        assert!(!w.netting.load(Ordering::Acquire));
    }
}
