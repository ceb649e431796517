//! MCP 2026-07-28 requests (`docs/SPEC.md` §5.4): which era a request is
//! of, the per-request declarations in `_meta`, `server/discover`, and a
//! request run without a session. Nothing here knows about HTTP; the
//! header rules and the response's form are `http/modern.rs`'s.
//!
//! A 2026-07-28 request has no session: its notifications go on its own
//! response stream only, through an [`Exchange`] (a bounded channel to the
//! response, no ring: that revision's streams are not resumable), and it
//! ends with its response. Input it needs from the client (elicitation,
//! sampling, roots) comes by input-required results (SEP-2322): a
//! handler's ask ends the attempt with one, naming what it needs and
//! sealing what earlier rounds answered in `requestState`; the client's
//! retry runs the handler again, and the same asks are answered from it.

use crate::app::AppState;
use crate::host::{RequestContext, Via};
use crate::vocab::change::{Announcer, Change};
use crate::vocab::config::{MODERN_VERSIONS, SUPPORTED_VERSIONS};
use crate::vocab::error::{ClientRequestError, SendError};
use crate::vocab::jsonrpc::{self, code, Incoming, RpcError};
use crate::vocab::log_level::LogLevel;
use crate::vocab::request_state::{self, Binding};
use bytes::Bytes;
use gapless::Seq;
use serde_json::{json, Map, Value};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;

/// `_meta` key of the request's protocol version.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities.
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the request's log level (no key: no log messages).
const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key naming the server.
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// How many notifications a request's response stream holds before the
/// handler's next one waits for the client to read.
const EXCHANGE_CAPACITY: usize = 64;

/// Methods of the 2025 revisions that 2026-07-28 removed: answered
/// `-32601` like any method not served.
const REMOVED: [&str; 5] =
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// Methods whose results carry the caching hints (`ttlMs`, `cacheScope`).
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The bound on 2026-07-28 requests in flight: in all, and per client.
#[derive(Debug)]
pub(crate) struct Inflight {
    total: Arc<tokio::sync::Semaphore>,
    per_client: std::sync::Mutex<HashMap<String, usize>>,
    max: usize,
    max_per_client: usize,
}

/// One admitted request's place; given back when dropped (when the request
/// and its response stream have ended).
#[derive(Debug)]
pub(crate) struct Permit {
    _total: tokio::sync::OwnedSemaphorePermit,
    client: Option<(Arc<Inflight>, String)>,
}

impl Permit {
    /// The client it was admitted for (identity, else peer address).
    pub(crate) fn client_key(&self) -> Option<String> {
        self.client.as_ref().map(|(_, k)| k.clone())
    }
}

impl Drop for Permit {
    fn drop(&mut self) {
        if let Some((inflight, key)) = &self.client {
            let mut per = crate::vocab::sync::lock(&inflight.per_client);
            if let Some(n) = per.get_mut(key) {
                *n -= 1;
                if *n == 0 {
                    per.remove(key);
                }
            }
        }
    }
}

impl Inflight {
    pub(crate) fn new(max: usize, max_per_client: usize) -> Arc<Self> {
        Arc::new(Inflight {
            total: Arc::new(tokio::sync::Semaphore::new(max)),
            per_client: Default::default(),
            max,
            max_per_client,
        })
    }

    /// A place for a request of `client`, or the error that refuses it.
    pub(crate) fn admit(self: &Arc<Self>, client: Option<String>) -> Result<Permit, RpcError> {
        let full = || {
            RpcError::new(
                code::TOO_MANY_IN_FLIGHT,
                format!(
                    "too many MCP 2026-07-28 requests in flight (at most {} in all, {} per client); retry when one has finished",
                    self.max, self.max_per_client
                ),
            )
        };
        let total = Arc::clone(&self.total).try_acquire_owned().map_err(|_| full())?;
        let client = match client {
            None => None,
            Some(key) => {
                let mut per = crate::vocab::sync::lock(&self.per_client);
                let n = per.entry(key.clone()).or_insert(0);
                if *n >= self.max_per_client {
                    return Err(full());
                }
                *n += 1;
                Some((Arc::clone(self), key))
            }
        };
        Ok(Permit { _total: total, client })
    }
}

/// A tool parameter mirrored into a request header (`x-mcp-header`,
/// SEP-2243): `Mcp-Param-{name}` carries the value at `path` of the
/// call's arguments.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Mirror {
    /// The header's name, lower case (`mcp-param-region`).
    pub(crate) header: String,
    /// The property path inside `arguments`.
    pub(crate) path: Vec<String>,
}

