//! The protocol: what the transport does with a JSON-RPC message once the
//! HTTP layer has checked, parsed and classified it, for both generations
//! of MCP. Nothing here knows about requests, headers or status codes; the
//! same functions serve a POST and a WebSocket frame.
//!
//! - `dispatch_2025.rs`: a message of a session of the 2025 revisions, on
//!   its ring: the request's own stream primed, the application's handler
//!   run, its response published (and the stream ended); notifications,
//!   cancels.
//! - `dispatch_2026.rs`: a request of MCP 2026-07-28, on its exchange: the
//!   application's handler run to a response, an input-required result or
//!   a task; the tasks extension's own methods; `listen.rs`,
//!   `subscriptions/listen`; `task_stream.rs`, `tasks/stream` (a task's
//!   event stream).
//! - `builtin.rs`: every method the transport answers itself.
//! - `mirrors.rs`: the tools' mirrored parameters, from the application's
//!   own `tools/list`.

pub(crate) mod builtin;
pub(crate) mod dispatch_2025;
pub(crate) mod dispatch_2026;
mod listen;
pub(crate) mod mirrors;
mod task_stream;

use crate::host::Host;
use crate::sessionless::mirror::MirrorCache;
use crate::tasks::Tasks;
use crate::vocab::change::Announcer;
use crate::vocab::config::ServerConfig;
use crate::vocab::request_state::StateKey;
use std::sync::{Arc, Mutex};
use tokio_util::sync::CancellationToken;

/// What the protocol layer needs of the server: the application, the
/// limits, the tasks, the announcements, the `requestState` key, the
/// mirrored-parameter cache, and the shutdown.
pub(crate) struct Protocol {
    pub(crate) host: Arc<dyn Host>,
    pub(crate) config: Arc<ServerConfig>,
    /// The tasks extension's records and the work this process runs.
    pub(crate) tasks: Arc<Tasks>,
    /// Changes announced to 2026-07-28 `subscriptions/listen` streams.
    pub(crate) changes: Announcer,
    /// Seals the `requestState` of input-required results.
    pub(crate) input_key: StateKey,
    /// The tools' mirrored parameters (`x-mcp-header`), as last listed.
    pub(crate) mirrors: Mutex<MirrorCache>,
    /// Cancelled on shutdown.
    pub(crate) shutdown: CancellationToken,
}
