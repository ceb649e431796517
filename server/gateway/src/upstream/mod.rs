//! The upstream half: an ordinary Streamable HTTP MCP client, one job per
//! call (`POST` a message, `GET` a stream with or without a cursor,
//! `DELETE` a session), each answer read as what it is (JSON, an SSE
//! stream, `202`, or a status the caller turns into an explicit error).

pub(crate) mod sse;
pub mod stdio;

use bytes::Bytes;
use futures_util::StreamExt;
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use std::collections::VecDeque;
use std::fmt;
use std::time::Duration;

/// `Mcp-Session-Id`.
pub(crate) const SESSION: &str = "mcp-session-id";
/// `MCP-Protocol-Version`.
pub(crate) const VERSION: &str = "mcp-protocol-version";

/// An MCP server over Streamable HTTP at one URL.
#[derive(Debug, Clone)]
pub struct Upstream {
    client: reqwest::Client,
    url: reqwest::Url,
}

/// Why the upstream could not be asked (refused, reset, timed out): the
/// upstream's failure, to be answered explicitly.
#[derive(Debug, Clone)]
pub(crate) struct Fault(pub(crate) String);

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// What the upstream answered.
#[derive(Debug)]
pub(crate) enum Answer {
    /// `200` with one JSON message.
    Json(Bytes),
    /// `200` with an SSE stream.
    Stream(Events),
    /// `202` (a notification or a response taken).
    Accepted,
    /// `401` or `403`: the upstream's authorization refused it, with its
    /// `WWW-Authenticate` and body.
    Refused {
        /// The status.
        status: u16,
        /// Its `WWW-Authenticate`, if it sent one.
        www_authenticate: Option<String>,
        /// Its body.
        body: Bytes,
    },
    /// Any other status, with its body.
    Status(u16, Bytes),
}

/// How long the upstream may take to accept a connection and to answer a
/// message's head.
const CONNECT: Duration = Duration::from_secs(5);

impl Upstream {
    /// The MCP endpoint at `url` (`http://`, or `https://` verified
    /// against the system's roots).
    pub fn new(url: &str) -> Result<Upstream, String> {
        Upstream::with_ca(url, None)
    }

    /// The MCP endpoint at `url`; an `https://` one verified against the
    /// system's roots and, with `ca`, the certificates of that PEM file's
    /// bytes too (a private CA, or an upstream's self-signed certificate).
    pub fn with_ca(url: &str, ca: Option<&[u8]>) -> Result<Upstream, String> {
        let url = reqwest::Url::parse(url).map_err(|e| format!("{url:?} is not a URL: {e}"))?;
        if !matches!(url.scheme(), "http" | "https") {
            return Err(format!("{url}: an upstream is http:// or https://"));
        }
        let mut builder = reqwest::Client::builder()
            .use_rustls_tls()
            .connect_timeout(CONNECT)
            .pool_idle_timeout(Duration::from_secs(30));
        if let Some(pem) = ca {
            let certs =
                reqwest::Certificate::from_pem_bundle(pem).map_err(|e| format!("the CA file: {e}"))?;
            if certs.is_empty() {
                return Err("the CA file holds no PEM certificate".into());
            }
            for c in certs {
                builder = builder.add_root_certificate(c);
            }
        }
        let client = builder.build().map_err(|e| format!("the HTTP client: {e}"))?;
        Ok(Upstream { client, url })
    }

    /// The endpoint's URL.
    pub fn url(&self) -> &str {
        self.url.as_str()
    }

    /// The client's end-to-end headers (`forward`), then the gateway's own:
    /// `Accept`, the upstream's session id, and the protocol version where
    /// the client sent none.
    fn headers(forward: &HeaderMap, session: Option<&str>, version: Option<&str>) -> HeaderMap {
        let mut h = forward.clone();
        h.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
        if let Some(v) = session.and_then(|v| HeaderValue::from_str(v).ok()) {
            h.insert(SESSION, v);
        }
        if !h.contains_key(VERSION) {
            if let Some(v) = version.and_then(|v| HeaderValue::from_str(v).ok()) {
                h.insert(VERSION, v);
            }
        }
        h
    }

    /// POSTs one message with the client's end-to-end headers `forward`;
    /// `Ok` with the answer's session id (an `initialize` gets one).
    pub(crate) async fn post(
        &self,
        session: Option<&str>,
        version: Option<&str>,
        forward: &HeaderMap,
        body: Bytes,
    ) -> Result<(Answer, Option<String>), Fault> {
        let mut h = Self::headers(forward, session, version);
        h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let r = self.client.post(self.url.clone()).headers(h).body(body).send().await;
        read(r).await
    }

