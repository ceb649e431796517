//! The bundled application (`docs/SPEC.md` §5.1): `emit_events` to exercise the
//! transport, plus the fixtures the official conformance suite expects.

use futures_util::future::BoxFuture;
use gapless_server::host::{Host, LogLevel, RequestContext};
use gapless_server::jsonrpc::RpcError;
use gapless_server::tasks::TaskOptions;
use gapless_server::Change;
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
        tool("test_simple_text", "Returns a simple text response.", json!({}), &[]),
        tool("test_tool_with_logging", "Sends log notifications while it runs.", json!({}), &[]),
        tool("test_logging_tool", "Sends log notifications while it runs (the name MCP 2026-07-28's suite uses).", json!({}), &[]),
        tool("test_tool_with_progress", "Reports progress while it runs.", json!({}), &[]),
        tool("test_missing_capability", "Needs the client's sampling capability: refused with -32021 when it was not declared.", json!({}), &[]),
        tool("test_error_handling", "Always fails with a tool error.", json!({}), &[]),
        tool("test_reconnection", "Closes its SSE stream after the priming event; the result arrives on the resume.", json!({}), &[]),
        tool("test_sampling", "Asks the client to sample an LLM.", json!({"prompt": {"type": "string"}}), &["prompt"]),
        tool("test_elicitation", "Asks the client for user input.", json!({"message": {"type": "string"}}), &["message"]),
        tool("test_input_required_result_elicitation", "Asks the user's name (input key user_name), then greets them.", json!({}), &[]),
        tool("test_input_required_result_sampling", "Asks the client's LLM a question (capital_question).", json!({}), &[]),
        tool("test_input_required_result_list_roots", "Asks the client's roots (client_roots).", json!({}), &[]),
        tool("test_input_required_result_request_state", "Asks for a confirmation (confirm); its answer travels with the sealed requestState.", json!({}), &[]),
        tool("test_input_required_result_multiple_inputs", "Asks for a name, an LLM greeting and the roots at once.", json!({}), &[]),
        tool("test_input_required_result_multi_round", "Asks a name (step1), then a colour (step2), then answers with both.", json!({}), &[]),
        tool("test_input_required_result_tampered_state", "Asks for a confirmation; a retry whose requestState was altered is refused.", json!({}), &[]),
        tool("test_input_required_result_capabilities", "Asks only for the inputs the client declared it can give (elicitation, sampling).", json!({}), &[]),
        tool("test_streaming_elicitation", "Asks for user input; on MCP 2026-07-28 by an input-required result, never a request on the stream.", json!({}), &[]),
        tool(
            "test_x_mcp_header",
            "Echoes its region, which the client mirrors into the Mcp-Param-Region header (x-mcp-header, SEP-2243).",
            json!({"region": {"type": "string", "x-mcp-header": "Region"}}),
            &["region"],
        ),
        tool("greet", "Greets by name at once (never a task).", json!({"name": {"type": "string"}}), &["name"]),
        tool(
            "slow_compute",
            "Works for `seconds` (at most 60), then answers with its label: a task when the client declared the tasks extension and seconds >= 1, else at once.",
            json!({"seconds": {"type": "number"}, "label": {"type": "string"}}),
            &["seconds"],
        ),
        tool(
            "task_events",
            "A task only (else -32021) that emits `count` events (at most 100 000) of type dev.gapless.demo.tick with payload {\"i\": <its seq>, \"pad\": <payload_bytes (at most 65 000) of x>}, `interval_ms` apart (at most 10 000), on its event stream (tasks/stream), then completes with the text \"emitted <count>\".",
            json!({"count": {"type": "integer"}, "interval_ms": {"type": "integer"}, "payload_bytes": {"type": "integer"}}),
            &["count"],
        ),
        tool("failing_job", "A task only (else -32021) whose tool reports an error after about a second.", json!({}), &[]),
        tool("protocol_error_job", "A task (when the client declared the extension) that fails with a JSON-RPC error.", json!({}), &[]),
        tool(
            "confirm_delete",
            "A task (when the client declared the extension) that asks the user to confirm (key confirm) before it pretends to delete the file.",
            json!({"filename": {"type": "string"}}),
            &["filename"],
        ),
        tool("multi_input", "A task that asks for a name and a confirmation at once, then answers with both.", json!({}), &[]),
        tool("test_tool_with_task", "Asks the user's name by an input-required result first, then becomes a task that greets them.", json!({}), &[]),
        tool("test_trigger_tool_change", "Announces that the tool list changed (to 2026-07-28 listen streams, and to this session's standalone stream).", json!({}), &[]),
        tool("test_trigger_prompt_change", "Announces that the prompt list changed (to 2026-07-28 listen streams, and to this session's standalone stream).", json!({}), &[]),
        tool("test_image_content", "Returns an image.", json!({}), &[]),
        tool("test_audio_content", "Returns audio.", json!({}), &[]),
        tool("test_embedded_resource", "Returns an embedded resource.", json!({}), &[]),
        tool("test_multiple_content_types", "Returns text, an image and a resource.", json!({}), &[]),
        tool("test_elicitation_sep1034_defaults", "Elicitation with default values (SEP-1034).", json!({}), &[]),
        tool("test_elicitation_sep1330_enums", "Elicitation with enum variants (SEP-1330).", json!({}), &[]),
        json!({
            "name": "json_schema_2020_12_tool",
            "description": "Tool with JSON Schema 2020-12 features (SEP-1613, SEP-2106)",
            "inputSchema": {
                "$schema": "https://json-schema.org/draft/2020-12/schema",
                "type": "object",
                "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
                "properties": {
                    "name": {"type": "string"},
                    "address": {"$ref": "#/$defs/address"},
                    "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                    "phone": {"type": "string"},
                    "email": {"type": "string"}
                },
                "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
                "if": {"properties": {"contactMethod": {"const": "phone"}}, "required": ["contactMethod"]},
                "then": {"required": ["phone"]},
                "else": {"required": ["email"]},
                "additionalProperties": false
            }
        }),
        tool(
            "emit_events",
            "Sends `count` notifications/message (data.seq = 1..count) on the request's stream or the standalone stream, then returns.",
            json!({
                "count": {"type": "integer", "minimum": 0, "maximum": MAX_COUNT},
                "interval_ms": {"type": "integer", "minimum": 0, "maximum": MAX_INTERVAL_MS, "default": 0},
                "payload_bytes": {"type": "integer", "minimum": 0, "maximum": MAX_PAYLOAD, "default": 16},
                "target": {"type": "string", "enum": ["request", "standalone"], "default": "request"},
                "stamp": {"type": "boolean", "default": false}
            }),
            &["count"],
        ),
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
    let stamp = match args.get("stamp") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(b)) => *b,
        Some(_) => return Err(RpcError::invalid_params("stamp must be a boolean")),
    };
    let pad = "x".repeat(pad_len);
    let session = ctx.session();
    if standalone && session.is_none() {
        return Err(RpcError::invalid_params(format!(
            "target \"standalone\" needs a session: MCP {} has none (no standalone stream)",
            ctx.protocol_version()
        )));
    }
    for i in 1..=count {
        if ctx.is_cancelled() {
            break;
        }
        let at = stamp.then(unix_micros);
        let msg = gapless::ring::exact_bytes(emitted_message(i, at, &pad));
        let sent = if let (true, Some(session)) = (standalone, &session) {
            session.notify_raw(msg).await
        } else {
            ctx.notify_raw(msg).await
        };
        sent.map_err(|e| RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
        if interval > 0 && i < count {
            tokio::time::sleep(Duration::from_millis(interval)).await;
        }
    }
    Ok(text(format!("emitted {count}")))
}

