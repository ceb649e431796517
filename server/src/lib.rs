//! # gapless-server: Streamable HTTP for MCP on the gapless engine
//!
//! A transport library: mount [`McpServer::router`] in your axum app and
//! plug your application in through the [`Host`] trait. Every event a
//! session sends goes through its gapless ring, so a client that resumes
//! with `Last-Event-ID` gets every event after its cursor, in order, or an
//! explicit 4xx that says what is missing (SPEC §4.2), never a silent `200`.
//!
//! ```no_run
//! use gapless_server::{demo::DemoHost, McpServer, ServerConfig};
//! # async fn run() -> std::io::Result<()> {
//! let server = McpServer::new(DemoHost::default(), ServerConfig::default(), "/mcp");
//! let app = server.router();
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await
//! # }
//! ```
//!
//! Delivery is recorded when hyper accepts an SSE chunk for writing (see
//! `sse.rs`), per stream, which is what the decision table checks cursors
//! against.

pub mod config;
pub mod demo;
pub mod error;
pub mod host;
pub mod jsonrpc;
mod routes;
mod sse;
mod state;
pub mod ws;

pub use config::{ServerConfig, SUPPORTED_VERSIONS};
pub use error::ApiError;
pub use host::{ClientRequestError, Host, LogLevel, RequestContext, SendError, SessionHandle};
pub use jsonrpc::RpcError;
pub use state::IdentityFn;

use axum::routing::any;
use axum::Router;
use gapless::Hub;
use state::AppState;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// A configured transport: hub, application, limits.
#[derive(Clone)]
pub struct McpServer {
    state: Arc<AppState>,
}

impl std::fmt::Debug for McpServer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServer").field("path", &self.state.path).field("hub", &self.state.hub).finish()
    }
}

impl McpServer {
    /// A server for `host` at endpoint `path` (e.g. `/mcp`).
    ///
    /// # Panics
    /// If the configuration's ring bounds are invalid.
    pub fn new(host: impl Host, config: ServerConfig, path: &str) -> Self {
        Self::with_identity(host, config, path, None)
    }

    /// Like [`McpServer::new`], binding each session to the caller identity
    /// `identity` extracts from the request headers: a session created under
    /// one identity answers 404 to requests carrying another.
    pub fn with_identity(
        host: impl Host,
        config: ServerConfig,
        path: &str,
        identity: Option<IdentityFn>,
    ) -> Self {
        let hub = Arc::new(Hub::new(config.hub).expect("valid ring configuration"));
        let path = if path.starts_with('/') { path.to_owned() } else { format!("/{path}") };
        McpServer {
            state: Arc::new(AppState {
                hub,
                host: Arc::new(host),
                config: Arc::new(config),
                identity,
                conns: Default::default(),
                shutdown: CancellationToken::new(),
                path,
            }),
        }
    }

    /// The session hub (for tests and applications that publish outside a
    /// request).
    pub fn hub(&self) -> &Arc<Hub> {
        &self.state.hub
    }

    /// The axum router serving the endpoint.
    pub fn router(&self) -> Router {
        let p = self.state.path.clone();
        Router::new()
            .route(&p, any(routes::endpoint))
            .route(&format!("{p}/session/{{id}}/upgrade"), any(ws::upgrade))
            .route(&format!("{p}/ws"), any(ws::socket))
            .fallback(routes::not_found)
            .with_state(Arc::clone(&self.state))
    }

    /// Ends every open stream (call on shutdown, before the server drains).
    pub fn shutdown(&self) {
        self.state.shutdown.cancel();
    }

    /// Runs idle-session expiry every `period` until shutdown.
    pub fn spawn_sweeper(&self, period: Duration) -> tokio::task::JoinHandle<()> {
        let state = Arc::clone(&self.state);
        tokio::spawn(async move {
            let mut t = tokio::time::interval(period);
            loop {
                tokio::select! {
                    _ = t.tick() => state.sweep(),
                    _ = state.shutdown.cancelled() => return,
                }
            }
        })
    }
}
