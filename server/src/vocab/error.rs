//! The errors every layer shares.
//!
//! [`ApiError`], a transport-level refusal: one type, whose kind is an
//! [`ErrorKind`] of the contract (`gapless::ErrorKind`, spelled once in
//! `gapless-wire`) and with it its HTTP status and JSON body
//! `{"error": "<kind>", "message": "...", ...}`; every refusal the server
//! sends is built from one (as a response by `http/error.rs`).
//!
//! [`SendError`] and [`ClientRequestError`]: why a message to the client,
//! or a request to it, went nowhere.

use gapless::ring::SnapshotError;
use gapless::session::TicketError;
use gapless::{ErrorKind, Refusal, SessionError, SessionPublishError};
use http::StatusCode;
use serde_json::{json, Map, Value};
use std::fmt;

/// A refusal with its kind, message and extra fields.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// The contract's kind: the JSON `error` and the HTTP status.
    pub kind: ErrorKind,
    /// A human-readable explanation.
    pub message: String,
    /// Further fields of the JSON body (e.g. `cursor`, `oldest`, `missing`).
    pub extra: Map<String, Value>,
    /// The `Allow` header of a 405.
    pub allow: Option<&'static str>,
    /// The `Retry-After` header, in seconds.
    pub retry_after: Option<u64>,
}

impl ApiError {
    /// A refusal without extra fields.
    pub fn new(kind: ErrorKind, message: impl Into<String>) -> Self {
        ApiError { kind, message: message.into(), extra: Map::new(), allow: None, retry_after: None }
    }

    /// Adds a field to the JSON body.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// Adds a `Retry-After` header of `secs` seconds.
    pub fn retry_after(mut self, secs: u64) -> Self {
        self.retry_after = Some(secs);
        self
    }

    /// The HTTP status (the kind's).
    pub fn status(&self) -> StatusCode {
        StatusCode::from_u16(self.kind.http_status()).expect("the contract's statuses are valid")
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut m = Map::new();
        m.insert("error".into(), json!(self.kind.as_str()));
        m.insert("message".into(), json!(self.message));
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    pub(crate) fn missing_session() -> Self {
        Self::new(ErrorKind::MissingSession, "this request needs an Mcp-Session-Id header")
    }
    pub(crate) fn unknown_session() -> Self {
        Self::new(ErrorKind::UnknownSession, "no such session (expired, deleted or never created)")
    }
    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        Self::new(ErrorKind::MalformedRequest, message)
    }
    pub(crate) fn session_migrated() -> Self {
        Self::new(
            ErrorKind::SessionMigrated,
            "this session migrated to a WebSocket; send requests over the socket",
        )
    }
    pub(crate) fn stream_busy() -> Self {
        Self::new(
            ErrorKind::StreamBusy,
            "the standalone stream of this session is already open on another connection",
        )
    }
    pub(crate) fn method_not_allowed(allowed: &'static str) -> Self {
        let mut e = Self::new(ErrorKind::MethodNotAllowed, format!("allowed: {allowed}"));
        e.allow = Some(allowed);
        e
    }
    /// 405 for a GET or DELETE of MCP 2026-07-28, which has neither a
    /// standalone stream nor sessions (`docs/SPEC.md` §5.4).
    pub(crate) fn sessionless_post_only() -> Self {
        let mut e = Self::new(
            ErrorKind::MethodNotAllowed,
            "MCP 2026-07-28 serves POST only: it has no standalone stream and no sessions",
        );
        e.allow = Some("POST");
        e
    }
    /// The cluster's store could not be asked: nothing was decided or
    /// created (`docs/SPEC.md` §8.5).
    pub(crate) fn store_unavailable(e: &impl std::fmt::Display) -> Self {
        Self::new(ErrorKind::StoreUnavailable, format!("the session store is unavailable: {e}"))
            .retry_after(1)
    }
    /// The cluster's store kept answering that the session's window moved
    /// between a decision and its replay: the client retries.
    pub(crate) fn window_kept_moving() -> Self {
        Self::new(ErrorKind::StoreUnavailable, "the session's window kept moving; retry").retry_after(1)
    }
    /// A publish the transport itself makes failed (the session ended, the
    /// store refused or is down).
    pub(crate) fn send(e: &SendError) -> Self {
        match e {
            SendError::Closed => Self::unknown_session(),
            SendError::Refused(r) => {
                Self::new(ErrorKind::StoreUnavailable, format!("the event could not be stored: {r}"))
                    .retry_after(1)
            }
        }
    }
    /// The refusal of a stream whose events were (partly) evicted before
    /// any connection was open to read them: the standalone stream's
    /// undelivered backlog, or a request stream's first events.
    pub(crate) fn unread_gap(e: SnapshotError) -> Self {
        match e {
            SnapshotError::Evicted { wanted, oldest, missing } => Self::new(
                ErrorKind::GapNotCovered,
                format!("{missing} event(s) of the stream from seq {wanted} were evicted before any connection was open"),
            )
            .with("cursor", Value::Null)
            .with("oldest", json!(oldest.get()))
            .with("missing", json!(missing.count())),
            _ => Self::unknown_session(),
        }
    }
    pub(crate) fn payload_too_large(limit: usize) -> Self {
        Self::new(ErrorKind::PayloadTooLarge, format!("request body over {limit} bytes"))
            .with("limit", json!(limit))
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        let mut e = ApiError::new(r.kind(), r.to_string());
        match r {
            Refusal::MalformedCursor { reason } => e = e.with("reason", json!(reason.to_string())),
            Refusal::NamespaceMismatch { .. } => {}
            Refusal::CursorAhead { cursor, head } => {
                e = e.with("cursor", json!(cursor.to_string())).with("head", json!(head.get()))
            }
            Refusal::CursorNotDelivered { cursor, .. } => e = e.with("cursor", json!(cursor.to_string())),
            Refusal::GapNotCovered { cursor, oldest, oldest_id, missing } => {
                e = e
                    .with("cursor", cursor.map_or(Value::Null, |c| json!(c.to_string())))
                    .with("oldest", oldest_id.map_or(json!(oldest.get()), |o| json!(o.to_string())))
                    .with("missing", json!(missing.count()))
            }
            Refusal::HistoryRewritten { cursor, head } => {
                e = e.with("cursor", json!(cursor.to_string())).with("head", json!(head.get()))
            }
            Refusal::StoreUnavailable { .. } => e = e.retry_after(1),
            Refusal::ResumeRequiresSession | Refusal::UnknownSession => {}
        }
        e
    }
}

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::TooManySessions { max } => ApiError::new(
                ErrorKind::TooManySessions,
                format!("the server holds its maximum of {max} sessions"),
            ),
            SessionError::MemoryExhausted { limit } => ApiError::new(
                ErrorKind::MemoryExhausted,
                format!("the server's memory budget ({limit} bytes) is spent; retry later"),
            )
            .retry_after(5),
            _ => ApiError::unknown_session(),
        }
    }
}