/// The wall clock in microseconds since the Unix epoch (0 before it): what
/// `stamp` writes, for a client on the same machine to measure publish →
/// read.
fn unix_micros() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// `emit_events`' `i`-th message, serialized by hand into a `Vec` of
/// exactly its length: this is the hot loop of the load tests, where
/// `format!` cost about 700 instructions per event and left spare capacity
/// that `exact_bytes` then copied away. `at`: the publish stamp, if asked.
fn emitted_message(i: u64, at: Option<u64>, pad: &str) -> Vec<u8> {
    const HEAD: &[u8] =
        br#"{"jsonrpc":"2.0","method":"notifications/message","params":{"level":"info","logger":"emit","data":{"seq":"#;
    const STAMP: &[u8] = br#","t":"#;
    const MID: &[u8] = br#","pad":""#;
    const TAIL: &[u8] = br#""}}}"#;
    // Numbers in decimal, by the writer of event ids' seqs.
    let mut buf = [0u8; gapless::wire::SEQ_MAX_LEN];
    let digits = gapless::wire::encode_seq(gapless::Seq(i), &mut buf);
    let mut tbuf = [0u8; gapless::wire::SEQ_MAX_LEN];
    let (stamp, t): (&[u8], &[u8]) = match at {
        Some(at) => (STAMP, gapless::wire::encode_seq(gapless::Seq(at), &mut tbuf)),
        None => (b"", b""),
    };
    let len = HEAD.len() + digits.len() + stamp.len() + t.len() + MID.len() + pad.len() + TAIL.len();
    let mut msg = Vec::with_capacity(len);
    for part in [HEAD, digits, stamp, t, MID, pad.as_bytes(), TAIL] {
        msg.extend_from_slice(part);
    }
    msg
}

