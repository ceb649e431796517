//! The client guard: a sans-IO helper that lets any client HTTP stack resume
//! an MCP session without losing an event silently (`docs/SPEC.md` §6).
//!
//! Seed 003 found that a resume is a two-key operation (`Mcp-Session-Id` and
//! `Last-Event-ID` must address the same buffer) and that an empty `200`
//! replay is not proof of "caught up"; seed 000 found that a WebSocket
//! migration needs the client's own *processed* cursor and a check that the
//! first frame is that cursor plus one. The pieces, none of which does IO:
//!
//! * [`ClientGuard`] records what the application says it **processed**
//!   (never what merely arrived): a cursor per stream for SSE resumes, and the
//!   session's contiguous processed prefix for a migration. It builds
//!   [`ResumeHeaders`] and [`UpgradeRequest`]s only as a session id paired
//!   with a cursor of that session's namespace.
//! * [`classify_resume`] judges what a resume produced: [`ResumeOutcome`].
//! * [`WsContinuity`] and [`SseContinuity`] check the seqs of incoming frames
//!   and say which to process, which to drop, and where a hole or repeat is.
//!
//! ```
//! use gapless_wire::client::{classify_resume, ClientGuard, ResumeOutcome, ResumeResponse, SseCheck};
//! use gapless_wire::event_id::EventId;
//!
//! let mut guard = ClientGuard::new();
//! guard.set_session_id("s-7f3a").unwrap();
//! let first: EventId = "00ab34ff9c01de77_1-1".parse().unwrap();
//! // ... the application handled the event, then:
//! guard.processed(&first).unwrap();
//!
//! // The connection broke: resume that stream.
//! let headers = guard.resume_headers(first.stream).unwrap();
//! assert_eq!(headers.last_event_id(), &first);
//! let mut sse = guard.sse_continuity(first.stream);
//! let next: EventId = "00ab34ff9c01de77_1-4".parse().unwrap();
//! assert_eq!(sse.check(next.seq, &guard), SseCheck::Deliver);
//! let outcome = classify_resume(&first, ResumeResponse::Replayed(&[next]), &[]);
//! assert!(matches!(outcome, ResumeOutcome::Resumed { count: 1, .. }));
//! ```

use crate::event_id::{EventId, Namespace};
use crate::{ErrorKind, Seq, StreamId};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

/// Name of the session header of a resume.
pub const SESSION_ID_HEADER: &str = "Mcp-Session-Id";

/// Name of the cursor header of a resume.
pub const LAST_EVENT_ID_HEADER: &str = "Last-Event-ID";

/// Default bound on processed seqs held above the contiguous prefix.
pub const DEFAULT_MAX_PENDING: usize = 65_536;

/// What a client has processed in one session, and the resume requests that
/// follow from it.
///
/// Call [`processed`](ClientGuard::processed) once per event, after the
/// application handled it, and within one stream in stream order (the stream
/// cursor means "this and every earlier event of its stream"). Across
/// streams any order is fine. When a request's stream has ended and its
/// result was handled, [`forget_stream`](ClientGuard::forget_stream) drops
/// its cursor so the map does not grow with every request.
#[derive(Clone, Debug)]
pub struct ClientGuard {
    /// The session every recorded cursor belongs to. Changing it clears them.
    session_id: Option<String>,
    /// The namespace of every recorded cursor: learned from the first
    /// processed event or set explicitly; `None` while nothing is recorded
    /// (unless set explicitly). Cleared with the session.
    namespace: Option<Namespace>,
    /// Per stream, the latest processed event (stream order is enforced).
    cursors: HashMap<StreamId, EventId>,
    /// Every seq in `1..=prefix` was processed.
    prefix: Seq,
    /// The stream of the event `prefix`; `None` iff `prefix` is 0.
    prefix_stream: Option<StreamId>,
    /// Processed seqs above the prefix, with their streams. Every key is
    /// `> prefix + 1` (seq `prefix + 1` is absorbed into the prefix at once).
    above: BTreeMap<u64, StreamId>,
    /// Bound on `above.len()`.
    max_pending: usize,
}

impl Default for ClientGuard {
    fn default() -> ClientGuard {
        ClientGuard::new()
    }
}

impl ClientGuard {
    /// An empty guard: no session, nothing processed, [`DEFAULT_MAX_PENDING`].
    pub fn new() -> ClientGuard {
        ClientGuard::with_max_pending(DEFAULT_MAX_PENDING)
    }

    /// An empty guard that holds at most `max_pending` processed seqs above
    /// the contiguous prefix (see [`ProcessError::TooManyPending`]).
    pub fn with_max_pending(max_pending: usize) -> ClientGuard {
        ClientGuard {
            session_id: None,
            namespace: None,
            cursors: HashMap::new(),
            prefix: Seq::ZERO,
            prefix_stream: None,
            above: BTreeMap::new(),
            max_pending,
        }
    }

    /// Records the session id the server assigned (the `Mcp-Session-Id`
    /// response header of `initialize`).
    ///
    /// Any change of the id, including the first one while events were
    /// recorded without a session, clears the cursors, the prefix and the
    /// namespace: a cursor can be sent only with the session it was
    /// processed in. The id must be 1 or more visible ASCII characters
    /// (0x21..=0x7E), as MCP requires, so it is safe as a header value.
    pub fn set_session_id(&mut self, id: &str) -> Result<SessionChange, SessionIdError> {
        if id.is_empty() {
            return Err(SessionIdError::Empty);
        }
        if let Some(at) = id.bytes().position(|b| !(0x21..=0x7e).contains(&b)) {
            return Err(SessionIdError::BadByte { at });
        }
        let change = match &self.session_id {
            Some(current) if current == id => return Ok(SessionChange::Unchanged),
            Some(_) => SessionChange::Replaced,
            None => SessionChange::Started,
        };
        self.clear_progress();
        self.session_id = Some(id.to_owned());
        Ok(change)
    }

