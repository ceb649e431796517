//! Task event streams in cluster mode (SEP-2694, draft; `docs/SPEC.md`
//! §5.6, §8.11): each task's events in Redis beside its record
//! (`gapless_redis::RedisStore::task_events_append` and `_read`), so that a
//! `tasks/stream` on any node replays and follows what the task's node
//! emits.
//!
//! The node that runs a task is its stream's only writer ([`Writer`]): it
//! numbers the events as they are emitted (the host's call does not wait
//! for Redis) and a task of its own appends them in batches, each durably.
//! Once a batch is on a replica, the next write raises the stream's
//! `acked`, and readers serve events below `acked` only: an event a
//! failover lost was never served. While Redis does not answer, the queue
//! keeps what the task's bounds keep (the oldest go first, and the stream
//! then starts after them: `events_gone` for a cursor before).
//!
//! A reader ([`Follow`]) reads after its cursor, then waits to be told:
//! every write of the stream is announced on the task's channel (the node's
//! `Notifier`), and nothing is polled per reader. The node's safety net
//! ([`RedisEvents::watch_over`]) covers the rest: each second it looks at
//! whether the nodes running its readers' tasks are alive (one `EXISTS`
//! per such node, not per reader) and nudges the readers of a dead one's
//! tasks, and it nudges [`NUDGES_PER_SECOND`] readers in turn to read again
//! (an announcement may be lost; a task may expire). Its stream ends with
//! the `ended` flag the writer sets after the last event, or when the
//! task's record is terminal and its node is gone (its lease expired: the
//! record says `failed`), or when the task or its stream expired.

use crate::backend::task_store::{Lookup, TaskStore};
use crate::vocab::sync::lock;
use crate::vocab::time::now_ms;
use bytes::Bytes;
use gapless::task::{OpenError, TaskEventsConfig};
use gapless_redis::{Notifier, RedisStore, TaskEventBatch, TaskEventBounds, TaskEventsRead, Watch};
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};
use tokio::sync::Notify;

/// Most events one append writes.
const MAX_BATCH: usize = 256;

/// How many events one read of a follower asks for.
const READ_COUNT: usize = 256;

/// How long a follower waits before it asks a store that did not answer
/// again.
const STORE_RETRY: Duration = Duration::from_millis(200);

/// How many idle followers the node's safety net nudges per second.
pub(crate) const NUDGES_PER_SECOND: usize = 4;

/// How long a follower asks a store that does not answer again before its
/// stream ends with the error (the client resumes at its cursor).
const STORE_PATIENCE: Duration = Duration::from_secs(10);

/// The streams of a cluster node: the writers of the tasks it runs.
pub(crate) struct RedisEvents {
    store: RedisStore,
    records: Arc<dyn TaskStore>,
    bounds: TaskEventBounds,
    writers: Mutex<HashMap<String, Arc<Writer>>>,
    /// The node's subscriber: followers wait for their task's announcements.
    notifier: Notifier,
    /// Whether this node may take a task's node for dead now (a reader's
    /// seal is such a judgment).
    judge: Arc<crate::backend::cluster::Judge>,
    /// This node's followers, for the safety net.
    followers: Mutex<Vec<Weak<Slot>>>,
    /// The safety net's turn through `followers`.
    turn: Mutex<usize>,
    /// The safety net runs (started with the first follower).
    watching: AtomicBool,
}

/// What the safety net knows of one follower.
struct Slot {
    /// The node running its task, once its record was read.
    node: Mutex<Option<String>>,
    /// Wakes it to read again and look at the task's record.
    nudge: Notify,
}

impl std::fmt::Debug for RedisEvents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedisEvents").field("bounds", &self.bounds).finish_non_exhaustive()
    }
}

/// The writer of one task's stream, on the node that runs the task.
struct Writer {
    task: String,
    expire_at_ms: u64,
    queue: Mutex<Queue>,
    wake: Notify,
    /// Its record was never stored: nothing is written.
    forgotten: AtomicBool,
}

