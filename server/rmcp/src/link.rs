//! The in-memory rmcp [`Transport`] between an rmcp service loop and the
//! adapter.
//!
//! - **Notifications** are published by the send itself: `send` queues the
//!   message, synchronously and so in the loop's order, and the future it
//!   returns publishes what is queued, in order, through the link's
//!   [`Publisher`], then resolves with the outcome of its own message. One
//!   future at a time publishes (the *drainer*); a send whose message another
//!   future is publishing waits for its acknowledgement. rmcp's loop awaits
//!   each send in a task of its own, so a handler that awaits its `Peer`'s
//!   send returns once gapless published the message (or refused it):
//!   gapless's pacing reaches the handler. Nothing else is woken on the way:
//!   before, every notification went through the adapter's task too, one
//!   more task wake-up per event.
//! - **Anything else** the loop sends (server → client requests; responses
//!   of the session-wide service, which gets no requests) comes out of
//!   [`Link::outbound`] with an acknowledgement, for the adapter's task.
//!   The two ways are not ordered with each other: a request may reach the
//!   client before a notification the loop sent just before it, whose send
//!   task has not run yet. (The adapter's task never ordered them strictly
//!   either: it asks the client from futures it polls beside the queue.)
//! - What the adapter pushes into [`Link::inbound`] the loop receives.
//! - [`Link::finish`] publishes what is still queued and closes the link:
//!   later sends fail `Closed`.
//!
//! ```text
//!  rmcp serve loop                    send future (a task of rmcp's)
//!  transport.send(n) ──► queue ──► drainer: publish on gapless, in order ──► ack
//!  transport.send(r) ──► Link::outbound ──► adapter (host.rs): asks the client
//!  transport.receive() ◄── Link::inbound ◄── adapter (client responses, notifications)
//! ```

use rmcp::model::{
    ClientJsonRpcMessage, JsonRpcMessage, JsonRpcNotification, ServerJsonRpcMessage, ServerNotification,
};
use rmcp::service::RoleServer;
use rmcp::transport::Transport;
use std::collections::VecDeque;
use std::fmt;
use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard};
use tokio::sync::{mpsc, oneshot, Notify};

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

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

/// A notification of the service loop.
pub(crate) type Notification = JsonRpcNotification<ServerNotification>;

/// Where a link's notifications go: the request's gapless stream, or the
/// session's standalone one.
pub(crate) trait Publisher: Send + Sync + 'static {
    fn publish(&self, n: Notification) -> impl Future<Output = Result<(), LinkError>> + Send;
}

/// One message the service sent that is not a notification, and the
/// acknowledgement its send awaits. The message is boxed, and so is
/// anything queued: a tokio channel allocates its first block of 32 slots
/// when it is made, and a message is 360–376 bytes, so every link (one per
/// session and one per request) held 24 KiB of slots before it carried
/// anything; boxed, under 1 KiB.
pub(crate) struct Outbound {
    pub(crate) message: Box<ServerJsonRpcMessage>,
    pub(crate) ack: oneshot::Sender<Result<(), LinkError>>,
}

type Ack = oneshot::Sender<Result<(), LinkError>>;

/// The notifications sent and not yet published, in the loop's order.
#[derive(Default)]
struct Queue {
    notes: VecDeque<(Box<Notification>, Ack)>,
    /// A future is publishing what is queued.
    draining: bool,
    /// Sends fail `Closed`: the link was finished or dropped, or a drainer
    /// was dropped halfway (the service is being torn down).
    closed: bool,
}

struct Shared<P> {
    publisher: P,
    queue: Mutex<Queue>,
    /// Told when a drainer stops.
    idle: Notify,
}

impl<P: Publisher> Shared<P> {
    /// Queues `n`; its acknowledgement comes once it has been published.
    fn push(&self, n: Notification) -> Result<oneshot::Receiver<Result<(), LinkError>>, LinkError> {
        let (ack, acked) = oneshot::channel();
        let mut q = lock(&self.queue);
        if q.closed {
            return Err(LinkError::Closed);
        }
        q.notes.push_back((Box::new(n), ack));
        Ok(acked)
    }

