//! The fixtures of the official MCP conformance suite (server mode), written
//! as an rmcp server: tools with `#[tool_router]`/`#[tool]`, prompts with
//! `#[prompt_router]`/`#[prompt]`, resources, completion and subscriptions
//! as `ServerHandler` methods. Nothing in it knows about gapless but
//! `test_reconnection`, which closes its SSE stream through
//! [`gapless_rmcp::RequestStream`] (rmcp's API has no way for a handler to
//! do that). The bundled binary serves it with `--host rmcp-conformance`
//! (`server/bin/src/lib.rs` includes this file), and
//! `server/bin/tests/conformance/run.sh` runs the suite against it.
//!
//! The fixtures' contents are those the suite checks
//! (`server/CONFORMANCE_NOTES.md` §3), the same as the demo server's.

#![allow(deprecated)] // rmcp 3.11 marks logging, sampling and subscribe deprecated (SEP-2577); they are the 2025 API.

use rmcp::handler::server::{
    router::{prompt::PromptRouter, tool::ToolRouter},
    tool::{InputResponses, RequestState},
    wrapper::Parameters,
};
use rmcp::model::{
    CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult, CompletionInfo, ContentBlock,
    CreateMessageRequestParams, ElicitRequestParams, InputRequest, InputRequiredResult, JsonObject,
    ListResourceTemplatesResult, ListResourcesResult, LoggingLevel, LoggingMessageNotificationParam,
    PaginatedRequestParams, ProgressNotificationParam, PromptMessage, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, RequestStateCodec, Resource, ResourceContents,
    ResourceTemplate, Role, SamplingMessage, SealOptions, ServerCapabilities, ServerConfig,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::RequestContext;
use rmcp::{
    prompt, prompt_router, schemars, tool, tool_handler, tool_router, ErrorData, RoleServer, ServerHandler,
};
use serde::Deserialize;
use serde_json::json;
use std::sync::Arc;
use std::time::Duration;

/// A 1×1 PNG.
const PNG: &str =
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8DwHwAFBQIAX8jx0gAAAABJRU5ErkJggg==";
/// A minimal WAV.
const WAV: &str = "UklGRiYAAABXQVZFZm10IBAAAAABAAEAQB8AAAB9AAACABAAZGF0YQIAAAA=";

/// `test_sampling`'s argument.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct SamplingArgs {
    /// What to ask the client's model.
    prompt: String,
}

/// `test_elicitation`'s argument.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct ElicitationArgs {
    /// What to tell the user.
    message: String,
}

/// `test_prompt_with_arguments`' arguments.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct PromptArgs {
    /// First argument
    arg1: String,
    /// Second argument
    arg2: String,
}

/// `test_prompt_with_embedded_resource`'s argument.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct EmbedArgs {
    /// The resource to embed
    #[serde(rename = "resourceUri")]
    resource_uri: String,
}

/// The conformance fixtures: one per session (the factory makes one per
/// session).
#[derive(Clone)]
pub(crate) struct Conformance {
    tool_router: ToolRouter<Self>,
    prompt_router: PromptRouter<Self>,
}

impl Default for Conformance {
    fn default() -> Self {
        Self::new()
    }
}

fn text(t: impl Into<String>) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(t)])
}

fn internal(e: impl std::fmt::Display) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

/// An rmcp model value from its JSON (for the shapes whose typed
/// constructors take more lines than the JSON).
fn from_json<T: serde::de::DeserializeOwned>(v: serde_json::Value) -> Result<T, ErrorData> {
    serde_json::from_value(v).map_err(internal)
}

/// `Rounds::ask`, or return the input-required result from the tool.
macro_rules! ask {
    ($rounds:expr, $asks:expr) => {
        match $rounds.ask($asks)? {
            Ok(answers) => answers,
            Err(more) => return Ok(more.into()),
        }
    };
}

