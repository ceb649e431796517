//! Task event streams (SEP-2694, draft; `docs/SPEC.md` §5.6): each task's
//! events, emitted by its work, kept in the engine's ring for tasks
//! ([`gapless::task::TaskEvents`]) until the task's record expires, or in
//! cluster mode in Redis beside the record (`backend/task_store/events.rs`),
//! and served to `tasks/stream`.

use super::now_ms;
use crate::backend::task_store::{Follow, FollowError, RedisEvents};
use crate::vocab::jsonrpc::{code, RpcError};
use crate::vocab::sync::lock;
use bytes::Bytes;
use gapless::task::{EmitError, OpenError, TaskEvents, TaskEventsConfig, TaskSubscription};
use serde_json::{json, Value};
use std::collections::{HashMap, HashSet};
use std::net::SocketAddr;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// The notification that carries a task event.
pub const EVENT_METHOD: &str = "notifications/tasks/event";

/// The `_meta` key that relates a message to its task.
pub const RELATED_TASK: &str = "io.modelcontextprotocol/related-task";

/// The event types MCP keeps for itself: an application's type must not
/// start with it.
const RESERVED_PREFIX: &str = "io.modelcontextprotocol.";

/// The longest event type accepted.
const MAX_TYPE_LEN: usize = 256;

/// What an event keeps besides its payload (`"type":"<type>","payload":`):
/// a stream's byte bound must hold the largest payload and this.
pub(crate) const EVENT_OVERHEAD: usize = MAX_TYPE_LEN + 32;

/// How often, at most, the streams of expired tasks are dropped.
const SWEEP_EVERY_MS: u64 = 1000;

/// Why a task event was not emitted ([`crate::host::RequestContext::emit_task_event`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskEventError {
    /// This request is not a task (it never made itself one with
    /// `create_task`, or it is of a 2025 session).
    NotATask,
    /// The type is not vendor-prefixed: unprefixed types are MCP's to
    /// define (at least three dot-separated labels of letters, digits, `-`
    /// and `_`, e.g. `com.example.step`, and not MCP's own
    /// `io.modelcontextprotocol.` ones).
    InvalidType(String),
    /// The payload is not a JSON object.
    NotAnObject,
    /// The payload, serialized, is larger than
    /// [`crate::ServerConfig::max_task_event_bytes`].
    TooLarge {
        /// Its length.
        len: usize,
        /// The limit.
        max: usize,
    },
    /// The task is terminal or gone: its stream has ended.
    Ended,
    /// Task event streams are not served by this server.
    Unsupported,
}

impl std::fmt::Display for TaskEventError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskEventError::NotATask => f.write_str("this request is not a task: it has no event stream"),
            TaskEventError::InvalidType(why) => write!(f, "invalid task event type: {why}"),
            TaskEventError::NotAnObject => f.write_str("a task event's payload must be a JSON object"),
            TaskEventError::TooLarge { len, max } => {
                write!(f, "a task event's payload of {len} bytes is larger than the {max} bytes allowed")
            }
            TaskEventError::Ended => f.write_str("the task's event stream has ended"),
            TaskEventError::Unsupported => f.write_str("task event streams are not served by this server"),
        }
    }
}

impl std::error::Error for TaskEventError {}

/// Checks that `kind` is a vendor-prefixed event type.
pub fn check_type(kind: &str) -> Result<(), TaskEventError> {
    let bad = |why: &str| Err(TaskEventError::InvalidType(format!("{kind:?} {why}")));
    if kind.len() > MAX_TYPE_LEN {
        return bad(&format!("is longer than {MAX_TYPE_LEN} bytes"));
    }
    let labels: Vec<&str> = kind.split('.').collect();
    let label_ok =
        |l: &&str| !l.is_empty() && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if labels.len() < 3 || !labels.iter().all(label_ok) {
        return bad("is not vendor-prefixed (e.g. com.example.step): unprefixed types are reserved for MCP");
    }
    if kind.starts_with(RESERVED_PREFIX) {
        return bad("is in MCP's own namespace");
    }
    Ok(())
}