impl Host for DemoHost {
    fn capabilities(&self) -> Value {
        json!({
            "tools": {"listChanged": true},
            "logging": {},
            "completions": {},
            "resources": {"subscribe": true, "listChanged": false},
            "prompts": {"listChanged": true},
            "extensions": {gapless_server::tasks::EXTENSION: {}}
        })
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
                "resources/list" => Ok(json!({"resources": [
                    {"uri": "test://static-text", "name": "static-text", "description": "A static text resource", "mimeType": "text/plain"},
                    {"uri": "test://static-binary", "name": "static-binary", "description": "A static binary resource", "mimeType": "image/png"},
                    {"uri": "test://watched-resource", "name": "watched-resource", "description": "A resource to subscribe to", "mimeType": "text/plain"}
                ]})),
                "resources/templates/list" => Ok(json!({"resourceTemplates": [
                    {"uriTemplate": "test://template/{id}/data", "name": "template", "description": "A templated resource", "mimeType": "application/json"}
                ]})),
                "resources/read" => read_resource(
                    params.get("uri").and_then(Value::as_str).unwrap_or_default(),
                    &ctx.protocol_version(),
                ),
                "resources/subscribe" | "resources/unsubscribe" => Ok(json!({})),
                "prompts/list" => Ok(json!({"prompts": [
                    {"name": "test_simple_prompt", "description": "A simple prompt"},
                    {"name": "test_prompt_with_arguments", "description": "A prompt with arguments", "arguments": [
                        {"name": "arg1", "description": "First argument", "required": true},
                        {"name": "arg2", "description": "Second argument", "required": true}]},
                    {"name": "test_prompt_with_embedded_resource", "description": "A prompt with an embedded resource", "arguments": [
                        {"name": "resourceUri", "description": "The resource to embed", "required": true}]},
                    {"name": "test_prompt_with_image", "description": "A prompt with an image"},
                    {"name": "test_input_required_result_prompt", "description": "A prompt that asks the user for its context first (user_context)"}
                ]})),
                "prompts/get" => get_prompt(&params, &ctx).await,
                "completion/complete" => {
                    Ok(json!({"completion": {"values": ["test", "testing"], "total": 2, "hasMore": false}}))
                }
                _ => Err(RpcError::method_not_found(&method)),
            }
        })
    }
}

