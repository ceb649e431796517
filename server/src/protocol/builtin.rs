//! Every method the transport answers itself, never the application:
//!
//! | method | era | answered by |
//! |---|---|---|
//! | `initialize` | 2025 (Streamable HTTP) | [`initialize_version`] and [`initialize_result`]; the endpoint creates the session |
//! | `initialize` | 2024-11-05 (legacy HTTP+SSE) | [`legacy_initialize`], once per session |
//! | `initialize` again, `ping`, `logging/setLevel` | 2025, on a session | [`on_session`] |
//! | `server/discover`; `initialize`, `ping`, `logging/setLevel`, `resources/(un)subscribe` (removed) | 2026-07-28 | [`sessionless`] |
//!
//! and [`complete`], what every 2026-07-28 result gets (`resultType`,
//! caching hints, the server's identity).

use crate::host::Host;
use crate::session::SessionState;
use crate::sessionless::{all_versions, META_SERVER_INFO};
use crate::vocab::config::{negotiate, LEGACY_VERSION, SUPPORTED_VERSIONS};
use crate::vocab::jsonrpc::{code, RpcError};
use crate::vocab::log_level::LogLevel;
use serde_json::{json, Map, Value};
use std::sync::atomic::Ordering;

/// Methods of the 2025 revisions that 2026-07-28 removed: answered
/// `-32601` like any method not served.
const REMOVED: [&str; 5] =
    ["initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe"];

/// Methods whose results carry the caching hints (`ttlMs`, `cacheScope`).
const CACHEABLE: [&str; 6] = [
    "server/discover",
    "tools/list",
    "prompts/list",
    "resources/list",
    "resources/templates/list",
    "resources/read",
];

/// The protocol version a new session's `initialize` (with `params`)
/// negotiates: the client's if served, else the newest.
pub(crate) fn initialize_version(params: &Value) -> &'static str {
    negotiate(params.get("protocolVersion").and_then(Value::as_str).unwrap_or(""), SUPPORTED_VERSIONS[0])
}

/// The `initialize` result for a session on `version`.
pub(crate) fn initialize_result(host: &dyn Host, version: &str) -> Value {
    let mut result = json!({
        "protocolVersion": version,
        "capabilities": host.capabilities(),
        "serverInfo": host.server_info(),
    });
    if let Some(i) = host.instructions() {
        result["instructions"] = json!(i);
    }
    result
}

/// A legacy session's `initialize` (it comes after the session exists):
/// the version negotiated (the client's if served, else the legacy one)
/// and the params kept, once; a second one is refused.
pub(crate) fn legacy_initialize(
    host: &dyn Host,
    sess: &SessionState,
    params: Value,
) -> Result<Value, RpcError> {
    if sess.legacy_initialized.swap(true, Ordering::AcqRel) {
        return Err(RpcError::new(code::INVALID_REQUEST, "session is already initialized"));
    }
    let version =
        negotiate(params.get("protocolVersion").and_then(Value::as_str).unwrap_or(""), LEGACY_VERSION);
    sess.set_protocol_version(version);
    sess.set_initialize_params(params);
    Ok(initialize_result(host, version))
}

/// A request of a session that the transport answers itself (`None`: the
/// application's).
pub(crate) fn on_session(
    sess: &SessionState,
    method: &str,
    params: &Value,
) -> Option<Result<Value, RpcError>> {
    match method {
        "ping" => Some(Ok(json!({}))),
        "logging/setLevel" => {
            Some(match params.get("level").and_then(Value::as_str).and_then(LogLevel::parse) {
                Some(l) => {
                    sess.set_log_level(l);
                    Ok(json!({}))
                }
                None => Err(RpcError::invalid_params("level must be one of the MCP log levels")),
            })
        }
        "initialize" => Some(Err(RpcError::new(code::INVALID_REQUEST, "session is already initialized"))),
        _ => None,
    }
}

/// A 2026-07-28 request of `method` that the transport answers itself
/// (`None`: the application's, or the listen and tasks machinery's);
/// `events`: task event streams are served.
pub(crate) fn sessionless(
    host: &dyn Host,
    method: &str,
    version: &str,
    events: bool,
) -> Option<Result<Value, RpcError>> {
    if method == "server/discover" {
        Some(Ok(discover(host, events)))
    } else if REMOVED.contains(&method) {
        Some(Err(RpcError::new(
            code::METHOD_NOT_FOUND,
            format!("method not found: {method} is not a method of MCP {version}"),
        )))
    } else {
        None
    }
}

fn discover(host: &dyn Host, events: bool) -> Value {
    let mut capabilities = host.capabilities();
    // The tasks extension, when the application serves it, with its event
    // streams (SEP-2694) when they are served here.
    if let Some(Value::Object(ext)) =
        capabilities.pointer_mut(&format!("/extensions/{}", tasks_ext_pointer()))
    {
        if events {
            ext.entry("eventStreams").or_insert_with(|| json!({}));
        }
    }
    let mut r = json!({
        "supportedVersions": all_versions(),
        "capabilities": capabilities,
    });
    if let Some(i) = host.instructions() {
        r["instructions"] = json!(i);
    }
    r
}

/// The tasks extension's name as one JSON pointer token (`/` escaped).
fn tasks_ext_pointer() -> String {
    crate::tasks::EXTENSION.replace('~', "~0").replace('/', "~1")
}

/// Completes a result for a 2026-07-28 client: `resultType` (every result
/// has one), the caching hints on the methods that have them (by default
/// "stale at once, this caller only": `ttlMs` 0, `cacheScope` private), and
/// the server's identity in `_meta`. What the application set itself stays.
pub(crate) fn complete(method: &str, mut result: Value, server_info: Value) -> Value {
    let Some(m) = result.as_object_mut() else { return result };
    m.entry("resultType").or_insert_with(|| json!("complete"));
    if CACHEABLE.contains(&method) {
        m.entry("ttlMs").or_insert_with(|| json!(0));
        m.entry("cacheScope").or_insert_with(|| json!("private"));
    }
    if let Value::Object(meta) = m.entry("_meta").or_insert_with(|| Value::Object(Map::new())) {
        meta.entry(META_SERVER_INFO).or_insert(server_info);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_are_completed_without_overriding_the_application() {
        let info = json!({"name": "s", "version": "1"});
        let r = complete("tools/list", json!({"tools": []}), info.clone());
        assert_eq!(
            r,
            json!({"tools": [], "resultType": "complete", "ttlMs": 0, "cacheScope": "private",
                   "_meta": {META_SERVER_INFO: info}})
        );
        let own = json!({"tools": [], "ttlMs": 60000, "cacheScope": "public", "resultType": "complete",
                         "_meta": {META_SERVER_INFO: {"name": "app", "version": "2"}, "x": 1}});
        assert_eq!(complete("tools/list", own.clone(), info.clone()), own);
        let call = complete("tools/call", json!({"content": []}), info.clone());
        assert_eq!((call.get("ttlMs"), &call["resultType"]), (None, &json!("complete")));
    }
}
