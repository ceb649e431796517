//! A 2026-07-28 request's exchange with its response: the handler's
//! notifications in order, bounded, so that a client reading slowly slows
//! the handler instead of filling memory; the input the request brought
//! for the handler's asks (input-required results, SEP-2322); the attempt's
//! early end (an ask without its answers, a task created).

use super::queue::{queue, QueueRx, QueueTx};
use super::Declared;
use crate::tasks::{self, TaskError, TaskOptions, Tasks};
use crate::vocab::change::Announcer;
use crate::vocab::error::{ClientRequestError, SendError};
use crate::vocab::jsonrpc::RpcError;
use crate::vocab::log_level::LogLevel;
use crate::vocab::request_state::{self, Binding, StateKey};
use crate::vocab::sync::lock;
use bytes::Bytes;
use gapless::Seq;
use serde_json::{json, Map, Value};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// How an attempt at a 2026-07-28 request ends early, from inside its
/// handler.
pub(crate) enum End {
    /// The handler asked for input the request did not bring: an
    /// input-required result naming what is missing.
    Input(Map<String, Value>),
    /// The handler asked for input of a kind the client did not declare:
    /// `-32021` naming the capabilities.
    Capability(Value),
    /// An answer the request brought is not a result of its input
    /// request's method: `-32602`.
    Invalid(String),
    /// The handler made the request a task (its record is stored): the
    /// response is the `CreateTaskResult`, and the handler goes on.
    Task(Map<String, Value>),
}

/// A 2026-07-28 request's way to its response: the handler's notifications
/// in order, bounded, so that a client reading slowly slows the handler
/// instead of filling memory; and the input the request brought for the
/// handler's asks (SEP-2322).
pub(crate) struct Exchange {
    /// The protocol version the request declared.
    pub(crate) version: String,
    /// The capabilities the request declared.
    pub(crate) capabilities: Value,
    /// The log level the request declared.
    pub(crate) log_level: Option<LogLevel>,
    method: String,
    tx: QueueTx,
    sent: AtomicU64,
    /// Answers the retry brought: its verified `requestState`'s, then its
    /// `inputResponses`.
    answers: Map<String, Value>,
    /// Answers this attempt used (carried into the next `requestState`).
    pub(crate) used: std::sync::Mutex<Map<String, Value>>,
    /// Server → client requests asked one at a time (`request`), to name
    /// them the same way on every attempt.
    asked: AtomicU64,
    end: std::sync::Mutex<Option<oneshot::Sender<End>>>,
    /// The server's announcements to listen streams.
    pub(crate) changes: Announcer,
    /// The caller's identity (what a task is bound to).
    caller: Option<String>,
    /// Whose quota a task counts against (identity, else peer address).
    client: Option<String>,
    /// The handler's cancellation (a task's, once it is one).
    work: CancellationToken,
    /// The task this request became, once it did (set once, before the
    /// handle is sent), and its `CreateTaskResult`.
    pub(crate) task: std::sync::OnceLock<(String, Map<String, Value>)>,
    /// Set by the first `create_task` (so that two cannot race).
    creating: std::sync::atomic::AtomicBool,
    tasks: Arc<Tasks>,
}

/// Who made a request and how its handler is stopped.
pub(crate) struct Origin {
    pub(crate) caller: Option<String>,
    pub(crate) client: Option<String>,
    pub(crate) work: CancellationToken,
}

/// Whether a request that declared the log level `min` (`None`: none)
/// withholds a `notifications/message` of `level` (its `params.level`;
/// `None`: missing or not a string). A request that declared no level
/// gets no log messages at all (MCP 2026-07-28), and one that did gets
/// those at its level or above. A level that is not one of the eight is
/// withheld too: it cannot be shown to pass.
fn withholds(min: Option<LogLevel>, level: Option<&str>) -> bool {
    match (min, level.and_then(LogLevel::parse)) {
        (Some(min), Some(l)) => l < min,
        _ => true,
    }
}

