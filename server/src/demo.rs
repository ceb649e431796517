//! The bundled application (SPEC §5.1): `emit_events` to exercise the
//! transport, plus the fixtures the official conformance suite expects.

use crate::host::{Host, LogLevel, RequestContext};
use crate::jsonrpc::RpcError;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use serde_json::{json, Value};
use std::time::Duration;

/// Bounds of `emit_events`' arguments.
pub const MAX_COUNT: u64 = 100_000;
/// Largest `payload_bytes`.
pub const MAX_PAYLOAD: u64 = 65_536;
/// Largest `interval_ms`.
pub const MAX_INTERVAL_MS: u64 = 10_000;

/// The demo application.
#[derive(Debug, Default, Clone)]
pub struct DemoHost;

fn text(t: impl Into<String>) -> Value {
    json!({"content": [{"type": "text", "text": t.into()}]})
}

fn tool(name: &str, description: &str, properties: Value, required: &[&str]) -> Value {
    json!({
        "name": name,
        "description": description,
        "inputSchema": {"type": "object", "properties": properties, "required": required},
    })
}

fn tools() -> Value {
    json!([
        tool(
            "emit_events",
            "Sends `count` notifications/message (data.seq = 1..count) on the request's stream or the standalone stream, then returns.",
            json!({
                "count": {"type": "integer", "minimum": 0, "maximum": MAX_COUNT},
                "interval_ms": {"type": "integer", "minimum": 0, "maximum": MAX_INTERVAL_MS, "default": 0},
                "payload_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_PAYLOAD, "default": 16},
                "target": {"type": "string", "enum": ["request", "standalone"], "default": "request"}
            }),
            &["count"],
        ),
        tool("test_simple_text", "Returns a simple text response.", json!({}), &[]),
        tool("test_tool_with_logging", "Sends log notifications while it runs.", json!({}), &[]),
        tool("test_tool_with_progress", "Reports progress while it runs.", json!({}), &[]),
        tool("test_error_handling", "Always fails with a tool error.", json!({}), &[]),
        tool("test_reconnection", "Closes its SSE stream after the priming event; the result arrives on the resume.", json!({}), &[]),
        tool("test_sampling", "Asks the client to sample an LLM.", json!({"prompt": {"type": "string"}}), &["prompt"]),
        tool("test_elicitation", "Asks the client for user input.", json!({"message": {"type": "string"}}), &["message"]),
    ])
}

fn u64_arg(args: &Value, name: &str, default: Option<u64>, max: u64) -> Result<u64, RpcError> {
    let v = match args.get(name) {
        None | Some(Value::Null) => {
            default.ok_or_else(|| RpcError::invalid_params(format!("missing argument {name}")))?
        }
        Some(v) => v
            .as_u64()
            .ok_or_else(|| RpcError::invalid_params(format!("{name} must be a non-negative integer")))?,
    };
    if v > max {
        return Err(RpcError::invalid_params(format!("{name} must be at most {max}")));
    }
    Ok(v)
}

async fn emit_events(args: Value, ctx: RequestContext) -> Result<Value, RpcError> {
    let count = u64_arg(&args, "count", None, MAX_COUNT)?;
    let interval = u64_arg(&args, "interval_ms", Some(0), MAX_INTERVAL_MS)?;
    let pad_len = u64_arg(&args, "payload_bytes", Some(16), MAX_PAYLOAD)? as usize;
    let standalone = match args.get("target").map(|t| t.as_str()) {
        None | Some(Some("request")) => false,
        Some(Some("standalone")) => true,
        _ => return Err(RpcError::invalid_params("target must be \"request\" or \"standalone\"")),
    };
    let pad = "x".repeat(pad_len);
    let session = ctx.session();
    for i in 1..=count {
        if ctx.is_cancelled() {
            break;
        }
        // Serialized by hand: this is the hot loop of the load tests.
        let msg = format!(
            r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","logger":"emit","data":{{"seq":{i},"pad":"{pad}"}}}}}}"#
        );
        let sent = if standalone {
            session.notify_raw(Bytes::from(msg)).await
        } else {
            ctx.notify_raw(Bytes::from(msg)).await
        };
        sent.map_err(|e| RpcError::new(crate::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
        if interval > 0 && i < count {
            tokio::time::sleep(Duration::from_millis(interval)).await;
        }
    }
    Ok(text(format!("emitted {count}")))
}

impl Host for DemoHost {
    fn capabilities(&self) -> Value {
        json!({"tools": {"listChanged": false}, "logging": {}})
    }

    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin(async move {
            match method.as_str() {
                "tools/list" => Ok(json!({"tools": tools()})),
                "tools/call" => {
                    let name = params.get("name").and_then(Value::as_str).unwrap_or_default().to_owned();
                    let args = params.get("arguments").cloned().unwrap_or(json!({}));
                    call_tool(&name, args, ctx).await
                }
                _ => Err(RpcError::method_not_found(&method)),
            }
        })
    }
}

async fn call_tool(name: &str, args: Value, ctx: RequestContext) -> Result<Value, RpcError> {
    match name {
        "emit_events" => emit_events(args, ctx).await,
        "test_simple_text" => Ok(text("This is a simple text response for testing.")),
        "test_tool_with_logging" => {
            for (i, m) in ["Tool execution started", "Tool processing data", "Tool execution completed"]
                .iter()
                .enumerate()
            {
                let _ = ctx.log(LogLevel::Info, None, json!(m)).await;
                if i < 2 {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
            }
            Ok(text("Tool with logging executed successfully"))
        }
        "test_tool_with_progress" => {
            for p in [0.0, 50.0, 100.0] {
                let _ = ctx.progress(p, Some(100.0), None).await;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
            Ok(text("Tool with progress executed successfully"))
        }
        "test_error_handling" => Ok(json!({
            "content": [{"type": "text", "text": "This tool intentionally returns an error for testing"}],
            "isError": true
        })),
        "test_reconnection" => {
            ctx.close_sse_stream().await;
            tokio::time::sleep(Duration::from_millis(100)).await;
            Ok(text("Reconnection test completed successfully"))
        }
        "test_sampling" => {
            let prompt = args.get("prompt").and_then(Value::as_str).unwrap_or("Hello").to_owned();
            let r = ctx
                .request(
                    "sampling/createMessage",
                    json!({"messages": [{"role": "user", "content": {"type": "text", "text": prompt}}], "maxTokens": 100}),
                )
                .await
                .map_err(|e| RpcError::new(crate::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
            let t = r.get("content").and_then(|c| c.get("text")).and_then(Value::as_str).unwrap_or_default();
            Ok(text(format!("LLM response: {t}")))
        }
        "test_elicitation" => {
            let message =
                args.get("message").and_then(Value::as_str).unwrap_or("Please provide input").to_owned();
            let r = ctx
                .request(
                    "elicitation/create",
                    json!({"message": message, "requestedSchema": {"type": "object", "properties": {
                        "username": {"type": "string", "description": "User's response"},
                        "email": {"type": "string", "description": "User's email address"}
                    }, "required": ["username", "email"]}}),
                )
                .await
                .map_err(|e| RpcError::new(crate::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
            Ok(text(format!("User response: {r}")))
        }
        _ => Err(RpcError::invalid_params(format!("unknown tool {name:?}"))),
    }
}
