//! The store: connection, start-up checks, and one method per script.

use crate::conn::Conn;
use crate::durable::Write;
use crate::facts::{self, RedisFacts, ReplayPlan};
use crate::keys::session_keys;
use crate::scripts::Scripts;
use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::session::{decide, Decision, Refusal, ResumeRequest, Target};
use gapless::{EventId, Namespace, Seq, SessionId, StreamId};
use redis::{Script, Value};
use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The default key prefix.
pub const DEFAULT_PREFIX: &str = "gapless:";

/// How many `XRANGE`s one replay round trip sends ([`RedisStore::replay`]).
pub const REPLAY_CHUNKS: usize = 16;

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

/// Why the store could not do what was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The Redis URL does not parse.
    BadUrl(String),
    /// Redis could not be reached or did not answer in time.
    Unavailable(String),
    /// Redis runs with a `maxmemory-policy` that may delete keys (anything
    /// but `noeviction`): session logs would vanish silently.
    EvictionPolicy(String),
    /// A key under our prefix holds another type (another program's data):
    /// nothing was written.
    Corrupt {
        /// The key.
        key: String,
    },
    /// Redis answered something the scripts never return.
    Protocol(String),
    /// No such session (or not visible to this caller).
    UnknownSession,
    /// The store's event at `seq` is not the one the caller holds (a
    /// failover rewrote the log): nothing was recorded.
    Rewritten {
        /// The seq.
        seq: Seq,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::BadUrl(e) => write!(f, "malformed Redis URL: {e}"),
            StoreError::Unavailable(e) => write!(f, "Redis is unavailable: {e}"),
            StoreError::EvictionPolicy(p) => write!(
                f,
                "Redis runs with maxmemory-policy {p}, which deletes keys under memory pressure and would \
                 lose session logs silently; set it to noeviction"
            ),
            StoreError::Corrupt { key } => {
                write!(f, "key {key} holds data of another type (another program's data under our prefix?)")
            }
            StoreError::Protocol(e) => write!(f, "unexpected answer from Redis: {e}"),
            StoreError::UnknownSession => f.write_str("unknown session"),
            StoreError::Rewritten { seq } => {
                write!(
                    f,
                    "the store's event {seq} is not the one this node holds (a failover rewrote the log)"
                )
            }
        }
    }
}

impl std::error::Error for StoreError {}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        StoreError::Unavailable(e.to_string())
    }
}

/// Why an append was refused (nothing of the batch was written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The store failed (see [`StoreError`]).
    Store(StoreError),
    /// The stream has ended.
    StreamEnded(StreamId),
    /// No such stream (never opened, or its record was reclaimed).
    UnknownStream(StreamId),
    /// Event `index` of the batch is larger than the session's byte budget.
    PayloadTooLarge {
        /// Its place in the batch.
        index: usize,
        /// Its length.
        len: usize,
        /// The budget.
        budget: usize,
    },
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::Store(e) => e.fmt(f),
            AppendError::StreamEnded(s) => write!(f, "stream {s} has ended"),
            AppendError::UnknownStream(s) => write!(f, "unknown stream {s}"),
            AppendError::PayloadTooLarge { len, budget, .. } => {
                write!(f, "payload of {len} bytes exceeds the byte budget of {budget}")
            }
        }
    }
}

impl std::error::Error for AppendError {}

impl From<StoreError> for AppendError {
    fn from(e: StoreError) -> Self {
        AppendError::Store(e)
    }
}

/// Why a granted replay could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayError {
    /// The store failed.
    Store(StoreError),
    /// The window moved past part of the gap after the decision: decide
    /// again (the decision then refuses the gap).
    Moved,
}

impl From<StoreError> for ReplayError {
    fn from(e: StoreError) -> Self {
        ReplayError::Store(e)
    }
}

/// Why a migration ticket was not redeemed ([`RedisStore::redeem_ticket`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedeemError {
    /// Unknown (never issued, already redeemed, its session gone), expired,
    /// or issued to another caller.
    Ticket(gapless::session::TicketError),
    /// The store lost the event of the ticket's cursor since the ticket was
    /// issued (a failover): a resume with the cursor is refused the same,
    /// [`Refusal::HistoryRewritten`] with these numbers.
    HistoryRewritten {
        /// The ticket's cursor.
        cursor: EventId,
        /// The store's newest seq.
        head: Seq,
    },
}

