//! The client: [`RedisStore`] itself (its connection, configuration,
//! scripts and counters), one bounded request, one script call on a
//! session's keys, and the writes a failover must not lose (`durable.rs`).
//! What each operation does is `session/`'s, `tasks.rs`', `nodes.rs`'.

pub(crate) mod durable;

use crate::conn::Conn;
use crate::error::StoreError;
use crate::keys::session_keys;
use crate::reply::{script_items, text};
use crate::scripts::{Scripts, TaskScripts};
use gapless::ring::RingConfig;
use gapless::SessionId;
use redis::{Script, Value};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "gapless:";

/// How the store bounds each session (fixed per session at its creation, so
/// every node trims it alike) and names its keys.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoreConfig {
    /// Each session's window: `capacity` events and `byte_budget` payload
    /// bytes, trimmed in the append itself (`chunk_events` is the local
    /// rings' business and ignored here).
    pub ring: RingConfig,
    /// A session no request or open connection touched for this long
    /// expires (its keys' TTL).
    pub idle_timeout: Duration,
    /// Prepended to every key (default `gapless:`).
    pub prefix: String,
    /// How long one Redis call may take before the store counts Redis as
    /// unavailable (default 2 s).
    pub timeout: Duration,
}

impl Default for StoreConfig {
    fn default() -> Self {
        StoreConfig {
            ring: RingConfig::default(),
            idle_timeout: Duration::from_secs(600),
            prefix: DEFAULT_PREFIX.to_owned(),
            timeout: Duration::from_secs(2),
        }
    }
}

/// The Redis Streams store, on a plain Redis or a Redis Cluster. Cloning
/// is cheap (one multiplexed connection per Redis node, re-established in
/// the background when it drops).
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) conn: Conn,
    pub(crate) config: Arc<StoreConfig>,
    pub(crate) scripts: Arc<Scripts>,
    pub(crate) task_scripts: Arc<TaskScripts>,
    pub(crate) task_event_scripts: Arc<crate::scripts::TaskEventScripts>,
    pub(crate) replicated: Arc<durable::Replicated>,
    pub(crate) stats: Arc<Stats>,
}

/// What a store's requests did so far (every clone of a store shares
/// them): read with [`RedisStore::figures`], for an operator.
#[derive(Debug, Default)]
pub(crate) struct Stats {
    ok: AtomicU64,
    unavailable: AtomicU64,
    failed: AtomicU64,
    micros: AtomicU64,
    pub(crate) durable_acknowledged: AtomicU64,
    pub(crate) durable_unavailable: AtomicU64,
}

impl Stats {
    /// Counts one request that took `took` and ended in `r` (`Err(None)`:
    /// no answer in time). An error answer is `failed`; no connection, or
    /// one lost, is `unavailable`.
    pub(crate) fn request<T>(&self, r: Result<&T, Option<&redis::RedisError>>, took: std::time::Duration) {
        let outcome = match r {
            Ok(_) => &self.ok,
            Err(Some(e))
                if !(e.is_io_error()
                    || e.is_connection_dropped()
                    || e.is_connection_refusal()
                    || e.is_timeout()) =>
            {
                &self.failed
            }
            Err(_) => &self.unavailable,
        };
        outcome.fetch_add(1, Ordering::Relaxed);
        self.micros.fetch_add(took.as_micros() as u64, Ordering::Relaxed);
    }
}

/// What a store's requests did since it connected (all its clones
/// together): [`RedisStore::figures`].
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct StoreFigures {
    /// Requests (commands, script calls, pipelines) answered.
    pub requests_ok: u64,
    /// Requests that got no answer in time or no connection
    /// ([`StoreError::Unavailable`]).
    pub requests_unavailable: u64,
    /// Requests answered with an error (a script's or a command's).
    pub requests_failed: u64,
    /// Seconds the requests took, in all (with their count, the mean).
    pub request_seconds: f64,
    /// Writes a failover must not lose (§8.6) that a replica acknowledged
    /// (or that needed none: a primary that never had a replica).
    pub durable_acknowledged: u64,
    /// Such writes no replica acknowledged within the store's timeout.
    pub durable_unavailable: u64,
}

