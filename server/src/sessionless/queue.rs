//! The queue between what produces a 2026-07-28 response stream's messages
//! (a handler's notifications, a listen stream's announcements and task
//! states, a task stream's events) and the response that writes them:
//! bounded in messages ([`QUEUE_MESSAGES`]) and in bytes ([`QUEUE_BYTES`]),
//! so that a client that stops reading holds a bounded share of the
//! server's memory whatever the messages' size. The producer waits while
//! either bound is reached; a message larger than the byte bound waits for
//! the queue to empty, then goes alone.

use bytes::Bytes;
use std::sync::Arc;
use tokio::sync::{mpsc, OwnedSemaphorePermit, Semaphore};

/// Most messages a queue holds.
pub(crate) const QUEUE_MESSAGES: usize = 64;

/// Most bytes of messages a queue holds (a single larger message is let
/// through alone).
pub(crate) const QUEUE_BYTES: usize = 256 << 10;

/// A new queue: its sending and receiving ends.
pub(crate) fn queue() -> (QueueTx, QueueRx) {
    let (tx, rx) = mpsc::channel(QUEUE_MESSAGES);
    (QueueTx { tx, bytes: Arc::new(Semaphore::new(QUEUE_BYTES)) }, QueueRx { rx })
}

/// The sending end (cloneable).
#[derive(Clone, Debug)]
pub(crate) struct QueueTx {
    /// Each message with the byte permits it holds until it is received.
    tx: mpsc::Sender<(Bytes, OwnedSemaphorePermit)>,
    bytes: Arc<Semaphore>,
}

/// The receiver is gone: the message was not queued.
#[derive(Debug)]
pub(crate) struct Closed;

impl QueueTx {
    /// Queues `message`, waiting while the queue is full in messages or
    /// bytes. `Closed` once the receiving end is gone.
    pub(crate) async fn send(&self, message: Bytes) -> Result<(), Closed> {
        // At least one permit, so that empty messages count against the
        // message bound only; at most all of them (a larger one goes alone).
        let n = message.len().clamp(1, QUEUE_BYTES) as u32;
        let permit = tokio::select! {
            p = Arc::clone(&self.bytes).acquire_many_owned(n) => p.expect("the semaphore is never closed"),
            _ = self.tx.closed() => return Err(Closed),
        };
        self.tx.send((message, permit)).await.map_err(|_| Closed)
    }

    /// Resolves once the receiving end is gone.
    pub(crate) async fn closed(&self) {
        self.tx.closed().await
    }
}

/// The receiving end.
#[derive(Debug)]
pub(crate) struct QueueRx {
    rx: mpsc::Receiver<(Bytes, OwnedSemaphorePermit)>,
}

impl QueueRx {
    /// The next message (its bytes leave the queue's count), or `None` once
    /// every sender is gone and the queue is empty.
    pub(crate) async fn recv(&mut self) -> Option<Bytes> {
        self.rx.recv().await.map(|(m, _)| m)
    }

    /// The next message if one is queued now.
    pub(crate) fn try_recv(&mut self) -> Option<Bytes> {
        self.rx.try_recv().ok().map(|(m, _)| m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test]
    async fn bytes_and_messages_are_bounded_and_a_large_message_goes_alone() {
        let (tx, mut rx) = queue();
        // 32 of these fill the bytes, half the messages.
        let piece = Bytes::from(vec![b'x'; 8 << 10]);
        for _ in 0..QUEUE_MESSAGES {
            tx.send(Bytes::new()).await.unwrap();
        }
        let full = tokio::time::timeout(Duration::from_millis(50), tx.send(Bytes::new())).await;
        assert!(full.is_err(), "the 65th message waits");
        while rx.try_recv().is_some() {}
        // Bytes: 256 KiB fit, the next piece waits until one is received.
        for _ in 0..QUEUE_BYTES / piece.len() {
            tx.send(piece.clone()).await.unwrap();
        }
        let over = tokio::time::timeout(Duration::from_millis(50), tx.send(piece.clone())).await;
        assert!(over.is_err(), "over the byte bound it waits");
        rx.recv().await.unwrap();
        tokio::time::timeout(Duration::from_secs(5), tx.send(piece.clone())).await.unwrap().unwrap();
        // A message larger than the bound waits for the queue to empty.
        let big = Bytes::from(vec![b'y'; QUEUE_BYTES * 2]);
        let sender = tx.clone();
        let pending = tokio::spawn(async move { sender.send(big).await });
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(!pending.is_finished(), "the large message waits while the queue holds bytes");
        while rx.try_recv().is_some() {}
        tokio::time::timeout(Duration::from_secs(5), pending).await.unwrap().unwrap().unwrap();
        assert_eq!(rx.recv().await.unwrap().len(), QUEUE_BYTES * 2);
        // The receiver gone: a waiting send ends.
        for _ in 0..QUEUE_BYTES / piece.len() {
            tx.send(piece.clone()).await.unwrap();
        }
        let sender = tx.clone();
        let waiting = tokio::spawn(async move { sender.send(Bytes::from_static(b"z")).await });
        tokio::time::sleep(Duration::from_millis(20)).await;
        drop(rx);
        assert!(tokio::time::timeout(Duration::from_secs(5), waiting).await.unwrap().unwrap().is_err());
    }
}