/// The `events_gone` error of the draft: an event after the cursor of a
/// `tasks/stream` of task `task` is no longer kept; `earliest` is the
/// oldest seq that is.
pub(crate) fn events_gone(task: &str, earliest: u64) -> RpcError {
    RpcError {
        code: code::EVENTS_GONE,
        message: "Task events are no longer available".into(),
        data: Some(json!({"reason": "events_gone", "taskId": task, "earliestSeq": earliest})),
    }
}

/// The task's stream refused an opening: `events_gone`, or a cursor past
/// its last event (-32602).
pub(crate) fn refusal(task: &str, e: OpenError) -> RpcError {
    match e {
        OpenError::Gone { earliest } => events_gone(task, earliest),
        OpenError::Ahead { next } => RpcError {
            code: code::INVALID_PARAMS,
            message: format!("params.after is past task {task:?}'s last event: the next will be {next}"),
            data: Some(json!({"reason": "after_ahead", "taskId": task, "nextSeq": next})),
        },
    }
}

/// A serialized `notifications/tasks/event` of task `task` for event
/// `seq`, whose kept `body` is `"type":...,"payload":...`.
pub(crate) fn notification(task: &str, seq: u64, body: &[u8]) -> Bytes {
    let id = Value::String(task.to_owned()).to_string();
    let mut out = Vec::with_capacity(body.len() + 2 * id.len() + 160);
    out.extend_from_slice(br#"{"jsonrpc":"2.0","method":""#);
    out.extend_from_slice(EVENT_METHOD.as_bytes());
    out.extend_from_slice(format!(r#"","params":{{"seq":{seq},"taskId":{id},"#).as_bytes());
    out.extend_from_slice(body);
    out.extend_from_slice(format!(r#","_meta":{{"{RELATED_TASK}":{{"taskId":{id}}}}}}}}}"#).as_bytes());
    Bytes::from(out)
}

/// A task's stream and when its record expires (Unix ms).
type Kept = (Arc<TaskEvents>, Option<u64>);

/// The open `tasks/stream`s: (connection, task).
type ActiveSet = Arc<Mutex<HashSet<(SocketAddr, String)>>>;

/// The event streams of this process's tasks, or of the cluster's.
#[derive(Debug)]
pub(crate) struct EventStreams {
    max_event_bytes: usize,
    /// The `tasks/stream` requests open now: (connection, task).
    active: ActiveSet,
    kind: Kind,
}

/// Where the streams live.
#[derive(Debug)]
enum Kind {
    /// In this process: one ring per task.
    Local(LocalStreams),
    /// In Redis, beside the task records (`backend/task_store/events.rs`).
    Cluster(Arc<RedisEvents>),
}

/// The event streams of this process's tasks.
#[derive(Debug)]
struct LocalStreams {
    /// Whose memory budget counts the streams (`None`: none, in tests).
    hub: Option<Arc<gapless::Hub>>,
    config: TaskEventsConfig,
    /// Task id → its stream and when its record expires (Unix ms).
    streams: Mutex<HashMap<String, Kept>>,
    swept_at: AtomicU64,
}

/// A `tasks/stream` on one connection for one task, open; its place is
/// given back when dropped.
pub(crate) struct Active {
    active: ActiveSet,
    key: (SocketAddr, String),
}

impl Drop for Active {
    fn drop(&mut self) {
        lock(&self.active).remove(&self.key);
    }
}

/// A task's events after a cursor, then live, to the end of its stream.
pub(crate) struct Subscription {
    task: String,
    inner: Inner,
}

enum Inner {
    Local(TaskSubscription),
    Cluster(Follow),
}

impl Subscription {
    /// The next event (seq, kept body), waiting for it; `None` once the
    /// stream ended; an error to answer the request with when an event
    /// after the cursor was dropped before it was read (`events_gone`), or
    /// the cluster's store did not answer.
    pub(crate) async fn recv(&mut self) -> Option<Result<(u64, Bytes), RpcError>> {
        match &mut self.inner {
            Inner::Local(s) => Some(match s.recv().await? {
                Ok(e) => Ok((e.seq, e.payload)),
                Err(e) => Err(refusal(&self.task, e)),
            }),
            Inner::Cluster(f) => Some(f.recv().await?.map_err(|e| follow_error(&self.task, e))),
        }
    }
}

fn follow_error(task: &str, e: FollowError) -> RpcError {
    match e {
        FollowError::Refused(e) => refusal(task, e),
        FollowError::Store(why) => {
            RpcError::new(code::INTERNAL_ERROR, format!("the task event store is unavailable: {why}"))
        }
    }
}

impl EventStreams {
    /// The streams of this process, counted in `hub`'s memory budget.
    pub(crate) fn new(
        hub: Option<Arc<gapless::Hub>>,
        config: TaskEventsConfig,
        max_event_bytes: usize,
    ) -> Self {
        let local = LocalStreams { hub, config, streams: Mutex::default(), swept_at: AtomicU64::new(0) };
        EventStreams { max_event_bytes, active: Arc::default(), kind: Kind::Local(local) }
    }

    /// The streams of a cluster, in Redis beside the task records.
    pub(crate) fn cluster(redis: Arc<RedisEvents>, max_event_bytes: usize) -> Self {
        EventStreams { max_event_bytes, active: Arc::default(), kind: Kind::Cluster(redis) }
    }

    /// Opens task `id`'s stream (its record expires at `expires_at_ms`),
    /// charged to the hub's memory budget in process: refused, saying why,
    /// when there is no room for it even after a reclaim. In a cluster it
    /// starts the stream's writer here, where the task runs.
    pub(crate) fn open(&self, id: &str, expires_at_ms: Option<u64>) -> Result<(), String> {
        let l = match &self.kind {
            Kind::Local(l) => l,
            Kind::Cluster(c) => {
                c.open(id, expires_at_ms);
                return Ok(());
            }
        };
        l.sweep();
        let events = match &l.hub {
            Some(hub) => TaskEvents::in_hub(hub, l.config)
                .map_err(|e| format!("no room for the task's event stream: {e}"))?,
            // The configuration was checked when the server was built.
            None => TaskEvents::new(l.config).map_err(|e| e.to_string())?,
        };
        lock(&l.streams).insert(id.to_owned(), (Arc::new(events), expires_at_ms));
        Ok(())
    }

    /// Drops task `id`'s stream (its record was never stored).
    pub(crate) fn forget(&self, id: &str) {
        match &self.kind {
            Kind::Local(l) => drop(lock(&l.streams).remove(id)),
            Kind::Cluster(c) => c.forget(id),
        }
    }

    /// Ends task `id`'s stream (the task is terminal, or its work here is
    /// over): open `tasks/stream`s end after its last event.
    pub(crate) fn end(&self, id: &str) {
        match &self.kind {
            Kind::Local(l) => {
                // Out of the map's lock: an end may reclaim in the memory
                // budget.
                let stream = lock(&l.streams).get(id).map(|(s, _)| Arc::clone(s));
                if let Some(s) = stream {
                    s.end();
                }
            }
            Kind::Cluster(c) => c.end(id),
        }
    }

    /// Ends task `id`'s stream for every node at once (a cancel: no event
    /// its work emits after it reaches a reader, wherever the work runs).
    /// In process, [`EventStreams::end`]; in a cluster the stream is sealed
    /// in the store, and events the work had queued and not written are
    /// not written.
    pub(crate) async fn seal(&self, id: &str, expire_at_ms: Option<u64>) {
        self.end(id);
        if let Kind::Cluster(c) = &self.kind {
            if let Err(e) = c.seal(id, expire_at_ms).await {
                // The work's node ends the stream when it hears of the
                // cancel (the bus, or its own look at the record).
                tracing::warn!(task = %id, error = %e, "a cancelled task's event stream was not sealed");
            }
        }
    }

    /// Emits an event of type `kind` with `payload` on task `id`'s stream.
    pub(crate) fn emit(&self, id: &str, kind: &str, payload: &Value) -> Result<u64, TaskEventError> {
        check_type(kind)?;
        if !payload.is_object() {
            return Err(TaskEventError::NotAnObject);
        }
        let payload = payload.to_string();
        if payload.len() > self.max_event_bytes {
            return Err(TaskEventError::TooLarge { len: payload.len(), max: self.max_event_bytes });
        }
        let kind = Value::String(kind.to_owned()).to_string();
        let mut body = Vec::with_capacity(kind.len() + payload.len() + 20);
        body.extend_from_slice(br#""type":"#);
        body.extend_from_slice(kind.as_bytes());
        body.extend_from_slice(br#","payload":"#);
        body.extend_from_slice(payload.as_bytes());
        match &self.kind {
            Kind::Local(l) => {
                let stream = l.get(id).ok_or(TaskEventError::Ended)?;
                stream.emit(Bytes::from(body), Instant::now()).map_err(|e| match e {
                    EmitError::TooLarge { len, max } => TaskEventError::TooLarge { len, max },
                    EmitError::Ended | EmitError::Exhausted => TaskEventError::Ended,
                })
            }
            Kind::Cluster(c) => c.emit(id, Bytes::from(body)).ok_or(TaskEventError::Ended),
        }
    }

    /// Claims the one `tasks/stream` `connection` may have open for task
    /// `id`; `None` if it has one.
    pub(crate) fn claim(&self, connection: SocketAddr, id: &str) -> Option<Active> {
        let key = (connection, id.to_owned());
        lock(&self.active).insert(key.clone()).then(|| Active { active: Arc::clone(&self.active), key })
    }

    /// Opens task `id`'s stream after `after` for a `tasks/stream`;
    /// `None`: it has none here and never will (its stream is gone).
    pub(crate) async fn subscribe(
        &self,
        id: &str,
        after: Option<u64>,
    ) -> Result<Option<Subscription>, RpcError> {
        let inner = match &self.kind {
            Kind::Local(l) => match l.get(id) {
                Some(s) => Inner::Local(s.subscribe(after, Instant::now()).map_err(|e| refusal(id, e))?),
                None => return Ok(None),
            },
            Kind::Cluster(c) => Inner::Cluster(c.follow(id, after).await.map_err(|e| follow_error(id, e))?),
        };
        Ok(Some(Subscription { task: id.to_owned(), inner }))
    }

    /// Bytes the kept streams hold in this process (in a cluster: what
    /// waits to be written).
    pub(crate) fn footprint(&self) -> usize {
        match &self.kind {
            Kind::Local(l) => lock(&l.streams).values().map(|(s, _)| s.footprint()).sum(),
            Kind::Cluster(c) => c.footprint(),
        }
    }

    /// Task `id`'s stream in process, if its record has not expired.
    #[cfg(test)]
    fn get(&self, id: &str) -> Option<Arc<TaskEvents>> {
        match &self.kind {
            Kind::Local(l) => l.get(id),
            Kind::Cluster(_) => None,
        }
    }
}

impl LocalStreams {
    /// Task `id`'s stream, if its record has not expired.
    fn get(&self, id: &str) -> Option<Arc<TaskEvents>> {
        self.sweep();
        let now = now_ms();
        lock(&self.streams).get(id).filter(|(_, exp)| exp.is_none_or(|e| e > now)).map(|(s, _)| Arc::clone(s))
    }

    /// Drops the streams of expired tasks (at most once a second): their
    /// open `tasks/stream`s end.
    fn sweep(&self) {
        let now = now_ms();
        let last = self.swept_at.load(Ordering::Relaxed);
        if now < last + SWEEP_EVERY_MS
            || self.swept_at.compare_exchange(last, now, Ordering::Relaxed, Ordering::Relaxed).is_err()
        {
            return;
        }
        let mut gone = vec![];
        lock(&self.streams).retain(|_, (s, exp)| {
            let keep = exp.is_none_or(|e| e > now);
            if !keep {
                gone.push(Arc::clone(s));
            }
            keep
        });
        // Out of the map's lock; an open `tasks/stream` may still hold one.
        for s in gone {
            s.end();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_must_be_vendor_prefixed() {
        for ok in ["com.example.step", "dev.gapless.demo.tick", "org.a-b.c_d.e1"] {
            assert_eq!(check_type(ok), Ok(()), "{ok}");
        }
        for bad in [
            "",
            "step",
            "content.partial",
            "task.status",
            "com..step",
            ".com.example",
            "com.example.",
            "com.exa mple.step",
            "com.example.stép",
            "io.modelcontextprotocol.status",
        ] {
            assert!(matches!(check_type(bad), Err(TaskEventError::InvalidType(_))), "{bad:?}");
        }
        assert!(check_type(&format!("com.example.{}", "x".repeat(300))).is_err());
    }

    #[test]
    fn a_notification_is_the_drafts_shape() {
        let s = EventStreams::new(None, TaskEventsConfig::default(), 64);
        s.open("t1", None).unwrap();
        assert_eq!(s.emit("t1", "com.example.step", &json!({"n": 1, "s": "\"q\""})), Ok(0));
        assert_eq!(s.emit("t1", "com.example.step", &json!([1])), Err(TaskEventError::NotAnObject));
        let big = json!({"x": "y".repeat(64)});
        assert!(matches!(
            s.emit("t1", "com.example.step", &big),
            Err(TaskEventError::TooLarge { max: 64, .. })
        ));
        assert_eq!(s.emit("t2", "com.example.step", &json!({})), Err(TaskEventError::Ended), "no such task");
        let snap = s.get("t1").unwrap().snapshot(None, Instant::now()).unwrap();
        let e = snap.iter().next().unwrap();
        let n: Value = serde_json::from_slice(&notification("t1", e.seq, e.payload)).unwrap();
        assert_eq!(
            n,
            json!({"jsonrpc": "2.0", "method": EVENT_METHOD, "params": {
                "seq": 0, "taskId": "t1", "type": "com.example.step", "payload": {"n": 1, "s": "\"q\""},
                "_meta": {RELATED_TASK: {"taskId": "t1"}}}})
        );
        s.end("t1");
        assert_eq!(s.emit("t1", "com.example.step", &json!({})), Err(TaskEventError::Ended));
    }

    #[test]
    fn one_stream_per_connection_and_task() {
        let s = EventStreams::new(None, TaskEventsConfig::default(), 64);
        let (one, two): (SocketAddr, SocketAddr) =
            ("127.0.0.1:1000".parse().unwrap(), "127.0.0.1:1001".parse().unwrap());
        let a = s.claim(one, "t").expect("the first");
        assert!(s.claim(one, "t").is_none(), "a second for the same task on the same connection");
        let _b = s.claim(two, "t").expect("another connection's (a resume after a cut)");
        let _c = s.claim(one, "u").expect("another task's");
        drop(a);
        assert!(s.claim(one, "t").is_some(), "free again once the first ended");
    }

    #[test]
    fn an_expired_tasks_stream_is_dropped() {
        let s = EventStreams::new(None, TaskEventsConfig::default(), 64);
        s.open("old", Some(now_ms().saturating_sub(1))).unwrap();
        s.open("new", Some(now_ms() + 60_000)).unwrap();
        assert!(s.get("old").is_none());
        assert!(s.get("new").is_some());
        assert_eq!(s.emit("old", "com.example.step", &json!({})), Err(TaskEventError::Ended));
    }
}
