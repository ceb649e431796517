//! Arbitrary sequences of HTTP requests on `gapless-server`'s axum router,
//! in process (`tower::ServiceExt::oneshot`, no sockets), on a
//! current-thread Tokio runtime with a paused clock built once per process.
//!
//! Requests: `initialize`, tool calls of `gapless_fuzz::http::FuzzHost`
//! (events on the request's stream or the standalone one, held requests,
//! server → client requests), notifications (cancellation), responses,
//! resumes with `Last-Event-ID` (real cursors, mutated, of other sessions,
//! ahead, garbage), standalone GETs, upgrade POSTs with every body shape,
//! socket handshakes, DELETEs, and garbage; session ids valid, stale,
//! uppercased, of another caller, garbage or not UTF-8; and any one or two
//! headers bent (Accept, Content-Type, MCP-Protocol-Version, Origin, Host,
//! sizes, method). SSE bodies are read to their end, a few chunks at a
//! time, or held open and read after later requests.
//!
//! A model keeps every session's full history in a `ModelRing` (which
//! events each stream holds, what each delivered chunk marked) and panics on:
//! * any 5xx but `503 too_many_sessions` when the model's session count is
//!   at the limit; any panic (libFuzzer reports it);
//! * a refusal whose body is not the §5 JSON `{"error", "message", ...}`
//!   with the kind's status, or whose kind differs from what the guard's
//!   order (§5) and the decision table (`gapless_fuzz::decide`, §4.2) give,
//!   including the numbers in its body;
//! * an SSE event that is not the next event of its stream in the model
//!   (id and payload), a body that ends while its stream has more to send
//!   and nothing ended it, or that stalls while the model has a retained
//!   event for it: so a `200` resume delivers exactly the events after the
//!   cursor, then live ones;
//! * an upgrade's `replay_from`/`replay_count` that are not the model's;
//! * the engine's stream records (first, high, count, delivered mark,
//!   ended) or head/oldest drifting from the model after any request.
#![no_main]

use arbitrary::Arbitrary;
use axum::body::Body;
use axum::http::{HeaderValue, Method, Request, Response, StatusCode};
use axum::response::IntoResponse;
use axum::Router;
use bytes::Bytes;
use gapless::{ErrorKind, Hub, HubConfig, RingConfig, StreamId};
use gapless_fuzz::decide::{self, Missing, Outcome, RefSession, Target};
use gapless_fuzz::http::{self as h, Chunk, FuzzHost, Refused};
use gapless_fuzz::model_ring::ModelRing;
use gapless_fuzz::wire;
use gapless_server::{ApiError, McpServer, ServerConfig, SUPPORTED_VERSIONS};
use http_body_util::BodyExt;
use libfuzzer_sys::fuzz_target;
use serde_json::{json, Value};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, OnceLock};
use std::time::Duration;
use tower::ServiceExt;