    /// GETs the session's standalone stream, or, with `cursor`, resumes the
    /// stream of that event (`Last-Event-ID`).
    pub(crate) async fn get(
        &self,
        session: &str,
        version: Option<&str>,
        forward: &HeaderMap,
        cursor: Option<&str>,
    ) -> Result<Answer, Fault> {
        let mut h = Self::headers(forward, Some(session), version);
        h.insert(ACCEPT, HeaderValue::from_static("text/event-stream"));
        if let Some(c) = cursor {
            // A cursor left out would open the standalone stream instead of
            // resuming: refused here, explicitly.
            let v = HeaderValue::from_str(c)
                .map_err(|_| Fault(format!("its event id {c:?} cannot be sent back")))?;
            h.insert("last-event-id", v);
        }
        let r = self.client.get(self.url.clone()).headers(h).send().await;
        read(r).await.map(|(a, _)| a)
    }

    /// DELETEs the session (its answer does not matter: the gateway's
    /// session is over either way).
    pub(crate) async fn delete(&self, session: &str, version: Option<&str>, forward: &HeaderMap) {
        let h = Self::headers(forward, Some(session), version);
        let r = self.client.delete(self.url.clone()).headers(h).timeout(CONNECT).send().await;
        if let Err(e) = r {
            tracing::debug!(error = %e, "upstream DELETE");
        }
    }
}

/// The URL of the gateway's protected-resource metadata, as a client sees
/// it (its `Host`, and `X-Forwarded-Proto` where a proxy in front says
/// https), for the endpoint at `path`.
pub fn metadata_url(client: &HeaderMap, path: &str) -> Option<String> {
    let host = client.get("host")?.to_str().ok()?;
    let https = client.get("x-forwarded-proto").is_some_and(|p| p.as_bytes().eq_ignore_ascii_case(b"https"));
    let scheme = if https { "https" } else { "http" };
    Some(format!("{scheme}://{host}/.well-known/oauth-protected-resource{}", path.trim_end_matches('/')))
}

/// An upstream's `WWW-Authenticate` with its `resource_metadata` URL (the
/// upstream's own) replaced by `url` (the gateway's), so that the client
/// asks the gateway, which serves the upstream's metadata as seen through
/// it; anything else in it as it was.
pub fn rewrite_www_authenticate(value: &str, url: Option<&str>) -> String {
    const KEY: &str = "resource_metadata=\"";
    let (Some(url), Some(i)) = (url, value.find(KEY)) else { return value.to_owned() };
    let start = i + KEY.len();
    let Some(len) = value[start..].find('"') else { return value.to_owned() };
    format!("{}{url}{}", &value[..start], &value[start + len..])
}

/// Headers that concern one connection, never passed on (RFC 9110 §7.6.1).
pub const HOP_BY_HOP: [&str; 8] = [
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailer",
    "transfer-encoding",
    "upgrade",
];

/// Headers the gateway sets itself towards the upstream (it is the
/// upstream's client): the client's are not passed on.
pub const OWN: [&str; 9] = [
    "host",
    "content-length",
    "content-type",
    "accept",
    "accept-encoding",
    "origin",
    "expect",
    SESSION,
    "last-event-id",
];

/// What of a client's request headers goes on to the upstream: every
/// end-to-end header (`Authorization`, `MCP-Protocol-Version`, the
/// 2026-07-28 `Mcp-Method`, `Mcp-Name` and `Mcp-Param-*`, cookies, anything
/// the gateway does not own), without the hop-by-hop ones (also those a
/// `Connection` header names) and [`OWN`].
pub fn end_to_end(h: &HeaderMap) -> HeaderMap {
    let named: Vec<String> = h
        .get_all("connection")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(',').map(|t| t.trim().to_ascii_lowercase()))
        .collect();
    let mut out = HeaderMap::new();
    for (name, value) in h {
        let n = name.as_str();
        if HOP_BY_HOP.contains(&n) || OWN.contains(&n) || named.iter().any(|c| c == n) {
            continue;
        }
        out.append(name.clone(), value.clone());
    }
    out
}