/// The schema `json_schema_2020_12_tool` is listed with, verbatim (SEP-1613).
fn schema_2020_12() -> Arc<JsonObject> {
    let v = json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "type": "object",
        "$defs": {"address": {"type": "object", "properties": {"street": {"type": "string"}, "city": {"type": "string"}}}},
        "properties": {"name": {"type": "string"}, "address": {"$ref": "#/$defs/address"}},
        "additionalProperties": false
    });
    match v {
        serde_json::Value::Object(o) => Arc::new(o),
        _ => unreachable!("an object literal"),
    }
}

#[tool_router]
impl Conformance {
    /// The fixtures.
    pub(crate) fn new() -> Self {
        Self { tool_router: Self::tool_router(), prompt_router: Self::prompt_router() }
    }

    #[tool(description = "Returns a simple text response.")]
    async fn test_simple_text(&self) -> Result<CallToolResult, ErrorData> {
        Ok(text("This is a simple text response for testing."))
    }

    #[tool(description = "Returns an image.")]
    async fn test_image_content(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::image(PNG, "image/png")]))
    }

    #[tool(description = "Returns audio.")]
    async fn test_audio_content(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::audio(WAV, "audio/wav")]))
    }

    #[tool(description = "Returns an embedded resource.")]
    async fn test_embedded_resource(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::resource(ResourceContents::text(
            "This is an embedded resource content.",
            "test://embedded-resource",
        ))]))
    }

    #[tool(description = "Returns text, an image and a resource.")]
    async fn test_multiple_content_types(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![
            ContentBlock::text("Multiple content types test:"),
            ContentBlock::image(PNG, "image/png"),
            ContentBlock::resource(
                ResourceContents::text(r#"{"test":"data","value":123}"#, "test://mixed-content-resource")
                    .with_mime_type("application/json"),
            ),
        ]))
    }

    #[tool(description = "Sends log notifications while it runs.")]
    async fn test_tool_with_logging(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let steps = ["Tool execution started", "Tool processing data", "Tool execution completed"];
        for (i, m) in steps.iter().enumerate() {
            ctx.peer
                .notify_logging_message(LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(m)))
                .await
                .map_err(internal)?;
            if i + 1 < steps.len() {
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(text("Tool with logging executed successfully"))
    }

    #[tool(description = "Sends log notifications while it runs (the name MCP 2026-07-28's suite uses).")]
    async fn test_logging_tool(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        self.test_tool_with_logging(ctx).await
    }

    #[tool(
        description = "Needs the client's sampling capability: refused with -32021 when it was not declared."
    )]
    async fn test_missing_capability(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if ctx.peer.peer_info().is_some_and(|i| i.capabilities.sampling.is_some()) {
            return Ok(text("The client declared the sampling capability"));
        }
        Err(ErrorData::new(
            rmcp::model::ErrorCode(-32021),
            "the client did not declare the capabilities this request needs: sampling",
            Some(json!({"requiredCapabilities": {"sampling": {}}})),
        ))
    }

    #[tool(
        description = "Asks for user input: on MCP 2026-07-28 by an input-required result (rmcp's InputRequiredResult, key input), on a session by a request."
    )]
    async fn test_streaming_elicitation(
        &self,
        InputResponses(answers): InputResponses,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let params = json!({"mode": "form", "message": "Please provide input", "requestedSchema": {
            "type": "object", "properties": {"value": {"type": "string"}}, "required": ["value"]}});
        let modern = ctx.protocol_version().is_some_and(|v| v.as_str() >= "2026-07-28");
        if !modern {
            let r = elicit(&ctx, from_json(params)?).await?;
            return Ok(text(format!("received: {}", r["content"]["value"])).into());
        }
        match answers.and_then(|a| a.get("input").cloned()) {
            Some(a) => Ok(text(format!("received: {}", a["content"]["value"])).into()),
            None => {
                let ask: InputRequest = from_json(json!({"method": "elicitation/create", "params": params}))?;
                let asks = std::collections::BTreeMap::from([("input".to_owned(), ask)]);
                Ok(InputRequiredResult::new(Some(asks), None).into())
            }
        }
    }

    #[tool(description = "Asks the user's name (input key user_name), then greets them.")]
    async fn test_input_required_result_elicitation(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_elicitation", &ctx, responses, state)?;
        let a = ask!(r, &[("user_name", elicit_input("What is your name?", "name", "string"))]);
        Ok(text(format!("Hello, {}!", a["user_name"]["content"]["name"].as_str().unwrap_or_default())).into())
    }

    #[tool(description = "Asks the client's LLM a question (capital_question).")]
    async fn test_input_required_result_sampling(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_sampling", &ctx, responses, state)?;
        let a = ask!(r, &[("capital_question", sample_input("What is the capital of France?"))]);
        let said = a["capital_question"]["content"]["text"].as_str().unwrap_or_default();
        Ok(text(format!("The LLM answered: {said}")).into())
    }

    #[tool(description = "Asks the client's roots (client_roots).")]
    async fn test_input_required_result_list_roots(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_list_roots", &ctx, responses, state)?;
        let a = ask!(r, &[("client_roots", roots_input())]);
        Ok(text(format!("The client's roots: {}", root_uris(&a["client_roots"]))).into())
    }

    #[tool(
        description = "Asks for a confirmation (confirm); its answer travels with the sealed requestState."
    )]
    async fn test_input_required_result_request_state(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_request_state", &ctx, responses, state)?;
        let a = ask!(r, &[("confirm", elicit_input("Please confirm", "ok", "boolean"))]);
        Ok(text(format!("state-ok: confirmed={}", a["confirm"]["content"]["ok"])).into())
    }

    #[tool(description = "Asks for a confirmation; a retry whose requestState was altered is refused.")]
    async fn test_input_required_result_tampered_state(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_tampered_state", &ctx, responses, state)?;
        let a = ask!(r, &[("confirm", elicit_input("Please confirm", "ok", "boolean"))]);
        Ok(text(format!("state-ok: confirmed={}", a["confirm"]["content"]["ok"])).into())
    }

    #[tool(description = "Asks for a name, an LLM greeting and the roots at once.")]
    async fn test_input_required_result_multiple_inputs(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_multiple_inputs", &ctx, responses, state)?;
        let a = ask!(
            r,
            &[
                ("user_name", elicit_input("What is your name?", "name", "string")),
                ("greeting", sample_input("Write a short greeting.")),
                ("client_roots", roots_input()),
            ]
        );
        Ok(text(format!(
            "name={}, greeting={}, roots={}",
            a["user_name"]["content"]["name"].as_str().unwrap_or_default(),
            a["greeting"]["content"]["text"].as_str().unwrap_or_default(),
            root_uris(&a["client_roots"])
        ))
        .into())
    }

    #[tool(description = "Asks a name (step1), then a colour (step2), then answers with both.")]
    async fn test_input_required_result_multi_round(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_multi_round", &ctx, responses, state)?;
        let a = ask!(r, &[("step1", elicit_input("Step 1: What is your name?", "name", "string"))]);
        let b =
            ask!(r, &[("step2", elicit_input("Step 2: What is your favorite color?", "color", "string"))]);
        Ok(text(format!(
            "{}'s favorite color is {}",
            a["step1"]["content"]["name"].as_str().unwrap_or_default(),
            b["step2"]["content"]["color"].as_str().unwrap_or_default()
        ))
        .into())
    }

    #[tool(description = "Asks only for the inputs the client declared it can give (elicitation, sampling).")]
    async fn test_input_required_result_capabilities(
        &self,
        responses: InputResponses,
        state: RequestState,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut r = Rounds::new("test_input_required_result_capabilities", &ctx, responses, state)?;
        let mut asks = vec![];
        if r.capabilities.get("elicitation").is_some_and(|c| !c.is_null()) {
            asks.push(("user_name", elicit_input("What is your name?", "name", "string")));
        }
        if r.capabilities.get("sampling").is_some_and(|c| !c.is_null()) {
            asks.push(("capital_question", sample_input("What is the capital of France?")));
        }
        if asks.is_empty() {
            return Ok(text("The client declared no capability to ask with").into());
        }
        let a = ask!(r, &asks);
        Ok(text(format!("answered: {}", a.keys().cloned().collect::<Vec<_>>().join(", "))).into())
    }

    #[tool(description = "Reports progress while it runs.")]
    async fn test_tool_with_progress(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if let Some(token) = ctx.meta.get_progress_token() {
            for p in [0.0, 50.0, 100.0] {
                let mut n = ProgressNotificationParam::new(token.clone(), p);
                n.total = Some(100.0);
                ctx.peer.notify_progress(n).await.map_err(internal)?;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        Ok(text("Tool with progress executed successfully"))
    }

    #[tool(description = "Always fails with a tool error.")]
    async fn test_error_handling(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::error(vec![ContentBlock::text(
            "This tool intentionally returns an error for testing",
        )]))
    }

    #[tool(description = "Closes its SSE stream after the priming event; the result arrives on the resume.")]
    async fn test_reconnection(&self, ctx: RequestContext<RoleServer>) -> Result<CallToolResult, ErrorData> {
        let stream = ctx.extensions.get::<gapless_rmcp::RequestStream>().ok_or_else(|| {
            internal("test_reconnection needs gapless's transport (no gapless_rmcp::RequestStream)")
        })?;
        stream.close_sse_stream().await;
        tokio::time::sleep(Duration::from_millis(100)).await;
        Ok(text("Reconnection test completed successfully"))
    }

    #[tool(description = "Asks the client to sample an LLM.")]
    async fn test_sampling(
        &self,
        Parameters(args): Parameters<SamplingArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let r = ctx
            .peer
            .create_message(CreateMessageRequestParams::new(
                vec![SamplingMessage::user_text(args.prompt)],
                100,
            ))
            .await
            .map_err(internal)?;
        let v = serde_json::to_value(&r).map_err(internal)?;
        let reply = v["content"]["text"].as_str().unwrap_or_default().to_owned();
        Ok(text(format!("LLM response: {reply}")))
    }

    #[tool(description = "Asks the client for user input.")]
    async fn test_elicitation(
        &self,
        Parameters(args): Parameters<ElicitationArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let params = from_json(json!({"mode": "form", "message": args.message, "requestedSchema": {
            "type": "object",
            "properties": {
                "username": {"type": "string", "description": "User's response"},
                "email": {"type": "string", "description": "User's email address"}
            },
            "required": ["username", "email"]
        }}))?;
        let r = elicit(&ctx, params).await?;
        Ok(text(format!("User response: {r}")))
    }

    #[tool(description = "Elicitation with default values (SEP-1034).")]
    async fn test_elicitation_sep1034_defaults(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let params = from_json(
            json!({"mode": "form", "message": "Please review the defaults", "requestedSchema": {
                "type": "object",
                "properties": {
                    "name": {"type": "string", "description": "User name", "default": "John Doe"},
                    "age": {"type": "integer", "description": "User age", "default": 30},
                    "score": {"type": "number", "description": "User score", "default": 95.5},
                    "status": {"type": "string", "description": "User status", "enum": ["active", "inactive", "pending"], "default": "active"},
                    "verified": {"type": "boolean", "description": "Verification status", "default": true}
                },
                "required": []
            }}),
        )?;
        let r = elicit(&ctx, params).await?;
        Ok(text(format!("Elicitation completed: action={}, content={}", r["action"], r["content"])))
    }

    #[tool(description = "Elicitation with enum variants (SEP-1330).")]
    async fn test_elicitation_sep1330_enums(
        &self,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let params = from_json(json!({"mode": "form", "message": "Please choose", "requestedSchema": {
            "type": "object",
            "properties": {
                "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
                "titledSingle": {"type": "string", "oneOf": [
                    {"const": "value1", "title": "First Option"},
                    {"const": "value2", "title": "Second Option"},
                    {"const": "value3", "title": "Third Option"}]},
                "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                    "enumNames": ["Option One", "Option Two", "Option Three"]},
                "untitledMulti": {"type": "array", "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
                "titledMulti": {"type": "array", "items": {"anyOf": [
                    {"const": "value1", "title": "First Choice"},
                    {"const": "value2", "title": "Second Choice"},
                    {"const": "value3", "title": "Third Choice"}]}}
            },
            "required": []
        }}))?;
        let r = elicit(&ctx, params).await?;
        Ok(text(format!("Elicitation completed: action={}, content={}", r["action"], r["content"])))
    }

    #[tool(description = "Tool with JSON Schema 2020-12 features", input_schema = schema_2020_12())]
    async fn json_schema_2020_12_tool(&self) -> Result<CallToolResult, ErrorData> {
        Ok(text("ok"))
    }
}

/// Multi round-trip requests (SEP-2322) written in rmcp, as the demo's
/// `RequestContext::ask` does them on gapless: the answers a retry brings
/// are those sealed in its `requestState` (HMAC under a per-process key,
/// bound to the tool), then its `inputResponses`; an ask whose keys are all
/// answered gets them, else the tool answers with an `InputRequiredResult`
/// naming the missing ones and sealing the answers used so far.
struct Rounds {
    known: serde_json::Map<String, serde_json::Value>,
    used: serde_json::Map<String, serde_json::Value>,
    capabilities: serde_json::Value,
    tool: &'static str,
}

fn codec() -> &'static RequestStateCodec {
    static CODEC: std::sync::OnceLock<RequestStateCodec> = std::sync::OnceLock::new();
    CODEC.get_or_init(|| {
        let mut key = [0u8; 32];
        getrandom::getrandom(&mut key).expect("the OS CSPRNG");
        RequestStateCodec::try_new(key.to_vec()).expect("a 32-byte key")
    })
}

