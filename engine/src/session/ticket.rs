//! Migration tickets (`docs/SPEC.md` §4.3): single-use, session-bound,
//! expiring tokens that pin the gap snapshot between the upgrade check and
//! the WebSocket connecting.

use super::hub::{Hub, SessionError};
use super::lock;
use super::resume::{Refusal, ResumeRequest};
use super::secret::{Secret, SessionId};
use super::session::Session;
use crate::ring::Snapshot;
use gapless_wire::{EventId, Seq};
use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

/// A ticket's secret: 128 bits from the OS CSPRNG, written as 32 hex digits.
#[derive(Clone, Copy, PartialEq, Eq)]
pub struct Ticket(Secret);

impl Ticket {
    fn random() -> Self {
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

/// A redeemed ticket: the pinned gap after `cursor`, to be replayed before
/// live events of the whole session.
#[derive(Debug)]
pub struct Migration {
    /// The session.
    pub session: Arc<Session>,
    /// The client's cursor (its contiguous processed prefix).
    pub cursor: Seq,
    /// Every event after `cursor` up to the moment the ticket was issued,
    /// pinned. Its first seq is `cursor + 1` when it is not empty.
    pub snapshot: Snapshot,
}

#[derive(Debug)]
struct Entry {
    ticket: Ticket,
    cursor: Seq,
    /// `None` once redeemed (the snapshot moved to the redeemer); the entry
    /// stays as a tombstone until it expires so reuse is told apart.
    snapshot: Option<Snapshot>,
    expires_ms: u64,
}

/// A session's outstanding tickets.
#[derive(Debug, Default)]
pub(crate) struct TicketBook {
    entries: Mutex<Vec<Entry>>,
}

impl TicketBook {
    pub(crate) fn clear(&self) {
        lock(&self.entries).clear();
    }
}

/// Hub-wide map from ticket to session (the WebSocket request carries only
/// the ticket).
#[derive(Debug, Default)]
pub(crate) struct TicketIndex {
    map: Mutex<HashMap<Secret, (SessionId, u64)>>,
}

/// A freshly issued ticket and what it will replay.
#[derive(Debug, Clone)]
pub struct IssuedTicket {
    /// The session it migrates.
    pub session: Arc<Session>,
    /// The secret to present on the WebSocket request.
    pub ticket: Ticket,
    /// The client's cursor.
    pub cursor: Seq,
    /// Id of the first replayed event, `None` if the gap is empty.
    pub replay_from: Option<EventId>,
    /// Events in the pinned gap.
    pub replay_count: usize,
}

/// Why a migration was not granted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MigrateError {
    /// The decision table refused it.
    Refused(Refusal),
    /// No ticket could be issued.
    Ticket(TicketError),
}

impl fmt::Display for MigrateError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            MigrateError::Refused(r) => r.fmt(f),
            MigrateError::Ticket(t) => t.fmt(f),
        }
    }
}

impl std::error::Error for MigrateError {}

impl Hub {
    /// The migration of `docs/SPEC.md` §4.3: [`Hub::check_migration`]
    /// for the whole session after the request's cursor (`None` = processed
    /// nothing) and, if granted, a ticket that pins the gap.
    pub fn migrate(&self, req: ResumeRequest<'_>) -> Result<IssuedTicket, MigrateError> {
        let r = self.check_migration(req).map_err(MigrateError::Refused)?;
        self.issue_ticket(&r.session, r.after, r.snapshot).map_err(MigrateError::Ticket)
    }

    /// Issues a ticket pinning `snapshot` (the gap after `cursor`) for
    /// `session`. Expired tickets are pruned first; a session may hold at
    /// most `max_tickets` live ones.
    fn issue_ticket(
        &self,
        session: &Arc<Session>,
        cursor: Seq,
        snapshot: Snapshot,
    ) -> Result<IssuedTicket, TicketError> {
        let now = self.now_ms();
        let ttl = self.config().ticket_ttl.as_millis() as u64;
        let max = self.config().max_tickets;
        let mut entries = lock(&session.tickets.entries);
        let mut index = lock(&self.tickets.map);
        entries.retain(|e| {
            let live = e.expires_ms > now;
            if !live {
                index.remove(&e.ticket.0);
            }
            live
        });
        if entries.iter().filter(|e| e.snapshot.is_some()).count() >= max {
            return Err(TicketError::TooMany { max });
        }
        let ticket = Ticket::random();
        let replay_from = snapshot.first().map(|s| {
            let stream = snapshot.iter().next().map(|e| e.stream).expect("non-empty snapshot");
            session.event_id(stream, s)
        });
        let issued = IssuedTicket {
            session: Arc::clone(session),
            ticket,
            cursor,
            replay_from,
            replay_count: snapshot.len(),
        };
        index.insert(ticket.0, (session.id(), now + ttl));
        entries.push(Entry { ticket, cursor, snapshot: Some(snapshot), expires_ms: now + ttl });
        Ok(issued)
    }

    /// Redeems a ticket (once). `session` restricts it to one session (a
    /// ticket of another one is `Foreign`); `owner` is the caller identity,
    /// which must match the session's.
    pub fn redeem(
        &self,
        ticket: &str,
        session: Option<&SessionId>,
        owner: Option<&str>,
    ) -> Result<Migration, TicketError> {
        let t = Ticket::parse(ticket).ok_or(TicketError::Unknown)?;
        let now = self.now_ms();
        let (sid, expires) = *lock(&self.tickets.map).get(&t.0).ok_or(TicketError::Unknown)?;
        if session.is_some_and(|s| *s != sid) {
            return Err(TicketError::Foreign);
        }
        let s = match self.get(&sid, owner) {
            Ok(s) => s,
            Err(SessionError::Unknown) if self.get_any(&sid).is_some() => return Err(TicketError::Foreign),
            Err(_) => return Err(TicketError::Unknown),
        };
        if expires <= now {
            return Err(TicketError::Expired);
        }
        let mut entries = lock(&s.tickets.entries);
        let e = entries.iter_mut().find(|e| e.ticket == t).ok_or(TicketError::Unknown)?;
        let snapshot = e.snapshot.take().ok_or(TicketError::Redeemed)?;
        Ok(Migration { session: Arc::clone(&s), cursor: e.cursor, snapshot })
    }
}