/// Whether a request that declared the log level `min` withholds
/// `message`, one serialized JSON-RPC message a handler sends raw: it does
/// if the message is a `notifications/message` that [`withholds`] holds
/// back. The message is parsed for its method (in any spelling JSON
/// allows, escapes included), skipping the rest; only a log message is
/// read again for its level. Bytes that are not JSON pass: one JSON message
/// is the caller's promise, not this filter's to police.
fn withholds_raw(min: Option<LogLevel>, message: &[u8]) -> bool {
    #[derive(serde::Deserialize)]
    struct Probe<'a> {
        #[serde(borrow)]
        method: Option<std::borrow::Cow<'a, str>>,
    }
    match serde_json::from_slice::<Probe<'_>>(message) {
        Ok(p) if p.method.as_deref() == Some(LOG_METHOD) => {
            let m: Value = serde_json::from_slice(message).unwrap_or_default();
            withholds(min, m.pointer("/params/level").and_then(Value::as_str))
        }
        _ => false,
    }
}

/// The method of log messages.
pub(crate) const LOG_METHOD: &str = "notifications/message";

/// The methods whose requests may be answered with an input-required
/// result.
const TAKES_INPUT: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

impl Exchange {
    /// The exchange of a request of `method` with `declared` declarations
    /// and the retry's `answers` for its asks, with the receiving ends of
    /// its notifications (in order, bounded: [`queue`]) and of
    /// its attempt's early end.
    pub(crate) fn open(
        declared: Declared,
        method: &str,
        answers: Map<String, Value>,
        origin: Origin,
        changes: Announcer,
        tasks: Arc<Tasks>,
    ) -> (Arc<Self>, QueueRx, oneshot::Receiver<End>) {
        let (tx, notifications) = queue();
        let (end, ended) = oneshot::channel();
        let exchange = Arc::new(Exchange {
            version: declared.version,
            capabilities: declared.capabilities,
            log_level: declared.log_level,
            method: method.to_owned(),
            tx,
            sent: AtomicU64::new(0),
            answers,
            used: Default::default(),
            asked: AtomicU64::new(0),
            end: std::sync::Mutex::new(Some(end)),
            changes,
            caller: origin.caller,
            client: origin.client,
            work: origin.work,
            task: std::sync::OnceLock::new(),
            creating: Default::default(),
            tasks,
        });
        (exchange, notifications, ended)
    }

    /// Makes this request a task (the tasks extension): stores its record,
    /// then ends the HTTP exchange with the `CreateTaskResult` while the
    /// handler goes on. Only a `tools/call` whose client declared the
    /// extension, once.
    pub(crate) async fn create_task(&self, opts: &TaskOptions) -> Result<String, TaskError> {
        if self.method != "tools/call" {
            return Err(TaskError::NotDeclared(format!("a {} request cannot become a task", self.method)));
        }
        if !tasks::declares(&self.capabilities) {
            return Err(TaskError::NotDeclared(format!(
                "the client did not declare the {} extension on this request",
                tasks::EXTENSION
            )));
        }
        // One creation per request, claimed before anything awaits.
        if self.task.get().is_some() || self.creating.swap(true, Ordering::AcqRel) {
            return Err(TaskError::NotDeclared("this request is a task already".into()));
        }
        let ended = || TaskError::NotDeclared("this attempt has ended (it asked for input)".into());
        if lock(&self.end).is_none() {
            return Err(ended());
        }
        // If this future is dropped from here on (the client went away,
        // the server shuts down), the guard lets go of the work and fails
        // a record that may have been stored.
        let made = self.tasks.create(self.caller.clone(), self.client.clone(), opts, self.work.clone()).await;
        let (id, mut created, guard) = match made {
            Ok(m) => m,
            Err(e) => {
                // Not a task: the handler may try again.
                self.creating.store(false, Ordering::Release);
                return Err(e);
            }
        };
        created.insert("resultType".into(), json!("task"));
        // The handle goes out only if the attempt is still open: an ask
        // that ended it meanwhile (a concurrent one) answered already.
        let mut end = lock(&self.end);
        let Some(tx) = end.take() else {
            drop(end);
            drop(guard); // fails the record, lets go of the work
            return Err(ended());
        };
        let _ = self.task.set((id.clone(), created.clone()));
        let sent = tx.send(End::Task(created)).is_ok();
        drop(end);
        if !sent {
            // Nobody runs the request any more (only a handler's spawned
            // work could still call this): no handle went out.
            drop(guard);
            return Err(ended());
        }
        guard.disarm();
        Ok(id)
    }

