//! The decision table on the store (`docs/SPEC.md` §8.4): the facts of a
//! session for a cursor in one call, and the engine's own `decide` on them;
//! the plans of a standalone stream's and a redeemed ticket's backlog.

use crate::client::{owner_args, RedisStore};
use crate::error::{unavailable, StoreError};
use crate::facts::{self, RedisFacts, ReplayPlan};
use crate::reply::{int, text};
use gapless::session::{decide, Decision, Refusal, ResumeRequest, Target};
use gapless::{Seq, SessionId, StreamId};

impl RedisStore {
    /// The decision table's facts about a session for a cursor, in one
    /// call; `None` when the caller sees no such session.
    pub async fn facts(
        &self,
        id: &SessionId,
        owner: Option<&str>,
        target: Target,
        cursor: Option<&str>,
    ) -> Result<Option<RedisFacts>, StoreError> {
        self.facts_seen(id, owner, target, cursor, Seq(0)).await
    }

    /// [`RedisStore::facts`] from a node that has seen `seen` as the
    /// session's head: above the store's head, the store records that it
    /// lost the seqs between (a failover; `docs/SPEC.md` §8.4).
    pub async fn facts_seen(
        &self,
        id: &SessionId,
        owner: Option<&str>,
        target: Target,
        cursor: Option<&str>,
        seen: Seq,
    ) -> Result<Option<RedisFacts>, StoreError> {
        let (flag, owner) = owner_args(owner);
        let parsed = cursor.and_then(|c| gapless::EventId::parse(c).ok());
        let (q, s) = parsed.map_or((0, 0), |c| (c.seq.0, c.stream.0));
        let mode: &[u8] = match target {
            Target::Stream => b"stream",
            Target::Session => b"session",
        };
        let (q, s, seen) = (q.to_string(), s.to_string(), seen.0.to_string());
        let r = self
            .call(&self.scripts.facts, id, &[flag, owner, mode, q.as_bytes(), s.as_bytes(), seen.as_bytes()])
            .await?;
        if text(&r[0])? != "ok" {
            return Ok(None);
        }
        facts::parse(&r, parsed.map(|c| (c.seq, c.stream))).map(Some)
    }

    /// Where stream `stream`'s undelivered backlog starts (its delivered
    /// mark) and whether the window still holds all of it: what a
    /// standalone GET without a cursor replays before going live. `None`
    /// when the caller sees no such session.
    pub async fn backlog(
        &self,
        id: &SessionId,
        owner: Option<&str>,
        stream: StreamId,
    ) -> Result<Option<Result<ReplayPlan, gapless::ring::SnapshotError>>, StoreError> {
        let (flag, owner) = owner_args(owner);
        let s = stream.0.to_string();
        let r = self.call(&self.scripts.facts, id, &[flag, owner, b"stream", b"d", s.as_bytes()]).await?;
        if text(&r[0])? != "ok" {
            return Ok(None);
        }
        let q = Seq(int(r.get(17))?);
        let facts = facts::parse(&r, Some((q, stream)))?;
        Ok(Some(gapless::session::SessionFacts::replay_stream(&facts, stream, q)))
    }

    /// Whether the window still holds every event after `after` (a
    /// redeemed ticket's cursor): the plan of the socket's replay. `None`
    /// when the caller sees no such session.
    pub async fn session_backlog(
        &self,
        id: &SessionId,
        owner: Option<&str>,
        after: Seq,
    ) -> Result<Option<Result<ReplayPlan, gapless::ring::SnapshotError>>, StoreError> {
        let (flag, owner) = owner_args(owner);
        let q = after.0.to_string();
        // Mode "stream" with no stream: the bounds only, no window scan.
        let r = self.call(&self.scripts.facts, id, &[flag, owner, b"stream", q.as_bytes(), b"0"]).await?;
        if text(&r[0])? != "ok" {
            return Ok(None);
        }
        let facts = facts::parse(&r, None)?;
        Ok(Some(gapless::session::SessionFacts::replay_session(&facts, after)))
    }

    /// A resume on the store: rows 1 and 2 (a session id, a session this
    /// caller sees), then the engine's decision table on the store's facts.
    /// A store that cannot be asked is [`Refusal::StoreUnavailable`].
    pub async fn resume(
        &self,
        req: ResumeRequest<'_>,
        target: Target,
    ) -> Result<Decision<ReplayPlan>, Refusal> {
        self.resume_seen(req, target, Seq(0)).await
    }

    /// [`RedisStore::resume`] from a node that has seen `seen` as the
    /// session's head (see [`RedisStore::facts_seen`]).
    pub async fn resume_seen(
        &self,
        req: ResumeRequest<'_>,
        target: Target,
        seen: Seq,
    ) -> Result<Decision<ReplayPlan>, Refusal> {
        let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
        let id = SessionId::parse(sid).ok_or(Refusal::UnknownSession)?;
        let facts = match self.facts_seen(&id, req.owner, target, req.cursor, seen).await {
            Ok(Some(f)) => f,
            Ok(None) => return Err(Refusal::UnknownSession),
            Err(e) => return Err(unavailable(e)),
        };
        decide(&facts, req.cursor, target)
    }
}
