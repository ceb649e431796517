//! [`GatewayHost`]: gapless-server's `Host` whose application is an
//! upstream MCP server. A gateway session is created by the client's
//! `initialize`, forwarded upstream (`Host::initialize`), and bound to the
//! upstream's session; the binding is the session's value
//! ([`SessionHandle::set_value`]), so that in a cluster every node serves
//! the session's requests. One node at a time (the holder of the session's
//! `gateway.standalone` hold) reads the upstream's standalone stream onto the
//! session's, recording how far it got; when that node dies, another node
//! serving the session takes the hold over and resumes the upstream's
//! stream from there (`docs/SPEC.md` §10.6). The session's end (a
//! `DELETE`, expiry) deletes the upstream's, and the upstream's end (`404`)
//! ends it.

use crate::pump::{end_soon, lost, route, rpc_error, Asker, Bound, Link, Notes, Routed};
use crate::sync::{lock, OnDrop};
use crate::upstream::{end_to_end, metadata_url, rewrite_www_authenticate, Answer, End, Fault, Upstream};
use bytes::Bytes;
use futures_util::future::BoxFuture;
use gapless_server::{Host, RequestContext, RpcError, SessionHandle};
use gapless_server::{InitializeError, SendError, ValueError};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The session's value that binds it to the upstream's ([`Bound::stored`]).
const BINDING: &str = "gateway.upstream";
/// The session's value that says how far the upstream's standalone stream
/// was read: the upstream's id of the last event the holder put on the
/// session's standalone stream and saw stored.
const CURSOR: &str = "gateway.standalone-cursor";
/// The session's value that is its client's log level.
const LEVEL: &str = "gateway.level";
/// The hold of the node that reads the upstream's standalone stream.
const HOLD: &str = "gateway.standalone";

/// The sessions this node serves, by the gateway's session id.
type Lanes = Arc<Mutex<HashMap<String, Arc<Lane>>>>;

/// A session on this node: the client's notifications on their way
/// upstream, and the link to the upstream's session once this node has it
/// (made by `initialize` on the node that created the session, read from
/// the session's [`BINDING`] on another).
#[derive(Debug, Default)]
struct Lane {
    notes: Arc<Notes>,
    link: tokio::sync::OnceCell<Link>,
}

/// gapless-server's application that is an upstream MCP server.
#[derive(Debug)]
pub struct GatewayHost {
    upstream: Upstream,
    lanes: Lanes,
    /// The gateway's endpoint path, as clients reach it.
    public_path: Arc<str>,
}

impl GatewayHost {
    /// A gateway to `upstream`, its endpoint at `/mcp`.
    pub fn new(upstream: Upstream) -> GatewayHost {
        GatewayHost { upstream, lanes: Arc::default(), public_path: Arc::from("/mcp") }
    }

    /// The gateway's endpoint is at `path` (where the router is mounted):
    /// the protected-resource metadata URL an upstream's `401` names is
    /// rewritten to the gateway's own, `/.well-known/oauth-protected-resource`
    /// followed by `path`.
    pub fn path(mut self, path: &str) -> GatewayHost {
        self.public_path = Arc::from(path);
        self
    }

    /// This node's lane of `session`: `None` once this node no longer
    /// serves it (the session ended).
    fn lane(&self, session: &SessionHandle) -> Option<Arc<Lane>> {
        lock(&self.lanes).get(&session.id()).cloned()
    }
}

impl Lane {
    /// The session's link: this lane's, or the binding another node stored
    /// (its [`BINDING`], with the client's log level as it was recorded),
    /// read once and kept. `Err`: there is none, or the store failed (read
    /// again next time).
    async fn link(
        &self,
        upstream: &Upstream,
        public_path: &Arc<str>,
        session: &SessionHandle,
    ) -> Result<Link, RpcError> {
        let load = || load(upstream.clone(), Arc::clone(public_path), Arc::clone(&self.notes), session);
        self.link.get_or_try_init(load).await.cloned()
    }
}

/// The link of a session another node bound ([`Lane::link`]).
async fn load(
    upstream: Upstream,
    public_path: Arc<str>,
    notes: Arc<Notes>,
    session: &SessionHandle,
) -> Result<Link, RpcError> {
    let stored = match session.value(BINDING).await {
        Ok(Some(v)) => v,
        Ok(None) => return Err(lost("this gateway session has no upstream session")),
        Err(e) => return Err(lost(format!("its binding could not be read: {e}"))),
    };
    let bound = Bound::parse(&stored).map_err(|e| lost(format!("its binding does not parse: {e}")))?;
    if let Ok(Some(level)) = session.value(LEVEL).await {
        bound.level.set(&json!({ "level": level }));
    }
    Ok(Link { upstream, bound: Arc::new(bound), notes, public_path })
}

