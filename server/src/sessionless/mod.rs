//! MCP 2026-07-28 requests without a session (`docs/SPEC.md` §5.4): which
//! era a message is of, what a request declares about itself in `_meta`,
//! the bound on such requests in flight (`inflight.rs`), the exchange
//! between a running request and its response stream (`exchange.rs`), a
//! listen stream's filter (`filter.rs`), the tools' mirrored parameters
//! (`mirror.rs`) and the queue in front of every response stream
//! (`queue.rs`). Nothing here knows about HTTP, and nothing here runs the
//! application: that is the protocol layer's (`protocol/`).

pub(crate) mod exchange;
pub(crate) mod filter;
pub(crate) mod inflight;
pub(crate) mod mirror;
pub(crate) mod queue;

use crate::vocab::config::{LEGACY_VERSION, MODERN_VERSIONS, SUPPORTED_VERSIONS};
use crate::vocab::jsonrpc::{code, Incoming, RpcError};
use crate::vocab::log_level::LogLevel;
use serde_json::{json, Value};

/// `_meta` key of the request's protocol version.
pub(crate) const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
/// `_meta` key of the client's capabilities.
pub(crate) const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
/// `_meta` key of the request's log level (no key: no log messages).
pub(crate) const META_LOG_LEVEL: &str = "io.modelcontextprotocol/logLevel";
/// Result `_meta` key naming the server.
pub(crate) const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

/// Which protocol generation a message is of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Era {
    /// The 2025 revisions (and 2024-11-05): `initialize`, sessions,
    /// resumable streams.
    Session,
    /// 2026-07-28: every request declares its version in `_meta`, and
    /// there is no session.
    Sessionless,
}

/// Whether `v` names a revision of the session era.
fn is_session_era(v: &str) -> bool {
    SUPPORTED_VERSIONS.contains(&v) || v == LEGACY_VERSION
}

/// The era of a message POSTed with `header` as its `MCP-Protocol-Version`:
/// sessionless when its `_meta` declares a version that is not of the session
/// era (an unknown one included: it is answered with the versions served),
/// or, without that declaration, when the header names a 2026-07-28 version.
/// Anything else, `initialize` without either among it, is of the session
/// era and served as before.
pub(crate) fn era(header: Option<&str>, msg: &Incoming) -> Era {
    let params = match msg {
        Incoming::Request { params, .. } | Incoming::Notification { params, .. } => params,
        Incoming::Response { .. } => return Era::Session,
    };
    match params.get("_meta").and_then(|m| m.get(META_VERSION)).and_then(Value::as_str) {
        Some(v) if is_session_era(v) => Era::Session,
        Some(_) => Era::Sessionless,
        None if header.is_some_and(|h| MODERN_VERSIONS.contains(&h.trim())) => Era::Sessionless,
        None => Era::Session,
    }
}

/// What a 2026-07-28 request declares about itself in `_meta`.
#[derive(Clone, Debug)]
pub(crate) struct Declared {
    /// `io.modelcontextprotocol/protocolVersion`.
    pub(crate) version: String,
    /// `io.modelcontextprotocol/clientCapabilities`.
    pub(crate) capabilities: Value,
    /// `io.modelcontextprotocol/logLevel`; `None`: no log messages.
    pub(crate) log_level: Option<LogLevel>,
}

