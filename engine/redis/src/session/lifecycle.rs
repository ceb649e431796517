//! A session's life in the store: created (or replaced), looked up,
//! attached by a follower, its version recorded, deleted.

use crate::client::{ms, owner_args, random_u64, RedisStore};
use crate::error::StoreError;
use crate::model::{Attach, StoredSession};
use crate::reply::{int, namespace, opt_hex, text};
use gapless::{Namespace, Seq, SessionId, StreamId};
use redis::Value;

impl RedisStore {
    /// Creates a session under `id` (replacing any incarnation under it),
    /// bound to `owner` if given, with a fresh namespace.
    pub async fn create(&self, id: SessionId, owner: Option<&str>) -> Result<StoredSession, StoreError> {
        self.create_versioned(id, owner, "").await
    }

    /// [`RedisStore::create`] recording the negotiated protocol version.
    pub async fn create_versioned(
        &self,
        id: SessionId,
        owner: Option<&str>,
        version: &str,
    ) -> Result<StoredSession, StoreError> {
        let ns = Namespace(random_u64());
        let c = &self.config;
        let (flag, owner) = owner_args(owner);
        let ttl = ms(c.idle_timeout).to_string();
        self.call(
            &self.scripts.create,
            &id,
            &[
                ns.to_string().as_bytes(),
                flag,
                owner,
                c.ring.capacity.to_string().as_bytes(),
                c.ring.byte_budget.to_string().as_bytes(),
                ttl.as_bytes(),
                version.as_bytes(),
            ],
        )
        .await?;
        Ok(StoredSession { id, ns, version: version.to_owned(), migrated: false })
    }

    /// Records the session's negotiated protocol version.
    pub async fn set_version(&self, id: &SessionId, version: &str) -> Result<(), StoreError> {
        let r = self.call(&self.scripts.set_version, id, &[version.as_bytes()]).await?;
        match text(&r[0])?.as_str() {
            "ok" => Ok(()),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// Records `value` as the session's `name`: what an application keeps
    /// of a session for every node (a gateway's upstream session). It goes
    /// when the session does.
    pub async fn set_value(&self, id: &SessionId, name: &str, value: &[u8]) -> Result<(), StoreError> {
        let r = self.call(&self.scripts.set_value, id, &[name.as_bytes(), value]).await?;
        match text(&r[0])?.as_str() {
            "ok" => Ok(()),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// The session's `name` ([`RedisStore::set_value`]), `None` when it has
    /// none.
    pub async fn value(&self, id: &SessionId, name: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let r = self.call(&self.scripts.get_value, id, &[name.as_bytes()]).await?;
        match (text(&r[0])?.as_str(), r.get(1)) {
            ("ok", None) => Ok(None),
            ("ok", Some(Value::BulkString(v))) => Ok(Some(v.clone())),
            ("ok", Some(other)) => Err(StoreError::Protocol(format!("a session value: {other:?}"))),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// Where a new follower of the session starts, if `owner` sees it.
    pub async fn attach(&self, id: &SessionId, owner: Option<&str>) -> Result<Option<Attach>, StoreError> {
        let (flag, owner) = owner_args(owner);
        let r = self.call(&self.scripts.attach, id, &[flag, owner]).await?;
        if text(&r[0])? != "ok" || r.len() != 10 {
            return Ok(None);
        }
        let live = match &r[7] {
            Value::Array(a) => a.iter().map(|v| int(Some(v)).map(StreamId)).collect::<Result<_, _>>()?,
            other => return Err(StoreError::Protocol(format!("expected stream ids, got {other:?}"))),
        };
        Ok(Some(Attach {
            ns: namespace(r.get(1))?,
            head: Seq(int(r.get(2))?),
            opened: StreamId(int(r.get(3))?),
            position: (int(r.get(4))?, int(r.get(5))?),
            version: text(&r[6])?,
            live,
            migrated: int(r.get(8))? == 1,
            check: opt_hex(r.get(9))?,
        }))
    }

    /// The session under `id` if `owner` may see it (resetting its idle
    /// clock).
    pub async fn lookup(
        &self,
        id: &SessionId,
        owner: Option<&str>,
    ) -> Result<Option<StoredSession>, StoreError> {
        let (flag, owner) = owner_args(owner);
        let r = self.call(&self.scripts.lookup, id, &[flag, owner]).await?;
        if text(&r[0])? != "ok" {
            return Ok(None);
        }
        Ok(Some(StoredSession {
            id: *id,
            ns: namespace(r.get(1))?,
            version: text(r.get(3).unwrap_or(&Value::Nil))?,
            migrated: int(r.get(4))? == 1,
        }))
    }

    /// Deletes the session if `owner` may see it; returns whether it did.
    pub async fn delete(&self, id: &SessionId, owner: Option<&str>) -> Result<bool, StoreError> {
        let (flag, owner) = owner_args(owner);
        let r = self.call(&self.scripts.delete, id, &[flag, owner]).await?;
        Ok(text(&r[0])? == "ok")
    }
}
