//! The pump between the two halves: a client's request forwarded upstream,
//! and every message of the upstream's answer put on the request's own
//! gapless stream (notifications as the upstream wrote them, server →
//! client requests relayed and their answers posted back upstream under
//! the upstream's ids) until the response, which becomes the handler's
//! outcome.
//!
//! An upstream fault is never silent (`docs/SPEC.md` §10.3): a stream that
//! breaks before the response is resumed once per break with the
//! upstream's own `Last-Event-ID`; a resume that is refused, or that
//! brings no event before it ends, or a stream that gave no id to resume
//! with, or an upstream that cannot be reached or answers `5xx`, answers
//! the request at once with `request_lost` (`-31002`).

use crate::sync::{lock, OnDrop};
use crate::upstream::{
    end_to_end, metadata_url, rewrite_www_authenticate, Answer, End, Events, Fault, Upstream,
};
use bytes::Bytes;
use futures_util::stream::FuturesUnordered;
use futures_util::StreamExt;
use gapless::wire::rpc_code::code;
use gapless_server::{ClientRequestError, LogLevel, RequestContext, RpcError, SessionHandle};
use reqwest::header::{HeaderMap, HeaderValue};
use serde::Deserialize;
use serde_json::{json, Value};
use std::sync::Arc;

/// The upstream's side of a gateway session: its session id (none for an
/// upstream that keeps no sessions) and the version it negotiated.
#[derive(Debug)]
pub(crate) struct Bound {
    pub(crate) id: Option<String>,
    pub(crate) version: Option<String>,
    /// The end-to-end headers of the client's `initialize` (its
    /// `Authorization`): what the gateway's own requests of the session
    /// (its standalone stream, `DELETE`, the client's notifications and
    /// answers) carry.
    pub(crate) forward: HeaderMap,
    /// The session's log level.
    pub(crate) level: Level,
}

impl Bound {
    /// The binding as the session's value, for the cluster's other nodes
    /// ([`Bound::parse`]): the upstream's session id and version, and the
    /// forwarded headers (their bytes as Latin-1 characters, so that any
    /// value goes through JSON unchanged).
    pub(crate) fn stored(&self) -> String {
        let forward: Vec<(&str, String)> = self
            .forward
            .iter()
            .map(|(k, v)| (k.as_str(), v.as_bytes().iter().map(|&b| char::from(b)).collect()))
            .collect();
        json!({"id": self.id, "version": self.version, "forward": forward}).to_string()
    }

    /// A binding as [`Bound::stored`] wrote it.
    pub(crate) fn parse(stored: &str) -> Result<Bound, String> {
        #[derive(Deserialize)]
        struct Stored {
            id: Option<String>,
            version: Option<String>,
            forward: Vec<(String, String)>,
        }
        let st: Stored = serde_json::from_str(stored).map_err(|e| e.to_string())?;
        let mut forward = HeaderMap::new();
        for (k, v) in st.forward {
            let bytes = v
                .chars()
                .map(|c| u8::try_from(u32::from(c)).map_err(|_| format!("header {k}: not Latin-1")))
                .collect::<Result<Vec<u8>, String>>()?;
            let name = reqwest::header::HeaderName::from_bytes(k.as_bytes()).map_err(|e| e.to_string())?;
            forward.append(name, HeaderValue::from_bytes(&bytes).map_err(|e| e.to_string())?);
        }
        Ok(Bound { id: st.id, version: st.version, forward, level: Level::default() })
    }
}

/// A session's client notifications, sent upstream one at a time in the
/// order they came, and each before any request that came after it (an
/// upstream may refuse a request that overtakes `notifications/initialized`).
#[derive(Debug)]
pub(crate) struct Notes {
    tx: tokio::sync::mpsc::UnboundedSender<Value>,
    rx: std::sync::Mutex<Option<tokio::sync::mpsc::UnboundedReceiver<Value>>>,
    /// Queued so far; written by `push`.
    queued: std::sync::atomic::AtomicU64,
    /// Sent so far; written by the one `drain`.
    sent: tokio::sync::watch::Sender<u64>,
}

/// Notifications a session may have queued and not sent: past it, a client
/// that floods them loses the excess (with a warning), not the gateway its
/// memory.
const MAX_QUEUED_NOTES: u64 = 1024;