impl From<TicketError> for ApiError {
    fn from(e: TicketError) -> Self {
        match e {
            TicketError::TooMany { .. } => ApiError::new(ErrorKind::TooManyTickets, e.to_string()),
            _ => ApiError::new(ErrorKind::TicketInvalid, e.to_string()),
        }
    }
}

/// Why something could not be sent to the client.
#[derive(Debug, Clone, PartialEq)]
pub enum SendError {
    /// The session is gone.
    Closed,
    /// The ring refused the event (e.g. larger than its byte budget).
    Refused(String),
}

impl fmt::Display for SendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SendError::Closed => f.write_str("session closed"),
            SendError::Refused(r) => write!(f, "event refused: {r}"),
        }
    }
}

impl std::error::Error for SendError {}

/// Why a session's value ([`crate::SessionHandle::set_value`]) or hold
/// ([`crate::SessionHandle::hold`]) could not be read or written.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ValueError {
    /// The session is gone.
    Closed,
    /// The cluster's store could not be reached, or refused.
    Store(String),
}

impl fmt::Display for ValueError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ValueError::Closed => f.write_str("session closed"),
            ValueError::Store(e) => write!(f, "the session store: {e}"),
        }
    }
}

impl std::error::Error for ValueError {}

impl From<SessionPublishError> for SendError {
    fn from(e: SessionPublishError) -> Self {
        match e {
            SessionPublishError::Closed => SendError::Closed,
            SessionPublishError::Publish(p) => SendError::Refused(p.to_string()),
        }
    }
}

/// Why a server → client request got no result.
#[derive(Debug, Clone, PartialEq)]
pub enum ClientRequestError {
    /// It could not be sent.
    Send(SendError),
    /// The client answered with a JSON-RPC error.
    Error(Value),
    /// No answer in time.
    Timeout,
    /// The originating request was cancelled, or the session ended.
    Cancelled,
    /// The request's protocol revision has no server → client requests
    /// (MCP 2026-07-28): the message says which.
    Unsupported(String),
}

impl fmt::Display for ClientRequestError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientRequestError::Send(e) => e.fmt(f),
            ClientRequestError::Error(e) => write!(f, "client returned an error: {e}"),
            ClientRequestError::Timeout => f.write_str("client did not answer in time"),
            ClientRequestError::Cancelled => f.write_str("cancelled"),
            ClientRequestError::Unsupported(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for ClientRequestError {}

#[cfg(test)]
mod tests {
    use super::ApiError;
    use gapless::ring::SnapshotError;
    use gapless::{Missing, Seq, StreamId};
    use serde_json::json;

    /// A standalone backlog evicted before any GET was open is refused with
    /// the gap's numbers (no cursor: the client named none).
    #[test]
    fn an_evicted_standalone_backlog_is_gap_not_covered() {
        let e = ApiError::unread_gap(SnapshotError::Evicted {
            wanted: Seq(3),
            oldest: Seq(10),
            missing: Missing::AtLeast(2),
        });
        assert_eq!(e.status().as_u16(), 409);
        let b = e.body();
        assert_eq!(
            (&b["error"], &b["cursor"], &b["oldest"], &b["missing"]),
            (&json!("gap_not_covered"), &json!(null), &json!(10), &json!(2))
        );
        // The standalone stream's record is never reclaimed while its
        // session lives: not finding it means the session is gone.
        let e = ApiError::unread_gap(SnapshotError::UnknownStream { stream: StreamId(1) });
        assert_eq!((e.status().as_u16(), &e.body()["error"]), (404, &json!("unknown_session")));
    }
}