    /// Forgets the session and everything recorded in it (after `DELETE`, or
    /// a refusal with [`ErrorKind::UnknownSession`]).
    pub fn end_session(&mut self) {
        self.clear_progress();
        self.session_id = None;
    }

    /// Sets the session's namespace before any event is processed (for
    /// example from a priming event's id). Fails, changing nothing, if a
    /// different namespace is already known.
    pub fn set_namespace(&mut self, ns: Namespace) -> Result<(), NamespaceMismatch> {
        match self.namespace {
            Some(expected) if expected != ns => Err(NamespaceMismatch { expected, found: ns }),
            _ => {
                self.namespace = Some(ns);
                Ok(())
            }
        }
    }

    /// The session id, if known.
    pub fn session_id(&self) -> Option<&str> {
        self.session_id.as_deref()
    }

    /// The session's namespace, if known.
    pub fn namespace(&self) -> Option<Namespace> {
        self.namespace
    }

    /// Records that the application processed the event `id`.
    ///
    /// On error nothing is recorded. The first recorded event also fixes the
    /// session's namespace if none was set.
    pub fn processed(&mut self, id: &EventId) -> Result<(), ProcessError> {
        if let Some(expected) = self.namespace {
            if expected != id.ns {
                return Err(ProcessError::NamespaceMismatch { expected, found: id.ns });
            }
        }
        let seq = id.seq.0;
        if seq == 0 {
            return Err(ProcessError::SeqZero);
        }
        if self.is_processed(id.seq) {
            return Err(ProcessError::Duplicate { seq: id.seq });
        }
        if let Some(cursor) = self.cursors.get(&id.stream) {
            if seq < cursor.seq.0 {
                return Err(ProcessError::StreamRegress {
                    stream: id.stream,
                    cursor: cursor.seq,
                    seq: id.seq,
                });
            }
        }
        // `seq > prefix`, so `prefix + 1` cannot overflow.
        let fills_prefix = seq == self.prefix.0 + 1;
        if !fills_prefix && self.above.len() >= self.max_pending {
            return Err(ProcessError::TooManyPending {
                limit: self.max_pending,
                waiting_for: Seq(self.prefix.0 + 1),
            });
        }

        self.namespace = Some(id.ns);
        self.cursors.insert(id.stream, *id);
        if !fills_prefix {
            self.above.insert(seq, id.stream);
            return Ok(());
        }
        self.prefix = id.seq;
        self.prefix_stream = Some(id.stream);
        while let Some(entry) = self.above.first_entry() {
            if Some(*entry.key()) != self.prefix.0.checked_add(1) {
                break;
            }
            self.prefix = Seq(*entry.key());
            self.prefix_stream = Some(entry.remove());
        }
        debug_assert!(self.above.keys().next().is_none_or(|&k| k - 1 > self.prefix.0));
        Ok(())
    }

    /// Whether seq `seq` was recorded as processed (seq 0 counts as
    /// processed: it is the cursor before the first event).
    pub fn is_processed(&self, seq: Seq) -> bool {
        seq <= self.prefix || self.above.contains_key(&seq.0)
    }

    /// The latest processed event of `stream`.
    pub fn stream_cursor(&self, stream: StreamId) -> Option<EventId> {
        self.cursors.get(&stream).copied()
    }

    /// Drops the cursor of a stream that is finished (its result handled),
    /// returning it. The session prefix is unaffected.
    pub fn forget_stream(&mut self, stream: StreamId) -> Option<EventId> {
        self.cursors.remove(&stream)
    }

    /// The contiguous processed prefix: the largest `P` such that every seq
    /// in `1..=P` was processed (`Seq(0)`: none).
    pub fn processed_prefix(&self) -> Seq {
        self.prefix
    }

    /// How many processed seqs wait above the prefix for a hole to fill.
    pub fn pending_above_prefix(&self) -> usize {
        self.above.len()
    }

    /// The migration cursor: the event id of the contiguous processed
    /// prefix, or `None` if nothing was processed (the upgrade body's
    /// `"cursor": null`). Also the value for a WebSocket `{"ack": ...}`.
    pub fn migration_cursor(&self) -> Option<EventId> {
        match (self.prefix_stream, self.namespace) {
            (Some(stream), Some(ns)) => Some(EventId::new(ns, stream, self.prefix)),
            _ => None,
        }
    }

    /// The headers to resume `stream` with its recorded cursor.
    ///
    /// Errors, in this order: [`GuardError::NothingToResume`] (no cursor for
    /// the stream: open it fresh instead), then those of
    /// [`resume_headers_for`](ClientGuard::resume_headers_for).
    pub fn resume_headers(&self, stream: StreamId) -> Result<ResumeHeaders, GuardError> {
        let cursor = self.cursors.get(&stream).ok_or(GuardError::NothingToResume { stream })?;
        self.resume_headers_for(cursor)
    }

