//! An rmcp client that does not hide refusals (feature `client`, on by
//! default): [`GaplessClient`], an rmcp [`StreamableHttpClient`] to build
//! rmcp's own `StreamableHttpClientTransport` with.
//!
//! rmcp 3.11's client resumes a broken stream with `Last-Event-ID`, and it
//! treats every answer other than a stream as a reason to try again: a
//! `409` refusal (say `gap_not_covered`: the events after the cursor are
//! gone) is retried with the same cursor forever, its JSON body is thrown
//! away, and the request that stream was to answer stays pending. Which
//! errors end the retries is decided by a private type of rmcp's (three
//! kinds: no SSE support, authorization required, insufficient scope), so
//! no client can teach it that a refusal is final.
//!
//! What a client can do is answer the resume itself. [`GaplessClient`]
//! wraps rmcp's reqwest client and does what it does, except:
//! - it notes, from the event ids of each request's SSE response, which
//!   stream answers which request;
//! - when a resume is refused (a `4xx` whose body is a refusal of
//!   `docs/SPEC.md` §4.2), it hands rmcp, in place of the resumed stream,
//!   one message: a JSON-RPC error for that stream's request, whose `data`
//!   is the refusal. rmcp delivers it as the request's answer, so
//!   `call_tool` (or any request) returns `ServiceError::McpError` at once,
//!   and [`Refusal::from_error`] reads the refusal's kind and numbers out of
//!   it.
//! - A refused resume of a stream that answers no request (the standalone
//!   GET stream) ends with `ServerDoesNotSupportSse`, the one error that
//!   stops rmcp's retries without claiming credentials are wrong; the
//!   refusal is kept in [`GaplessClient::refusals`].
//!
//! rmcp itself keeps the session id and each stream's last event id, and
//! sends both on a resume (the two keys gapless checks).

use futures_util::{stream, StreamExt};
use gapless_wire::event_id::EventId;
use gapless_wire::StreamId;
use rmcp::model::{ClientJsonRpcMessage, ErrorData, RequestId};
use rmcp::transport::streamable_http_client::{
    SseError, StreamableHttpClient, StreamableHttpError, StreamableHttpPostResponse,
    StreamableHttpResponseLimits,
};
use rmcp::ServiceError;
use serde_json::{json, Value};
use sse_stream::Sse;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};

type HeaderMap = HashMap<http::HeaderName, http::HeaderValue>;
type SseStream = futures_util::stream::BoxStream<'static, Result<Sse, SseError>>;

/// The JSON-RPC error code of a request whose stream's resume was refused:
/// gapless's own `resume_refused` (`gapless_wire::rpc_code`), outside
/// JSON-RPC's reserved range. No server sends it: it is raised here, and
/// its `data` holds the refusal under `gapless_refusal`, so it cannot be
/// mistaken for an error the server sent.
pub const REFUSED_CODE: i32 = gapless_wire::rpc_code::code::RESUME_REFUSED as i32;

/// The key of [`ErrorData::data`] that holds the refusal.
const DATA_KEY: &str = "gapless_refusal";

/// Refusals [`GaplessClient::refusals`] keeps, newest last.
const KEPT: usize = 32;

/// A refused resume: what the server said, and of which cursor.
#[derive(Clone, Debug, PartialEq)]
pub struct Refusal {
    /// The HTTP status (`409`, `404`, `400`).
    pub status: u16,
    /// The refusal's kind (`gap_not_covered`, `unknown_session`, …;
    /// `docs/SPEC.md` §4.2).
    pub kind: String,
    /// Its message.
    pub message: String,
    /// The whole body, with the kind's numbers (`oldest`, `missing`, …).
    pub body: Value,
    /// The `Last-Event-ID` of the refused resume.
    pub cursor: Option<String>,
}

impl Refusal {
    /// The refusal an rmcp request failed with, if it failed because
    /// [`GaplessClient`] was refused the resume of its stream.
    pub fn from_error(e: &ServiceError) -> Option<Refusal> {
        match e {
            ServiceError::McpError(data) => Refusal::from_data(data),
            _ => None,
        }
    }

    /// The refusal in a JSON-RPC error's data, if it holds one.
    pub fn from_data(data: &ErrorData) -> Option<Refusal> {
        let r = data.data.as_ref()?.get(DATA_KEY)?;
        Some(Refusal {
            status: r.get("status")?.as_u64()? as u16,
            kind: r.get("body")?.get("error")?.as_str()?.to_owned(),
            message: r.get("body")?.get("message").and_then(Value::as_str).unwrap_or("").to_owned(),
            body: r.get("body")?.clone(),
            cursor: r.get("cursor").and_then(Value::as_str).map(str::to_owned),
        })
    }