impl Rounds {
    fn new(
        tool: &'static str,
        ctx: &RequestContext<RoleServer>,
        InputResponses(responses): InputResponses,
        RequestState(state): RequestState,
    ) -> Result<Self, ErrorData> {
        let mut known = match state {
            Some(s) => codec()
                .open_json_with::<serde_json::Map<String, serde_json::Value>>(&s, tool.as_bytes())
                .map_err(|e| ErrorData::invalid_params(format!("requestState rejected: {e}"), None))?,
            None => serde_json::Map::new(),
        };
        for (k, v) in responses.unwrap_or_default() {
            known.entry(k).or_insert(v);
        }
        let capabilities = ctx
            .peer
            .peer_info()
            .and_then(|i| serde_json::to_value(&i.capabilities).ok())
            .unwrap_or_else(|| json!({}));
        Ok(Rounds { known, used: serde_json::Map::new(), capabilities, tool })
    }

    /// The answers to `asks` (`(key, {method, params})`), or the result that
    /// asks for what is missing.
    fn ask(
        &mut self,
        asks: &[(&str, serde_json::Value)],
    ) -> Result<Result<serde_json::Map<String, serde_json::Value>, InputRequiredResult>, ErrorData> {
        let mut missing_caps = serde_json::Map::new();
        for (_, a) in asks {
            let cap = match a["method"].as_str() {
                Some("elicitation/create") => "elicitation",
                Some("sampling/createMessage") => "sampling",
                _ => "roots",
            };
            if self.capabilities.get(cap).is_none_or(serde_json::Value::is_null) {
                missing_caps.insert(cap.into(), json!({}));
            }
        }
        if !missing_caps.is_empty() {
            return Err(ErrorData::new(
                rmcp::model::ErrorCode(-32021),
                "the client did not declare the capabilities these inputs need",
                Some(json!({"requiredCapabilities": missing_caps})),
            ));
        }
        let mut have = serde_json::Map::new();
        let mut missing = std::collections::BTreeMap::new();
        for (key, a) in asks {
            match self.known.get(*key) {
                Some(v) => {
                    let ok = match a["method"].as_str() {
                        Some("elicitation/create") => {
                            matches!(v["action"].as_str(), Some("accept" | "decline" | "cancel"))
                        }
                        Some("sampling/createMessage") => v["role"].is_string() && v.get("content").is_some(),
                        _ => v["roots"].is_array(),
                    };
                    if !ok {
                        return Err(ErrorData::invalid_params(
                            format!("inputResponses[{key:?}] is not a result of {}", a["method"]),
                            None,
                        ));
                    }
                    have.insert((*key).to_owned(), v.clone());
                }
                None => drop(missing.insert((*key).to_owned(), from_json::<InputRequest>(a.clone())?)),
            }
        }
        self.used.extend(have.clone());
        if missing.is_empty() {
            return Ok(Ok(have));
        }
        let state = codec()
            .seal_json_with(&self.used, &SealOptions::new().associated_data(self.tool.as_bytes()))
            .map_err(internal)?;
        Ok(Err(InputRequiredResult::new(Some(missing), Some(state))))
    }
}