    /// The headers to resume with a cursor held elsewhere (for example one
    /// persisted across a client restart), checked against this session.
    ///
    /// Errors, in this order: [`GuardError::MissingSession`] (never send a
    /// bare `Last-Event-ID`), [`GuardError::NamespaceUnknown`] (nothing ties
    /// the cursor to this session), [`GuardError::NamespaceMismatch`].
    pub fn resume_headers_for(&self, cursor: &EventId) -> Result<ResumeHeaders, GuardError> {
        let session_id = self.session_id.as_ref().ok_or(GuardError::MissingSession)?;
        match self.namespace {
            None => Err(GuardError::NamespaceUnknown),
            Some(expected) if expected != cursor.ns => {
                Err(GuardError::NamespaceMismatch { expected, found: cursor.ns })
            }
            Some(_) => Ok(ResumeHeaders { session_id: session_id.clone(), last_event_id: *cursor }),
        }
    }

    /// The request to migrate the session to a WebSocket: the session id and
    /// the contiguous processed prefix. Fails only with
    /// [`GuardError::MissingSession`].
    pub fn upgrade_request(&self) -> Result<UpgradeRequest, GuardError> {
        let session_id = self.session_id.clone().ok_or(GuardError::MissingSession)?;
        Ok(UpgradeRequest { session_id, cursor: self.migration_cursor() })
    }

    /// A continuity checker for a resumed (or fresh) SSE stream, starting at
    /// the stream's cursor.
    pub fn sse_continuity(&self, stream: StreamId) -> SseContinuity {
        SseContinuity::new(self.cursors.get(&stream).map_or(Seq::ZERO, |c| c.seq))
    }

    fn clear_progress(&mut self) {
        self.namespace = None;
        self.cursors.clear();
        self.prefix = Seq::ZERO;
        self.prefix_stream = None;
        self.above.clear();
    }
}

/// What [`ClientGuard::set_session_id`] did.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SessionChange {
    /// Same id as before: nothing changed.
    Unchanged,
    /// The first id: anything recorded without a session was cleared.
    Started,
    /// A new id (re-initialize): the old session's cursors were cleared.
    Replaced,
}

/// A session id that cannot be sent as `Mcp-Session-Id`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SessionIdError {
    /// The empty string.
    Empty,
    /// A byte outside visible ASCII (0x21..=0x7E).
    BadByte {
        /// Its offset in bytes.
        at: usize,
    },
}

impl fmt::Display for SessionIdError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionIdError::Empty => f.write_str("empty session id"),
            SessionIdError::BadByte { at } => write!(f, "session id byte {at} is not visible ASCII"),
        }
    }
}

impl std::error::Error for SessionIdError {}

/// An event of another namespace than the session's.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct NamespaceMismatch {
    /// The session's namespace.
    pub expected: Namespace,
    /// The namespace offered.
    pub found: Namespace,
}

impl fmt::Display for NamespaceMismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "namespace {} is not the session's {}", self.found, self.expected)
    }
}

impl std::error::Error for NamespaceMismatch {}

/// Why [`ClientGuard::processed`] recorded nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProcessError {
    /// The event is of another namespace (another session or incarnation).
    NamespaceMismatch {
        /// The session's namespace.
        expected: Namespace,
        /// The event's namespace.
        found: Namespace,
    },
    /// Seq 0 names no event.
    SeqZero,
    /// The seq was already recorded (drop repeats before processing them).
    Duplicate {
        /// The repeated seq.
        seq: Seq,
    },
    /// The stream's cursor is already past this seq: events of one stream
    /// must be recorded in stream order.
    StreamRegress {
        /// The stream.
        stream: StreamId,
        /// Its cursor.
        cursor: Seq,
        /// The seq offered.
        seq: Seq,
    },
    /// `limit` processed seqs already wait above the prefix for seq
    /// `waiting_for`; the event was not recorded.
    TooManyPending {
        /// The guard's bound.
        limit: usize,
        /// The first seq not processed (prefix + 1).
        waiting_for: Seq,
    },
}

impl fmt::Display for ProcessError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessError::NamespaceMismatch { expected, found } => {
                write!(f, "{}", NamespaceMismatch { expected: *expected, found: *found })
            }
            ProcessError::SeqZero => f.write_str("seq 0 names no event"),
            ProcessError::Duplicate { seq } => write!(f, "seq {seq} already processed"),
            ProcessError::StreamRegress { stream, cursor, seq } => {
                write!(f, "seq {seq} is behind stream {stream}'s cursor {cursor}")
            }
            ProcessError::TooManyPending { limit, waiting_for } => {
                write!(f, "{limit} processed seqs already wait for seq {waiting_for}")
            }
        }
    }
}

impl std::error::Error for ProcessError {}

/// Why no resume request can be built.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GuardError {
    /// No cursor is recorded for the stream: nothing to resume.
    NothingToResume {
        /// The stream asked for.
        stream: StreamId,
    },
    /// A cursor but no session id: a bare cursor would let a server resume
    /// (or create) the wrong session (seed 003).
    MissingSession,
    /// The session's namespace is not known, so no cursor can be shown to
    /// belong to it.
    NamespaceUnknown,
    /// The cursor is of another namespace than the session's.
    NamespaceMismatch {
        /// The session's namespace.
        expected: Namespace,
        /// The cursor's namespace.
        found: Namespace,
    },
}

impl fmt::Display for GuardError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GuardError::NothingToResume { stream } => write!(f, "no cursor for stream {stream}"),
            GuardError::MissingSession => f.write_str("a cursor without a session id cannot be resumed"),
            GuardError::NamespaceUnknown => f.write_str("the session's namespace is unknown"),
            GuardError::NamespaceMismatch { expected, found } => {
                write!(f, "{}", NamespaceMismatch { expected: *expected, found: *found })
            }
        }
    }
}

impl std::error::Error for GuardError {}

