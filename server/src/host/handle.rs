//! [`SessionHandle`]: a session of the 2025 revisions as the application
//! sees it: its standalone stream, its client's `initialize`, its end.

use super::LogLevel;
use crate::session::SessionState;
use crate::vocab::error::{ClientRequestError, SendError, ValueError};
use crate::vocab::jsonrpc;
use crate::vocab::sync::lock;
use bytes::Bytes;
use gapless::session::Pacer;
use gapless::Seq;
use serde_json::Value;
use std::fmt;
use std::sync::Arc;

/// A handle on a session for the application: publish on the standalone
/// stream.
#[derive(Clone)]
pub struct SessionHandle {
    pub(crate) sess: Arc<SessionState>,
}

impl fmt::Debug for SessionHandle {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SessionHandle").field("session", &self.sess.session.id()).finish()
    }
}

impl SessionHandle {
    /// The session id.
    pub fn id(&self) -> String {
        self.sess.session.id().to_string()
    }

    /// Publishes a notification on the standalone (GET) stream, paced. In
    /// cluster mode the event is queued for the store and the `Seq` is 0
    /// (not allocated yet; `docs/SPEC.md` §8.8).
    pub async fn notify(&self, method: &str, params: Value) -> Result<Seq, SendError> {
        self.sess.publish_json(&self.sess.standalone, &jsonrpc::notification(method, params)).await
    }

    /// The protocol version negotiated at `initialize`.
    pub fn protocol_version(&self) -> String {
        self.sess.protocol_version()
    }

    /// Publishes raw, already serialized JSON-RPC bytes on the standalone
    /// stream (paced). The caller guarantees they are one JSON message.
    /// The ring's budget counts their length: make them from a `Vec` with
    /// `gapless::ring::exact_bytes`.
    pub async fn notify_raw(&self, message: Bytes) -> Result<Seq, SendError> {
        self.sess.publish_bytes(&self.sess.standalone, message).await
    }

    /// The `params` of the session's `initialize` request as the client sent
    /// them (its `clientInfo` and `capabilities`); `None` where this process
    /// did not receive that request (a cluster node serving a session that
    /// another node created).
    pub fn initialize_params(&self) -> Option<Value> {
        self.sess.initialize_params()
    }

    /// Sends a request to the client on the standalone stream (one that no
    /// client request caused, e.g. `roots/list` after
    /// `notifications/roots/list_changed`) and waits for the response the
    /// client POSTs back (or sends over its WebSocket). Ends with
    /// [`ClientRequestError::Cancelled`] when the session ends, and
    /// [`ClientRequestError::Timeout`] after the configured client-request
    /// timeout.
    pub async fn request(&self, method: &str, params: Value) -> Result<Value, ClientRequestError> {
        self.sess.client_request(&self.sess.standalone, method, params, &self.sess.closed).await
    }

    /// Whether the session ended (deleted, expired, or the server shut
    /// down).
    pub fn is_closed(&self) -> bool {
        self.sess.closed.is_cancelled()
    }

