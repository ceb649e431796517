//! `rmcp-peer`: the server a Rust user would pick instead of gapless-server,
//! for the end-to-end benchmark (`gapless-load`).
//!
//! It is rmcp 3.x's stock Streamable HTTP server — `StreamableHttpService`
//! (its tower service, mounted in axum) with the default
//! `LocalSessionManager` and `StreamableHttpServerConfig::default()` — and one
//! tool, `emit_events`, implemented as closely to gapless-server's (`docs/SPEC.md` §5.1)
//! as rmcp allows:
//!
//! - arguments `{count, interval_ms = 0, payload_bytes = 16, target}` with the
//!   same bounds (JSON-RPC invalid-params error beyond);
//! - `count` `notifications/message` notifications with
//!   `params: {level: "info", logger: "emit", data: {seq: i, pad: "x" * payload_bytes}}`,
//!   sent through the peer's logging API (`Peer::notify_logging_message`);
//! - result `{content: [{type: "text", text: "emitted <count>"}]}`.
//!
//! Differences rmcp imposes (not choices of this peer):
//! - `target` is accepted but cannot be honoured: rmcp routes every
//!   `notifications/message` to the session's standalone (GET) stream, so both
//!   targets deliver there. The load tool reads the GET stream for both servers.
//! - Resumption: `LocalSessionManager` has no event store by default (rmcp
//!   ships no `EventStore` implementation). What it has instead is a per-stream
//!   in-memory cache of the last `SessionConfig::channel_capacity` (16) events;
//!   a `Last-Event-ID` resume replays from that cache only.
//! - No pacing: `notify_logging_message` waits on rmcp's internal bounded
//!   channels (capacity 16) — that is rmcp's backpressure.

#![allow(deprecated)] // rmcp 3 marks the logging API deprecated (SEP-2577); it is the API.

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use rmcp::{
    handler::server::{router::tool::ToolRouter, wrapper::Parameters},
    model::{
        CallToolResult, ContentBlock, LoggingLevel, LoggingMessageNotificationParam, ServerCapabilities,
        ServerConfig,
    },
    schemars, tool, tool_handler, tool_router,
    transport::streamable_http_server::{
        session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
    },
    ErrorData, Peer, RoleServer, ServerHandler,
};
use serde::Deserialize;

const MAX_COUNT: u64 = 100_000;
const MAX_PAYLOAD: usize = 65_536;
const MAX_INTERVAL_MS: u64 = 10_000;

fn default_payload() -> usize {
    16
}

#[derive(Debug, Deserialize, schemars::JsonSchema)]
struct EmitArgs {
    /// Number of notifications to send (≤ 100 000).
    count: u64,
    /// Sleep between notifications, in milliseconds (≤ 10 000).
    #[serde(default)]
    interval_ms: u64,
    /// Length of the `pad` string in each notification (≤ 65 536).
    #[serde(default = "default_payload")]
    payload_bytes: usize,
    /// "request" or "standalone"; rmcp delivers log notifications on the
    /// standalone stream either way.
    #[serde(default)]
    target: Option<String>,
}

#[derive(Debug, Clone)]
struct EmitServer {
    tool_router: ToolRouter<Self>,
}

#[tool_router]
impl EmitServer {
    #[tool(description = "Send `count` notifications/message notifications, then return")]
    async fn emit_events(
        &self,
        Parameters(args): Parameters<EmitArgs>,
        client: Peer<RoleServer>,
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
        match args.target.as_deref() {
            None | Some("request") | Some("standalone") => {}
            Some(_) => {
                return Err(ErrorData::invalid_params("target must be \"request\" or \"standalone\"", None))
            }
        }
        let pad = "x".repeat(args.payload_bytes);
        for i in 1..=args.count {
            let data = serde_json::json!({"seq": i, "pad": pad});
            client
                .notify_logging_message(
                    LoggingMessageNotificationParam::new(LoggingLevel::Info, data).with_logger("emit"),
                )
                .await
                .map_err(|e| ErrorData::internal_error(e.to_string(), None))?;
            if args.interval_ms > 0 && i < args.count {
                tokio::time::sleep(Duration::from_millis(args.interval_ms)).await;
            }
        }
        Ok(CallToolResult::success(vec![ContentBlock::text(format!("emitted {}", args.count))]))
    }
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for EmitServer {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(ServerCapabilities::builder().enable_tools().enable_logging().build())
    }
}

fn usage() -> ! {
    eprintln!("usage: rmcp-peer [--bind 127.0.0.1:8090] [--path /mcp]");
    std::process::exit(2);
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut bind: SocketAddr = "127.0.0.1:8090".parse().expect("addr");
    let mut path = "/mcp".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bind" => bind = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage()),
            "--path" => path = args.next().unwrap_or_else(|| usage()),
            "-h" | "--help" => usage(),
            _ => usage(),
        }
    }
    // The defaults a Rust user gets: LocalSessionManager::default() (no event
    // store, 16-event caches) and StreamableHttpServerConfig::default().
    let service: StreamableHttpService<EmitServer, LocalSessionManager> = StreamableHttpService::new(
        || Ok(EmitServer { tool_router: EmitServer::tool_router() }),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service(&path, service);
    let listener = tokio::net::TcpListener::bind(bind).await?;
    eprintln!("rmcp-peer listening on {} path {}", listener.local_addr()?, path);
    axum::serve(listener, router).await
}