impl fmt::Debug for RedisStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RedisStore").field("config", &self.config).finish_non_exhaustive()
    }
}

/// Reads the `maxmemory_policy` line of `INFO memory`.
fn eviction_policy(info: &str) -> Option<&str> {
    info.lines().find_map(|l| l.strip_prefix("maxmemory_policy:")).map(str::trim)
}

impl RedisStore {
    /// Connects to `url` (`redis://HOST:PORT/DB`), checks that Redis keeps
    /// every key (`maxmemory-policy noeviction`) and loads the scripts.
    ///
    /// When the node `url` names runs in cluster mode (`INFO cluster` says
    /// `cluster_enabled:1`), the store uses the whole Redis Cluster: the
    /// policy is checked on every master, the scripts are loaded on every
    /// node, and each call goes to the master of its session's slot (every
    /// key of a session shares one hash slot, `docs/SPEC.md` §8.2). A
    /// cluster has only database 0: another `DB` is [`StoreError::BadUrl`].
    pub async fn connect(url: &str, config: StoreConfig) -> Result<Self, StoreError> {
        Ok(RedisStore::connect_seeds(&[url], config).await?.0)
    }

    /// [`RedisStore::connect`] to the first of `seeds` that answers (they
    /// are tried in turn), and that seed's URL. A Redis Cluster's client
    /// starts from all of them, as Redis Cluster clients do, so that a
    /// cluster is reached while some of its nodes are down (a failover).
    /// Several seeds naming a plain Redis are [`StoreError::BadUrl`]; when
    /// none answers, [`StoreError::Unavailable`] names each one's failure.
    pub async fn connect_seeds(seeds: &[&str], config: StoreConfig) -> Result<(Self, String), StoreError> {
        if seeds.is_empty() {
            return Err(StoreError::BadUrl("no Redis URL".into()));
        }
        let (seed, conn) = Conn::open(seeds, config.timeout).await?;
        let store = RedisStore {
            conn,
            config: Arc::new(config),
            scripts: Arc::new(Scripts::new()),
            task_scripts: Arc::new(TaskScripts::new()),
            task_event_scripts: Arc::new(crate::scripts::TaskEventScripts::new()),
            replicated: Arc::default(),
            stats: Arc::default(),
        };
        store.check_policy().await?;
        let mut c = store.conn.clone();
        for s in store.scripts.all() {
            // A cluster sends SCRIPT LOAD to every node.
            s.prepare_invoke().load_async(&mut c).await?;
        }
        Ok((store, seed))
    }

    /// Refuses a Redis that may evict keys (any master of a cluster).
    async fn check_policy(&self) -> Result<(), StoreError> {
        let mut c = self.conn.clone();
        for (node, answer) in c.on_every_master(redis::cmd("INFO").arg("memory").clone()).await? {
            let info = match answer {
                Value::ServerError(e) => return Err(StoreError::Unavailable(format!("{node}: {e:?}"))),
                Value::VerbatimString { text, .. } => text,
                other => text(&other)?,
            };
            match eviction_policy(&info) {
                Some("noeviction") => {}
                Some(p) => return Err(StoreError::EvictionPolicy(p.to_owned())),
                None => {
                    return Err(StoreError::Protocol(format!(
                        "INFO memory of {node} has no maxmemory_policy"
                    )))
                }
            }
        }
        Ok(())
    }

    /// The configuration.
    pub fn config(&self) -> &StoreConfig {
        &self.config
    }

    /// One request, bounded by the store's timeout: no answer in time is
    /// [`StoreError::Unavailable`], like a failed connection.
    pub(crate) async fn bounded<T>(
        &self,
        request: impl std::future::Future<Output = redis::RedisResult<T>>,
    ) -> Result<T, StoreError> {
        let start = std::time::Instant::now();
        let r = tokio::time::timeout(self.config.timeout, request).await;
        self.stats.request(
            match &r {
                Err(_) => Err(None),
                Ok(r) => r.as_ref().map_err(Some),
            },
            start.elapsed(),
        );
        r.map_err(|_| StoreError::Unavailable(format!("no answer within {:?}", self.config.timeout)))?
            .map_err(StoreError::from)
    }

