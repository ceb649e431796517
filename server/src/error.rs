//! Transport-level refusals: one type, one place that maps each to its HTTP
//! status and JSON body `{"error": "<kind>", "message": "...", ...}`.

use axum::http::{HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};
use gapless::session::TicketError;
use gapless::{Refusal, SessionError};
use serde_json::{json, Map, Value};

/// A refusal with its status, `error` kind, message and extra fields.
#[derive(Debug, Clone)]
pub struct ApiError {
    /// HTTP status.
    pub status: StatusCode,
    /// The machine-readable `error` kind.
    pub kind: &'static str,
    /// A human-readable explanation.
    pub message: String,
    /// Further fields of the JSON body (e.g. `cursor`, `oldest`, `missing`).
    pub extra: Map<String, Value>,
    /// The `Allow` header of a 405.
    pub allow: Option<&'static str>,
}

impl ApiError {
    /// A refusal without extra fields.
    pub fn new(status: StatusCode, kind: &'static str, message: impl Into<String>) -> Self {
        ApiError { status, kind, message: message.into(), extra: Map::new(), allow: None }
    }

    /// Adds a field to the JSON body.
    pub fn with(mut self, key: &str, value: Value) -> Self {
        self.extra.insert(key.to_owned(), value);
        self
    }

    /// The JSON body.
    pub fn body(&self) -> Value {
        let mut m = Map::new();
        m.insert("error".into(), json!(self.kind));
        m.insert("message".into(), json!(self.message));
        for (k, v) in &self.extra {
            m.insert(k.clone(), v.clone());
        }
        Value::Object(m)
    }

    pub(crate) fn missing_session() -> Self {
        Self::new(StatusCode::BAD_REQUEST, "missing_session", "this request needs an Mcp-Session-Id header")
    }
    pub(crate) fn unknown_session() -> Self {
        Self::new(
            StatusCode::NOT_FOUND,
            "unknown_session",
            "no such session (expired, deleted or never created)",
        )
    }
    pub(crate) fn malformed(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, "malformed_request", message)
    }
    pub(crate) fn session_migrated() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "session_migrated",
            "this session migrated to a WebSocket; send requests over the socket",
        )
    }
    pub(crate) fn stream_busy() -> Self {
        Self::new(
            StatusCode::CONFLICT,
            "stream_busy",
            "the standalone stream of this session is already open on another connection",
        )
    }
    pub(crate) fn method_not_allowed(allowed: &'static str) -> Self {
        let mut e =
            Self::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", format!("allowed: {allowed}"));
        e.allow = Some(allowed);
        e
    }
}

impl From<Refusal> for ApiError {
    fn from(r: Refusal) -> Self {
        let status = StatusCode::from_u16(r.http_status()).expect("valid status");
        let mut e = ApiError::new(status, r.kind().as_str(), r.to_string());
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
            Refusal::ResumeRequiresSession | Refusal::UnknownSession => {}
        }
        e
    }
}

impl From<SessionError> for ApiError {
    fn from(e: SessionError) -> Self {
        match e {
            SessionError::TooManySessions { max } => ApiError::new(
                StatusCode::SERVICE_UNAVAILABLE,
                "too_many_sessions",
                format!("the server holds its maximum of {max} sessions"),
            ),
            _ => ApiError::unknown_session(),
        }
    }
}

impl From<TicketError> for ApiError {
    fn from(e: TicketError) -> Self {
        match e {
            TicketError::TooMany { .. } => {
                ApiError::new(StatusCode::TOO_MANY_REQUESTS, "too_many_tickets", e.to_string())
            }
            _ => ApiError::new(StatusCode::FORBIDDEN, "ticket_invalid", e.to_string()),
        }
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut r = (self.status, axum::Json(self.body())).into_response();
        if let Some(a) = self.allow {
            r.headers_mut().insert(axum::http::header::ALLOW, HeaderValue::from_static(a));
        }
        r
    }
}
