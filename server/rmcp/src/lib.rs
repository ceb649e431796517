//! # gapless-rmcp: an rmcp server on gapless's transport
//!
//! Serve any rmcp [`ServerHandler`] over gapless's Streamable HTTP by
//! changing one line: where rmcp's `StreamableHttpService` was mounted,
//! mount this crate's.
//!
//! ```no_run
//! use rmcp::{model::ServerConfig, ServerHandler};
//!
//! #[derive(Clone)]
//! struct Counter;
//! impl ServerHandler for Counter {
//!     fn get_info(&self) -> ServerConfig {
//!         ServerConfig::new(rmcp::model::ServerCapabilities::builder().enable_tools().build())
//!     }
//! }
//!
//! # async fn run() -> Result<(), Box<dyn std::error::Error>> {
//! let mcp = gapless_rmcp::StreamableHttpService::new(|| Ok(Counter), gapless_rmcp::Config::default())?;
//! let app = axum::Router::new().nest_service("/mcp", mcp);
//! let listener = tokio::net::TcpListener::bind("127.0.0.1:8080").await?;
//! axum::serve(listener, app).await?;
//! # Ok(())
//! # }
//! ```
//!
//! Everything of the handler works unchanged: tools (`#[tool_router]`,
//! `#[tool]`, their JSON schemas), prompts, resources, completions; logging
//! (`notifications/message`) and progress, which go on the request's own
//! stream; server → client requests through its `Peer` (sampling,
//! elicitation, roots), whose responses the client POSTs back;
//! cancellation (`notifications/cancelled` cancels the handler's
//! `RequestContext::ct`); the `initialize` result's capabilities, server
//! info and instructions, from the handler's `get_info`.
//!
//! What changes is the transport, which is gapless's (`docs/SPEC.md` §5):
//! every stream starts with a priming event; a client that resumes with
//! `Last-Event-ID` gets every later event of that stream, in order, or an
//! explicit 4xx that says what is missing (`409 gap_not_covered` with the
//! numbers, `cursor_not_delivered`, …), never rmcp's silent `200` with a
//! partial replay; sessions may move to a WebSocket; the memory budget and
//! per-client limits apply. How the handler is driven, and the few places
//! where it differs from rmcp's own transport, is in [`RmcpHost`]'s module.
//! A handler that wants to end its SSE response early (SEP-1699 polling),
//! or to make a 2026-07-28 request a gapless task and emit its events
//! (`tasks/stream`, the draft SEP-2694), which rmcp's API has no call for,
//! finds a [`RequestStream`] in its context's `extensions`.
//!
//! For every option of gapless-server's builder (caller identity, a cluster
//! store, the endpoint path), build the server yourself around an
//! [`RmcpHost`]: `McpServer::builder(RmcpHost::new(factory)?)`.
//!
//! On the client side, rmcp's own client retries a refused resume forever
//! and leaves the request pending; [`client::GaplessClient`] (feature
//! `client`, on by default) is the client to build rmcp's
//! `StreamableHttpClientTransport` with instead: the refusal then answers
//! the request, as an error that [`client::Refusal::from_error`] reads.
#![deny(missing_docs)]

#[cfg(feature = "client")]
pub mod client;
mod host;
mod link;

pub use gapless_server;
pub use host::{HandlerFactory, RequestStream, RmcpHost};

use axum::extract::Request;
use axum::response::Response;
use gapless_server::{BuildError, McpServer, ServerConfig};
use rmcp::ServerHandler;
use std::convert::Infallible;
use std::fmt;
use std::task::{Context, Poll};
use std::time::Duration;

/// How the service is set up.
#[derive(Clone, Debug)]
pub struct Config {
    /// gapless-server's limits: ring sizes, sessions, timeouts, origins, …
    pub server: ServerConfig,
    /// How often idle sessions are expired (and their handlers dropped).
    pub sweep_every: Duration,
}

impl Default for Config {
    /// [`ServerConfig::default`], sessions swept every 10 s.
    fn default() -> Self {
        Config { server: ServerConfig::default(), sweep_every: Duration::from_secs(10) }
    }
}

/// Why [`StreamableHttpService::new`] refused.
#[derive(Debug)]
pub enum Error {
    /// The handler factory failed when called for the `initialize` result.
    Factory(std::io::Error),
    /// gapless-server refused the configuration.
    Build(BuildError),
    /// Not called inside a Tokio runtime (the service runs the idle-session
    /// sweeper and one rmcp service loop per session on it).
    NoRuntime,
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Factory(e) => write!(f, "the rmcp handler factory failed: {e}"),
            Error::Build(e) => e.fmt(f),
            Error::NoRuntime => {
                f.write_str("gapless_rmcp::StreamableHttpService::new must run inside a Tokio runtime")
            }
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Factory(e) => Some(e),
            Error::Build(e) => Some(e),
            Error::NoRuntime => None,
        }
    }
}

/// A tower service (and axum router) serving rmcp handlers over gapless:
/// the endpoint at its root, so mount it with `nest_service("/mcp", …)`
/// where rmcp's `StreamableHttpService` was. Clones share the sessions.
#[derive(Clone)]
pub struct StreamableHttpService {
    server: McpServer,
    router: axum::Router,
}

impl fmt::Debug for StreamableHttpService {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("StreamableHttpService").field("server", &self.server).finish()
    }
}

impl StreamableHttpService {
    /// A service whose sessions each get a handler from `factory` (called
    /// once now for the `initialize` result, then once per session).
    pub fn new<S: ServerHandler>(factory: impl HandlerFactory<S>, config: Config) -> Result<Self, Error> {
        let runtime = tokio::runtime::Handle::try_current().map_err(|_| Error::NoRuntime)?;
        let host = RmcpHost::new(factory).map_err(Error::Factory)?;
        let server =
            McpServer::builder(host).config(config.server).path("/").build().map_err(Error::Build)?;
        let _guard = runtime.enter();
        // Ends with the server's shutdown.
        drop(server.spawn_sweeper(config.sweep_every));
        Ok(StreamableHttpService { router: server.router(), server })
    }

    /// The gapless server underneath (its hub; [`McpServer::shutdown`]).
    pub fn server(&self) -> &McpServer {
        &self.server
    }

    /// The service as an axum router (endpoint at its root).
    pub fn router(&self) -> axum::Router {
        self.router.clone()
    }
}

impl tower::Service<Request> for StreamableHttpService {
    type Response = Response;
    type Error = Infallible;
    type Future = <axum::Router as tower::Service<Request>>::Future;

    fn poll_ready(&mut self, cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        tower::Service::<Request>::poll_ready(&mut self.router, cx)
    }

    fn call(&mut self, req: Request) -> Self::Future {
        tower::Service::<Request>::call(&mut self.router, req)
    }
}