    /// A refusal in an HTTP answer: a `4xx` whose JSON body names a kind.
    fn read(status: u16, body: &[u8], cursor: Option<&str>) -> Option<Refusal> {
        if !(400..500).contains(&status) {
            return None;
        }
        let body: Value = serde_json::from_slice(body).ok()?;
        let kind = body.get("error")?.as_str()?.to_owned();
        let message = body.get("message").and_then(Value::as_str).unwrap_or("").to_owned();
        Some(Refusal { status, kind, message, body, cursor: cursor.map(str::to_owned) })
    }

    /// The JSON-RPC error answering request `id` with this refusal.
    fn answer(&self, id: &RequestId) -> Value {
        json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": REFUSED_CODE,
                "message": format!("the server refused to resume this request's stream: {} ({})", self.kind, self.message),
                "data": {DATA_KEY: {"status": self.status, "body": self.body, "cursor": self.cursor}},
            },
        })
    }
}

/// A stream of a session (`None`: a sessionless server).
type StreamKey = (Option<Arc<str>>, StreamId);

/// What the clones of one [`GaplessClient`] share.
#[derive(Debug, Default)]
struct Shared {
    /// The request each stream answers, by the session it belongs to.
    requests: Mutex<HashMap<StreamKey, RequestId>>,
    refusals: Mutex<VecDeque<Refusal>>,
}

/// rmcp's reqwest client, with refused resumes turned into answers (see
/// the module's docs). Build rmcp's transport with it:
///
/// ```no_run
/// # async fn f() -> Result<(), Box<dyn std::error::Error>> {
/// use rmcp::transport::{streamable_http_client::StreamableHttpClientTransportConfig, StreamableHttpClientTransport};
/// use rmcp::ServiceExt;
/// let client = gapless_rmcp::client::GaplessClient::new();
/// let config = StreamableHttpClientTransportConfig::with_uri("http://127.0.0.1:8080/mcp");
/// let transport = StreamableHttpClientTransport::with_client(client.clone(), config);
/// let service = ().serve(transport).await?;
/// # Ok(()) }
/// ```
#[derive(Clone, Debug, Default)]
pub struct GaplessClient {
    inner: reqwest::Client,
    shared: Arc<Shared>,
}

impl GaplessClient {
    /// Over a default reqwest client.
    pub fn new() -> Self {
        Self::default()
    }

    /// Over `inner` (its timeouts, TLS and proxies).
    pub fn with_reqwest(inner: reqwest::Client) -> Self {
        GaplessClient { inner, shared: Arc::default() }
    }

    /// The latest refused resumes (at most 32), oldest first, the ones
    /// that answered a request included.
    pub fn refusals(&self) -> Vec<Refusal> {
        lock(&self.shared.refusals).iter().cloned().collect()
    }

    fn keep(&self, r: &Refusal) {
        let mut kept = lock(&self.shared.refusals);
        if kept.len() == KEPT {
            kept.pop_front();
        }
        kept.push_back(r.clone());
    }

    /// `stream` with each event's stream noted as answering `id`.
    fn noting(&self, stream: SseStream, session: Option<Arc<str>>, id: RequestId) -> SseStream {
        let shared = Arc::clone(&self.shared);
        stream
            .inspect(move |item| {
                let Ok(sse) = item else { return };
                let Some(stream) =
                    sse.id.as_deref().and_then(|i| i.parse::<EventId>().ok()).map(|e| e.stream)
                else {
                    return;
                };
                let mut requests = lock(&shared.requests);
                // Bounded: a session's requests come and go; forget the
                // oldest half when many are noted.
                if requests.len() >= 4096 {
                    let drop: Vec<_> = requests.keys().take(2048).cloned().collect();
                    for k in drop {
                        requests.remove(&k);
                    }
                }
                requests.insert((session.clone(), stream), id.clone());
            })
            .boxed()
    }

