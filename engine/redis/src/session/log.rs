//! Writing a session's log: streams opened and ended, events appended
//! (in batches, guarded by their queue's order), a request answered and
//! its stream ended in one step.

use crate::client::durable::Write;
use crate::client::{random_u64, random_u64s, RedisStore};
use crate::error::{AppendError, Guarded, StoreError};
use crate::model::{Appended, Orphaned, RequestAt};
use crate::reply::{int, script_items, text};
use bytes::Bytes;
use gapless::{Seq, SessionId, StreamId};
use redis::Value;

impl RedisStore {
    /// Opens a stream on the session.
    pub async fn open_stream(&self, id: &SessionId) -> Result<StreamId, StoreError> {
        self.open_stream_seen(id, Seq(0)).await.map(|(s, _)| s)
    }

    /// [`RedisStore::open_stream`] from a node whose replica's head is
    /// `seen`: also the store's head (below `seen`: the replica holds events
    /// the store lost; see [`RedisStore::facts_seen`]).
    pub async fn open_stream_seen(&self, id: &SessionId, seen: Seq) -> Result<(StreamId, Seq), StoreError> {
        let r = self.call(&self.scripts.open_stream, id, &[seen.0.to_string().as_bytes()]).await?;
        match text(&r[0])?.as_str() {
            "ok" => Ok((StreamId(int(r.get(1))?), Seq(int(r.get(2))?))),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// Answers a request, once: on its own stream (a [`StreamId`] is
    /// [`RequestAt::Own`]) the answer ends the stream, unless it has ended
    /// already; on a shared stream the answer is written unless the
    /// request's token shows it was answered already, and the stream goes
    /// on. When nothing is written the answer is `Ok(false)`: retrying after
    /// a timeout, or racing the reaper of a node thought dead, never answers
    /// twice.
    pub async fn answer(
        &self,
        id: &SessionId,
        at: impl Into<RequestAt>,
        payload: &[u8],
    ) -> Result<bool, StoreError> {
        match self.orphan(id, at.into(), Some(payload)).await? {
            Orphaned::Wrote => Ok(true),
            Orphaned::Done => Ok(false),
            Orphaned::TooLarge => Err(StoreError::AnswerTooLarge { len: payload.len() }),
        }
    }

    /// Marks a request on a shared stream answered without an answer (it
    /// was cancelled: MCP sends no response then), so that no reaper
    /// answers it if its node dies before it forgets the request
    /// ([`RedisStore::finish_request`]). `Ok(false)`: it was answered or
    /// marked already, or its stream is gone. A request on its own stream
    /// is marked by ending the stream instead ([`RedisStore::end_stream`]).
    pub async fn mark_answered(
        &self,
        id: &SessionId,
        stream: StreamId,
        token: u64,
    ) -> Result<bool, StoreError> {
        Ok(self.orphan(id, RequestAt::Shared(stream, token), None).await? == Orphaned::Wrote)
    }

    /// `orphan.lua` (the answer, once, and the end of the request's own
    /// stream; with no `payload`, a shared stream's mark alone), safe from
    /// a failover (`durable.rs`).
    pub(crate) async fn orphan(
        &self,
        id: &SessionId,
        at: RequestAt,
        payload: Option<&[u8]>,
    ) -> Result<Orphaned, StoreError> {
        let nonce = format!("{:016x}", random_u64());
        let s = at.stream().0.to_string();
        let token = match at {
            RequestAt::Own(_) => String::new(),
            RequestAt::Shared(_, t) => format!("{t:016x}"),
        };
        let mut args: Vec<&[u8]> =
            vec![s.as_bytes(), nonce.as_bytes(), payload.unwrap_or_default(), token.as_bytes()];
        if payload.is_none() {
            args.push(b"mark");
        }
        let cmd = self.script_cmd(&self.scripts.orphan, id, None, &args);
        let add = |p: &mut redis::Pipeline| {
            p.add_command(cmd.clone());
        };
        let w = Write {
            add: &add,
            script: Some(&self.scripts.orphan),
            marker: Some(crate::keys::marker(&self.config.prefix, id)),
        };
        // A try after the first finds what an earlier one wrote ("done"),
        // unless a failover lost it.
        let mut outcome = None;
        for answer in self.durably(&w).await? {
            let items = script_items(answer)?;
            outcome = match (outcome, text(&items[0])?.as_str()) {
                (Some(Orphaned::Wrote), _) | (_, "ok") => Some(Orphaned::Wrote),
                (_, "done") => Some(Orphaned::Done),
                (_, "too_large") => Some(Orphaned::TooLarge),
                _ => return Err(StoreError::UnknownSession),
            };
        }
        outcome.ok_or_else(|| StoreError::Protocol("no answer from orphan.lua".into()))
    }

    /// Appends a batch of events in one script call: seqs dense and in
    /// batch order, the window trimmed in the same step. A refused batch
    /// writes nothing.
    pub async fn append(
        &self,
        id: &SessionId,
        events: &[(StreamId, Bytes)],
    ) -> Result<Vec<Appended>, AppendError> {
        self.append_guarded(id, None, "", events).await.map_err(|e| match e {
            Guarded::Refused(e) => e,
            Guarded::Order(last) => {
                AppendError::Store(StoreError::Protocol(format!("an unguarded append answered order {last}")))
            }
        })
    }

    /// [`RedisStore::append`] as batch `number` of the queue `guard`
    /// names: written only if the queue's last written batch is
    /// `number - 1` (or the queue has none), else [`Guarded::Order`] with the
    /// queue's last written batch and nothing written. Each event records
    /// `origin`, the writing node (`""`: none), so that the node's follower
    /// need not read it back ([`RedisStore::tail_skipping`]).
    pub(crate) async fn append_guarded(
        &self,
        id: &SessionId,
        guard: Option<(&str, u64)>,
        origin: &str,
        events: &[(StreamId, Bytes)],
    ) -> Result<Vec<Appended>, Guarded> {
        if events.is_empty() {
            return Ok(Vec::new());
        }
        let checks = random_u64s(events.len());
        let strings: Vec<(String, String)> =
            events.iter().zip(&checks).map(|((s, _), c)| (s.0.to_string(), format!("{c:016x}"))).collect();
        let n = events.len().to_string();
        let number = guard.map_or_else(String::new, |(_, k)| k.to_string());
        let mut args: Vec<&[u8]> = Vec::with_capacity(3 + 3 * events.len());
        args.extend([n.as_bytes(), number.as_bytes(), origin.as_bytes()]);
        for ((_, payload), (s, c)) in events.iter().zip(&strings) {
            args.extend([s.as_bytes(), c.as_bytes(), &payload[..]]);
        }
        let extra = guard.map(|(g, _)| crate::keys::append_guard(&self.config.prefix, id, g));
        let refused = |e: StoreError| Guarded::Refused(AppendError::Store(e));
        let r = self.call_with(&self.scripts.append, id, extra, &args).await.map_err(refused)?;
        let status = text(&r[0]).map_err(refused)?;
        let num = |i: usize| int(r.get(i)).map_err(refused);
        match status.as_str() {
            "ok" => {
                let first = num(1)?;
                let mut next = first_indexes(&text(r.get(2).unwrap_or(&Value::Nil)).map_err(refused)?)
                    .map_err(refused)?;
                let mut out = Vec::with_capacity(events.len());
                for (i, ((stream, _), &check)) in events.iter().zip(&checks).enumerate() {
                    let index = next.get_mut(&stream.0).ok_or_else(|| {
                        refused(StoreError::Protocol(format!("append answered no index for stream {stream}")))
                    })?;
                    out.push(Appended { seq: Seq(first + i as u64), index: *index, check });
                    *index += 1;
                }
                Ok(out)
            }
            "order" => Err(Guarded::Order(num(1)?)),
            "unknown" => Err(Guarded::Refused(AppendError::Store(StoreError::UnknownSession))),
            "ended" => Err(Guarded::Refused(AppendError::StreamEnded(StreamId(num(1)?)))),
            "no_stream" => Err(Guarded::Refused(AppendError::UnknownStream(StreamId(num(1)?)))),
            "too_large" => Err(Guarded::Refused(AppendError::PayloadTooLarge {
                index: num(1)? as usize,
                len: num(2)? as usize,
                budget: num(3)? as usize,
            })),
            s => Err(refused(StoreError::Protocol(format!("append answered {s}")))),
        }
    }

    /// Ends a stream (idempotent).
    pub async fn end_stream(&self, id: &SessionId, stream: StreamId) -> Result<(), StoreError> {
        let r = self.call(&self.scripts.end_stream, id, &[stream.0.to_string().as_bytes()]).await?;
        match text(&r[0])?.as_str() {
            "ok" => Ok(()),
            _ => Err(StoreError::UnknownSession),
        }
    }
}

/// The index of each stream's first event of a batch, as `append.lua`
/// answers it ("<stream>:<index>,...").
fn first_indexes(s: &str) -> Result<std::collections::HashMap<u64, u64>, StoreError> {
    let bad = || StoreError::Protocol(format!("append answered the indexes {s:?}"));
    s.split(',')
        .filter(|p| !p.is_empty())
        .map(|p| {
            let (stream, index) = p.split_once(':').ok_or_else(bad)?;
            Ok((stream.parse().map_err(|_| bad())?, index.parse().map_err(|_| bad())?))
        })
        .collect()
}
