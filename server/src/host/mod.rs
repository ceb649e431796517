//! The seam between the transport and the application (`docs/SPEC.md` §5.2).
//!
//! An application implements [`Host`]; the transport calls it for every
//! JSON-RPC request it does not handle itself (`protocol/builtin.rs`) with a
//! [`RequestContext`] (`context.rs`) that publishes on the request's own
//! stream, sends server → client requests and awaits their responses, and
//! observes cancellation and the log level. A [`SessionHandle`]
//! (`handle.rs`) is a session of the 2025 revisions as the application
//! sees it.

mod context;
mod handle;

pub use crate::vocab::error::{ClientRequestError, SendError, ValueError};
pub use crate::vocab::log_level::LogLevel;
pub use context::RequestContext;
pub use handle::SessionHandle;

pub(crate) use context::Via;

use crate::vocab::jsonrpc::RpcError;
use futures_util::future::BoxFuture;
use serde_json::{json, Value};

/// Why an application refused a session's `initialize`
/// ([`Host::initialize`]): the session is gone, and the client gets this.
#[derive(Debug)]
pub enum InitializeError {
    /// A JSON-RPC error, as the response.
    Rpc(RpcError),
    /// An HTTP answer the client gets as it is: a gateway's upstream's
    /// `401` or `403` with its `WWW-Authenticate`.
    Http(http::Response<bytes::Bytes>),
}

impl From<RpcError> for InitializeError {
    fn from(e: RpcError) -> Self {
        InitializeError::Rpc(e)
    }
}

/// An MCP application behind the transport.
pub trait Host: Send + Sync + 'static {
    /// `serverInfo` in the `initialize` result.
    fn server_info(&self) -> Value {
        json!({"name": "gapless-server", "version": env!("CARGO_PKG_VERSION")})
    }

    /// `capabilities` in the `initialize` result.
    fn capabilities(&self) -> Value;

    /// Optional `instructions` in the `initialize` result.
    fn instructions(&self) -> Option<String> {
        None
    }

    /// Whether this application serves requests of MCP 2026-07-28, which
    /// have no session (`docs/SPEC.md` §5.4): [`RequestContext::session`] is
    /// `None` for them. An application that needs a session for every
    /// request returns `false`; the endpoint then answers such requests as
    /// a server of the 2025 revisions only does (400, no session).
    fn serves_sessionless(&self) -> bool {
        true
    }

    /// Whether this application answers every MCP 2026-07-28 request
    /// itself (a gateway whose upstream serves that revision):
    /// `server/discover`, `subscriptions/listen`, the tasks extension's
    /// methods and the methods the revision removed included, which the
    /// transport otherwise answers. The transport still checks the
    /// request's headers, version and bounds, and completes the result for
    /// the revision where the application left fields out. Implies
    /// [`Host::serves_sessionless`] and not [`Host::seals_request_state`]
    /// (the application's rounds are its own).
    fn forwards_sessionless(&self) -> bool {
        false
    }

    /// Whether a session's `ping` and `logging/setLevel` go to this
    /// application too, which answers them (a gateway, whose upstream
    /// filters its own log messages and answers its own pings). The
    /// transport still records the session's level first, and refuses an
    /// invalid one itself.
    fn forwards_session_methods(&self) -> bool {
        false
    }

    /// Whether the transport keeps MCP 2026-07-28's `requestState` for this
    /// application (SEP-2322, `docs/SPEC.md` §5.4): it seals what
    /// [`RequestContext::ask`] was answered, and verifies the state a retry
    /// brings (`-32602` when it does not); the handler's params then come
    /// without `inputResponses` and `requestState` (its asks get the
    /// answers). An application that runs its own
    /// rounds (it builds its input-required results and reads
    /// `inputResponses` and `requestState` from the params itself, as an
    /// rmcp handler does) returns `false`: the params reach it untouched,
    /// and an `ask` on such a request finds no earlier answers.
    fn seals_request_state(&self) -> bool {
        true
    }

    /// Answers a new session's `initialize` itself (a gateway forwards it
    /// to its upstream). `None`, the default: the transport answers with
    /// the version it negotiates, [`Host::capabilities`],
    /// [`Host::server_info`] and [`Host::instructions`]. `Some`: the
    /// session exists already (`session`), and `headers` are those of the
    /// HTTP request that carried the `initialize`; the future's result is
    /// the `initialize` result as the client gets it (its
    /// `protocolVersion`, when it is one the transport serves, becomes the
    /// session's), and an error ends the session and is the response (a
    /// JSON-RPC error, or an HTTP answer as it is).
    fn initialize(
        &self,
        _params: &Value,
        _session: &SessionHandle,
        _headers: &http::HeaderMap,
    ) -> Option<BoxFuture<'static, Result<Value, InitializeError>>> {
        None
    }

    /// Handles one request; the result (or error) becomes the response.
    fn handle(
        &self,
        method: String,
        params: Value,
        ctx: RequestContext,
    ) -> BoxFuture<'static, Result<Value, RpcError>>;

    /// Called when this node of a cluster takes up a session that another
    /// node created (the session's first request, stream or resume here),
    /// before that is served: where an application that keeps something
    /// of each session on the node serving it starts it (a gateway's link
    /// to its upstream, read from [`SessionHandle::value`]). Never called
    /// in process, where the node that creates a session is the only one.
    fn on_attach(&self, _session: &SessionHandle) {}

    /// Called for every client notification but `notifications/cancelled`
    /// (which the transport handles: it cancels the request's context),
    /// `notifications/initialized` included.
    fn on_notification(&self, _method: &str, _params: &Value, _session: &SessionHandle) {}
}
