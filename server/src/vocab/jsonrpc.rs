//! JSON-RPC 2.0 message classification for MCP.

use serde_json::{json, Value};

/// The JSON-RPC error codes gapless uses: `gapless_wire`'s one table
/// (`gapless::wire::rpc_code`, with each code's meaning, when it is sent
/// and on which generations), by name.
pub use gapless::wire::rpc_code::code;

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
    /// This error as a 2026-07-28 response may carry it. The codes the
    /// revision forbids (`gapless::wire::rpc_code::policy`) that an
    /// application answered with become what it allows: `-32002` (resource
    /// not found) its replacement `-32602`; any other (`-32042`, or a code
    /// of `-32020..=-32099` the revision does not define) `-32603`, the
    /// application's code and data kept in `data.applicationCode` and
    /// `data.applicationData`. The legacy `-32000..=-32019`, which new
    /// implementations only SHOULD NOT use, pass as they are.
    pub fn for_2026(self) -> RpcError {
        use gapless::wire::rpc_code::{policy, Generation, Violation};
        match policy(self.code, Generation::Mcp2026) {
            Err(Violation::RemovedIn2026(code::RESOURCE_NOT_FOUND)) => {
                RpcError { code: code::INVALID_PARAMS, ..self }
            }
            Err(Violation::RemovedIn2026(_) | Violation::ReservedForMcp(_)) => {
                let mut data = json!({"applicationCode": self.code});
                if let Some(d) = self.data {
                    data["applicationData"] = d;
                }
                RpcError { code: code::INTERNAL_ERROR, message: self.message, data: Some(data) }
            }
            _ => self,
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

    #[test]
    fn a_2026_response_carries_no_code_the_revision_forbids() {
        let e = |c: i64| RpcError { code: c, message: "m".into(), data: Some(json!({"k": 1})) };
        let nf = e(-32002).for_2026();
        assert_eq!((nf.code, nf.data), (code::INVALID_PARAMS, Some(json!({"k": 1}))));
        for forbidden in [-32042, -32050, -32099] {
            let r = e(forbidden).for_2026();
            assert_eq!(r.code, code::INTERNAL_ERROR);
            assert_eq!(r.data, Some(json!({"applicationCode": forbidden, "applicationData": {"k": 1}})));
        }
        for kept in [-32602, -32021, -32010, -32001, 42, code::REQUEST_LOST] {
            assert_eq!(e(kept).for_2026(), e(kept));
        }
    }
}
