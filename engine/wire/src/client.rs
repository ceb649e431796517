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
use crate::{Seq, StreamId};
use std::collections::{BTreeMap, HashMap};
use std::fmt;

mod continuity;
mod resume;
pub use continuity::{SseCheck, SseContinuity, WsCheck, WsContinuity};
pub use resume::{classify_resume, RefusalKind, ReplayFault, ResumeOutcome, ResumeResponse};

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
    /// a refusal with [`ErrorKind::UnknownSession`](crate::ErrorKind::UnknownSession)).
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

#[cfg(test)]
mod tests;