/// Every `x-mcp-header` annotation of a `tools/list` result's tools, by
/// tool name: on properties reached through `properties` chains from the
/// input schema's root. An annotation whose name is not a header token is
/// left out (a client rejects such a tool).
fn mirrors_of(tools: &Value) -> HashMap<String, Vec<Mirror>> {
    fn walk(schema: &Value, path: &mut Vec<String>, out: &mut Vec<Mirror>) {
        let Some(props) = schema.get("properties").and_then(Value::as_object) else { return };
        for (k, def) in props {
            path.push(k.clone());
            if let Some(name) = def.get("x-mcp-header").and_then(Value::as_str) {
                let token = !name.is_empty()
                    && name.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
                if token {
                    out.push(Mirror {
                        header: format!("mcp-param-{}", name.to_ascii_lowercase()),
                        path: path.clone(),
                    });
                }
            }
            walk(def, path, out);
            path.pop();
        }
    }
    let mut map = HashMap::new();
    for t in tools.as_array().into_iter().flatten() {
        let Some(name) = t.get("name").and_then(Value::as_str) else { continue };
        let mut out = vec![];
        if let Some(schema) = t.get("inputSchema") {
            walk(schema, &mut vec![], &mut out);
        }
        map.insert(name.to_owned(), out);
    }
    map
}

/// Each tool's mirrored parameters, by tool name.
type Mirrors = Arc<HashMap<String, Vec<Mirror>>>;

/// What the mirrored-parameter cache holds: the tools as last listed, at
/// which count of tool-list announcements, and when.
#[derive(Debug, Default)]
pub(crate) struct MirrorCache {
    tools: Option<(u64, std::time::Instant, Mirrors)>,
}

/// The mirrored parameters of `tool`, from the application's own
/// `tools/list` (every page), cached until a tool-list change is announced
/// or a tool not in it is called (listed again at most once a second).
pub(crate) async fn mirrors(state: &AppState, tool: &str) -> Vec<Mirror> {
    let now = std::time::Instant::now();
    let gen = state.changes.tool_changes();
    if let Some((g, at, map)) = crate::vocab::sync::lock(&state.mirrors).tools.clone() {
        let fresh = g == gen
            && (map.contains_key(tool) || now.duration_since(at) < std::time::Duration::from_secs(1));
        if fresh {
            return map.get(tool).cloned().unwrap_or_default();
        }
    }
    let mut tools = vec![];
    let mut cursor: Option<Value> = None;
    for _ in 0..100 {
        let params = match &cursor {
            Some(c) => json!({"cursor": c}),
            None => json!({}),
        };
        let Ok(page) = state.host.handle("tools/list".into(), params, internal_context(state)).await else {
            // Not listed: nothing to check against, nothing cached.
            return vec![];
        };
        tools.extend(page.get("tools").and_then(Value::as_array).cloned().unwrap_or_default());
        cursor = page.get("nextCursor").filter(|c| !c.is_null()).cloned();
        if cursor.is_none() {
            break;
        }
    }
    let map = Arc::new(mirrors_of(&Value::Array(tools)));
    let found = map.get(tool).cloned().unwrap_or_default();
    crate::vocab::sync::lock(&state.mirrors).tools = Some((gen, now, map));
    found
}

/// A context for the transport's own calls into the application (its tool
/// list): a 2026-07-28 request of no client, whose notifications go nowhere.
fn internal_context(state: &AppState) -> RequestContext {
    let (tx, _) = mpsc::channel(1);
    let (end, _) = oneshot::channel();
    RequestContext {
        progress_token: None,
        via: Via::Exchange(Exchange::new(
            state,
            Declared { version: MODERN_VERSIONS[0].to_owned(), capabilities: json!({}), log_level: None },
            "tools/list",
            tx,
            Map::new(),
            end,
            Origin { caller: None, client: None, work: CancellationToken::new() },
        )),
        request_id: json!("gapless:mirrored-parameters"),
        cancel: CancellationToken::new(),
    }
}

/// What a listen stream asked for, as far as the application serves it.
#[derive(Clone, Debug, Default, PartialEq)]
struct Filter {
    tools: bool,
    prompts: bool,
    resources: bool,
    uris: Vec<String>,
    /// Tasks whose status changes to send (`notifications/tasks`), as
    /// asked; the acknowledgment names those found for the caller.
    task_ids: Vec<String>,
}

/// Most task ids one listen stream may watch.
const MAX_LISTEN_TASKS: usize = 64;

