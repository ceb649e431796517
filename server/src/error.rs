//! Transport-level refusals: one type, one place that maps each to its HTTP
//! status and JSON body `{"error": "<kind>", "message": "...", ...}`.
//!
//! The kind, and with it the status, is an [`ErrorKind`] of the contract
//! (`gapless::ErrorKind`, spelled once in `gapless-wire`); every refusal the
//! server sends is built here from one.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use gapless::session::TicketError;
use gapless::{ErrorKind, Refusal, SessionError};
use serde_json::{json, Map, Value};

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
    /// The cluster's store could not be asked: nothing was decided or
    /// created (`docs/SPEC.md` §8.5).
    pub(crate) fn store_unavailable(e: &gapless_redis::StoreError) -> Self {
        Self::new(ErrorKind::StoreUnavailable, format!("the session store is unavailable: {e}"))
            .retry_after(1)
    }
    /// A publish the transport itself makes failed (the session ended, the
    /// store refused or is down).
    pub(crate) fn send(e: &crate::host::SendError) -> Self {
        match e {
            crate::host::SendError::Closed => Self::unknown_session(),
            crate::host::SendError::Refused(r) => {
                Self::new(ErrorKind::StoreUnavailable, format!("the event could not be stored: {r}"))
                    .retry_after(1)
            }
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

impl From<gapless_redis::RedeemError> for ApiError {
    fn from(e: gapless_redis::RedeemError) -> Self {
        match e {
            gapless_redis::RedeemError::Ticket(t) => t.into(),
            gapless_redis::RedeemError::HistoryRewritten { cursor, head } => {
                Refusal::HistoryRewritten { cursor, head }.into()
            }
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

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status(), axum::Json(self.body())).into_response();
        if let Some(a) = self.allow {
            r.headers_mut().insert(axum::http::header::ALLOW, HeaderValue::from_static(a));
        }
        if let Some(secs) = self.retry_after {
            r.headers_mut().insert(axum::http::header::RETRY_AFTER, HeaderValue::from(secs));
        }
        // The request's body was not read to its end: the connection cannot
        // carry another request, so say so and let hyper close it instead of
        // waiting for the rest.
        if matches!(self.kind, ErrorKind::RequestTimeout | ErrorKind::PayloadTooLarge) {
            r.headers_mut().insert(axum::http::header::CONNECTION, HeaderValue::from_static("close"));
        }
        // For the operator's counts (`observe.rs`), which read it from the
        // response.
        r.extensions_mut().insert(self);
        r
    }
}