/// The two headers of an SSE resume, built only together by
/// [`ClientGuard::resume_headers`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct ResumeHeaders {
    session_id: String,
    last_event_id: EventId,
}

impl ResumeHeaders {
    /// The `Mcp-Session-Id` value.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The cursor, of the session's namespace.
    pub fn last_event_id(&self) -> &EventId {
        &self.last_event_id
    }

    /// Both headers as `(name, value)` pairs.
    pub fn pairs(&self) -> [(&'static str, String); 2] {
        [(SESSION_ID_HEADER, self.session_id.clone()), (LAST_EVENT_ID_HEADER, self.last_event_id.to_string())]
    }
}

/// A WebSocket migration request (`POST <P>/session/{id}/upgrade`), built by
/// [`ClientGuard::upgrade_request`].
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct UpgradeRequest {
    session_id: String,
    cursor: Option<EventId>,
}

impl UpgradeRequest {
    /// The session to migrate.
    pub fn session_id(&self) -> &str {
        &self.session_id
    }

    /// The contiguous processed prefix (`None`: processed nothing).
    pub fn cursor(&self) -> Option<EventId> {
        self.cursor
    }

    /// The JSON body: `{"cursor":"<event id>"}` or `{"cursor":null}` (event
    /// ids need no JSON escaping).
    pub fn body_json(&self) -> String {
        match &self.cursor {
            Some(id) => format!("{{\"cursor\":\"{id}\"}}"),
            None => "{\"cursor\":null}".to_owned(),
        }
    }

    /// The checker for the frames of the socket this request opens.
    pub fn ws_continuity(&self) -> WsContinuity {
        WsContinuity::new(self.cursor.map_or(Seq::ZERO, |c| c.seq))
    }
}

/// A JSON-RPC request id (MCP allows strings and integers).
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum RequestId {
    /// An integer id.
    Number(i64),
    /// A string id.
    String(String),
}

impl From<i64> for RequestId {
    fn from(n: i64) -> RequestId {
        RequestId::Number(n)
    }
}

impl From<&str> for RequestId {
    fn from(s: &str) -> RequestId {
        RequestId::String(s.to_owned())
    }
}

impl From<String> for RequestId {
    fn from(s: String) -> RequestId {
        RequestId::String(s)
    }
}

impl fmt::Display for RequestId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RequestId::Number(n) => write!(f, "{n}"),
            RequestId::String(s) => write!(f, "{s:?}"),
        }
    }
}

/// What the server answered to a resume, as input to [`classify_resume`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ResumeResponse<'a> {
    /// A success: the ids of the events received on the resumed stream
    /// before the caller judged the replay over (the stream ended, or a quiet
    /// period passed), in arrival order.
    Replayed(&'a [EventId]),
    /// A refusal: HTTP status and the body's `error` string (empty if none).
    Refused {
        /// HTTP status.
        status: u16,
        /// The `error` kind.
        error: &'a str,
    },
}

/// The verdict on one resume ([`classify_resume`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ResumeOutcome {
    /// Events after the cursor were replayed, in order.
    Resumed {
        /// How many.
        count: usize,
        /// The last one.
        last: EventId,
    },
    /// Nothing replayed and no request pending: the cursor was at the
    /// stream's high-water mark.
    CaughtUp,
    /// Nothing replayed while requests are pending on the stream: the
    /// transport cannot prove that nothing was lost (seed 003). Re-issue
    /// those requests idempotently or re-initialize.
    LossSuspect {
        /// The pending request ids.
        pending: Vec<RequestId>,
    },
    /// The server refused the resume.
    Refused {
        /// HTTP status.
        status: u16,
        /// The `error` kind.
        kind: RefusalKind,
    },
    /// The replay itself is wrong (a server fault): treat the stream as
    /// lossy and do not process past the fault.
    BadReplay(ReplayFault),
}

/// How a replay contradicts its cursor.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReplayFault {
    /// An event of another namespace or stream than the cursor's.
    Foreign {
        /// The offending id.
        id: EventId,
    },
    /// The first event is not after the cursor.
    NotAfterCursor {
        /// The cursor's seq.
        cursor: Seq,
        /// The first replayed seq.
        got: Seq,
    },
    /// Seqs do not strictly rise.
    NotRising {
        /// The previous seq.
        prev: Seq,
        /// The seq that followed it.
        got: Seq,
    },
}

/// Classifies a resume of the stream whose cursor was `cursor`; `pending` are
/// the requests still awaiting a response on that stream.
///
/// A replay is checked first: every event must have the cursor's namespace
/// and stream and seqs must rise from the cursor, else
/// [`ResumeOutcome::BadReplay`]. An empty replay is
/// [`ResumeOutcome::CaughtUp`] only when nothing is pending.
pub fn classify_resume(
    cursor: &EventId,
    response: ResumeResponse<'_>,
    pending: &[RequestId],
) -> ResumeOutcome {
    let replayed = match response {
        ResumeResponse::Refused { status, error } => {
            return ResumeOutcome::Refused { status, kind: RefusalKind::from_error(error) }
        }
        ResumeResponse::Replayed(ids) => ids,
    };
    let mut prev = cursor.seq;
    for (i, id) in replayed.iter().enumerate() {
        if id.ns != cursor.ns || id.stream != cursor.stream {
            return ResumeOutcome::BadReplay(ReplayFault::Foreign { id: *id });
        }
        if id.seq <= prev {
            return ResumeOutcome::BadReplay(if i == 0 {
                ReplayFault::NotAfterCursor { cursor: prev, got: id.seq }
            } else {
                ReplayFault::NotRising { prev, got: id.seq }
            });
        }
        prev = id.seq;
    }
    match replayed.last() {
        Some(last) => ResumeOutcome::Resumed { count: replayed.len(), last: *last },
        None if pending.is_empty() => ResumeOutcome::CaughtUp,
        None => ResumeOutcome::LossSuspect { pending: pending.to_vec() },
    }
}