impl Host for GatewayHost {
    fn capabilities(&self) -> Value {
        json!({})
    }

    /// MCP 2026-07-28 requests (no session) are forwarded whole.
    fn serves_sessionless(&self) -> bool {
        true
    }

    fn forwards_sessionless(&self) -> bool {
        true
    }

    fn forwards_session_methods(&self) -> bool {
        true
    }

    fn seals_request_state(&self) -> bool {
        false
    }

    fn initialize(
        &self,
        params: &Value,
        session: &SessionHandle,
        headers: &http::HeaderMap,
    ) -> Option<BoxFuture<'static, Result<Value, InitializeError>>> {
        let opening = Opening {
            upstream: self.upstream.clone(),
            forward: end_to_end(headers),
            metadata: metadata_url(headers, &self.public_path),
            public_path: Arc::clone(&self.public_path),
            lanes: Arc::clone(&self.lanes),
            session: session.clone(),
        };
        let body = Bytes::from(
            json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": params}).to_string(),
        );
        Some(Box::pin(opening.open(body)))
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        let session = ctx.session();
        // A 2026-07-28 request: no session on either side.
        let sessionless = session.is_none().then(|| {
            let bound = Bound {
                id: None,
                version: Some(ctx.protocol_version()),
                forward: Default::default(),
                level: Default::default(),
            };
            let public_path = Arc::clone(&self.public_path);
            Link {
                upstream: self.upstream.clone(),
                bound: Arc::new(bound),
                notes: Default::default(),
                public_path,
            }
        });
        let (lane, upstream, public_path) = (
            session.as_ref().and_then(|s| self.lane(s)),
            self.upstream.clone(),
            Arc::clone(&self.public_path),
        );
        Box::pin(async move {
            let link = match (sessionless, lane, &session) {
                (Some(link), _, _) => link,
                (None, Some(lane), Some(s)) => lane.link(&upstream, &public_path, s).await?,
                _ => return Err(lost("this node no longer serves this gateway session")),
            };
            if method != "logging/setLevel" {
                return link.call(&method, params, &ctx).await;
            }
            let outcome = link.call(&method, params.clone(), &ctx).await;
            if outcome.is_ok() {
                link.bound.level.set(&params);
                // Where a node that takes the session up starts from.
                if let (Some(s), Some(l)) = (&session, params.get("level").and_then(Value::as_str)) {
                    if let Err(e) = s.set_value(LEVEL, l).await {
                        tracing::warn!(error = %e, "the session's log level was not recorded");
                    }
                }
            }
            outcome
        })
    }

    /// Queued on this node's lane at once, so that it goes upstream before
    /// any request the client sent after it, whether or not this node has
    /// the session's link yet.
    fn on_notification(&self, method: &str, params: &Value, session: &SessionHandle) {
        let n = if params.is_null() {
            json!({"jsonrpc": "2.0", "method": method})
        } else {
            json!({"jsonrpc": "2.0", "method": method, "params": params})
        };
        match self.lane(session) {
            Some(lane) => lane.notes.push(n),
            None => tracing::debug!(session = %session.id(), "a notification of an ended session: dropped"),
        }
    }

    /// Another node created the session: this node reads its binding,
    /// sends the client's notifications that reach it, and stands by to
    /// take the upstream's standalone stream over.
    fn on_attach(&self, session: &SessionHandle) {
        tracing::debug!(session = %session.id(), "a session made on another node is served here too");
        // A lane of its own: a lane of this node's earlier state of the
        // session (dropped, and attached again) goes with that state.
        let lane = fresh(&self.lanes, session);
        let (upstream, public_path, lanes) =
            (self.upstream.clone(), Arc::clone(&self.public_path), Arc::clone(&self.lanes));
        let session = session.clone();
        tokio::spawn(async move {
            let mut wait = REOPEN;
            let link = loop {
                let read = tokio::select! {
                    r = lane.link(&upstream, &public_path, &session) => r,
                    _ = session.closed() => return forget(&lanes, &session, &lane),
                };
                match read {
                    Ok(link) => break link,
                    Err(e) => {
                        tracing::warn!(session = %session.id(), error = %e.message, "a session taken up here");
                        tokio::time::sleep(wait).await;
                        wait = (wait * 2).min(REOPEN_MAX);
                    }
                }
            };
            serve(link, session, lanes, lane, None).await
        });
    }
}

