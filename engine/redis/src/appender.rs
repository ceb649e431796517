//! Batched appends (`docs/SPEC.md` §8.8): one queue per session, drained by
//! one task. Everything queued goes into one `append` script call, and the
//! next batch is sent while Redis runs the previous one (two on the wire).
//! Publishers that do not wait for each other share round trips; no event
//! costs a round trip of its own on a busy session. The batches are
//! numbered, and the store writes a batch only after its predecessor, so
//! pipelining never reorders events.
//!
//! Two ways in:
//! - [`Appender::push`] waits for its event's batch and returns its seq (or
//!   its refusal);
//! - [`Appender::enqueue`] returns once the event is queued (group commit:
//!   a sequential publisher does not pay a round trip per event). It waits
//!   only while the queue holds [`MAX_QUEUED_EVENTS`] events or
//!   [`MAX_QUEUED_BYTES`] bytes not yet answered. What the store refuses of
//!   a stream's queued events is told to the next `enqueue` on that stream
//!   (refused with it, not queued), and every event queued behind the
//!   refused one on that stream fails with it unsent: what the store holds
//!   of a stream's queued events is always a prefix of them (but for a
//!   batch whose answer was lost, reported failed, which may be stored).
//!   [`Appender::barrier`] waits until everything queued before it is
//!   answered (a response goes after its stream's notifications).
//!
//! Every batch the store wrote is handed, in order, to the queue's sink (the
//! node's replica of the session applies its own events from the append's
//! answer instead of reading them back from the log).

use crate::client::{random_u64, RedisStore};
use crate::error::{AppendError, Guarded};
use crate::model::Appended;
use crate::sync::lock;
use bytes::Bytes;
use futures_util::future::BoxFuture;
use futures_util::stream::{FuturesOrdered, StreamExt as _};
use gapless::{Seq, SessionId, StreamId};
use std::collections::{HashMap, VecDeque};
use std::future::Future;
use std::sync::{Arc, Mutex};
use tokio::sync::{mpsc, oneshot, Semaphore};

/// At most this many events go into one script call.
pub const MAX_BATCH_EVENTS: usize = 1024;
/// At most this many payload bytes go into one script call (a single
/// larger event goes alone).
pub const MAX_BATCH_BYTES: usize = 4 << 20;
/// At most this many events [`Appender::enqueue`]d and not yet answered.
pub const MAX_QUEUED_EVENTS: usize = 4 * MAX_BATCH_EVENTS;
/// At most this many payload bytes [`Appender::enqueue`]d and not yet
/// answered (one larger event is let in alone).
pub const MAX_QUEUED_BYTES: usize = 2 * MAX_BATCH_BYTES;

/// One event the store wrote, as the queue's sink gets it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// Its seq.
    pub seq: Seq,
    /// Its stream.
    pub stream: StreamId,
    /// Its index in its stream, from 1.
    pub index: u64,
    /// Its nonce.
    pub check: u64,
    /// Its payload.
    pub payload: Bytes,
}

/// What gets each batch the store wrote, in order (from the queue's task).
pub type Sink = Arc<dyn Fn(&[Written]) + Send + Sync>;

/// Who waits for an event's outcome.
enum Done {
    /// [`Appender::push`]: its caller.
    Reply(oneshot::Sender<Result<Appended, AppendError>>),
    /// [`Appender::enqueue`]: nobody; a refusal is kept for the stream's
    /// next `enqueue`.
    Behind,
}

struct Item {
    stream: StreamId,
    payload: Bytes,
    done: Done,
    /// For an enqueued event: how many refusals of its stream were told
    /// when it was queued (see [`Broken`]).
    epoch: u64,
    /// Its place in the queue's order (given by the queue's task as it
    /// takes the event in).
    ticket: u64,
}

impl Item {
    /// Tells its outcome: to its caller, or, refused, to its stream's next
    /// `enqueue` (and its place in the queue's bounds is given back).
    fn settle(self, shared: &Shared, r: Result<Appended, AppendError>) {
        match self.done {
            Done::Reply(tx) => drop(tx.send(r)),
            Done::Behind => {
                if let Err(e) = r {
                    let mut broken = lock(&shared.broken);
                    let b = broken.entry(self.stream).or_default();
                    // A refusal since the last one told: kept to be told,
                    // and what was queued behind it fails unsent. An event
                    // queued before that was told is covered by it.
                    if b.epoch == self.epoch && b.untold.is_none() {
                        b.untold = Some(e);
                        b.last = Some((self.epoch, self.ticket));
                    }
                }
                shared.release(self.payload.len());
            }
        }
    }

