//! The one way into a replica (`docs/SPEC.md` §8.1, §8.8): the node's own
//! events from its append queue's answers (the queue's sink), and the log's
//! entries its follower reads (other nodes' events, streams' ends), applied
//! in seq order under one lock. An event enters the replica only once the
//! store holds it: the sink gets a batch after the store wrote it.
//!
//! A replica's payloads carry a prefix of [`PREFIX`] bytes: the event's
//! nonce (its wire id's check) and its index in its stream, as the store
//! has them; the transport strips it when it writes an event.

use crate::vocab::sync::lock;
use bytes::{BufMut, Bytes, BytesMut};
use gapless::{Next, Seq, Session, StreamId};
use gapless_redis::{QueueGauge, TailEntry, Written};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock, Weak};
use std::time::Duration;
use tokio::sync::watch;

/// Bytes before a replica event's payload: its check and its index in its
/// stream, both little-endian u64.
pub(crate) const PREFIX: usize = 16;

/// A replica payload: `check`, `index`, then `payload`.
pub(crate) fn wrap(check: u64, index: u64, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(PREFIX + payload.len());
    b.put_u64_le(check);
    b.put_u64_le(index);
    b.put_slice(payload);
    b.freeze()
}

/// The check and the index in its stream of a replica event (`None` for one
/// not written by [`wrap`]).
pub(crate) fn position(payload: &[u8]) -> Option<(u64, u64)> {
    let (c, i) = (payload.get(..8)?, payload.get(8..PREFIX)?);
    Some((u64::from_le_bytes(c.try_into().ok()?), u64::from_le_bytes(i.try_into().ok()?)))
}

/// What a replica's follower calls when its session is gone from the store
/// (or its replica is stale): drops that replica, if it is still the one
/// the node serves.
pub(crate) type OnGone = Arc<dyn Fn(&Arc<Session>) + Send + Sync>;

/// How long a follower waits for its node's own events to come from the
/// append queue's answers before it reads them back from the log.
const OWN_GRACE: Duration = Duration::from_secs(1);

/// The node's own events held behind a gap, at most (by count and by
/// payload bytes): four times what its queue may have unanswered. Past it
/// the replica is given up (its readers end; their clients resume from the
/// store).
const MAX_HELD_EVENTS: usize = 4 * gapless_redis::MAX_QUEUED_EVENTS;
const MAX_HELD_BYTES: usize = 4 * gapless_redis::MAX_QUEUED_BYTES;

/// What applying one log entry came to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Step {
    /// Applied, or there already.
    Done,
    /// The node's own event at this seq, without its payload, which the
    /// queue's answer has not brought yet.
    NeedOwn(u64),
    /// The replica cannot take it (a hole: the store trimmed events this
    /// replica never got).
    Broken,
}

/// A replica's writer: its own events from the sink, the rest from the
/// follower.
pub(crate) struct Applier {
    session: Weak<Session>,
    /// The replica's head after each change (what a resume waits on).
    applied: watch::Sender<u64>,
    /// The node's own events the store wrote, held while events of other
    /// nodes before them are not in the replica yet. Always drained: its
    /// first seq is above the replica's head + 1.
    pending: Mutex<Held>,
    /// The session's append queue: how many of its events the store has
    /// not answered (set once, when the queue is made).
    queue: OnceLock<QueueGauge>,
    on_gone: OnGone,
}

/// Own events held behind a gap, and their payload bytes.
#[derive(Default)]
struct Held {
    events: BTreeMap<u64, Written>,
    bytes: usize,
}

impl Held {
    fn insert(&mut self, w: &Written) {
        if self.events.insert(w.seq.0, w.clone()).is_none() {
            self.bytes += w.payload.len();
        }
    }

    fn too_many(&self) -> bool {
        self.events.len() > MAX_HELD_EVENTS || self.bytes > MAX_HELD_BYTES
    }

    /// Whether a gap before the held events waits for the follower.
    fn gap(&self, head: u64) -> bool {
        self.events.keys().next().is_some_and(|&first| first > head + 1)
    }
}

impl Applier {
    pub(super) fn new(session: &Arc<Session>, head: u64, on_gone: OnGone) -> Arc<Self> {
        Arc::new(Applier {
            session: Arc::downgrade(session),
            applied: watch::channel(head).0,
            pending: Mutex::default(),
            queue: OnceLock::new(),
            on_gone,
        })
    }

    pub(super) fn set_queue(&self, gauge: QueueGauge) {
        let _ = self.queue.set(gauge);
    }

    /// The seq the replica has applied, to wait on.
    pub(super) fn applied(&self) -> watch::Receiver<u64> {
        self.applied.subscribe()
    }

    /// Events of this node's queue not in the replica yet: not answered by
    /// the store, or held behind a gap (what a paced publish counts ahead).
    pub(crate) fn ahead(&self) -> u64 {
        let queued = self.queue.get().map_or(0, QueueGauge::unanswered);
        (queued + lock(&self.pending).events.len()) as u64
    }