impl Filter {
    /// The request's `notifications`, less what `caps` (the application's)
    /// does not offer: list changes need `listChanged`, resource updates
    /// `resources.subscribe`.
    fn of(params: &Value, caps: &Value) -> Result<Filter, RpcError> {
        let n = match params.get("notifications") {
            None | Some(Value::Null) => return Ok(Filter::default()),
            Some(n @ Value::Object(_)) => n,
            Some(_) => return Err(RpcError::invalid_params("notifications must be an object")),
        };
        let flag = |k: &str| -> Result<bool, RpcError> {
            match n.get(k) {
                None | Some(Value::Null) => Ok(false),
                Some(Value::Bool(b)) => Ok(*b),
                Some(_) => Err(RpcError::invalid_params(format!("notifications.{k} must be a boolean"))),
            }
        };
        let offers = |kind: &str, what: &str| caps.get(kind).and_then(|c| c.get(what)) == Some(&json!(true));
        let uris = match n.get("resourceSubscriptions") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) => {
                a.iter().map(|u| u.as_str().map(str::to_owned)).collect::<Option<Vec<_>>>().ok_or_else(
                    || RpcError::invalid_params("notifications.resourceSubscriptions must be strings"),
                )?
            }
            Some(_) => {
                return Err(RpcError::invalid_params("notifications.resourceSubscriptions must be an array"))
            }
        };
        let task_ids = match n.get("taskIds") {
            None | Some(Value::Null) => vec![],
            Some(Value::Array(a)) if a.len() <= MAX_LISTEN_TASKS => a
                .iter()
                .map(|u| u.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| RpcError::invalid_params("notifications.taskIds must be strings"))?,
            Some(Value::Array(_)) => {
                return Err(RpcError::invalid_params(format!(
                    "notifications.taskIds may name at most {MAX_LISTEN_TASKS} tasks"
                )))
            }
            Some(_) => return Err(RpcError::invalid_params("notifications.taskIds must be an array")),
        };
        Ok(Filter {
            task_ids: if crate::tasks::declares(caps) { task_ids } else { vec![] },
            tools: flag("toolsListChanged")? && offers("tools", "listChanged"),
            prompts: flag("promptsListChanged")? && offers("prompts", "listChanged"),
            resources: flag("resourcesListChanged")? && offers("resources", "listChanged"),
            uris: if offers("resources", "subscribe") { uris } else { vec![] },
        })
    }

    /// The acknowledged subset, as the wire has it.
    fn to_json(&self) -> Value {
        let mut m = Map::new();
        for (k, on) in [
            ("toolsListChanged", self.tools),
            ("promptsListChanged", self.prompts),
            ("resourcesListChanged", self.resources),
        ] {
            if on {
                m.insert(k.into(), json!(true));
            }
        }
        if !self.uris.is_empty() {
            m.insert("resourceSubscriptions".into(), json!(self.uris));
        }
        if !self.task_ids.is_empty() {
            m.insert("taskIds".into(), json!(self.task_ids));
        }
        Value::Object(m)
    }

    /// The notification for `c`, if this stream listens to it.
    fn pass(&self, c: &Change, id: &Value) -> Option<Value> {
        let (method, mut params) = match c {
            Change::ToolsListChanged if self.tools => ("notifications/tools/list_changed", json!({})),
            Change::PromptsListChanged if self.prompts => ("notifications/prompts/list_changed", json!({})),
            Change::ResourcesListChanged if self.resources => {
                ("notifications/resources/list_changed", json!({}))
            }
            Change::ResourceUpdated(u) if self.uris.contains(u) => {
                ("notifications/resources/updated", json!({"uri": u}))
            }
            _ => return None,
        };
        params["_meta"] = json!({META_SUBSCRIPTION: id});
        Some(jsonrpc::notification(method, params))
    }

    /// One of every change this stream listens to (after it fell behind).
    fn everything(&self) -> Vec<Change> {
        let mut v = vec![];
        if self.tools {
            v.push(Change::ToolsListChanged);
        }
        if self.prompts {
            v.push(Change::PromptsListChanged);
        }
        if self.resources {
            v.push(Change::ResourcesListChanged);
        }
        v.extend(self.uris.iter().cloned().map(Change::ResourceUpdated));
        v
    }
}

/// `_meta` key naming the subscription a listen stream's message is of.
const META_SUBSCRIPTION: &str = "io.modelcontextprotocol/subscriptionId";

/// Serves `subscriptions/listen` (request `id`): the acknowledgment first,
/// then the changes announced from now on that the filter lets through,
/// until the client closes the stream (which drops `tx`) or the server
/// shuts down (a graceful response ends it).
#[allow(clippy::too_many_arguments)]
fn listen(
    state: &AppState,
    id: Value,
    mut filter: Filter,
    tx: mpsc::Sender<Bytes>,
    reply: oneshot::Sender<Value>,
    server_info: Value,
    permit: Permit,
    caller: Option<String>,
) {
    let mut changes = state.changes.subscribe();
    let shutdown = state.shutdown.clone();
    let tasks = Arc::clone(&state.tasks);
    tokio::spawn(async move {
        let _permit = permit;
        // Tasks: those the caller may see, each sent as it is now, then on
        // every change of its status (polled: a change may be another
        // node's), until it is terminal or gone.
        let mut watched = crate::tasks::Watched::new(tasks, caller);
        filter.task_ids = watched.agree(&filter.task_ids).await;
        let mut poll = tokio::time::interval(crate::tasks::LISTEN_POLL);
        poll.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        let ack = jsonrpc::notification(
            "notifications/subscriptions/acknowledged",
            json!({"_meta": {META_SUBSCRIPTION: id}, "notifications": filter.to_json()}),
        );
        if tx.send(Bytes::from(ack.to_string())).await.is_err() {
            return;
        }
        use tokio::sync::broadcast::error::{RecvError, TryRecvError};
        let mut last = false;
        while !last {
            let batch = tokio::select! {
                c = changes.recv() => match c {
                    Ok(c) => vec![c],
                    Err(RecvError::Lagged(_)) => filter.everything(),
                    Err(RecvError::Closed) => break,
                },
                _ = tx.closed() => return,
                _ = poll.tick(), if !watched.is_empty() => {
                    for task in watched.ids() {
                        let Some(mut t) = watched.change(&task).await else { continue };
                        t.insert("_meta".into(), json!({META_SUBSCRIPTION: id}));
                        let n = jsonrpc::notification("notifications/tasks", Value::Object(t));
                        if tx.send(Bytes::from(n.to_string())).await.is_err() {
                            return;
                        }
                    }
                    vec![]
                }
                _ = shutdown.cancelled() => {
                    // What was announced before the shutdown still goes out
                    // (at most the channel's capacity), then the end.
                    last = true;
                    let mut rest = vec![];
                    loop {
                        match changes.try_recv() {
                            Ok(c) => rest.push(c),
                            Err(TryRecvError::Lagged(_)) => rest.extend(filter.everything()),
                            Err(_) => break rest,
                        }
                    }
                }
            };
            for c in &batch {
                if let Some(n) = filter.pass(c, &id) {
                    if tx.send(Bytes::from(n.to_string())).await.is_err() {
                        return;
                    }
                }
            }
        }
        let end = complete("subscriptions/listen", json!({"_meta": {META_SUBSCRIPTION: id}}), server_info);
        let _ = reply.send(jsonrpc::response(&id, Ok(end)));
    });
}

