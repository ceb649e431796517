//! Batched appends (`docs/SPEC.md` §8.8): one queue per session, drained by
//! one task that sends everything queued as one `append` script call
//! while the previous call is answered. Publishers that do not wait for
//! each other share round trips; no event costs a round trip of its own
//! on a busy session.

use crate::store::{AppendError, Appended, RedisStore};
use bytes::Bytes;
use gapless::{SessionId, StreamId};
use std::future::Future;
use tokio::sync::{mpsc, oneshot};

/// At most this many events go into one script call.
pub const MAX_BATCH_EVENTS: usize = 1024;
/// At most this many payload bytes go into one script call (a single
/// larger event goes alone).
pub const MAX_BATCH_BYTES: usize = 4 << 20;

struct Item {
    stream: StreamId,
    payload: Bytes,
    done: oneshot::Sender<Result<Appended, AppendError>>,
}

/// A session's append queue. Cheap to clone; the draining task ends when
/// the last clone is dropped and the queue is empty.
///
/// Events are appended in the order [`Appender::push`] was called
/// (across clones too): seqs follow push order. A batch the store refuses
/// because of one event (its stream ended or is unknown, or it is larger
/// than the byte budget) fails that event, or every event of that stream,
/// and the rest of the batch is sent again at once, so one publisher's
/// refusal is never another's. A store failure fails the whole batch.
#[derive(Clone)]
pub struct Appender {
    tx: mpsc::UnboundedSender<Item>,
}

impl std::fmt::Debug for Appender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appender").finish_non_exhaustive()
    }
}

impl Appender {
    /// Starts the queue of session `id` on `store` (spawns its task on the
    /// current tokio runtime).
    pub fn new(store: RedisStore, id: SessionId) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(drain(store, id, rx));
        Appender { tx }
    }

    /// Queues one event. Its place in the session's order is fixed here,
    /// before the returned future is first polled; the future resolves
    /// when the store has answered its batch.
    pub fn push(
        &self,
        stream: StreamId,
        payload: Bytes,
    ) -> impl Future<Output = Result<Appended, AppendError>> + Send + 'static {
        let (done, rx) = oneshot::channel();
        let queued = self.tx.send(Item { stream, payload, done }).is_ok();
        async move {
            if !queued {
                return Err(AppendError::Store(crate::StoreError::Unavailable(
                    "the append queue has stopped".into(),
                )));
            }
            rx.await.unwrap_or_else(|_| {
                Err(AppendError::Store(crate::StoreError::Unavailable("the append queue has stopped".into())))
            })
        }
    }
}

async fn drain(store: RedisStore, id: SessionId, mut rx: mpsc::UnboundedReceiver<Item>) {
    let mut batch: Vec<Item> = Vec::new();
    while let Some(first) = rx.recv().await {
        let mut bytes = first.payload.len();
        batch.push(first);
        while batch.len() < MAX_BATCH_EVENTS && bytes < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(item) => {
                    bytes += item.payload.len();
                    batch.push(item);
                }
                Err(_) => break,
            }
        }
        send(&store, &id, &mut batch).await;
    }
}

/// Sends `batch` (emptied on return), failing only the events a refusal
/// names and resending the rest.
async fn send(store: &RedisStore, id: &SessionId, batch: &mut Vec<Item>) {
    while !batch.is_empty() {
        let events: Vec<(StreamId, Bytes)> = batch.iter().map(|i| (i.stream, i.payload.clone())).collect();
        match store.append(id, &events).await {
            Ok(appended) => {
                for (item, a) in batch.drain(..).zip(appended) {
                    let _ = item.done.send(Ok(a));
                }
            }
            Err(e @ (AppendError::StreamEnded(s) | AppendError::UnknownStream(s))) => {
                if fail_where(batch, |i| i.stream == s, &e) == 0 {
                    // The store named a stream the batch does not hold:
                    // resending would loop.
                    fail_where(batch, |_| true, &e);
                }
            }
            Err(e @ AppendError::PayloadTooLarge { index, .. }) => {
                let item = batch.remove(index.min(batch.len() - 1));
                let _ = item.done.send(Err(e));
            }
            Err(e @ AppendError::Store(_)) => {
                fail_where(batch, |_| true, &e);
            }
        }
    }
}

/// Fails the events `hit` picks; returns how many.
fn fail_where(batch: &mut Vec<Item>, hit: impl Fn(&Item) -> bool, e: &AppendError) -> usize {
    let before = batch.len();
    let mut kept = Vec::with_capacity(before);
    for item in batch.drain(..) {
        if hit(&item) {
            let _ = item.done.send(Err(e.clone()));
        } else {
            kept.push(item);
        }
    }
    *batch = kept;
    before - batch.len()
}
