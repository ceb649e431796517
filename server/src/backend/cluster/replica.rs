//! A node's replica of a session (`docs/SPEC.md` §8.3): a ring whose seqs
//! are the store's, filled only by the session's follower task, which tails
//! the store's log (woken by the store's announcements) and applies it in
//! order. Every reader on the node reads that ring, never Redis per event.
//!
//! A replica's payloads carry a prefix of [`PREFIX`] bytes: the event's
//! nonce (its wire id's check) and its index in its stream, as the store
//! has them; the transport strips it when it writes an event.

use super::Cluster;
use crate::vocab::secret::SessionTag;
use crate::vocab::sync::lock;
use bytes::{BufMut, Bytes, BytesMut};
use gapless::{Hub, Namespace, Seq, Session, SessionId, StreamId};
use gapless_redis::{Attach, TailEntry};
use std::sync::{Arc, Weak};
use std::time::Duration;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

/// Bytes before a replica event's payload: its check and its index in its
/// stream, both little-endian u64.
pub(crate) const PREFIX: usize = 16;

/// Log entries a follower reads per call.
const TAIL_BATCH: usize = 512;

/// A follower re-reads the log this often even without an announcement
/// (an expired session announces nothing).
const TAIL_POLL: Duration = Duration::from_millis(500);

/// A replica payload: `check`, `index`, then `payload`.
pub(crate) fn wrap(check: u64, index: u64, payload: &[u8]) -> Bytes {
    let mut b = BytesMut::with_capacity(PREFIX + payload.len());
    b.put_u64_le(check);
    b.put_u64_le(index);
    b.put_slice(payload);
    b.freeze()
}

/// The check and the index in its stream of a replica event (`None` for one
/// no follower wrote).
pub(crate) fn position(payload: &[u8]) -> Option<(u64, u64)> {
    let (c, i) = (payload.get(..8)?, payload.get(8..PREFIX)?);
    Some((u64::from_le_bytes(c.try_into().ok()?), u64::from_le_bytes(i.try_into().ok()?)))
}

/// A follower of one session on this node: its replica, the seq it has
/// applied so far, and how to stop it.
pub(super) struct Follower {
    pub(super) session: Weak<Session>,
    pub(super) applied: watch::Receiver<u64>,
    pub(super) stop: CancellationToken,
}

/// What a replica's follower calls when its session is gone from the store
/// (or its replica is stale): drops that replica, if it is still the one
/// the node serves.
pub(crate) type OnGone = Arc<dyn Fn(&Arc<Session>) + Send + Sync>;

impl Cluster {
    /// A local replica of a session the store has just created (head 0).
    pub(crate) fn replica_of_new(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        id: SessionId,
        ns: Namespace,
        owner: Option<&str>,
        on_gone: OnGone,
    ) -> Result<Arc<Session>, gapless::SessionError> {
        let at = Attach {
            ns,
            head: Seq(0),
            opened: StreamId(1),
            live: vec![StreamId(1)],
            position: (0, 0),
            version: String::new(),
            migrated: false,
            check: None,
        };
        self.start_replica(hub, id, owner, &at, on_gone)
    }

    pub(super) fn start_replica(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        id: SessionId,
        owner: Option<&str>,
        at: &Attach,
        on_gone: OnGone,
    ) -> Result<Arc<Session>, gapless::SessionError> {
        let session = hub.create_replica(id, at.ns, owner, Seq(at.head.0 + 1))?;
        if session.mirror_streams(&at.live, at.opened).is_err() {
            return Err(gapless::SessionError::Unknown);
        }
        if at.migrated {
            session.set_migrated();
        }
        let (tx, rx) = watch::channel(at.head.0);
        let stop = CancellationToken::new();
        let old = lock(&self.followers)
            .insert(id, Follower { session: Arc::downgrade(&session), applied: rx, stop: stop.clone() });
        if let Some(old) = old {
            old.stop.cancel();
        }
        let watch = self.notifier.watch(id);
        let me = Arc::clone(self);
        let s = Arc::clone(&session);
        let place = Place { position: at.position, check: at.check };
        tokio::spawn(async move {
            me.follow(s, place, tx, watch, stop, on_gone).await;
        });
        Ok(session)
    }

