//! [`StdioHost`]: gapless-server's `Host` whose application is a stdio MCP
//! server, one child process per gateway session (a stdio server serves one
//! client). The client's `initialize` starts the child and is its first
//! message; the session's end kills it, and its exit ends the session.
//!
//! A stdio server has one stream for everything, so the bridge owns the
//! correlation the HTTP upstream's streams give for free:
//! - a response goes to the request of its id;
//! - a `notifications/progress` to the request whose `progressToken` it
//!   names;
//! - any other notification, and a server → client request, to the one
//!   request in flight if there is exactly one (a tool's log messages and
//!   its questions while it runs), else to the session's standalone stream.
//!
//! No message of one session can reach another's: each has its own child.

use crate::pump::{end, end_soon, gone, lost, route, Asker, Level, Notes, Routed};
use crate::sync::{lock, OnDrop};
use crate::upstream::stdio::{write_line, Lines, StdioCommand};
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use gapless_server::{Host, InitializeError, RequestContext, RpcError, SessionHandle, ValueError};
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::process::ChildStdin;
use tokio::sync::mpsc;

/// How long a child may take to answer `initialize`.
const INITIALIZE_WAIT: Duration = Duration::from_secs(30);
/// The hold of the node that runs the session's child.
const CHILD: &str = "gateway.child";
/// Messages waiting for a request's pump before the child's reader waits.
const QUEUE: usize = 256;
/// How long a node waits before it asks a store that did not answer again.
const STORE_RETRY: Duration = Duration::from_secs(2);

/// gapless-server's application that is a stdio MCP server.
#[derive(Debug)]
pub struct StdioHost {
    command: StdioCommand,
    children: Arc<Mutex<HashMap<String, Arc<Child>>>>,
}

/// Where the child's messages go while requests are in flight.
#[derive(Default)]
struct Routes {
    /// The requests in flight, by their id (as JSON text).
    requests: HashMap<String, mpsc::Sender<Routed>>,
    /// Their progress tokens (as JSON text), to their ids.
    progress: HashMap<String, String>,
}

/// One session's child.
struct Child {
    stdin: tokio::sync::Mutex<ChildStdin>,
    routes: Mutex<Routes>,
    /// The session's log level, which its log messages are held to.
    level: Level,
    /// The client's notifications on their way to the child.
    notes: Notes,
}

impl std::fmt::Debug for Child {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Child").finish_non_exhaustive()
    }
}

impl StdioHost {
    /// A bridge to children of `command`.
    pub fn new(command: StdioCommand) -> StdioHost {
        StdioHost { command, children: Arc::default() }
    }
}

impl Child {
    async fn write(&self, message: &Value) -> std::io::Result<()> {
        write_line(&mut *self.stdin.lock().await, message.to_string().as_bytes()).await
    }

    /// Registers request `id` (with its progress token); its messages come
    /// on the receiver until its response, or until the child exits (the
    /// channel closes).
    fn register(&self, id: &Value, progress: Option<&Value>) -> mpsc::Receiver<Routed> {
        let (tx, rx) = mpsc::channel(QUEUE);
        let mut r = lock(&self.routes);
        r.requests.insert(id.to_string(), tx);
        if let Some(t) = progress {
            r.progress.insert(t.to_string(), id.to_string());
        }
        rx
    }

    fn unregister(&self, id: &Value) {
        let mut r = lock(&self.routes);
        let key = id.to_string();
        r.requests.remove(&key);
        r.progress.retain(|_, v| *v != key);
    }

    /// The request a message of the child goes to: its response's id, the
    /// progress token it names, or the one request in flight.
    fn target(&self, data: &Bytes, routed: &Routed) -> Option<mpsc::Sender<Routed>> {
        let mut r = lock(&self.routes);
        match routed {
            // A response ends its request's route here, under the lock: a
            // message after it goes where the routes are now.
            Routed::Response(id, _) => {
                let key = id.to_string();
                r.progress.retain(|_, v| *v != key);
                r.requests.remove(&key)
            }
            Routed::Notification(..) | Routed::Request(..) => {
                let token = progress_token(data);
                if let Some(id) = token.and_then(|t| r.progress.get(&t)) {
                    return r.requests.get(id).cloned();
                }
                (r.requests.len() == 1).then(|| r.requests.values().next().cloned()).flatten()
            }
        }
    }
}