    /// Whether an enqueued event is behind a refused event of its stream
    /// (queued after it, and before the refusal was told): it is failed
    /// unsent.
    fn is_behind_a_refusal(&self, shared: &Shared) -> bool {
        matches!(self.done, Done::Behind)
            && lock(&shared.broken)
                .get(&self.stream)
                .and_then(|b| b.last)
                .is_some_and(|(epoch, ticket)| self.epoch <= epoch && self.ticket > ticket)
    }
}

/// A stream's refusals of enqueued events: the one not told yet, how many
/// were told, and the last one kept (the epoch and ticket of its event).
///
/// Only the last is needed: an event behind an earlier refusal was queued
/// before the later refused event, so it was failed (or written before the
/// earlier refusal) before the later refusal was heard; the batches are
/// answered in order, and one refused stops those after it
/// (`Guarded::Order`) until it is settled.
#[derive(Default)]
struct Broken {
    untold: Option<AppendError>,
    epoch: u64,
    last: Option<(u64, u64)>,
}

enum Msg {
    Item(Item),
    /// Fired once everything queued before it is answered.
    Barrier(oneshot::Sender<()>),
}

/// What the queue's handles and its task share.
struct Shared {
    /// Events and payload bytes enqueued and not yet answered.
    events: Semaphore,
    bytes: Semaphore,
    /// Each stream's refusals of enqueued events.
    broken: Mutex<HashMap<StreamId, Broken>>,
    sink: Option<Sink>,
}

impl Shared {
    /// The permits an event of `len` bytes holds (one larger than the byte
    /// bound takes all of it).
    fn byte_permits(len: usize) -> u32 {
        len.clamp(1, MAX_QUEUED_BYTES) as u32
    }

    fn unanswered(&self) -> usize {
        MAX_QUEUED_EVENTS.saturating_sub(self.events.available_permits())
    }

    fn release(&self, len: usize) {
        self.events.add_permits(1);
        self.bytes.add_permits(Self::byte_permits(len) as usize);
    }
}

/// How many enqueued events a queue's store has not answered (0 once the
/// queue is gone); see [`Appender::gauge`].
#[derive(Clone, Debug)]
pub struct QueueGauge(std::sync::Weak<Shared>);

impl QueueGauge {
    /// See [`Appender::unanswered`].
    pub fn unanswered(&self) -> usize {
        self.0.upgrade().map_or(0, |s| s.unanswered())
    }
}

/// A session's append queue. Cheap to clone; the draining task ends when
/// the last clone is dropped and the queue is empty.
///
/// Events are appended in the order [`Appender::push`] or
/// [`Appender::enqueue`] was called (across clones too): seqs follow that
/// order. A batch the store refuses because of one event (its stream ended
/// or is unknown, or it is larger than the byte budget) fails that event,
/// or every event of that stream, and the rest of the batch is sent again
/// at once, so one publisher's refusal is never another's. A store failure
/// fails the whole batch.
#[derive(Clone)]
pub struct Appender {
    tx: mpsc::UnboundedSender<Msg>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for Appender {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Appender").finish_non_exhaustive()
    }
}

fn stopped() -> AppendError {
    unavailable("the append queue has stopped")
}

impl Appender {
    /// Starts the queue of session `id` on `store` (spawns its task on the
    /// current tokio runtime).
    pub fn new(store: RedisStore, id: SessionId) -> Self {
        Self::for_node(store, id, String::new(), None)
    }

