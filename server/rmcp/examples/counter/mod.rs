//! A counter server written as rmcp's own examples write one
//! (`#[tool_router]`, `#[tool_handler]`), plus `emit_events`, the demo
//! server's tool with the same contract (`docs/SPEC.md` §5.1). Nothing in it
//! knows about gapless: `rmcp_counter.rs` serves it, the bundled binary
//! serves it with `--host rmcp-counter` (`server/bin/src/lib.rs` includes
//! this file), and the tests of `gapless-rmcp` drive it.

#![allow(deprecated)] // rmcp 3.11 marks the logging API deprecated (SEP-2577); it is the API.
#![allow(dead_code)] // Each user of the module uses a part of it.

use rmcp::handler::server::{router::tool::ToolRouter, wrapper::Parameters};
use rmcp::model::{
    CallToolResult, ContentBlock, LoggingLevel, LoggingMessageNotificationParam, ProgressNotificationParam,
    ServerCapabilities, ServerConfig,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{schemars, tool, tool_handler, tool_router, ErrorData, Peer, RoleServer, ServerHandler};
use serde::Deserialize;
use std::sync::{Arc, Mutex};
use std::time::Duration;

const MAX_COUNT: u64 = 100_000;
const MAX_PAYLOAD: usize = 65_536;
const MAX_INTERVAL_MS: u64 = 10_000;

fn default_payload() -> usize {
    16
}

/// The arguments of `emit_events`.
#[derive(Debug, Deserialize, schemars::JsonSchema)]
pub(crate) struct EmitArgs {
    /// Number of notifications to send (≤ 100 000).
    pub(crate) count: u64,
    /// Sleep between notifications, in milliseconds (≤ 10 000).
    #[serde(default)]
    pub(crate) interval_ms: u64,
    /// Length of the `pad` string in each notification (≤ 65 536).
    #[serde(default = "default_payload")]
    pub(crate) payload_bytes: usize,
    /// "request" (default): on the call's own stream; "standalone": on the
    /// session's GET stream.
    #[serde(default)]
    pub(crate) target: Option<String>,
}

/// The counter: one per session (the factory makes one per session).
#[derive(Clone)]
pub(crate) struct Counter {
    counter: Arc<Mutex<i64>>,
    /// The session's peer, from `on_initialized`: what `emit_events` sends
    /// on when its target is "standalone".
    session: Arc<Mutex<Option<Peer<RoleServer>>>>,
    tool_router: ToolRouter<Self>,
}

impl Default for Counter {
    fn default() -> Self {
        Self::new()
    }
}

#[tool_router]
impl Counter {
    /// A counter at 0.
    pub(crate) fn new() -> Self {
        Self { counter: Arc::default(), session: Arc::default(), tool_router: Self::tool_router() }
    }

    #[tool(description = "Increment the counter by 1")]
    async fn increment(&self) -> Result<CallToolResult, ErrorData> {
        let mut c = self.counter.lock().unwrap();
        *c += 1;
        Ok(CallToolResult::success(vec![ContentBlock::text(c.to_string())]))
    }

    #[tool(description = "Decrement the counter by 1")]
    async fn decrement(&self) -> Result<CallToolResult, ErrorData> {
        let mut c = self.counter.lock().unwrap();
        *c -= 1;
        Ok(CallToolResult::success(vec![ContentBlock::text(c.to_string())]))
    }

    #[tool(description = "Get the current counter value")]
    async fn get_value(&self) -> Result<CallToolResult, ErrorData> {
        Ok(CallToolResult::success(vec![ContentBlock::text(self.counter.lock().unwrap().to_string())]))
    }

    #[tool(
        description = "Send `count` notifications/message notifications (data.seq = 1..count), reporting progress, then return"
    )]
    async fn emit_events(
        &self,
        Parameters(args): Parameters<EmitArgs>,
        ctx: RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        if args.count > MAX_COUNT {
            return Err(ErrorData::invalid_params("count must be <= 100000", None));
        }
        if args.payload_bytes > MAX_PAYLOAD {
            return Err(ErrorData::invalid_params("payload_bytes must be <= 65536", None));
        }
        if args.interval_ms > MAX_INTERVAL_MS {
            return Err(ErrorData::invalid_params("interval_ms must be <= 10000", None));
        }
        let peer = match args.target.as_deref() {
            None | Some("request") => ctx.peer.clone(),
            Some("standalone") => session_peer(&self.session).await.ok_or_else(|| {
                ErrorData::invalid_params("the session has no peer yet (no notifications/initialized)", None)
            })?,
            Some(_) => {
                return Err(ErrorData::invalid_params("target must be \"request\" or \"standalone\"", None))
            }
        };
        let progress = ctx.meta.get_progress_token();
        let pad = "x".repeat(args.payload_bytes);
        for i in 1..=args.count {
            let data = serde_json::json!({"seq": i, "pad": pad});
            peer.notify_logging_message(
                LoggingMessageNotificationParam::new(LoggingLevel::Info, data).with_logger("emit"),
            )
            .await
            .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            if let Some(token) = &progress {
                let mut p = ProgressNotificationParam::new(token.clone(), i as f64);
                p.total = Some(args.count as f64);
                ctx.peer
                    .notify_progress(p)
                    .await
                    .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            }
            if args.interval_ms > 0 && i < args.count {
                tokio::time::sleep(Duration::from_millis(args.interval_ms)).await;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("emitted {}", args.count))]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Counter {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
            .with_server_info(rmcp::model::Implementation::new("rmcp-counter", env!("CARGO_PKG_VERSION")))
            .with_instructions(
                "A counter: increment, decrement, get_value; emit_events streams notifications.",
            )
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        *self.session.lock().unwrap() = Some(context.peer);
    }
}

/// The session's peer, once `on_initialized` has stored it. rmcp runs each
/// notification's handler in a task of its own, so a request that follows
/// `notifications/initialized` at once may start before it finished: wait
/// for it a little (2 s at most).
async fn session_peer(slot: &Mutex<Option<Peer<RoleServer>>>) -> Option<Peer<RoleServer>> {
    for _ in 0..200 {
        if let Some(p) = slot.lock().unwrap().clone() {
            return Some(p);
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    None
}
