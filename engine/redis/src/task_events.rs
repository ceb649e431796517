//! A task's event stream in Redis (SEP-2694, draft; `docs/SPEC.md` §5.6,
//! §8.11): beside the task's record, in its hash slot, so that a
//! `tasks/stream` on any node replays and follows what the task's node
//! emits.
//!
//! Keys: `<prefix>task:{<id>}:ev`, a Redis stream whose entry of seq `s`
//! has the id `<s+1>-<emission ms>`, and `<prefix>task:{<id>}:em`, its
//! meta (`next`, `oldest`, `acked`, `bytes`, `ended`), both expiring with
//! the task. The node that runs the task is its stream's only writer: it
//! numbers the events itself and appends them in batches
//! ([`RedisStore::task_events_append`], one script per batch, trimmed by
//! count, bytes and age in the same step), each durably (a replica has it
//! before it counts). Readers serve events below `acked` only, which the
//! writer raises once a batch is on a replica: an event a failover lost
//! was never served, so its seq, given again to the next event, can never
//! make a client's cursor skip it.

use crate::client::durable::Write;
use crate::client::RedisStore;
use crate::error::StoreError;
use crate::reply::{int, text};
use bytes::Bytes;
use redis::Value;

/// The bounds of each task's stream, as every node of a cluster applies
/// them (the trim runs in the writer's appends and in the readers' reads).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskEventBounds {
    /// Most events kept.
    pub max_events: u64,
    /// Most bytes of events kept.
    pub max_bytes: u64,
    /// How long an event is served after it was emitted (ms; 0: no bound).
    pub max_age_ms: u64,
}

/// A batch of a task's events for [`RedisStore::task_events_append`].
#[derive(Clone, Copy, Debug)]
pub struct TaskEventBatch<'a> {
    /// The task's id.
    pub task: &'a str,
    /// The seq of the first event of `events`.
    pub first: u64,
    /// Seqs below this are on a replica (what readers may serve now).
    pub acked: u64,
    /// No event follows this batch.
    pub ended: bool,
    /// The events, in seq order.
    pub events: &'a [Bytes],
    /// When the task expires (Unix ms): the stream goes with it.
    pub expire_at_ms: u64,
    /// The writer's clock (Unix ms): the events' emission time.
    pub now_ms: u64,
}

/// What a stream holds after an append: its meta.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TaskEventsMeta {
    /// The seq the next event gets.
    pub next: u64,
    /// The oldest seq kept (what is kept is dense from here to `next - 1`).
    pub oldest: u64,
    /// Seqs below it are served.
    pub acked: u64,
}

/// What a reader found ([`RedisStore::task_events_read`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskEventsRead {
    /// The task has no stream: none was written yet, or it expired.
    None,
    /// The stream, and the events asked for.
    Some {
        /// Its meta.
        meta: TaskEventsMeta,
        /// No event follows `next - 1`.
        ended: bool,
        /// The events after the cursor that are served (below `acked`),
        /// in seq order, at most the count asked for: (seq, event).
        events: Vec<(u64, Bytes)>,
    },
}

fn keys(prefix: &str, task: &str) -> [String; 2] {
    [format!("{prefix}task:{{{task}}}:ev"), format!("{prefix}task:{{{task}}}:em")]
}

fn meta(items: &[Value]) -> Result<TaskEventsMeta, StoreError> {
    Ok(TaskEventsMeta { next: int(items.first())?, oldest: int(items.get(1))?, acked: int(items.get(2))? })
}

/// The events of an `XRANGE` reply of a task's stream: (seq, event).
fn entries(v: &Value) -> Result<Vec<(u64, Bytes)>, StoreError> {
    let Value::Array(entries) = v else {
        return Err(StoreError::Protocol(format!("XRANGE answered {v:?}")));
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(pair) = entry else {
            return Err(StoreError::Protocol("a task event entry is not a pair".into()));
        };
        let [id, Value::Array(fields)] = &pair[..] else {
            return Err(StoreError::Protocol("a task event entry is not an id and fields".into()));
        };
        let id = text(id)?;
        let seq = id
            .split_once('-')
            .and_then(|(s, _)| s.parse::<u64>().ok())
            .and_then(|s| s.checked_sub(1))
            .ok_or_else(|| StoreError::Protocol(format!("a task event's id {id:?}")))?;
        let body = match fields.get(1) {
            Some(Value::BulkString(b)) => Bytes::from(b.clone()),
            other => return Err(StoreError::Protocol(format!("a task event's body: {other:?}"))),
        };
        out.push((seq, body));
    }
    Ok(out)
}

impl RedisStore {
    /// Appends `batch` to its task's stream, trimmed to `bounds`, durably
    /// (returns once a replica has it, or the primary has none). A retry
    /// of a batch, whole or in part written, writes what is missing only.
    pub async fn task_events_append(
        &self,
        batch: TaskEventBatch<'_>,
        bounds: TaskEventBounds,
    ) -> Result<TaskEventsMeta, StoreError> {
        let [ev, em] = keys(&self.config.prefix, batch.task);
        let script = &self.task_event_scripts.append;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(2).arg(&ev).arg(&em);
        cmd.arg(batch.first).arg(batch.acked).arg(if batch.ended { "1" } else { "0" });
        cmd.arg(batch.now_ms).arg(batch.expire_at_ms.max(batch.now_ms + 1));
        cmd.arg(bounds.max_events).arg(bounds.max_bytes).arg(bounds.max_age_ms);
        for e in batch.events {
            cmd.arg(e.as_ref());
        }
        let add = |pipe: &mut redis::Pipeline| {
            pipe.add_command(cmd.clone());
        };
        let marker = format!("{}task:{{{}}}:w", self.config.prefix, batch.task);
        let w = Write { add: &add, script: Some(script), marker: Some(marker) };
        let answers = self.durably(&w).await?;
        // The last try's answer is the stream as the write left it.
        match answers.last() {
            Some(Value::Array(items)) => meta(items),
            other => Err(StoreError::Protocol(format!("the task events' append answered {other:?}"))),
        }
    }

    /// Reads task `task`'s stream for a reader: at most `count` served
    /// events after `after` (`None`: from the oldest kept), trimmed to
    /// `bounds` first (by age: none is served older than the bound).
    pub async fn task_events_read(
        &self,
        task: &str,
        after: Option<u64>,
        count: usize,
        bounds: TaskEventBounds,
        now_ms: u64,
    ) -> Result<TaskEventsRead, StoreError> {
        let [ev, em] = keys(&self.config.prefix, task);
        let mut inv = self.task_event_scripts.read.prepare_invoke();
        inv.key(ev).key(em);
        inv.arg(after.map_or(-1, |a| a.min(i64::MAX as u64 - 1) as i64)).arg(count.max(1)).arg(now_ms);
        inv.arg(bounds.max_events).arg(bounds.max_bytes).arg(bounds.max_age_ms);
        let mut c = self.conn.clone();
        let v: Value = self.bounded(inv.invoke_async(&mut c)).await?;
        let items = match v {
            Value::Array(items) => items,
            other => return Err(StoreError::Protocol(format!("the task events' read answered {other:?}"))),
        };
        if int(items.first())? == 0 {
            return Ok(TaskEventsRead::None);
        }
        Ok(TaskEventsRead::Some {
            meta: TaskEventsMeta {
                oldest: int(items.get(1))?,
                acked: int(items.get(2))?,
                next: int(items.get(3))?,
            },
            ended: int(items.get(4))? == 1,
            events: entries(items.get(5).unwrap_or(&Value::Array(vec![])))?,
        })
    }
}
