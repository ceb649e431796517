//! Leases on one thing of a session that one connection in the whole
//! cluster may do at a time (the standalone stream's GET).

use crate::client::{ms, RedisStore};
use crate::error::StoreError;
use gapless::SessionId;
use std::time::Duration;

impl RedisStore {
    /// Takes (or refreshes) lease `name` of the session for `holder` for
    /// `ttl`; `false` while someone else holds it. A lease names one thing
    /// only one connection in the cluster may do at a time (the standalone
    /// stream's GET).
    pub async fn take_lease(
        &self,
        id: &SessionId,
        name: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<bool, StoreError> {
        let key = crate::keys::lease(&self.config.prefix, id, name);
        let mut inv = self.scripts.lease_take.key(key);
        inv.arg(holder).arg(ms(ttl));
        let mut c = self.conn.clone();
        let v: i64 = self.bounded(inv.invoke_async(&mut c)).await?;
        Ok(v == 1)
    }

    /// Drops lease `name` if `holder` holds it.
    pub async fn drop_lease(&self, id: &SessionId, name: &str, holder: &str) -> Result<(), StoreError> {
        let key = crate::keys::lease(&self.config.prefix, id, name);
        let mut inv = self.scripts.lease_drop.key(key);
        inv.arg(holder);
        let mut c = self.conn.clone();
        let _: i64 = self.bounded(inv.invoke_async(&mut c)).await?;
        Ok(())
    }
}
