//! An application that embeds gapless-server: one tool, `hello`, that logs
//! on its own stream and then answers, mounted in an axum app beside routes
//! of its own. The README's "Embed it in your axum app" runs it:
//!
//! ```sh
//! cargo run -p gapless-server --example hello -- 127.0.0.1:8080
//! ```
//!
//! The endpoint is `http://127.0.0.1:8080/api/mcp`; `/health` answers `ok`.

use axum::{routing::get, Router};
use futures_util::future::BoxFuture;
use gapless_server::{Host, McpServer, RequestContext, RpcError};
use serde_json::{json, Value};

/// The application: what a session's requests do.
struct Hello;

impl Host for Hello {
    fn capabilities(&self) -> Value {
        json!({"tools": {}, "logging": {}})
    }

    fn handle(
        &self,
        method: String,
        _params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>> {
        Box::pin(async move {
            match method.as_str() {
                "tools/list" => Ok(json!({"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]})),
                "tools/call" => {
                    // An event of the call's own stream: a client that resumes
                    // the stream gets it again, or a refusal that says it cannot.
                    let _ = ctx.notify("notifications/message", json!({"level": "info", "data": "hi"})).await;
                    Ok(json!({"content": [{"type": "text", "text": "hello"}]}))
                }
                _ => Err(RpcError::method_not_found(&method)),
            }
        })
    }
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let bind = std::env::args().nth(1).unwrap_or_else(|| "127.0.0.1:8080".to_owned());
    let mcp = McpServer::builder(Hello).path("/mcp").build()?;
    let app = Router::new()
        .route("/health", get(|| async { "ok" }))
        .nest("/api", mcp.router()) // the endpoint is /api/mcp, its socket /api/mcp/ws
        .fallback(|| async { "not here" });
    let listener = tokio::net::TcpListener::bind(&bind).await?;
    eprintln!("hello on gapless: http://{}/api/mcp", listener.local_addr()?);
    axum::serve(listener, app).await?;
    Ok(())
}