/// Which protocol generation a message is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// The 2025 revisions (and 2024-11-05): `initialize`, sessions,
    /// resumable streams.
    Legacy,
    /// 2026-07-28: every request declares its version in `_meta`.
    Modern,
}

/// Whether `v` names a revision of the session era.
fn is_legacy(v: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&v) || v == crate::vocab::config::LEGACY_VERSION
}

/// The era of a message POSTed with `header` as its `MCP-Protocol-Version`:
/// modern when its `_meta` declares a version that is not of the session
/// era (an unknown one included: it is answered with the versions served),
/// or, without that declaration, when the header names a modern version.
/// Anything else, `initialize` without either among it, is of the session
/// era and served as before.
pub(crate) fn era(header: Option<&str>, msg: &Incoming) -> Era {
    let params = match msg {
        Incoming::Request { params, .. } | Incoming::Notification { params, .. } => params,
        Incoming::Response { .. } => return Era::Legacy,
    };
    match params.get("_meta").and_then(|m| m.get(META_VERSION)).and_then(Value::as_str) {
        Some(v) if is_legacy(v) => Era::Legacy,
        Some(_) => Era::Modern,
        None if header.is_some_and(|h| MODERN_VERSIONS.contains(&h.trim())) => Era::Modern,
        None => Era::Legacy,
    }
}

/// What a 2026-07-28 request declares about itself in `_meta`.
#[derive(Clone, Debug)]
pub(crate) struct Declared {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub(crate) version: String,
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub(crate) capabilities: Value,
    /// `io.modelcontextprotocol/logLevel`; `None`: no log messages.
    pub(crate) log_level: Option<LogLevel>,
}

/// Reads the declarations every 2026-07-28 request carries; a missing or
/// ill-typed one is `-32602` (answered 400 over HTTP). `clientInfo` is
/// optional (a SHOULD) and not read.
pub(crate) fn declared(params: &Value) -> Result<Declared, RpcError> {
    let Some(meta) = params.get("_meta") else {
        return Err(RpcError::invalid_params(
            "params._meta is required: it declares the request's protocol version and client capabilities",
        ));
    };
    let Some(meta) = meta.as_object() else {
        return Err(RpcError::invalid_params("params._meta must be an object"));
    };
    let version = match meta.get(META_VERSION) {
        Some(Value::String(v)) => v.clone(),
        Some(_) => return Err(RpcError::invalid_params(format!("_meta[{META_VERSION:?}] must be a string"))),
        None => return Err(RpcError::invalid_params(format!("_meta[{META_VERSION:?}] is required"))),
    };
    let capabilities = match meta.get(META_CAPABILITIES) {
        Some(c @ Value::Object(_)) => c.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(format!("_meta[{META_CAPABILITIES:?}] must be an object")))
        }
        None => return Err(RpcError::invalid_params(format!("_meta[{META_CAPABILITIES:?}] is required"))),
    };
    let log_level = match meta.get(META_LOG_LEVEL) {
        None | Some(Value::Null) => None,
        Some(l) => Some(l.as_str().and_then(LogLevel::parse).ok_or_else(|| {
            RpcError::invalid_params(format!("_meta[{META_LOG_LEVEL:?}] must be one of the MCP log levels"))
        })?),
    };
    Ok(Declared { version, capabilities, log_level })
}

/// `UnsupportedProtocolVersionError` for `requested`, listing every version
/// served (both eras: a client that can speak a 2025 revision falls back
/// to `initialize`).
pub(crate) fn unsupported_version(requested: &str) -> RpcError {
    RpcError {
        code: code::UNSUPPORTED_PROTOCOL_VERSION,
        message: format!("Unsupported protocol version {requested:?}"),
        data: Some(json!({"supported": all_versions(), "requested": requested})),
    }
}