    /// The resume GET again, to read the refusal rmcp's client threw away
    /// (a refused resume changes nothing on the server, so asking twice
    /// gets the same answer). A stream, if this time it was granted.
    async fn refused(
        &self,
        uri: &str,
        session_id: Option<&Arc<str>>,
        last_event_id: Option<&str>,
        auth: Option<&str>,
        custom: &HeaderMap,
    ) -> Option<Result<SseStream, Refusal>> {
        let mut req = self.inner.get(uri).header(http::header::ACCEPT, "text/event-stream, application/json");
        if let Some(s) = session_id {
            req = req.header("mcp-session-id", s.as_ref());
        }
        if let Some(c) = last_event_id {
            req = req.header("last-event-id", c);
        }
        if let Some(a) = auth {
            req = req.bearer_auth(a);
        }
        for (k, v) in custom {
            req = req.header(k, v);
        }
        let r = req.send().await.ok()?;
        let status = r.status().as_u16();
        if r.status().is_success() {
            return Some(Ok(sse_stream::SseStream::from_bytes_stream(r.bytes_stream()).boxed()));
        }
        let body = r.bytes().await.ok()?;
        Refusal::read(status, &body, last_event_id).map(Err)
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl StreamableHttpClient for GaplessClient {
    type Error = reqwest::Error;

    async fn post_message(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HeaderMap,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        self.post_message_with_response_limits(
            uri,
            message,
            session_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default(),
        )
        .await
    }

    async fn post_message_with_response_limits(
        &self,
        uri: Arc<str>,
        message: ClientJsonRpcMessage,
        session_id: Option<Arc<str>>,
        auth_header: Option<String>,
        custom_headers: HeaderMap,
        limits: StreamableHttpResponseLimits,
    ) -> Result<StreamableHttpPostResponse, StreamableHttpError<Self::Error>> {
        let id = match &message {
            ClientJsonRpcMessage::Request(r) => Some(r.id.clone()),
            _ => None,
        };
        let r = self
            .inner
            .post_message_with_response_limits(
                uri,
                message,
                session_id.clone(),
                auth_header,
                custom_headers,
                limits,
            )
            .await?;
        Ok(match (r, id) {
            (StreamableHttpPostResponse::Sse(stream, sid), Some(id)) => {
                // The session the stream is of: the one the POST named, or
                // the one it created (initialize).
                let session = session_id.or_else(|| sid.as_deref().map(Arc::from));
                StreamableHttpPostResponse::Sse(self.noting(stream, session, id), sid)
            }
            (r, _) => r,
        })
    }

    async fn delete_session(
        &self,
        uri: Arc<str>,
        session_id: Arc<str>,
        auth_header: Option<String>,
        custom_headers: HeaderMap,
    ) -> Result<(), StreamableHttpError<Self::Error>> {
        lock(&self.shared.requests).retain(|(s, _), _| s.as_ref() != Some(&session_id));
        self.inner.delete_session(uri, session_id, auth_header, custom_headers).await
    }

    async fn get_stream(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HeaderMap,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        self.get_stream_with_max_sse_event_size(
            uri,
            session_id,
            last_event_id,
            auth_header,
            custom_headers,
            StreamableHttpResponseLimits::default().max_sse_event_size,
        )
        .await
    }

    async fn get_stream_with_max_sse_event_size(
        &self,
        uri: Arc<str>,
        session_id: Option<Arc<str>>,
        last_event_id: Option<String>,
        auth_header: Option<String>,
        custom_headers: HeaderMap,
        max_sse_event_size: usize,
    ) -> Result<SseStream, StreamableHttpError<Self::Error>> {
        let e = match self
            .inner
            .get_stream_with_max_sse_event_size(
                Arc::clone(&uri),
                session_id.clone(),
                last_event_id.clone(),
                auth_header.clone(),
                custom_headers.clone(),
                max_sse_event_size,
            )
            .await
        {
            Err(StreamableHttpError::Client(e)) if e.status().is_some_and(|s| s.is_client_error()) => e,
            other => return other,
        };
        let refusal = match self
            .refused(
                &uri,
                session_id.as_ref(),
                last_event_id.as_deref(),
                auth_header.as_deref(),
                &custom_headers,
            )
            .await
        {
            Some(Ok(stream)) => return Ok(stream),
            Some(Err(r)) => r,
            None => return Err(StreamableHttpError::Client(e)),
        };
        self.keep(&refusal);
        let stream = last_event_id.as_deref().and_then(|c| c.parse::<EventId>().ok()).map(|c| c.stream);
        let request = stream.and_then(|s| lock(&self.shared.requests).remove(&(session_id.clone(), s)));
        match request {
            Some(id) => {
                let answer =
                    Sse { event: None, data: Some(refusal.answer(&id).to_string()), id: None, retry: None };
                Ok(stream::iter([Ok(answer)]).boxed())
            }
            None => Err(StreamableHttpError::ServerDoesNotSupportSse),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_refusal_goes_into_an_error_and_comes_out_whole() {
        let body = json!({"error": "gap_not_covered", "message": "3 events were evicted", "oldest": 9, "missing": 3});
        let r = Refusal::read(409, body.to_string().as_bytes(), Some("ab_1-5")).expect("a refusal");
        assert_eq!((r.status, r.kind.as_str()), (409, "gap_not_covered"));
        let answer = r.answer(&RequestId::Number(7));
        assert_eq!(answer["id"], 7);
        let data: ErrorData = serde_json::from_value(answer["error"].clone()).unwrap();
        assert_eq!(data.code.0, REFUSED_CODE);
        assert_eq!(Refusal::from_data(&data), Some(r));
        assert_eq!(Refusal::from_error(&ServiceError::McpError(data)).unwrap().body["missing"], 3);
    }

    #[test]
    fn only_a_4xx_with_a_kind_is_a_refusal() {
        assert_eq!(Refusal::read(503, br#"{"error":"store_unavailable"}"#, None), None);
        assert_eq!(Refusal::read(409, b"not json", None), None);
        assert_eq!(Refusal::read(404, br#"{"message":"no kind"}"#, None), None);
        assert!(Refusal::read(404, br#"{"error":"unknown_session"}"#, None).is_some());
    }
}