/// A new lane for `session` on this node, in place of any it had.
fn fresh(lanes: &Lanes, session: &SessionHandle) -> Arc<Lane> {
    let lane = Arc::new(Lane::default());
    lock(lanes).insert(session.id(), Arc::clone(&lane));
    lane
}

/// Drops this node's lane of `session`, if it is still `lane`.
fn forget(lanes: &Lanes, session: &SessionHandle, lane: &Arc<Lane>) {
    let mut lanes = lock(lanes);
    if lanes.get(&session.id()).is_some_and(|l| Arc::ptr_eq(l, lane)) {
        lanes.remove(&session.id());
    }
}

/// A session being opened: its `initialize` forwarded upstream.
struct Opening {
    upstream: Upstream,
    /// The client's end-to-end headers.
    forward: HeaderMap,
    /// The gateway's metadata URL as the client sees it.
    metadata: Option<String>,
    public_path: Arc<str>,
    lanes: Lanes,
    session: SessionHandle,
}

impl Opening {
    /// Forwards `initialize` (`body`); binds the session to the upstream's
    /// and holds its standalone stream. A `401`/`403` reaches the client as
    /// it is, its `WWW-Authenticate` naming the gateway's metadata.
    async fn open(self, body: Bytes) -> Result<Value, InitializeError> {
        let Opening { upstream, forward, metadata, public_path, lanes, session } = self;
        let (answer, upstream_sid) = upstream.post(None, None, &forward, body).await.map_err(lost)?;
        let lane = fresh(&lanes, &session);
        // Until the session is served, however this ends (an error, or the
        // client gone and this future dropped), the upstream's session is
        // deleted and the lane forgotten.
        let cleanup = {
            let (upstream, forward, lanes, session, lane) =
                (upstream.clone(), forward.clone(), Arc::clone(&lanes), session.clone(), Arc::clone(&lane));
            let usid = upstream_sid.clone();
            OnDrop::new(move || {
                forget(&lanes, &session, &lane);
                if let Some(usid) = usid {
                    tokio::spawn(async move { upstream.delete(&usid, None, &forward).await });
                }
            })
        };
        let mut response = match answer {
            Answer::Json(b) => {
                serde_json::from_slice::<Value>(&b).map_err(|e| lost(format!("its answer: {e}")))?
            }
            Answer::Stream(events) => initialize_response(events).await?,
            Answer::Accepted => return Err(lost("it answered initialize with 202").into()),
            Answer::Refused { status, www_authenticate, body } => {
                let mut r =
                    http::Response::builder().status(status).header("content-type", "application/json");
                if let Some(w) = www_authenticate {
                    r = r.header("www-authenticate", rewrite_www_authenticate(&w, metadata.as_deref()));
                }
                return Err(InitializeError::Http(r.body(body).map_err(|e| lost(e.to_string()))?));
            }
            Answer::Status(s, b) => {
                return match serde_json::from_slice::<Value>(&b).ok().and_then(|v| v.get("error").cloned()) {
                    Some(e) => Err(rpc_error(e).into()),
                    None => Err(lost(format!("it answered initialize with {s}")).into()),
                }
            }
        };
        if let Some(e) = response.get_mut("error") {
            return Err(rpc_error(e.take()).into());
        }
        let result =
            response.get_mut("result").map(Value::take).ok_or_else(|| lost("no initialize result"))?;
        let version = result.get("protocolVersion").and_then(Value::as_str).map(str::to_owned);
        let bound = Bound { id: upstream_sid, version, forward, level: Default::default() };
        // Every node reads the binding before the client has the session.
        session.set_value(BINDING, &bound.stored()).await.map_err(|e| lost(format!("the binding: {e}")))?;
        let link = Link { upstream, bound: Arc::new(bound), notes: Arc::clone(&lane.notes), public_path };
        if lane.link.set(link.clone()).is_err() {
            return Err(lost("the session was bound twice").into());
        }
        // The upstream's standalone stream is open before the client has
        // its session, so that nothing the upstream sends there from then
        // on misses it (an upstream drops standalone messages while no GET
        // is open).
        let first = match &link.bound.id {
            Some(sid) => {
                let get = link.upstream.get(sid, link.bound.version.as_deref(), &link.bound.forward, None);
                tokio::time::timeout(OPEN_WAIT, get).await.ok()
            }
            None => None,
        };
        tokio::spawn(serve(link, session, lanes, lane, first));
        cleanup.disarm();
        Ok(result)
    }
}