/// The `error` kind of a refusal as a client reads it: one of the
/// contract's [`ErrorKind`]s, or a string this version does not know (a
/// newer server, another server), kept as sent.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum RefusalKind {
    /// A kind of the contract (`docs/SPEC.md` §4.2 and §5).
    Known(ErrorKind),
    /// Any other string, kept as sent.
    Other(String),
}

impl RefusalKind {
    /// Maps an `error` string; unknown strings become [`RefusalKind::Other`].
    pub fn from_error(error: &str) -> RefusalKind {
        ErrorKind::from_wire(error).map_or_else(|| RefusalKind::Other(error.to_owned()), RefusalKind::Known)
    }

    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            RefusalKind::Known(k) => k.as_str(),
            RefusalKind::Other(s) => s,
        }
    }

    /// The contract's kind, if it is one.
    pub fn known(&self) -> Option<ErrorKind> {
        match self {
            RefusalKind::Known(k) => Some(*k),
            RefusalKind::Other(_) => None,
        }
    }
}

impl From<ErrorKind> for RefusalKind {
    fn from(k: ErrorKind) -> Self {
        RefusalKind::Known(k)
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Continuity of a migrated session's WebSocket frames: the first frame is
/// cursor + 1, then seqs rise by exactly one (`docs/SPEC.md` §4.3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WsContinuity {
    /// The highest seq seen on the socket, or the migration cursor.
    last: u64,
}

/// The verdict on one WebSocket frame ([`WsContinuity::check`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WsCheck {
    /// In order and new: process it.
    Deliver,
    /// In order, but already processed (for example over SSE after the
    /// upgrade request was sent): drop it.
    AlreadyProcessed,
    /// Seqs `expected..got` never arrived (a server fault). The frame itself
    /// may be processed (unless [`ClientGuard::is_processed`] says it was);
    /// the guard's prefix cannot pass the hole, so close the socket and
    /// migrate again from [`ClientGuard::upgrade_request`].
    Hole {
        /// The seq that should have come.
        expected: Seq,
        /// The seq that came.
        got: Seq,
    },
    /// A seq at or below one already seen, or at or below the cursor (a
    /// server fault): drop the frame.
    Repeat {
        /// The repeated seq.
        seq: Seq,
    },
}

impl WsContinuity {
    /// A checker for a socket opened with migration cursor `cursor`
    /// (`Seq(0)`: processed nothing).
    pub fn new(cursor: Seq) -> WsContinuity {
        WsContinuity { last: cursor.0 }
    }

    /// The next seq expected (`None` after seq `u64::MAX`).
    pub fn expected(&self) -> Option<Seq> {
        self.last.checked_add(1).map(Seq)
    }

    /// Checks the next frame's seq against the order and against what
    /// `guard` recorded as processed. After a hole the checker expects the
    /// seq after `got`, so one hole is reported once.
    pub fn check(&mut self, seq: Seq, guard: &ClientGuard) -> WsCheck {
        if seq.0 <= self.last {
            return WsCheck::Repeat { seq };
        }
        // `seq > last`, so `last + 1` cannot overflow.
        let expected = Seq(self.last + 1);
        self.last = seq.0;
        if seq != expected {
            WsCheck::Hole { expected, got: seq }
        } else if guard.is_processed(seq) {
            WsCheck::AlreadyProcessed
        } else {
            WsCheck::Deliver
        }
    }
}

/// Continuity of one SSE stream: its seqs strictly rise (they need not be
/// dense, other streams' events sit between them).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SseContinuity {
    /// The highest seq seen on the stream, or the resume cursor.
    last: u64,
}

/// The verdict on one SSE event ([`SseContinuity::check`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SseCheck {
    /// In order and new: process it.
    Deliver,
    /// In order, but already processed: drop it.
    AlreadyProcessed,
    /// The same seq as the previous event (or the cursor): drop it.
    Repeat {
        /// The repeated seq.
        seq: Seq,
    },
    /// A seq below the previous one (or the cursor): a server fault; drop it.
    Regress {
        /// The highest seq seen so far.
        last: Seq,
        /// The seq that came.
        got: Seq,
    },
}

impl SseContinuity {
    /// A checker for a stream resumed from seq `cursor` (`Seq(0)`: a fresh
    /// stream).
    pub fn new(cursor: Seq) -> SseContinuity {
        SseContinuity { last: cursor.0 }
    }

