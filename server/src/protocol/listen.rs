//! `subscriptions/listen` of MCP 2026-07-28 (`docs/SPEC.md` §5.4): the
//! acknowledgment, then every announced change its filter lets through,
//! and the status changes of the tasks it watches, until the client closes
//! the stream or the server shuts down.

use super::builtin::complete;
use super::Protocol;
use crate::sessionless::filter::{Filter, META_SUBSCRIPTION};
use crate::sessionless::inflight::Permit;
use crate::sessionless::queue::QueueTx;
use crate::tasks::Watched;
use crate::vocab::jsonrpc;
use bytes::Bytes;
use serde_json::{json, Value};
use std::sync::Arc;
use tokio::sync::oneshot;

/// A listen stream's request: its id, what it listens to, who asked, and
/// the server's identity for its final result.
pub(super) struct Listen {
    pub(super) id: Value,
    pub(super) filter: Filter,
    pub(super) caller: Option<String>,
    pub(super) server_info: Value,
}

/// Serves `subscriptions/listen` (request `id`): the acknowledgment first,
/// then the changes announced from now on that the filter lets through,
/// until the client closes the stream (which drops `tx`) or the server
/// shuts down (a graceful response ends it).
pub(super) fn listen(p: &Protocol, l: Listen, tx: QueueTx, reply: oneshot::Sender<Value>, permit: Permit) {
    let Listen { id, mut filter, caller, server_info } = l;
    let mut changes = p.changes.subscribe();
    let shutdown = p.shutdown.clone();
    let tasks = Arc::clone(&p.tasks);
    tokio::spawn(async move {
        let _permit = permit;
        // Tasks: those the caller may see, each sent as it is now, then on
        // every change of its status (woken for it: a change may be another
        // node's), until it is terminal or gone.
        let mut watched = Watched::new(tasks, caller);
        filter.task_ids = watched.agree(&filter.task_ids).await;
        let ack = jsonrpc::notification(
            "notifications/subscriptions/acknowledged",
            json!({"_meta": {META_SUBSCRIPTION: id}, "notifications": filter.to_json()}),
        );
        if tx.send(Bytes::from(ack.to_string())).await.is_err() {
            return;
        }
        use tokio::sync::broadcast::error::{RecvError, TryRecvError};
        let mut last = false;
        while !last {
            let batch = tokio::select! {
                c = changes.recv() => match c {
                    Ok(c) => vec![c],
                    Err(RecvError::Lagged(_)) => filter.everything(),
                    Err(RecvError::Closed) => break,
                },
                _ = tx.closed() => return,
                ids = watched.woken(), if !watched.is_empty() => {
                    for task in ids {
                        let mut t = match watched.change(&task).await {
                            Ok(Some(t)) => t,
                            Ok(None) => continue,
                            Err(()) => {
                                watched.retry(&task);
                                continue;
                            }
                        };
                        t.insert("_meta".into(), json!({META_SUBSCRIPTION: id}));
                        let n = jsonrpc::notification("notifications/tasks", Value::Object(t));
                        if tx.send(Bytes::from(n.to_string())).await.is_err() {
                            return;
                        }
                    }
                    vec![]
                }
                _ = shutdown.cancelled() => {
                    // What was announced before the shutdown still goes out
                    // (at most the channel's capacity), then the end.
                    last = true;
                    let mut rest = vec![];
                    loop {
                        match changes.try_recv() {
                            Ok(c) => rest.push(c),
                            Err(TryRecvError::Lagged(_)) => rest.extend(filter.everything()),
                            Err(_) => break rest,
                        }
                    }
                }
            };
            for c in &batch {
                if let Some(n) = filter.pass(c, &id) {
                    if tx.send(Bytes::from(n.to_string())).await.is_err() {
                        return;
                    }
                }
            }
        }
        let end = complete("subscriptions/listen", json!({"_meta": {META_SUBSCRIPTION: id}}), server_info);
        let _ = reply.send(jsonrpc::response(&id, Ok(end)));
    });
}
