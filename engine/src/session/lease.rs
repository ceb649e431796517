//! Leased publishing (`docs/SPEC.md` §3.10): one writer holds a session's
//! writer lock for a run of publishes, and the memory budget is charged once
//! per chunk instead of once per event.
//!
//! [`Session::publish`] takes the writer lock, publishes, charges the budget
//! and lets go, for every event. A [`Lease`] takes the lock once. Each of
//! its publishes is the producer's own publish and one comparison; at each
//! chunk boundary (and when it ends) it charges the budget and lets the lock
//! go for a moment, so that the session's other writers get their turn, and
//! reclaims with the lock let go if the hub is over its limit (a reclaim
//! passes over a busy writer, so the lease's own ring is reclaimed only
//! then). A lease is never revoked behind its holder's back: the lock is
//! given up only inside its own calls, and if the session closed meanwhile
//! the next publish says so.

use super::budget::Writer;
use super::lock;
use super::session::{Session, SessionPublishError};
use crate::ring::StreamHandle;
use crate::sync::{unlock_fair, MutexGuard};
use bytes::Bytes;
use gapless_wire::Seq;
use std::fmt;

/// A hold on a session's writer for a run of publishes
/// ([`Session::lease`]). While it lives, the session's other writers
/// (`Session::publish`, stream opens and ends, a closing session) wait,
/// except at each of its chunk boundaries, where it gives the lock up for a
/// moment. Readers never wait for it. Dropping it charges the budget for
/// what it published and, if the hub is over its memory limit, reclaims.
///
/// The session's other writers, its close and `Session::footprint` wait for
/// the lease's next chunk end or its drop, however long the holder takes
/// between publishes: hold a lease for a run of publishes, not across waits
/// for anything else, and do not call those methods on the leased session
/// from the holder's own thread (they would wait for the lease, which waits
/// for them). A reclaim of the hub's budget never waits for a lease: it
/// passes over a session whose writer is busy.
pub struct Lease<'a> {
    session: &'a Session,
    /// The writer lock, held from the lease's start; `None` only inside
    /// `yield_lock`, between giving it up and taking it again.
    guard: Option<MutexGuard<'a, Option<Writer>>>,
    /// The seq after whose publish the budget is next charged and the lock
    /// next given up: the last seq of the chunk the next publish goes into.
    charge_at: u64,
}

impl fmt::Debug for Lease<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Lease")
            .field("session", &self.session.id())
            .field("charge_at", &self.charge_at)
            .finish()
    }
}

impl Session {
    /// Takes the session's writer for a run of publishes ([`Lease`]):
    /// cheaper per event than [`Session::publish`] (no lock per event, the
    /// budget charged per chunk), with the same guarantees for what is
    /// published. `Err(Closed)` if the session was deleted or expired.
    ///
    /// ```
    /// use bytes::Bytes;
    /// use gapless::{Hub, HubConfig};
    ///
    /// let hub = Hub::new(HubConfig::default()).unwrap();
    /// let session = hub.create(None).unwrap();
    /// let stream = session.open_stream().unwrap();
    /// let mut lease = session.lease().unwrap();
    /// for i in 0..100u32 {
    ///     lease.publish(&stream, Bytes::from(i.to_string())).unwrap();
    /// }
    /// drop(lease); // charges what is left; other writers go on
    /// assert_eq!(session.reader().stream(stream.id()).unwrap().published, 100);
    /// ```
    pub fn lease(&self) -> Result<Lease<'_>, SessionPublishError> {
        let guard = lock(&self.ledger.writer);
        let Some(w) = guard.as_ref() else { return Err(SessionPublishError::Closed) };
        let charge_at = next_chunk(&w.producer);
        Ok(Lease { session: self, guard: Some(guard), charge_at })
    }
}

/// The last seq of the chunk the next publish goes into (seq `s` is in
/// chunk `(s - 1) / c`).
fn next_chunk(p: &crate::ring::Producer) -> u64 {
    let c = p.chunk_events() as u64;
    (p.head().0 / c + 1) * c
}

impl Lease<'_> {
    /// Publishes `payload` on `stream`, as [`Session::publish`] does: the
    /// same refusals, the same seqs, readers woken the same way.
    /// `Err(Closed)` if the session closed while the lease gave the lock up
    /// at a chunk boundary. Inlined into the caller's loop, as the
    /// producer's own publish is (a call frame cost 16 instructions).
    #[inline(always)]
    pub fn publish(&mut self, stream: &StreamHandle, payload: Bytes) -> Result<Seq, SessionPublishError> {
        let Some(Some(w)) = self.guard.as_deref_mut() else {
            return Err(SessionPublishError::Closed);
        };
        let seq = w.producer.publish(stream, payload)?;
        if seq.0 >= self.charge_at {
            self.chunk_boundary();
        }
        Ok(seq)
    }

    /// Once per chunk, when the lease's publish filled it: charges the
    /// budget, then gives the lock up for a moment (reclaiming if the hub
    /// is over its limit). Another writer's events therefore come between a
    /// lease's only at a chunk's end.
    #[cold]
    #[inline(never)]
    fn chunk_boundary(&mut self) {
        self.charge();
        self.yield_lock();
        if let Some(Some(w)) = self.guard.as_deref() {
            self.charge_at = next_chunk(&w.producer);
        }
    }

    /// Reports the ring's footprint to the budget if it moved by a granule.
    fn charge(&mut self) {
        if let Some(Some(w)) = self.guard.as_deref_mut() {
            self.session.budget.account(w);
        }
    }

    /// Lets the lock go and takes it again: a thread parked waiting for it
    /// goes first, and a reclaim runs here if the hub is over its limit, with
    /// the lock let go so that it can evict from this ring too.
    fn yield_lock(&mut self) {
        // A reclaim passes over every session whose writer lock is held,
        // this one's too: it runs once the lock is given up, so that this
        // ring, filling a chunk after a chunk, is among those it can evict.
        #[cfg(gapless_mutant = "reclaim_under_lease")]
        self.session.budget.reclaim_if_over();
        if let Some(g) = self.guard.take() {
            unlock_fair(g);
        }
        #[cfg(not(gapless_mutant = "reclaim_under_lease"))]
        self.session.budget.reclaim_if_over();
        self.guard = Some(lock(&self.session.ledger.writer));
    }
}

impl Drop for Lease<'_> {
    fn drop(&mut self) {
        self.charge();
        drop(self.guard.take());
        self.session.budget.reclaim_if_over();
    }
}