fn elicit_input(message: &str, field: &str, ty: &str) -> serde_json::Value {
    json!({"method": "elicitation/create", "params": {"mode": "form", "message": message, "requestedSchema": {
        "type": "object", "properties": {field: {"type": ty}}, "required": [field]}}})
}

fn sample_input(question: &str) -> serde_json::Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": question}}], "maxTokens": 100}})
}

fn roots_input() -> serde_json::Value {
    json!({"method": "roots/list"})
}

fn root_uris(r: &serde_json::Value) -> String {
    let uris: Vec<&str> =
        r["roots"].as_array().into_iter().flatten().filter_map(|x| x["uri"].as_str()).collect();
    uris.join(", ")
}

/// Sends an elicitation and returns the client's answer as JSON.
async fn elicit(
    ctx: &RequestContext<RoleServer>,
    params: ElicitRequestParams,
) -> Result<serde_json::Value, ErrorData> {
    let r = ctx.peer.create_elicitation(params).await.map_err(internal)?;
    serde_json::to_value(&r).map_err(internal)
}

#[prompt_router]
impl Conformance {
    #[prompt(description = "A simple prompt")]
    async fn test_simple_prompt(&self) -> Vec<PromptMessage> {
        vec![PromptMessage::new_text(Role::User, "This is a simple prompt for testing.")]
    }

