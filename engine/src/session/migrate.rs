//! Migration (`docs/SPEC.md` §4.3): the decision table's migration check
//! ([`Hub::check_migration`]), then a ticket that pins the granted gap
//! until the WebSocket redeems it.

use super::hub::{Hub, SessionError};
use super::resume::{Refusal, ResumeRequest};
use super::secret::SessionId;
use super::session::Session;
use super::ticket::{Ticket, TicketError};
use crate::ring::Snapshot;
use gapless_wire::{EventId, Seq};
use std::fmt;
use std::sync::Arc;

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
    /// The migration of `docs/SPEC.md` §4.3: [`Hub::check_migration`] for
    /// the whole session after the request's cursor (`None` = processed
    /// nothing) and, if granted, a ticket that pins the gap. A session holds
    /// at most `max_tickets` live tickets.
    pub fn migrate(&self, req: ResumeRequest<'_>) -> Result<IssuedTicket, MigrateError> {
        let r = self.check_migration(req).map_err(MigrateError::Refused)?;
        let (session, snapshot) = (r.session, r.snapshot);
        let replay_from = snapshot.first().map(|s| {
            let stream = snapshot.iter().next().map(|e| e.stream).expect("non-empty snapshot");
            session.event_id(stream, s)
        });
        let replay_count = snapshot.len();
        let now = self.now_ms();
        let config = self.config();
        // The ticket carries the gap pinned by the check: a publish that
        // evicts it before the socket comes cannot take it from the replay.
        #[cfg(gapless_mutant = "unpinned_ticket")]
        let snapshot = {
            drop(snapshot);
            session.reader().empty_snapshot(r.after, None)
        };
        let ticket = self
            .tickets
            .issue(
                &session.tickets,
                r.after,
                snapshot,
                now,
                now + config.ticket_ttl.as_millis() as u64,
                config.max_tickets,
            )
            .map_err(MigrateError::Ticket)?;
        Ok(IssuedTicket { session, ticket, cursor: r.after, replay_from, replay_count })
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
        let (sid, expires) = self.tickets.lookup(&t).ok_or(TicketError::Unknown)?;
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
        let (cursor, snapshot) = s.tickets.take(&t)?;
        #[cfg(gapless_mutant = "unpinned_ticket")]
        let snapshot = {
            drop(snapshot);
            s.reader().snapshot(cursor).map_err(|_| TicketError::Expired)?
        };
        Ok(Migration { session: s, cursor, snapshot })
    }
}

#[cfg(test)]
mod tests {
    use crate::{Hub, HubConfig, ResumeRequest};

    /// Tickets of sessions that ended, however they ended (deleted,
    /// replaced under the same id, expired), leave the hub's index: it
    /// holds only the tickets of live sessions.
    #[test]
    fn ended_sessions_leave_no_ticket_behind() {
        let hub = Hub::new(HubConfig {
            idle_timeout: std::time::Duration::from_millis(300),
            ..HubConfig::default()
        })
        .unwrap();
        let issue = |hub: &Hub, s: &crate::Session| {
            let sid = s.id().to_string();
            for _ in 0..3 {
                hub.migrate(ResumeRequest::new(&sid)).unwrap();
            }
        };
        let (a, b, c) = (hub.create(None).unwrap(), hub.create(None).unwrap(), hub.create(None).unwrap());
        for s in [&a, &b, &c] {
            issue(&hub, s);
        }
        assert_eq!(hub.tickets.len(), 9);
        hub.remove(&a.id());
        assert_eq!(hub.tickets.len(), 6, "deleted");
        hub.create_with_id(b.id(), None).unwrap();
        assert_eq!(hub.tickets.len(), 3, "replaced");
        std::thread::sleep(std::time::Duration::from_millis(400));
        assert_eq!(hub.sweep_idle(), 2, "c, and b's new incarnation");
        assert_eq!(hub.tickets.len(), 0, "expired");
        // Many sessions come and go: the index does not grow with them.
        for _ in 0..200 {
            let s = hub.create(None).unwrap();
            issue(&hub, &s);
            hub.remove(&s.id());
        }
        assert_eq!(hub.tickets.len(), 0);
    }

    /// A ticket that expires unredeemed counts once, whoever finds it: a
    /// sweep, a later issue on its session, or the session's end. A
    /// redeemed one never counts, and an expired one still says so.
    #[test]
    fn expired_tickets_are_counted_once() {
        use crate::session::TicketError;
        let ttl = std::time::Duration::from_millis(500);
        let hub = Hub::new(HubConfig { ticket_ttl: ttl, ..HubConfig::default() }).unwrap();
        let (a, b, c) = (hub.create(None).unwrap(), hub.create(None).unwrap(), hub.create(None).unwrap());
        let issue = |s: &crate::Session| hub.migrate(ResumeRequest::new(&s.id().to_string())).unwrap().ticket;
        let (t1, t2) = (issue(&a), issue(&a));
        issue(&b);
        issue(&c);
        hub.redeem(&t2.to_string(), None, None).unwrap();
        std::thread::sleep(ttl + std::time::Duration::from_millis(50));
        assert_eq!(hub.tickets_expired(), 0, "nothing looked yet");
        // a: t1 expired, t2 was redeemed. Found by the sweep, once.
        assert_eq!(hub.sweep_tickets(), 3, "a's t1, b's and c's");
        assert_eq!(hub.sweep_tickets(), 0, "counted once");
        assert_eq!(hub.tickets_expired(), 3);
        assert!(matches!(hub.redeem(&t1.to_string(), None, None), Err(TicketError::Expired)));
        // Even past the redeem's own expiry check (a sweep at the expiry
        // instant, between the check and the take): expired, not redeemed.
        assert!(matches!(a.tickets.take(&t1), Err(TicketError::Expired)));
        assert!(matches!(a.tickets.take(&t2), Err(TicketError::Redeemed)));
        // Found by an issue (which prunes) and by a session's end.
        issue(&b);
        issue(&c);
        std::thread::sleep(ttl + std::time::Duration::from_millis(50));
        issue(&b);
        hub.remove(&c.id());
        assert_eq!(hub.tickets_expired(), 5, "b's by the issue, c's by its end");
        assert_eq!(hub.sweep_tickets(), 0, "b's new one is live");
    }

    /// A refused migration says why: the refusal's or the ticket's message.
    #[test]
    fn migrate_errors_display_their_cause() {
        use crate::session::{MigrateError, TicketError};
        use crate::Refusal;
        assert_eq!(MigrateError::Refused(Refusal::UnknownSession).to_string(), "unknown session");
        assert_eq!(
            MigrateError::Ticket(TicketError::TooMany { max: 4 }).to_string(),
            "at most 4 outstanding tickets per session"
        );
    }
}