/// The `progressToken` (as JSON text) of a `notifications/progress`.
fn progress_token(data: &Bytes) -> Option<String> {
    let v: Value = serde_json::from_slice(data).ok()?;
    if v.get("method")?.as_str()? != "notifications/progress" {
        return None;
    }
    Some(v.get("params")?.get("progressToken")?.to_string())
}

/// Reads the child's messages to their targets until it exits; then every
/// request in flight sees its channel close, and the session ends.
async fn read(child: Arc<Child>, mut lines: Lines, session: SessionHandle) {
    while let Some(data) = lines.next().await {
        let routed = match route(data.clone()) {
            Ok(r) => r,
            Err(why) => {
                tracing::warn!(%why, "a line of the upstream process that is not a message: dropped");
                continue;
            }
        };
        match child.target(&data, &routed) {
            Some(tx) => {
                let _ = tx.send(routed).await;
            }
            None => match routed {
                Routed::Notification(_, l) if child.level.withholds(l) => {}
                Routed::Notification(b, _) => {
                    let _ = session.notify_raw(b).await;
                }
                Routed::Request(uid, method, params) => {
                    let (child, session) = (Arc::clone(&child), session.clone());
                    tokio::spawn(async move {
                        let answer = Asker::Session(session).answer(uid, &method, params).await;
                        let _ = child.write(&answer).await;
                    });
                }
                Routed::Response(id, _) => {
                    tracing::warn!(%id, "an upstream response for no request: dropped")
                }
            },
        }
    }
    let dropped = std::mem::take(&mut *lock(&child.routes));
    drop(dropped);
    end_soon(session, "the upstream process exited");
}

impl Host for StdioHost {
    fn capabilities(&self) -> Value {
        json!({})
    }

    fn serves_sessionless(&self) -> bool {
        false
    }

    fn seals_request_state(&self) -> bool {
        false
    }

    fn forwards_session_methods(&self) -> bool {
        true
    }

    fn initialize(
        &self,
        params: &Value,
        session: &SessionHandle,
        _headers: &http::HeaderMap,
    ) -> Option<BoxFuture<'static, Result<Value, InitializeError>>> {
        let (command, children, session) =
            (self.command.clone(), Arc::clone(&self.children), session.clone());
        let request =
            json!({"jsonrpc": "2.0", "id": "gapless-initialize", "method": "initialize", "params": params});
        let opened = async move {
            let tag = session.id()[..8].to_owned();
            let (mut process, stdin, lines) =
                command.spawn(tag).map_err(|e| lost(format!("the upstream process did not start: {e}")))?;
            let child = Arc::new(Child {
                stdin: tokio::sync::Mutex::new(stdin),
                routes: Mutex::default(),
                level: Level::default(),
                notes: Notes::default(),
            });
            let id = json!("gapless-initialize");
            let mut rx = child.register(&id, None);
            tokio::spawn(read(Arc::clone(&child), lines, session.clone()));
            child.write(&request).await.map_err(|e| lost(format!("the upstream process: {e}")))?;
            let answer = tokio::time::timeout(INITIALIZE_WAIT, async {
                while let Some(m) = rx.recv().await {
                    if let Routed::Response(_, outcome) = m {
                        return Some(outcome);
                    }
                }
                None
            })
            .await;
            child.unregister(&id);
            let result = match answer {
                Ok(Some(outcome)) => outcome?,
                Ok(None) => return Err(lost("the upstream process exited before it answered initialize")),
                Err(_) => return Err(lost("the upstream process did not answer initialize in 30 s")),
            };
            // In a cluster, this node holds the session while the child
            // lives here, and a node that takes the hold over ends it.
            if !matches!(session.hold(CHILD).await, Ok(true)) {
                return Err(lost("the session's hold could not be taken"));
            }
            lock(&children).insert(session.id(), Arc::clone(&child));
            // The session's end kills the child (dropping it does: kill on
            // drop), and its exit ends the session (`read`).
            tokio::spawn(async move {
                let writer = &child;
                let notes = child.notes.drain(|n| async move {
                    if let Err(e) = writer.write(&n).await {
                        tracing::warn!(error = %e, "a client notification could not be written to the upstream process");
                    }
                });
                tokio::select! {
                    _ = session.closed() => {}
                    _ = process.wait() => {}
                    _ = notes => {}
                    _ = session.lost(CHILD) => {
                        tracing::warn!(session = %session.id(), "another node took the session's hold: its upstream process ends");
                    }
                }
                lock(&children).remove(&session.id());
                // The child leads a process group of its own: the whole
                // group goes (the server a shell or `npx` started, too).
                kill_group(&process);
                let _ = process.start_kill();
                let _ = process.wait().await;
            });
            Ok(result)
        };
        Some(Box::pin(async move { opened.await.map_err(InitializeError::from) }))
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        let child = ctx.session().and_then(|s| lock(&self.children).get(&s.id()).cloned());
        Box::pin(async move {
            let Some(child) = child else { return Err(lost("this gateway session has no upstream process")) };
            if method == "logging/setLevel" {
                let outcome = call(&child, &method, params.clone(), &ctx).await;
                if outcome.is_ok() {
                    child.level.set(&params);
                }
                return outcome;
            }
            call(&child, &method, params, &ctx).await
        })
    }

    /// Another node of the cluster runs the session's child: this node
    /// serves none of its requests (they are answered `-31002`), and ends
    /// the session once it takes the session's hold over (that node
    /// stopped).
    fn on_attach(&self, session: &SessionHandle) {
        let session = session.clone();
        tokio::spawn(async move {
            loop {
                match session.acquire(CHILD).await {
                    Ok(()) => return end(&session, "the node running its upstream process stopped"),
                    Err(ValueError::Closed) => return,
                    Err(e) => tracing::warn!(error = %e, "the session's hold could not be read"),
                }
                tokio::select! {
                    _ = tokio::time::sleep(STORE_RETRY) => {}
                    _ = session.closed() => return,
                }
            }
        });
    }

    fn on_notification(&self, method: &str, params: &Value, session: &SessionHandle) {
        let Some(child) = lock(&self.children).get(&session.id()).cloned() else { return };
        let mut n = json!({"jsonrpc": "2.0", "method": method});
        if !params.is_null() {
            n["params"] = params.clone();
        }
        child.notes.push(n);
    }
}

