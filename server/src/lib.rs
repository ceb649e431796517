//! # gapless-server: Streamable HTTP for MCP on the gapless engine
//!
//! A transport library: build an [`McpServer`] around your application (a
//! [`Host`]), and merge or nest its [`McpServer::router`] into your axum
//! app. Every event a session sends goes through its gapless ring, so a
//! client that resumes with `Last-Event-ID` gets every event after its
//! cursor, in order, or an explicit 4xx that says what is missing
//! (`docs/SPEC.md` §4.2), never a silent `200`.
//!
//! ```no_run
//! use axum::{routing::get, Router};
//! use futures_util::future::BoxFuture;
//! use gapless_server::{Host, McpServer, RequestContext, RpcError, ServerConfig};
//! use serde_json::{json, Value};
//!
//! /// One tool, `hello`, that logs on its own stream and then answers.
//! struct Hello;
//!
//! impl Host for Hello {
//!     fn capabilities(&self) -> Value {
//!         json!({"tools": {}, "logging": {}})
//!     }
//!
//!     fn handle(&self, method: String, _params: Value, ctx: RequestContext) -> BoxFuture<'static, Result<Value, RpcError>> {
//!         Box::pin(async move {
//!             match method.as_str() {
//!                 "tools/list" => Ok(json!({"tools": [{"name": "hello", "inputSchema": {"type": "object"}}]})),
//!                 "tools/call" => {
//!                     let _ = ctx.notify("notifications/message", json!({"level": "info", "data": "hi"})).await;
//!                     Ok(json!({"content": [{"type": "text", "text": "hello"}]}))
//!                 }
//!                 _ => Err(RpcError::method_not_found(&method)),
//!             }
//!         })
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mcp = McpServer::builder(Hello).config(ServerConfig::default()).path("/mcp").build()?;
//! let app = Router::new()
//!     .route("/health", get(|| async { "ok" }))
//!     .nest("/api", mcp.router()) // the endpoint is /api/mcp, its socket /api/mcp/ws
//!     .fallback(|| async { "not here" }); // the app's own fallback merges
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! The router has no fallback of its own, so it merges into an app that has
//! one, and it works under `nest`: the WebSocket path an upgrade advertises
//! is the one the request came in on. Its checks (method, header size,
//! `Origin`/`Host`, content type, `Accept`, body limit, protocol version)
//! run once, as a layer on each of its routes, before any handler.
//! The caller's identity, which sessions are bound to, comes from a
//! [`CallerIdentity`] request extension that your auth layer sets, or from
//! a function of the request head ([`McpServerBuilder::identity`]).
//!
//! Delivery is recorded when hyper accepts an SSE chunk for writing, per
//! stream, which is what the decision table checks cursors against.
//!
//! The bundled binary (crate `gapless-server-bin`: the demo tools, the
//! conformance fixtures and the command line) is one such application.
//!
//! # How the crate is laid out
//!
//! Each folder of `src/` is a layer, and a layer imports only the layers
//! below it (`tests/architecture.rs` checks it; `ARCHITECTURE.md` has the
//! table):
//!
//! | rank | layer | what it holds |
//! |---|---|---|
//! | 0 | `vocab/` | JSON-RPC shapes, configuration, the error types, identity, the sealed `requestState`, log levels, announced changes, header names, the lock helper, the session tag of logs |
//! | 1 | `telemetry/` | the counters |
//! | 2 | `backend/` | where sessions and tasks live: in process, or a cluster's Redis store; the one place that asks which |
//! | 3 | `session/` | a 2025-era session's transport state, and the table of them |
//! | 4 | `tasks/` | the tasks extension |
//! | 5 | `sessionless/` | MCP 2026-07-28 without a session: era, declarations, the exchange with a response |
//! | 6 | `host/` | the application seam: [`Host`], [`RequestContext`], [`SessionHandle`] |
//! | 7 | `protocol/` | the JSON-RPC dispatch of both eras; every method the transport answers itself |
//! | 8 | `app.rs` | the composition root: what the routes share |
//! | 9, 10 | `operator/`, `http/` | the operator's pages; the routes |
//! | 11, 12 | `serve.rs`, `lib.rs` | the accept loop; this builder |
//!
//! A 2025-era `tools/call` that streams, followed down the layers:
//! `http/guard.rs` checks the request and resolves the caller;
//! `http/endpoint/mod.rs` reads the body and sees a session's message;
//! `http/endpoint/post_2025.rs` finds the session (`session/table.rs`, which
//! asks the backend to attach it when this node has none) and opens the
//! request's stream (`backend/store.rs`: on the ring, or in the store);
//! `protocol/dispatch_2025.rs` primes the stream and runs the application's
//! [`Host::handle`] with a [`RequestContext`], whose notifications and
//! response are published on the stream (`session/state.rs`, then
//! `backend/store.rs`, then the engine's `Session::publish`); the response
//! is `http/sse.rs`'s body, reading the engine's subscription and recording
//! delivery as hyper takes each chunk. A resume with `Last-Event-ID` goes
//! from `http/endpoint/mod.rs` to `session/table.rs`, where the backend
//! decides it (`backend/local.rs`: the engine's decision table;
//! `backend/cluster/resume.rs`: the store's) and the same body replays and
//! goes live.
#![deny(missing_docs)]