    /// Checks the next event's seq against the order and against what
    /// `guard` recorded as processed.
    pub fn check(&mut self, seq: Seq, guard: &ClientGuard) -> SseCheck {
        if seq.0 == self.last {
            return SseCheck::Repeat { seq };
        }
        if seq.0 < self.last {
            return SseCheck::Regress { last: Seq(self.last), got: seq };
        }
        self.last = seq.0;
        if guard.is_processed(seq) {
            SseCheck::AlreadyProcessed
        } else {
            SseCheck::Deliver
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: Namespace = Namespace(0x00ab_34ff_9c01_de77);

    fn ev(stream: u64, seq: u64) -> EventId {
        EventId::new(NS, StreamId(stream), Seq(seq))
    }

    fn guard() -> ClientGuard {
        let mut g = ClientGuard::new();
        assert_eq!(g.set_session_id("s-7f3a"), Ok(SessionChange::Started));
        g
    }

    #[test]
    fn cursors_advance_only_when_processed() {
        let mut g = guard();
        // Bytes of seq 1 arrived, but the application has not processed it.
        assert_eq!(g.stream_cursor(StreamId(1)), None);
        assert_eq!(g.resume_headers(StreamId(1)), Err(GuardError::NothingToResume { stream: StreamId(1) }));
        assert_eq!(g.upgrade_request().unwrap().body_json(), r#"{"cursor":null}"#);
        g.processed(&ev(1, 1)).unwrap();
        g.processed(&ev(1, 3)).unwrap();
        assert_eq!(g.stream_cursor(StreamId(1)), Some(ev(1, 3)));
        assert_eq!(g.namespace(), Some(NS));
        let h = g.resume_headers(StreamId(1)).unwrap();
        assert_eq!(
            h.pairs(),
            [("Mcp-Session-Id", "s-7f3a".to_owned()), ("Last-Event-ID", "00ab34ff9c01de77_1-3".to_owned())]
        );
        assert_eq!(h.session_id(), "s-7f3a");
    }

    #[test]
    fn contiguous_prefix_with_out_of_order_processing_across_streams() {
        let mut g = guard();
        // Stream 1 holds seqs 1, 3, 6; stream 2 holds 2, 4, 5.
        g.processed(&ev(1, 1)).unwrap();
        g.processed(&ev(1, 3)).unwrap();
        g.processed(&ev(1, 6)).unwrap();
        assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(1), 2));
        assert_eq!(g.migration_cursor(), Some(ev(1, 1)));
        g.processed(&ev(2, 2)).unwrap();
        assert_eq!(g.processed_prefix(), Seq(3), "2 fills the hole, 3 was waiting");
        assert_eq!(g.migration_cursor(), Some(ev(1, 3)));
        g.processed(&ev(2, 5)).unwrap();
        assert_eq!(g.processed_prefix(), Seq(3));
        g.processed(&ev(2, 4)).unwrap_err(); // stream 2 is already at 5
        assert!(!g.is_processed(Seq(4)));
        assert_eq!(g.processed_prefix(), Seq(3));
    }

    #[test]
    fn contiguous_prefix_catches_up_through_a_long_run() {
        let mut g = guard();
        for s in (2..=1000).rev() {
            g.processed(&ev(s, s)).unwrap(); // one stream per event, any order
        }
        assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(0), 999));
        assert_eq!(g.migration_cursor(), None);
        g.processed(&ev(1, 1)).unwrap();
        assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(1000), 0));
        assert_eq!(g.migration_cursor(), Some(ev(1000, 1000)));
        let req = g.upgrade_request().unwrap();
        assert_eq!(req.body_json(), r#"{"cursor":"00ab34ff9c01de77_1000-1000"}"#);
        assert_eq!(req.cursor(), Some(ev(1000, 1000)), "the cursor is the processed prefix");
        assert_eq!(req.session_id(), "s-7f3a");
    }

    #[test]
    fn pending_above_prefix_is_bounded() {
        let mut g = ClientGuard::with_max_pending(3);
        for s in 2..=4 {
            g.processed(&ev(1, s)).unwrap();
        }
        assert_eq!(
            g.processed(&ev(1, 5)),
            Err(ProcessError::TooManyPending { limit: 3, waiting_for: Seq(1) })
        );
        assert_eq!(g.stream_cursor(StreamId(1)), Some(ev(1, 4)), "refused event not recorded");
        g.processed(&ev(2, 1)).unwrap(); // filling the hole is always accepted
        assert_eq!(g.processed_prefix(), Seq(4));
        g.processed(&ev(1, 5)).unwrap();
    }

    #[test]
    fn prefix_reaches_u64_max_without_overflow() {
        let mut g = guard();
        g.processed(&ev(1, u64::MAX)).unwrap();
        assert_eq!(g.pending_above_prefix(), 1);
        g.prefix = Seq(u64::MAX - 2); // as if 1..=MAX-2 were processed
        g.prefix_stream = Some(StreamId(2));
        g.processed(&ev(2, u64::MAX - 1)).unwrap();
        assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(u64::MAX), 0));
        assert_eq!(g.processed(&ev(1, u64::MAX)), Err(ProcessError::Duplicate { seq: Seq(u64::MAX) }));
    }

    #[test]
    fn processed_refusals_change_nothing() {
        let mut g = guard();
        g.processed(&ev(1, 2)).unwrap();
        assert_eq!(g.processed(&ev(1, 2)), Err(ProcessError::Duplicate { seq: Seq(2) }));
        assert_eq!(g.processed(&ev(1, 0)), Err(ProcessError::SeqZero));
        assert_eq!(
            g.processed(&ev(1, 1)),
            Err(ProcessError::StreamRegress { stream: StreamId(1), cursor: Seq(2), seq: Seq(1) })
        );
        let other = EventId::new(Namespace(7), StreamId(1), Seq(1));
        assert_eq!(
            g.processed(&other),
            Err(ProcessError::NamespaceMismatch { expected: NS, found: Namespace(7) })
        );
        assert_eq!((g.processed_prefix(), g.stream_cursor(StreamId(1))), (Seq(0), Some(ev(1, 2))));
        g.processed(&ev(2, 1)).unwrap();
        assert_eq!(g.processed(&ev(3, 1)), Err(ProcessError::Duplicate { seq: Seq(1) }));
    }

    #[test]
    fn cursor_without_session_is_refused() {
        let mut g = ClientGuard::new();
        g.processed(&ev(1, 1)).unwrap();
        assert_eq!(g.resume_headers(StreamId(1)), Err(GuardError::MissingSession));
        assert_eq!(g.resume_headers_for(&ev(1, 1)), Err(GuardError::MissingSession));
        assert_eq!(g.upgrade_request(), Err(GuardError::MissingSession));
        // Learning a session afterwards does not adopt those cursors.
        assert_eq!(g.set_session_id("s-1"), Ok(SessionChange::Started));
        assert_eq!(g.resume_headers(StreamId(1)), Err(GuardError::NothingToResume { stream: StreamId(1) }));
    }

    #[test]
    fn foreign_namespace_is_refused() {
        let mut g = guard();
        let foreign = EventId::new(Namespace(0xdead), StreamId(1), Seq(9));
        assert_eq!(g.resume_headers_for(&foreign), Err(GuardError::NamespaceUnknown));
        g.processed(&ev(1, 1)).unwrap();
        assert_eq!(
            g.resume_headers_for(&foreign),
            Err(GuardError::NamespaceMismatch { expected: NS, found: Namespace(0xdead) })
        );
        assert_eq!(g.resume_headers_for(&ev(1, 1)).unwrap().last_event_id(), &ev(1, 1));
        assert_eq!(
            g.set_namespace(Namespace(1)),
            Err(NamespaceMismatch { expected: NS, found: Namespace(1) })
        );
        assert_eq!(g.set_namespace(NS), Ok(()));
    }

    #[test]
    fn explicit_namespace_binds_before_processing() {
        let mut g = guard();
        g.set_namespace(Namespace(5)).unwrap();
        assert_eq!(
            g.processed(&ev(1, 1)),
            Err(ProcessError::NamespaceMismatch { expected: Namespace(5), found: NS })
        );
        assert_eq!(
            g.resume_headers_for(&ev(1, 1)),
            Err(GuardError::NamespaceMismatch { expected: Namespace(5), found: NS })
        );
    }

    #[test]
    fn new_session_id_clears_cursors() {
        let mut g = guard();
        g.processed(&ev(1, 1)).unwrap();
        g.processed(&ev(2, 3)).unwrap();
        assert_eq!(g.set_session_id("s-7f3a"), Ok(SessionChange::Unchanged));
        assert_eq!(g.stream_cursor(StreamId(1)), Some(ev(1, 1)));
        assert_eq!(g.set_session_id("s-8000"), Ok(SessionChange::Replaced));
        assert_eq!(g.session_id(), Some("s-8000"));
        assert_eq!((g.stream_cursor(StreamId(1)), g.namespace(), g.migration_cursor()), (None, None, None));
        assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(0), 0));
        // The new incarnation may use another namespace.
        g.processed(&EventId::new(Namespace(9), StreamId(1), Seq(1))).unwrap();
        g.end_session();
        assert_eq!((g.session_id(), g.namespace()), (None, None));
    }

    #[test]
    fn bad_session_ids_are_refused() {
        let mut g = ClientGuard::new();
        assert_eq!(g.set_session_id(""), Err(SessionIdError::Empty));
        assert_eq!(g.set_session_id("a b"), Err(SessionIdError::BadByte { at: 1 }));
        assert_eq!(g.set_session_id("ab\r\nX-Evil: 1"), Err(SessionIdError::BadByte { at: 2 }));
        assert_eq!(g.set_session_id("é"), Err(SessionIdError::BadByte { at: 0 }));
        assert_eq!(g.session_id(), None);
    }

    #[test]
    fn forget_stream_keeps_the_prefix() {
        let mut g = guard();
        g.processed(&ev(1, 1)).unwrap();
        assert_eq!(g.forget_stream(StreamId(1)), Some(ev(1, 1)));
        assert_eq!(g.stream_cursor(StreamId(1)), None);
        assert_eq!(g.migration_cursor(), Some(ev(1, 1)));
    }

    #[test]
    fn empty_replay_while_request_pending_is_loss_suspect() {
        let pending = [RequestId::from(7), RequestId::from("call-2")];
        assert_eq!(
            classify_resume(&ev(1, 2), ResumeResponse::Replayed(&[]), &pending),
            ResumeOutcome::LossSuspect { pending: pending.to_vec() }
        );
        assert_eq!(classify_resume(&ev(1, 2), ResumeResponse::Replayed(&[]), &[]), ResumeOutcome::CaughtUp);
    }

    #[test]
    fn replay_after_cursor_is_resumed() {
        let replay = [ev(1, 3), ev(1, 7), ev(1, 8)];
        assert_eq!(
            classify_resume(&ev(1, 2), ResumeResponse::Replayed(&replay), &[RequestId::from(1)]),
            ResumeOutcome::Resumed { count: 3, last: ev(1, 8) }
        );
    }

    #[test]
    fn bad_replays_are_reported() {
        let c = ev(1, 5);
        let cases = [
            (vec![ev(2, 6)], ReplayFault::Foreign { id: ev(2, 6) }),
            (
                vec![ev(1, 6), EventId::new(Namespace(1), StreamId(1), Seq(7))],
                ReplayFault::Foreign { id: EventId::new(Namespace(1), StreamId(1), Seq(7)) },
            ),
            (vec![ev(1, 5)], ReplayFault::NotAfterCursor { cursor: Seq(5), got: Seq(5) }),
            (vec![ev(1, 2)], ReplayFault::NotAfterCursor { cursor: Seq(5), got: Seq(2) }),
            (vec![ev(1, 6), ev(1, 9), ev(1, 9)], ReplayFault::NotRising { prev: Seq(9), got: Seq(9) }),
        ];
        for (replay, fault) in cases {
            assert_eq!(
                classify_resume(&c, ResumeResponse::Replayed(&replay), &[]),
                ResumeOutcome::BadReplay(fault)
            );
        }
    }

    #[test]
    fn refusals_map_to_kinds() {
        let refused =
            |status, error| classify_resume(&ev(1, 1), ResumeResponse::Refused { status, error }, &[]);
        assert_eq!(
            refused(409, "gap_not_covered"),
            ResumeOutcome::Refused { status: 409, kind: RefusalKind::Known(ErrorKind::GapNotCovered) }
        );
        assert_eq!(
            refused(404, "unknown_session"),
            ResumeOutcome::Refused { status: 404, kind: RefusalKind::Known(ErrorKind::UnknownSession) }
        );
        assert_eq!(
            refused(500, "boom"),
            ResumeOutcome::Refused { status: 500, kind: RefusalKind::Other("boom".to_owned()) }
        );
        for &k in ErrorKind::ALL {
            let kind = RefusalKind::from_error(k.as_str());
            assert_eq!(kind, RefusalKind::Known(k));
            assert_eq!(kind.known(), Some(k));
            assert_eq!(kind.as_str(), k.as_str());
            assert_eq!(kind.to_string(), k.as_str());
        }
        assert_eq!(RefusalKind::from_error("boom").known(), None);
        assert_eq!(RefusalKind::from_error("").as_str(), "");
    }

    #[test]
    fn first_ws_frame_must_be_cursor_plus_one() {
        let g = guard();
        let mut ws = WsContinuity::new(Seq(10));
        assert_eq!(ws.expected(), Some(Seq(11)));
        assert_eq!(ws.check(Seq(14), &g), WsCheck::Hole { expected: Seq(11), got: Seq(14) });
        assert_eq!(ws.check(Seq(15), &g), WsCheck::Deliver, "one hole is reported once");
        let mut ws = WsContinuity::new(Seq(10));
        assert_eq!(ws.check(Seq(10), &g), WsCheck::Repeat { seq: Seq(10) });
        assert_eq!(ws.check(Seq(11), &g), WsCheck::Deliver);
    }

    #[test]
    fn ws_seqs_rise_by_one_and_processed_frames_are_dropped() {
        let mut g = guard();
        g.processed(&ev(1, 1)).unwrap();
        g.processed(&ev(1, 2)).unwrap();
        let req = g.upgrade_request().unwrap();
        // After sending the upgrade, the application still processed SSE events 3 and 5.
        g.processed(&ev(2, 3)).unwrap();
        g.processed(&ev(1, 5)).unwrap();
        let mut ws = req.ws_continuity();
        let got: Vec<WsCheck> = [3, 4, 5, 6, 6, 5, 8].iter().map(|&s| ws.check(Seq(s), &g)).collect();
        assert_eq!(
            got,
            [
                WsCheck::AlreadyProcessed,
                WsCheck::Deliver,
                WsCheck::AlreadyProcessed,
                WsCheck::Deliver,
                WsCheck::Repeat { seq: Seq(6) },
                WsCheck::Repeat { seq: Seq(5) },
                WsCheck::Hole { expected: Seq(7), got: Seq(8) },
            ]
        );
        let mut fresh = WsContinuity::new(Seq::ZERO);
        assert_eq!(fresh.check(Seq(1), &ClientGuard::new()), WsCheck::Deliver);
        let mut end = WsContinuity::new(Seq(u64::MAX));
        assert_eq!(
            (end.expected(), end.check(Seq(u64::MAX), &g)),
            (None, WsCheck::Repeat { seq: Seq(u64::MAX) })
        );
    }

    #[test]
    fn sse_seqs_strictly_rise() {
        let mut g = guard();
        g.processed(&ev(1, 4)).unwrap();
        g.processed(&ev(2, 6)).unwrap(); // processed earlier over a WebSocket, say
        let mut sse = g.sse_continuity(StreamId(1));
        assert_eq!(sse.check(Seq(4), &g), SseCheck::Repeat { seq: Seq(4) });
        assert_eq!(sse.check(Seq(3), &g), SseCheck::Regress { last: Seq(4), got: Seq(3) });
        assert_eq!(sse.check(Seq(5), &g), SseCheck::Deliver);
        assert_eq!(sse.check(Seq(6), &g), SseCheck::AlreadyProcessed);
        assert_eq!(sse.check(Seq(9), &g), SseCheck::Deliver, "SSE seqs need not be dense");
        assert_eq!(sse.check(Seq(7), &g), SseCheck::Regress { last: Seq(9), got: Seq(7) });
        assert_eq!(g.sse_continuity(StreamId(3)), SseContinuity::new(Seq::ZERO));
    }

    #[test]
    fn errors_display() {
        assert_eq!(GuardError::MissingSession.to_string(), "a cursor without a session id cannot be resumed");
        assert_eq!(
            ProcessError::NamespaceMismatch { expected: NS, found: Namespace(1) }.to_string(),
            "namespace 0000000000000001 is not the session's 00ab34ff9c01de77"
        );
        assert_eq!(SessionIdError::Empty.to_string(), "empty session id");
        assert_eq!(SessionIdError::BadByte { at: 2 }.to_string(), "session id byte 2 is not visible ASCII");
        assert_eq!(RequestId::from("a").to_string(), "\"a\"");
        assert_eq!(RequestId::from(3).to_string(), "3");
    }
}