impl fmt::Display for RedeemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedeemError::Ticket(e) => e.fmt(f),
            RedeemError::HistoryRewritten { cursor, head } => {
                Refusal::HistoryRewritten { cursor: *cursor, head: *head }.fmt(f)
            }
        }
    }
}

impl std::error::Error for RedeemError {}

/// A session as the store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSession {
    /// Its id.
    pub id: SessionId,
    /// The namespace of this incarnation.
    pub ns: Namespace,
    /// The negotiated protocol version (empty until known).
    pub version: String,
    /// A WebSocket redeemed a ticket of it (`docs/SPEC.md` §4.3).
    pub migrated: bool,
}

/// Where a new follower of a session (a node's local replica) starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attach {
    /// The namespace of this incarnation.
    pub ns: Namespace,
    /// The newest seq: the replica's ring starts after it.
    pub head: Seq,
    /// Streams opened so far.
    pub opened: StreamId,
    /// The streams that have not ended, ascending (every other id up to
    /// `opened` has).
    pub live: Vec<StreamId>,
    /// The log position to tail after.
    pub position: Position,
    /// The negotiated protocol version.
    pub version: String,
    /// A WebSocket redeemed a ticket of it.
    pub migrated: bool,
    /// The nonce of the event at `position`'s seq, if retained.
    pub check: Option<u64>,
}

/// A position in a session's log: `(seq, k)` of entry id `<seq>-<k>`
/// (events have `k == 0`, control entries `k >= 1`).
pub type Position = (u64, u64);

/// One entry a follower reads ([`RedisStore::tail`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailEntry {
    /// An event.
    Event(StoredEvent),
    /// A stream ended (after its events before this position).
    Ended(StreamId),
}

/// What a follower read: the window's bounds then, and the entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The oldest retained seq when read.
    pub oldest: Seq,
    /// The newest seq when read.
    pub head: Seq,
    /// The incarnation read (a follower of another one must stop).
    pub ns: Namespace,
    /// The nonce of the event at the asked position's seq, if retained: a
    /// follower that applied another there follows a rewritten log.
    pub check_at: Option<u64>,
    /// A WebSocket redeemed a ticket of the session.
    pub migrated: bool,
    /// Entries after the asked position, in log order, with their positions.
    pub entries: Vec<(Position, TailEntry)>,
}

/// One appended event: its seq and its nonce (the wire id's check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The seq the store allocated.
    pub seq: Seq,
    /// The event's nonce.
    pub check: u64,
}

/// One event read back from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its seq.
    pub seq: Seq,
    /// Its stream.
    pub stream: StreamId,
    /// Its position in the stream, from 1.
    pub index_in_stream: u64,
    /// Its nonce.
    pub check: u64,
    /// Its payload.
    pub payload: Bytes,
}

/// What `orphan.lua` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Orphaned {
    /// It wrote the answer and ended the stream.
    Wrote,
    /// The stream had ended (or its record is gone): nothing written.
    Done,
    /// The answer exceeds the session's byte budget: nothing written.
    TooLarge,
}

