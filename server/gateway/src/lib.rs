//! # gapless-gateway: any MCP server behind gapless's endpoint
//!
//! The gateway puts an unchanged MCP server (TypeScript, Python, Go, rmcp,
//! anything that speaks Streamable HTTP) behind gapless-server's endpoint.
//! Clients get gapless's guarantee: every resume answered with every event
//! after the cursor, or refused explicitly with the numbers; the upstream
//! gets an ordinary MCP client.
//!
//! A proxy is two half-protocols and a pump between them:
//! - the client-facing half is gapless-server, through its public API only
//!   ([`GatewayHost`] is its `Host`);
//! - the upstream half is an MCP client ([`upstream`]: Streamable HTTP, or a
//!   stdio server's child process, one per session, [`StdioHost`]);
//! - the pump (`pump.rs`) owns the correlation of requests, their answers,
//!   and the upstream's server → client requests.
//!
//! ```no_run
//! use gapless_gateway::{upstream::Upstream, GatewayHost};
//! use gapless_server::McpServer;
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let upstream = Upstream::new("http://127.0.0.1:3000/mcp")?;
//! let server = McpServer::builder(GatewayHost::new(upstream)).build()?;
//! let app = server.router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8090").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! What it promises and what it cannot is `docs/SPEC.md` §10.
#![deny(missing_docs)]

mod bridge;
mod front;
mod host;
mod pump;
mod sync;
pub mod upstream;

pub use bridge::StdioHost;
pub use front::{bearer_identity, metadata_router};
pub use host::GatewayHost;
