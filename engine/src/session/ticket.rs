//! Migration tickets (`docs/SPEC.md` §4.3): single-use, session-bound,
//! expiring tokens that pin the gap snapshot between the upgrade check and
//! the WebSocket connecting. This file keeps them (a session's book, the
//! hub's index); `migrate.rs` issues and redeems them.

use super::lock;
use super::secret::{Secret, SessionId};
use crate::ring::Snapshot;
use crate::sync::{AtomicU64, Mutex, Ordering};
use gapless_wire::Seq;
use std::collections::HashMap;
use std::fmt;

/// A ticket's secret: 128 bits from the OS CSPRNG, written as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Ticket(Secret);

impl Ticket {
    pub(super) fn random() -> Self {
        Ticket(Secret::random())
    }

    /// Parses the 32-hex-digit form.
    pub fn parse(s: &str) -> Option<Self> {
        Secret::parse(s).map(Ticket)
    }
}

impl fmt::Display for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt(f)
    }
}

impl fmt::Debug for Ticket {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.fmt_short("Ticket", f)
    }
}

/// Why a ticket was not issued or not redeemed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TicketError {
    /// The session already has `max` outstanding tickets.
    TooMany {
        /// The configured bound.
        max: usize,
    },
    /// Not a ticket this hub issued (or garbage, or its session is gone).
    Unknown,
    /// Issued for another session (or another caller).
    Foreign,
    /// Already redeemed once.
    Redeemed,
    /// Past its lifetime.
    Expired,
}

impl fmt::Display for TicketError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            TicketError::TooMany { max } => write!(f, "at most {max} outstanding tickets per session"),
            TicketError::Unknown => f.write_str("unknown ticket"),
            TicketError::Foreign => f.write_str("ticket belongs to another session"),
            TicketError::Redeemed => f.write_str("ticket already used"),
            TicketError::Expired => f.write_str("ticket expired"),
        }
    }
}

impl std::error::Error for TicketError {}

#[derive(Debug)]
struct Entry {
    ticket: Ticket,
    cursor: Seq,
    /// `None` once redeemed (the snapshot moved to the redeemer), or once
    /// it expired unredeemed and a sweep let go of its gap; the entry stays
    /// as a tombstone until it is pruned, so that reuse is told apart.
    snapshot: Option<Snapshot>,
    /// Whether `take` took the snapshot (else a sweep did, at expiry).
    redeemed: bool,
    expires_ms: u64,
}

/// A session's outstanding tickets.
#[derive(Debug)]
pub(crate) struct TicketBook {
    /// The session they migrate.
    session: SessionId,
    entries: Mutex<Vec<Entry>>,
}

impl TicketBook {
    pub(super) fn new(session: SessionId) -> Self {
        TicketBook { session, entries: Mutex::new(Vec::new()) }
    }

    /// Lets go of the pinned gaps of the tickets that expired unredeemed
    /// by `now_ms` (their entries stay: a redeem still says `Expired`);
    /// returns how many. Each ticket counts once.
    pub(super) fn expire(&self, now_ms: u64) -> u64 {
        expire(&mut lock(&self.entries), now_ms)
    }

    /// Takes the pinned gap of `ticket` (once): its cursor and snapshot.
    pub(super) fn take(&self, ticket: &Ticket) -> Result<(Seq, Snapshot), TicketError> {
        let mut entries = lock(&self.entries);
        let e = entries.iter_mut().find(|e| e.ticket == *ticket).ok_or(TicketError::Unknown)?;
        // Its gap is gone if it was redeemed, or if it expired and a sweep
        // let go of it (perhaps since the caller checked the expiry).
        let gone = if e.redeemed { TicketError::Redeemed } else { TicketError::Expired };
        let snapshot = e.snapshot.take().ok_or(gone)?;
        e.redeemed = true;
        Ok((e.cursor, snapshot))
    }
}

/// Drops the snapshots of `entries` that expired unredeemed by `now_ms`;
/// returns how many.
fn expire(entries: &mut [Entry], now_ms: u64) -> u64 {
    let mut n = 0;
    for e in entries.iter_mut().filter(|e| e.expires_ms <= now_ms) {
        if e.snapshot.take().is_some() {
            n += 1;
        }
    }
    n
}

/// Hub-wide map from ticket to session (the WebSocket request carries only
/// the ticket) and its expiry.
#[derive(Debug, Default)]
pub(crate) struct TicketIndex {
    map: Mutex<HashMap<Secret, (SessionId, u64)>>,
    /// Tickets that expired unredeemed (counted when a sweep, a pruning
    /// issue or the end of their session finds them so).
    expired: AtomicU64,
}