/// A 1×1 PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// A resource; one not found is -32002 on the 2025 revisions and -32602
/// from 2026-07-28 on (SEP-2164).
fn read_resource(uri: &str, version: &str) -> Result<Value, RpcError> {
    let content = match uri {
        "test://static-text" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "This is the content of the static text resource."})
        }
        "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
        "test://watched-resource" => {
            json!({"uri": uri, "mimeType": "text/plain", "text": "Watched resource content."})
        }
        _ => match uri.strip_prefix("test://template/").and_then(|r| r.strip_suffix("/data")) {
            Some(id) if !id.is_empty() && !id.contains('/') => json!({
                "uri": uri, "mimeType": "application/json",
                "text": json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")}).to_string()
            }),
            _ => {
                let code = if gapless_server::MODERN_VERSIONS.contains(&version) { -32602 } else { -32002 };
                return Err(RpcError {
                    code,
                    message: format!("resource not found: {uri}"),
                    data: Some(json!({"uri": uri})),
                });
            }
        },
    };
    Ok(json!({"contents": [content]}))
}

async fn get_prompt(params: &Value, ctx: &RequestContext) -> Result<Value, RpcError> {
    let args = params.get("arguments").cloned().unwrap_or(json!({}));
    let arg = |k: &str| args.get(k).and_then(Value::as_str).map(str::to_owned);
    let user = |content: Value| json!({"role": "user", "content": content});
    let messages = match params.get("name").and_then(Value::as_str).unwrap_or_default() {
        "test_simple_prompt" => {
            vec![user(json!({"type": "text", "text": "This is a simple prompt for testing."}))]
        }
        "test_prompt_with_arguments" => {
            let (a1, a2) = (arg("arg1").unwrap_or_default(), arg("arg2").unwrap_or_default());
            vec![user(
                json!({"type": "text", "text": format!("Prompt with arguments: arg1='{a1}', arg2='{a2}'")}),
            )]
        }
        "test_prompt_with_embedded_resource" => {
            let uri = arg("resourceUri").ok_or_else(|| RpcError::invalid_params("missing resourceUri"))?;
            vec![
                user(
                    json!({"type": "resource", "resource": {"uri": uri, "mimeType": "text/plain", "text": "Embedded resource content for testing."}}),
                ),
                user(json!({"type": "text", "text": "Please process the embedded resource above."})),
            ]
        }
        "test_input_required_result_prompt" => {
            let a = ask(
                ctx,
                &[("user_context", elicit("What context should the prompt use?", "context", "string"))],
            )
            .await?;
            let context = a["user_context"]["content"]["context"].as_str().unwrap_or_default().to_owned();
            vec![user(json!({"type": "text", "text": format!("Answer in this context: {context}")}))]
        }
        "test_prompt_with_image" => vec![
            user(json!({"type": "image", "data": PNG, "mimeType": "image/png"})),
            user(json!({"type": "text", "text": "Please analyze the image above."})),
        ],
        other => return Err(RpcError::invalid_params(format!("unknown prompt {other:?}"))),
    };
    Ok(json!({"messages": messages}))
}

/// An `elicitation/create` input request for one field.
fn elicit(message: &str, field: &str, ty: &str) -> Value {
    json!({"method": "elicitation/create", "params": {"message": message, "requestedSchema": {
        "type": "object", "properties": {field: {"type": ty}}, "required": [field]}}})
}

fn sample(question: &str) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": question}}], "maxTokens": 100}})
}

fn roots() -> Value {
    json!({"method": "roots/list", "params": {}})
}

/// Asks the client for `inputs` by key (`RequestContext::ask`: server →
/// client requests on a session, an input-required result on 2026-07-28).
async fn ask(
    ctx: &RequestContext,
    inputs: &[(&str, Value)],
) -> Result<serde_json::Map<String, Value>, RpcError> {
    let requests = inputs.iter().map(|(k, v)| ((*k).to_owned(), v.clone())).collect();
    ctx.ask(requests)
        .await
        .map_err(|e| RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, e.to_string()))
}