/// What the host emitted and the store does not have yet.
#[derive(Default)]
struct Queue {
    /// The seq the next event gets.
    next: u64,
    /// The events not taken by an append yet, the last at `next - 1`.
    events: VecDeque<Bytes>,
    bytes: usize,
    /// Events before this seq were dropped unwritten (the bounds).
    dropped_before: u64,
    /// No event follows.
    ended: bool,
}

impl Queue {
    fn first(&self) -> u64 {
        self.next - self.events.len() as u64
    }

    /// Drops the oldest while more are queued than the stream keeps.
    fn trim(&mut self, bounds: TaskEventBounds) {
        while self.events.len() as u64 > bounds.max_events || self.bytes as u64 > bounds.max_bytes {
            let first = self.first();
            let Some(e) = self.events.pop_front() else { break };
            self.bytes -= e.len();
            self.dropped_before = first + 1;
        }
    }
}

impl RedisEvents {
    /// The streams on `store`, beside the task records `records`, each
    /// bounded by `config` as in process.
    pub(crate) fn new(
        store: RedisStore,
        notifier: Notifier,
        judge: Arc<crate::backend::cluster::Judge>,
        records: Arc<dyn TaskStore>,
        config: TaskEventsConfig,
    ) -> Self {
        let bounds = TaskEventBounds {
            max_events: config.max_events as u64,
            max_bytes: config.max_bytes as u64,
            max_age_ms: config.max_age.map_or(0, |a| (a.as_millis() as u64).max(1)),
        };
        RedisEvents {
            store,
            records,
            bounds,
            writers: Mutex::default(),
            notifier,
            judge,
            followers: Mutex::default(),
            turn: Mutex::new(0),
            watching: AtomicBool::new(false),
        }
    }

    /// Starts the writer of task `id`'s stream, which runs here (its
    /// record expires at `expire_at_ms`).
    pub(crate) fn open(self: &Arc<Self>, id: &str, expire_at_ms: Option<u64>) {
        let w = Arc::new(Writer {
            task: id.to_owned(),
            // A task without a TTL (none is: the server bounds them) would
            // keep its stream for a year.
            expire_at_ms: expire_at_ms.unwrap_or_else(|| now_ms() + 365 * 24 * 3600 * 1000),
            queue: Mutex::default(),
            wake: Notify::new(),
            forgotten: AtomicBool::new(false),
        });
        lock(&self.writers).insert(id.to_owned(), Arc::clone(&w));
        let me = Arc::clone(self);
        tokio::spawn(async move {
            me.write(&w).await;
            let mut writers = lock(&me.writers);
            if writers.get(&w.task).is_some_and(|x| Arc::ptr_eq(x, &w)) {
                writers.remove(&w.task);
            }
        });
    }

    /// Drops task `id`'s writer without a write (its record was never
    /// stored).
    pub(crate) fn forget(&self, id: &str) {
        if let Some(w) = lock(&self.writers).remove(id) {
            w.forgotten.store(true, Ordering::Release);
            w.wake.notify_one();
        }
    }

    /// Ends task `id`'s stream: its writer writes what is queued, then the
    /// end.
    pub(crate) fn end(&self, id: &str) {
        let w = lock(&self.writers).get(id).cloned();
        if let Some(w) = w {
            lock(&w.queue).ended = true;
            w.wake.notify_one();
        }
    }

    /// Queues event `body` on task `id`'s stream; its seq, or `None` if the
    /// stream ended here (or the task does not run here).
    pub(crate) fn emit(&self, id: &str, body: Bytes) -> Option<u64> {
        let w = lock(&self.writers).get(id).cloned()?;
        let seq = {
            let mut q = lock(&w.queue);
            if q.ended {
                return None;
            }
            let seq = q.next;
            q.next += 1;
            q.bytes += body.len();
            q.events.push_back(body);
            q.trim(self.bounds);
            seq
        };
        w.wake.notify_one();
        Some(seq)
    }

