//! Migration tickets in the store (`docs/SPEC.md` §4.3, §8.7): issued for
//! a client's cursor, indexed so that any node's socket finds them,
//! redeemed once.

use crate::client::{ms, owner_args, RedisStore};
use crate::error::{RedeemError, StoreError};
use crate::reply::{int, text};
use gapless::{EventId, Seq, SessionId};
use redis::Value;
use std::time::Duration;

impl RedisStore {
    /// Issues migration ticket `ticket` for the client's cursor (`None`:
    /// it processed nothing), valid for `ttl`, at most `max` outstanding per
    /// session; indexes it so that a socket on any node finds its session.
    /// The ticket keeps the cursor's seq and check: redeeming it compares
    /// the check with the nonce then at that seq (see
    /// [`RedisStore::redeem_ticket`]).
    pub async fn issue_ticket(
        &self,
        id: &SessionId,
        owner: Option<&str>,
        ticket: &str,
        cursor: Option<&EventId>,
        ttl: Duration,
        max: usize,
    ) -> Result<Result<(), gapless::session::TicketError>, StoreError> {
        let (flag, o) = owner_args(owner);
        let seq = cursor.map_or(0, |c| c.seq.0).to_string();
        let check = cursor.and_then(|c| c.check).map_or_else(|| "-".to_owned(), |c| format!("{c:016x}"));
        let wire = cursor.map_or_else(|| "-".to_owned(), |c| c.to_string());
        let (t, m) = (ms(ttl).to_string(), max.to_string());
        let r = self
            .call(
                &self.scripts.issue_ticket,
                id,
                &[
                    flag,
                    o,
                    ticket.as_bytes(),
                    seq.as_bytes(),
                    t.as_bytes(),
                    m.as_bytes(),
                    check.as_bytes(),
                    wire.as_bytes(),
                ],
            )
            .await?;
        match text(&r[0])?.as_str() {
            "ok" => {
                // The index is a key of its own slot (the socket knows only
                // the ticket), so it is a second step. Split safely: until
                // it is written the ticket cannot be found, and if writing
                // it fails the caller gets the error (no ticket reaches the
                // client); the orphan entry only counts toward `max` until
                // it expires.
                let key = crate::keys::ticket(&self.config.prefix, ticket);
                self.cmd::<()>(redis::cmd("SET").arg(key).arg(id.to_string()).arg("PX").arg(ms(ttl))).await?;
                Ok(Ok(()))
            }
            "too_many" => Ok(Err(gapless::session::TicketError::TooMany { max })),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// Redeems a ticket (once) for `owner`: its session and cursor seq.
    ///
    /// A ticket whose cursor's event the store no longer has as the client
    /// saw it (another nonce at its seq, or its seq beyond the store's
    /// head: a failover rewrote the log since the ticket was issued) is
    /// [`RedeemError::HistoryRewritten`], as a resume with that cursor is
    /// refused; it is used up all the same.
    pub async fn redeem_ticket(
        &self,
        ticket: &str,
        owner: Option<&str>,
    ) -> Result<Result<(SessionId, Seq), RedeemError>, StoreError> {
        use gapless::session::TicketError;
        // Two steps in two slots (the index, then the session's keys).
        // Once stays once: GETDEL hands the index to one caller only, and
        // the script deletes the ticket itself; a failure between the two
        // uses the ticket up (the client asks for another), never redeems
        // it twice.
        let key = crate::keys::ticket(&self.config.prefix, ticket);
        let sid: Option<String> = self.cmd(redis::cmd("GETDEL").arg(key)).await?;
        let Some(id) = sid.as_deref().and_then(SessionId::parse) else {
            return Ok(Err(RedeemError::Ticket(TicketError::Unknown)));
        };
        let (flag, o) = owner_args(owner);
        let r = self.call(&self.scripts.redeem_ticket, &id, &[ticket.as_bytes(), flag, o]).await?;
        Ok(match text(&r[0])?.as_str() {
            "ok" => Ok((id, Seq(int(r.get(1))?))),
            "rewritten" => {
                let wire = text(r.get(2).unwrap_or(&Value::Nil))?;
                let cursor = EventId::parse(&wire)
                    .map_err(|_| StoreError::Protocol(format!("a ticket kept the cursor {wire:?}")))?;
                Err(RedeemError::HistoryRewritten { cursor, head: Seq(int(r.get(1))?) })
            }
            "expired" => Err(RedeemError::Ticket(TicketError::Expired)),
            "foreign" => Err(RedeemError::Ticket(TicketError::Foreign)),
            _ => Err(RedeemError::Ticket(TicketError::Unknown)),
        })
    }
}