mod app;
mod backend;
pub mod host;
mod http;
mod operator;
mod protocol;
mod serve;
mod session;
mod sessionless;
pub mod tasks;
mod telemetry;
mod vocab;

pub use host::{
    ClientRequestError, Host, InitializeError, LogLevel, RequestContext, SendError, SessionHandle, ValueError,
};
pub use operator::access::ObserveAccess;
pub use serve::ServeConfig;
pub use vocab::change::Change;
pub use vocab::config::{self, ServerConfig, LEGACY_VERSION, MODERN_VERSIONS, SUPPORTED_VERSIONS};
pub use vocab::error::{self, ApiError};
pub use vocab::identity::{CallerIdentity, IdentityFn};
pub use vocab::jsonrpc::{self, RpcError};

pub use app::BuildError;

use app::AppState;
use axum::Router;
use gapless::Hub;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// A configured transport: hub, application, limits. Clone it freely; the
/// clones share the sessions.
#[derive(Clone)]
pub struct McpServer {
    state: Arc<AppState>,
    /// Every metric, with the sessions read at scrape time.
    registry: Arc<prometheus_client::registry::Registry>,
}

impl fmt::Debug for McpServer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServer")
            .field("path", &self.state.path)
            .field("hub", &self.state.sessions.shared.hub)
            .finish()
    }
}

/// Builds an [`McpServer`] ([`McpServer::builder`]).
pub struct McpServerBuilder {
    host: Arc<dyn Host>,
    config: ServerConfig,
    path: String,
    identity: Option<IdentityFn>,
    store: Option<(gapless_redis::RedisStore, String)>,
}

impl fmt::Debug for McpServerBuilder {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("McpServerBuilder").field("config", &self.config).field("path", &self.path).finish()
    }
}

impl McpServerBuilder {
    /// The limits (default: [`ServerConfig::default`]).
    pub fn config(mut self, config: ServerConfig) -> Self {
        self.config = config;
        self
    }

    /// The endpoint's path inside the router (default `/mcp`). `/` serves
    /// the endpoint at the router's root, for an application that nests the
    /// router at the endpoint's own path (`nest("/mcp", router)`).
    pub fn path(mut self, path: impl Into<String>) -> Self {
        self.path = path.into();
        self
    }

    /// Keeps sessions in a cluster's Redis store instead of this process
    /// (`docs/SPEC.md` §8): any request of a session may then land on any
    /// node on the same store. `url` is the store's Redis (the node
    /// subscribes there to the store's announcements). [`McpServerBuilder::build`]
    /// must then run inside a Tokio runtime. The store's per-session bounds
    /// (its `ring`) are the sessions' windows; the hub's ring is each
    /// node's local replica.
    pub fn store(mut self, store: gapless_redis::RedisStore, url: &str) -> Self {
        self.store = Some((store, url.to_owned()));
        self
    }

