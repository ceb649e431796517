//! JSON-RPC 2.0 message classification for MCP.

use serde_json::{json, Value};

/// Standard JSON-RPC error codes used here.
pub mod code {
    /// Invalid JSON.
    pub const PARSE_ERROR: i64 = -32700;
    /// Not a valid request object.
    pub const INVALID_REQUEST: i64 = -32600;
    /// Unknown method.
    pub const METHOD_NOT_FOUND: i64 = -32601;
    /// Bad parameters.
    pub const INVALID_PARAMS: i64 = -32602;
    /// Server error.
    pub const INTERNAL_ERROR: i64 = -32603;
    /// The session has `ServerConfig::max_inflight_requests` requests in
    /// flight already (a server error of the -32000 range; gapless's own).
    pub const TOO_MANY_IN_FLIGHT: i64 = -32009;
    /// Cluster mode: the node running the request stopped before it
    /// answered (its lease expired); whether the request took effect is
    /// unknown (`docs/SPEC.md` §8.6). Gapless's own, at the far end of the
    /// server-error range from MCP's codes (it was -32010, which the draft
    /// SEP-2694 gives `events_gone`).
    pub const REQUEST_LOST: i64 = -32090;
    /// MCP 2026-07-28 `HeaderMismatch`: a request header (`MCP-Protocol-Version`,
    /// `Mcp-Method`, `Mcp-Name`) is missing, malformed or differs from the body.
    pub const HEADER_MISMATCH: i64 = -32020;
    /// MCP 2026-07-28 `MissingRequiredClientCapabilityError`: serving the
    /// request needs a capability the client did not declare.
    pub const MISSING_CLIENT_CAPABILITY: i64 = -32021;
    /// MCP 2026-07-28 `UnsupportedProtocolVersionError`.
    pub const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;
    /// The draft SEP-2694's `events_gone`: a `tasks/stream` cursor whose
    /// next event is no longer kept (`data`: `reason`, `taskId`,
    /// `earliestSeq`).
    pub const EVENTS_GONE: i64 = -32010;
}

/// The JSON-RPC codes MCP's specification and its drafts give a meaning
/// (the 2025 revisions, 2026-07-28, SEP-2164, SEP-2322, SEP-1036, the draft
/// SEP-2694's `events_gone`): gapless's own codes stay clear of them.
pub const MCP_CODES: [i64; 11] =
    [-32000, -32001, -32002, -32003, -32004, -32010, -32019, -32020, -32021, -32022, -32042];

/// A JSON-RPC error object.
#[derive(Debug, Clone, PartialEq)]
pub struct RpcError {
    /// Error code.
    pub code: i64,
    /// Message.
    pub message: String,
    /// Optional data.
    pub data: Option<Value>,
}

impl RpcError {
    /// An error with a code and message.
    pub fn new(code: i64, message: impl Into<String>) -> Self {
        RpcError { code, message: message.into(), data: None }
    }
    /// -32602.
    pub fn invalid_params(message: impl Into<String>) -> Self {
        Self::new(code::INVALID_PARAMS, message)
    }
    /// -32601.
    pub fn method_not_found(method: &str) -> Self {
        Self::new(code::METHOD_NOT_FOUND, format!("method not found: {method}"))
    }
    /// -32021 (MCP 2026-07-28): serving the request needs the client
    /// capabilities `required` (a `ClientCapabilities` object, e.g.
    /// `{"sampling": {}}`), which the client did not declare.
    pub fn missing_client_capability(required: Value) -> Self {
        let names: Vec<&str> =
            required.as_object().map(|m| m.keys().map(String::as_str).collect()).unwrap_or_default();
        RpcError {
            code: code::MISSING_CLIENT_CAPABILITY,
            message: format!(
                "the client did not declare the capabilities this request needs: {}",
                names.join(", ")
            ),
            data: Some(json!({"requiredCapabilities": required})),
        }
    }
    /// The error object as JSON.
    pub fn to_json(&self) -> Value {
        let mut v = json!({"code": self.code, "message": self.message});
        if let Some(d) = &self.data {
            v["data"] = d.clone();
        }
        v
    }
}

/// One incoming message.
#[derive(Debug, Clone)]
pub enum Incoming {
    /// A request: has `id` and `method`.
    Request {
        /// Its id (number or string).
        id: Value,
        /// Method.
        method: String,
        /// Params (`Null` when absent).
        params: Value,
    },
    /// A notification: `method` without `id`.
    Notification {
        /// Method.
        method: String,
        /// Params.
        params: Value,
    },
    /// A response to a server → client request.
    Response {
        /// The id it answers.
        id: Value,
        /// `Ok(result)` or `Err(error object)`.
        outcome: Result<Value, Value>,
    },
}

/// Classifies a parsed JSON value; `Err` is a JSON-RPC "invalid request".
pub fn classify(v: Value) -> Result<Incoming, RpcError> {
    let Value::Object(mut m) = v else {
        return Err(RpcError::new(
            code::INVALID_REQUEST,
            "a JSON-RPC message must be an object (batches are not supported)",
        ));
    };
    if m.get("jsonrpc") != Some(&json!("2.0")) {
        return Err(RpcError::new(code::INVALID_REQUEST, "missing or wrong \"jsonrpc\": \"2.0\""));
    }
    let id = m.remove("id");
    if let Some(id) = &id {
        if !(id.is_string() || id.is_i64() || id.is_u64()) {
            return Err(RpcError::new(code::INVALID_REQUEST, "\"id\" must be a string or an integer"));
        }
    }
    match (m.remove("method"), id) {
        (Some(Value::String(method)), Some(id)) => {
            Ok(Incoming::Request { id, method, params: m.remove("params").unwrap_or(Value::Null) })
        }
        (Some(Value::String(method)), None) => {
            Ok(Incoming::Notification { method, params: m.remove("params").unwrap_or(Value::Null) })
        }
        (Some(_), _) => Err(RpcError::new(code::INVALID_REQUEST, "\"method\" must be a string")),
        (None, Some(id)) => match (m.remove("result"), m.remove("error")) {
            (Some(r), None) => Ok(Incoming::Response { id, outcome: Ok(r) }),
            (None, Some(e)) => Ok(Incoming::Response { id, outcome: Err(e) }),
            _ => Err(RpcError::new(
                code::INVALID_REQUEST,
                "a response needs exactly one of \"result\" and \"error\"",
            )),
        },
        (None, None) => {
            Err(RpcError::new(code::INVALID_REQUEST, "neither a request, a notification nor a response"))
        }
    }
}

/// A response message.
pub fn response(id: &Value, outcome: Result<Value, RpcError>) -> Value {
    match outcome {
        Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
        Err(e) => json!({"jsonrpc": "2.0", "id": id, "error": e.to_json()}),
    }
}

/// A notification message.
pub fn notification(method: &str, params: Value) -> Value {
    if params.is_null() {
        json!({"jsonrpc": "2.0", "method": method})
    } else {
        json!({"jsonrpc": "2.0", "method": method, "params": params})
    }
}

/// A request message.
pub fn request(id: &Value, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Gapless's own codes are server errors (-32000 to -32099) that no MCP
    /// revision or draft it may serve gives another meaning.
    #[test]
    fn gapless_codes_do_not_collide_with_mcp_codes() {
        for own in [code::TOO_MANY_IN_FLIGHT, code::REQUEST_LOST] {
            assert!((-32099..=-32000).contains(&own), "{own}");
            assert!(!MCP_CODES.contains(&own), "{own} is one of MCP's codes");
        }
    }
}