impl Default for Notes {
    fn default() -> Self {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        Notes {
            tx,
            rx: std::sync::Mutex::new(Some(rx)),
            queued: Default::default(),
            sent: tokio::sync::watch::Sender::new(0),
        }
    }
}

impl Notes {
    /// Queues a notification.
    pub(crate) fn push(&self, n: Value) {
        use std::sync::atomic::Ordering::SeqCst;
        if self.queued.load(SeqCst).saturating_sub(*self.sent.borrow()) >= MAX_QUEUED_NOTES {
            tracing::warn!("over {MAX_QUEUED_NOTES} client notifications wait for the upstream: one dropped");
            return;
        }
        self.queued.fetch_add(1, SeqCst);
        let _ = self.tx.send(n);
    }

    /// Resolves once every notification queued before the call is sent.
    pub(crate) async fn flushed(&self) {
        let target = self.queued.load(std::sync::atomic::Ordering::SeqCst);
        let mut rx = self.sent.subscribe();
        let _ = rx.wait_for(|s| *s >= target).await;
    }

    /// Sends the notifications with `send`, in order, for as long as it is
    /// polled (the session's life); only the first caller drains.
    pub(crate) async fn drain<F: std::future::Future<Output = ()>>(&self, send: impl Fn(Value) -> F) {
        let Some(mut rx) = lock(&self.rx).take() else { return std::future::pending().await };
        while let Some(n) = rx.recv().await {
            send(n).await;
            self.sent.send_modify(|s| *s += 1);
        }
    }
}

/// One upstream session as the pump uses it.
#[derive(Debug, Clone)]
pub(crate) struct Link {
    pub(crate) upstream: Upstream,
    pub(crate) bound: Arc<Bound>,
    /// The client's notifications on their way upstream (from this node).
    pub(crate) notes: Arc<Notes>,
    /// The gateway's own endpoint path (its metadata's URL names it).
    pub(crate) public_path: Arc<str>,
}

/// What routing needs of a message: read without building its params or
/// result.
/// Nothing is allocated for a notification (the usual message): its id's
/// presence, its method and a log message's level are borrowed.
#[derive(Deserialize)]
struct Peek<'a> {
    #[serde(default)]
    id: Option<serde::de::IgnoredAny>,
    #[serde(default, borrow)]
    method: Option<std::borrow::Cow<'a, str>>,
    /// Only its `level` is read (a log message's).
    #[serde(default, borrow)]
    params: Option<PeekParams<'a>>,
}

#[derive(Deserialize)]
struct PeekParams<'a> {
    #[serde(default, borrow)]
    level: Option<std::borrow::Cow<'a, str>>,
}

/// The log level a client set on its session (`logging/setLevel`), which
/// the gateway holds the upstream's log messages to, whether or not the
/// upstream filters its own.
#[derive(Debug, Default)]
pub(crate) struct Level(std::sync::Mutex<Option<LogLevel>>);

impl Level {
    /// Notes a `logging/setLevel`'s params.
    pub(crate) fn set(&self, params: &Value) {
        if let Some(l) = params.get("level").and_then(Value::as_str).and_then(LogLevel::parse) {
            *lock(&self.0) = Some(l);
        }
    }

    /// Whether a log message of `level` is held back (below the session's).
    pub(crate) fn withholds(&self, level: Option<LogLevel>) -> bool {
        let min = *lock(&self.0);
        matches!((min, level), (Some(min), Some(l)) if l < min)
    }
}

/// A message of the upstream, routed.
pub(crate) enum Routed {
    /// A notification: passed on as its bytes; the level of a log message.
    Notification(Bytes, Option<LogLevel>),
    /// A server → client request: `(upstream id, method, params)`.
    Request(Value, String, Value),
    /// A response to the client's request `id`.
    Response(Value, Result<Value, RpcError>),
}