    /// Bytes queued here for the store.
    pub(crate) fn footprint(&self) -> usize {
        let writers: Vec<Arc<Writer>> = lock(&self.writers).values().cloned().collect();
        writers.iter().map(|w| lock(&w.queue).bytes).sum()
    }

    /// Runs `w`: appends what is queued, batch by batch, then raises
    /// `acked` to the last batch a replica has, then the end; returns once
    /// the end is written (or the task expired, or was forgotten).
    async fn write(&self, w: &Writer) {
        // Seqs below `confirmed` are on a replica; the store's `acked` is
        // `told`.
        let (mut confirmed, mut told, mut ended_told) = (0u64, 0u64, false);
        let mut backoff = Duration::from_millis(50);
        loop {
            if w.forgotten.load(Ordering::Acquire) || now_ms() >= w.expire_at_ms {
                return;
            }
            let (first, batch, ended) = {
                let mut q = lock(&w.queue);
                let first = q.first();
                let n = q.events.len().min(MAX_BATCH);
                let batch: Vec<Bytes> = q.events.drain(..n).collect();
                q.bytes -= batch.iter().map(Bytes::len).sum::<usize>();
                (first, batch, q.ended && q.events.is_empty())
            };
            if batch.is_empty() && told == confirmed && (ended_told || !ended) {
                if ended_told {
                    return;
                }
                // Woken by an event or the end; at the task's expiry at the
                // latest (the loop's top then lets go).
                let left = Duration::from_millis(w.expire_at_ms.saturating_sub(now_ms()));
                let _ = tokio::time::timeout(left, w.wake.notified()).await;
                continue;
            }
            let now = now_ms();
            let append = TaskEventBatch {
                task: &w.task,
                first,
                acked: confirmed,
                ended,
                events: &batch,
                expire_at_ms: w.expire_at_ms,
                now_ms: now,
            };
            match self.store.task_events_append(append, self.bounds).await {
                Ok(_) => {
                    told = confirmed;
                    if !batch.is_empty() {
                        confirmed = first + batch.len() as u64;
                    }
                    ended_told |= ended;
                    backoff = Duration::from_millis(50);
                }
                Err(e) => {
                    tracing::warn!(task = %w.task, error = %e, "task events not written yet; trying again");
                    {
                        // Back in front, unless the bounds dropped newer
                        // events meanwhile: then these would go first.
                        let mut q = lock(&w.queue);
                        if q.dropped_before <= first + batch.len() as u64 && !batch.is_empty() {
                            q.bytes += batch.iter().map(Bytes::len).sum::<usize>();
                            for e in batch.into_iter().rev() {
                                q.events.push_front(e);
                            }
                            q.trim(self.bounds);
                        }
                    }
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(2));
                }
            }
        }
    }

    /// Opens task `id`'s stream after `after` (`None`: at the oldest kept)
    /// for a reader: refused `Gone` or `Ahead` like the in-process stream.
    pub(crate) async fn follow(
        self: &Arc<Self>,
        id: &str,
        after: Option<u64>,
    ) -> Result<Follow, FollowError> {
        // Watching before the first read: a write after it is heard.
        let watch = self.notifier.watch_task(id);
        let read = self.read(id, after).await?;
        let (oldest, next) = match &read {
            TaskEventsRead::None => (0, 0),
            TaskEventsRead::Some { meta, .. } => (meta.oldest, meta.next),
        };
        let from = match after {
            Some(a) if a >= next => return Err(FollowError::Refused(OpenError::Ahead { next })),
            Some(a) if a + 1 < oldest => {
                return Err(FollowError::Refused(OpenError::Gone { earliest: oldest }))
            }
            Some(a) => a + 1,
            None => oldest,
        };
        let slot = Arc::new(Slot { node: Mutex::new(None), nudge: Notify::new() });
        lock(&self.followers).push(Arc::downgrade(&slot));
        if !self.watching.swap(true, Ordering::AcqRel) {
            tokio::spawn(watch_over(Arc::downgrade(self)));
        }
        let mut f = Follow {
            events: Arc::clone(self),
            task: id.to_owned(),
            from,
            buffered: VecDeque::new(),
            ended: false,
            checked: false,
            done: false,
            anchored: after.is_some(),
            failing: None,
            watch,
            slot,
        };
        f.take(read)?;
        Ok(f)
    }

    async fn read(&self, id: &str, after: Option<u64>) -> Result<TaskEventsRead, FollowError> {
        self.store
            .task_events_read(id, after, READ_COUNT, self.bounds, now_ms())
            .await
            .map_err(|e| FollowError::Store(e.to_string()))
    }

    /// Whether task `id`'s stream can get no more events: its record is
    /// gone, expired, or terminal with its node gone (a node that lives
    /// writes the end itself). A stream whose writer is gone is sealed
    /// first: what that writer appended and had not acked yet is made safe
    /// and served (a durable write after it: a replica that acknowledges it
    /// has everything before it), and nothing more is appended.
    async fn over(&self, id: &str, slot: &Slot) -> Result<bool, FollowError> {
        let store_error = |e: String| FollowError::Store(e);
        let found = self.records.get(id, now_ms()).await.map_err(|e| store_error(e.0))?;
        if let Lookup::Found(r) = &found {
            lock(&slot.node).clone_from(&r.node);
        }
        let expire_at_ms = match found {
            Lookup::Found(r) if r.status.is_terminal() => {
                let gone = match &r.node {
                    // Not while this node's own view of the store is
                    // unreliable (a failover under way, §8.6).
                    Some(_) if !self.judge.may_judge() => false,
                    Some(n) => !self.store.node_is_alive(n).await.map_err(|e| store_error(e.to_string()))?,
                    None => true,
                };
                if !gone {
                    return Ok(false);
                }
                r.expires_at_ms()
            }
            Lookup::Found(_) => return Ok(false),
            Lookup::Expired | Lookup::Unknown => return Ok(true),
        };
        self.seal(id, expire_at_ms).await.map_err(store_error)?;
        Ok(true)
    }

    /// Seals task `id`'s stream (its record expires at `expire_at_ms`): one
    /// durable write that raises `acked` to `next` and sets `ended`, after
    /// which no node appends to it (the writer's later batches write
    /// nothing). A reader that finds the task's node gone seals it, and so
    /// does the node that cancels the task, wherever it runs (§8.11).
    pub(crate) async fn seal(&self, id: &str, expire_at_ms: Option<u64>) -> Result<(), String> {
        let now = now_ms();
        let seal = TaskEventBatch {
            task: id,
            first: 0,
            // Up to `next`, whatever it is (the script takes the lower).
            acked: 1 << 52,
            ended: true,
            events: &[],
            expire_at_ms: expire_at_ms.unwrap_or(now + 1),
            now_ms: now,
        };
        self.store.task_events_append(seal, self.bounds).await.map(drop).map_err(|e| e.to_string())
    }
}