/// The `initialize` response on the upstream's SSE answer.
async fn initialize_response(mut events: crate::upstream::Events) -> Result<Value, RpcError> {
    loop {
        match events.next().await {
            Ok(e) if e.data.iter().all(u8::is_ascii_whitespace) => continue,
            Ok(e) => match serde_json::from_slice::<Value>(&e.data) {
                Ok(v) if v.get("id") == Some(&json!(0)) => return Ok(v),
                _ => continue,
            },
            Err(End::Closed) => return Err(lost("its initialize stream ended without the result")),
            Err(End::Broken(why)) => return Err(lost(format!("its initialize stream broke: {why}"))),
        }
    }
}

/// How long the standalone stream waits before it is opened again: the
/// first wait, doubled after each failure up to the second.
const REOPEN: Duration = Duration::from_millis(100);
/// How long a node waits before it asks a store that did not answer again.
const STORE_RETRY: Duration = Duration::from_secs(2);
const REOPEN_MAX: Duration = Duration::from_secs(1);
/// How long `initialize` waits for the upstream's standalone stream to
/// open before it answers anyway.
const OPEN_WAIT: Duration = Duration::from_secs(2);

/// Serves the session on this node while this node serves it: sends the
/// client's notifications that reach this node upstream, and reads the
/// upstream's standalone stream while this node holds the session's
/// [`HOLD`]. When the session ends (not only this node's part in it), the
/// upstream's session is deleted.
async fn serve(
    link: Link,
    session: SessionHandle,
    lanes: Lanes,
    lane: Arc<Lane>,
    first: Option<Result<Answer, Fault>>,
) {
    let notes = link.notes.drain(|n| async {
        if let Err(f) = link.send(n).await {
            tracing::warn!(fault = %f, "a client notification could not be forwarded upstream");
        }
    });
    tokio::select! {
        _ = session.closed() => {}
        _ = keep(&link, &session, first) => {}
        _ = notes => {}
    }
    forget(&lanes, &session, &lane);
    // This node's state of the session closes when the session ends, and
    // also when this node lets it go (it shuts down): the store tells.
    if let (Some(sid), Err(ValueError::Closed)) = (&link.bound.id, session.value(BINDING).await) {
        link.upstream.delete(sid, link.bound.version.as_deref(), &link.bound.forward).await;
    }
}

/// Reads the upstream's standalone stream onto the session's whenever this
/// node holds the session's [`HOLD`], from the cursor the last holder
/// recorded; over when the upstream's session is gone (or the gateway's).
/// A node that does not hold it waits, at no cost per session, until the
/// holder's node dies (`SessionHandle::acquire`).
async fn keep(link: &Link, session: &SessionHandle, mut first: Option<Result<Answer, Fault>>) {
    // An upstream without sessions has no standalone stream to hold: the
    // link lives until the gateway's session ends.
    if link.bound.id.is_none() {
        return std::future::pending().await;
    }
    // The stream this node opened at the session's start is read only if
    // this node holds the session: another node reads it otherwise.
    if first.is_some() && matches!(session.hold(HOLD).await, Ok(false)) {
        drop(first.take());
    }
    loop {
        match session.acquire(HOLD).await {
            Ok(()) => {}
            Err(ValueError::Closed) => return,
            Err(e) => {
                tracing::warn!(error = %e, "the session's hold could not be taken");
                tokio::time::sleep(STORE_RETRY).await;
                continue;
            }
        }
        let cursor = match first {
            Some(_) => None,
            None => match session.value(CURSOR).await {
                Ok(c) => c,
                Err(ValueError::Closed) => return,
                // Never from the start for want of the cursor: the events
                // since it would be skipped.
                Err(e) => {
                    tracing::warn!(error = %e, "the standalone stream's cursor could not be read");
                    tokio::time::sleep(STORE_RETRY).await;
                    continue;
                }
            },
        };
        tracing::debug!(session = %session.id(), ?cursor, "this node reads the upstream's standalone stream");
        tokio::select! {
            _ = standalone(link, session, first.take(), cursor) => {
                let _ = session.release(HOLD).await;
                return;
            }
            _ = session.lost(HOLD) => {
                tracing::warn!(session = %session.id(), "another node took the upstream's standalone stream over: this node stops reading it");
            }
        }
    }
}

