//! The tasks extension of MCP 2026-07-28 (`io.modelcontextprotocol/tasks`,
//! SEP-2663; `docs/SPEC.md` §5.5): a `tools/call` answered with a task
//! handle while its work goes on, polled with `tasks/get`, fed input with
//! `tasks/update`, stopped with `tasks/cancel`.
//!
//! How a task runs:
//!
//! ```text
//!  tools/call ──► handler ──► ctx.create_task() ──► store.create(record)   (durable first)
//!                    │                 └──────────► CreateTaskResult sent (the HTTP exchange ends)
//!                    │ (goes on, in the same spawned future)
//!                    ├── ctx.ask(..) ──► record: input_required + inputRequests
//!                    │        ▲                     tasks/update moves answers into the record,
//!                    │        └──── answers ◄────── wakes the work (or its poll finds them)
//!                    └── returns ──► record: completed (result) / failed (error)
//!  tasks/cancel ──► record: cancelled ──► the work's token cancelled, its future dropped
//! ```
//!
//! The record is the one truth: a status once terminal never changes, and
//! every change is one atomic step of the store (`TaskStore::modify`), so
//! a cancel racing the work's end leaves exactly one of them in the record.

mod events;
mod listen;
mod methods;
mod stream;
mod watchers;
mod wire;

pub use events::{check_type, TaskEventError, EVENT_METHOD, RELATED_TASK};
pub(crate) use events::{notification, Active, Subscription, EVENT_OVERHEAD};
pub(crate) use listen::Watched;
pub(crate) use wire::{now_ms, wire};

use crate::backend::task_store::{CreateError, Lookup, Record, Status, StoreError, TaskStore};
use crate::backend::TaskNews;
use crate::vocab::jsonrpc::{code, RpcError};
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::Notify;
use tokio_util::sync::CancellationToken;

/// The extension's identifier, in capabilities.
pub const EXTENSION: &str = "io.modelcontextprotocol/tasks";

/// How long running work, or work waiting for input, goes without reading
/// its record when nothing woke it: a backstop only. A change of the
/// record wakes it (`watchers.rs`: this node's changes, the store's
/// announcements of another node's, and the node's safety net, which reads
/// a few watched tasks a second in turn), and its expiry is waited for.
const WORK_WAIT: Duration = Duration::from_secs(10);

/// How soon work reads its record again after the store did not answer.
const WORK_RETRY: Duration = Duration::from_secs(1);

/// Whether `capabilities` (a request's declared client capabilities)
/// include the tasks extension.
pub fn declares(capabilities: &Value) -> bool {
    capabilities.get("extensions").and_then(|e| e.get(EXTENSION)).is_some_and(|v| !v.is_null())
}

/// The `-32021` error of a request that can only be served as a task, from
/// a client that did not declare the extension.
pub fn required() -> RpcError {
    RpcError::missing_client_capability(json!({"extensions": {EXTENSION: {}}}))
}

/// What a handler may set about the task it creates.
#[derive(Clone, Debug, Default)]
pub struct TaskOptions {
    /// How long the task (and its result) is kept from its creation;
    /// `None`: [`crate::ServerConfig::task_ttl`]. At most
    /// [`crate::ServerConfig::max_task_ttl`].
    pub ttl: Option<Duration>,
    /// The polling interval suggested to the client; `None`:
    /// [`crate::ServerConfig::task_poll_interval`].
    pub poll_interval: Option<Duration>,
    /// `statusMessage` while it works.
    pub status_message: Option<String>,
}

/// Why a request could not become a task.
#[derive(Clone, Debug, PartialEq)]
pub enum TaskError {
    /// The client did not declare the extension on this request, or the
    /// request cannot be a task (not a `tools/call` of MCP 2026-07-28, or a
    /// task already): serve it another way, or refuse it with
    /// [`required`].
    NotDeclared(String),
    /// The server holds its most tasks, in all or for this caller
    /// ([`crate::ServerConfig::max_tasks`], `max_tasks_per_client`).
    Full(String),
    /// The task store did not answer (cluster mode: Redis).
    Unavailable(String),
}