    /// Ends the session now, as a `DELETE` would: its streams end, and
    /// the client's next request is `404` (it initializes anew), on every
    /// node of a cluster (the store's session is deleted too). For an
    /// application whose session depends on something that ended (a
    /// gateway's upstream session).
    pub fn end(&self) {
        self.sess.hub.remove(&self.sess.session.id());
        self.sess.close();
        if !self.sess.store.shared() {
            return;
        }
        let sess = Arc::clone(&self.sess);
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            tracing::warn!("an ended session could not be deleted from the store: no Tokio runtime");
            return;
        };
        runtime.spawn(async move {
            if let Err(e) = sess.store.delete(&sess.session).await {
                tracing::warn!(error = %e, "an ended session could not be deleted from the store");
            }
        });
    }

    /// Records `value` as the session's `name`, where every node of a
    /// cluster reads it ([`SessionHandle::value`]): what an application
    /// keeps of a session beyond the process that made it (a gateway's
    /// upstream session). In a cluster it is one write to the store; it
    /// goes when the session does.
    pub async fn set_value(&self, name: &str, value: &str) -> Result<(), ValueError> {
        match self.sess.store.set_value(&self.sess.session, name, value).await {
            Some(done) => done,
            None if self.is_closed() => Err(ValueError::Closed),
            None => {
                lock(&self.sess.values).insert(name.to_owned(), value.to_owned());
                Ok(())
            }
        }
    }

    /// The session's `name` ([`SessionHandle::set_value`]), `None` when it
    /// has none. In a cluster it is one read of the store, and the store
    /// says whether the session is gone ([`ValueError::Closed`]) even on a
    /// node that closed its own state of it (the node dropped it, or shuts
    /// down): where an application tells a session's end from this node's.
    /// In process the session is gone once it closed.
    pub async fn value(&self, name: &str) -> Result<Option<String>, ValueError> {
        match self.sess.store.value(&self.sess.session, name).await {
            Some(v) => v,
            None if self.is_closed() => Err(ValueError::Closed),
            None => Ok(lock(&self.sess.values).get(name).cloned()),
        }
    }

    /// Takes the hold named `name` on the session for this node: `true`
    /// while this node holds it, `false` while another live node of the
    /// cluster does. What one node of a cluster does for a session at a
    /// time (a gateway's reading of its upstream's standalone stream). A
    /// hold lasts while its node lives (its lease in the store): nobody
    /// renews it, and another node takes it over once that node is dead
    /// (within about 4 s of its death). In process, always `true`.
    pub async fn hold(&self, name: &str) -> Result<bool, ValueError> {
        if self.is_closed() {
            return Err(ValueError::Closed);
        }
        self.sess.store.hold(&self.sess.session, name).await
    }

    /// Waits until this node holds `name` ([`SessionHandle::hold`]): at
    /// once if nobody does, else once its holder's node is found dead (the
    /// node looks once a second, at one store command per holding node,
    /// not per session). [`ValueError::Closed`] when the session ends
    /// first.
    pub async fn acquire(&self, name: &str) -> Result<(), ValueError> {
        match self.sess.store.acquire(&self.sess.session, name, &self.sess.closed).await? {
            true => Ok(()),
            false => Err(ValueError::Closed),
        }
    }

    /// Lets go of this node's hold `name`, so that another node may take it
    /// at once.
    pub async fn release(&self, name: &str) -> Result<(), ValueError> {
        self.sess.store.release(&self.sess.session, name).await
    }

    /// Resolves when another node took this node's hold `name` over: it
    /// found this node's lease expired (a node stalled, or cut from the
    /// store, for longer than its lease). Never in process.
    pub async fn lost(&self, name: &str) {
        self.sess.store.lost(&self.sess.session, name).await
    }

    /// Waits until every event published on the session before this call
    /// is in the cluster's store, where a node's failure cannot lose it
    /// (at once in process): what an application waits for before it
    /// records how far it got ([`SessionHandle::set_value`]).
    /// [`SendError::Refused`] when the store refused one of them (it is
    /// not stored, and the next publish on its stream is refused too).
    pub async fn flush(&self) -> Result<(), SendError> {
        self.sess.store.flush().await
    }

    /// Whether the session lives in a cluster's store (`--redis-url`),
    /// where other nodes serve it too: where values, holds and flushes
    /// cost a store call, and a hold can be lost. In process they are
    /// free and a hold is never lost.
    pub fn in_cluster(&self) -> bool {
        self.sess.store.shared()
    }

    /// Resolves when the session ends (deleted, expired, or the server shut
    /// down): where an application drops what it keeps per session.
    pub async fn closed(&self) {
        self.sess.closed.cancelled().await
    }

    /// Sends a log notification on the standalone stream if the session's
    /// level lets it through; `Ok(None)` when filtered.
    pub async fn log(
        &self,
        level: LogLevel,
        logger: Option<&str>,
        data: Value,
    ) -> Result<Option<Seq>, SendError> {
        log_on(&self.sess, &self.sess.standalone, level, logger, data).await
    }
}

/// `notifications/message` on `stream`, if the session's level lets `level`
/// through (`Ok(None)` when filtered): the one body of both `log`s.
pub(super) async fn log_on(
    sess: &SessionState,
    stream: &Pacer,
    level: LogLevel,
    logger: Option<&str>,
    data: Value,
) -> Result<Option<Seq>, SendError> {
    if level < sess.log_level() {
        return Ok(None);
    }
    sess.publish_bytes(stream, log_message(level, logger, &data)).await.map(Some)
}

/// A `notifications/message`, serialized straight to its bytes (no
/// `Value` of the whole message is built: a log message is what a chatty
/// tool sends per event).
pub(super) fn log_message(level: LogLevel, logger: Option<&str>, data: &Value) -> Bytes {
    #[derive(serde::Serialize)]
    struct Message<'a> {
        jsonrpc: &'static str,
        method: &'static str,
        params: Params<'a>,
    }
    #[derive(serde::Serialize)]
    struct Params<'a> {
        level: &'static str,
        #[serde(skip_serializing_if = "Option::is_none")]
        logger: Option<&'a str>,
        data: &'a Value,
    }
    let m = Message {
        jsonrpc: "2.0",
        method: "notifications/message",
        params: Params { level: level.as_str(), logger, data },
    };
    gapless::ring::exact_bytes(serde_json::to_vec(&m).expect("JSON values serialize"))
}