pub(crate) fn route(data: Bytes) -> Result<Routed, String> {
    let peek: Peek = serde_json::from_slice(&data).map_err(|e| format!("not a JSON-RPC message: {e}"))?;
    match (peek.id.is_some(), peek.method) {
        (false, Some(m)) => {
            let level =
                (m == "notifications/message").then(|| LogLevel::parse(&peek.params?.level?)).flatten();
            Ok(Routed::Notification(data, level))
        }
        // A request or a response: parsed whole (they are few).
        (true, Some(method)) => {
            let mut v: Value = serde_json::from_slice(&data).map_err(|e| e.to_string())?;
            let id = v.get_mut("id").map(Value::take).unwrap_or(Value::Null);
            let method = method.into_owned();
            Ok(Routed::Request(id, method, v.get_mut("params").map(Value::take).unwrap_or(Value::Null)))
        }
        (true, None) => {
            let mut v: Value = serde_json::from_slice(&data).map_err(|e| e.to_string())?;
            let id = v.get_mut("id").map(Value::take).unwrap_or(Value::Null);
            Ok(Routed::Response(id, outcome(&mut v)))
        }
        (false, None) => Err("neither a request, a notification nor a response".into()),
    }
}

/// A response's outcome: its result, or its error as the upstream gave it.
fn outcome(v: &mut Value) -> Result<Value, RpcError> {
    if let Some(r) = v.get_mut("result") {
        return Ok(r.take());
    }
    Err(rpc_error(v.get_mut("error").map(Value::take).unwrap_or(Value::Null)))
}

/// An upstream's JSON-RPC error object as the gateway's answer.
pub(crate) fn rpc_error(e: Value) -> RpcError {
    RpcError {
        code: e.get("code").and_then(Value::as_i64).unwrap_or(code::INTERNAL_ERROR),
        message: e.get("message").and_then(Value::as_str).unwrap_or("the upstream failed").to_owned(),
        data: e.get("data").cloned(),
    }
}

/// The error of a request the client cancelled (it goes nowhere: no
/// response follows a cancellation).
fn cancelled() -> RpcError {
    RpcError::new(code::INTERNAL_ERROR, "cancelled")
}

/// The explicit error of a request the upstream refused with an HTTP
/// status `4xx` and no JSON-RPC response, so it did not run: `-31004`,
/// with the status and the `WWW-Authenticate` (as the gateway serves it).
pub(crate) fn refused(status: u16, www_authenticate: Option<String>, body: &[u8]) -> RpcError {
    let mut data = json!({"status": status});
    if let Some(w) = www_authenticate {
        data["wwwAuthenticate"] = json!(w);
    }
    RpcError {
        code: code::UPSTREAM_REFUSED,
        message: format!("the upstream refused this request with {status}: {}", excerpt(body)),
        data: Some(data),
    }
}

/// The explicit error of a request whose upstream failed it: `-31002`.
pub(crate) fn lost(why: impl std::fmt::Display) -> RpcError {
    RpcError::new(
        code::REQUEST_LOST,
        format!(
            "the upstream failed before it answered this request ({why}); whether it took effect is unknown"
        ),
    )
}

impl Link {
    fn session(&self) -> Option<&str> {
        self.bound.id.as_deref()
    }

    fn version(&self) -> Option<&str> {
        self.bound.version.as_deref()
    }

    /// POSTs a message that expects no answer (a notification, a response).
    pub(crate) async fn send(&self, message: Value) -> Result<(), Fault> {
        let body = Bytes::from(message.to_string());
        match self.upstream.post(self.session(), self.version(), &self.bound.forward, body).await? {
            (Answer::Accepted | Answer::Json(_), _) => Ok(()),
            (Answer::Stream(_), _) => Ok(()),
            (Answer::Status(s, _) | Answer::Refused { status: s, .. }, _) => {
                Err(Fault(format!("the upstream answered {s}")))
            }
        }
    }

    /// Forwards the request `method` of `ctx` and pumps its answer. However
    /// the call ends before the upstream answered it (the client cancelled
    /// it and the transport dropped this future, or the upstream failed),
    /// the upstream is told it is cancelled.
    pub(crate) async fn call(
        &self,
        method: &str,
        params: Value,
        ctx: &RequestContext,
    ) -> Result<Value, RpcError> {
        self.notes.flushed().await;
        let (link, cid) = (self.clone(), ctx.request_id().clone());
        let abandon = OnDrop::new(move || {
            tokio::spawn(async move {
                let n = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": cid}});
                if let Err(f) = link.send(n).await {
                    tracing::debug!(fault = %f, "cancellation not forwarded");
                }
            });
        });
        match self.exchange(method, params, ctx).await {
            Ok(answer) => {
                abandon.disarm();
                answer
            }
            Err(e) => Err(e),
        }
    }