/// Reads the declarations every 2026-07-28 request carries; a missing or
/// ill-typed one is `-32602` (answered 400 over HTTP). `clientInfo` is
/// optional (a SHOULD) and not read.
pub(crate) fn declared(params: &Value) -> Result<Declared, RpcError> {
    let Some(meta) = params.get("_meta") else {
        return Err(RpcError::invalid_params(
            "params._meta is required: it declares the request's protocol version and client capabilities",
        ));
    };
    let Some(meta) = meta.as_object() else {
        return Err(RpcError::invalid_params("params._meta must be an object"));
    };
    let version = match meta.get(META_VERSION) {
        Some(Value::String(v)) => v.clone(),
        Some(_) => return Err(RpcError::invalid_params(format!("_meta[{META_VERSION:?}] must be a string"))),
        None => return Err(RpcError::invalid_params(format!("_meta[{META_VERSION:?}] is required"))),
    };
    let capabilities = match meta.get(META_CAPABILITIES) {
        Some(c @ Value::Object(_)) => c.clone(),
        Some(_) => {
            return Err(RpcError::invalid_params(format!("_meta[{META_CAPABILITIES:?}] must be an object")))
        }
        None => return Err(RpcError::invalid_params(format!("_meta[{META_CAPABILITIES:?}] is required"))),
    };
    let log_level = match meta.get(META_LOG_LEVEL) {
        None | Some(Value::Null) => None,
        Some(l) => Some(l.as_str().and_then(LogLevel::parse).ok_or_else(|| {
            RpcError::invalid_params(format!("_meta[{META_LOG_LEVEL:?}] must be one of the MCP log levels"))
        })?),
    };
    Ok(Declared { version, capabilities, log_level })
}

/// `UnsupportedProtocolVersionError` for `requested`, listing every version
/// served (both eras: a client that can speak a 2025 revision falls back
/// to `initialize`).
pub(crate) fn unsupported_version(requested: &str) -> RpcError {
    RpcError {
        code: code::UNSUPPORTED_PROTOCOL_VERSION,
        message: format!("Unsupported protocol version {requested:?}"),
        data: Some(json!({"supported": all_versions(), "requested": requested})),
    }
}

/// Every protocol version served, newest first.
pub(crate) fn all_versions() -> Vec<&'static str> {
    MODERN_VERSIONS.iter().chain(SUPPORTED_VERSIONS.iter()).copied().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn request(params: Value) -> Incoming {
        Incoming::Request { id: json!(1), method: "tools/list".into(), params }
    }

    #[test]
    fn the_era_is_read_from_meta_then_from_the_header() {
        let meta = |v: &str| request(json!({"_meta": {META_VERSION: v}}));
        assert_eq!(era(None, &meta("2026-07-28")), Era::Sessionless);
        // An unknown version is answered by this revision's rules (with the
        // versions served); a 2025 one is the session era's.
        assert_eq!(era(Some("2026-07-28"), &meta("v999")), Era::Sessionless);
        assert_eq!(era(Some("2026-07-28"), &meta("2025-11-25")), Era::Session);
        assert_eq!(era(Some(" 2026-07-28 "), &request(json!({}))), Era::Sessionless);
        assert_eq!(era(Some("2025-06-18"), &request(json!({}))), Era::Session);
        assert_eq!(era(Some("v999"), &request(Value::Null)), Era::Session);
        assert_eq!(era(None, &request(Value::Null)), Era::Session);
        let response = Incoming::Response { id: json!(1), outcome: Ok(json!({})) };
        assert_eq!(era(Some("2026-07-28"), &response), Era::Session);
    }

    #[test]
    fn declarations_are_checked() {
        let ok = declared(&json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {"sampling": {}}, META_LOG_LEVEL: "warning"}})).unwrap();
        assert_eq!((ok.version.as_str(), ok.log_level), ("2026-07-28", Some(LogLevel::Warning)));
        assert_eq!(ok.capabilities, json!({"sampling": {}}));
        for bad in [
            json!({}),
            json!({"_meta": 1}),
            json!({"_meta": {META_CAPABILITIES: {}}}),
            json!({"_meta": {META_VERSION: 7, META_CAPABILITIES: {}}}),
            json!({"_meta": {META_VERSION: "2026-07-28"}}),
            json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: []}}),
            json!({"_meta": {META_VERSION: "2026-07-28", META_CAPABILITIES: {}, META_LOG_LEVEL: "loud"}}),
        ] {
            assert_eq!(declared(&bad).unwrap_err().code, code::INVALID_PARAMS, "{bad}");
        }
    }
}