    #[prompt(description = "A prompt with arguments")]
    async fn test_prompt_with_arguments(&self, Parameters(a): Parameters<PromptArgs>) -> Vec<PromptMessage> {
        vec![PromptMessage::new_text(
            Role::User,
            format!("Prompt with arguments: arg1='{}', arg2='{}'", a.arg1, a.arg2),
        )]
    }

    #[prompt(description = "A prompt with an embedded resource")]
    async fn test_prompt_with_embedded_resource(
        &self,
        Parameters(a): Parameters<EmbedArgs>,
    ) -> Vec<PromptMessage> {
        vec![
            PromptMessage::new_resource(
                Role::User,
                a.resource_uri,
                Some("text/plain".to_owned()),
                Some("Embedded resource content for testing.".to_owned()),
                None,
                None,
                None,
            ),
            PromptMessage::new_text(Role::User, "Please process the embedded resource above."),
        ]
    }

    #[prompt(description = "A prompt that asks the user for its context first (user_context)")]
    async fn test_input_required_result_prompt(&self) -> Result<Vec<PromptMessage>, ErrorData> {
        // Listed here; served by `get_prompt` below, which reads the retry's
        // inputResponses and requestState (a prompt's context has neither).
        Err(internal("test_input_required_result_prompt is served by get_prompt"))
    }