    /// The upstream's answer to the request (`Ok`, itself a result or the
    /// upstream's error), or why there is none (`Err`: the gateway's own
    /// explicit error).
    async fn exchange(
        &self,
        method: &str,
        params: Value,
        ctx: &RequestContext,
    ) -> Result<Result<Value, RpcError>, RpcError> {
        let id = ctx.request_id().clone();
        // A request without params goes without them (`"params": null` is
        // not a valid MCP request).
        let mut request = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            request["params"] = params;
        }
        let body = Bytes::from(request.to_string());
        let forward = self.forward(ctx, method);
        let posted = tokio::select! {
            a = self.upstream.post(self.session(), self.version(), &forward, body) => a,
            _ = ctx.cancelled() => return Err(cancelled()),
        };
        match posted {
            Err(f) => Err(lost(f)),
            Ok((Answer::Json(b), _)) => match route(b) {
                Ok(Routed::Response(_, o)) => Ok(o),
                _ => Err(lost("the upstream's JSON answer is not this request's response")),
            },
            Ok((Answer::Stream(events), _)) => self.pump(events, &id, ctx).await,
            Ok((Answer::Accepted, _)) => Err(lost("the upstream answered the request with 202")),
            Ok((Answer::Status(404, _), _)) if self.session().is_some() => {
                Err(gone(ctx, "the upstream's session is gone (404)").await)
            }
            Ok((Answer::Refused { status, www_authenticate, body }, _)) => {
                let www = www_authenticate.map(|w| {
                    let url = ctx.headers().and_then(|h| metadata_url(h, &self.public_path));
                    rewrite_www_authenticate(&w, url.as_deref())
                });
                Err(refused(status, www, &body))
            }
            Ok((Answer::Status(s, body), _)) => match route(body.clone()) {
                Ok(Routed::Response(rid, o)) if rid == id => Ok(o),
                _ if (400..500).contains(&s) => Err(refused(s, None, &body)),
                _ => Err(lost(format!("the upstream answered {s}: {}", excerpt(&body)))),
            },
        }
    }

    /// The headers request `method` of `ctx` goes upstream with: the
    /// client's end-to-end ones, else the session's; on a 2026-07-28
    /// request (no session) with `Mcp-Method` where the client's request
    /// had none (the transport's own `tools/list`, which has no `Mcp-Name`).
    fn forward(&self, ctx: &RequestContext, method: &str) -> HeaderMap {
        let mut h = match ctx.headers() {
            Some(h) => end_to_end(h),
            None => self.bound.forward.clone(),
        };
        if ctx.session().is_none() && !h.contains_key("mcp-method") {
            if let Ok(v) = HeaderValue::from_str(method) {
                h.insert("mcp-method", v);
            }
        }
        h
    }

    /// Every message of the request's upstream stream onto its gapless
    /// stream, until its response; breaks resumed with the upstream's ids.
    async fn pump(
        &self,
        mut events: Events,
        id: &Value,
        ctx: &RequestContext,
    ) -> Result<Result<Value, RpcError>, RpcError> {
        let mut cursor: Option<String> = None;
        let mut since_resume = 0usize;
        // Set while a resume has brought nothing yet: by then it must.
        let mut resumed_by: Option<tokio::time::Instant> = None;
        let mut relays = FuturesUnordered::new();
        loop {
            let next = tokio::select! {
                e = events.next() => e,
                _ = sleep_until(resumed_by), if resumed_by.is_some() => {
                    return Err(lost(format!(
                        "a resume of its stream brought nothing in {} s while the request is pending",
                        RESUME_BOUND.as_secs()
                    )));
                }
                Some(()) = relays.next(), if !relays.is_empty() => continue,
                _ = ctx.cancelled() => return Err(cancelled()),
            };
            let ending = match next {
                Ok(e) => {
                    since_resume += 1;
                    resumed_by = None;
                    if let Some(i) = e.id {
                        cursor = Some(i);
                    }
                    if e.data.iter().all(u8::is_ascii_whitespace) {
                        continue;
                    }
                    match route(e.data) {
                        Ok(Routed::Response(rid, o)) if rid == *id => return Ok(o),
                        Ok(Routed::Response(rid, _)) => {
                            tracing::warn!(id = %rid, "an upstream response for another request on this stream: dropped");
                        }
                        Ok(Routed::Notification(_, l)) if self.bound.level.withholds(l) => {}
                        Ok(Routed::Notification(b, _)) => {
                            if let Err(e) = ctx.notify_raw(b).await {
                                return Err(lost(format!("the gateway's session cannot take it: {e}")));
                            }
                        }
                        Ok(Routed::Request(uid, method, params)) => {
                            relays.push(self.relay(uid, method, params, Asker::Request(ctx)))
                        }
                        Err(why) => tracing::warn!(%why, "an upstream event that is not a message: dropped"),
                    }
                    continue;
                }
                Err(e) => e,
            };
            let Some(c) = cursor.clone() else {
                return Err(lost(format!(
                    "its stream {} before the response, and it gave no event ids to resume it with",
                    ended(&ending)
                )));
            };
            if since_resume == 0 {
                return Err(lost(format!(
                    "a resume of its stream after {c} brought nothing before it {}",
                    ended(&ending)
                )));
            }
            since_resume = 0;
            let by = tokio::time::Instant::now() + RESUME_BOUND;
            resumed_by = Some(by);
            let Ok(resumed) = tokio::time::timeout_at(by, self.resume(&c)).await else {
                return Err(lost(format!(
                    "it did not answer the resume after {c} in {} s",
                    RESUME_BOUND.as_secs()
                )));
            };
            events = match resumed {
                Ok(Answer::Stream(ev)) => ev,
                Ok(Answer::Status(404, _)) if self.session().is_some() => {
                    return Err(gone(ctx, "the upstream's session is gone (404)").await)
                }
                Ok(Answer::Status(s, _) | Answer::Refused { status: s, .. }) => {
                    return Err(lost(format!("it answered the resume after {c} with {s}")))
                }
                Ok(_) => return Err(lost(format!("it answered the resume after {c} without a stream"))),
                Err(f) => return Err(lost(f)),
            };
        }
    }

    /// A resume of the stream of `cursor`. A `GET` is safe to repeat, and
    /// the break that made it needed may have left the client's pooled
    /// connections to the upstream dead: one that fails before any answer
    /// is tried again on a new connection, 0.1 s later and then 0.2 s (the
    /// caller bounds the whole).
    async fn resume(&self, cursor: &str) -> Result<Answer, Fault> {
        let mut wait = std::time::Duration::from_millis(100);
        loop {
            let r = self.upstream.get(
                self.session().unwrap_or(""),
                self.version(),
                &self.bound.forward,
                Some(cursor),
            );
            match r.await {
                Err(f) if wait <= std::time::Duration::from_millis(200) => {
                    tracing::debug!(fault = %f, "resume failed before an answer; trying again");
                    tokio::time::sleep(wait).await;
                    wait *= 2;
                }
                other => return other,
            }
        }
    }

    /// Asks the client what the upstream asked (`uid`: the upstream's id)
    /// and posts the answer back upstream under that id.
    pub(crate) async fn relay(&self, uid: Value, method: String, params: Value, asker: Asker<'_>) {
        let answer = asker.answer(uid, &method, params).await;
        if let Err(f) = self.send(answer).await {
            tracing::warn!(fault = %f, method, "the client's answer could not be posted upstream");
        }
    }
}

