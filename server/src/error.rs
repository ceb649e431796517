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
    /// 405 for a GET or DELETE of MCP 2026-07-28, which has neither a
    /// standalone stream nor sessions (`docs/SPEC.md` §5.4).
    pub(crate) fn modern_post_only() -> Self {
        let mut e = Self::new(
            ErrorKind::MethodNotAllowed,
            "MCP 2026-07-28 serves POST only: it has no standalone stream and no sessions",
        );
        e.allow = Some("POST");
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

#[cfg(test)]
mod tests {
    //! The refusal mapping against the contract: each refusal's status,
    //! `error` name and the fields `docs/SPEC.md` §4.2, §5 and §8 give it.
    use super::*;
    use gapless::event_id::MalformedReason;
    use gapless::{EventId, Missing, Namespace, Seq, StreamId};

    const NS: Namespace = Namespace(0x00ab_34ff_9c01_de77);

    fn id(stream: u64, seq: u64) -> EventId {
        EventId::new(NS, StreamId(stream), Seq(seq))
    }

    /// Status, `error` and the whole JSON body of a refusal as sent.
    async fn sent(e: ApiError) -> (u16, Value, axum::http::HeaderMap) {
        let r = e.into_response();
        let (parts, body) = r.into_parts();
        let bytes = axum::body::to_bytes(body, 1 << 20).await.unwrap();
        (parts.status.as_u16(), serde_json::from_slice(&bytes).unwrap(), parts.headers)
    }

    fn field<'a>(body: &'a Value, key: &str) -> &'a Value {
        body.get(key).unwrap_or_else(|| panic!("no {key:?} in {body}"))
    }

    #[tokio::test]
    async fn every_refusal_of_the_decision_table_has_its_status_and_numbers() {
        let (s, b, _) = sent(Refusal::ResumeRequiresSession.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (400, Some("resume_requires_session")));
        let (s, b, _) = sent(Refusal::UnknownSession.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (404, Some("unknown_session")));
        let (s, b, _) = sent(Refusal::MalformedCursor { reason: MalformedReason::Empty }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (400, Some("malformed_cursor")));
        assert!(field(&b, "reason").is_string());
        let (s, b, _) = sent(Refusal::NamespaceMismatch { cursor: "x-1".into() }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (409, Some("namespace_mismatch")));

        let (s, b, _) = sent(Refusal::CursorAhead { cursor: id(1, 9), head: Seq(7) }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (409, Some("cursor_ahead")));
        assert_eq!((field(&b, "cursor"), field(&b, "head")), (&json!("00ab34ff9c01de77_1-9"), &json!(7)));

        let r = Refusal::CursorNotDelivered { cursor: id(2, 4), undelivered: Some(Seq(4)) };
        let (s, b, _) = sent(r.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (409, Some("cursor_not_delivered")));
        assert_eq!(field(&b, "cursor"), &json!("00ab34ff9c01de77_2-4"));

        // `oldest` is an event id when that event is retained, else a plain
        // seq; `cursor` is null for a migration from "processed nothing".
        let r = Refusal::GapNotCovered {
            cursor: Some(id(1, 3)),
            oldest: Seq(8),
            oldest_id: Some(id(2, 8)),
            missing: Missing::Exact(4),
        };
        let (s, b, _) = sent(r.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (409, Some("gap_not_covered")));
        assert_eq!(
            (field(&b, "cursor"), field(&b, "oldest"), field(&b, "missing")),
            (&json!("00ab34ff9c01de77_1-3"), &json!("00ab34ff9c01de77_2-8"), &json!(4))
        );
        let r = Refusal::GapNotCovered {
            cursor: None,
            oldest: Seq(8),
            oldest_id: None,
            missing: Missing::Unknown,
        };
        let (_, b, _) = sent(r.into()).await;
        assert_eq!(
            (field(&b, "cursor"), field(&b, "oldest"), field(&b, "missing")),
            (&Value::Null, &json!(8), &json!(0))
        );

        let (s, b, _) = sent(Refusal::HistoryRewritten { cursor: id(1, 5), head: Seq(3) }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (409, Some("history_rewritten")));
        assert_eq!((field(&b, "cursor"), field(&b, "head")), (&json!("00ab34ff9c01de77_1-5"), &json!(3)));

        // §8.5: `Retry-After: 1`.
        let (s, b, h) = sent(Refusal::StoreUnavailable { reason: "down".into() }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (503, Some("store_unavailable")));
        assert_eq!(h.get("retry-after").unwrap(), "1");
    }

    #[tokio::test]
    async fn a_redeem_of_a_rewritten_cursor_is_refused_as_its_resume_is() {
        let e = gapless_redis::RedeemError::HistoryRewritten { cursor: id(1, 5), head: Seq(3) };
        let (s, b, _) = sent(e.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (409, Some("history_rewritten")));
        assert_eq!((field(&b, "cursor"), field(&b, "head")), (&json!("00ab34ff9c01de77_1-5"), &json!(3)));
        let (s, b, _) = sent(gapless_redis::RedeemError::Ticket(TicketError::Expired).into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (403, Some("ticket_invalid")));
    }

    #[tokio::test]
    async fn tickets_sessions_and_transport_refusals() {
        for t in [TicketError::Unknown, TicketError::Foreign, TicketError::Redeemed, TicketError::Expired] {
            let (s, b, _) = sent(t.into()).await;
            assert_eq!((s, field(&b, "error").as_str()), (403, Some("ticket_invalid")), "{t:?}");
        }
        let (s, b, _) = sent(TicketError::TooMany { max: 4 }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (429, Some("too_many_tickets")));

        let (s, b, _) = sent(SessionError::TooManySessions { max: 3 }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (503, Some("too_many_sessions")));
        // §5: `memory_exhausted` says when to retry.
        let (s, b, h) = sent(SessionError::MemoryExhausted { limit: 1 << 20 }.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (503, Some("memory_exhausted")));
        assert!(h.contains_key("retry-after"));
        let (s, b, _) = sent(SessionError::Unknown.into()).await;
        assert_eq!((s, field(&b, "error").as_str()), (404, Some("unknown_session")));

        let (s, b, h) = sent(ApiError::method_not_allowed("GET, POST")).await;
        assert_eq!((s, field(&b, "error").as_str()), (405, Some("method_not_allowed")));
        assert_eq!(h.get("allow").unwrap(), "GET, POST");
        assert!(field(&b, "message").is_string());
        // A body not read to its end: the connection cannot carry another
        // request.
        let (s, b, h) = sent(ApiError::payload_too_large(10)).await;
        assert_eq!(
            (s, field(&b, "error").as_str(), field(&b, "limit")),
            (413, Some("payload_too_large"), &json!(10))
        );
        assert_eq!(h.get("connection").unwrap(), "close");
        let (s, _, h) = sent(ApiError::new(ErrorKind::RequestTimeout, "slow")).await;
        assert_eq!((s, h.get("connection").unwrap().to_str().unwrap()), (408, "close"));
        let (_, _, h) = sent(ApiError::unknown_session()).await;
        assert!(h.get("connection").is_none() && h.get("retry-after").is_none() && h.get("allow").is_none());
    }
}