    /// [`Appender::new`] for node `origin` (recorded with each event: that
    /// node's follower skips reading its own events back), handing each
    /// written batch to `sink`.
    pub fn for_node(store: RedisStore, id: SessionId, origin: String, sink: Option<Sink>) -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        let shared = Arc::new(Shared {
            events: Semaphore::new(MAX_QUEUED_EVENTS),
            bytes: Semaphore::new(MAX_QUEUED_BYTES),
            broken: Mutex::default(),
            sink,
        });
        tokio::spawn(drain(store, id, origin, Arc::clone(&shared), rx));
        Appender { tx, shared }
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
        let queued = self
            .tx
            .send(Msg::Item(Item { stream, payload, done: Done::Reply(done), epoch: 0, ticket: 0 }))
            .is_ok();
        async move {
            if !queued {
                return Err(stopped());
            }
            rx.await.unwrap_or_else(|_| Err(stopped()))
        }
    }

    /// Queues one event without waiting for the store (group commit): waits
    /// only for room in the queue. Refused, without queueing the event, with
    /// the refusal of an earlier enqueued event of `stream` not told yet
    /// (it is told once).
    pub async fn enqueue(&self, stream: StreamId, payload: Bytes) -> Result<(), AppendError> {
        let epoch = {
            let mut broken = lock(&self.shared.broken);
            match broken.get_mut(&stream) {
                Some(b) => {
                    if let Some(e) = b.untold.take() {
                        b.epoch += 1;
                        return Err(e);
                    }
                    b.epoch
                }
                None => 0,
            }
        };
        let events = self.shared.events.acquire().await.map_err(|_| stopped())?;
        let bytes = self
            .shared
            .bytes
            .acquire_many(Shared::byte_permits(payload.len()))
            .await
            .map_err(|_| stopped())?;
        // Given back when the event is answered (`Item::settle`).
        events.forget();
        bytes.forget();
        let len = payload.len();
        if self.tx.send(Msg::Item(Item { stream, payload, done: Done::Behind, epoch, ticket: 0 })).is_err() {
            self.shared.release(len);
            return Err(stopped());
        }
        Ok(())
    }

    /// Waits until every event queued before this call is answered.
    pub fn barrier(&self) -> impl Future<Output = ()> + Send + 'static {
        let (tx, rx) = oneshot::channel();
        let queued = self.tx.send(Msg::Barrier(tx)).is_ok();
        async move {
            if queued {
                let _ = rx.await;
            }
        }
    }

    /// How many [`Appender::enqueue`]d events the store has not answered.
    pub fn unanswered(&self) -> usize {
        self.shared.unanswered()
    }

    /// [`Appender::unanswered`], readable without keeping the queue alive
    /// (what its sink holds may keep a gauge).
    pub fn gauge(&self) -> QueueGauge {
        QueueGauge(Arc::downgrade(&self.shared))
    }

    /// Whether an enqueued event of some stream was refused and its
    /// publisher not told yet (its next `enqueue` on that stream will be).
    pub fn refused_untold(&self) -> bool {
        lock(&self.shared.broken).values().any(|b| b.untold.is_some())
    }

    /// The refusal of an enqueued event of `stream` not told to its
    /// publisher yet, if any, told now (as to the stream's next `enqueue`:
    /// events enqueued after this are not behind it).
    pub fn tell(&self, stream: StreamId) -> Option<AppendError> {
        let mut broken = lock(&self.shared.broken);
        let b = broken.get_mut(&stream)?;
        let e = b.untold.take()?;
        b.epoch += 1;
        Some(e)
    }

    /// The refusal of an enqueued event of `stream` not told to its
    /// publisher yet, if any; forgets it (the stream is over).
    pub fn forget(&self, stream: StreamId) -> Option<AppendError> {
        lock(&self.shared.broken).remove(&stream).and_then(|b| b.untold)
    }
}