/// Every protocol version served, newest first.
fn all_versions() -> Vec<&'static str> {
    MODERN_VERSIONS.iter().chain(SUPPORTED_VERSIONS.iter()).copied().collect()
}

fn discover(state: &AppState) -> Value {
    let mut r = json!({
        "supportedVersions": all_versions(),
        "capabilities": state.host.capabilities(),
    });
    if let Some(i) = state.host.instructions() {
        r["instructions"] = json!(i);
    }
    r
}

/// Completes a result for a 2026-07-28 client: `resultType` (every result
/// has one), the caching hints on the methods that have them (by default
/// "stale at once, this caller only": `ttlMs` 0, `cacheScope` private), and
/// the server's identity in `_meta`. What the application set itself stays.
fn complete(method: &str, mut result: Value, server_info: Value) -> Value {
    let Some(m) = result.as_object_mut() else { return result };
    m.entry("resultType").or_insert_with(|| json!("complete"));
    if CACHEABLE.contains(&method) {
        m.entry("ttlMs").or_insert_with(|| json!(0));
        m.entry("cacheScope").or_insert_with(|| json!("private"));
    }
    if let Value::Object(meta) = m.entry("_meta").or_insert_with(|| Value::Object(Map::new())) {
        meta.entry(META_SERVER_INFO).or_insert(server_info);
    }
    result
}

/// How an attempt at a 2026-07-28 request ends early, from inside its
/// handler.
enum End {
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
    tx: mpsc::Sender<Bytes>,
    sent: AtomicU64,
    /// Answers the retry brought: its verified `requestState`'s, then its
    /// `inputResponses`.
    answers: Map<String, Value>,
    /// Answers this attempt used (carried into the next `requestState`).
    used: std::sync::Mutex<Map<String, Value>>,
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
    task: std::sync::OnceLock<(String, Map<String, Value>)>,
    /// Set by the first `create_task` (so that two cannot race).
    creating: std::sync::atomic::AtomicBool,
    tasks: Arc<crate::tasks::Tasks>,
}

/// Who made a request and how its handler is stopped.
pub(crate) struct Origin {
    pub(crate) caller: Option<String>,
    pub(crate) client: Option<String>,
    pub(crate) work: CancellationToken,
}

/// The methods whose requests may be answered with an input-required
/// result.
const TAKES_INPUT: [&str; 3] = ["tools/call", "prompts/get", "resources/read"];

impl Exchange {
    /// The exchange of a request of `method` with `declared` declarations,
    /// its notifications going to `tx`, the retry's `answers` for its asks,
    /// and `end` told if an ask ends the attempt.
    fn new(
        state: &AppState,
        declared: Declared,
        method: &str,
        tx: mpsc::Sender<Bytes>,
        answers: Map<String, Value>,
        end: oneshot::Sender<End>,
        origin: Origin,
    ) -> Arc<Self> {
        Arc::new(Exchange {
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
            changes: state.changes.clone(),
            caller: origin.caller,
            client: origin.client,
            work: origin.work,
            task: std::sync::OnceLock::new(),
            creating: Default::default(),
            tasks: Arc::clone(&state.tasks),
        })
    }

    /// Makes this request a task (the tasks extension): stores its record,
    /// then ends the HTTP exchange with the `CreateTaskResult` while the
    /// handler goes on. Only a `tools/call` whose client declared the
    /// extension, once.
    pub(crate) async fn create_task(
        &self,
        opts: &crate::tasks::TaskOptions,
    ) -> Result<String, crate::tasks::TaskError> {
        use crate::tasks::TaskError;
        if self.method != "tools/call" {
            return Err(TaskError::NotDeclared(format!("a {} request cannot become a task", self.method)));
        }
        if !crate::tasks::declares(&self.capabilities) {
            return Err(TaskError::NotDeclared(format!(
                "the client did not declare the {} extension on this request",
                crate::tasks::EXTENSION
            )));
        }
        // One creation per request, claimed before anything awaits.
        if self.task.get().is_some() || self.creating.swap(true, Ordering::AcqRel) {
            return Err(TaskError::NotDeclared("this request is a task already".into()));
        }
        let ended = || TaskError::NotDeclared("this attempt has ended (it asked for input)".into());
        if crate::vocab::sync::lock(&self.end).is_none() {
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
        let mut end = crate::vocab::sync::lock(&self.end);
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
            self.finish(End::Capability(Value::Object(missing_caps)));
            return std::future::pending().await;
        }
        let mut have = Map::new();
        let mut missing = Map::new();
        for (key, r) in requests {
            match self.answers.get(key) {
                Some(a) => {
                    let method = r.get("method").and_then(Value::as_str).unwrap_or_default();
                    if let Err(why) = request_state::check_answer(method, a) {
                        self.finish(End::Invalid(format!(
                            "inputResponses[{key:?}] is not a result of {method}: {why}"
                        )));
                        return std::future::pending().await;
                    }
                    have.insert(key.clone(), a.clone());
                }
                None => drop(missing.insert(key.clone(), r.clone())),
            }
        }
        crate::vocab::sync::lock(&self.used).extend(have.clone());
        if missing.is_empty() {
            return Ok(have);
        }
        self.finish(End::Input(missing));
        std::future::pending().await
    }