/// The Redis Streams store, on a plain Redis or a Redis Cluster. Cloning
/// is cheap (one multiplexed connection per Redis node, re-established in
/// the background when it drops).
#[derive(Clone)]
pub struct RedisStore {
    pub(crate) conn: Conn,
    pub(crate) config: Arc<StoreConfig>,
    pub(crate) scripts: Arc<Scripts>,
    pub(crate) task_scripts: Arc<crate::tasks::TaskScripts>,
    pub(crate) replicated: Arc<crate::durable::Replicated>,
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

/// A script's answer as its items, status first; `corrupt` (a key of
/// another type) as [`StoreError::Corrupt`].
pub(crate) fn script_items(v: Value) -> Result<Vec<Value>, StoreError> {
    let items = match v {
        Value::Array(items) => items,
        other => return Err(StoreError::Protocol(format!("a script answered {other:?}"))),
    };
    match items.first().map(text) {
        Some(Ok(s)) if s == "corrupt" => {
            Err(StoreError::Corrupt { key: items.get(1).map(text).transpose()?.unwrap_or_default() })
        }
        Some(Ok(_)) => Ok(items),
        _ => Err(StoreError::Protocol("a script answered without a status".into())),
    }
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
        let conn = Conn::open(url, config.timeout).await?;
        let store = RedisStore {
            conn,
            config: Arc::new(config),
            scripts: Arc::new(Scripts::new()),
            task_scripts: Arc::new(crate::tasks::TaskScripts::new()),
            replicated: Arc::default(),
            stats: Arc::default(),
        };
        store.check_policy().await?;
        let mut c = store.conn.clone();
        for s in store.scripts.all() {
            // A cluster sends SCRIPT LOAD to every node.
            s.prepare_invoke().load_async(&mut c).await?;
        }
        Ok(store)
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

    /// A call of `script` on session `id`'s keys as one command
    /// (`EVALSHA`), for a pipeline ([`RedisStore::durably`]).
    pub(crate) fn script_cmd(&self, script: &Script, id: &SessionId, args: &[&[u8]]) -> redis::Cmd {
        let keys = session_keys(&self.config.prefix, id);
        let mut cmd = redis::cmd("EVALSHA");
        cmd.arg(script.get_hash()).arg(keys.len()).arg(&keys[..]);
        for a in args {
            cmd.arg(*a);
        }
        cmd
    }

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
        let from = format!("{}-{}", after.0, after.1);
        let (count, seen) = (count.max(1).to_string(), seen.0.to_string());
        let r =
            self.call(&self.scripts.tail, id, &[from.as_bytes(), count.as_bytes(), seen.as_bytes()]).await?;
        if text(&r[0])? != "ok" {
            return Ok(None);
        }
        let mut entries = Vec::new();
        for e in r[6..].chunks(7) {
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
            entries,
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

    /// Answers a request on its own stream and ends the stream, in one
    /// step, unless the stream has ended already (then nothing is written
    /// and `Ok(false)`): retrying after a timeout, or racing the reaper of a
    /// node thought dead, never answers twice.
    pub async fn answer(&self, id: &SessionId, stream: StreamId, payload: &[u8]) -> Result<bool, StoreError> {
        match self.orphan(id, stream, payload).await? {
            Orphaned::Wrote => Ok(true),
            Orphaned::Done => Ok(false),
            Orphaned::TooLarge => {
                Err(StoreError::Protocol("the answer exceeds the session's byte budget".into()))
            }
        }
    }

    /// `orphan.lua` (the answer and the stream's end, unless it ended),
    /// safe from a failover (`durable.rs`).
    pub(crate) async fn orphan(
        &self,
        id: &SessionId,
        stream: StreamId,
        payload: &[u8],
    ) -> Result<Orphaned, StoreError> {
        let nonce = format!("{:016x}", random_u64());
        let s = stream.0.to_string();
        let cmd = self.script_cmd(&self.scripts.orphan, id, &[s.as_bytes(), nonce.as_bytes(), payload]);
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
        self.append_guarded(id, None, events).await.map_err(|e| match e {
            Guarded::Refused(e) => e,
            Guarded::Order(last) => {
                AppendError::Store(StoreError::Protocol(format!("an unguarded append answered order {last}")))
            }
        })
    }

    /// [`RedisStore::append`] as batch `number` of the queue `guard`
    /// names: written only if the queue's last written batch is
    /// `number - 1` (or the queue has none), else [`Guarded::Order`] with the
    /// queue's last written batch and nothing written.
    pub(crate) async fn append_guarded(
        &self,
        id: &SessionId,
        guard: Option<(&str, u64)>,
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
        let mut args: Vec<&[u8]> = Vec::with_capacity(2 + 3 * events.len());
        args.extend([n.as_bytes(), number.as_bytes()]);
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
                Ok(checks
                    .iter()
                    .enumerate()
                    .map(|(i, &check)| Appended { seq: Seq(first + i as u64), check })
                    .collect())
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

    /// Issues migration ticket `ticket` for the client's cursor (`None`:
    /// it processed nothing), valid for `ttl`, at most `max` outstanding per
    /// session; indexes it so that a socket on any node finds its session.
    /// The ticket keeps the cursor's seq and check: redeeming it compares
    /// the check with the nonce then at that seq (see
    /// [`RedisStore::redeem_ticket`]).
    pub async fn issue_ticket(
        &self,
        id: &SessionId,
        owner: Option<&str>,
        ticket: &str,
        cursor: Option<&EventId>,
        ttl: Duration,
        max: usize,
    ) -> Result<Result<(), gapless::session::TicketError>, StoreError> {
        let (flag, o) = owner_args(owner);
        let seq = cursor.map_or(0, |c| c.seq.0).to_string();
        let check = cursor.and_then(|c| c.check).map_or_else(|| "-".to_owned(), |c| format!("{c:016x}"));
        let wire = cursor.map_or_else(|| "-".to_owned(), |c| c.to_string());
        let (t, m) = (ms(ttl).to_string(), max.to_string());
        let r = self
            .call(
                &self.scripts.issue_ticket,
                id,
                &[
                    flag,
                    o,
                    ticket.as_bytes(),
                    seq.as_bytes(),
                    t.as_bytes(),
                    m.as_bytes(),
                    check.as_bytes(),
                    wire.as_bytes(),
                ],
            )
            .await?;
        match text(&r[0])?.as_str() {
            "ok" => {
                // The index is a key of its own slot (the socket knows only
                // the ticket), so it is a second step. Split safely: until
                // it is written the ticket cannot be found, and if writing
                // it fails the caller gets the error (no ticket reaches the
                // client); the orphan entry only counts toward `max` until
                // it expires.
                let key = crate::keys::ticket(&self.config.prefix, ticket);
                self.cmd::<()>(redis::cmd("SET").arg(key).arg(id.to_string()).arg("PX").arg(ms(ttl))).await?;
                Ok(Ok(()))
            }
            "too_many" => Ok(Err(gapless::session::TicketError::TooMany { max })),
            _ => Err(StoreError::UnknownSession),
        }
    }

    /// Redeems a ticket (once) for `owner`: its session and cursor seq.
    ///
    /// A ticket whose cursor's event the store no longer has as the client
    /// saw it (another nonce at its seq, or its seq beyond the store's
    /// head: a failover rewrote the log since the ticket was issued) is
    /// [`RedeemError::HistoryRewritten`], as a resume with that cursor is
    /// refused; it is used up all the same.
    pub async fn redeem_ticket(
        &self,
        ticket: &str,
        owner: Option<&str>,
    ) -> Result<Result<(SessionId, Seq), RedeemError>, StoreError> {
        use gapless::session::TicketError;
        // Two steps in two slots (the index, then the session's keys).
        // Once stays once: GETDEL hands the index to one caller only, and
        // the script deletes the ticket itself; a failure between the two
        // uses the ticket up (the client asks for another), never redeems
        // it twice.
        let key = crate::keys::ticket(&self.config.prefix, ticket);
        let sid: Option<String> = self.cmd(redis::cmd("GETDEL").arg(key)).await?;
        let Some(id) = sid.as_deref().and_then(SessionId::parse) else {
            return Ok(Err(RedeemError::Ticket(TicketError::Unknown)));
        };
        let (flag, o) = owner_args(owner);
        let r = self.call(&self.scripts.redeem_ticket, &id, &[ticket.as_bytes(), flag, o]).await?;
        Ok(match text(&r[0])?.as_str() {
            "ok" => Ok((id, Seq(int(r.get(1))?))),
            "rewritten" => {
                let wire = text(r.get(2).unwrap_or(&Value::Nil))?;
                let cursor = EventId::parse(&wire)
                    .map_err(|_| StoreError::Protocol(format!("a ticket kept the cursor {wire:?}")))?;
                Err(RedeemError::HistoryRewritten { cursor, head: Seq(int(r.get(1))?) })
            }
            "expired" => Err(RedeemError::Ticket(TicketError::Expired)),
            "foreign" => Err(RedeemError::Ticket(TicketError::Foreign)),
            _ => Err(RedeemError::Ticket(TicketError::Unknown)),
        })
    }

    /// Deletes the session if `owner` may see it; returns whether it did.
    pub async fn delete(&self, id: &SessionId, owner: Option<&str>) -> Result<bool, StoreError> {
        let (flag, owner) = owner_args(owner);
        let r = self.call(&self.scripts.delete, id, &[flag, owner]).await?;
        Ok(text(&r[0])? == "ok")
    }

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

/// The events of one `XRANGE` reply of a session's log, in log order
/// (control entries, `<seq>-<k>` with `k >= 1`, are left out).
fn log_events(v: &Value) -> Result<Vec<StoredEvent>, StoreError> {
    let Value::Array(entries) = v else {
        return Err(StoreError::Protocol(format!("XRANGE answered {v:?}")));
    };
    let mut out = Vec::with_capacity(entries.len());
    for entry in entries {
        let Value::Array(pair) = entry else {
            return Err(StoreError::Protocol("a log entry is not a pair".into()));
        };
        let [id, Value::Array(fields)] = &pair[..] else {
            return Err(StoreError::Protocol("a log entry is not an id and fields".into()));
        };
        let id = text(id)?;
        let Some((seq, "0")) = id.split_once('-') else { continue };
        let (mut stream, mut index, mut check, mut payload) = (None, None, None, None);
        for kv in fields.chunks(2) {
            let [k, v] = kv else { return Err(StoreError::Protocol("ragged log entry".into())) };
            match text(k)?.as_str() {
                "s" => stream = Some(int(Some(v))?),
                "i" => index = Some(int(Some(v))?),
                "n" => check = Some(hex(Some(v))?),
                "p" => {
                    payload = Some(match v {
                        Value::BulkString(b) => Bytes::from(b.clone()),
                        other => {
                            return Err(StoreError::Protocol(format!("expected a payload, got {other:?}")))
                        }
                    })
                }
                _ => {}
            }
        }
        let (Some(stream), Some(index), Some(check), Some(payload)) = (stream, index, check, payload) else {
            return Err(StoreError::Protocol(format!("log entry {id} lacks a field")));
        };
        out.push(StoredEvent {
            seq: Seq(seq.parse().map_err(|_| StoreError::Protocol(format!("log entry id {id}")))?),
            stream: StreamId(stream),
            index_in_stream: index,
            check,
            payload,
        });
    }
    Ok(out)
}

/// A store failure as the decision table's 503.
pub(crate) fn unavailable(e: StoreError) -> Refusal {
    Refusal::StoreUnavailable { reason: e.to_string() }
}

fn owner_args(owner: Option<&str>) -> (&'static [u8], &[u8]) {
    match owner {
        Some(o) => (b"1", o.as_bytes()),
        None => (b"0", b""),
    }
}

fn ms(d: Duration) -> u64 {
    (d.as_millis() as u64).max(1)
}

/// Why a guarded append wrote nothing.
#[derive(Debug)]
pub(crate) enum Guarded {
    /// As [`RedisStore::append`] refuses.
    Refused(AppendError),
    /// Not the next batch of its queue: the queue's last written batch.
    Order(u64),
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

/// A script reply's string.
pub(crate) fn text(v: &Value) -> Result<String, StoreError> {
    match v {
        Value::BulkString(b) => {
            String::from_utf8(b.clone()).map_err(|_| StoreError::Protocol("non-UTF-8 status".into()))
        }
        Value::SimpleString(s) => Ok(s.clone()),
        Value::Okay => Ok("OK".into()),
        Value::Nil => Ok(String::new()),
        other => Err(StoreError::Protocol(format!("expected a string, got {other:?}"))),
    }
}

/// A script reply's non-negative integer.
pub(crate) fn int(v: Option<&Value>) -> Result<u64, StoreError> {
    match v {
        Some(Value::Int(i)) if *i >= 0 => Ok(*i as u64),
        Some(Value::BulkString(b)) => std::str::from_utf8(b)
            .ok()
            .and_then(|s| s.parse().ok())
            .ok_or_else(|| StoreError::Protocol("expected a number".into())),
        other => Err(StoreError::Protocol(format!("expected a number, got {other:?}"))),
    }
}

/// A 16-hex-digit namespace or nonce.
pub(crate) fn hex(v: Option<&Value>) -> Result<u64, StoreError> {
    let s = text(v.ok_or_else(|| StoreError::Protocol("missing hex field".into()))?)?;
    if s.len() != 16 {
        return Err(StoreError::Protocol(format!("expected 16 hex digits, got {s:?}")));
    }
    u64::from_str_radix(&s, 16)
        .map_err(|_| StoreError::Protocol(format!("expected 16 hex digits, got {s:?}")))
}

/// A nonce, or `None` for an empty string.
fn opt_hex(v: Option<&Value>) -> Result<Option<u64>, StoreError> {
    match v.map(text).transpose()? {
        Some(s) if !s.is_empty() => hex(v).map(Some),
        _ => Ok(None),
    }
}

fn namespace(v: Option<&Value>) -> Result<Namespace, StoreError> {
    hex(v).map(Namespace)
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