/// Forwards request `method` to the child and pumps what it routes to the
/// request onto its gapless stream, until the response.
async fn call(
    child: &Arc<Child>,
    method: &str,
    params: Value,
    ctx: &RequestContext,
) -> Result<Value, RpcError> {
    child.notes.flushed().await;
    let id = ctx.request_id().clone();
    let progress = params.get("_meta").and_then(|m| m.get("progressToken")).cloned();
    let mut rx = child.register(&id, progress.as_ref());
    let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
    if !params.is_null() {
        request["params"] = params;
    }
    // However the call ends without its response (the client cancelled it
    // and the transport dropped this future, or the session went), the
    // child is told, and the route goes.
    let (c, cid) = (Arc::clone(child), id.clone());
    let abandon = OnDrop::new(move || {
        c.unregister(&cid);
        tokio::spawn(async move {
            let n =
                json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": cid}});
            let _ = c.write(&n).await;
        });
    });
    if child.write(&request).await.is_err() {
        return Err(gone(ctx, "the upstream process exited").await);
    }
    // The client's answers to the child's questions are awaited beside the
    // pump, so that its other messages keep flowing meanwhile.
    let mut relays = FuturesUnordered::new();
    loop {
        let m = tokio::select! {
            m = rx.recv() => m,
            Some(answer) = relays.next(), if !relays.is_empty() => {
                let answer: Value = answer;
                let _ = child.write(&answer).await;
                continue;
            }
        };
        match m {
            None => return Err(gone(ctx, "the upstream process exited").await),
            Some(Routed::Response(_, o)) => {
                // Its route went with it (`Child::target`).
                abandon.disarm();
                return o;
            }
            Some(Routed::Notification(_, l)) if child.level.withholds(l) => {}
            Some(Routed::Notification(b, _)) => {
                if let Err(e) = ctx.notify_raw(b).await {
                    return Err(lost(format!("the gateway's session cannot take it: {e}")));
                }
            }
            Some(Routed::Request(uid, m, p)) => {
                relays.push(async move { Asker::Request(ctx).answer(uid, &m, p).await });
            }
        }
    }
}

/// Kills the process group `process` leads (`StdioCommand::spawn` makes
/// each child a group's leader).
fn kill_group(process: &tokio::process::Child) {
    #[cfg(unix)]
    if let Some(pid) = process.id().and_then(|p| i32::try_from(p).ok()) {
        // SAFETY: kill(2) with a negative pid signals that process group;
        // it reads no memory of ours. `id()` is `None` once tokio reaped the
        // child, so the pid here is still that of the group the child leads
        // (process_group(0) at spawn), and nothing else is signalled.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
}
