//! A node's replica of a session (`docs/SPEC.md` §8.1): a ring whose seqs
//! are the store's, written only through its `Applier` (`apply.rs`): this
//! node's own events from its append queue's answers, and what the
//! session's follower task reads of the store's log (woken by the store's
//! announcements), in order. Every reader on the node reads that ring,
//! never Redis per event.
//!
//! A replica's payloads carry a prefix (`apply.rs`): the event's nonce (its
//! wire id's check) and its index in its stream, as the store has them; the
//! transport strips it when it writes an event.

use super::apply::{check_at, Applier, OnGone, Step};
use super::Cluster;
use crate::backend::SessionStore;
use crate::vocab::secret::SessionTag;
use crate::vocab::sync::lock;
use gapless::{Hub, Namespace, Seq, Session, SessionId, StreamId};
use gapless_redis::{Appender, Attach, Position, Sink, TailEntry, Written};
use std::sync::{Arc, Mutex, Weak};
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Log entries a follower reads per call.
const TAIL_BATCH: usize = 512;

/// How long a follower waits before it reads the log again after the store
/// did not answer (at first; doubling up to [`RETRY_MAX`]).
const RETRY_FIRST: Duration = Duration::from_millis(100);
const RETRY_MAX: Duration = Duration::from_secs(2);

/// A place in the log, the nonce of the event at its seq, and how many
/// control entries (streams' ends) the log had had when the follower last
/// read it.
pub(super) type Checked = (Position, Option<u64>, u64);

/// A follower of one session on this node: its replica, the replica's
/// writer, and how to stop it.
pub(super) struct Follower {
    pub(super) session: Weak<Session>,
    pub(super) applier: Arc<Applier>,
    pub(super) stop: CancellationToken,
    /// The entry of the log it read last, and the nonce of the event at
    /// that seq (the safety net compares them with the log's last,
    /// `keeper.rs`).
    pub(super) place: Arc<Mutex<Checked>>,
}