    /// Becomes the drainer unless another future is.
    fn claim(&self) -> bool {
        let mut q = lock(&self.queue);
        !std::mem::replace(&mut q.draining, true)
    }

    /// As the drainer: publishes what is queued, in order, until nothing
    /// is; then stops being the drainer, and closes the queue if `close`.
    /// Dropped halfway, it closes the queue and fails what is in it.
    async fn drain(&self, close: bool) {
        let mut guard = Draining { shared: self, done: false };
        loop {
            let (n, ack) = {
                let mut q = lock(&self.queue);
                match q.notes.pop_front() {
                    Some(next) => next,
                    None => {
                        q.draining = false;
                        q.closed |= close;
                        guard.done = true;
                        break;
                    }
                }
            };
            let _ = ack.send(self.publisher.publish(*n).await);
        }
        drop(guard);
    }
}

/// Stops a drainer: tells whoever waits for the queue, and when the
/// drainer did not finish (its future was dropped) closes the queue and
/// drops what is queued, whose sends then fail `Closed`.
struct Draining<'a, P> {
    shared: &'a Shared<P>,
    done: bool,
}

impl<P> Drop for Draining<'_, P> {
    fn drop(&mut self) {
        if !self.done {
            let dropped = {
                let mut q = lock(&self.shared.queue);
                q.draining = false;
                q.closed = true;
                std::mem::take(&mut q.notes)
            };
            drop(dropped);
        }
        self.shared.idle.notify_waiters();
    }
}

/// The adapter's end.
pub(crate) struct Link<P> {
    /// What the service sent that is not a notification, in order.
    pub(crate) outbound: mpsc::UnboundedReceiver<Outbound>,
    /// What the service will receive.
    pub(crate) inbound: mpsc::UnboundedSender<Box<ClientJsonRpcMessage>>,
    shared: Arc<Shared<P>>,
}

impl<P> Drop for Link<P> {
    /// The adapter is gone (a request's call was dropped, or the session
    /// ended): what is queued and later sends fail `Closed`. A publish
    /// under way finishes. After [`Link::finish`] nothing is queued.
    fn drop(&mut self) {
        let dropped = {
            let mut q = lock(&self.shared.queue);
            q.closed = true;
            std::mem::take(&mut q.notes)
        };
        drop(dropped);
    }
}

impl<P: Publisher> Link<P> {
    /// Closes the link (later sends fail `Closed`) and publishes every
    /// notification queued so far, waiting for a drainer at work to stop
    /// first. What is queued before the request's response goes out ahead
    /// of it; closed first, so a task that keeps sending cannot hold the
    /// response back.
    pub(crate) async fn finish(&self) {
        let s = &*self.shared;
        lock(&s.queue).closed = true;
        loop {
            let stopped = s.idle.notified();
            tokio::pin!(stopped);
            stopped.as_mut().enable();
            if s.claim() {
                break;
            }
            stopped.await;
        }
        s.drain(true).await;
    }
}

/// The service's end: an rmcp [`Transport`].
pub(crate) struct LinkTransport<P> {
    shared: Arc<Shared<P>>,
    outbound: mpsc::UnboundedSender<Outbound>,
    inbound: mpsc::UnboundedReceiver<Box<ClientJsonRpcMessage>>,
}

/// A connected pair whose notifications go to `publisher`.
pub(crate) fn pair<P: Publisher>(publisher: P) -> (LinkTransport<P>, Link<P>) {
    let (out_tx, out_rx) = mpsc::unbounded_channel();
    let (in_tx, in_rx) = mpsc::unbounded_channel();
    let shared = Arc::new(Shared { publisher, queue: Mutex::default(), idle: Notify::new() });
    (
        LinkTransport { shared: Arc::clone(&shared), outbound: out_tx, inbound: in_rx },
        Link { outbound: out_rx, inbound: in_tx, shared },
    )
}

impl<P: Publisher> Transport<RoleServer> for LinkTransport<P> {
    type Error = LinkError;

