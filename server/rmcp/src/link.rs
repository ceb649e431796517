//! The in-memory rmcp [`Transport`] between an rmcp service loop and the
//! adapter: what the loop sends comes out of [`Link::outbound`] in the order
//! the loop sent it, each with an acknowledgement the loop's send waits for;
//! what the adapter pushes into [`Link::inbound`] the loop receives.
//!
//! ```text
//!  rmcp serve loop                          adapter (host.rs)
//!  transport.send(m) ──► outbound queue ──► Link::outbound ── publish on gapless ──┐
//!        ▲  waits                                                                 │
//!        └──────────────── ack (Ok, or why the publish failed) ◄──────────────────┘
//!  transport.receive() ◄── inbound queue ◄── Link::inbound (client responses, notifications)
//! ```
//!
//! The loop calls `send` synchronously and only then spawns the future that
//! waits for the acknowledgement, so the queue holds messages in the loop's
//! order even though rmcp awaits several sends at once. A handler that
//! awaits its `Peer`'s send returns from it only once the adapter published
//! the message (or failed to): gapless's pacing reaches the handler.

use rmcp::model::{ClientJsonRpcMessage, ServerJsonRpcMessage};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use std::fmt;
use std::future::Future;
use tokio::sync::{mpsc, oneshot};

/// Why a message of the rmcp service did not reach the client.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum LinkError {
    /// The adapter's end is gone (the request finished, or the session ended).
    Closed,
    /// gapless refused to publish it (e.g. over the ring's byte budget, or
    /// the session ended meanwhile).
    Refused(String),
}

impl fmt::Display for LinkError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LinkError::Closed => f.write_str("the gapless stream this peer sends on has ended"),
            LinkError::Refused(why) => write!(f, "gapless did not publish the message: {why}"),
        }
    }
}

impl std::error::Error for LinkError {}

/// One message the service sent, and the acknowledgement its send awaits.
/// The message is boxed, and so is an inbound one: a tokio channel
/// allocates its first block of 32 slots when it is made, and a message
/// is 360–376 bytes, so every link (one per session and one per request)
/// held 24 KiB of slots before it carried anything; boxed, under 1 KiB.
pub(crate) struct Outbound {
    pub(crate) message: Box<ServerJsonRpcMessage>,
    pub(crate) ack: oneshot::Sender<Result<(), LinkError>>,
}

/// The adapter's end.
pub(crate) struct Link {
    /// What the service sent, in order.
    pub(crate) outbound: mpsc::UnboundedReceiver<Outbound>,
    /// What the service will receive.
    pub(crate) inbound: mpsc::UnboundedSender<Box<ClientJsonRpcMessage>>,
}

/// The service's end: an rmcp [`Transport`].
pub(crate) struct LinkTransport {
    outbound: mpsc::UnboundedSender<Outbound>,
    inbound: mpsc::UnboundedReceiver<Box<ClientJsonRpcMessage>>,
}

/// A connected pair.
pub(crate) fn pair() -> (LinkTransport, Link) {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    (LinkTransport { outbound: out_tx, inbound: in_rx }, Link { outbound: out_rx, inbound: in_tx })
}

impl Transport<RoleServer> for LinkTransport {
    type Error = LinkError;

    fn send(
        &mut self,
        message: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), LinkError>> + Send + 'static {
        // Queued here, in the loop's order, not when the future first runs.
        let (ack, acked) = oneshot::channel();
        let queued = self.outbound.send(Outbound { message: Box::new(message), ack }).is_ok();
        async move {
            if !queued {
                return Err(LinkError::Closed);
            }
            acked.await.unwrap_or(Err(LinkError::Closed))
        }
    }

    async fn receive(&mut self) -> Option<ClientJsonRpcMessage> {
        self.inbound.recv().await.map(|m| *m)
    }

    async fn close(&mut self) -> Result<(), LinkError> {
        self.inbound.close();
        Ok(())
    }
}

#[cfg(test)]
#[allow(deprecated)] // rmcp 3.11 marks the logging API deprecated (SEP-2577).
mod tests {
    use super::*;
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam, ServerNotification};

    fn log(seq: u64) -> ServerJsonRpcMessage {
        let n = ServerNotification::LoggingMessageNotification(rmcp::model::Notification::new(
            LoggingMessageNotificationParam::new(LoggingLevel::Info, serde_json::json!({"seq": seq})),
        ));
        ServerJsonRpcMessage::notification(n)
    }

    #[tokio::test]
    async fn sends_arrive_in_call_order_and_wait_for_their_ack() {
        let (mut t, mut link) = pair();
        // Futures created in order 1, 2, 3 but polled in reverse.
        let f1 = t.send(log(1));
        let f2 = t.send(log(2));
        let f3 = t.send(log(3));
        let waits = tokio::spawn(async move { (f3.await, f2.await, f1.await) });
        for want in 1..=3u64 {
            let o = link.outbound.recv().await.unwrap();
            let v = serde_json::to_value(&o.message).unwrap();
            assert_eq!(v["params"]["data"]["seq"], want);
            o.ack.send(if want == 2 { Err(LinkError::Refused("full".into())) } else { Ok(()) }).unwrap();
        }
        let (r3, r2, r1) = waits.await.unwrap();
        assert_eq!((r1, r3), (Ok(()), Ok(())));
        assert_eq!(r2, Err(LinkError::Refused("full".into())));
    }

    #[tokio::test]
    async fn a_send_after_the_adapter_left_fails_closed() {
        let (mut t, link) = pair();
        drop(link);
        assert_eq!(t.send(log(1)).await, Err(LinkError::Closed));
        assert!(t.receive().await.is_none());
    }
}