    #[prompt(description = "A prompt with an image")]
    async fn test_prompt_with_image(&self) -> Result<Vec<PromptMessage>, ErrorData> {
        Ok(vec![
            from_json(
                json!({"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}}),
            )?,
            PromptMessage::new_text(Role::User, "Please analyze the image above."),
        ])
    }
}

/// The resource at `uri`, or the not-found error `resources/read` and
/// `resources/subscribe` both answer.
fn read(uri: &str) -> Result<ResourceContents, ErrorData> {
    let not_found =
        || ErrorData::resource_not_found(format!("resource not found: {uri}"), Some(json!({"uri": uri})));
    Ok(match uri {
        "test://static-text" => {
            ResourceContents::text("This is the content of the static text resource.", uri)
        }
        "test://static-binary" => ResourceContents::blob(PNG, uri).with_mime_type("image/png"),
        "test://watched-resource" => ResourceContents::text("Watched resource content.", uri),
        _ => {
            let id = uri
                .strip_prefix("test://template/")
                .and_then(|r| r.strip_suffix("/data"))
                .filter(|id| !id.is_empty() && !id.contains('/'))
                .ok_or_else(not_found)?;
            let body = json!({"id": id, "templateTest": true, "data": format!("Data for ID: {id}")});
            ResourceContents::text(body.to_string(), uri).with_mime_type("application/json")
        }
    })
}

#[tool_handler(router = self.tool_router)]
// `get_prompt` and `list_prompts` by hand, not `#[prompt_handler]` (whose
// `get_prompt` would replace this one): see `get_prompt`.
impl ServerHandler for Conformance {
    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListPromptsResult, ErrorData> {
        let modern = context.protocol_version().is_some_and(|v| v.as_str() >= "2026-07-28");
        Ok(rmcp::model::ListPromptsResult {
            result_type: Some(rmcp::model::ResultType::COMPLETE),
            prompts: self.prompt_router.list_all(),
            meta: None,
            next_cursor: None,
            ttl_ms: modern.then_some(0),
            cache_scope: modern.then_some(rmcp::model::CacheScope::Public),
        })
    }

    /// The router's, but for `test_input_required_result_prompt`, which asks
    /// the user for its context first (user_context) by an input-required
    /// result: a prompt's router context has no `inputResponses`.
    async fn get_prompt(
        &self,
        request: rmcp::model::GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetPromptResponse, ErrorData> {
        if request.name == "test_input_required_result_prompt" {
            let responses = InputResponses(request.input_responses);
            let state = RequestState(request.request_state);
            let mut r = Rounds::new("test_input_required_result_prompt", &context, responses, state)?;
            let a = match r.ask(&[(
                "user_context",
                elicit_input("What context should the prompt use?", "context", "string"),
            )])? {
                Ok(a) => a,
                Err(more) => return Ok(rmcp::model::GetPromptResponse::InputRequired(more)),
            };
            let ctx = a["user_context"]["content"]["context"].as_str().unwrap_or_default();
            let msg = PromptMessage::new_text(Role::User, format!("Answer in this context: {ctx}"));
            return Ok(rmcp::model::GetPromptResponse::Complete(rmcp::model::GetPromptResult::new(vec![
                msg,
            ])));
        }
        let ctx =
            rmcp::handler::server::prompt::PromptContext::new(self, request.name, request.arguments, context);
        self.prompt_router.get_prompt(ctx).await
    }

    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_logging()
                .enable_completions()
                .enable_prompts()
                .enable_resources()
                .enable_resources_subscribe()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new("rmcp-conformance", env!("CARGO_PKG_VERSION")))
    }

    async fn list_resources(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let r = |uri: &str, name: &str, description: &str, mime: &str| {
            Resource::new(uri, name).with_description(description).with_mime_type(mime)
        };
        Ok(ListResourcesResult::with_all_items(vec![
            r("test://static-text", "static-text", "A static text resource", "text/plain"),
            r("test://static-binary", "static-binary", "A static binary resource", "image/png"),
            r("test://watched-resource", "watched-resource", "A resource to subscribe to", "text/plain"),
        ]))
    }

    async fn list_resource_templates(
        &self,
        _: Option<PaginatedRequestParams>,
        _: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![ResourceTemplate::new(
            "test://template/{id}/data",
            "template",
        )
        .with_description("A templated resource")
        .with_mime_type("application/json")]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        Ok(ReadResourceResult::new(vec![read(&request.uri)?]).into())
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        read(&request.uri).map(drop)
    }

    async fn unsubscribe(
        &self,
        _: UnsubscribeRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn complete(
        &self,
        _: CompleteRequestParams,
        _: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let values = CompletionInfo::with_all_values(vec!["test".to_owned(), "testing".to_owned()])
            .map_err(internal)?;
        Ok(CompleteResult::new(values))
    }
}