async fn drain(
    store: RedisStore,
    id: SessionId,
    origin: String,
    shared: Arc<Shared>,
    mut rx: mpsc::UnboundedReceiver<Msg>,
) {
    let guard = format!("{:016x}", random_u64());
    let mut q = Queue {
        store,
        id,
        guard,
        origin,
        shared,
        taken: 0,
        next: 1,
        last: None,
        in_flight: FuturesOrdered::new(),
    };
    // Batches to send again, in order, before anything new: those refused
    // as out of order (nothing of them was written), and what is left of a
    // refused one.
    let mut again: VecDeque<Vec<Item>> = VecDeque::new();
    // A barrier waiting for everything before it to be answered.
    let mut barrier: Option<oneshot::Sender<()>> = None;
    let mut closed = false;
    loop {
        if q.in_flight.is_empty() && !again.is_empty() {
            q.resend(&mut again).await;
            continue;
        }
        if q.in_flight.is_empty() && again.is_empty() {
            if let Some(b) = barrier.take() {
                let _ = b.send(());
            }
        }
        let room = !closed && again.is_empty() && barrier.is_none() && q.in_flight.len() < DEPTH;
        tokio::select! {
            biased;
            Some((items, number, r)) = q.in_flight.next(), if !q.in_flight.is_empty() => {
                if let Some(rest) = q.settle(items, number, r, false) {
                    again.push_back(rest);
                }
            }
            msg = rx.recv(), if room => match msg {
                Some(Msg::Item(first)) => {
                    let batch = q.batch(first, &mut rx, &mut barrier);
                    q.send_batch(batch);
                }
                Some(Msg::Barrier(b)) => barrier = Some(b),
                None => closed = true,
            },
            else => {
                if let Some(b) = barrier.take() {
                    let _ = b.send(());
                }
                return; // closed, nothing in flight, nothing to resend
            }
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
    /// The node recorded with each event (`""`: none).
    origin: String,
    shared: Arc<Shared>,
    /// How many events the queue took in (their tickets: 1, 2, ...).
    taken: u64,
    /// The number of the next batch sent.
    next: u64,
    /// The number of the last batch the store wrote, as last heard.
    last: Option<u64>,
    in_flight: FuturesOrdered<BoxFuture<'static, Sent>>,
}

impl Queue {
    /// A batch: `first` and what the channel holds ready after it, up to
    /// the batch bounds or a barrier (kept in `barrier`: what comes after it
    /// waits for it). Enqueued events behind a refusal of their stream
    /// fail unsent.
    fn batch(
        &mut self,
        first: Item,
        rx: &mut mpsc::UnboundedReceiver<Msg>,
        barrier: &mut Option<oneshot::Sender<()>>,
    ) -> Vec<Item> {
        let mut batch = Vec::new();
        let mut bytes = 0;
        let (shared, taken) = (&self.shared, &mut self.taken);
        let mut take = |mut item: Item, batch: &mut Vec<Item>, bytes: &mut usize| {
            *taken += 1;
            item.ticket = *taken;
            if item.is_behind_a_refusal(shared) {
                item.settle(shared, Err(unavailable("behind a refused event of its stream")));
            } else {
                *bytes += item.payload.len();
                batch.push(item);
            }
        };
        take(first, &mut batch, &mut bytes);
        while batch.len() < MAX_BATCH_EVENTS && bytes < MAX_BATCH_BYTES {
            match rx.try_recv() {
                Ok(Msg::Item(item)) => take(item, &mut batch, &mut bytes),
                Ok(Msg::Barrier(b)) => {
                    *barrier = Some(b);
                    break;
                }
                Err(_) => break,
            }
        }
        batch
    }

    /// Sends a batch (numbered next), unless it is empty.
    fn send_batch(&mut self, batch: Vec<Item>) {
        if !batch.is_empty() {
            let number = self.next;
            self.send(batch, number);
        }
    }

    /// Puts batch `number` on the wire. Its future is polled (the command
    /// handed to the connection) before the next batch is made: `select!`
    /// above is biased to the batches in flight.
    fn send(&mut self, items: Vec<Item>, number: u64) {
        self.next = number + 1;
        let (store, id, guard, origin) =
            (self.store.clone(), self.id, self.guard.clone(), self.origin.clone());
        let events: Vec<(StreamId, Bytes)> = items.iter().map(|i| (i.stream, i.payload.clone())).collect();
        self.in_flight.push_back(Box::pin(async move {
            let r = store.append_guarded(&id, Some((&guard, number)), &origin, &events).await;
            (items, number, r)
        }));
    }

    /// Sends the batches of `again` alone, one at a time, in order,
    /// numbered after the store's last; events behind a refusal of their
    /// stream fail unsent.
    async fn resend(&mut self, again: &mut VecDeque<Vec<Item>>) {
        let mut attempts = 0;
        while let Some(items) = again.pop_front() {
            let shared = Arc::clone(&self.shared);
            let items = fail_where(
                &shared,
                items,
                |i| i.is_behind_a_refusal(&shared),
                &unavailable("behind a refused event of its stream"),
            );
            if items.is_empty() {
                continue;
            }
            let number = self.last.map_or(self.next, |l| l + 1);
            self.send(items, number);
            let (items, number, r) = self.in_flight.next().await.expect("one in flight");
            if let Err(Guarded::Order(_)) = r {
                attempts += 1;
                if attempts == ATTEMPTS {
                    fail_where(
                        &shared,
                        items,
                        |_| true,
                        &unavailable("the store kept refusing the batch's order"),
                    );
                    attempts = 0;
                    continue;
                }
            } else {
                attempts = 0;
            }
            if let Some(rest) = self.settle(items, number, r, true) {
                again.push_front(rest);
            }
        }
    }

    /// Hands out a batch's answer: seqs to its events (and the batch to the
    /// sink); a refusal to the events it names. Returns what is to be sent
    /// again: the rest of a refused batch, or all of one refused as out of
    /// order.
    ///
    /// `alone`: the batch was the only one on the wire (sent again), so an
    /// order refusal tells the store's number now; a pipelined batch's may
    /// be older than an answer settled before it.
    fn settle(
        &mut self,
        items: Vec<Item>,
        number: u64,
        r: Result<Vec<Appended>, Guarded>,
        alone: bool,
    ) -> Option<Vec<Item>> {
        let shared = Arc::clone(&self.shared);
        match r {
            Ok(appended) => {
                self.last = Some(number);
                if let Some(sink) = &shared.sink {
                    let written: Vec<Written> = items
                        .iter()
                        .zip(&appended)
                        .map(|(i, a)| Written {
                            seq: a.seq,
                            stream: i.stream,
                            index: a.index,
                            check: a.check,
                            payload: i.payload.clone(),
                        })
                        .collect();
                    sink(&written);
                }
                for (item, a) in items.into_iter().zip(appended) {
                    item.settle(&shared, Ok(a));
                }
                None
            }
            Err(Guarded::Order(last)) if last >= number => {
                // The store wrote this batch's number already (a copy of it
                // sent again after later ones): whether these events are in
                // the log is not known here. Never written twice.
                self.last = Some(self.last.map_or(last, |l| l.max(last)));
                fail_where(
                    &shared,
                    items,
                    |_| true,
                    &unavailable("the batch's outcome is unknown (sent again out of order)"),
                );
                None
            }
            Err(Guarded::Order(last)) => {
                // What the store said when it ran this batch. A pipelined
                // one may have run before an earlier one (each sent again
                // after NOSCRIPT or a reconnection), whose answer, settled
                // first, told a later number: the highest heard stands. One
                // sent alone tells the number now (lower after the store
                // lost it: a restart, a failover).
                self.last = if alone { Some(last) } else { Some(self.last.map_or(last, |l| l.max(last))) };
                Some(items)
            }
            Err(Guarded::Refused(e @ (AppendError::StreamEnded(_) | AppendError::UnknownStream(_)))) => {
                // (Read from `e`: bindings after `@` need Rust 1.91.)
                let s = match &e {
                    AppendError::StreamEnded(s) | AppendError::UnknownStream(s) => *s,
                    _ => unreachable!("matched above"),
                };
                let n = items.len();
                let mut rest = fail_where(&shared, items, |i| i.stream == s, &e);
                if rest.len() == n {
                    // The store named a stream the batch does not hold:
                    // resending would loop.
                    rest = fail_where(&shared, rest, |_| true, &e);
                }
                (!rest.is_empty()).then_some(rest)
            }
            Err(Guarded::Refused(e @ AppendError::PayloadTooLarge { index, .. })) => {
                let mut k = 0;
                let rest = fail_where(
                    &shared,
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
                fail_where(&shared, items, |_| true, &e);
                None
            }
        }
    }
}

fn unavailable(why: &str) -> AppendError {
    AppendError::Store(crate::StoreError::Unavailable(why.into()))
}

/// Fails the events `hit` picks; returns the others, in order.
fn fail_where(
    shared: &Shared,
    items: Vec<Item>,
    mut hit: impl FnMut(&Item) -> bool,
    e: &AppendError,
) -> Vec<Item> {
    let mut kept = Vec::with_capacity(items.len());
    for item in items {
        if hit(&item) {
            item.settle(shared, Err(e.clone()));
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
        assert!(matches!(s.append_guarded(&id, Some(("q", 2)), "", &ev(1)).await, Err(Guarded::Order(0))));
        assert_eq!(seq(s.append_guarded(&id, Some(("q", 1)), "", &ev(1)).await), 1);
        assert!(matches!(s.append_guarded(&id, Some(("q", 3)), "", &ev(1)).await, Err(Guarded::Order(1))));
        let two_events = [(StreamId(1), Bytes::from_static(b"y")), (StreamId(1), Bytes::from_static(b"z"))];
        assert!(
            matches!(s.append_guarded(&id, Some(("q", 1)), "", &two_events).await, Err(Guarded::Order(1))),
            "not a copy of batch 1 (another size): refused"
        );
        assert_eq!(seq(s.append_guarded(&id, Some(("q", 2)), "", &ev(1)).await), 2);
        // The same batch sent again (a retry whose first answer was lost):
        // answered as before, written once.
        assert_eq!(seq(s.append_guarded(&id, Some(("q", 2)), "", &ev(1)).await), 2, "not written twice");
        assert!(matches!(
            s.append_guarded(&id, Some(("q", 3)), "", &ev(two.0)).await,
            Err(Guarded::Refused(AppendError::StreamEnded(_)))
        ));
        assert!(matches!(s.append_guarded(&id, Some(("q", 4)), "", &ev(1)).await, Err(Guarded::Order(2))));
        assert_eq!(
            seq(s.append_guarded(&id, Some(("q", 3)), "", &ev(1)).await),
            3,
            "a refused batch does not count"
        );
        // Another queue has its own numbers; an unguarded append none.
        assert_eq!(seq(s.append_guarded(&id, Some(("r", 1)), "", &ev(1)).await), 4);
        assert_eq!(s.append(&id, &ev(1)).await.unwrap()[0].seq.0, 5);
    }
}