    /// Derives the caller identity from the request head when the request
    /// carries no [`CallerIdentity`] extension (e.g. from a header).
    pub fn identity(
        mut self,
        f: impl Fn(&axum::http::request::Parts) -> Option<String> + Send + Sync + 'static,
    ) -> Self {
        self.identity = Some(Arc::new(f));
        self
    }

    /// The server, or why the configuration is refused.
    pub fn build(self) -> Result<McpServer, BuildError> {
        let state = app::build(self.host, self.config, &self.path, self.identity, self.store)?;
        let registry = Arc::new(operator::metrics::registry(&state.metrics, Arc::downgrade(&state)));
        let tasks = Arc::clone(&state.protocol.tasks);
        state.sessions.start(Box::new(move |id: &str, ended: bool| tasks.changed_elsewhere(id, ended)));
        Ok(McpServer { state, registry })
    }
}

impl McpServer {
    /// A builder for a server around `host`.
    pub fn builder(host: impl Host) -> McpServerBuilder {
        McpServerBuilder {
            host: Arc::new(host),
            config: ServerConfig::default(),
            path: "/mcp".to_owned(),
            identity: None,
            store: None,
        }
    }

    /// The session hub (for tests and applications that publish outside a
    /// request).
    pub fn hub(&self) -> &Arc<Hub> {
        &self.state.sessions.shared.hub
    }

    /// The axum router serving the endpoint: `P`, `P/session/{id}/upgrade`
    /// and `P/ws`, each behind the request checks. It has no fallback.
    pub fn router(&self) -> Router {
        http::router(&self.state)
    }

    /// Counts a connection refused before any request was read
    /// (`too_many_connections`).
    pub(crate) fn refused_connection(&self) {
        self.state.metrics.refusal(
            &ApiError::new(gapless::ErrorKind::TooManyConnections, "too many open connections"),
            None,
        );
    }

    /// The operator's metrics in the OpenMetrics text format
    /// (`docs/SPEC.md` §9): what [`McpServer::metrics_router`] serves.
    pub fn metrics_text(&self) -> String {
        operator::metrics::text(&self.registry)
    }

    /// A router serving the metrics at `path` (`GET`), to whom `access`
    /// admits: merge it into the application's router, or serve it on a
    /// listener of its own. The peer's address comes from the
    /// `ConnectInfo<SocketAddr>` request extension ([`McpServer::serve`]
    /// sets it); without it, [`ObserveAccess::Loopback`] refuses.
    pub fn metrics_router(&self, path: &str, access: ObserveAccess) -> Router {
        Router::new()
            .route(path, axum::routing::any(operator::metrics::serve_metrics))
            .with_state((Arc::clone(&self.registry), Arc::new(access)))
    }

    /// A router serving the live status page at `path` and its data at
    /// `path/data.json` (`docs/SPEC.md` §9.3), to whom `access` admits. With
    /// [`ObserveAccess::Token`] the page itself, which is static and holds
    /// no figure, is served to anyone, and reads its data with the token
    /// given in its URL's fragment (`#token=…`, which a browser never sends).
    pub fn status_router(&self, path: &str, access: ObserveAccess) -> Router {
        let base = path.trim_end_matches('/');
        let s = operator::status::StatusState {
            metrics: Arc::clone(&self.state.metrics),
            state: Arc::downgrade(&self.state),
            access: Arc::new(access),
        };
        Router::new()
            .route(path, axum::routing::any(operator::status::serve_status_page))
            .route(&format!("{base}/data.json"), axum::routing::any(operator::status::serve_status_data))
            .with_state(s)
    }

    /// Announces `change` to every open `subscriptions/listen` stream of MCP
    /// 2026-07-28 that listens to it (`docs/SPEC.md` §5.4). Sessions of the
    /// 2025 revisions hear of changes on their standalone stream instead
    /// ([`SessionHandle::notify`]).
    pub fn announce(&self, change: Change) {
        self.state.protocol.changes.announce(change);
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