/// Why a follower did not open, or stopped.
#[derive(Debug)]
pub(crate) enum FollowError {
    /// The stream's own refusal (`events_gone`, a cursor ahead).
    Refused(OpenError),
    /// The store did not answer.
    Store(String),
}

/// A reader of a task's stream in Redis, from its cursor on.
pub(crate) struct Follow {
    events: Arc<RedisEvents>,
    task: String,
    /// The seq it serves next.
    from: u64,
    buffered: VecDeque<(u64, Bytes)>,
    /// The stream's end was read (served once `buffered` is).
    ended: bool,
    /// The task's record was read since the follower last waited.
    checked: bool,
    done: bool,
    /// Whether it serves from a cursor the client gave, or has served an
    /// event: until then a stream opened without a cursor starts at the
    /// oldest kept, wherever that moved.
    anchored: bool,
    /// Since when the store has not answered its reads.
    failing: Option<Instant>,
    /// The task's announcements.
    watch: Watch,
    /// Its place in the safety net.
    slot: Arc<Slot>,
}

impl Follow {
    /// Takes a read's events (they must start at `from`, or the events
    /// after the cursor are gone).
    fn take(&mut self, read: TaskEventsRead) -> Result<(), FollowError> {
        let TaskEventsRead::Some { meta, ended, events } = read else {
            return Ok(());
        };
        if self.from < meta.oldest {
            if !self.anchored {
                self.from = meta.oldest;
            } else {
                return Err(FollowError::Refused(OpenError::Gone { earliest: meta.oldest }));
            }
        }
        for (seq, body) in events {
            if seq != self.from {
                // What is kept is dense: only a trim between two reads of
                // one script could do this, and it would be a bug.
                return Err(FollowError::Refused(OpenError::Gone { earliest: seq }));
            }
            self.buffered.push_back((seq, body));
            self.from += 1;
            self.anchored = true;
        }
        self.ended = ended && self.from >= meta.next;
        Ok(())
    }