    /// The follower: applies the store's log to the replica, in order,
    /// until the replica closes, the session leaves the store, or the
    /// replica cannot represent the log any more (it fell behind the
    /// store's trim: the replica is closed, its readers end, and their
    /// clients' resumes are decided by the store).
    async fn follow(
        self: Arc<Self>,
        session: Arc<Session>,
        place: Place,
        applied: watch::Sender<u64>,
        watch: gapless_redis::Watch,
        stop: CancellationToken,
        on_gone: OnGone,
    ) {
        let id = session.id();
        let Place { mut position, check: mut last_check } = place;
        loop {
            if session.is_closed() || stop.is_cancelled() {
                break;
            }
            let local = session.reader().head();
            match self.store.tail(&id, position, TAIL_BATCH, local).await {
                Ok(Some(tail)) if rewritten(&session, &tail, position, last_check) => {
                    // Another incarnation, or the store lost events this
                    // replica holds (a failover; the store now knows up to
                    // which seq): the replica is stale.
                    tracing::warn!(session = %SessionTag::of_id(&id), store_head = ?tail.head, replica_head = ?local, "replica no longer matches the store; closing it");
                    on_gone(&session);
                    break;
                }
                Ok(Some(tail)) => {
                    if tail.migrated && !session.is_migrated() {
                        session.set_migrated();
                    }
                    let n = tail.entries.len();
                    let mut broken = false;
                    for (pos, entry) in tail.entries {
                        let check = match &entry {
                            TailEntry::Event(e) => Some(e.check),
                            TailEntry::Own(e) => Some(e.check),
                            TailEntry::Ended(_) => last_check,
                        };
                        if !apply(&session, entry) {
                            broken = true;
                            break;
                        }
                        (position, last_check) = (pos, check);
                    }
                    let _ = applied.send(session.reader().head().0);
                    if broken {
                        if !session.is_closed() {
                            tracing::warn!(session = %SessionTag::of_id(&id), "replica fell behind the store's window; closing it");
                        }
                        on_gone(&session);
                        break;
                    }
                    if n == TAIL_BATCH {
                        continue;
                    }
                }
                Ok(None) => {
                    // Deleted or expired in the store.
                    on_gone(&session);
                    break;
                }
                Err(e) => {
                    tracing::debug!(session = %SessionTag::of_id(&id), error = %e, "follower: store unavailable");
                }
            }
            tokio::select! {
                _ = watch.changed() => {}
                _ = tokio::time::sleep(TAIL_POLL) => {}
                _ = stop.cancelled() => break,
            }
        }
        let mut f = lock(&self.followers);
        if f.get(&id).is_some_and(|f| f.session.upgrade().is_none_or(|s| Arc::ptr_eq(&s, &session))) {
            f.remove(&id);
        }
    }
}

/// Where a follower is in the log: the entry it read last, and the nonce of
/// the event at that entry's seq.
struct Place {
    position: (u64, u64),
    check: Option<u64>,
}

/// Whether the store's log is no longer the one this replica follows: another
/// incarnation; a head below the replica's (a failover lost events, and the
/// store now knows up to which seq); or another event at the seq the
/// follower last applied (a failover lost it and the seq was reused).
fn rewritten(
    session: &Session,
    tail: &gapless_redis::Tail,
    position: (u64, u64),
    last_check: Option<u64>,
) -> bool {
    if tail.ns != session.namespace() || tail.head < session.reader().head() {
        return true;
    }
    match last_check {
        Some(mine) if position.0 > 0 && position.0 >= tail.oldest.0 => tail.check_at != Some(mine),
        _ => false,
    }
}

/// Applies one log entry to a replica; `false` when it cannot (a hole: the
/// store trimmed events this replica never read).
fn apply(session: &Session, entry: TailEntry) -> bool {
    match entry {
        TailEntry::Event(e) => {
            let head = session.reader().head().0;
            if e.seq.0 <= head {
                return true; // read before
            }
            if e.seq.0 != head + 1 {
                return false;
            }
            let Ok(Some(h)) = session.open_streams_to(e.stream) else { return false };
            session.publish(&h, wrap(e.check, e.index_in_stream, &e.payload)).is_ok()
        }
        // Only a skipping tail gives the node's own events without their
        // payloads; this follower reads every event whole.
        TailEntry::Own(_) => false,
        TailEntry::Ended(s) => {
            // A stream may end before any event of it reached this replica.
            let h = match session.reader().handle(s) {
                Some(h) => Some(h),
                None if s.0 > session.reader().streams_opened() => session.open_streams_to(s).ok().flatten(),
                None => None,
            };
            if let Some(h) = h {
                let _ = session.end_stream(&h);
            }
            true
        }
    }
}