    /// Emits an event on the task this request became
    /// ([`crate::host::RequestContext::emit_task_event`]).
    pub(crate) fn emit_task_event(&self, kind: &str, payload: &Value) -> Result<u64, tasks::TaskEventError> {
        let Some((id, _)) = self.task.get() else { return Err(tasks::TaskEventError::NotATask) };
        self.tasks.emit(id, kind, payload)
    }

    /// Whether this request became a task: its response was the task's
    /// handle, and its notifications have nowhere to go ([`Exchange::send`]).
    pub(crate) fn is_task(&self) -> bool {
        self.task.get().is_some()
    }

    /// Queues one serialized notification for the response stream; waits
    /// while the queue is full. `Closed` once the response is gone: the
    /// client closed it, and the request is cancelled (at once, so that the
    /// handler that sees `Closed` sees itself cancelled too); or the request
    /// is a task, whose handle was the response.
    pub(crate) async fn send(&self, message: Bytes) -> Result<Seq, SendError> {
        if self.task.get().is_some() {
            return Err(SendError::Closed);
        }
        self.tx.send(message).await.map_err(|_| {
            if self.task.get().is_none() {
                self.work.cancel();
            }
            SendError::Closed
        })?;
        Ok(Seq(self.sent.fetch_add(1, Ordering::Relaxed) + 1))
    }

    /// Whether this request's log level withholds a `notifications/message`
    /// of `level` ([`withholds`]).
    pub(crate) fn withholds_log(&self, level: Option<&str>) -> bool {
        withholds(self.log_level, level)
    }

    /// Whether this request's log level withholds `message`, one serialized
    /// JSON-RPC message a handler sends raw ([`withholds_raw`]).
    pub(crate) fn withholds_raw(&self, message: &[u8]) -> bool {
        withholds_raw(self.log_level, message)
    }

    /// The key of the next one-at-a-time ask of `method`.
    pub(crate) fn next_key(&self, method: &str) -> String {
        format!("{method}#{}", self.asked.fetch_add(1, Ordering::Relaxed) + 1)
    }

    /// The answers to `requests` (`{key: {method, params}}`) if the request
    /// brought them all; else this attempt ends (the future never resolves)
    /// with an input-required result asking for the missing ones, and the
    /// client's retry runs the handler again. Asking for input the client
    /// did not declare (elicitation, sampling, roots) ends it with -32021.
    pub(crate) async fn ask(
        &self,
        requests: &Map<String, Value>,
    ) -> Result<Map<String, Value>, ClientRequestError> {
        if !TAKES_INPUT.contains(&self.method.as_str()) {
            return Err(ClientRequestError::Unsupported(format!(
                "a {} request cannot ask the client for input in MCP {} (only tools/call, prompts/get and resources/read can)",
                self.method, self.version
            )));
        }
        let mut missing_caps = Map::new();
        for (key, r) in requests {
            let method = r.get("method").and_then(Value::as_str).unwrap_or_default();
            let cap = match method {
                "elicitation/create" => "elicitation",
                "sampling/createMessage" => "sampling",
                "roots/list" => "roots",
                other => {
                    return Err(ClientRequestError::Unsupported(format!(
                        "input request {key:?}: {other:?} is not one (elicitation/create, sampling/createMessage, roots/list)"
                    )))
                }
            };
            if self.capabilities.get(cap).is_none() {
                missing_caps.insert(cap.to_owned(), json!({}));
            }
        }
        if let Some((task, _)) = self.task.get() {
            // A task's input goes through its record (tasks/get shows it,
            // tasks/update answers it); its HTTP exchange is over.
            if !missing_caps.is_empty() {
                let names: Vec<&String> = missing_caps.keys().collect();
                return Err(ClientRequestError::Unsupported(format!(
                    "the client did not declare the capabilities these inputs need: {names:?}"
                )));
            }
            return self.tasks.ask(task, requests).await;
        }
        if !missing_caps.is_empty() {
            self.end_attempt(End::Capability(Value::Object(missing_caps)));
            return std::future::pending().await;
        }
        let mut have = Map::new();
        let mut missing = Map::new();
        for (key, r) in requests {
            match self.answers.get(key) {
                Some(a) => {
                    let method = r.get("method").and_then(Value::as_str).unwrap_or_default();
                    if let Err(why) = request_state::check_answer(method, a) {
                        self.end_attempt(End::Invalid(format!(
                            "inputResponses[{key:?}] is not a result of {method}: {why}"
                        )));
                        return std::future::pending().await;
                    }
                    have.insert(key.clone(), a.clone());
                }
                None => drop(missing.insert(key.clone(), r.clone())),
            }
        }
        lock(&self.used).extend(have.clone());
        if missing.is_empty() {
            return Ok(have);
        }
        self.end_attempt(End::Input(missing));
        std::future::pending().await
    }