impl Cluster {
    /// A local replica of a session the store has just created (head 0),
    /// and where its events go from this node.
    pub(crate) fn replica_of_new(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        id: SessionId,
        ns: Namespace,
        owner: Option<&str>,
        on_gone: OnGone,
    ) -> Result<(Arc<Session>, SessionStore), gapless::SessionError> {
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

    /// A replica of session `id` as `at` describes it, its follower, and
    /// the session's append queue, whose answers bring this node's own
    /// events into the replica.
    pub(super) fn start_replica(
        self: &Arc<Self>,
        hub: &Arc<Hub>,
        id: SessionId,
        owner: Option<&str>,
        at: &Attach,
        on_gone: OnGone,
    ) -> Result<(Arc<Session>, SessionStore), gapless::SessionError> {
        let session = hub.create_replica(id, at.ns, owner, Seq(at.head.0 + 1))?;
        if session.mirror_streams(&at.live, at.opened).is_err() {
            return Err(gapless::SessionError::Unknown);
        }
        if at.migrated {
            session.set_migrated();
        }
        let applier = Applier::new(&session, at.head.0, Arc::clone(&on_gone));
        let sink: Sink = {
            let applier = Arc::clone(&applier);
            Arc::new(move |batch: &[Written]| applier.written(batch))
        };
        let appender = Appender::for_node(self.store.clone(), id, self.node.clone(), Some(sink));
        applier.set_queue(appender.gauge());
        let stop = CancellationToken::new();
        let shared_place = Arc::new(Mutex::new((at.position, at.check, 0)));
        let follower = Follower {
            session: Arc::downgrade(&session),
            applier: Arc::clone(&applier),
            stop: stop.clone(),
            place: Arc::clone(&shared_place),
        };
        if let Some(old) = lock(&self.followers).insert(id, follower) {
            old.stop.cancel();
        }
        let watch = self.notifier.watch(id);
        let me = Arc::clone(self);
        let (s, a) = (Arc::clone(&session), Arc::clone(&applier));
        let place = Place { position: at.position, check: at.check, shared: shared_place };
        tokio::spawn(async move {
            me.follow(s, place, a, watch, stop, on_gone).await;
        });
        Ok((session, SessionStore::Cluster { cluster: Arc::clone(self), appender, applier }))
    }

    /// The follower: applies to the replica, in order, what the store's log
    /// holds beyond what this node's own appends brought, until the replica
    /// closes, the session leaves the store, or the replica cannot
    /// represent the log any more (it fell behind the store's trim: the
    /// replica is closed, its readers end, and their clients' resumes are
    /// decided by the store).
    ///
    /// It reads the log only when something but this node's appends may be
    /// in it: an announcement that names no head (a stream's end, a
    /// migration, a deletion, a reconnection of the subscriber), a head
    /// the replica does not reach by the queue's answers, or a wake-up of
    /// the safety net (`keeper.rs`) or of a request waiting for the replica
    /// ([`gapless_redis::Notifier::wake`]); never by a timer of its own
    /// while the store answers. It reads the node's own events without
    /// their payloads, and back whole only when their answers did not come.
    async fn follow(
        self: Arc<Self>,
        session: Arc<Session>,
        place: Place,
        applier: Arc<Applier>,
        watch: gapless_redis::Watch,
        stop: CancellationToken,
        on_gone: OnGone,
    ) {
        let id = session.id();
        let Place { mut position, check: mut last_check, shared } = place;
        let mut must_read = true;
        let mut whole = false;
        let mut retry: Option<Duration> = None;
        // Control entries the log had at the last read (a stream's end is
        // one: an append that says the log has more was preceded by an end
        // this follower did not hear of).
        let mut ctl_read = 0;
        loop {
            *lock(&shared) = (position, last_check, ctl_read);
            if session.is_closed() || stop.is_cancelled() {
                break;
            }
            let heard = watch.heard();
            must_read |= heard.other || heard.ctl > ctl_read;
            if let (false, Some(h)) = (must_read, heard.head) {
                match announced_here(&session, &applier, h).await {
                    // Nothing more for this replica in the log up to `h`.
                    Some(c) if h > position.0 => (position, last_check) = ((h, 0), Some(c)),
                    Some(_) => {}
                    None => must_read = true,
                }
            }
            while must_read && !session.is_closed() {
                let local = session.reader().head();
                let origin = if whole { "" } else { self.node.as_str() };
                let tail = match self.store.tail_skipping(&id, position, TAIL_BATCH, local, origin).await {
                    Ok(Some(tail)) => tail,
                    Ok(None) => {
                        // Deleted or expired in the store.
                        on_gone(&session);
                        return self.forget(&session);
                    }
                    Err(e) => {
                        tracing::debug!(session = %SessionTag::of_id(&id), error = %e, "follower: store unavailable");
                        retry = Some(retry.map_or(RETRY_FIRST, |r| (r * 2).min(RETRY_MAX)));
                        break;
                    }
                };
                retry = None;
                ctl_read = tail.ctl;
                if rewritten(&session, &tail, local, position, last_check) {
                    // Another incarnation, or the store lost events this
                    // replica holds (a failover; the store now knows up to
                    // which seq): the replica is stale.
                    tracing::warn!(session = %SessionTag::of_id(&id), store_head = ?tail.head, replica_head = ?local, "replica no longer matches the store; closing it");
                    on_gone(&session);
                    return self.forget(&session);
                }
                if tail.migrated && !session.is_migrated() {
                    session.set_migrated();
                }
                let full = tail.entries.len() == TAIL_BATCH;
                let step = applier.apply_tail(&session, tail.entries, |pos, entry| {
                    last_check = match entry {
                        TailEntry::Event(e) => Some(e.check),
                        TailEntry::Own(o) => Some(o.check),
                        TailEntry::Ended(_) => last_check,
                    };
                    position = pos;
                });
                match step {
                    Step::Done => (must_read, whole) = (full, false),
                    // Its answer is on the way, or lost: then read it whole.
                    Step::NeedOwn(seq) => whole = !applier.await_own(&session, seq).await,
                    Step::Broken => {
                        if !session.is_closed() {
                            tracing::warn!(session = %SessionTag::of_id(&id), "replica fell behind the store's window; closing it");
                        }
                        on_gone(&session);
                        return self.forget(&session);
                    }
                }
            }
            *lock(&shared) = (position, last_check, ctl_read);
            let again = async {
                match (retry, must_read) {
                    (Some(r), true) => tokio::time::sleep(r).await,
                    _ => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = watch.changed() => {}
                _ = again => {}
                _ = stop.cancelled() => break,
            }
        }
        self.forget(&session);
    }

    /// Stops the followers of replicas that closed (the hub dropped them,
    /// or they were replaced): a follower waits for announcements, and one
    /// of a closed replica would wait for ever, holding its ring.
    pub(super) fn stop_closed_followers(&self) {
        lock(&self.followers).retain(|_, f| {
            let live = f.session.upgrade().is_some_and(|s| !s.is_closed());
            if !live {
                f.stop.cancel();
            }
            live
        });
    }

    /// Where session `id`'s follower is in the log (and the nonce there),
    /// and its replica.
    pub(super) fn place_of(&self, id: &SessionId) -> Option<(Checked, Arc<Session>)> {
        let (session, place) = {
            let followers = lock(&self.followers);
            let f = followers.get(id)?;
            let place = *lock(&f.place);
            (f.session.upgrade()?, place)
        };
        Some((place, session))
    }

    /// Forgets `session`'s follower, if it is still the one registered.
    fn forget(&self, session: &Arc<Session>) {
        let mut f = lock(&self.followers);
        if f.get(&session.id()).is_some_and(|f| f.session.upgrade().is_none_or(|s| Arc::ptr_eq(&s, session)))
        {
            f.remove(&session.id());
        }
    }
}

/// Whether the replica has every event up to head `h`, the only thing
/// announced since the follower last read (its own appends' answers bring
/// them): the nonce of its event at `h`; `None` when the log must be read
/// (another node's events, or an answer that did not come).
async fn announced_here(session: &Session, applier: &Applier, h: u64) -> Option<u64> {
    if session.reader().head().0 >= h || applier.await_own(session, h).await {
        check_at(session, h)
    } else {
        None
    }
}

/// Where a follower is in the log: the entry it read last, and the nonce of
/// the event at that entry's seq.
struct Place {
    position: Position,
    check: Option<u64>,
    /// `position`, for the safety net.
    shared: Arc<Mutex<Checked>>,
}

/// Whether the store's log is no longer the one this replica follows: another
/// incarnation; a head below `local`, the replica's before the read (a
/// failover lost events, and the store now knows up to which seq; the
/// replica's head now may be higher: the queue's answers go on meanwhile);
/// or another event at the seq the follower last applied (a failover lost
/// it and the seq was reused).
fn rewritten(
    session: &Session,
    tail: &gapless_redis::Tail,
    local: Seq,
    position: (u64, u64),
    last_check: Option<u64>,
) -> bool {
    if tail.ns != session.namespace() || tail.head < local {
        return true;
    }
    match last_check {
        Some(mine) if position.0 > 0 && position.0 >= tail.oldest.0 => tail.check_at != Some(mine),
        _ => false,
    }
}
