//! Holds of a session (`hold.lua`): what one node of the cluster, or one
//! connection of a node, does for a session at a time (the standalone
//! stream's GET, `docs/SPEC.md` §8.3; an application's hold, §10.6). A hold
//! is a field of the session's meta, gone with the session, and renewed by
//! nobody: it is valid while its holder's node's lease is (§8.6).

use crate::client::RedisStore;
use crate::error::StoreError;
use crate::keys::node_alive;
use crate::reply::text;
use gapless::SessionId;

/// How far two nodes' clocks may differ for [`RedisStore::node_is_alive`]:
/// a dead node is taken for dead this long after its lease ran out, when its
/// lease key is gone and only its score says when.
pub(crate) const SKEW: std::time::Duration = std::time::Duration::from_millis(500);

/// The standalone stream's hold (its holder: `<node>:<connection>`).
pub const STANDALONE_HOLD: &str = "sa";

/// What [`RedisStore::take_hold`] found.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Hold {
    /// The caller holds it now; `replaced`: the holder it took it from (one
    /// found gone), if any.
    Taken {
        /// The holder before, found gone.
        replaced: Option<String>,
    },
    /// A live holder has it.
    Busy {
        /// The holder.
        holder: String,
    },
}

/// The node of a holder (`<node>` or `<node>:<anything>`).
pub fn holder_node(holder: &str) -> &str {
    holder.split(':').next().unwrap_or_default()
}

impl RedisStore {
    /// Takes hold `field` of session `id` for `holder` (`<node>` or
    /// `<node>:<anything>`): when nobody holds it, when `holder` does, when
    /// its holder's node's lease has expired (a node that died; looked at
    /// only with `judge_deaths`: a caller whose own view of the store is
    /// unreliable takes nobody for dead), or when its holder is of
    /// `holder`'s own node and `stale` says it ended. `Err(UnknownSession)`
    /// when the session is gone.
    pub async fn take_hold(
        &self,
        id: &SessionId,
        field: &str,
        holder: &str,
        judge_deaths: bool,
        stale: impl Fn(&str) -> bool,
    ) -> Result<Hold, StoreError> {
        let mut gone = String::new();
        let mut current = String::new();
        for _ in 0..2 {
            let args: [&[u8]; 4] = [b"take", field.as_bytes(), holder.as_bytes(), gone.as_bytes()];
            let r = self.call(&self.scripts.hold, id, &args).await?;
            match text(&r[0])?.as_str() {
                "ok" => return Ok(Hold::Taken { replaced: (!gone.is_empty()).then_some(gone) }),
                "busy" => current = text(&r[1])?,
                _ => return Err(StoreError::UnknownSession),
            }
            let node = holder_node(&current);
            let free = if node == holder_node(holder) {
                stale(&current)
            } else {
                judge_deaths && !self.node_is_alive(node).await?
            };
            if !free {
                break;
            }
            gone.clone_from(&current);
        }
        // Held by a live holder, or taken by yet another one meanwhile.
        Ok(Hold::Busy { holder: current })
    }

    /// Lets go of hold `field` of session `id` if `holder` holds it (a
    /// session that is gone holds nothing).
    pub async fn drop_hold(&self, id: &SessionId, field: &str, holder: &str) -> Result<(), StoreError> {
        let args: [&[u8]; 4] = [b"drop", field.as_bytes(), holder.as_bytes(), b""];
        let r = self.call(&self.scripts.hold, id, &args).await?;
        match text(&r[0])?.as_str() {
            "ok" | "unknown" => Ok(()),
            other => Err(StoreError::Protocol(format!("hold.lua answered {other:?}"))),
        }
    }

    /// Whether node `node` is still in the node set: a dead node leaves it
    /// once a reaper answered every request it left open (§8.6).
    pub async fn node_is_listed(&self, node: &str) -> Result<bool, StoreError> {
        let score: Option<f64> =
            self.cmd(redis::cmd("ZSCORE").arg(crate::keys::nodes(&self.config.prefix)).arg(node)).await?;
        Ok(score.is_some())
    }

    /// Whether node `node` is alive: its lease key is there (one
    /// `EXISTS`), or else its score in the node set (when its lease runs out
    /// by its own clock, [`RedisStore::heartbeat`]) is less than
    /// 500 ms (`SKEW`) ago by this node's clock. The two are in different hash
    /// slots, so a Redis Cluster failover of the master holding one of them
    /// (which may hold up the node's renewals of it for longer than its
    /// lease) does not alone make a live node look dead.
    pub async fn node_is_alive(&self, node: &str) -> Result<bool, StoreError> {
        let p = &self.config.prefix;
        if self.cmd(redis::cmd("EXISTS").arg(node_alive(p, node))).await? {
            return Ok(true);
        }
        let score: Option<f64> = self.cmd(redis::cmd("ZSCORE").arg(crate::keys::nodes(p)).arg(node)).await?;
        let now = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_millis() as u64);
        Ok(score.is_some_and(|s| s as u64 + SKEW.as_millis() as u64 > now))
    }
}