/// How long a resumed upstream stream may stay silent before the pending
/// request is answered `request_lost` (seed 003: an empty replay while a
/// request is pending is suspect, not caught up).
pub(crate) const RESUME_BOUND: std::time::Duration = std::time::Duration::from_secs(4);

async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Who asks the client: a request's context (its stream) or the session
/// (the standalone stream).
pub(crate) enum Asker<'a> {
    Request(&'a RequestContext),
    Session(SessionHandle),
}

impl Asker<'_> {
    async fn ask(&self, method: &str, params: Value) -> Result<Value, ClientRequestError> {
        match self {
            Asker::Request(ctx) => ctx.request(method, params).await,
            Asker::Session(s) => s.request(method, params).await,
        }
    }

    /// Asks the client what the upstream asked (`uid`: the upstream's id);
    /// the answer to give the upstream, under that id.
    pub(crate) async fn answer(&self, uid: Value, method: &str, params: Value) -> Value {
        match self.ask(method, params).await {
            Ok(result) => json!({"jsonrpc": "2.0", "id": uid, "result": result}),
            Err(ClientRequestError::Error(e)) => json!({"jsonrpc": "2.0", "id": uid, "error": e}),
            Err(e) => {
                json!({"jsonrpc": "2.0", "id": uid, "error": {"code": code::INTERNAL_ERROR, "message": e.to_string()}})
            }
        }
    }
}