impl Upstream {
    /// The upstream's OAuth protected-resource metadata (RFC 9728): at
    /// `/.well-known/oauth-protected-resource` followed by its endpoint's
    /// path, else at the bare well-known path; `None` where it has none.
    pub(crate) async fn metadata(&self) -> Result<Option<serde_json::Value>, Fault> {
        let path = self.url.path().trim_end_matches('/').to_owned();
        for suffix in [path.as_str(), ""] {
            let mut url = self.url.clone();
            url.set_path(&format!("/.well-known/oauth-protected-resource{suffix}"));
            url.set_query(None);
            let r = self
                .client
                .get(url)
                .timeout(CONNECT)
                .send()
                .await
                .map_err(|e| Fault(format!("the upstream cannot be reached: {}", chain(&e))))?;
            if r.status().is_success() {
                let b = r.bytes().await.map_err(|e| Fault(e.to_string()))?;
                return serde_json::from_slice(&b).map(Some).map_err(|e| Fault(format!("its metadata: {e}")));
            }
        }
        Ok(None)
    }
}

/// Reads an answer's head (and a body that is not a stream).
async fn read(r: reqwest::Result<reqwest::Response>) -> Result<(Answer, Option<String>), Fault> {
    let r = r.map_err(|e| Fault(format!("the upstream cannot be reached: {}", chain(&e))))?;
    let session = r.headers().get(SESSION).and_then(|v| v.to_str().ok()).map(str::to_owned);
    let status = r.status().as_u16();
    let www_authenticate =
        r.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).map(str::to_owned);
    let sse = r
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|t| t.starts_with("text/event-stream"));
    let answer = match status {
        200 if sse => Answer::Stream(Events::new(r)),
        202 => Answer::Accepted,
        _ => {
            let body = r.bytes().await.map_err(|e| Fault(format!("the upstream's answer broke: {e}")))?;
            if status == 200 {
                Answer::Json(body)
            } else if status == 401 || status == 403 {
                Answer::Refused { status, www_authenticate, body }
            } else {
                Answer::Status(status, body)
            }
        }
    };
    Ok((answer, session))
}

/// An error with its sources (reqwest's own message hides the cause).
fn chain(e: &dyn std::error::Error) -> String {
    let mut s = e.to_string();
    let mut cur = e.source();
    while let Some(c) = cur {
        s.push_str(": ");
        s.push_str(&c.to_string());
        cur = c.source();
    }
    s
}

/// The events of an upstream SSE answer.
pub(crate) struct Events {
    body: futures_util::stream::BoxStream<'static, reqwest::Result<Bytes>>,
    parser: sse::Parser,
    ready: VecDeque<sse::Event>,
}

impl fmt::Debug for Events {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Events").field("ready", &self.ready.len()).finish()
    }
}

/// How an upstream stream ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum End {
    /// The upstream closed it.
    Closed,
    /// It broke (reset, or a line too long): the reason.
    Broken(String),
}

impl Events {
    fn new(r: reqwest::Response) -> Events {
        Events { body: r.bytes_stream().boxed(), parser: sse::Parser::default(), ready: VecDeque::new() }
    }

    /// Whether events are parsed and waiting: `next` has them without
    /// reading.
    pub(crate) fn buffered(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The next event, or how the stream ended.
    pub(crate) async fn next(&mut self) -> Result<sse::Event, End> {
        loop {
            if let Some(e) = self.ready.pop_front() {
                return Ok(e);
            }
            match self.body.next().await {
                None => return Err(End::Closed),
                Some(Err(e)) => return Err(End::Broken(chain(&e))),
                Some(Ok(chunk)) => {
                    self.ready.extend(self.parser.push(&chunk).map_err(|e| End::Broken(e.into()))?)
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_to_end_headers_pass_and_hop_by_hop_and_owned_ones_do_not() {
        let mut h = HeaderMap::new();
        for (k, v) in [
            ("authorization", "Bearer t"),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "tools/call"),
            ("mcp-param-region", "eu"),
            ("x-trace", "1"),
            ("connection", "keep-alive, x-hop"),
            ("x-hop", "gone"),
            ("keep-alive", "timeout=5"),
            ("te", "trailers"),
            ("host", "gateway:8090"),
            ("origin", "http://localhost"),
            ("mcp-session-id", "the gateway's"),
            ("last-event-id", "the gateway's"),
            ("content-length", "10"),
            ("accept", "text/event-stream"),
        ] {
            h.append(k, HeaderValue::from_static(v));
        }
        let out = end_to_end(&h);
        let mut names: Vec<&str> = out.keys().map(|k| k.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            ["authorization", "mcp-method", "mcp-param-region", "mcp-protocol-version", "x-trace"]
        );
    }
}