    /// The next event after the cursor, waiting for it; `None` once the
    /// stream ended (or the task's node died and what it acked was served,
    /// or the task expired); an error when an event it needs was dropped
    /// first, or the store did not answer for [`STORE_PATIENCE`].
    pub(crate) async fn recv(&mut self) -> Option<Result<(u64, Bytes), FollowError>> {
        loop {
            if let Some(e) = self.buffered.pop_front() {
                return Some(Ok(e));
            }
            if self.ended {
                return None;
            }
            let read = match self.events.read(&self.task, self.from.checked_sub(1)).await {
                Ok(r) => {
                    self.failing = None;
                    r
                }
                // A store that does not answer (a failover under way) is
                // asked again for a while before the stream ends saying so.
                Err(e) => {
                    let since = *self.failing.get_or_insert_with(Instant::now);
                    if since.elapsed() >= STORE_PATIENCE {
                        return Some(Err(e));
                    }
                    tokio::time::sleep(STORE_RETRY).await;
                    continue;
                }
            };
            if let Err(e) = self.take(read) {
                return Some(Err(e));
            }
            if !self.buffered.is_empty() || self.ended {
                continue;
            }
            // Nothing more was acked: the end, once no more can come.
            if self.done {
                return None;
            }
            if !self.checked {
                self.checked = true;
                match self.events.over(&self.task, &self.slot).await {
                    // Read on to what was acked before, then end.
                    Ok(true) => {
                        self.done = true;
                        continue;
                    }
                    Ok(false) => {}
                    // Asked again at the next check.
                    Err(_) => {}
                }
            }
            // Told of a write, or nudged by the safety net (which also
            // has the record read again).
            tokio::select! {
                _ = self.watch.changed() => {}
                _ = self.slot.nudge.notified() => self.checked = false,
            }
            let _ = self.watch.heard();
        }
    }
}

/// The node's safety net behind its followers' announcements, while the
/// node has followers: each second, one `EXISTS` per node that runs a task
/// of a follower here (a dead node's followers are nudged: they find the
/// task's record terminal and seal its stream, §8.11), and
/// [`NUDGES_PER_SECOND`] followers nudged in turn.
async fn watch_over(events: Weak<RedisEvents>) {
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        let Some(me) = events.upgrade() else { return };
        let slots: Vec<Arc<Slot>> = {
            let mut f = lock(&me.followers);
            f.retain(|w| w.strong_count() > 0);
            f.iter().filter_map(Weak::upgrade).collect()
        };
        let mut nodes: Vec<String> = slots.iter().filter_map(|s| lock(&s.node).clone()).collect();
        nodes.sort();
        nodes.dedup();
        for node in nodes {
            if let Ok(false) = me.store.node_is_alive(&node).await {
                for s in slots.iter().filter(|s| lock(&s.node).as_deref() == Some(node.as_str())) {
                    s.nudge.notify_one();
                }
            }
        }
        if !slots.is_empty() {
            let mut turn = lock(&me.turn);
            for _ in 0..NUDGES_PER_SECOND.min(slots.len()) {
                *turn = (*turn + 1) % slots.len();
                slots[*turn].nudge.notify_one();
            }
        }
    }
}