impl TicketIndex {
    /// Files a new ticket pinning `snapshot` (the gap after `cursor`) in a
    /// session's `book`, expiring at `expires_ms`.
    /// Expired tickets of the book are pruned first; a session holds at most
    /// `max` live ones.
    pub(super) fn issue(
        &self,
        book: &TicketBook,
        cursor: Seq,
        snapshot: Snapshot,
        now_ms: u64,
        expires_ms: u64,
        max: usize,
    ) -> Result<Ticket, TicketError> {
        let mut entries = lock(&book.entries);
        self.count_expired(expire(&mut entries, now_ms));
        let mut index = lock(&self.map);
        entries.retain(|e| {
            let live = e.expires_ms > now_ms;
            if !live {
                index.remove(&e.ticket.0);
            }
            live
        });
        if entries.iter().filter(|e| e.snapshot.is_some()).count() >= max {
            return Err(TicketError::TooMany { max });
        }
        let ticket = Ticket::random();
        index.insert(ticket.0, (book.session, expires_ms));
        entries.push(Entry { ticket, cursor, snapshot: Some(snapshot), redeemed: false, expires_ms });
        Ok(ticket)
    }

    /// Drops every ticket of `book` (its session ended at `now_ms`), here
    /// and there.
    pub(super) fn forget(&self, book: &TicketBook, now_ms: u64) {
        let mut entries = lock(&book.entries);
        self.count_expired(expire(&mut entries, now_ms));
        let mut index = lock(&self.map);
        for e in entries.drain(..) {
            index.remove(&e.ticket.0);
        }
    }

    /// Adds `n` tickets that expired unredeemed.
    pub(super) fn count_expired(&self, n: u64) {
        if n > 0 {
            self.expired.fetch_add(n, Ordering::Relaxed);
        }
    }

    /// Tickets that expired unredeemed so far.
    pub(super) fn expired(&self) -> u64 {
        self.expired.load(Ordering::Relaxed)
    }

    /// Tickets in the index (all sessions).
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        lock(&self.map).len()
    }

    /// The session a ticket was issued for, and when it expires.
    pub(super) fn lookup(&self, ticket: &Ticket) -> Option<(SessionId, u64)> {
        lock(&self.map).get(&ticket.0).copied()
    }
}

#[cfg(test)]
mod tests {
    use super::{Ticket, TicketError};

    /// A ticket is a bearer secret: its `Debug` (what logs print) names
    /// only its first four hex digits; its `Display` is the whole secret
    /// the client presents.
    #[test]
    fn tickets_print_in_logs_without_their_secret() {
        let t = Ticket::random();
        let full = t.to_string();
        assert_eq!(Ticket::parse(&full), Some(t));
        assert_eq!(format!("{t:?}"), format!("Ticket({}…)", &full[..4]));
    }

    /// At most `max` outstanding tickets: one that expired (its redeem
    /// says `Expired` from its expiry instant on) no longer counts.
    #[test]
    fn an_expired_ticket_is_not_outstanding() {
        use super::{TicketBook, TicketIndex};
        use crate::ring::{ring, RingConfig};
        use crate::session::secret::SessionId;
        use gapless_wire::Seq;
        let (_p, r) = ring(RingConfig::new(4, 1 << 10)).unwrap();
        let (book, index) = (TicketBook::new(SessionId::random()), TicketIndex::default());
        let snap = || r.snapshot(Seq(0)).unwrap();
        index.issue(&book, Seq(0), snap(), 0, 10, 1).unwrap();
        assert_eq!(index.issue(&book, Seq(0), snap(), 9, 19, 1), Err(TicketError::TooMany { max: 1 }));
        let t = index.issue(&book, Seq(0), snap(), 10, 20, 1).expect("the first expired at 10");
        assert_eq!((index.len(), index.lookup(&t).map(|(_, e)| e)), (1, Some(20)));
    }

    #[test]
    fn ticket_errors_say_why() {
        let said = [
            (TicketError::TooMany { max: 4 }, "at most 4 outstanding tickets per session"),
            (TicketError::Unknown, "unknown ticket"),
            (TicketError::Foreign, "ticket belongs to another session"),
            (TicketError::Redeemed, "ticket already used"),
            (TicketError::Expired, "ticket expired"),
        ];
        for (e, text) in said {
            assert_eq!(e.to_string(), text);
        }
    }
}
