//! Delivery marks: what a stream's client was sent, recorded before the
//! bytes go out (`docs/SPEC.md` §8.3).

use crate::client::RedisStore;
use crate::error::StoreError;
use crate::reply::{int, text};
use gapless::{Seq, SessionId, StreamId};

impl RedisStore {
    /// Records that event `seq` (the `index`th of `stream`, with nonce
    /// `check` if the caller knows it) was delivered: every earlier event of the stream counts as
    /// delivered too. Returns `false` when the stream's record is gone, and
    /// [`StoreError::Rewritten`] (nothing recorded) when the store's event
    /// at `seq` has another nonce.
    pub async fn mark_delivered(
        &self,
        id: &SessionId,
        stream: StreamId,
        seq: Seq,
        index: u64,
        check: Option<u64>,
    ) -> Result<bool, StoreError> {
        let (s, q, i) = (stream.0.to_string(), seq.0.to_string(), index.to_string());
        let c = check.map_or_else(String::new, |c| format!("{c:016x}"));
        let r = self
            .call(&self.scripts.deliver, id, &[s.as_bytes(), q.as_bytes(), i.as_bytes(), c.as_bytes()])
            .await?;
        match text(&r[0])?.as_str() {
            "ok" => Ok(int(r.get(1))? == 1),
            "rewritten" => Err(StoreError::Rewritten { seq }),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// Records that every event published on `stream` so far counts as
    /// delivered (a JSON-only response stands for them all).
    pub async fn mark_all_delivered(&self, id: &SessionId, stream: StreamId) -> Result<bool, StoreError> {
        let s = stream.0.to_string();
        let r = self.call(&self.scripts.deliver, id, &[s.as_bytes(), b"all", b"0", b""]).await?;
        match text(&r[0])?.as_str() {
            "ok" => Ok(int(r.get(1))? == 1),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// A stream's high-water and delivered marks (`(0, 0)` once its record
    /// is gone).
    pub async fn marks(&self, id: &SessionId, stream: StreamId) -> Result<(Seq, Seq), StoreError> {
        let r = self.call(&self.scripts.marks, id, &[stream.0.to_string().as_bytes()]).await?;
        match text(&r[0])?.as_str() {
            "ok" => Ok((Seq(int(r.get(1))?), Seq(int(r.get(2))?))),
            _ => Err(StoreError::UnknownSession),
        }
    }
}
