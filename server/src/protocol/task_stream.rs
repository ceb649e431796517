//! `tasks/stream` of the tasks extension (SEP-2694, draft; `docs/SPEC.md`
//! §5.6): the task's events after the cursor as `notifications/tasks/event`
//! on the request's stream, then live, until the task's stream ends (an
//! empty result), an event the client needs is dropped first
//! (`events_gone`), the client closes the stream (the task goes on) or the
//! server shuts down (an empty result: the client resumes with its cursor).

use super::builtin::complete;
use super::Protocol;
use crate::sessionless::exchange::Running;
use crate::sessionless::inflight::Permit;
use crate::sessionless::queue::queue;
use crate::tasks::{self, notification};
use crate::vocab::jsonrpc::{self, RpcError};
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

/// A `tasks/stream` request: its id and params, what it declared, who
/// asked, and the server's identity for its final result.
pub(super) struct StreamCall {
    pub(super) id: Value,
    pub(super) params: Value,
    pub(super) capabilities: Value,
    pub(super) caller: Option<String>,
    pub(super) connection: Option<std::net::SocketAddr>,
    pub(super) server_info: Value,
}

/// Serves `tasks/stream`, admitted under `permit` (held while it streams).
pub(super) fn task_stream(p: &Protocol, call: StreamCall, permit: Permit) -> Running {
    let (tx, notifications) = queue();
    let (reply, response) = oneshot::channel();
    let tasks = Arc::clone(&p.tasks);
    let serves = tasks::declares(&p.host.capabilities());
    let shutdown = p.shutdown.clone();
    tokio::spawn(async move {
        let StreamCall { id, params, capabilities, caller, connection, server_info } = call;
        let answer = move |outcome: Result<Value, RpcError>| {
            let outcome = outcome.map(|r| complete("tasks/stream", r, server_info));
            let _ = reply.send(jsonrpc::response(&id, outcome));
        };
        let _permit = permit;
        let opened = tasks.open_stream(&params, &capabilities, caller.as_deref(), connection, serves).await;
        let opened = match opened {
            Ok(o) => o,
            Err(e) => return answer(Err(e)),
        };
        let Some(mut events) = opened.events else { return answer(Ok(json!({}))) };
        loop {
            let event = tokio::select! {
                biased;
                e = events.recv() => match e {
                    Some(Ok((seq, body))) => notification(&opened.task, seq, &body),
                    // Dropped before it was read: explicit, never skipped
                    // (or the cluster's store did not answer).
                    Some(Err(e)) => return answer(Err(e)),
                    None => return answer(Ok(json!({}))),
                },
                _ = tx.closed() => return, // the client closed it: the task goes on
                _ = shutdown.cancelled() => return answer(Ok(json!({}))),
            };
            // A reader that does not read holds the stream here: a shutdown
            // still ends it.
            tokio::select! {
                sent = tx.send(event) => if sent.is_err() { return },
                _ = shutdown.cancelled() => return answer(Ok(json!({}))),
            }
        }
    });
    Running { notifications, response, cancel: CancellationToken::new() }
}