    fn end_attempt(&self, end: End) {
        if let Some(tx) = lock(&self.end).take() {
            let _ = tx.send(end);
        }
    }
}

/// The answers a retry brings: those its `requestState` carries (verified:
/// sealed by this server, for this request and caller, unexpired), then its
/// `inputResponses` for keys the state does not answer. Both are taken out
/// of `params` (the handler asks for its answers; the state's digest leaves
/// them out). Either malformed, or a state that does not verify, is
/// `-32602`.
pub(crate) fn brought(
    key: &StateKey,
    caller: Option<&str>,
    method: &str,
    params: &mut Value,
) -> Result<Map<String, Value>, RpcError> {
    let (state, responses) = match params.as_object_mut() {
        Some(m) => (m.remove("requestState"), m.remove("inputResponses")),
        None => (None, None),
    };
    let b = Binding { caller, method, params };
    let mut answers = match state {
        None | Some(Value::Null) => Map::new(),
        Some(Value::String(t)) => request_state::open(key, &b, &t)
            .map_err(|why| RpcError::invalid_params(format!("requestState rejected: {why}")))?,
        Some(_) => return Err(RpcError::invalid_params("requestState must be a string")),
    };
    match responses {
        None | Some(Value::Null) => {}
        Some(Value::Object(r)) => {
            for (k, v) in r {
                if !v.is_object() {
                    return Err(RpcError::invalid_params(format!(
                        "inputResponses[{k:?}] must be an object (the client's result for that input request)"
                    )));
                }
                answers.entry(k).or_insert(v);
            }
        }
        Some(_) => return Err(RpcError::invalid_params("inputResponses must be an object")),
    }
    Ok(answers)
}

/// A running 2026-07-28 request, as its response sees it.
pub(crate) struct Running {
    /// The handler's notifications, serialized.
    pub(crate) notifications: QueueRx,
    /// The response message; dropped without a value when the request was
    /// cancelled (the client closed the response) or the server shut down.
    pub(crate) response: oneshot::Receiver<Value>,
    /// Cancelling it cancels the request.
    pub(crate) cancel: CancellationToken,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_declared_level_withholds_every_log_message() {
        for level in [None, Some("debug"), Some("emergency"), Some("loud")] {
            assert!(withholds(None, level), "{level:?}");
        }
    }

    #[test]
    fn a_declared_level_lets_its_level_and_above_through() {
        let min = Some(LogLevel::Warning);
        assert!(withholds(min, Some("info")));
        assert!(!withholds(min, Some("warning")));
        assert!(!withholds(min, Some("error")));
        assert!(withholds(min, Some("loud")), "not a level: cannot be shown to pass");
        assert!(withholds(min, None));
    }

    #[test]
    fn raw_messages_are_filtered_by_their_method_and_level() {
        let info =
            br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","data":1}}"#;
        let escaped = br#"{"params":{"data":"x","level":"err\u006fr"},"method":"notifications\/message","jsonrpc":"2.0"}"#;
        let other = br#"{"jsonrpc":"2.0","method":"notifications/progress","params":{"level":"info"}}"#;
        let no_level = br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":1}}"#;
        let not_json = b"not json";
        let at = |min, m: &[u8]| withholds_raw(min, m);
        assert!(at(None, info) && at(None, escaped) && at(None, no_level));
        assert!(at(Some(LogLevel::Warning), info));
        assert!(!at(Some(LogLevel::Warning), escaped), "escapes are the same method and level");
        assert!(!at(Some(LogLevel::Debug), info));
        assert!(at(Some(LogLevel::Debug), no_level));
        assert!(!at(None, other) && !at(None, not_json), "only log messages are filtered");
    }
}
