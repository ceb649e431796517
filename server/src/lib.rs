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
#![deny(missing_docs)]

mod cluster;
mod dispatch;
mod fairness;
pub mod host;
mod http;
mod modern;
mod operator;
mod serve;
mod state;
pub mod tasks;
mod telemetry;
mod vocab;

pub use host::{ClientRequestError, Host, LogLevel, RequestContext, SendError, SessionHandle};
pub use operator::access::ObserveAccess;
pub use serve::ServeConfig;
pub use vocab::change::Change;
pub use vocab::config::{self, ServerConfig, LEGACY_VERSION, MODERN_VERSIONS, SUPPORTED_VERSIONS};
pub use vocab::error::{self, ApiError};
pub use vocab::identity::{CallerIdentity, IdentityFn};
pub use vocab::jsonrpc::{self, RpcError};

use axum::Router;
use gapless::ring::ConfigError;
use gapless::Hub;
use state::AppState;
use std::fmt;
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

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
        f.debug_struct("McpServer").field("path", &self.state.path).field("hub", &self.state.hub).finish()
    }
}

/// Why [`McpServerBuilder::build`] refused a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildError {
    /// The ring bounds are invalid.
    Ring(ConfigError),
    /// The endpoint path is not an absolute path of plain segments.
    Path {
        /// The path as given.
        path: String,
        /// What is wrong with it.
        reason: &'static str,
    },
    /// The cluster store could not be used.
    Store(String),
    /// `ServerConfig::request_state_secret` has fewer than 16 bytes.
    Secret,
}

impl fmt::Display for BuildError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            BuildError::Ring(e) => write!(f, "invalid ring configuration: {e}"),
            BuildError::Path { path, reason } => write!(f, "invalid endpoint path {path:?}: {reason}"),
            BuildError::Store(e) => write!(f, "session store: {e}"),
            BuildError::Secret => f.write_str("request_state_secret must have at least 16 bytes"),
        }
    }
}

impl std::error::Error for BuildError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            BuildError::Ring(e) => Some(e),
            BuildError::Path { .. } | BuildError::Store(_) | BuildError::Secret => None,
        }
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
    pub fn build(mut self) -> Result<McpServer, BuildError> {
        let path = normalize_path(&self.path)?;
        let cluster = match self.store.take() {
            Some((store, url)) => {
                // A replica's events carry the store's check and index
                // before their payload.
                let ring = &mut self.config.hub.ring;
                ring.byte_budget =
                    ring.byte_budget.saturating_add(cluster::PREFIX.saturating_mul(ring.capacity));
                Some(Arc::new(
                    cluster::Cluster::new(store, &url).map_err(|e| BuildError::Store(e.to_string()))?,
                ))
            }
            None => None,
        };
        let hub = Arc::new(Hub::new(self.config.hub).map_err(BuildError::Ring)?);
        let c = &self.config;
        let fairness = Arc::new(fairness::Fairness::new(
            c.initialize_per_sec,
            c.initialize_burst,
            c.max_sessions_per_client,
        ));
        if self.config.request_state_secret.as_ref().is_some_and(|s| s.len() < 16) {
            return Err(BuildError::Secret);
        }
        let input_key = vocab::request_state::StateKey::new(self.config.request_state_secret.as_deref());
        let stateless = modern::Inflight::new(
            self.config.max_stateless_inflight,
            self.config.max_stateless_inflight_per_client,
        );
        let c = &self.config;
        let limits = tasks::Limits {
            ttl: c.task_ttl,
            max_ttl: c.max_task_ttl,
            poll_interval: c.task_poll_interval,
            max_tasks: c.max_tasks,
            max_per_client: c.max_tasks_per_client,
            max_result_bytes: c.max_task_result_bytes,
        };
        // Tasks live where sessions do: in Redis in cluster mode.
        let (task_store, memory_tasks, node): (Arc<dyn tasks::store::TaskStore>, _, _) = match &cluster {
            Some(c) => {
                let store = tasks::redis::RedisTasks { store: c.store.clone(), me: c.node.clone() };
                (Arc::new(store), None, Some(c.node.clone()))
            }
            None => {
                let memory = Arc::new(tasks::store::MemoryTasks::new());
                (memory.clone(), Some(memory), None)
            }
        };
        let metrics = Arc::new(telemetry::Metrics::new());
        let state = Arc::new(AppState {
            tasks: Arc::new(tasks::Tasks::new(task_store, limits, node, Arc::clone(&metrics))),
            memory_tasks,
            changes: vocab::change::Announcer::new(),
            mirrors: Default::default(),
            stateless,
            input_key,
            hub,
            host: self.host,
            config: Arc::new(self.config),
            identity: self.identity,
            conns: Default::default(),
            shutdown: CancellationToken::new(),
            fairness,
            path,
            cluster,
            metrics,
        });
        let registry = Arc::new(operator::metrics::registry(&state.metrics, Arc::downgrade(&state)));
        if let Some(c) = &state.cluster {
            c.start(Arc::downgrade(&state), state.shutdown.clone());
        }
        Ok(McpServer { state, registry })
    }
}

/// `/mcp`, `/a/b` or `/`: absolute, no empty, `.`/`..` or `{`/`}` segment,
/// no query; a trailing `/` is dropped.
fn normalize_path(path: &str) -> Result<String, BuildError> {
    let bad = |reason| Err(BuildError::Path { path: path.to_owned(), reason });
    if !path.starts_with('/') {
        return bad("must start with '/'");
    }
    let trimmed = path.trim_end_matches('/');
    if trimmed.is_empty() {
        return Ok("/".to_owned());
    }
    for seg in trimmed[1..].split('/') {
        if seg.is_empty() || seg == "." || seg == ".." {
            return bad("has an empty, '.' or '..' segment");
        }
        if seg.bytes().any(|b| matches!(b, b'{' | b'}' | b'?' | b'#' | b'*' | b':') || b <= b' ' || b >= 0x7f)
        {
            return bad(
                "may hold only plain path characters (no '{', '}', '?', '#', '*', ':', spaces or non-ASCII)",
            );
        }
    }
    Ok(trimmed.to_owned())
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
        &self.state.hub
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
        self.state.changes.announce(change);
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

#[cfg(test)]
mod tests {
    use super::normalize_path;

    #[test]
    fn endpoint_paths() {
        assert_eq!(normalize_path("/mcp").unwrap(), "/mcp");
        assert_eq!(normalize_path("/mcp/").unwrap(), "/mcp");
        assert_eq!(normalize_path("/a/b").unwrap(), "/a/b");
        assert_eq!(normalize_path("/").unwrap(), "/");
        for bad in ["", "mcp", "/a//b", "/a/../b", "/{id}", "/a b", "/m?x", "/é"] {
            assert!(normalize_path(bad).is_err(), "{bad:?}");
        }
    }
}
