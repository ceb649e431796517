//! `tasks/stream` (SEP-2694, draft; `docs/SPEC.md` §5.6): its checks, in
//! the order of the section's table, and the opening of the task's stream
//! at the cursor. The protocol layer (`protocol/task_stream.rs`) sends
//! what the opening yields.

use super::{declares, not_found, now_ms, required, unavailable, visible, Active, Tasks};
use crate::backend::task_store::Lookup;
use crate::vocab::jsonrpc::RpcError;
use serde_json::Value;

/// A `tasks/stream` that passed its checks.
pub(crate) struct Opened {
    /// The task's id.
    pub(crate) task: String,
    /// Its events after the cursor, then live; `None`: it has none and
    /// never will here (its stream is gone): the request ends at once.
    pub(crate) events: Option<super::Subscription>,
    /// The one stream of this connection for this task (none when the
    /// connection is not known).
    pub(crate) _active: Option<Active>,
}

impl Tasks {
    /// Checks a `tasks/stream` of `caller` on `connection` (its peer's
    /// address and port, if known) that declared `capabilities`, for an
    /// application that `serves` the tasks extension, and opens the task's
    /// stream after its cursor.
    pub(crate) async fn open_stream(
        &self,
        params: &Value,
        capabilities: &Value,
        caller: Option<&str>,
        connection: Option<std::net::SocketAddr>,
        serves: bool,
    ) -> Result<Opened, RpcError> {
        let Some(streams) = self.events.as_ref().filter(|_| serves) else {
            return Err(RpcError::method_not_found("tasks/stream"));
        };
        if !declares(capabilities) {
            return Err(required());
        }
        let id = match params.get("taskId") {
            Some(Value::String(s)) => s.as_str(),
            _ => return Err(RpcError::invalid_params("params.taskId must be a string")),
        };
        let after = match params.get("after") {
            None => None,
            Some(v) => Some(v.as_u64().ok_or_else(|| {
                RpcError::invalid_params("params.after must be a non-negative integer (a task event's seq)")
            })?),
        };
        // The same authorization as `tasks/get`.
        match visible(self.store.get(id, now_ms()).await.map_err(unavailable)?, caller) {
            Lookup::Found(_) => {}
            l => return Err(not_found(id, &l)),
        }
        // A connection not known (an embedding without peer addresses)
        // cannot be told from another: nothing to claim.
        let active = match connection {
            Some(c) => Some(streams.claim(c, id).ok_or_else(|| {
                RpcError::invalid_params(format!(
                    "a tasks/stream of task {id:?} is open already on this connection: cancel it first"
                ))
            })?),
            None => None,
        };
        let events = streams.subscribe(id, after).await?;
        Ok(Opened { task: id.to_owned(), events, _active: active })
    }
}