const OWNERS: [Option<&str>; 3] = [None, Some("alice"), Some("bob")];
const MAX_SESSIONS: usize = 5;
const MAX_INFLIGHT: usize = 2;
const MAX_BODY: usize = 1024;
const MAX_HEADERS: usize = 2048;
const MAX_OPS: usize = 48;
const MAX_HELD: usize = 4;
const MAX_TICKETS: usize = 4;
/// How long a read waits for the next chunk (virtual time).
const READ_WAIT: Duration = Duration::from_millis(50);
/// How long a request may take before it counts as hanging (virtual).
const CALL_WAIT: Duration = Duration::from_secs(5);

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Who {
    /// Which model session (live ones first).
    session: u8,
    /// < 200: the session's owner; else one of `OWNERS`.
    owner: u8,
    /// < 170: its id; < 185: uppercased; < 200: absent; < 215: a dead
    /// session's id; < 230: not UTF-8; else garbage.
    sid: u8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct Noise {
    /// < 150: every header as a client sends it; < 225: `a` bent; else `a`
    /// and `b`.
    level: u8,
    a: (u8, u8),
    b: (u8, u8),
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Read {
    /// To its end, or until it waits.
    All,
    /// At most `n % 3 + 1` chunks, then held.
    Some(u8),
    /// Held unread.
    Hold,
    /// Dropped unread.
    Drop,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Call {
    Emit { n: u8, standalone: bool },
    Hold { n: u8 },
    Ask,
    Ping,
    SetLevel { ok: bool },
    Reinit,
    UnknownMethod,
    UnknownTool,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
struct CursorPick {
    /// < 150: an event of the named session; < 180: of another one; < 200:
    /// ahead of the head; < 235: canned; else absent.
    kind: u8,
    /// Which event: < 0x4000 near head; < 0x8000 near oldest; < 0xc000 a
    /// stream's delivered mark; else any.
    pick: u16,
    mutation: Mutation,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum Mutation {
    Exact,
    Exact2,
    Exact3,
    SeqUp(u8),
    SeqDown(u8),
    StreamTo(u8),
    Seq0,
    NsXor(u64),
    LeadingZero,
    UpperNs,
    Truncate(u8),
    NotUtf8,
}

#[derive(Arbitrary, Debug, Clone, Copy)]
enum UpgradeBody {
    Cursor(CursorPick),
    Null,
    Number,
    Empty,
    Extra,
    Array,
    NotJson,
}

#[derive(Arbitrary, Debug, Clone)]
enum Op {
    Initialize { owner: u8, version: u8, json_only: bool, noise: Noise, read: Read },
    Call { who: Who, call: Call, string_id: bool, json_only: bool, noise: Noise, read: Read },
    Cancel { who: Who, which: u8, noise: Noise },
    Notify { who: Who, noise: Noise },
    Respond { who: Who, which: u8, error: bool, noise: Noise },
    Resume { who: Who, cursor: CursorPick, noise: Noise, read: Read },
    Standalone { who: Who, noise: Noise, read: Read },
    Upgrade { who: Who, body: UpgradeBody, noise: Noise },
    Socket { who: Who, ticket: u8, noise: Noise },
    Delete { who: Who, noise: Noise },
    Raw { method: u8, path: u8, sid: bool, body: Vec<u8>, noise: Noise },
    ReadHeld { k: u8, chunks: u8 },
    DropHeld { k: u8 },
}

#[derive(Arbitrary, Debug)]
struct Input {
    capacity: u8,
    ops: Vec<Op>,
}

/// What the model knows an event's payload is.
#[derive(Clone, Debug)]
enum Expect {
    Priming,
    Raw(Bytes),
    /// A response to `id`: its result, or its error code.
    Response(Value, Result<Value, i64>),
    /// A server → client request with this id.
    ClientRequest(String),
}

/// A request in flight in the model: its stream and, for `ask`, the
/// server → client request id it waits on.
#[derive(Clone, Debug)]
struct Inflight {
    stream: u64,
    ask: Option<String>,
}

struct MSession {
    id: String,
    owner: Option<&'static str>,
    ns: u64,
    live: bool,
    ring: ModelRing,
    content: Vec<Expect>,
    next_id: u64,
    next_ask: u64,
    inflight: BTreeMap<String, (Value, Inflight)>,
    tickets: usize,
    issued: Vec<String>,
}

impl MSession {
    fn publish(&mut self, stream: u64, e: Expect) -> u64 {
        self.content.push(e);
        self.ring.publish(stream, Bytes::new())
    }

    fn end(&mut self, stream: u64) {
        self.ring.stream_mut(stream).ended = true;
    }
}

/// An SSE body the target holds open.
struct Held {
    body: Body,
    sess: usize,
    stream: u64,
    /// Seq of the last event of its stream it gave (or the cursor).
    pos: u64,
    /// Last event of the chunk the previous poll returned (delivered when
    /// the body is polled again).
    unmarked: Option<u64>,
    /// Its stream's high-water seq when it subscribed: the events up to it
    /// are pinned (a snapshot), sent even if evicted since.
    pinned: u64,
    /// Something ended its connection: the next poll must end it.
    must_end: bool,
    gen: u64,
    what: &'static str,
}

/// A request as sent, for the guard's expectations.
struct Sent {
    method: Method,
    route: Route,
    headers: Vec<(&'static str, Vec<u8>)>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route {
    Endpoint,
    Upgrade,
    Socket,
    Elsewhere,
}

struct World {
    router: Router,
    hub: Arc<Hub>,
    capacity: usize,
    sessions: Vec<MSession>,
    held: Vec<Held>,
    /// The connection each (session, stream) lane has now, by generation.
    lanes: HashMap<(usize, u64), u64>,
    next_gen: u64,
    tags: u64,
}

fn fail(what: &str) -> ! {
    panic!("{what}")
}

fn header_str(r: &Response<Body>, name: &str) -> Option<String> {
    r.headers().get(name).and_then(|v| v.to_str().ok()).map(str::to_owned)
}

async fn body_bytes(r: Response<Body>) -> Bytes {
    match tokio::time::timeout(CALL_WAIT, r.into_body().collect()).await {
        Ok(Ok(b)) => b.to_bytes(),
        Ok(Err(e)) => fail(&format!("body error: {e}")),
        Err(_) => fail("a non-SSE body never ended"),
    }
}

impl World {
    fn live(&self) -> Vec<usize> {
        (0..self.sessions.len()).filter(|&i| self.sessions[i].live).collect()
    }

    fn pick(&self, k: u8) -> Option<usize> {
        let live = self.live();
        if !live.is_empty() && k < 220 {
            return Some(live[usize::from(k) % live.len()]);
        }
        (!self.sessions.is_empty()).then(|| usize::from(k) % self.sessions.len())
    }

    /// The session id header (`None`: absent) and the session the request
    /// names for its caller (`found`), with the owner.
    fn who(&self, w: Who) -> (Option<Vec<u8>>, Option<&'static str>, Option<usize>) {
        let named = self.pick(w.session);
        let owner = match (w.owner, named) {
            (0..=199, Some(i)) => self.sessions[i].owner,
            (k, _) => OWNERS[usize::from(k) % OWNERS.len()],
        };
        let dead = self.sessions.iter().find(|s| !s.live).map(|s| s.id.clone());
        let sid: Option<Vec<u8>> = match w.sid {
            0..=169 => named.map(|i| self.sessions[i].id.clone().into_bytes()),
            170..=184 => named.map(|i| self.sessions[i].id.to_uppercase().into_bytes()),
            185..=199 => None,
            200..=214 => dead.or_else(|| named.map(|i| self.sessions[i].id.clone())).map(String::into_bytes),
            215..=229 => Some(b"\xff\xfe0123".to_vec()),
            k => Some(
                ["", "x", "00", &"0".repeat(32), &"g".repeat(32), &"a".repeat(33)][usize::from(k) % 6]
                    .as_bytes()
                    .to_vec(),
            ),
        };
        let found = self.found(sid_str(&sid), owner);
        (sid, owner, found)
    }

    /// The live session `sid` names for `owner` (exact string).
    fn found(&self, sid: Option<&str>, owner: Option<&str>) -> Option<usize> {
        let sid = sid?;
        let v: Vec<usize> = (0..self.sessions.len())
            .filter(|&i| {
                self.sessions[i].live && self.sessions[i].id == sid && self.sessions[i].owner == owner
            })
            .collect();
        assert!(v.len() <= 1, "two live sessions under one id");
        v.first().copied()
    }

    // ------------------------------------------------------------ requests

    // One call per request shape keeps each op readable; a builder would
    // be longer than the ten arguments.
    #[allow(clippy::too_many_arguments)]
    fn request(
        &self,
        method: Method,
        path: &str,
        route: Route,
        sid: Option<&[u8]>,
        owner: Option<&str>,
        accept: Option<&'static str>,
        extra: &[(&'static str, Vec<u8>)],
        noise: Noise,
        body: Vec<u8>,
    ) -> (Request<Body>, Sent) {
        let post = method == Method::POST;
        let mut headers: Vec<(&'static str, Vec<u8>)> = vec![("host", b"localhost:8080".to_vec())];
        if let Some(a) = accept {
            headers.push(("accept", a.as_bytes().to_vec()));
        }
        if post {
            headers.push(("content-type", b"application/json".to_vec()));
        }
        if let Some(s) = sid {
            headers.push(("mcp-session-id", s.to_vec()));
        }
        if let Some(o) = owner {
            headers.push(("x-fuzz-user", o.as_bytes().to_vec()));
        }
        headers.extend(extra.iter().cloned());
        let mut method = method;
        if noise.level >= 150 {
            bend(&mut headers, &mut method, noise.a);
        }
        if noise.level >= 225 {
            bend(&mut headers, &mut method, noise.b);
        }
        let mut b = Request::builder().method(method.clone()).uri(path);
        for (k, v) in &headers {
            b = b.header(*k, HeaderValue::from_bytes(v).expect("valid header bytes"));
        }
        let req = b.body(Body::from(body)).expect("a valid request");
        (req, Sent { method, route, headers })
    }

    async fn send(&self, req: Request<Body>) -> Option<Response<Body>> {
        let call = self.router.clone().oneshot(req);
        match tokio::time::timeout(CALL_WAIT, call).await {
            Ok(Ok(r)) => Some(r),
            Ok(Err(e)) => match e {},
            Err(_) => None,
        }
    }

    /// Sends; checks the guard's refusal (if the model expects one) and the
    /// shape of any refusal. `Ok(response)` when the guard let it through
    /// and it was answered 2xx; `Err(refusal)` for a refusal past the guard.
    async fn exchange(&mut self, req: Request<Body>, sent: &Sent) -> Exchange {
        let guard = guard_expect(sent);
        let Some(r) = self.send(req).await else {
            if let Some(g) = guard {
                fail(&format!("the guard should refuse {g:?} at once; the request hangs"));
            }
            return Exchange::Hang;
        };
        settle().await;
        let status = r.status();
        if status.is_server_error() || status.is_client_error() {
            let ct = header_str(&r, "content-type");
            let body = body_bytes(r).await;
            if sent.method == Method::HEAD {
                // A HEAD answer has no body (axum drops it); its head is the
                // refusal's.
                assert!(body.is_empty(), "a HEAD answer with a body");
                assert_eq!(ct.as_deref(), Some("application/json"), "HEAD refusal content type");
                let want = guard.map_or(status.as_u16(), ErrorKind::http_status);
                assert_eq!(status.as_u16(), want, "HEAD refusal status (guard expects {guard:?})");
                assert!(!status.is_server_error(), "a 5xx on HEAD");
                return Exchange::Guarded;
            }
            let jsonrpc_ok = sent.method == Method::POST && sent.route == Route::Endpoint;
            let refused = h::check_refusal(status.as_u16(), ct.as_deref(), &body, jsonrpc_ok)
                .unwrap_or_else(|e| fail(&format!("{} {:?}: {e}", sent.method, sent.route)));
            if let Some(g) = guard {
                match &refused {
                    Refused::Kind(k, _) if *k == g => {}
                    other => fail(&format!("guard: expected {g:?}, got {other:?}")),
                }
                return Exchange::Guarded;
            }
            if sent.route == Route::Elsewhere {
                assert!(
                    matches!(refused, Refused::Kind(ErrorKind::NotFound, _)),
                    "a path the router does not serve: {refused:?}"
                );
                return Exchange::Guarded;
            }
            if let Refused::Kind(k, _) = &refused {
                if status.is_server_error() && *k != ErrorKind::TooManySessions {
                    fail(&format!("a 5xx: {refused:?}"));
                }
            }
            return Exchange::Refused(refused);
        }
        if let Some(g) = guard {
            fail(&format!("the guard should refuse {g:?}; got {status}"));
        }
        assert!(sent.route != Route::Elsewhere, "a path the router does not serve answered {status}");
        Exchange::Ok(r)
    }

    // ---------------------------------------------------------------- model

    /// Checks every live session's records against the model and learns
    /// which the engine reclaimed (allowed only when ended and evicted).
    fn sync(&mut self) {
        for s in &mut self.sessions {
            if !s.live {
                continue;
            }
            let session = self
                .hub
                .get_str(&s.id, s.owner)
                .unwrap_or_else(|e| fail(&format!("live session gone: {e:?}")));
            let r = session.reader();
            assert_eq!(
                (r.head().0, r.oldest().0),
                (s.ring.head(), s.ring.oldest()),
                "head, oldest of {}",
                s.id
            );
            let oldest = s.ring.oldest();
            for id in 1..=s.ring.streams.len() as u64 {
                let st = s.ring.stream_mut(id);
                match r.stream(StreamId(id)) {
                    Some(info) => {
                        assert!(!st.reclaimed, "stream {id}'s record came back");
                        assert_eq!(
                            (info.first.0, info.high.0, info.published, info.delivered.0, info.ended),
                            (st.first(), st.high(), st.seqs.len() as u64, st.delivered, st.ended),
                            "stream {id} record (first, high, published, delivered, ended)"
                        );
                    }
                    None => {
                        assert!(st.reclaimable(oldest), "stream {id} reclaimed too early: {st:?}");
                        if !st.reclaimed {
                            st.reclaimed = true;
                            st.delivered_at_reclaim = st.delivered;
                        }
                    }
                }
            }
        }
        assert_eq!(self.hub.len(), self.live().len(), "live sessions");
    }

    /// A new connection on a lane: the one it had must end.
    fn attach(&mut self, sess: usize, stream: u64) -> u64 {
        self.next_gen += 1;
        for b in self.held.iter_mut().filter(|b| b.sess == sess && b.stream == stream) {
            b.must_end = true;
        }
        self.lanes.insert((sess, stream), self.next_gen);
        self.next_gen
    }

    /// Every SSE connection of a session must end (upgrade, delete).
    fn end_connections(&mut self, sess: usize) {
        for b in self.held.iter_mut().filter(|b| b.sess == sess) {
            b.must_end = true;
        }
        self.lanes.retain(|(s, _), _| *s != sess);
    }

    fn drop_held(&mut self, k: usize) {
        let b = self.held.remove(k);
        if self.lanes.get(&(b.sess, b.stream)) == Some(&b.gen) {
            self.lanes.remove(&(b.sess, b.stream));
        }
    }

    /// The events `stream` of `sess` has after `pos`: the next one's seq.
    fn next_of(&self, sess: usize, stream: u64, pos: u64) -> Option<u64> {
        self.sessions[sess].ring.stream(stream).seqs.iter().copied().find(|&q| q > pos)
    }

    fn check_event(&self, b: &Held, ev: &h::SseEvent) -> u64 {
        let s = &self.sessions[b.sess];
        let Some(seq) = self.next_of(b.sess, b.stream, b.pos) else {
            fail(&format!("{}: an event beyond its stream's head: {ev:?}", b.what))
        };
        let want = wire::format(s.ns, b.stream, seq);
        assert_eq!(
            ev.id.as_deref(),
            Some(want.as_str()),
            "{}: next event of stream {} after {}",
            b.what,
            b.stream,
            b.pos
        );
        assert!(
            s.ring.retained(seq) || seq <= b.pinned,
            "{}: sent seq {seq}, which the model has evicted (pinned up to {})",
            b.what,
            b.pinned
        );
        match &s.content[(seq - 1) as usize] {
            Expect::Priming => {
                assert_eq!(ev.data, "", "{}: priming event {want} has data", b.what);
                assert_eq!(ev.retry, Some(1000), "{}: priming event without retry", b.what);
            }
            Expect::Raw(p) => assert_eq!(ev.data.as_bytes(), &p[..], "{}: payload of {want}", b.what),
            Expect::Response(id, outcome) => {
                let v: Value = serde_json::from_str(&ev.data).expect("a response event is JSON");
                assert_eq!(&v["id"], id, "{}: response id of {want}", b.what);
                match outcome {
                    Ok(r) => assert_eq!(&v["result"], r, "{}: result of {want}", b.what),
                    Err(c) => {
                        assert_eq!(v["error"]["code"].as_i64(), Some(*c), "{}: error of {want}: {v}", b.what)
                    }
                }
            }
            Expect::ClientRequest(id) => {
                let v: Value = serde_json::from_str(&ev.data).expect("a request event is JSON");
                assert_eq!(
                    (v["id"].as_str(), v["method"].as_str()),
                    (Some(id.as_str()), Some("sampling/createMessage"))
                );
            }
        }
        seq
    }

    /// Reads held body `k`: at most `chunks` chunks, until it ends or waits.
    /// Returns whether it ended (then it is dropped).
    async fn read(&mut self, k: usize, chunks: usize) -> bool {
        for _ in 0..chunks {
            // The body marks its previous chunk delivered when it is polled
            // again, through the ring's reader (lost if the record went).
            self.sync();
            let sess = self.held[k].sess;
            let mark = self.held[k].unmarked.take().filter(|&seq| {
                let r = &self.sessions[sess].ring;
                !r.stream(r.event(seq).stream).reclaimed
            });
            let frame = tokio::time::timeout(READ_WAIT, self.held[k].body.frame()).await;
            if let Some(seq) = mark {
                self.sessions[sess].ring.deliver(seq);
            }
            settle().await;
            let b = &self.held[k];
            let next = self.next_of(b.sess, b.stream, b.pos);
            let s = &self.sessions[b.sess];
            let st = s.ring.stream(b.stream);
            match frame {
                Ok(Some(Ok(f))) => {
                    let Ok(data) = f.into_data() else { fail("an SSE body sent trailers") };
                    assert!(!b.must_end, "{}: sent a chunk after its connection was ended", b.what);
                    let chunk: Chunk = h::parse_chunk(&data).unwrap_or_else(|e| fail(&e));
                    let mut last = None;
                    for ev in &chunk.events {
                        let seq = self.check_event(&self.held[k], ev);
                        self.held[k].pos = seq;
                        last = Some(seq);
                    }
                    self.held[k].unmarked = last;
                }
                Ok(Some(Err(e))) => fail(&format!("{}: body error {e}", b.what)),
                Ok(None) => {
                    let done = st.ended && next.is_none();
                    let lagged = next.is_some_and(|q| q > b.pinned && q < s.ring.oldest());
                    assert!(
                        b.must_end || done || lagged || !s.live,
                        "{}: ended early at {} (next {next:?}, stream ended {}, oldest {})",
                        b.what,
                        b.pos,
                        st.ended,
                        s.ring.oldest()
                    );
                    self.drop_held(k);
                    return true;
                }
                Err(_) => {
                    assert!(!b.must_end, "{}: its connection was ended, yet it waits", b.what);
                    assert!(
                        next.is_none(),
                        "{}: waits at {} while seq {next:?} of its stream is {}",
                        b.what,
                        b.pos,
                        if next.is_some_and(|q| s.ring.retained(q)) {
                            "retained"
                        } else {
                            "evicted (it should end)"
                        }
                    );
                    assert!(!st.ended, "{}: its stream ended and was read to the end, yet it waits", b.what);
                    return false;
                }
            }
        }
        false
    }

    /// A new SSE body: read it as `read` says, hold it or drop it.
    #[allow(clippy::too_many_arguments)]
    async fn take_body(
        &mut self,
        r: Response<Body>,
        sess: usize,
        stream: u64,
        pos: u64,
        pinned: u64,
        what: &'static str,
        read: Read,
    ) {
        assert_eq!(header_str(&r, "content-type").as_deref(), Some("text/event-stream"), "{what}");
        assert!(r.headers().get("last-event-id").is_none(), "a Last-Event-ID response header");
        let gen = self.attach(sess, stream);
        self.held.push(Held {
            body: r.into_body(),
            sess,
            stream,
            pos,
            unmarked: None,
            pinned,
            must_end: false,
            gen,
            what,
        });
        let k = self.held.len() - 1;
        let ended = match read {
            Read::All => self.read(k, 64).await,
            Read::Some(n) => self.read(k, usize::from(n % 3) + 1).await,
            Read::Hold => false,
            Read::Drop => {
                self.drop_held(k);
                true
            }
        };
        if !ended && matches!(read, Read::All) {
            // Waiting: every event so far was checked; let it go.
            let k = self.held.len() - 1;
            self.drop_held(k);
        }
        while self.held.len() > MAX_HELD {
            self.drop_held(0);
        }
    }

    fn tag(&mut self) -> String {
        self.tags += 1;
        format!("t{}", self.tags)
    }

    // ------------------------------------------------------------------ ops

    async fn apply(&mut self, op: Op) {
        match op {
            Op::Initialize { owner, version, json_only, noise, read } => {
                self.initialize(owner, version, json_only, noise, read).await
            }
            Op::Call { who, call, string_id, json_only, noise, read } => {
                self.call(who, call, string_id, json_only, noise, read).await
            }
            Op::Cancel { who, which, noise } => self.cancel(who, which, noise).await,
            Op::Notify { who, noise } => {
                let body = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
                self.simple_post(who, body, noise).await;
            }
            Op::Respond { who, which, error, noise } => self.respond(who, which, error, noise).await,
            Op::Resume { who, cursor, noise, read } => self.resume(who, cursor, noise, read).await,
            Op::Standalone { who, noise, read } => self.standalone(who, noise, read).await,
            Op::Upgrade { who, body, noise } => self.upgrade(who, body, noise).await,
            Op::Socket { who, ticket, noise } => self.socket(who, ticket, noise).await,
            Op::Delete { who, noise } => self.delete(who, noise).await,
            Op::Raw { method, path, sid, body, noise } => self.raw(method, path, sid, body, noise).await,
            Op::ReadHeld { k, chunks } => {
                if !self.held.is_empty() {
                    let k = usize::from(k) % self.held.len();
                    self.read(k, usize::from(chunks % 4) + 1).await;
                }
            }
            Op::DropHeld { k } => {
                if !self.held.is_empty() {
                    let k = usize::from(k) % self.held.len();
                    self.drop_held(k);
                }
            }
        }
        self.sync();
    }

    async fn initialize(&mut self, owner: u8, version: u8, json_only: bool, noise: Noise, read: Read) {
        let owner = OWNERS[usize::from(owner) % OWNERS.len()];
        let asked = ["2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05", "1999-01-01", ""]
            [usize::from(version) % 6];
        let id = json!(0);
        let body = json!({"jsonrpc": "2.0", "id": id, "method": "initialize",
            "params": {"protocolVersion": asked, "capabilities": {}, "clientInfo": {"name": "fuzz", "version": "0"}}});
        let accept = if json_only { "application/json" } else { "application/json, text/event-stream" };
        let (req, sent) = self.request(
            Method::POST,
            "/mcp",
            Route::Endpoint,
            None,
            owner,
            Some(accept),
            &[],
            noise,
            to_vec(&body),
        );
        let acc = accepts(&sent);
        let r = match self.exchange(req, &sent).await {
            Exchange::Ok(r) => r,
            Exchange::Guarded => return,
            Exchange::Refused(Refused::Kind(ErrorKind::TooManySessions, _)) => {
                assert!(
                    self.live().len() >= MAX_SESSIONS,
                    "too_many_sessions with {} live",
                    self.live().len()
                );
                return;
            }
            other => fail(&format!("initialize: {other:?}")),
        };
        assert!(self.live().len() < MAX_SESSIONS, "a session beyond the limit");
        assert_eq!(r.status(), StatusCode::OK, "initialize");
        let sid =
            header_str(&r, "mcp-session-id").unwrap_or_else(|| fail("initialize without Mcp-Session-Id"));
        assert!(wire::session_id(&sid), "session id {sid:?}");
        assert!(self.sessions.iter().all(|s| s.id != sid), "a session id issued twice");
        let session = self.hub.get_str(&sid, owner).expect("the new session is in the hub");
        let mut s = MSession {
            id: sid,
            owner,
            ns: session.namespace().0,
            live: true,
            ring: ModelRing::new(self.capacity, usize::MAX / 4),
            content: Vec::new(),
            next_id: 1,
            next_ask: 1,
            inflight: BTreeMap::new(),
            tickets: 0,
            issued: Vec::new(),
        };
        assert_eq!(s.ring.open(), 1);
        let stream = s.ring.open();
        let negotiated =
            SUPPORTED_VERSIONS.iter().find(|v| **v == asked).copied().unwrap_or(SUPPORTED_VERSIONS[0]);
        let result = json!({"protocolVersion": negotiated, "capabilities": h::capabilities(), "serverInfo": h::server_info()});
        s.publish(stream, Expect::Priming);
        s.publish(stream, Expect::Response(id, Ok(result.clone())));
        s.end(stream);
        self.sessions.push(s);
        let sess = self.sessions.len() - 1;
        if acc.sse {
            // Subscribed after the response: on a one-event ring the priming
            // event is gone and the body starts after it.
            let pos = if self.sessions[sess].ring.retained(1) { 0 } else { 1 };
            self.take_body(r, sess, stream, pos, 2, "initialize SSE", read).await;
        } else {
            let v = json_body(r).await;
            assert_eq!(v["result"], result, "initialize JSON result");
            let s = &mut self.sessions[sess];
            for seq in s.ring.stream(stream).seqs.clone() {
                s.ring.deliver(seq);
            }
        }
    }

    async fn call(
        &mut self,
        who: Who,
        call: Call,
        string_id: bool,
        json_only: bool,
        noise: Noise,
        read: Read,
    ) {
        let (sid, owner, found) = self.who(who);
        let tag = self.tag();
        let n = |k: u8| u64::from(k) % (h::MAX_EMIT + 1);
        let (method, params) = match call {
            Call::Emit { n: k, standalone } => (
                "tools/call",
                json!({"name": "emit", "arguments": {"n": n(k), "tag": tag, "standalone": standalone}}),
            ),
            Call::Hold { n: k } => {
                ("tools/call", json!({"name": "hold", "arguments": {"n": n(k), "tag": tag}}))
            }
            Call::Ask => ("tools/call", json!({"name": "ask", "arguments": {"tag": tag}})),
            Call::Ping => ("ping", Value::Null),
            Call::SetLevel { ok } => {
                ("logging/setLevel", json!({"level": if ok { "debug" } else { "loud" }}))
            }
            Call::Reinit => ("initialize", json!({"protocolVersion": "2025-06-18"})),
            Call::UnknownMethod => ("resources/list", Value::Null),
            Call::UnknownTool => ("tools/call", json!({"name": "nope"})),
        };
        if matches!(call, Call::Reinit) && sid_header(&sid).is_none() {
            // That is an `initialize` (a new session): `Op::Initialize`'s job.
            return;
        }
        let k = found.map_or(0, |i| self.sessions[i].next_id);
        let id = if string_id { json!(format!("r{k}")) } else { json!(k) };
        let mut body = json!({"jsonrpc": "2.0", "id": id, "method": method});
        if !params.is_null() {
            body["params"] = params;
        }
        let accept = if json_only { "application/json" } else { "application/json, text/event-stream" };
        let (req, sent) = self.request(
            Method::POST,
            "/mcp",
            Route::Endpoint,
            sid.as_deref(),
            owner,
            Some(accept),
            &[],
            noise,
            to_vec(&body),
        );
        let acc = accepts(&sent);
        let ex = self.exchange(req, &sent).await;
        let expect_refusal = |ex: &Exchange, kind: ErrorKind| match ex {
            Exchange::Refused(Refused::Kind(k, _)) if *k == kind => {}
            Exchange::Guarded => {}
            other => fail(&format!("call: expected {kind:?}, got {other:?}")),
        };
        if sid_header(&sid).is_none() {
            return expect_refusal(&ex, ErrorKind::MissingSession);
        }
        let Some(i) = found else { return expect_refusal(&ex, ErrorKind::UnknownSession) };
        if matches!(ex, Exchange::Guarded) {
            return;
        }
        // The model's side of the request: its stream, priming, and what
        // the handler publishes (it runs to its end or wait before the
        // next request: `settle`).
        let s = &mut self.sessions[i];
        s.next_id += 1;
        let stream = s.ring.open();
        // The response subscribes after the priming event, before the
        // handler runs.
        let pinned = s.publish(stream, Expect::Priming);
        let over = s.inflight.len() >= MAX_INFLIGHT;
        let mut waits = false;
        let outcome: Option<Result<Value, i64>> = if over {
            Some(Err(-31001))
        } else {
            match call {
                Call::Ping => Some(Ok(json!({}))),
                Call::SetLevel { ok: true } => Some(Ok(json!({}))),
                Call::SetLevel { ok: false } => Some(Err(-32602)),
                Call::Reinit => Some(Err(-32600)),
                Call::UnknownMethod => Some(Err(-32601)),
                Call::UnknownTool => Some(Err(-32602)),
                Call::Emit { n: k, standalone } => {
                    let target = if standalone { 1 } else { stream };
                    for j in 1..=n(k) {
                        s.publish(target, Expect::Raw(h::notification(&tag, j)));
                    }
                    Some(Ok(json!({"emitted": n(k)})))
                }
                Call::Hold { n: k } => {
                    for j in 1..=n(k) {
                        s.publish(stream, Expect::Raw(h::notification(&tag, j)));
                    }
                    s.inflight.insert(id.to_string(), (id.clone(), Inflight { stream, ask: None }));
                    waits = true;
                    None
                }
                Call::Ask => {
                    let ask = format!("s{}", s.next_ask);
                    s.next_ask += 1;
                    s.publish(stream, Expect::ClientRequest(ask.clone()));
                    s.inflight.insert(id.to_string(), (id.clone(), Inflight { stream, ask: Some(ask) }));
                    waits = true;
                    None
                }
            }
        };
        if let Some(o) = &outcome {
            s.publish(stream, Expect::Response(id.clone(), o.clone()));
            s.end(stream);
        }
        let r = match ex {
            Exchange::Ok(r) => r,
            Exchange::Hang => {
                assert!(waits && !acc.sse, "a request hangs: {call:?}, accept sse {}", acc.sse);
                return;
            }
            other => fail(&format!("call on a live session: {other:?}")),
        };
        assert_eq!(r.status(), StatusCode::OK, "call {call:?}");
        if acc.sse {
            self.take_body(r, i, stream, 0, pinned, "request SSE", read).await;
        } else {
            let v = json_body(r).await;
            let o = outcome.expect("a JSON-only answer comes only with a response");
            assert_eq!(v["id"], id, "JSON response id");
            match o {
                Ok(res) => assert_eq!(v["result"], res, "JSON result"),
                Err(c) => assert_eq!(v["error"]["code"].as_i64(), Some(c), "JSON error {v}"),
            }
            let s = &mut self.sessions[i];
            for seq in s.ring.stream(stream).seqs.clone() {
                s.ring.deliver(seq);
            }
        }
    }

    /// A POST whose answer is 202 on a live session.
    async fn simple_post(&mut self, who: Who, body: Value, noise: Noise) -> Option<usize> {
        let (sid, owner, found) = self.who(who);
        let (req, sent) = self.request(
            Method::POST,
            "/mcp",
            Route::Endpoint,
            sid.as_deref(),
            owner,
            Some("application/json, text/event-stream"),
            &[],
            noise,
            to_vec(&body),
        );
        let ex = self.exchange(req, &sent).await;
        let want = match (sid_header(&sid), found) {
            (None, _) => Some(ErrorKind::MissingSession),
            (Some(_), None) => Some(ErrorKind::UnknownSession),
            _ => None,
        };
        match (ex, want) {
            (Exchange::Guarded, _) => None,
            (Exchange::Refused(Refused::Kind(k, _)), Some(w)) if k == w => None,
            (Exchange::Ok(r), None) => {
                assert_eq!(r.status(), StatusCode::ACCEPTED, "a notification or response");
                assert!(body_bytes(r).await.is_empty(), "202 with a body");
                found
            }
            (other, w) => fail(&format!("POST {body}: expected {w:?}, got {other:?}")),
        }
    }

    async fn cancel(&mut self, who: Who, which: u8, noise: Noise) {
        let named = self.pick(who.session);
        let target = named.and_then(|i| {
            let s = &self.sessions[i];
            (which < 200 && !s.inflight.is_empty()).then(|| {
                s.inflight.values().nth(usize::from(which) % s.inflight.len()).expect("non-empty").0.clone()
            })
        });
        let request_id = target.unwrap_or(json!(9999));
        let body = json!({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": request_id}});
        let Some(i) = self.simple_post(who, body, noise).await else { return };
        let s = &mut self.sessions[i];
        if let Some((_, f)) = s.inflight.remove(&request_id.to_string()) {
            s.end(f.stream);
        }
    }

    async fn respond(&mut self, who: Who, which: u8, error: bool, noise: Noise) {
        let named = self.pick(who.session);
        let asks: Vec<String> = named.map_or_else(Vec::new, |i| {
            self.sessions[i].inflight.values().filter_map(|(_, f)| f.ask.clone()).collect()
        });
        let ask = if which < 200 && !asks.is_empty() {
            asks[usize::from(which) % asks.len()].clone()
        } else {
            "s0".into()
        };
        let body = if error {
            json!({"jsonrpc": "2.0", "id": ask, "error": {"code": 1, "message": "no"}})
        } else {
            json!({"jsonrpc": "2.0", "id": ask, "result": {"ok": true}})
        };
        let Some(i) = self.simple_post(who, body, noise).await else { return };
        let s = &mut self.sessions[i];
        let Some(key) =
            s.inflight.iter().find(|(_, (_, f))| f.ask.as_deref() == Some(&ask)).map(|(k, _)| k.clone())
        else {
            return;
        };
        let (id, f) = s.inflight.remove(&key).expect("found");
        let o = if error { Err(h::ASK_CLIENT_ERROR) } else { Ok(json!({"answer": {"ok": true}})) };
        s.publish(f.stream, Expect::Response(id, o));
        s.end(f.stream);
    }

    /// A cursor string (bytes: it may not be UTF-8) as `p` picks it.
    fn cursor(&self, p: CursorPick, named: Option<usize>) -> Option<Vec<u8>> {
        let canned = [
            "",
            "abc-5",
            "1-5",
            "-",
            "0000000000000000_1-0",
            "0000000000000000_1-1",
            &"a".repeat(129),
            &format!("{}-1", "a".repeat(41)),
            " 0000000000000000_1-1",
            "0000000000000000_0-1",
            "0000000000000000_01-1",
            "0000000000000000_1-18446744073709551616",
        ];
        let other = || {
            let n = self.sessions.len();
            (n > 0).then(|| (named.unwrap_or(0) + 1 + usize::from(p.pick) % n.max(1)) % n)
        };
        let i = match p.kind {
            0..=149 => named.or_else(other)?,
            150..=179 => other()?,
            180..=199 => {
                let i = named.or_else(other)?;
                let s = &self.sessions[i];
                let stream = u64::from(p.pick) % s.ring.streams.len() as u64 + 1;
                return Some(
                    wire::format(s.ns, stream, s.ring.head() + 1 + u64::from(p.pick >> 14)).into_bytes(),
                );
            }
            200..=234 => return Some(canned[usize::from(p.pick) % canned.len()].as_bytes().to_vec()),
            _ => return None,
        };
        let s = &self.sessions[i];
        let m = &s.ring;
        let (head, oldest) = (m.head(), m.oldest());
        let k = u64::from(p.pick & 0x3fff);
        let seq = if head == 0 {
            1
        } else {
            match p.pick >> 14 {
                0 => head.saturating_sub(k % 8),
                1 => (oldest + k % 6).saturating_sub(3),
                2 => m.streams[(k % m.streams.len() as u64) as usize].delivered,
                _ => k % head + 1,
            }
            .clamp(1, head)
        };
        let stream = if head == 0 { 1 } else { m.event(seq).stream };
        let (mut ns, mut stream, mut seq) = (s.ns, stream, seq);
        match p.mutation {
            Mutation::SeqUp(d) => seq += u64::from(d % 6) + 1,
            Mutation::SeqDown(d) => seq = seq.saturating_sub(u64::from(d % 6) + 1),
            Mutation::StreamTo(t) => stream = u64::from(t % 12),
            Mutation::Seq0 => seq = 0,
            Mutation::NsXor(x) => ns ^= x,
            _ => {}
        }
        let c = wire::format(ns, stream, seq);
        Some(match p.mutation {
            Mutation::LeadingZero => format!("{ns:016x}_{stream}-0{seq}").into_bytes(),
            Mutation::UpperNs => format!("{ns:016X}_{stream}-{seq}").into_bytes(),
            Mutation::Truncate(n) => c.as_bytes()[..c.len().saturating_sub(usize::from(n % 4) + 1)].to_vec(),
            Mutation::NotUtf8 => [c.as_bytes(), b"\xff"].concat(),
            _ => c.into_bytes(),
        })
    }

    /// Checks a decision-table refusal's kind and numbers against the
    /// reference's acceptable outcomes.
    fn check_decision(
        &self,
        refused: &Refused,
        expected: &[Outcome],
        found: Option<usize>,
        cursor: Option<&str>,
        what: &str,
    ) {
        let Refused::Kind(kind, body) = refused else {
            fail(&format!("{what}: a JSON-RPC error {refused:?}"))
        };
        let ok = expected.iter().any(|o| match (o, kind) {
            (Outcome::RequiresSession, ErrorKind::ResumeRequiresSession) => true,
            (Outcome::Unknown, ErrorKind::UnknownSession) => true,
            (Outcome::Malformed, ErrorKind::MalformedCursor) => true,
            (Outcome::Mismatch, ErrorKind::NamespaceMismatch) => true,
            (Outcome::Ahead { head }, ErrorKind::CursorAhead) => {
                body.get("head") == Some(&json!(head)) && body.get("cursor") == Some(&json!(cursor))
            }
            (Outcome::NotDelivered { .. }, ErrorKind::CursorNotDelivered) => {
                body.get("cursor") == Some(&json!(cursor))
            }
            (Outcome::Gap { oldest, missing }, ErrorKind::GapNotCovered) => {
                let s = &self.sessions[found.expect("a gap needs a session")];
                let want_oldest = if s.ring.retained(*oldest) {
                    json!(wire::format(s.ns, s.ring.event(*oldest).stream, *oldest))
                } else {
                    json!(oldest)
                };
                let m = body.get("missing").and_then(Value::as_u64);
                let missing_ok = match missing {
                    Missing::Exact(n) => m == Some(*n),
                    Missing::LowerBound(n) => m.is_some_and(|m| (1..=*n).contains(&m)),
                };
                body.get("oldest") == Some(&want_oldest)
                    && missing_ok
                    && body.get("cursor") == Some(&json!(cursor))
            }
            _ => false,
        });
        assert!(ok, "{what}: refused {kind:?} {body:?}; the reference expects one of {expected:?}");
    }

    async fn resume(&mut self, who: Who, pick: CursorPick, noise: Noise, read: Read) {
        let (sid, owner, found) = self.who(who);
        let named = self.pick(who.session);
        let cursor = self.cursor(pick, named).unwrap_or_else(|| b"".to_vec());
        let extra = [("last-event-id", cursor.clone())];
        let (req, sent) = self.request(
            Method::GET,
            "/mcp",
            Route::Endpoint,
            sid.as_deref(),
            owner,
            Some("text/event-stream"),
            &extra,
            noise,
            vec![],
        );
        let ex = self.exchange(req, &sent).await;
        if matches!(ex, Exchange::Guarded) {
            return;
        }
        // A cursor that is not UTF-8 is malformed (the handler reads it as "\0").
        let cursor_str = std::str::from_utf8(&cursor).unwrap_or("\u{0}").to_owned();
        let expected = decide::decide(
            sid_header(&sid),
            found.map(|i| RefSession { ns: self.sessions[i].ns, ring: &self.sessions[i].ring }),
            Some(&cursor_str),
            Target::Stream,
        )
        .any_of;
        match ex {
            Exchange::Refused(r) => self.check_decision(&r, &expected, found, Some(&cursor_str), "resume"),
            Exchange::Ok(r) => {
                let Some(Outcome::Resume { after, stream: Some(stream), seqs }) =
                    expected.iter().find(|o| matches!(o, Outcome::Resume { .. })).cloned()
                else {
                    fail(&format!("resume granted; the reference expects one of {expected:?}"))
                };
                let i = found.expect("a resume needs a session");
                assert_eq!(self.next_of(i, stream, after), seqs.first().copied(), "reference replay");
                let pinned = self.sessions[i].ring.stream(stream).high();
                self.take_body(r, i, stream, after, pinned, "resume SSE", read).await;
            }
            Exchange::Hang => fail("a resume hangs"),
            Exchange::Guarded => unreachable!(),
        }
    }

    async fn standalone(&mut self, who: Who, noise: Noise, read: Read) {
        let (sid, owner, found) = self.who(who);
        let (req, sent) = self.request(
            Method::GET,
            "/mcp",
            Route::Endpoint,
            sid.as_deref(),
            owner,
            Some("text/event-stream"),
            &[],
            noise,
            vec![],
        );
        let ex = self.exchange(req, &sent).await;
        if matches!(ex, Exchange::Guarded) {
            return;
        }
        let want = match (sid_header(&sid), found) {
            (None, _) => Some(ErrorKind::MissingSession),
            (Some(_), None) => Some(ErrorKind::UnknownSession),
            (_, Some(i)) if self.lanes.contains_key(&(i, 1)) => Some(ErrorKind::StreamBusy),
            _ => None,
        };
        if let Some(w) = want {
            match ex {
                Exchange::Refused(Refused::Kind(k, _)) if k == w => return,
                other => fail(&format!("standalone GET: expected {w:?}, got {other:?}")),
            }
        }
        let i = found.expect("checked");
        let s = &mut self.sessions[i];
        let st = s.ring.stream(1);
        let (delivered, high) = (st.delivered, st.high());
        let oldest = s.ring.oldest();
        let lost = s.ring.stream_seqs_in(1, delivered + 1, oldest.saturating_sub(1)).len() as u64;
        if high <= delivered {
            s.publish(1, Expect::Priming);
        }
        match ex {
            Exchange::Refused(Refused::Kind(ErrorKind::GapNotCovered, body)) => {
                assert!(
                    lost > 0,
                    "standalone backlog refused as evicted, but the model retains it: {body:?}"
                );
                assert_eq!(body.get("cursor"), Some(&Value::Null));
                assert_eq!(body.get("oldest"), Some(&json!(oldest)), "standalone gap oldest");
                assert_eq!(body.get("missing"), Some(&json!(lost)), "standalone gap missing");
            }
            Exchange::Ok(r) => {
                assert_eq!(lost, 0, "standalone GET granted although {lost} backlog events were evicted");
                let pinned = self.sessions[i].ring.stream(1).high();
                self.take_body(r, i, 1, delivered, pinned, "standalone SSE", read).await;
            }
            other => fail(&format!("standalone GET: {other:?}")),
        }
    }

    async fn upgrade(&mut self, who: Who, body: UpgradeBody, noise: Noise) {
        let (sid, owner, found) = self.who(who);
        let named = self.pick(who.session);
        let path_id = sid_str(&sid).filter(|s| !s.is_empty() && !s.contains('/')).unwrap_or("zz").to_owned();
        let found = if sid_str(&sid) == Some(path_id.as_str()) { found } else { None };
        let (bytes, cursor): (Vec<u8>, Result<Option<String>, ()>) = match body {
            UpgradeBody::Cursor(p) => match self.cursor(p, named).map(String::from_utf8) {
                Some(Ok(c)) => (to_vec(&json!({"cursor": c})), Ok(Some(c))),
                _ => (to_vec(&json!({"cursor": null})), Ok(None)),
            },
            UpgradeBody::Null => (to_vec(&json!({"cursor": null})), Ok(None)),
            UpgradeBody::Number => (to_vec(&json!({"cursor": 5})), Err(())),
            UpgradeBody::Empty => (to_vec(&json!({})), Err(())),
            UpgradeBody::Extra => (to_vec(&json!({"cursor": null, "x": 1})), Err(())),
            UpgradeBody::Array => (to_vec(&json!([null])), Err(())),
            UpgradeBody::NotJson => (b"{cursor".to_vec(), Err(())),
        };
        let path = format!("/mcp/session/{path_id}/upgrade");
        let (req, sent) =
            self.request(Method::POST, &path, Route::Upgrade, None, owner, None, &[], noise, bytes);
        let ex = self.exchange(req, &sent).await;
        if matches!(ex, Exchange::Guarded) {
            return;
        }
        let Ok(cursor) = cursor else {
            match ex {
                Exchange::Refused(Refused::Kind(ErrorKind::MalformedRequest, _)) => return,
                other => fail(&format!("upgrade with a bad body: {other:?}")),
            }
        };
        let expected = decide::decide(
            Some(&path_id),
            found.map(|i| RefSession { ns: self.sessions[i].ns, ring: &self.sessions[i].ring }),
            cursor.as_deref(),
            Target::Session,
        )
        .any_of;
        let granted = expected.iter().find_map(|o| match o {
            Outcome::Resume { seqs, .. } => Some(seqs.clone()),
            _ => None,
        });
        match ex {
            Exchange::Refused(Refused::Kind(ErrorKind::TooManyTickets, _)) => {
                let i = found.expect("tickets need a session");
                assert!(
                    granted.is_some() && self.sessions[i].tickets >= MAX_TICKETS,
                    "too_many_tickets at {}",
                    self.sessions[i].tickets
                );
            }
            Exchange::Refused(r) => self.check_decision(&r, &expected, found, cursor.as_deref(), "upgrade"),
            Exchange::Ok(r) => {
                let Some(seqs) = granted else {
                    fail(&format!("upgrade granted; the reference expects one of {expected:?}"))
                };
                let i = found.expect("a ticket needs a session");
                assert!(self.sessions[i].tickets < MAX_TICKETS, "a ticket beyond the limit");
                let v = json_body(r).await;
                let s = &self.sessions[i];
                let first = seqs.first().map(|&q| wire::format(s.ns, s.ring.event(q).stream, q));
                assert_eq!(v["replay_count"], json!(seqs.len()), "replay_count");
                assert_eq!(v["replay_from"], json!(first), "replay_from");
                let ticket = v["ticket"].as_str().expect("a ticket").to_owned();
                assert_eq!(v["websocket"], json!(format!("/mcp/ws?ticket={ticket}")), "websocket path");
                let s = &mut self.sessions[i];
                s.tickets += 1;
                s.issued.push(ticket);
                self.end_connections(i);
            }
            other => fail(&format!("upgrade: {other:?}")),
        }
    }

    async fn socket(&mut self, who: Who, ticket: u8, noise: Noise) {
        let named = self.pick(who.session);
        let issued: Vec<&String> = self.sessions.iter().flat_map(|s| s.issued.iter()).collect();
        let t = match (ticket, named) {
            (0..=199, _) if !issued.is_empty() => issued[usize::from(ticket) % issued.len()].clone(),
            _ => ["", "abc", &"0".repeat(32), &"0".repeat(64)][usize::from(ticket) % 4].to_owned(),
        };
        let (_, owner, _) = self.who(who);
        let extra = [
            ("connection", b"Upgrade".to_vec()),
            ("upgrade", b"websocket".to_vec()),
            ("sec-websocket-version", b"13".to_vec()),
            ("sec-websocket-key", b"dGhlIHNhbXBsZSBub25jZQ==".to_vec()),
        ];
        let (req, sent) = self.request(
            Method::GET,
            &format!("/mcp/ws?ticket={t}"),
            Route::Socket,
            None,
            owner,
            None,
            &extra,
            noise,
            vec![],
        );
        match self.exchange(req, &sent).await {
            Exchange::Guarded => {}
            // In process there is no connection to upgrade: a ticket that
            // parses is refused as no handshake, before it is redeemed.
            Exchange::Refused(Refused::Kind(k, _)) => {
                let want = if gapless::session::Ticket::parse(&t).is_some() {
                    ErrorKind::MalformedRequest
                } else {
                    ErrorKind::TicketInvalid
                };
                assert_eq!(k, want, "socket with ticket {t:?}");
            }
            other => fail(&format!("socket: {other:?}")),
        }
    }

    async fn delete(&mut self, who: Who, noise: Noise) {
        let (sid, owner, found) = self.who(who);
        let (req, sent) = self.request(
            Method::DELETE,
            "/mcp",
            Route::Endpoint,
            sid.as_deref(),
            owner,
            None,
            &[],
            noise,
            vec![],
        );
        let ex = self.exchange(req, &sent).await;
        match (ex, sid_header(&sid), found) {
            (Exchange::Guarded, ..) => {}
            (Exchange::Refused(Refused::Kind(ErrorKind::MissingSession, _)), None, _) => {}
            (Exchange::Refused(Refused::Kind(ErrorKind::UnknownSession, _)), Some(_), None) => {}
            (Exchange::Ok(r), Some(_), Some(i)) => {
                assert_eq!(r.status(), StatusCode::NO_CONTENT, "DELETE");
                let s = &mut self.sessions[i];
                s.live = false;
                for st in &mut s.ring.streams {
                    st.ended = true;
                }
                s.inflight.clear();
                self.end_connections(i);
            }
            (other, ..) => fail(&format!("DELETE: {other:?}")),
        }
    }

    /// Garbage that cannot change state: a garbage session id, or a body
    /// that is no JSON (so no `initialize`).
    async fn raw(&mut self, method: u8, path: u8, sid: bool, mut body: Vec<u8>, noise: Noise) {
        let methods = [
            Method::POST,
            Method::GET,
            Method::DELETE,
            Method::PUT,
            Method::PATCH,
            Method::HEAD,
            Method::OPTIONS,
        ];
        let method = methods[usize::from(method) % methods.len()].clone();
        let paths: [(&str, Route); 8] = [
            ("/mcp", Route::Endpoint),
            ("/mcp/", Route::Elsewhere),
            ("/mcp/session/00/upgrade", Route::Upgrade),
            ("/mcp/ws", Route::Socket),
            ("/mcp/sse", Route::Elsewhere),
            ("/other", Route::Elsewhere),
            // matchit takes an empty segment as the `{id}`.
            ("/mcp/session//upgrade", Route::Upgrade),
            ("/mcp?x=1", Route::Endpoint),
        ];
        let (p, route) = paths[usize::from(path) % paths.len()];
        if !sid {
            body.insert(0, 0xff);
        }
        body.truncate(MAX_BODY + 64);
        let sid = sid.then(|| b"0123".to_vec());
        let accept =
            if method == Method::GET { "text/event-stream" } else { "application/json, text/event-stream" };
        let (req, sent) =
            self.request(method, p, route, sid.as_deref(), None, Some(accept), &[], noise, body);
        match self.exchange(req, &sent).await {
            Exchange::Ok(r) => fail(&format!("garbage answered {}", r.status())),
            Exchange::Hang => fail("garbage hangs"),
            Exchange::Guarded | Exchange::Refused(_) => {}
        }
    }
}

#[derive(Debug)]
enum Exchange {
    Ok(Response<Body>),
    Refused(Refused),
    /// Refused by the guard (or the fallback) as the model expected.
    Guarded,
    /// No answer within `CALL_WAIT`.
    Hang,
}

/// The session id as text, for a URL path: `None` when it is absent or
/// not UTF-8 (such an id cannot be put in a path).
fn sid_str(sid: &Option<Vec<u8>>) -> Option<&str> {
    sid.as_deref().and_then(|b| std::str::from_utf8(b).ok())
}

/// The session id header as the endpoint reads it (`docs/SPEC.md` §4.2):
/// `None` only when absent; one that is not UTF-8 is present and names no
/// session (it reads as "\0").
fn sid_header(sid: &Option<Vec<u8>>) -> Option<&str> {
    sid.as_deref().map(|b| std::str::from_utf8(b).unwrap_or("\u{0}"))
}

fn to_vec(v: &Value) -> Vec<u8> {
    serde_json::to_vec(v).expect("JSON")
}

async fn json_body(r: Response<Body>) -> Value {
    assert_eq!(header_str(&r, "content-type").as_deref(), Some("application/json"), "JSON answer");
    let b = body_bytes(r).await;
    serde_json::from_slice(&b)
        .unwrap_or_else(|e| fail(&format!("answer is not JSON ({e}): {}", h::lossy(&b))))
}

/// Lets every task the last request woke run to its end or its next wait
/// (the paused clock moves on only when nothing else can run).
async fn settle() {
    tokio::time::sleep(Duration::from_millis(1)).await;
}

/// Bends one header (or the method) of a request.
fn bend(headers: &mut Vec<(&'static str, Vec<u8>)>, method: &mut Method, (which, v): (u8, u8)) {
    let set = |headers: &mut Vec<(&'static str, Vec<u8>)>, name: &'static str, value: Option<&[u8]>| {
        headers.retain(|(k, _)| *k != name);
        if let Some(v) = value {
            headers.push((name, v.to_vec()));
        }
    };
    let pick = |opts: &[&'static [u8]]| opts[usize::from(v) % opts.len()];
    match which % 8 {
        0 => {
            let a = pick(&[
                b"text/html",
                b"",
                b"application/json",
                b"text/event-stream",
                b"*/*",
                b"application/*;q=0.5",
                b"text/*",
                b"x/\xff",
            ]);
            set(headers, "accept", Some(a));
        }
        1 => {
            let c: Option<&[u8]> = [
                None,
                Some(&b"text/plain"[..]),
                Some(b"application/json; charset=utf-8"),
                Some(b"APPLICATION/JSON"),
                Some(b"application/jsonx"),
                Some(b""),
            ][usize::from(v) % 6];
            set(headers, "content-type", c);
        }
        2 => {
            let p = pick(&[
                b"2025-11-25",
                b"2025-06-18",
                b"2025-03-26",
                b"2024-11-05",
                b"",
                b"garbage",
                b"2025-06-18 ",
            ]);
            set(headers, "mcp-protocol-version", Some(p));
        }
        3 => {
            let o = pick(&[
                b"http://localhost:3000",
                b"https://127.0.0.1",
                b"http://[::1]:8",
                b"https://evil.example",
                b"null",
                b"http://localhost/path",
                b"http://\xe9.example",
                b"DUP",
            ]);
            if o == b"DUP" {
                headers.push(("origin", b"http://localhost".to_vec()));
                headers.push(("origin", b"http://localhost".to_vec()));
            } else {
                set(headers, "origin", Some(o));
            }
        }
        4 => {
            let hst = pick(&[
                b"127.0.0.1",
                b"evil.example",
                b"[::1]:99",
                b"\xe9vil",
                b"LOCALHOST:1",
                b"DUP",
                b"localhost:x",
            ]);
            if hst == b"DUP" {
                headers.push(("host", b"localhost".to_vec()));
            } else {
                set(headers, "host", Some(hst));
            }
        }
        5 => headers.push(("x-pad", vec![b'p'; MAX_HEADERS + usize::from(v)])),
        6 => set(headers, "content-length", Some(pick(&[b"999999", b"abc", b"5"]))),
        _ => {
            // Only methods no route of the endpoint serves, so that a bent
            // request changes no state the model does not know of.
            let ms = [Method::PUT, Method::PATCH, Method::HEAD, Method::OPTIONS, Method::TRACE];
            *method = ms[usize::from(v) % ms.len()].clone();
        }
    }
}

/// What the request's `Accept` allows, as §5 reads it (absent: anything).
struct Accepts {
    json: bool,
    sse: bool,
}

fn accepts(sent: &Sent) -> Accepts {
    let Some((_, a)) = sent.headers.iter().find(|(k, _)| *k == "accept") else {
        return Accepts { json: true, sse: true };
    };
    let Ok(a) = std::str::from_utf8(a) else { return Accepts { json: true, sse: true } };
    let mut r = Accepts { json: false, sse: false };
    for part in a.split(',') {
        match part.split(';').next().unwrap_or("").trim() {
            "*/*" => (r.json, r.sse) = (true, true),
            "application/json" | "application/*" => r.json = true,
            "text/event-stream" | "text/*" => r.sse = true,
            _ => {}
        }
    }
    r
}

/// The guard's refusal of `sent`, in §5's order, if any.
fn guard_expect(sent: &Sent) -> Option<ErrorKind> {
    let m = &sent.method;
    let post = *m == Method::POST;
    let route = sent.route;
    if route == Route::Elsewhere {
        return None;
    }
    if (route == Route::Endpoint && ![Method::POST, Method::GET, Method::DELETE].contains(m))
        || (route == Route::Upgrade && !post)
    {
        return Some(ErrorKind::MethodNotAllowed);
    }
    let size: usize = sent.headers.iter().map(|(k, v)| k.len() + v.len() + 4).sum();
    if size > MAX_HEADERS {
        return Some(ErrorKind::HeadersTooLarge);
    }
    let all = |name: &str| {
        sent.headers.iter().filter(|(k, _)| *k == name).map(|(_, v)| v.as_slice()).collect::<Vec<_>>()
    };
    let (hosts, origins) = (all("host"), all("origin"));
    if hosts.len() > 1 || origins.len() > 1 {
        return Some(ErrorKind::MalformedRequest);
    }
    let loopback = |h: &str| {
        let name = match h.rsplit_once(':') {
            Some((n, p)) if !h.starts_with('[') && p.bytes().all(|b| b.is_ascii_digit()) => n,
            _ if h.starts_with('[') => &h[..h.find(']').map_or(h.len(), |e| e + 1)],
            _ => h,
        };
        matches!(name.to_ascii_lowercase().as_str(), "localhost" | "127.0.0.1" | "[::1]")
    };
    if let Some(hst) = hosts.first() {
        if !std::str::from_utf8(hst).is_ok_and(loopback) {
            return Some(ErrorKind::OriginNotAllowed);
        }
    }
    if let Some(o) = origins.first() {
        let ok = std::str::from_utf8(o)
            .ok()
            .and_then(|o| o.strip_prefix("http://").or_else(|| o.strip_prefix("https://")))
            .is_some_and(|rest| !rest.contains('/') && loopback(rest));
        if !ok {
            return Some(ErrorKind::OriginNotAllowed);
        }
    }
    if post {
        let ct = all("content-type").first().and_then(|c| std::str::from_utf8(c).ok()).unwrap_or("");
        if !ct.split(';').next().unwrap_or("").trim().eq_ignore_ascii_case("application/json") {
            return Some(ErrorKind::UnsupportedMediaType);
        }
    }
    if route == Route::Endpoint {
        let acc = accepts(sent);
        if (post && !acc.json && !acc.sse) || (*m == Method::GET && !acc.sse) {
            return Some(ErrorKind::NotAcceptable);
        }
    }
    if post {
        let declared = all("content-length")
            .first()
            .and_then(|c| std::str::from_utf8(c).ok())
            .and_then(|c| c.parse::<u64>().ok());
        if declared.is_some_and(|l| l > MAX_BODY as u64) {
            return Some(ErrorKind::PayloadTooLarge);
        }
    }
    if let Some(v) = all("mcp-protocol-version").first().and_then(|v| std::str::from_utf8(v).ok()) {
        if !SUPPORTED_VERSIONS.contains(&v) {
            return Some(ErrorKind::UnsupportedProtocolVersion);
        }
    }
    None
}

fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_current_thread()
            .enable_time()
            .start_paused(true)
            .build()
            .expect("a runtime")
    })
}

fn server(capacity: usize) -> McpServer {
    let mut config = ServerConfig::default().with_ring(RingConfig::new(capacity, usize::MAX / 4));
    config.hub = HubConfig {
        max_sessions: MAX_SESSIONS,
        max_tickets: MAX_TICKETS,
        idle_timeout: Duration::from_secs(86_400),
        ..config.hub
    };
    config.legacy_sse = false;
    config.max_body_bytes = MAX_BODY;
    config.max_header_bytes = MAX_HEADERS;
    config.max_inflight_requests = MAX_INFLIGHT;
    config.pace_high_water = u64::MAX;
    config.client_request_timeout = Duration::from_secs(86_400);
    McpServer::builder(FuzzHost)
        .config(config)
        .identity(|parts| parts.headers.get("x-fuzz-user").and_then(|v| v.to_str().ok()).map(str::to_owned))
        .build()
        .expect("a valid configuration")
}

fuzz_target!(|input: Input| {
    let capacity = usize::from(input.capacity % 16) + 1;
    runtime().block_on(async move {
        let mcp = server(capacity);
        let router = mcp
            .router()
            .fallback(|| async { ApiError::new(ErrorKind::NotFound, "no such endpoint").into_response() });
        let mut w = World {
            router,
            hub: Arc::clone(mcp.hub()),
            capacity,
            sessions: Vec::new(),
            held: Vec::new(),
            lanes: HashMap::new(),
            next_gen: 0,
            tags: 0,
        };
        for op in input.ops.into_iter().take(MAX_OPS) {
            w.apply(op).await;
        }
        // Every held body, read once more.
        while !w.held.is_empty() {
            if !w.read(0, 8).await {
                w.drop_held(0);
            }
        }
        mcp.shutdown();
    });
});