/// The text of a sampling result.
fn sampled(r: &Value) -> &str {
    r["content"]["text"].as_str().unwrap_or_default()
}

fn root_uris(r: &Value) -> String {
    let uris: Vec<&str> =
        r["roots"].as_array().into_iter().flatten().filter_map(|x| x["uri"].as_str()).collect();
    uris.join(", ")
}

async fn call_tool(name: &str, args: Value, ctx: RequestContext) -> Result<Value, RpcError> {
    match name {
        "emit_events" => emit_events(args, ctx).await,
        "test_simple_text" => Ok(text("This is a simple text response for testing.")),
        "test_input_required_result_elicitation" => {
            let a = ask(&ctx, &[("user_name", elicit("What is your name?", "name", "string"))]).await?;
            Ok(text(format!("Hello, {}!", a["user_name"]["content"]["name"].as_str().unwrap_or_default())))
        }
        "test_input_required_result_sampling" => {
            let a = ask(&ctx, &[("capital_question", sample("What is the capital of France?"))]).await?;
            Ok(text(format!("The LLM answered: {}", sampled(&a["capital_question"]))))
        }
        "test_input_required_result_list_roots" => {
            let a = ask(&ctx, &[("client_roots", roots())]).await?;
            Ok(text(format!("The client's roots: {}", root_uris(&a["client_roots"]))))
        }
        "test_input_required_result_request_state" | "test_input_required_result_tampered_state" => {
            let a = ask(&ctx, &[("confirm", elicit("Please confirm", "ok", "boolean"))]).await?;
            Ok(text(format!("state-ok: confirmed={}", a["confirm"]["content"]["ok"])))
        }
        "test_input_required_result_multiple_inputs" => {
            let a = ask(
                &ctx,
                &[
                    ("user_name", elicit("What is your name?", "name", "string")),
                    ("greeting", sample("Write a short greeting.")),
                    ("client_roots", roots()),
                ],
            )
            .await?;
            Ok(text(format!(
                "name={}, greeting={}, roots={}",
                a["user_name"]["content"]["name"].as_str().unwrap_or_default(),
                sampled(&a["greeting"]),
                root_uris(&a["client_roots"])
            )))
        }
        "test_input_required_result_multi_round" => {
            let a = ask(&ctx, &[("step1", elicit("Step 1: What is your name?", "name", "string"))]).await?;
            let b =
                ask(&ctx, &[("step2", elicit("Step 2: What is your favorite color?", "color", "string"))])
                    .await?;
            Ok(text(format!(
                "{}'s favorite color is {}",
                a["step1"]["content"]["name"].as_str().unwrap_or_default(),
                b["step2"]["content"]["color"].as_str().unwrap_or_default()
            )))
        }
        "test_input_required_result_capabilities" => {
            let caps = ctx.client_capabilities().unwrap_or_default();
            let mut inputs = vec![];
            if caps.get("elicitation").is_some() {
                inputs.push(("user_name", elicit("What is your name?", "name", "string")));
            }
            if caps.get("sampling").is_some() {
                inputs.push(("capital_question", sample("What is the capital of France?")));
            }
            if inputs.is_empty() {
                return Ok(text("The client declared no capability to ask with"));
            }
            let a = ask(&ctx, &inputs).await?;
            Ok(text(format!("answered: {}", a.keys().cloned().collect::<Vec<_>>().join(", "))))
        }
        "test_streaming_elicitation" => {
            let _ = ctx.log(LogLevel::Info, None, json!("asking for input")).await;
            let a = ask(&ctx, &[("input", elicit("Please provide input", "value", "string"))]).await?;
            Ok(text(format!("received: {}", a["input"]["content"]["value"])))
        }
        "greet" => Ok(text(format!("Hello, {}!", args["name"].as_str().unwrap_or_default()))),
        "slow_compute" => {
            let seconds = args["seconds"].as_f64().unwrap_or(0.0).clamp(0.0, 60.0);
            let label = args["label"].as_str().unwrap_or_default().to_owned();
            if seconds >= 1.0 {
                // A task if the client can take one; else the call waits.
                let _ = ctx.create_task(TaskOptions::default()).await;
            }
            tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
            Ok(text(format!("computed {label} in {seconds} s")))
        }
        "task_events" => {
            let count = u64_arg(&args, "count", None, 100_000)?;
            let interval = Duration::from_millis(u64_arg(&args, "interval_ms", Some(0), 10_000)?);
            let pad = "x".repeat(u64_arg(&args, "payload_bytes", Some(0), 65_000)? as usize);
            ctx.create_task(TaskOptions::default()).await?;
            let failed = |why: String| RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, why);
            for i in 0..count {
                if !interval.is_zero() && i > 0 {
                    tokio::time::sleep(interval).await;
                }
                // The task's only emitter: each event's seq is its index.
                let seq = ctx
                    .emit_task_event("dev.gapless.demo.tick", json!({"i": i, "pad": pad}))
                    .map_err(|e| failed(e.to_string()))?;
                if seq != i {
                    return Err(failed(format!("event {i} got seq {seq}")));
                }
            }
            Ok(text(format!("emitted {count}")))
        }
        "failing_job" => {
            ctx.create_task(TaskOptions::default()).await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(
                json!({"content": [{"type": "text", "text": "the job failed: nothing to process"}], "isError": true}),
            )
        }
        "protocol_error_job" => {
            let _ = ctx.create_task(TaskOptions::default()).await;
            tokio::time::sleep(Duration::from_millis(200)).await;
            Err(RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, "the job broke: internal error"))
        }
        "confirm_delete" => {
            let file = args["filename"].as_str().unwrap_or_default().to_owned();
            let _ = ctx.create_task(TaskOptions::default()).await;
            let a =
                ask(&ctx, &[("confirm", elicit(&format!("Delete {file}?"), "confirm", "boolean"))]).await?;
            let yes = a["confirm"]["action"] == "accept" && a["confirm"]["content"]["confirm"] == true;
            Ok(text(if yes { format!("deleted {file}") } else { format!("kept {file}") }))
        }
        "multi_input" => {
            let _ = ctx.create_task(TaskOptions::default()).await;
            let a = ask(
                &ctx,
                &[
                    ("name", elicit("What is your name?", "name", "string")),
                    ("confirm", elicit("Go ahead?", "confirm", "boolean")),
                ],
            )
            .await?;
            Ok(text(format!(
                "name={}, confirmed={}",
                a["name"]["content"]["name"].as_str().unwrap_or_default(),
                a["confirm"]["content"]["confirm"]
            )))
        }
        "test_tool_with_task" => {
            // Input first (an input-required result), then the task.
            let a = ask(&ctx, &[("user_name", elicit("What is your name?", "name", "string"))]).await?;
            let name = a["user_name"]["content"]["name"].as_str().unwrap_or_default().to_owned();
            ctx.create_task(TaskOptions::default()).await?;
            tokio::time::sleep(Duration::from_millis(200)).await;
            Ok(text(format!("Hello, {name}! (from a task)")))
        }
        "test_x_mcp_header" => Ok(text(format!("region={}", args["region"].as_str().unwrap_or_default()))),
        "test_trigger_tool_change" | "test_trigger_prompt_change" => {
            let (change, method) = if name == "test_trigger_tool_change" {
                (Change::ToolsListChanged, "notifications/tools/list_changed")
            } else {
                (Change::PromptsListChanged, "notifications/prompts/list_changed")
            };
            ctx.announce(change);
            if let Some(session) = ctx.session() {
                let _ = session.notify(method, Value::Null).await;
            }
            Ok(text(format!("announced {method}")))
        }
        "test_image_content" => {
            Ok(json!({"content": [{"type": "image", "data": PNG, "mimeType": "image/png"}]}))
        }
        "test_audio_content" => {
            Ok(json!({"content": [{"type": "audio", "data": WAV, "mimeType": "audio/wav"}]}))
        }
        "test_embedded_resource" => Ok(json!({"content": [{"type": "resource", "resource": {
            "uri": "test://embedded-resource", "mimeType": "text/plain", "text": "This is an embedded resource content."}}]})),
        "test_multiple_content_types" => Ok(json!({"content": [
            {"type": "text", "text": "Multiple content types test:"},
            {"type": "image", "data": PNG, "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "test://mixed-content-resource", "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}
        ]})),
        "test_elicitation_sep1034_defaults" => {
            let r = ctx.request("elicitation/create", json!({"message": "Please review the defaults", "requestedSchema": {"type": "object", "properties": {
                "name": {"type": "string", "description": "User name", "default": "John Doe"},
                "age": {"type": "integer", "description": "User age", "default": 30},
                "score": {"type": "number", "description": "User score", "default": 95.5},
                "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                "verified": {"type": "boolean", "description": "Verification status", "default": true}
            }, "required": []}})).await.map_err(|e| RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
            Ok(text(format!("Elicitation completed: action={}, content={}", r["action"], r["content"])))
        }
        "test_elicitation_sep1330_enums" => {
            let r = ctx.request("elicitation/create", json!({"message": "Please choose", "requestedSchema": {"type": "object", "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": [
                    {"const": "value1", "title": "First Option"}, {"const": "value2", "title": "Second Option"}, {"const": "value3", "title": "Third Option"}]},
                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"], "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": [
                    {"const": "value1", "title": "First Choice"}, {"const": "value2", "title": "Second Choice"}, {"const": "value3", "title": "Third Choice"}]}}
            }, "required": []}})).await.map_err(|e| RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
            Ok(text(format!("Elicitation completed: action={}, content={}", r["action"], r["content"])))
        }
        "test_tool_with_logging" | "test_logging_tool" => {
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
        "test_missing_capability" => match ctx.client_capabilities() {
            Some(c) if c.get("sampling").is_none() => {
                Err(RpcError::missing_client_capability(json!({"sampling": {}})))
            }
            _ => Ok(text("The client declared the sampling capability")),
        },
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
                .map_err(|e| RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
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
                .map_err(|e| RpcError::new(gapless_server::jsonrpc::code::INTERNAL_ERROR, e.to_string()))?;
            Ok(text(format!("User response: {r}")))
        }
        _ => Err(RpcError::invalid_params(format!("unknown tool {name:?}"))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-serialized message is the JSON `format!` wrote before, byte
    /// for byte, and its allocation is exactly its length.
    #[test]
    fn emitted_messages_are_the_json_they_say() {
        for i in [0, 1, 9, 10, 12_345, u64::MAX] {
            for pad in ["", "xx", &"x".repeat(300)] {
                for at in [None, Some(0), Some(1_733_400_000_123_456), Some(u64::MAX)] {
                    let m = emitted_message(i, at, pad);
                    assert_eq!(m.len(), m.capacity(), "no spare capacity");
                    let t = at.map(|t| format!(r#","t":{t}"#)).unwrap_or_default();
                    let want = format!(
                        r#"{{"jsonrpc":"2.0","method":"notifications/message","params":{{"level":"info","logger":"emit","data":{{"seq":{i}{t},"pad":"{pad}"}}}}}}"#
                    );
                    assert_eq!(String::from_utf8(m.clone()).unwrap(), want);
                    let v: Value = serde_json::from_slice(&m).unwrap();
                    assert_eq!(
                        (v["params"]["data"]["seq"].as_u64(), v["params"]["data"]["t"].as_u64()),
                        (Some(i), at)
                    );
                    assert_eq!(v["params"]["data"]["pad"].as_str(), Some(pad));
                }
            }
        }
    }
}