    fn send(
        &mut self,
        message: ServerJsonRpcMessage,
    ) -> impl Future<Output = Result<(), LinkError>> + Send + 'static {
        // Queued here, in the loop's order, not when the future first runs.
        let (queued, shared) = match message {
            JsonRpcMessage::Notification(n) => (self.shared.push(n), Some(Arc::clone(&self.shared))),
            other => {
                let (ack, acked) = oneshot::channel();
                let sent = self.outbound.send(Outbound { message: Box::new(other), ack });
                (sent.map(|()| acked).map_err(|_| LinkError::Closed), None)
            }
        };
        async move {
            let mut acked = queued?;
            if let Some(shared) = shared {
                // Published already by another drainer (or dropped with the
                // link): nothing to do.
                match acked.try_recv() {
                    Ok(outcome) => return outcome,
                    Err(oneshot::error::TryRecvError::Closed) => return Err(LinkError::Closed),
                    Err(oneshot::error::TryRecvError::Empty) => {}
                }
                // A drainer publishes until the queue is empty, so its own
                // send also waits for what was queued behind it.
                if shared.claim() {
                    shared.drain(false).await;
                }
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
    use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
    use std::task::Poll;

    fn log(seq: u64) -> ServerJsonRpcMessage {
        let n = ServerNotification::LoggingMessageNotification(rmcp::model::Notification::new(
            LoggingMessageNotificationParam::new(LoggingLevel::Info, serde_json::json!({"seq": seq})),
        ));
        ServerJsonRpcMessage::notification(n)
    }

    fn seq_of(n: &Notification) -> u64 {
        serde_json::to_value(n).unwrap()["params"]["data"]["seq"].as_u64().unwrap()
    }

    /// Records what it publishes; refuses seq 2; holds seq `gate` until
    /// `open` is told.
    #[derive(Default)]
    struct Recorder {
        published: Mutex<Vec<u64>>,
        gate: u64,
        open: Notify,
    }

    impl Publisher for Arc<Recorder> {
        async fn publish(&self, n: Notification) -> Result<(), LinkError> {
            let seq = seq_of(&n);
            if seq == self.gate {
                self.open.notified().await;
            }
            lock(&self.published).push(seq);
            if seq == 2 {
                return Err(LinkError::Refused("full".into()));
            }
            Ok(())
        }
    }

    fn recorder(gate: u64) -> Arc<Recorder> {
        Arc::new(Recorder { gate, ..Recorder::default() })
    }

    /// Polls `f` once.
    fn poll_once<F: Future + Unpin>(f: &mut F) -> Poll<F::Output> {
        let waker = std::task::Waker::noop();
        std::pin::Pin::new(f).poll(&mut std::task::Context::from_waker(waker))
    }

    #[tokio::test]
    async fn notifications_are_published_in_send_order_and_wait_for_their_outcome() {
        let r = recorder(0);
        let (mut t, _link) = pair(Arc::clone(&r));
        // Futures created in order 1, 2, 3 but polled in reverse: the first
        // polled publishes all three, in the order they were sent.
        let f1 = t.send(log(1));
        let f2 = t.send(log(2));
        let f3 = t.send(log(3));
        let (r3, r2, r1) = tokio::spawn(async move { (f3.await, f2.await, f1.await) }).await.unwrap();
        assert_eq!(*lock(&r.published), vec![1, 2, 3]);
        assert_eq!((r1, r3), (Ok(()), Ok(())));
        assert_eq!(r2, Err(LinkError::Refused("full".into())));
    }

    #[tokio::test]
    async fn a_send_behind_a_paced_publish_waits_for_it() {
        let r = recorder(1);
        let (mut t, _link) = pair(Arc::clone(&r));
        let mut f1 = Box::pin(t.send(log(1)));
        let mut f3 = Box::pin(t.send(log(3)));
        assert!(poll_once(&mut f1).is_pending(), "held at the gate");
        assert!(poll_once(&mut f3).is_pending(), "3 waits behind 1");
        assert!(lock(&r.published).is_empty());
        r.open.notify_one();
        assert_eq!(f1.await, Ok(()));
        assert_eq!(f3.await, Ok(()));
        assert_eq!(*lock(&r.published), vec![1, 3]);
    }

    #[tokio::test]
    async fn finish_publishes_what_is_queued_then_closes() {
        let r = recorder(0);
        let (mut t, link) = pair(Arc::clone(&r));
        // Sent, not yet polled (rmcp's send tasks have not run).
        let f1 = t.send(log(1));
        let f3 = t.send(log(3));
        link.finish().await;
        assert_eq!(*lock(&r.published), vec![1, 3]);
        assert_eq!(t.send(log(4)).await, Err(LinkError::Closed));
        assert_eq!((f1.await, f3.await), (Ok(()), Ok(())));
        assert_eq!(*lock(&r.published), vec![1, 3]);
    }

    #[tokio::test]
    async fn finish_waits_for_a_drainer_at_work() {
        let r = recorder(1);
        let (mut t, link) = pair(Arc::clone(&r));
        let mut f1 = Box::pin(t.send(log(1)));
        assert!(poll_once(&mut f1).is_pending(), "held at the gate");
        let f3 = t.send(log(3));
        let mut finish = Box::pin(link.finish());
        assert!(poll_once(&mut finish).is_pending(), "1 is being published");
        r.open.notify_one();
        assert_eq!(f1.await, Ok(()));
        finish.await;
        assert_eq!(*lock(&r.published), vec![1, 3]);
        assert_eq!(f3.await, Ok(()));
    }

    #[tokio::test]
    async fn a_drainer_dropped_halfway_fails_the_rest_closed() {
        let r = recorder(1);
        let (mut t, _link) = pair(Arc::clone(&r));
        let mut f1 = Box::pin(t.send(log(1)));
        assert!(poll_once(&mut f1).is_pending(), "held at the gate");
        let f3 = t.send(log(3));
        drop(f1);
        assert_eq!(f3.await, Err(LinkError::Closed));
        assert_eq!(t.send(log(4)).await, Err(LinkError::Closed));
        assert!(lock(&r.published).is_empty());
    }

    #[tokio::test]
    async fn anything_else_goes_to_the_adapter_with_its_ack() {
        let r = recorder(0);
        let (mut t, mut link) = pair(Arc::clone(&r));
        let ping = ServerJsonRpcMessage::request(
            rmcp::model::ServerRequest::PingRequest(Default::default()),
            rmcp::model::NumberOrString::Number(7),
        );
        let sent = tokio::spawn(t.send(ping));
        let o = link.outbound.recv().await.unwrap();
        assert_eq!(serde_json::to_value(&o.message).unwrap()["method"], "ping");
        o.ack.send(Err(LinkError::Refused("no".into()))).unwrap();
        assert_eq!(sent.await.unwrap(), Err(LinkError::Refused("no".into())));
        assert!(lock(&r.published).is_empty());
    }

    /// Sends spawned as rmcp spawns them, on two workers, race for the
    /// drainer's role: every one is published once, in send order, and
    /// acknowledged (a lost drainer hand-over would hang: the timeout fails).
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn racing_sends_on_two_workers_are_all_published_in_order() {
        for _ in 0..20 {
            let r = recorder(0);
            let (mut t, _link) = pair(Arc::clone(&r));
            let sends: Vec<_> = (3..=400u64).map(|seq| tokio::spawn(t.send(log(seq)))).collect();
            let all = async {
                for s in sends {
                    assert_eq!(s.await.unwrap(), Ok(()));
                }
            };
            tokio::time::timeout(std::time::Duration::from_secs(10), all).await.expect("a send hung");
            assert_eq!(*lock(&r.published), (3..=400).collect::<Vec<_>>());
        }
    }

    #[tokio::test]
    async fn a_send_after_the_adapter_left_fails_closed() {
        let r = recorder(0);
        let (mut t, link) = pair(Arc::clone(&r));
        let queued = t.send(log(1));
        drop(link);
        assert_eq!(queued.await, Err(LinkError::Closed));
        assert_eq!(t.send(log(3)).await, Err(LinkError::Closed));
        assert!(t.receive().await.is_none());
        assert!(lock(&r.published).is_empty());
    }
}