impl std::fmt::Display for TaskError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            TaskError::NotDeclared(m) | TaskError::Full(m) | TaskError::Unavailable(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for TaskError {}

impl From<TaskError> for RpcError {
    /// `NotDeclared` is `-32021` naming the extension; `Full` -31001; the
    /// store's failure -32603.
    fn from(e: TaskError) -> RpcError {
        match e {
            TaskError::NotDeclared(_) => required(),
            TaskError::Full(m) => RpcError::new(code::TOO_MANY_IN_FLIGHT, m),
            TaskError::Unavailable(m) => RpcError::new(code::INTERNAL_ERROR, m),
        }
    }
}

/// The limits a task is created under, from the server's configuration.
#[derive(Clone, Debug)]
pub(crate) struct Limits {
    pub(crate) ttl: Duration,
    pub(crate) max_ttl: Duration,
    pub(crate) poll_interval: Duration,
    pub(crate) max_tasks: usize,
    pub(crate) max_per_client: usize,
    pub(crate) max_result_bytes: usize,
    /// What each task's event stream keeps, and the largest event; `None`:
    /// event streams are not served.
    pub(crate) events: Option<(gapless::task::TaskEventsConfig, usize)>,
}

/// This process's tasks: the store, and the work it runs (a cancel and a
/// wake-up per running task).
#[derive(Debug)]
pub(crate) struct Tasks {
    pub(crate) store: Arc<dyn TaskStore>,
    limits: Limits,
    /// This node's name in cluster mode (recorded on the tasks it runs).
    node: Option<String>,
    running: Mutex<HashMap<String, Work>>,
    metrics: Arc<crate::telemetry::Metrics>,
    /// The tasks' event streams (SEP-2694), when served.
    events: Option<events::EventStreams>,
    /// Listen streams' reads of the tasks they watch, shared.
    listen_reads: Arc<listen::SharedReads>,
    /// What wakes the readers of task records: listen streams, and each
    /// running work's look at its own record.
    watchers: Arc<watchers::Watchers>,
    /// Tells the cluster's other nodes of a change this node made to a
    /// task's record (`None` in process).
    news: Option<TaskNews>,
}

/// A task running here: how to stop it, and how to wake it when input
/// arrives.
#[derive(Clone, Debug)]
struct Work {
    cancel: CancellationToken,
    input: Arc<Notify>,
}

/// See [`Tasks::abandon_on_drop`].
pub(crate) struct Abandon {
    tasks: Option<(Arc<Tasks>, String, &'static str)>,
    /// Whether dropping it cancels the work's token (the handler's own
    /// until its task is handed out): yes when the request is gone, no
    /// when its handler goes on without a task.
    stop_work: bool,
}

impl Abandon {
    /// The task was handed out: nothing to undo.
    pub(crate) fn disarm(mut self) {
        self.tasks = None;
    }

    /// Fails the record but leaves the handler's token alone: the handler
    /// goes on (serving the call without a task).
    fn release(mut self) {
        self.stop_work = false;
    }
}

impl Drop for Abandon {
    fn drop(&mut self) {
        let Some((tasks, id, why)) = self.tasks.take() else { return };
        if let Some(w) = crate::vocab::sync::lock(&tasks.running).remove(&id) {
            if self.stop_work {
                w.cancel.cancel();
            }
        }
        if let Ok(rt) = tokio::runtime::Handle::try_current() {
            rt.spawn(async move {
                tasks.record(&id, Err(RpcError::new(code::INTERNAL_ERROR, why))).await;
                tasks.end_events(&id);
            });
        }
    }
}

/// A record's lookup for a caller: someone else's task is unknown to it.
fn visible(l: Lookup, caller: Option<&str>) -> Lookup {
    match l {
        Lookup::Found(r) if r.owner.is_some() && r.owner.as_deref() != caller => Lookup::Unknown,
        l => l,
    }
}

fn not_found(id: &str, l: &Lookup) -> RpcError {
    match l {
        Lookup::Expired => RpcError {
            code: code::INVALID_PARAMS,
            message: format!("task {id:?} expired: its TTL ran out and its state is gone"),
            data: Some(json!({"taskId": id, "reason": "expired"})),
        },
        _ => RpcError {
            code: code::INVALID_PARAMS,
            message: format!("unknown task {id:?}"),
            data: Some(json!({"taskId": id, "reason": "unknown"})),
        },
    }
}

fn unavailable(e: StoreError) -> RpcError {
    RpcError::new(code::INTERNAL_ERROR, format!("the task store is unavailable: {}", e.0))
}

impl Tasks {
    /// The tasks on `store`; their event streams (if `limits` serve them)
    /// counted in `hub`'s memory budget, or in a cluster those of `cluster`,
    /// in Redis beside the records.
    pub(crate) fn new(
        store: Arc<dyn TaskStore>,
        limits: Limits,
        node: Option<String>,
        metrics: Arc<crate::telemetry::Metrics>,
        hub: Arc<gapless::Hub>,
        cluster: Option<Arc<crate::backend::task_store::RedisEvents>>,
        news: Option<TaskNews>,
    ) -> Self {
        let events = limits.events.map(|(config, max)| match cluster {
            Some(c) => events::EventStreams::cluster(c, max),
            None => events::EventStreams::new(Some(hub), config, max),
        });
        let listen_reads = Arc::new(listen::SharedReads::default());
        let stale = Arc::clone(&listen_reads);
        let watchers =
            Arc::new(watchers::Watchers::new(Arc::clone(&store), Box::new(move |id| stale.stale(id))));
        Tasks {
            store,
            limits,
            node,
            running: Default::default(),
            metrics,
            events,
            listen_reads,
            watchers,
            news,
        }
    }

    /// Another node changed task `id`'s record (the bus): its work here,
    /// if any, stops at once when the task `ended` (no event it emits from
    /// now on is taken), or wakes to read its input.
    pub(crate) fn changed_elsewhere(&self, id: &str, ended: bool) {
        // Its readers here too (the store announced it as well).
        self.watchers.wake(id);
        let Some(w) = crate::vocab::sync::lock(&self.running).get(id).cloned() else { return };
        if ended {
            self.end_events(id);
            w.cancel.cancel();
        } else {
            w.input.notify_one();
        }
    }

    /// Tells the cluster's other nodes that this node changed task `id`'s
    /// record (nothing in process).
    async fn tell(&self, id: &str, ended: bool) {
        if let Some(news) = &self.news {
            news.tell(id.to_owned(), ended).await;
        }
    }

    /// Applies `change` to task `id`'s record ([`TaskStore::modify`]) and,
    /// when it changed it, wakes the record's readers on this node.
    async fn modify(
        &self,
        id: &str,
        now: u64,
        change: crate::backend::task_store::Change<'_>,
    ) -> Result<Lookup, StoreError> {
        let mut changed = false;
        let after = {
            let mut noting = |r: &mut Record| {
                let c = change(r);
                changed |= c;
                c
            };
            self.store.modify(id, now, &mut noting).await
        };
        if changed {
            self.watchers.wake(id);
        }
        after
    }

    /// Drops the listen streams' stale reads of watched tasks.
    pub(crate) fn sweep_listen_reads(&self) {
        self.listen_reads.sweep();
    }

    /// Whether `tasks/stream` is served (task event streams, SEP-2694).
    pub(crate) fn serves_events(&self) -> bool {
        self.events.is_some()
    }

    /// Emits an event of type `kind` with `payload` on task `id`'s stream.
    pub(crate) fn emit(&self, id: &str, kind: &str, payload: &Value) -> Result<u64, TaskEventError> {
        self.events.as_ref().ok_or(TaskEventError::Unsupported)?.emit(id, kind, payload)
    }

    /// Ends task `id`'s event stream: it is terminal, or its work here is
    /// over (so no more event can come).
    fn end_events(&self, id: &str) {
        if let Some(e) = &self.events {
            e.end(id);
        }
    }

    /// Bytes the tasks' event streams hold.
    pub(crate) fn events_footprint(&self) -> usize {
        self.events.as_ref().map_or(0, events::EventStreams::footprint)
    }

    /// How many tasks run their work on this node.
    pub(crate) fn running(&self) -> usize {
        crate::vocab::sync::lock(&self.running).len()
    }

    /// Creates the record of a new task of `owner`, durably, and registers
    /// its work (`cancel`) here. Returns the `CreateTaskResult`'s fields,
    /// and a guard to disarm once the handle is out: dropped armed (this
    /// future too, while the store writes), it fails the task and lets go
    /// of its work.
    pub(crate) async fn create(
        self: &Arc<Self>,
        owner: Option<String>,
        client: Option<String>,
        opts: &TaskOptions,
        cancel: CancellationToken,
    ) -> Result<(String, Map<String, Value>, Abandon), TaskError> {
        let mut bits = [0u8; 16];
        getrandom::getrandom(&mut bits).expect("the OS CSPRNG is available");
        let id: String = bits.iter().map(|b| format!("{b:02x}")).collect();
        let now = now_ms();
        let ttl = opts.ttl.unwrap_or(self.limits.ttl).min(self.limits.max_ttl);
        let record = Record {
            id: id.clone(),
            owner,
            status: Status::Working,
            status_message: opts.status_message.clone(),
            created_at_ms: now,
            updated_at_ms: now,
            ttl_ms: Some((ttl.as_millis() as u64).max(1)),
            poll_interval_ms: Some(
                (opts.poll_interval.unwrap_or(self.limits.poll_interval).as_millis() as u64).max(1),
            ),
            input_requests: Map::new(),
            answers: Map::new(),
            keys_used: vec![],
            result: None,
            error: None,
            node: self.node.clone(),
            client,
        };
        let created = wire(&record, false);
        // Its event stream first (a `tasks/stream` may come the moment the
        // handle is out): no room for it in the memory budget is no task.
        if let Some(e) = &self.events {
            if let Err(why) = e.open(&id, record.expires_at_ms()) {
                self.metrics.task_refused("full");
                return Err(TaskError::Full(why));
            }
        }
        // Registered first: a cancel that comes the moment the client has
        // the id finds the work.
        let work = Work { cancel, input: Arc::new(Notify::new()) };
        crate::vocab::sync::lock(&self.running).insert(id.clone(), work);
        let guard = self.abandon_on_drop(&id, "the request ended before its task was handed out");
        match self.store.create(record, self.limits.max_tasks, self.limits.max_per_client, now).await {
            Ok(()) => {
                self.metrics.tasks_created.inc();
                Ok((id, created, guard))
            }
            Err(e) => {
                if matches!(e, CreateError::Full { .. }) {
                    if let Some(events) = &self.events {
                        events.forget(&id); // nothing stored
                    }
                    guard.disarm();
                } else {
                    // The write may have reached the store unconfirmed: the
                    // guard fails that record (once the store answers) and
                    // then ends its event stream; the handler is told and
                    // goes on.
                    guard.release();
                }
                crate::vocab::sync::lock(&self.running).remove(&id);
                self.metrics.task_refused(if matches!(e, CreateError::Store(_)) {
                    "unavailable"
                } else {
                    "full"
                });
                Err(match e {
                    CreateError::Full { max, per_owner: true } => TaskError::Full(format!(
                        "this client holds {max} tasks, the most it may; retry when one has expired"
                    )),
                    CreateError::Full { max, per_owner: false } => {
                        TaskError::Full(format!("the server holds {max} tasks, the most it may; retry later"))
                    }
                    CreateError::Store(e) => {
                        TaskError::Unavailable(format!("the task store is unavailable: {}", e.0))
                    }
                })
            }
        }
    }

    /// A guard that, unless disarmed, lets go of task `id`'s work here and
    /// records the task failed with `why` (in a task of its own: it runs
    /// on drop). A record never stored is left alone (nothing to change).
    pub(crate) fn abandon_on_drop(self: &Arc<Self>, id: &str, why: &'static str) -> Abandon {
        Abandon { tasks: Some((Arc::clone(self), id.to_owned(), why)), stop_work: true }
    }

    /// Runs the work of task `id` to its end: its outcome recorded unless
    /// the task was cancelled, it expired, or the server shut down (then it
    /// is recorded failed, saying so).
    pub(crate) async fn run<F>(&self, id: &str, work: F, shutdown: CancellationToken)
    where
        F: std::future::Future<Output = Result<Value, RpcError>>,
    {
        let cancel = match crate::vocab::sync::lock(&self.running).get(id) {
            Some(w) => w.cancel.clone(),
            None => return,
        };
        // Ends when the record says the work is moot: it is terminal
        // (cancelled, here or on another node), expired, or gone. The
        // record is read again when it changes (the watchers), or expires;
        // a store that does not answer is asked again after a while.
        let watching = self.watchers.watching(id);
        let moot = async {
            loop {
                let wait = match self.store.get(id, now_ms()).await {
                    Ok(Lookup::Found(r)) if !r.status.is_terminal() => {
                        r.expires_at_ms().map_or(WORK_WAIT, |e| {
                            Duration::from_millis(e.saturating_sub(now_ms())).min(WORK_WAIT)
                        })
                    }
                    Ok(_) => return,
                    Err(_) => WORK_RETRY,
                };
                tokio::select! {
                    _ = watching.woken() => {}
                    _ = tokio::time::sleep(wait) => {}
                }
            }
        };
        // A handler that panics fails its task (the record would otherwise
        // say `working` until its TTL ran out).
        let work = futures_util::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(work));
        let outcome = tokio::select! {
            biased;
            r = work => Some(r.unwrap_or_else(|_| Err(RpcError::new(
                code::INTERNAL_ERROR,
                "the task's handler panicked",
            )))),
            _ = cancel.cancelled() => None,
            _ = moot => None,
            _ = shutdown.cancelled() => Some(Err(RpcError::new(
                code::INTERNAL_ERROR,
                "the server shut down before the task completed",
            ))),
        };
        crate::vocab::sync::lock(&self.running).remove(id);
        cancel.cancel();
        if let Some(outcome) = outcome {
            self.record(id, outcome).await;
        }
        // After the terminal status: a stream's end is the status's news.
        self.end_events(id);
    }

    /// Records `outcome`, trying again while the store does not answer
    /// (backing off to 5 s) until it is recorded or the record is terminal,
    /// expired or gone: a task whose node lives is never left `working`
    /// because one write failed.
    async fn record(&self, id: &str, outcome: Result<Value, RpcError>) {
        // Tasks are of 2026-07-28 requests only: the revision's codes.
        let outcome = outcome.map_err(RpcError::for_2026);
        let mut wait = Duration::from_millis(100);
        loop {
            match self.try_record(id, outcome.clone()).await {
                Ok(_) => return,
                Err(e) => {
                    tracing::warn!(task = id, error = %e.0, "task outcome not recorded yet; trying again");
                    tokio::time::sleep(wait).await;
                    wait = (wait * 2).min(Duration::from_secs(5));
                }
            }
        }
    }

    /// Records the outcome of work that ended on its own (before [`Tasks::run`]
    /// took it over).
    pub(crate) async fn settle(&self, id: &str, outcome: Result<Value, RpcError>) {
        if let Some(w) = crate::vocab::sync::lock(&self.running).remove(id) {
            w.cancel.cancel();
        }
        self.record(id, outcome).await;
        self.end_events(id);
    }

    /// Records the work's outcome, unless the task reached a terminal
    /// status already (cancelled). A result larger than
    /// `max_task_result_bytes` fails the task instead.
    async fn try_record(&self, id: &str, outcome: Result<Value, RpcError>) -> Result<Lookup, StoreError> {
        let max = self.limits.max_result_bytes;
        let outcome = match outcome {
            Ok(v) if v.to_string().len() > max => Err(RpcError::new(
                code::INTERNAL_ERROR,
                format!("the task's result is larger than the {max} bytes a task may keep"),
            )),
            o => o,
        };
        let now = now_ms();
        // Whether this change made the task terminal (the last try's word,
        // when the store tries it again on a record that changed).
        let mut ended = false;
        let mut change = |r: &mut Record| {
            ended = match &outcome {
                Ok(v) => r.end(Status::Completed, Some(v.clone()), None, now),
                Err(e) => r.end(Status::Failed, Some(e.to_json()), None, now),
            };
            ended
        };
        let after = self.modify(id, now, &mut change).await;
        if ended {
            self.count_end(&after);
        }
        after
    }

    /// Counts the terminal status a change of this node just recorded
    /// (`after` is the record as that change left it).
    fn count_end(&self, after: &Result<Lookup, StoreError>) {
        if let Ok(Lookup::Found(a)) = after {
            self.metrics.task_ended(a.status.as_str());
        }
    }

    /// Asks the client for `requests` (`{key: {method, params}}`) from task
    /// `id`'s work, and waits for `tasks/update` to answer every one.
    /// A key the task used before is renamed on the wire (`key#2`, ...), so
    /// that a key is never reissued; the answers come back under the
    /// handler's own keys.
    pub(crate) async fn ask(
        &self,
        id: &str,
        requests: &Map<String, Value>,
    ) -> Result<Map<String, Value>, crate::vocab::error::ClientRequestError> {
        use crate::vocab::error::ClientRequestError;
        if requests.is_empty() {
            return Ok(Map::new());
        }
        let work =
            crate::vocab::sync::lock(&self.running).get(id).cloned().ok_or(ClientRequestError::Cancelled)?;
        // Wire key → the handler's key.
        let mut names: Vec<(String, String)> = vec![];
        let mut change = |r: &mut Record| {
            names.clear();
            if r.status.is_terminal() {
                return false;
            }
            for (key, req) in requests {
                let mut wire_key = key.clone();
                let mut n = 1;
                while r.keys_used.contains(&wire_key) {
                    n += 1;
                    wire_key = format!("{key}#{n}");
                }
                r.keys_used.push(wire_key.clone());
                r.input_requests.insert(wire_key.clone(), req.clone());
                names.push((wire_key, key.clone()));
            }
            r.status = Status::InputRequired;
            r.updated_at_ms = now_ms();
            true
        };
        let l = self.modify(id, now_ms(), &mut change).await.map_err(|_| ClientRequestError::Cancelled)?;
        match l {
            Lookup::Found(r) if !r.status.is_terminal() => {}
            _ => return Err(ClientRequestError::Cancelled),
        }
        let watching = self.watchers.watching(id);
        let mut got = Map::new();
        loop {
            let mut taken = Map::new();
            let mut take = |r: &mut Record| {
                taken.clear();
                for (wire_key, _) in &names {
                    if let Some(a) = r.answers.remove(wire_key) {
                        taken.insert(wire_key.clone(), a);
                    }
                }
                !taken.is_empty()
            };
            let l = self.modify(id, now_ms(), &mut take).await;
            for (wire_key, key) in &names {
                if let Some(a) = taken.remove(wire_key) {
                    got.insert(key.clone(), a);
                }
            }
            if got.len() == names.len() {
                return Ok(got);
            }
            let wait = match l {
                Ok(Lookup::Found(r)) if !r.status.is_terminal() => WORK_WAIT,
                Ok(_) => return Err(ClientRequestError::Cancelled),
                Err(_) => WORK_RETRY,
            };
            // An answer `tasks/update` recorded, here or on another node,
            // wakes it.
            tokio::select! {
                _ = work.input.notified() => {}
                _ = watching.woken() => {}
                _ = tokio::time::sleep(wait) => {}
                _ = work.cancel.cancelled() => return Err(ClientRequestError::Cancelled),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_extension_is_declared_under_extensions() {
        assert!(declares(&json!({"extensions": {EXTENSION: {}}})));
        assert!(!declares(&json!({"extensions": {EXTENSION: null}})));
        assert!(!declares(&json!({"tasks": {}})));
        assert!(!declares(&json!({})));
        let e = required();
        assert_eq!(e.code, code::MISSING_CLIENT_CAPABILITY);
        assert_eq!(e.data.unwrap()["requiredCapabilities"]["extensions"][EXTENSION], json!({}));
    }
}