    fn finish(&self, end: End) {
        if let Some(tx) = crate::vocab::sync::lock(&self.end).take() {
            let _ = tx.send(end);
        }
    }
}

/// The answers a retry brings: those its `requestState` carries (verified:
/// sealed by this server, for this request and caller, unexpired), then its
/// `inputResponses` for keys the state does not answer. Either malformed,
/// or a state that does not verify, is `-32602`.
fn brought(state: &AppState, b: &Binding<'_>) -> Result<Map<String, Value>, RpcError> {
    let mut answers = match b.params.get("requestState") {
        None | Some(Value::Null) => Map::new(),
        Some(Value::String(t)) => request_state::open(&state.input_key, b, t)
            .map_err(|why| RpcError::invalid_params(format!("requestState rejected: {why}")))?,
        Some(_) => return Err(RpcError::invalid_params("requestState must be a string")),
    };
    match b.params.get("inputResponses") {
        None | Some(Value::Null) => {}
        Some(Value::Object(r)) => {
            for (k, v) in r {
                if !v.is_object() {
                    return Err(RpcError::invalid_params(format!(
                        "inputResponses[{k:?}] must be an object (the client's result for that input request)"
                    )));
                }
                answers.entry(k.clone()).or_insert_with(|| v.clone());
            }
        }
        Some(_) => return Err(RpcError::invalid_params("inputResponses must be an object")),
    }
    Ok(answers)
}

/// A running 2026-07-28 request, as its response sees it.
pub(crate) struct Running {
    /// The handler's notifications, serialized.
    pub(crate) notifications: mpsc::Receiver<Bytes>,
    /// The response message; dropped without a value when the request was
    /// cancelled (the client closed the response) or the server shut down.
    pub(crate) response: oneshot::Receiver<Value>,
    /// Cancelling it cancels the request.
    pub(crate) cancel: CancellationToken,
}

