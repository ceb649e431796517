//! [`GatewayHost`]: gapless-server's `Host` whose application is an
//! upstream MCP server. A gateway session is created by the client's
//! `initialize`, forwarded upstream (`Host::initialize`), and bound to the
//! upstream's session; the upstream's standalone stream is held open for
//! it; its end (a `DELETE`, expiry) deletes the upstream's, and the
//! upstream's end (`404`) ends it.

use crate::pump::{end_soon, lost, route, rpc_error, Asker, Bound, Link, Routed};
use crate::sync::{lock, OnDrop};
use crate::upstream::{end_to_end, metadata_url, rewrite_www_authenticate, Answer, End, Fault, Upstream};
use bytes::Bytes;
use futures_util::future::BoxFuture;
use gapless_server::InitializeError;
use gapless_server::{Host, RequestContext, RpcError, SessionHandle};
use reqwest::header::HeaderMap;
use serde_json::{json, Value};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// The upstream's sessions, by the gateway's session id.
type Links = Arc<Mutex<HashMap<String, Link>>>;

/// gapless-server's application that is an upstream MCP server.
#[derive(Debug)]
pub struct GatewayHost {
    upstream: Upstream,
    links: Links,
    /// The gateway's endpoint path, as clients reach it.
    public_path: Arc<str>,
}

impl GatewayHost {
    /// A gateway to `upstream`, its endpoint at `/mcp`.
    pub fn new(upstream: Upstream) -> GatewayHost {
        GatewayHost { upstream, links: Arc::default(), public_path: Arc::from("/mcp") }
    }

    /// The gateway's endpoint is at `path` (where the router is mounted):
    /// the protected-resource metadata URL an upstream's `401` names is
    /// rewritten to the gateway's own, `/.well-known/oauth-protected-resource`
    /// followed by `path`.
    pub fn path(mut self, path: &str) -> GatewayHost {
        self.public_path = Arc::from(path);
        self
    }

    fn link(&self, session: &SessionHandle) -> Option<Link> {
        lock(&self.links).get(&session.id()).cloned()
    }
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
            links: Arc::clone(&self.links),
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
        let link = match ctx.session() {
            Some(s) => self.link(&s),
            // A 2026-07-28 request: no session on either side.
            None => {
                let bound = Bound {
                    id: None,
                    version: Some(ctx.protocol_version()),
                    forward: Default::default(),
                    level: Default::default(),
                    notes: Default::default(),
                };
                let public_path = Arc::clone(&self.public_path);
                Some(Link { upstream: self.upstream.clone(), bound: Arc::new(bound), public_path })
            }
        };
        Box::pin(async move {
            match link {
                Some(link) if method == "logging/setLevel" => {
                    let outcome = link.call(&method, params.clone(), &ctx).await;
                    if outcome.is_ok() {
                        link.bound.level.set(&params);
                    }
                    outcome
                }
                Some(link) => link.call(&method, params, &ctx).await,
                None => Err(lost("this gateway session has no upstream session")),
            }
        })
    }

    fn on_notification(&self, method: &str, params: &Value, session: &SessionHandle) {
        let Some(link) = self.link(session) else { return };
        let n = if params.is_null() {
            json!({"jsonrpc": "2.0", "method": method})
        } else {
            json!({"jsonrpc": "2.0", "method": method, "params": params})
        };
        link.bound.notes.push(n);
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
    links: Links,
    session: SessionHandle,
}

impl Opening {
    /// Forwards `initialize` (`body`); binds the session to the upstream's
    /// and holds its standalone stream. A `401`/`403` reaches the client as
    /// it is, its `WWW-Authenticate` naming the gateway's metadata.
    async fn open(self, body: Bytes) -> Result<Value, InitializeError> {
        let Opening { upstream, forward, metadata, public_path, links, session } = self;
        let (answer, upstream_sid) = upstream.post(None, None, &forward, body).await.map_err(lost)?;
        // Until the session is held, however this ends (an error, or the
        // client gone and this future dropped), the upstream's session is
        // deleted and the binding forgotten.
        let cleanup = {
            let (upstream, forward, links, sid) =
                (upstream.clone(), forward.clone(), Arc::clone(&links), session.id());
            let usid = upstream_sid.clone();
            OnDrop::new(move || {
                lock(&links).remove(&sid);
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
        let bound = Arc::new(Bound {
            id: upstream_sid,
            version,
            forward,
            level: Default::default(),
            notes: Default::default(),
        });
        let link = Link { upstream, bound, public_path };
        lock(&links).insert(session.id(), link.clone());
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
        tokio::spawn(hold(link, session, links, first));
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
const REOPEN_MAX: Duration = Duration::from_secs(1);
/// How long `initialize` waits for the upstream's standalone stream to
/// open before it answers anyway.
const OPEN_WAIT: Duration = Duration::from_secs(2);

/// Holds the session's upstream standalone stream open while the session
/// lives, and deletes the upstream's session when the gateway's ends.
async fn hold(link: Link, session: SessionHandle, links: Links, first: Option<Result<Answer, Fault>>) {
    let notes = link.bound.notes.drain(|n| async {
        if let Err(f) = link.send(n).await {
            tracing::warn!(fault = %f, "a client notification could not be forwarded upstream");
        }
    });
    tokio::select! {
        _ = session.closed() => {}
        _ = standalone(&link, &session, first) => {}
        _ = notes => {}
    }
    lock(&links).remove(&session.id());
    if let Some(sid) = &link.bound.id {
        link.upstream.delete(sid, link.bound.version.as_deref(), &link.bound.forward).await;
    }
}

/// The upstream's standalone stream onto the session's, reopened (with its
/// cursor, where the upstream gave ids) whenever it ends; over when the
/// upstream has none (`405`) or its session is gone (`404`, which ends the
/// gateway's).
async fn standalone(link: &Link, session: &SessionHandle, mut first: Option<Result<Answer, Fault>>) {
    // An upstream without sessions has no standalone stream to hold: the
    // link lives until the gateway's session ends.
    let Some(sid) = link.bound.id.clone() else { return std::future::pending().await };
    let version = link.bound.version.as_deref();
    let mut cursor: Option<String> = None;
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
        while let Ok(e) = events.next().await {
            if let Some(i) = e.id {
                cursor = Some(i);
            }
            if e.data.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            // Routed as a request's stream is (`pump::route`): a
            // notification is read no further than its method and level.
            match route(e.data) {
                Ok(Routed::Notification(_, l)) if link.bound.level.withholds(l) => {}
                Ok(Routed::Notification(b, _)) => {
                    if session.notify_raw(b).await.is_err() {
                        return;
                    }
                }
                Ok(Routed::Request(uid, method, params)) => {
                    let (link, session) = (link.clone(), session.clone());
                    tokio::spawn(
                        async move { link.relay(uid, method, params, Asker::Session(session)).await },
                    );
                }
                Ok(Routed::Response(id, _)) => {
                    tracing::warn!(%id, "an upstream response on the standalone stream: dropped")
                }
                Err(why) => tracing::warn!(%why, "an upstream event that is not a message: dropped"),
            }
        }
        tokio::time::sleep(REOPEN).await;
    }
}