/// The upstream's standalone stream onto the session's, from `cursor` (the
/// upstream's id of the last event it took), reopened with its cursor
/// (where the upstream gave ids) whenever it ends; over when the upstream
/// has none (`405`) or its session is gone (`404`, which ends the
/// gateway's). The cursor is recorded ([`CURSOR`]) once the events before
/// it are stored, each time the events read so far are all handled.
async fn standalone(
    link: &Link,
    session: &SessionHandle,
    mut first: Option<Result<Answer, Fault>>,
    mut cursor: Option<String>,
) {
    let Some(sid) = link.bound.id.clone() else { return std::future::pending().await };
    let version = link.bound.version.as_deref();
    let mut recorded = cursor.clone();
    // The upstream's id of the event last refused (read again once).
    let mut refused: Option<String> = None;
    let mut wait = REOPEN;
    loop {
        let opened = match first.take() {
            Some(answer) => answer,
            None => link.upstream.get(&sid, version, &link.bound.forward, cursor.as_deref()).await,
        };
        let mut events = match opened {
            Ok(Answer::Stream(ev)) => ev,
            Ok(Answer::Status(404, _)) => {
                return end_soon(session.clone(), "the upstream's session is gone (404)")
            }
            Ok(Answer::Status(405, _)) => return std::future::pending().await,
            Ok(other) => {
                tracing::debug!(?other, "the upstream's standalone stream was not opened");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(REOPEN_MAX);
                continue;
            }
            Err(f) => {
                tracing::debug!(fault = %f, "the upstream's standalone stream");
                tokio::time::sleep(wait).await;
                wait = (wait * 2).min(REOPEN_MAX);
                continue;
            }
        };
        wait = REOPEN;
        tracing::trace!(?cursor, "the upstream's standalone stream opened");
        while let Ok(e) = events.next().await {
            if let Some(i) = e.id {
                cursor = Some(i);
            }
            if !e.data.iter().all(u8::is_ascii_whitespace) {
                // Routed as a request's stream is (`pump::route`): a
                // notification is read no further than its method and
                // level.
                match route(e.data) {
                    Ok(Routed::Notification(_, l)) if link.bound.level.withholds(l) => {}
                    Ok(Routed::Notification(b, _)) => match session.notify_raw(b).await {
                        Ok(_) => {}
                        // In a cluster, the store may refuse for a while
                        // (a failover): the stream is read again from the
                        // last cursor recorded, where every event before is
                        // stored. An event refused twice (larger than the
                        // session's byte budget), or refused in process,
                        // can never be held: it is dropped, loudly.
                        Err(SendError::Refused(why)) if session.in_cluster() && refused != cursor => {
                            tracing::warn!(%why, "an upstream standalone event was refused: read again");
                            refused = cursor.clone();
                            cursor = recorded.clone();
                            break;
                        }
                        Err(SendError::Refused(why)) => {
                            tracing::error!(%why, id = ?cursor, "an upstream standalone event the session cannot hold was dropped");
                        }
                        Err(_) => return,
                    },
                    Ok(Routed::Request(uid, method, params)) => {
                        let (link, session) = (link.clone(), session.clone());
                        tokio::spawn(async move {
                            link.relay(uid, method, params, Asker::Session(session)).await
                        });
                    }
                    Ok(Routed::Response(id, _)) => {
                        tracing::warn!(%id, "an upstream response on the standalone stream: dropped")
                    }
                    Err(why) => tracing::warn!(%why, "an upstream event that is not a message: dropped"),
                }
            }
            if session.in_cluster() && !events.buffered() && cursor != recorded {
                if let Some(c) = &cursor {
                    if !record(session, c).await {
                        cursor = recorded.clone();
                        break;
                    }
                    recorded = cursor.clone();
                }
            }
        }
        tokio::time::sleep(REOPEN).await;
    }
}

/// Records `cursor` as how far the upstream's standalone stream was read,
/// once every event put on the session's before it is stored: a node that
/// takes the stream over resumes from there, so an event is never lost
/// (one put on the session's stream after the last record may come twice).
/// `false`: the store refused one of them, and the stream is read again
/// from the last cursor recorded.
async fn record(session: &SessionHandle, cursor: &str) -> bool {
    if let Err(e) = session.flush().await {
        tracing::warn!(error = %e, "an upstream standalone event was not stored: read again");
        return false;
    }
    tracing::trace!(session = %session.id(), cursor, "the standalone stream's cursor");
    if let Err(e) = session.set_value(CURSOR, cursor).await {
        tracing::debug!(error = %e, "the standalone stream's cursor was not recorded");
    }
    true
}
