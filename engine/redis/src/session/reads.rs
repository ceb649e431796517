//! Reading a session's log: what a follower tails, the nonce at one seq,
//! and the events a granted replay reads straight from the log.

use crate::client::RedisStore;
use crate::error::{ReplayError, StoreError};
use crate::facts::ReplayPlan;
use crate::keys::session_keys;
use crate::model::{OwnEvent, Position, StoredEvent, Tail, TailEntry};
use crate::reply::{hex, int, log_events, namespace, opt_hex, text};
use bytes::Bytes;
use gapless::{Seq, SessionId, StreamId};
use redis::Value;

/// How many `XRANGE`s one replay round trip sends ([`RedisStore::replay`]).
pub const REPLAY_CHUNKS: usize = 16;

impl RedisStore {
    /// Up to `count` log entries after `after`, for a follower whose
    /// replica's head is `seen` (see [`RedisStore::facts_seen`]); `None` when
    /// the session is gone.
    pub async fn tail(
        &self,
        id: &SessionId,
        after: Position,
        count: usize,
        seen: Seq,
    ) -> Result<Option<Tail>, StoreError> {
        self.tail_skipping(id, after, count, seen, "").await
    }

    /// [`RedisStore::tail`] for node `origin`: the events it wrote itself
    /// come as [`TailEntry::Own`], without their payloads (`""`: none).
    pub async fn tail_skipping(
        &self,
        id: &SessionId,
        after: Position,
        count: usize,
        seen: Seq,
        origin: &str,
    ) -> Result<Option<Tail>, StoreError> {
        let from = format!("{}-{}", after.0, after.1);
        let (count, seen) = (count.max(1).to_string(), seen.0.to_string());
        let args: [&[u8]; 4] = [from.as_bytes(), count.as_bytes(), seen.as_bytes(), origin.as_bytes()];
        let r = self.call(&self.scripts.tail, id, &args).await?;
        if text(&r[0])? != "ok" {
            return Ok(None);
        }
        let mut entries = Vec::new();
        for e in r[7..].chunks(7) {
            let [kind, seq, k, stream, index, nonce, payload] = e else {
                return Err(StoreError::Protocol("ragged tail".into()));
            };
            let pos = (int(Some(seq))?, int(Some(k))?);
            let stream = StreamId(int(Some(stream))?);
            let entry = match text(kind)?.as_str() {
                "v" => TailEntry::Event(StoredEvent {
                    seq: Seq(pos.0),
                    stream,
                    index_in_stream: int(Some(index))?,
                    check: hex(Some(nonce))?,
                    payload: match payload {
                        Value::BulkString(b) => Bytes::from(b.clone()),
                        other => {
                            return Err(StoreError::Protocol(format!("expected a payload, got {other:?}")))
                        }
                    },
                }),
                "e" => TailEntry::Ended(stream),
                "o" => TailEntry::Own(OwnEvent {
                    seq: Seq(pos.0),
                    stream,
                    index_in_stream: int(Some(index))?,
                    check: hex(Some(nonce))?,
                }),
                other => return Err(StoreError::Protocol(format!("unknown log entry kind {other:?}"))),
            };
            entries.push((pos, entry));
        }
        Ok(Some(Tail {
            oldest: Seq(int(r.get(1))?),
            head: Seq(int(r.get(2))?),
            ns: namespace(r.get(3))?,
            check_at: opt_hex(r.get(4))?,
            migrated: int(r.get(5))? == 1,
            ctl: int(r.get(6))?,
            entries,
        }))
    }

    /// The nonce of the event at `seq`, if the log holds it (one read, no
    /// script).
    pub async fn check_at(&self, id: &SessionId, seq: Seq) -> Result<Option<u64>, StoreError> {
        let [_, log, ..] = session_keys(&self.config.prefix, id);
        let at = format!("{}-0", seq.0);
        let v: Value = self.cmd(redis::cmd("XRANGE").arg(&log).arg(&at).arg(&at)).await?;
        Ok(log_events(&v)?.first().map(|e| e.check))
    }

    /// Reads the events `plan` grants, in seq order. The log is read
    /// directly (no script): `XRANGE`s of `page` seqs each, up to
    /// [`REPLAY_CHUNKS`] of them in one `MULTI`/`EXEC` with the session's
    /// namespace, so one round trip reads up to `page * REPLAY_CHUNKS`
    /// seqs. Every seq of the range must be there, in the decided
    /// incarnation, and the event at the decided head must carry the nonce
    /// it had: otherwise the window moved, the session was replaced, or a
    /// failover rewrote the log after the decision, and the answer is
    /// [`ReplayError::Moved`].
    pub async fn replay(
        &self,
        id: &SessionId,
        plan: &ReplayPlan,
        page: usize,
    ) -> Result<Vec<StoredEvent>, ReplayError> {
        let [meta, log, ..] = session_keys(&self.config.prefix, id);
        let page = page.max(1) as u64;
        let mut out = Vec::new();
        let mut next = plan.from.0;
        while next <= plan.to.0 {
            let mut pipe = redis::pipe();
            pipe.atomic().cmd("HGET").arg(&meta).arg("ns");
            // The event at the decided head, still the one decided on.
            let h = plan.head.0;
            pipe.cmd("XRANGE").arg(&log).arg(format!("{h}-0")).arg(format!("{h}-0"));
            let mut chunks = Vec::new();
            while chunks.len() < REPLAY_CHUNKS && next <= plan.to.0 {
                let last = (next + page - 1).min(plan.to.0);
                pipe.cmd("XRANGE").arg(&log).arg(format!("{next}-0")).arg(format!("{last}-0"));
                chunks.push((next, last));
                next = last + 1;
            }
            let r: Vec<Value> = self.cmd_pipe(&pipe).await?;
            let ns = match r.first() {
                Some(Value::Nil) | None => return Err(ReplayError::Moved),
                Some(v) => hex(Some(v))?,
            };
            if ns != plan.ns.0 {
                return Err(ReplayError::Moved);
            }
            if let Some(check) = plan.head_check {
                let at_head = r.get(1).map(log_events).transpose()?.unwrap_or_default();
                if at_head.first().map(|e| e.check) != Some(check) {
                    return Err(ReplayError::Moved); // a failover rewrote the log since
                }
            }
            for ((first, last), entries) in chunks.into_iter().zip(&r[2..]) {
                let mut want = first;
                for e in log_events(entries)? {
                    if e.seq.0 != want {
                        return Err(ReplayError::Moved); // trimmed meanwhile
                    }
                    want += 1;
                    if plan.stream.is_none_or(|s| s == e.stream) {
                        out.push(e);
                    }
                }
                if want != last + 1 {
                    return Err(ReplayError::Moved);
                }
            }
        }
        Ok(out)
    }
}