    /// What this store's requests did since it connected.
    pub fn figures(&self) -> StoreFigures {
        let s = &self.stats;
        let get = |a: &AtomicU64| a.load(Ordering::Relaxed);
        StoreFigures {
            requests_ok: get(&s.ok),
            requests_unavailable: get(&s.unavailable),
            requests_failed: get(&s.failed),
            request_seconds: get(&s.micros) as f64 / 1e6,
            durable_acknowledged: get(&s.durable_acknowledged),
            durable_unavailable: get(&s.durable_unavailable),
        }
    }

    pub(crate) async fn call(
        &self,
        script: &Script,
        id: &SessionId,
        args: &[&[u8]],
    ) -> Result<Vec<Value>, StoreError> {
        self.call_with(script, id, None, args).await
    }

    /// [`RedisStore::call`] with one more key after the session's (in its
    /// hash slot).
    pub(crate) async fn call_with(
        &self,
        script: &Script,
        id: &SessionId,
        extra: Option<String>,
        args: &[&[u8]],
    ) -> Result<Vec<Value>, StoreError> {
        let mut inv = script.prepare_invoke();
        for k in session_keys(&self.config.prefix, id).into_iter().chain(extra) {
            inv.key(k);
        }
        for a in args {
            inv.arg(*a);
        }
        let mut c = self.conn.clone();
        script_items(self.bounded(inv.invoke_async(&mut c)).await?)
    }

    /// A call of `script` on session `id`'s keys, and `extra` after them
    /// (in its hash slot), as one command (`EVALSHA`), for a pipeline
    /// ([`RedisStore::durably`]).
    pub(crate) fn script_cmd(
        &self,
        script: &Script,
        id: &SessionId,
        extra: Option<String>,
        args: &[&[u8]],
    ) -> redis::Cmd {
        let keys: Vec<String> = session_keys(&self.config.prefix, id).into_iter().chain(extra).collect();
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys.len()).arg(&keys[..]);
        for a in args {
            cmd.arg(*a);
        }
        cmd
    }

    pub(crate) async fn cmd<T: redis::FromRedisValue>(&self, cmd: &mut redis::Cmd) -> Result<T, StoreError> {
        let mut c = self.conn.clone();
        self.bounded(cmd.query_async(&mut c)).await
    }

    pub(crate) async fn cmd_pipe<T: redis::FromRedisValue>(
        &self,
        pipe: &redis::Pipeline,
    ) -> Result<T, StoreError> {
        let mut c = self.conn.clone();
        self.bounded(pipe.query_async(&mut c)).await
    }
}

pub(crate) fn owner_args(owner: Option<&str>) -> (&'static [u8], &[u8]) {
    match owner {
        Some(o) => (b"1", o.as_bytes()),
        None => (b"0", b""),
    }
}

pub(crate) fn ms(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

/// `n` random values from one read of the OS CSPRNG.
pub(crate) fn random_u64s(n: usize) -> Vec<u64> {
    let mut b = vec![0u8; 8 * n];
    getrandom::getrandom(&mut b).expect("the OS CSPRNG is available");
    b.chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect()
}

pub(crate) fn random_u64() -> u64 {
    let mut b = [0u8; 8];
    getrandom::getrandom(&mut b).expect("the OS CSPRNG is available");
    u64::from_le_bytes(b)
}

#[cfg(test)]
mod tests {
    #[test]
    fn reads_the_eviction_policy() {
        let info = "# Memory\r\nused_memory:1\r\nmaxmemory_policy:allkeys-lru\r\nx:y\r\n";
        assert_eq!(super::eviction_policy(info), Some("allkeys-lru"));
        assert_eq!(super::eviction_policy("# Memory\r\n"), None);
    }
}