/// Starts a checked 2026-07-28 request of `caller`: `server/discover` and
/// the removed methods here, anything else by the application, whose result
/// is completed for this revision. An attempt its handler ends by asking
/// for input is answered with an input-required result.
pub(crate) fn start(
    state: &AppState,
    id: Value,
    method: String,
    params: Value,
    declared: Declared,
    caller: Option<String>,
    permit: Permit,
) -> Running {
    let (tx, notifications) = mpsc::channel(EXCHANGE_CAPACITY);
    let (reply, response) = oneshot::channel();
    let cancel = CancellationToken::new();
    let server_info = state.host.server_info();
    let binding = Binding { caller: caller.as_deref(), method: &method, params: &params };
    let early: Option<Result<Value, RpcError>> = if method == "server/discover" {
        Some(Ok(discover(state)))
    } else if REMOVED.contains(&method.as_str()) {
        Some(Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("method not found: {method} is not a method of MCP {}", declared.version),
        )))
    } else {
        None
    };
    if method == "subscriptions/listen" && early.is_none() {
        match Filter::of(&params, &state.host.capabilities()) {
            // Task status notifications need the extension declared.
            Ok(f) if !f.task_ids.is_empty() && !crate::tasks::declares(&declared.capabilities) => {
                drop(reply.send(jsonrpc::response(&id, Err(crate::tasks::required()))))
            }
            Ok(filter) => listen(state, id, filter, tx, reply, server_info, permit, caller),
            Err(e) => drop(reply.send(jsonrpc::response(&id, Err(e)))),
        }
        return Running { notifications, response, cancel };
    }
    if method.starts_with("tasks/") && early.is_none() {
        // The tasks extension's own methods: served from the task store.
        let tasks = Arc::clone(&state.tasks);
        let serves = crate::tasks::declares(&state.host.capabilities());
        tokio::spawn(async move {
            let _permit = permit;
            let outcome =
                tasks.serve(&method, &params, &declared.capabilities, caller.as_deref(), serves).await;
            let _ = reply.send(jsonrpc::response(&id, outcome.map(|r| complete(&method, r, server_info))));
        });
        return Running { notifications, response, cancel };
    }
    // The answers the retry brought for the handler's asks, verified; an
    // application that runs its own rounds gets `requestState` untouched.
    let seals = state.host.seals_request_state();
    let verified = || if seals { brought(state, &binding).map_err(Err) } else { Ok(Map::new()) };
    let answers = match early.map_or_else(verified, Err) {
        Ok(a) => a,
        Err(outcome) => {
            let _ = reply.send(jsonrpc::response(&id, outcome.map(|r| complete(&method, r, server_info))));
            return Running { notifications, response, cancel };
        }
    };
    let (end_tx, end_rx) = oneshot::channel();
    // The handler's own cancellation: the response's until the request
    // becomes a task, the task's after (the response is over by then).
    let work = CancellationToken::new();
    let origin = Origin { caller: caller.clone(), client: permit.client_key(), work: work.clone() };
    let exchange = Exchange::new(state, declared, &method, tx, answers, end_tx, origin);
    let ctx = RequestContext {
        progress_token: params.get("_meta").and_then(|m| m.get("progressToken")).cloned(),
        via: Via::Exchange(Arc::clone(&exchange)),
        request_id: id.clone(),
        cancel: work.clone(),
    };
    let fut = state.host.handle(method.clone(), params.clone(), ctx);
    let (stop, shutdown) = (cancel.clone(), state.shutdown.clone());
    let tasks = Arc::clone(&state.tasks);
    let (key, ttl) = (state.input_key.clone(), state.config.request_state_ttl.as_millis() as u64);
    let span = tracing::info_span!("request", id = %id, method = %method, era = "2026-07-28");
    tokio::spawn(tracing::Instrument::instrument(
        async move {
            let permit = permit;
            // Resolves only if the handler ends its attempt early (its
            // sender is dropped with the exchange otherwise).
            let ended = async move {
                match end_rx.await {
                    Ok(e) => e,
                    Err(_) => std::future::pending().await,
                }
            };
            let mut fut = fut;
            let outcome = tokio::select! {
                biased;
                r = &mut fut => r,
                e = ended => match e {
                    End::Task(created) => {
                        // Stored already: the client may poll it from now.
                        let _ = reply.send(jsonrpc::response(&id, Ok(complete(&method, Value::Object(created), server_info))));
                        drop(permit);
                        let Some((task, _)) = exchange.task.get().cloned() else { return };
                        drop(exchange);
                        tasks.run(&task, fut, shutdown).await;
                        return;
                    }
                    End::Input(missing) => {
                        let b = Binding { caller: caller.as_deref(), method: &method, params: &params };
                        let used = crate::vocab::sync::lock(&exchange.used).clone();
                        Ok(json!({
                            "resultType": "input_required",
                            "inputRequests": missing,
                            "requestState": request_state::seal(&key, &b, &used, ttl),
                        }))
                    }
                    End::Capability(caps) => Err(RpcError::missing_client_capability(caps)),
                    End::Invalid(why) => Err(RpcError::invalid_params(why)),
                },
                // Cancelled (the client closed the response) or shutting
                // down: no response (MCP cancellation).
                _ = stop.cancelled() => return work.cancel(),
                _ = shutdown.cancelled() => return work.cancel(),
            };
            if let Some((task, created)) = exchange.task.get().cloned() {
                // The handler became a task and ended before its response
                // went out: the response is still the task's handle, and
                // the outcome the task's.
                let _ = reply
                    .send(jsonrpc::response(&id, Ok(complete(&method, Value::Object(created), server_info))));
                tasks.settle(&task, outcome).await;
                return;
            }
            let _ = reply.send(jsonrpc::response(&id, outcome.map(|r| complete(&method, r, server_info))));
        },
        span,
    ));
    Running { notifications, response, cancel }
}

