//! Task records (the MCP tasks extension; `docs/SPEC.md` §5.5, §8.9):
//! opaque values the server writes whole, one key per task, kept past
//! their expiry for a while so that a late poll is told "expired".
//!
//! Keys: `<prefix>task:{<id>}` holds the record (its hash tag is the id, so
//! its marker write shares its slot); `<prefix>tasks` and
//! `<prefix>tasks:client:{<client>}` are sorted sets of the unexpired
//! tasks in all and of one client (score: expiry, ms), what the bounds
//! count. Each step touches one key, so a Redis Cluster serves them all.
//!
//! Both writes of a record, its creation and each replacement, count as
//! done only once a replica has them ([`RedisStore::durably`]): a task the
//! client was told exists must survive a failover, and so must its outcome.

use crate::client::durable::Write;
use crate::client::RedisStore;
use crate::error::StoreError;
use redis::Value;

/// What [`RedisStore::task_create`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TaskCreated {
    /// Stored, and safe from a failover.
    Stored,
    /// The store holds `max` unexpired tasks in all, or the client
    /// (`per_client`) its `max`: nothing was stored.
    Full {
        /// The bound that was reached.
        max: usize,
        /// Whether it is the client's bound.
        per_client: bool,
    },
}

/// A new task record.
#[derive(Clone, Copy, Debug)]
pub struct NewTask<'a> {
    /// The task's id.
    pub id: &'a str,
    /// Its record, whole.
    pub value: &'a str,
    /// Whose bound it counts against, if any's.
    pub client: Option<&'a str>,
    /// When it expires (Unix ms).
    pub expires_ms: u64,
    /// How much longer the record is kept (what lets a late poll be told
    /// it expired).
    pub keep_ms: u64,
}

/// The bounds a new task is created under.
#[derive(Clone, Copy, Debug)]
pub struct TaskBounds {
    /// Most unexpired tasks in the store.
    pub max: usize,
    /// Most of one client's.
    pub max_per_client: usize,
}

fn record_key(prefix: &str, id: &str) -> String {
    format!("{prefix}task:{{{id}}}")
}

fn marker_key(prefix: &str, id: &str) -> String {
    format!("{prefix}task:{{{id}}}:w")
}

impl RedisStore {
    async fn reserve(
        &self,
        set: String,
        id: &str,
        max: usize,
        now_ms: u64,
        expires_ms: u64,
    ) -> Result<bool, StoreError> {
        let mut inv = self.task_scripts.reserve.prepare_invoke();
        inv.key(set).arg(now_ms).arg(max).arg(id).arg(expires_ms);
        let mut c = self.conn.clone();
        let r: i64 = self.bounded(inv.invoke_async(&mut c)).await?;
        Ok(r == 1)
    }

    /// Stores a new task record within `bounds` (its client's bound applies
    /// when it names one). Returns once a replica has it (or the primary
    /// has none).
    pub async fn task_create(
        &self,
        task: NewTask<'_>,
        bounds: TaskBounds,
        now_ms: u64,
    ) -> Result<TaskCreated, StoreError> {
        let NewTask { id, value, client, expires_ms, keep_ms } = task;
        let p = self.config.prefix.clone();
        let all = format!("{p}tasks");
        if !self.reserve(all.clone(), id, bounds.max, now_ms, expires_ms).await? {
            return Ok(TaskCreated::Full { max: bounds.max, per_client: false });
        }
        let mine = client.map(|c| format!("{p}tasks:client:{{{c}}}"));
        if let Some(set) = &mine {
            if !self.reserve(set.clone(), id, bounds.max_per_client, now_ms, expires_ms).await? {
                let _: Result<i64, _> = self.cmd(redis::cmd("ZREM").arg(&all).arg(id)).await;
                return Ok(TaskCreated::Full { max: bounds.max_per_client, per_client: true });
            }
        }
        let keep = expires_ms.saturating_sub(now_ms).saturating_add(keep_ms).max(1);
        let mut cmd = redis::cmd("SET");
        cmd.arg(record_key(&p, id)).arg(value).arg("PX").arg(keep);
        let add = |pipe: &mut redis::Pipeline| {
            pipe.add_command(cmd.clone());
        };
        let w = Write { add: &add, script: None, marker: Some(marker_key(&p, id)) };
        match self.durably(&w).await {
            Ok(_) => Ok(TaskCreated::Stored),
            Err(e) => {
                // Not stored for sure: give the places back (they would
                // expire with the task anyway).
                let _: Result<i64, _> = self.cmd(redis::cmd("ZREM").arg(&all).arg(id)).await;
                if let Some(set) = &mine {
                    let _: Result<i64, _> = self.cmd(redis::cmd("ZREM").arg(set).arg(id)).await;
                }
                Err(e)
            }
        }
    }

    /// The record of task `id`, if the store still keeps it.
    pub async fn task_get(&self, id: &str) -> Result<Option<String>, StoreError> {
        self.cmd(redis::cmd("GET").arg(record_key(&self.config.prefix, id))).await
    }

    /// Replaces task `id`'s record with `new` if it is still `old`, keeping
    /// its expiry; `Ok(false)` if it changed meanwhile (read it again) or is
    /// gone. Returns once a replica has it (or the primary has none).
    pub async fn task_replace(&self, id: &str, old: &str, new: &str) -> Result<bool, StoreError> {
        let p = &self.config.prefix;
        let script = &self.task_scripts.replace;
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(1).arg(record_key(p, id)).arg(old).arg(new);
        let add = |pipe: &mut redis::Pipeline| {
            pipe.add_command(cmd.clone());
        };
        let w = Write { add: &add, script: Some(script), marker: Some(marker_key(p, id)) };
        let r = self.durably(&w).await?;
        // Each try's answer; the write took on any of them.
        Ok(r.iter().any(|v| matches!(v, Value::Int(1))))
    }
}

#[cfg(test)]
mod tests {
    /// REPLACE announces on its record's key with `:n`: the task's channel.
    #[test]
    fn a_record_announces_on_its_task_channel() {
        assert_eq!(format!("{}:n", super::record_key("p:", "t-1")), crate::keys::task_channel("p:", "t-1"));
    }
}
