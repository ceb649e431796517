//! What keeps an idle session alive and watched without a command per
//! session per second (`docs/SPEC.md` §8.1, §8.8): a node's pin while it
//! has a connection open on the session (`pin.lua`), and the safety net's
//! cheap look at a session's log (`probe.lua`).

use crate::client::durable::Write;
use crate::client::RedisStore;
use crate::error::StoreError;
use crate::keys::node_pinned;
use crate::model::Position;
use crate::reply::{int, opt_hex, script_items, text};
use gapless::SessionId;

/// What [`RedisStore::probe`] found of a session's log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Probe {
    /// The position of the log's last entry (`(0, 0)`: the log is empty),
    /// its nonce when it is an event, and how many control entries the log
    /// ever had.
    Last(Position, Option<u64>, u64),
    /// The session is not in the store.
    Gone,
}

impl RedisStore {
    /// Pins session `id` for node `node` (`on`), or lets go of the node's
    /// pin. A pinned session does not expire (its keys carry no TTL); the
    /// last pin to go gives them the idle timeout again, from now. The node
    /// records the session in its set of pins first, so that the reaper of
    /// a node that dies lets go of them ([`RedisStore::reap`]); the pin is
    /// written durably (a failover that lost it would let an open
    /// connection's session expire). `false`: the session is gone.
    pub async fn pin(&self, id: &SessionId, node: &str, on: bool) -> Result<bool, StoreError> {
        let set = node_pinned(&self.config.prefix, node);
        let sid = id.to_string();
        if on {
            // Durable like the pin: a failover that lost it would leave the
            // pin to nobody once this node dies.
            let mut sadd = redis::cmd("SADD");
            sadd.arg(&set).arg(&sid);
            let add = |p: &mut redis::Pipeline| {
                p.add_command(sadd.clone());
            };
            self.durably(&Write { add: &add, script: None, marker: None }).await?;
        }
        let flag: &[u8] = if on { b"1" } else { b"0" };
        let cmd = self.script_cmd(&self.scripts.pin, id, None, &[node.as_bytes(), flag]);
        let add = |p: &mut redis::Pipeline| {
            p.add_command(cmd.clone());
        };
        let w = Write {
            add: &add,
            script: Some(&self.scripts.pin),
            marker: Some(crate::keys::marker(&self.config.prefix, id)),
        };
        let answers = self.durably(&w).await?;
        let last = answers
            .into_iter()
            .last()
            .ok_or_else(|| StoreError::Protocol("no answer from pin.lua".into()))?;
        let found = text(&script_items(last)?[0])? == "ok";
        if !on || !found {
            self.cmd::<()>(redis::cmd("SREM").arg(&set).arg(&sid)).await?;
        }
        Ok(found)
    }

    /// Lets go of every pin of node `node` (a node whose lease expired):
    /// their sessions expire idle from now unless another node pins them.
    pub(crate) async fn unpin_all(&self, node: &str) -> Result<usize, StoreError> {
        let set = node_pinned(&self.config.prefix, node);
        let pinned: Vec<String> = self.cmd(redis::cmd("SMEMBERS").arg(&set)).await?;
        for sid in &pinned {
            if let Some(id) = SessionId::parse(sid) {
                self.pin(&id, node, false).await?;
            } else {
                self.cmd::<()>(redis::cmd("SREM").arg(&set).arg(sid)).await?;
            }
        }
        Ok(pinned.len())
    }

    /// The position of the last entry of session `id`'s log, or
    /// [`Probe::Gone`]: a look that reads two keys, writes nothing and
    /// refreshes no TTL (the safety net behind a follower's pushed
    /// wake-ups).
    pub async fn probe(&self, id: &SessionId) -> Result<Probe, StoreError> {
        let r = self.call(&self.scripts.probe, id, &[]).await?;
        if text(&r[0])? != "ok" {
            return Ok(Probe::Gone);
        }
        let last = text(&r[1])?;
        if last.is_empty() {
            return Ok(Probe::Last((0, 0), None, int(r.get(3))?));
        }
        let parse = || {
            let (seq, k) = last.split_once('-')?;
            Some((seq.parse().ok()?, k.parse().ok()?))
        };
        let at = parse().ok_or_else(|| StoreError::Protocol(format!("a log entry id {last:?}")))?;
        Ok(Probe::Last(at, opt_hex(r.get(2))?, int(r.get(3))?))
    }
}
