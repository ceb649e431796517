//! A refusal as an HTTP response: the status and JSON body of its kind
//! (`vocab/error.rs`), and the headers some kinds carry (`Allow`,
//! `Retry-After`, `Connection: close`). The refusal rides along in the
//! response's extensions, for the operator's counts (`operator/count.rs`).

use crate::vocab::error::ApiError;
use axum::http::HeaderValue;
use axum::response::{IntoResponse, Response};
use gapless::ErrorKind;

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
        if matches!(
            self.kind,
            ErrorKind::RequestTimeout | ErrorKind::PayloadTooLarge | ErrorKind::TooManyBodyBytes
        ) {
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
    use gapless::session::TicketError;
    use gapless::{EventId, Missing, Namespace, Seq, StreamId};
    use gapless::{Refusal, SessionError};
    use serde_json::{json, Value};

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
        let (s, b, h) = sent(ApiError::new(ErrorKind::TooManyBodyBytes, "full").retry_after(1)).await;
        assert_eq!((s, field(&b, "error").as_str()), (503, Some("too_many_body_bytes")));
        assert_eq!(
            (h.get("connection").unwrap().to_str().unwrap(), h.get("retry-after").unwrap().to_str().unwrap()),
            ("close", "1")
        );
        let (_, _, h) = sent(ApiError::unknown_session()).await;
        assert!(h.get("connection").is_none() && h.get("retry-after").is_none() && h.get("allow").is_none());
    }
}
