//! Batched appends (`docs/SPEC.md` §8.8): one queue per session, drained by
//! one task. Everything queued goes into one `append` script call, and the
//! next batch is sent while Redis runs the previous one (two on the wire).
//! Publishers that do not wait for each other share round trips; no event
//! costs a round trip of its own on a busy session. The batches are
//! numbered, and the store writes a batch only after its predecessor, so
//! pipelining never reorders events.

use crate::client::{random_u64, RedisStore};
use crate::error::{AppendError, Guarded};
use crate::model::Appended;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesOrdered, StreamExt as _};
use gapless::{SessionId, StreamId};
use std::collections::VecDeque;
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
    let guard = format!("{:016x}", random_u64());
    let mut q = Queue { store, id, guard, next: 1, last: None, in_flight: FuturesOrdered::new() };
    // Batches to send again, in order, before anything new: those refused
    // as out of order (nothing of them was written), and what is left of a
    // refused one.
    let mut again: VecDeque<Vec<Item>> = VecDeque::new();
    let mut closed = false;
    loop {
        if q.in_flight.is_empty() && !again.is_empty() {
            q.resend(&mut again).await;
            continue;
        }
        tokio::select! {
            biased;
            Some((items, number, r)) = q.in_flight.next(), if !q.in_flight.is_empty() => {
                if let Some(rest) = q.settle(items, number, r) {
                    again.push_back(rest);
                }
            }
            item = rx.recv(), if !closed && again.is_empty() && q.in_flight.len() < DEPTH => match item {
                Some(first) => {
                    let mut bytes = first.payload.len();
                    let mut batch = vec![first];
                    while batch.len() < MAX_BATCH_EVENTS && bytes < MAX_BATCH_BYTES {
                        match rx.try_recv() {
                            Ok(item) => {
                                bytes += item.payload.len();
                                batch.push(item);
                            }
                            Err(_) => break,
                        }
                    }
                    let number = q.next;
                    q.send(batch, number);
                }
                None => closed = true,
            },
            else => return, // closed, nothing in flight, nothing to resend
        }
    }
}

/// Batches on the wire at once: the next is sent while the previous is
/// executed, so that the node's work on one overlaps Redis's on the other.
const DEPTH: usize = 2;

/// A refused-as-out-of-order batch is sent alone this many times at most.
const ATTEMPTS: usize = 4;

type Sent = (Vec<Item>, u64, Result<Vec<Appended>, Guarded>);

struct Queue {
    store: RedisStore,
    id: SessionId,
    /// This queue's name in the store: its batches are numbered, and the
    /// store writes batch `k` only after batch `k - 1` (`lua/append.lua`),
    /// so that pipelined batches are never written out of order, whatever
    /// the connection does with them (a reconnection, a retry).
    guard: String,
    /// The number of the next batch sent.
    next: u64,
    /// The number of the last batch the store wrote, as last heard.
    last: Option<u64>,
    in_flight: FuturesOrdered<BoxFuture<'static, Sent>>,
}

impl Queue {
    /// Puts batch `number` on the wire. Its future is polled (the command
    /// handed to the connection) before the next batch is made: `select!`
    /// above is biased to the batches in flight.
    fn send(&mut self, items: Vec<Item>, number: u64) {
        self.next = number + 1;
        let (store, id, guard) = (self.store.clone(), self.id, self.guard.clone());
        let events: Vec<(StreamId, Bytes)> = items.iter().map(|i| (i.stream, i.payload.clone())).collect();
        self.in_flight.push_back(Box::pin(async move {
            let r = store.append_guarded(&id, Some((&guard, number)), &events).await;
            (items, number, r)
        }));
    }

    /// Sends the batches of `again` alone, one at a time, in order,
    /// numbered after the store's last.
    async fn resend(&mut self, again: &mut VecDeque<Vec<Item>>) {
        let mut attempts = 0;
        while let Some(items) = again.pop_front() {
            let number = self.last.map_or(self.next, |l| l + 1);
            self.send(items, number);
            let (items, number, r) = self.in_flight.next().await.expect("one in flight");
            if let Err(Guarded::Order(_)) = r {
                attempts += 1;
                if attempts == ATTEMPTS {
                    fail_where(items, |_| true, &unavailable("the store kept refusing the batch's order"));
                    attempts = 0;
                    continue;
                }
            } else {
                attempts = 0;
            }
            if let Some(rest) = self.settle(items, number, r) {
                again.push_front(rest);
            }
        }
    }