/// The HTTP status of a 2026-07-28 response message: 404 for a method not
/// served, 400 for the revision's request errors (header mismatch, a
/// capability the client did not declare, a version not served), else 200
/// (an application's other errors travel in the body, as results do).
pub(crate) fn status_of(response: &Value) -> u16 {
    match response.get("error").and_then(|e| e.get("code")).and_then(Value::as_i64) {
        Some(code::METHOD_NOT_FOUND) => 404,
        Some(
            code::HEADER_MISMATCH | code::MISSING_CLIENT_CAPABILITY | code::UNSUPPORTED_PROTOCOL_VERSION,
        ) => 400,
        _ => 200,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(params: Value) -> Incoming {
        Incoming::Request { id: json!(1), method: "tools/list".into(), params }
    }

    #[test]
    fn the_era_is_read_from_meta_then_from_the_header() {
        let meta = |v: &str| request(json!({"_meta": {META_VERSION: v}}));
        assert_eq!(era(None, &meta("2026-07-28")), Era::Modern);
        // An unknown version is answered by this revision's rules (with the
        // versions served); a 2025 one is the session era's.
        assert_eq!(era(Some("2026-07-28"), &meta("v999")), Era::Modern);
        assert_eq!(era(Some("2026-07-28"), &meta("2025-11-25")), Era::Legacy);
        assert_eq!(era(Some(" 2026-07-28 "), &request(json!({}))), Era::Modern);
        assert_eq!(era(Some("2025-06-18"), &request(json!({}))), Era::Legacy);
        assert_eq!(era(Some("v999"), &request(Value::Null)), Era::Legacy);
        assert_eq!(era(None, &request(Value::Null)), Era::Legacy);
        let response = Incoming::Response { id: json!(1), outcome: Ok(json!({})) };
        assert_eq!(era(Some("2026-07-28"), &response), Era::Legacy);
    }

    #[test]
    fn declarations_are_checked() {
        let ok = declared(&json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {"sampling": {}}, META_LOG_LEVEL: "warning"}})).unwrap();
        assert_eq!((ok.version.as_str(), ok.log_level), ("2026-07-28", Some(LogLevel::Warning)));
        assert_eq!(ok.capabilities, json!({"sampling": {}}));
        for bad in [
            json!({}),
            json!({"_meta": 1}),
            json!({"_meta": {META_CAPABILITIES: {}}}),
            json!({"_meta": {META_VERSION: 7, META_CAPABILITIES: {}}}),
            json!({"_meta": {META_VERSION: "2026-07-28"}}),
            json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: []}}),
            json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_LOG_LEVEL: "loud"}}),
        ] {
            assert_eq!(declared(&bad).unwrap_err().code, code::INVALID_PARAMS, "{bad}");
        }
    }

    #[test]
    fn results_are_completed_without_overriding_the_application() {
        let info = json!({"name": "s", "version": "1"});
        let r = complete("tools/list", json!({"tools": []}), info.clone());
        assert_eq!(
            r,
            json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                   "_meta": {META_SERVER_INFO: info}})
        );
        let own = json!({"tools": [], "ttlMs": 60000, "cacheScope": "public", "resultType": "complete",
                         "_meta": {META_SERVER_INFO: {"name": "app", "version": "2"}, "x": 1}});
        assert_eq!(complete("tools/list", own.clone(), info.clone()), own);
        let call = complete("tools/call", json!({"content": []}), info.clone());
        assert_eq!((call.get("ttlMs"), &call["resultType"]), (None, &json!("complete")));
    }

    #[test]
    fn a_listen_filter_is_what_was_asked_and_is_offered() {
        let caps = json!({"tools": {"listChanged": true}, "prompts": {"listChanged": false}, "resources": {"subscribe": true}});
        let asked = json!({"notifications": {"toolsListChanged": true, "promptsListChanged": true,
            "resourcesListChanged": true, "resourceSubscriptions": ["a://x"]}});
        let f = Filter::of(&asked, &caps).unwrap();
        assert_eq!(
            f,
            Filter {
                tools: true,
                prompts: false,
                resources: false,
                uris: vec!["a://x".into()],
                task_ids: vec![]
            }
        );
        assert_eq!(f.to_json(), json!({"toolsListChanged": true, "resourceSubscriptions": ["a://x"]}));
        let id = json!(7);
        let n = f.pass(&Change::ToolsListChanged, &id).unwrap();
        assert_eq!(n["params"]["_meta"][META_SUBSCRIPTION], 7);
        assert!(f.pass(&Change::PromptsListChanged, &id).is_none(), "not offered");
        assert!(f.pass(&Change::ResourceUpdated("a://y".into()), &id).is_none(), "not asked");
        assert_eq!(f.pass(&Change::ResourceUpdated("a://x".into()), &id).unwrap()["params"]["uri"], "a://x");
        assert_eq!(f.everything(), [Change::ToolsListChanged, Change::ResourceUpdated("a://x".into())]);
        assert_eq!(Filter::of(&json!({}), &caps).unwrap(), Filter::default());
        for bad in [
            json!({"notifications": 1}),
            json!({"notifications": {"toolsListChanged": "yes"}}),
            json!({"notifications": {"resourceSubscriptions": [1]}}),
            json!({"notifications": {"taskIds": "a"}}),
            json!({"notifications": {"taskIds": [1]}}),
            json!({"notifications": {"taskIds": vec!["a"; MAX_LISTEN_TASKS + 1]}}),
        ] {
            assert_eq!(Filter::of(&bad, &caps).unwrap_err().code, code::INVALID_PARAMS);
        }
    }

    #[test]
    fn mirrored_parameters_are_read_from_the_tools_schemas() {
        let tools = json!([
            {"name": "a", "inputSchema": {"type": "object", "properties": {
                "region": {"type": "string", "x-mcp-header": "Region"},
                "opts": {"type": "object", "properties": {"n": {"type": "integer", "x-mcp-header": "N"}}},
                "bad": {"type": "string", "x-mcp-header": "no spaces"},
                "plain": {"type": "string"}}}},
            {"name": "b", "inputSchema": {"type": "object"}}
        ]);
        let m = mirrors_of(&tools);
        assert_eq!(
            m["a"],
            [
                Mirror { header: "mcp-param-n".into(), path: vec!["opts".into(), "n".into()] },
                Mirror { header: "mcp-param-region".into(), path: vec!["region".into()] },
            ]
        );
        assert!(m["b"].is_empty());
    }

    #[test]
    fn statuses() {
        let e = |c: i64| json!({"error": {"code": c, "message": ""}});
        assert_eq!(status_of(&e(code::METHOD_NOT_FOUND)), 404);
        for c in [code::HEADER_MISMATCH, code::MISSING_CLIENT_CAPABILITY, code::UNSUPPORTED_PROTOCOL_VERSION]
        {
            assert_eq!(status_of(&e(c)), 400);
        }
        assert_eq!(status_of(&e(code::INVALID_PARAMS)), 200);
        assert_eq!(status_of(&json!({"result": {}})), 200);
    }
}