/// The start of an upstream's body, for an error message.
fn excerpt(body: &[u8]) -> String {
    let text = String::from_utf8_lossy(&body[..body.len().min(200)]);
    text.trim().to_owned()
}

fn ended(end: &End) -> String {
    match end {
        End::Closed => "ended".into(),
        End::Broken(why) => format!("broke ({why})"),
    }
}

/// The upstream's session (or process) is gone: the request's explicit
/// error, which the transport publishes as its response, and the gateway's
/// session ends [`GONE_GRACE`] later (the client's next request is `404`,
/// and it initializes anew).
pub(crate) async fn gone(ctx: &RequestContext, why: &'static str) -> RpcError {
    if let Some(s) = ctx.session() {
        end_soon(s, why);
    }
    lost(why)
}

/// Ends `session` after [`GONE_GRACE`]: an ended session's streams end at
/// once, so an explicit error published just before is given a moment to
/// be read first (a client that misses it still finds the session 404,
/// never a silent stream).
pub(crate) fn end_soon(session: SessionHandle, why: &'static str) {
    tokio::spawn(async move {
        tokio::time::sleep(GONE_GRACE).await;
        end(&session, why);
    });
}

/// How long a session whose upstream session is gone lives on for the
/// request that found out to be answered.
const GONE_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

/// Ends the gateway's session because its upstream session ended.
pub(crate) fn end(session: &SessionHandle, why: &str) {
    tracing::info!(session = %session.id(), why, "the gateway's session ends");
    session.end();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_binding_is_stored_and_read_back_whole() {
        let mut forward = HeaderMap::new();
        forward.append("authorization", HeaderValue::from_static("Bearer t"));
        forward.append("x-many", HeaderValue::from_static("1"));
        forward.append("x-many", HeaderValue::from_static("2"));
        forward.append("x-bytes", HeaderValue::from_bytes(b"caf\xe9 \xff").unwrap());
        let b = Bound {
            id: Some("u-1".into()),
            version: Some("2025-11-25".into()),
            forward,
            level: Level::default(),
        };
        let back = Bound::parse(&b.stored()).unwrap();
        assert_eq!((back.id.as_deref(), back.version.as_deref()), (Some("u-1"), Some("2025-11-25")));
        assert_eq!(back.forward, b.forward);
        let none = Bound { id: None, version: None, forward: HeaderMap::new(), level: Level::default() };
        let back = Bound::parse(&none.stored()).unwrap();
        assert_eq!((back.id, back.version, back.forward.len()), (None, None, 0));
        assert!(Bound::parse("{").is_err());
        assert!(Bound::parse(r#"{"id":null,"version":null,"forward":[["x","\u0100"]]}"#).is_err());
    }

    #[test]
    fn messages_are_routed_by_their_id_and_method() {
        let r = |s: &'static str| route(Bytes::from_static(s.as_bytes()));
        assert!(matches!(
            r(r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#),
            Ok(Routed::Notification(_, None))
        ));
        assert!(matches!(
            r(
                r#"{"jsonrpc":"2.0","method":"notifications/message","params":{"data":{"x":[1]},"level":"warning"}}"#
            ),
            Ok(Routed::Notification(_, Some(LogLevel::Warning)))
        ));
        match r(r#"{"jsonrpc":"2.0","id":"s1","method":"sampling/createMessage","params":{"a":1}}"#) {
            Ok(Routed::Request(id, m, p)) => {
                assert_eq!((id, m, p), (json!("s1"), "sampling/createMessage".into(), json!({"a":1})))
            }
            _ => panic!("a request"),
        }
        match r(r#"{"jsonrpc":"2.0","id":3,"result":{"x":1}}"#) {
            Ok(Routed::Response(id, Ok(v))) => assert_eq!((id, v), (json!(3), json!({"x":1}))),
            _ => panic!("a result"),
        }
        match r(r#"{"jsonrpc":"2.0","id":3,"error":{"code":-32602,"message":"bad","data":[1]}}"#) {
            Ok(Routed::Response(_, Err(e))) => {
                assert_eq!((e.code, e.message.as_str(), e.data), (-32602, "bad", Some(json!([1]))))
            }
            _ => panic!("an error"),
        }
        assert!(r("{}").is_err());
        assert!(r("not json").is_err());
    }
}