    /// Hands out a batch's answer: seqs to its events; a refusal to the
    /// events it names. Returns what is to be sent again: the rest of a
    /// refused batch, or all of one refused as out of order.
    fn settle(
        &mut self,
        items: Vec<Item>,
        number: u64,
        r: Result<Vec<Appended>, Guarded>,
    ) -> Option<Vec<Item>> {
        match r {
            Ok(appended) => {
                self.last = Some(number);
                for (item, a) in items.into_iter().zip(appended) {
                    let _ = item.done.send(Ok(a));
                }
                None
            }
            Err(Guarded::Order(last)) if last >= number => {
                // The store wrote this batch's number already (a copy of it
                // sent again after later ones): whether these events are in
                // the log is not known here. Never written twice.
                self.last = Some(last);
                fail_where(
                    items,
                    |_| true,
                    &unavailable("the batch's outcome is unknown (sent again out of order)"),
                );
                None
            }
            Err(Guarded::Order(last)) => {
                self.last = Some(last);
                Some(items)
            }
            Err(Guarded::Refused(e @ (AppendError::StreamEnded(s) | AppendError::UnknownStream(s)))) => {
                let n = items.len();
                let mut rest = fail_where(items, |i| i.stream == s, &e);
                if rest.len() == n {
                    // The store named a stream the batch does not hold:
                    // resending would loop.
                    rest = fail_where(rest, |_| true, &e);
                }
                (!rest.is_empty()).then_some(rest)
            }
            Err(Guarded::Refused(e @ AppendError::PayloadTooLarge { index, .. })) => {
                let mut k = 0;
                let rest = fail_where(
                    items,
                    |_| {
                        k += 1;
                        k - 1 == index
                    },
                    &e,
                );
                (!rest.is_empty()).then_some(rest)
            }
            Err(Guarded::Refused(e @ AppendError::Store(_))) => {
                fail_where(items, |_| true, &e);
                None
            }
        }
    }
}

fn unavailable(why: &str) -> AppendError {
    AppendError::Store(crate::StoreError::Unavailable(why.into()))
}

/// Fails the events `hit` picks; returns the others, in order.
fn fail_where(items: Vec<Item>, mut hit: impl FnMut(&Item) -> bool, e: &AppendError) -> Vec<Item> {
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        if hit(&item) {
            let _ = item.done.send(Err(e.clone()));
        } else {
            kept.push(item);
        }
    }
    kept
}

#[cfg(test)]
mod tests {
    use crate::error::Guarded;
    use crate::testing::RedisServer;
    use crate::{AppendError, RedisStore, StoreConfig};
    use bytes::Bytes;
    use gapless::{SessionId, StreamId};

    /// The store writes batch `k` of a queue only after batch `k - 1`; a
    /// refused batch does not count.
    #[tokio::test]
    async fn the_store_writes_a_queues_batches_only_in_their_order() {
        let redis = RedisServer::start(&[]);
        let s = RedisStore::connect(&redis.url(), StoreConfig::default()).await.unwrap();
        let id = SessionId::random();
        s.create(id, None).await.unwrap();
        let two = s.open_stream(&id).await.unwrap();
        s.end_stream(&id, two).await.unwrap();
        let ev = |stream| [(StreamId(stream), Bytes::from_static(b"x"))];
        let seq = |r: Result<Vec<crate::Appended>, Guarded>| r.unwrap()[0].seq.0;
        // A queue the store has no number of starts at 1.
        assert!(matches!(s.append_guarded(&id, Some(("q", 2)), &ev(1)).await, Err(Guarded::Order(0))));
        assert_eq!(seq(s.append_guarded(&id, Some(("q", 1)), &ev(1)).await), 1);
        assert!(matches!(s.append_guarded(&id, Some(("q", 3)), &ev(1)).await, Err(Guarded::Order(1))));
        let two_events = [(StreamId(1), Bytes::from_static(b"y")), (StreamId(1), Bytes::from_static(b"z"))];
        assert!(
            matches!(s.append_guarded(&id, Some(("q", 1)), &two_events).await, Err(Guarded::Order(1))),
            "not a copy of batch 1 (another size): refused"
        );
        assert_eq!(seq(s.append_guarded(&id, Some(("q", 2)), &ev(1)).await), 2);
        // The same batch sent again (a retry whose first answer was lost):
        // answered as before, written once.
        assert_eq!(seq(s.append_guarded(&id, Some(("q", 2)), &ev(1)).await), 2, "not written twice");
        assert!(matches!(
            s.append_guarded(&id, Some(("q", 3)), &ev(two.0)).await,
            Err(Guarded::Refused(AppendError::StreamEnded(_)))
        ));
        assert!(matches!(s.append_guarded(&id, Some(("q", 4)), &ev(1)).await, Err(Guarded::Order(2))));
        assert_eq!(
            seq(s.append_guarded(&id, Some(("q", 3)), &ev(1)).await),
            3,
            "a refused batch does not count"
        );
        // Another queue has its own numbers; an unguarded append none.
        assert_eq!(seq(s.append_guarded(&id, Some(("r", 1)), &ev(1)).await), 4);
        assert_eq!(s.append(&id, &ev(1)).await.unwrap()[0].seq.0, 5);
    }
}