    /// The sink: a batch the store wrote for this node's queue, in order.
    pub(super) fn written(&self, batch: &[Written]) {
        let Some(session) = self.session.upgrade() else { return };
        let why = {
            let mut held = lock(&self.pending);
            let head = session.reader().head().0;
            let mut why = None;
            for w in batch {
                if w.seq.0 <= head {
                    // Read back whole by the follower (its answer was late),
                    // or the replica holds another event at this seq: a
                    // failover lost it and the store gave the seq again.
                    if check_at(&session, w.seq.0).is_some_and(|c| c != w.check) {
                        why = Some("replica no longer matches the store");
                    }
                } else {
                    held.insert(w);
                }
            }
            if why.is_none() && !drain(&session, &mut held) {
                why = Some("replica refused an event");
            }
            if why.is_none() && held.too_many() {
                why = Some("too many of the node's own events wait for another node's");
            }
            why
        };
        self.publish_head(&session);
        if let Some(why) = why {
            tracing::warn!(session = %crate::vocab::secret::SessionTag::of_id(&session.id()), why, "closing this node's replica of the session");
            (self.on_gone)(&session);
        }
    }

    /// Applies, under the lock, the log entries a follower read, in order,
    /// with what the sink brought; calls `consumed` with each entry's
    /// position once it is in. Stops at the first entry that is not
    /// [`Step::Done`] and says which.
    pub(super) fn apply_tail(
        &self,
        session: &Session,
        entries: Vec<((u64, u64), TailEntry)>,
        mut consumed: impl FnMut((u64, u64), &TailEntry),
    ) -> Step {
        let mut held = lock(&self.pending);
        let mut step = Step::Done;
        for (pos, entry) in entries {
            let head = session.reader().head().0;
            step = match &entry {
                TailEntry::Event(e) if e.seq.0 <= head => Step::Done, // read before
                TailEntry::Event(e) if e.seq.0 == head + 1 => {
                    if publish(session, e.stream, e.check, e.index_in_stream, &e.payload)
                        && drain(session, &mut held)
                    {
                        Step::Done
                    } else {
                        Step::Broken
                    }
                }
                // Held events are drained: one at head + 1 is not here yet.
                TailEntry::Own(o) if o.seq.0 <= head => Step::Done,
                TailEntry::Own(o) if o.seq.0 == head + 1 => Step::NeedOwn(o.seq.0),
                TailEntry::Event(_) | TailEntry::Own(_) => Step::Broken,
                TailEntry::Ended(s) => {
                    end(session, *s);
                    Step::Done
                }
            };
            if step != Step::Done {
                break;
            }
            consumed(pos, &entry);
        }
        drop(held);
        self.publish_head(session);
        step
    }

    /// Waits (at most [`OWN_GRACE`]) for the replica to hold every event up
    /// to `seq` from the queue's answers; `false` when the follower must
    /// read them instead: the queue has nothing unanswered (the event is
    /// another node's, or its answer was lost), a gap before the held
    /// events waits for the follower, or the grace ran out.
    pub(super) async fn await_own(&self, session: &Session, seq: u64) -> bool {
        let mut applied = self.applied();
        let wait = async {
            loop {
                if session.reader().head().0 >= seq {
                    return true;
                }
                let gap = lock(&self.pending).gap(session.reader().head().0);
                let queued = self.queue.get().map_or(0, QueueGauge::unanswered);
                if gap || queued == 0 {
                    return false;
                }
                if applied.changed().await.is_err() {
                    return false;
                }
            }
        };
        tokio::time::timeout(OWN_GRACE, wait).await.unwrap_or(false)
    }

    fn publish_head(&self, session: &Session) {
        self.applied.send_replace(session.reader().head().0);
    }
}

/// Applies the held events that follow the replica's head, and drops
/// those it has already; `false` if the replica refused one.
fn drain(session: &Session, held: &mut Held) -> bool {
    loop {
        let head = session.reader().head().0;
        let Some(entry) = held.events.first_entry() else { return true };
        if *entry.key() > head + 1 {
            return true;
        }
        let w = entry.remove();
        held.bytes -= w.payload.len();
        if w.seq.0 == head + 1 && !publish(session, w.stream, w.check, w.index, &w.payload) {
            return false;
        }
    }
}

/// Publishes one stored event into the replica, its stream opened up to it
/// first; `false` if the replica refused it.
fn publish(session: &Session, stream: StreamId, check: u64, index: u64, payload: &[u8]) -> bool {
    let Ok(Some(h)) = session.open_streams_to(stream) else { return false };
    session.publish(&h, wrap(check, index, payload)).is_ok()
}

/// Ends a stream in the replica (one may end before any event of it reached
/// this replica).
fn end(session: &Session, s: StreamId) {
    let h = match session.reader().handle(s) {
        Some(h) => Some(h),
        None if s.0 > session.reader().streams_opened() => session.open_streams_to(s).ok().flatten(),
        None => None,
    };
    if let Some(h) = h {
        let _ = session.end_stream(&h);
    }
}

/// The check of the replica's event at `seq`, if the replica still holds it.
pub(super) fn check_at(session: &Session, seq: u64) -> Option<u64> {
    match session.reader().cursor(Seq(seq)).try_next() {
        Ok(Next::Event(e)) if e.seq.0 == seq => position(&e.payload).map(|(c, _)| c),
        _ => None,
    }
}
