//! The cluster-wide bus (`docs/SPEC.md` §8.5): what one node tells every
//! other about a session, for the node that runs a request or holds a
//! connection. Each node's session table handles what it hears
//! (`Backend::start`'s callback).

/// A message on the cluster-wide bus, for the node running a request.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "t", rename_all = "snake_case")]
pub(crate) enum BusMessage {
    /// A client's response to a server → client request.
    Response {
        /// The session.
        sid: String,
        /// The request's JSON-RPC id.
        id: serde_json::Value,
        /// `result` or `error`.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<serde_json::Value>,
        #[serde(default, skip_serializing_if = "Option::is_none")]
        error: Option<serde_json::Value>,
    },
    /// `notifications/cancelled` for request `id`.
    Cancel {
        /// The session.
        sid: String,
        /// The cancelled request's JSON-RPC id.
        id: serde_json::Value,
    },
    /// A migration ticket was issued: the session's SSE streams end on
    /// every node (`docs/SPEC.md` §4.3).
    Migrating {
        /// The session.
        sid: String,
    },
    /// A socket redeemed a ticket: the session is migrated on every node.
    Migrated {
        /// The session.
        sid: String,
    },
    /// A node took hold `field` of session `sid` (the standalone stream's,
    /// `sa`, or an application's, `h:<name>`) from `holder`, whose node's
    /// lease had expired: should that node be alive after all, it lets go
    /// (its standalone connection ends; its application is told).
    HoldTaken {
        /// The session.
        sid: String,
        /// The hold.
        field: String,
        /// The holder before.
        holder: String,
    },
    /// A node let go of hold `field` of session `sid`: the nodes waiting
    /// for it try to take it.
    HoldFreed {
        /// The session.
        sid: String,
        /// The hold.
        field: String,
    },
    /// A node changed task `id`'s record (`tasks/cancel`, `tasks/update`):
    /// the node running its work stops it (`ended`) or wakes it for its
    /// input, at once rather than at its next look at the record.
    TaskChanged {
        /// The task.
        id: String,
        /// Whether the task is terminal now.
        ended: bool,
    },
}

/// A message heard on the bus (`None`, with a warning, for one this node
/// does not understand).
pub(super) fn decode(msg: &[u8]) -> Option<BusMessage> {
    match serde_json::from_slice::<BusMessage>(msg) {
        Ok(m) => Some(m),
        Err(_) => {
            tracing::warn!("cluster bus: a message this node does not understand");
            None
        }
    }
}
