//! Change announcements: one Redis pub/sub connection per node, subscribed
//! to the channels of the sessions the node follows. A follower waits on
//! its [`Watch`] instead of polling the log; whenever the connection is
//! re-established (Redis restarted, a failover), every watch is woken,
//! because announcements made meanwhile were lost, and the followers read
//! the log to catch up.
//!
//! On a Redis Cluster the connection goes to one node: a `PUBLISH` (the
//! scripts' announcements, the bus) reaches every node of a cluster, so
//! that node hears the announcements of sessions whose slots live on other
//! masters too. On each connection the notifier learns the cluster's other
//! nodes (`CLUSTER NODES`); when its node goes away it tries the next one,
//! and wakes every watch as after any reconnection.

use crate::keys::{bus, channel, session_of_channel, task_channel, task_of_channel};
use crate::sync::lock;
use futures_util::StreamExt as _;
use gapless::SessionId;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::sync::{broadcast, mpsc, Notify};

enum Cmd {
    Subscribe(Topic),
    Unsubscribe(Topic),
}

/// What a watch follows: a session's changes, or a task's event stream's
/// writes.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Topic {
    Session(SessionId),
    Task(String),
}

impl Topic {
    fn channel(&self, prefix: &str) -> String {
        match self {
            Topic::Session(id) => channel(prefix, id),
            Topic::Task(id) => task_channel(prefix, id),
        }
    }

    fn of_channel(prefix: &str, name: &str) -> Option<Topic> {
        session_of_channel(prefix, name)
            .map(Topic::Session)
            .or_else(|| task_of_channel(prefix, name).map(|t| Topic::Task(t.to_owned())))
    }
}

/// The watches of one topic: each its own wake-up and record of what was
/// heard (two readers of one task on a node each hear every write).
#[derive(Default)]
struct Watched {
    members: Vec<Arc<Member>>,
}

/// One watch's wake-up and what it heard since it last looked.
struct Member {
    notify: Notify,
    heard: Heard,
}

impl Watched {
    /// Makes every watcher read the log: something may have been announced
    /// unheard.
    fn wake(&self) {
        for m in &self.members {
            m.heard.other.store(true, Ordering::Release);
            m.notify.notify_one();
        }
    }

    /// Tells every watcher of an announcement.
    fn note(&self, payload: &[u8]) {
        for m in &self.members {
            m.heard.note(payload);
            m.notify.notify_one();
        }
    }
}

/// What was announced of a session since its follower last looked.
#[derive(Debug, Default)]
struct Heard {
    /// The highest head announced (`0`: none).
    head: AtomicU64,
    /// The most control entries an announcement said the log has had.
    ctl: AtomicU64,
    /// Something else: an announcement that names no head (a stream's end,
    /// a migration, a deletion), or a reconnection (announcements made
    /// meanwhile were lost).
    other: AtomicBool,
}

impl Heard {
    /// An announcement: `<head>` or `<head>:<ctl>` (an append), or a word
    /// (anything else).
    fn note(&self, payload: &[u8]) {
        let text = std::str::from_utf8(payload).unwrap_or_default();
        let (head, ctl) = match text.split_once(':') {
            Some((h, c)) => (h.parse::<u64>().ok(), c.parse::<u64>().ok()),
            None => (text.parse::<u64>().ok(), Some(0)),
        };
        match (head, ctl) {
            (Some(head), Some(ctl)) => {
                self.head.fetch_max(head, Ordering::AcqRel);
                self.ctl.fetch_max(ctl, Ordering::AcqRel);
            }
            _ => self.other.store(true, Ordering::Release),
        }
    }
}

/// What a follower heard announced since it last looked
/// ([`Watch::heard`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Announced {
    /// The highest head announced by an append (`None`: none).
    pub head: Option<u64>,
    /// The most control entries (streams' ends) an append said the log has
    /// had: more than the follower read means it missed one's announcement.
    pub ctl: u64,
    /// Whether anything else may have changed (a stream ended, the session
    /// migrated or went away, or the connection was re-established): the
    /// follower must read the log.
    pub other: bool,
}

type Table = Arc<Mutex<HashMap<Topic, Watched>>>;

/// The node's subscriber. Cloning is cheap; the task ends when the last
/// clone and every watch are dropped.
#[derive(Clone)]
pub struct Notifier {
    table: Table,
    tx: mpsc::UnboundedSender<Cmd>,
    bus: broadcast::Sender<bytes::Bytes>,
}

impl fmt::Debug for Notifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Notifier").field("watched", &lock(&self.table).len()).finish()
    }
}

/// Wakes its holder when its session changes (or the announcements may
/// have been lost). Unsubscribes when the last watch of a session drops.
pub struct Watch {
    id: Topic,
    me: Arc<Member>,
    table: Table,
    tx: mpsc::UnboundedSender<Cmd>,
}

impl fmt::Debug for Watch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Watch").field("topic", &self.id).finish()
    }
}

impl Watch {
    /// Waits for the next announcement (one is remembered if it came
    /// while nobody waited).
    pub async fn changed(&self) {
        self.me.notify.notified().await
    }

    /// What was announced since the last call (and forgets it): a follower
    /// whose replica has every event up to the announced head, and that
    /// heard nothing else, need not read the log.
    pub fn heard(&self) -> Announced {
        let head = self.me.heard.head.swap(0, Ordering::AcqRel);
        let ctl = self.me.heard.ctl.swap(0, Ordering::AcqRel);
        let other = self.me.heard.other.swap(false, Ordering::AcqRel);
        Announced { head: (head > 0).then_some(head), ctl, other }
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let mut t = lock(&self.table);
        if let Some(w) = t.get_mut(&self.id) {
            w.members.retain(|m| !Arc::ptr_eq(m, &self.me));
            if w.members.is_empty() {
                t.remove(&self.id);
                let _ = self.tx.send(Cmd::Unsubscribe(self.id.clone()));
            }
        }
    }
}

impl Notifier {
    /// Starts the subscriber on `url` (the store's Redis, or any node of
    /// its Redis Cluster) for keys under `prefix`. It connects in the
    /// background and reconnects forever (on a cluster, to any node it
    /// learnt of).
    pub fn start(url: &str, prefix: &str) -> Result<Notifier, crate::StoreError> {
        let seed = crate::conn::connection_info(url)?;
        redis::Client::open(seed.clone()).map_err(|e| crate::StoreError::BadUrl(e.to_string()))?;
        let table: Table = Arc::default();
        let (tx, rx) = mpsc::unbounded_channel();
        let (bus, _) = broadcast::channel(1024);
        // A test's way to lose announcements (and with `all` the bus's
        // messages too) as a broken link between Redis Cluster nodes may
        // (docs/SPEC.md §8.1): the safety nets alone must then do.
        let deaf = match std::env::var(DEAF_ENV).as_deref() {
            Ok("1") => Deaf::Announcements,
            Ok("all") => Deaf::All,
            _ => Deaf::No,
        };
        if deaf != Deaf::No {
            tracing::warn!(?deaf, "{DEAF_ENV}: this node ignores what it hears");
        }
        tokio::spawn(run(seed, prefix.to_owned(), Arc::clone(&table), rx, bus.clone(), deaf));
        Ok(Notifier { table, tx, bus })
    }

    /// The messages of the cluster-wide bus (`RedisStore::publish_bus`), as
    /// they arrive; at most once each (pub/sub keeps nothing for a node
    /// that is not connected).
    pub fn bus(&self) -> broadcast::Receiver<bytes::Bytes> {
        self.bus.subscribe()
    }

    /// Wakes session `id`'s follower, if this node watches it, as an
    /// announcement that names no head would: it reads the log. The safety
    /// net behind lost announcements calls it, and so does a request that
    /// waits for its replica to catch up.
    pub fn wake(&self, id: &SessionId) {
        if let Some(w) = lock(&self.table).get(&Topic::Session(*id)) {
            w.wake();
        }
    }

    /// Watches session `id`.
    pub fn watch(&self, id: SessionId) -> Watch {
        self.watch_topic(Topic::Session(id))
    }

    /// Watches the writes of task `id`'s event stream (each announces the
    /// stream's `acked`, which [`Watch::heard`] reports as its head).
    pub fn watch_task(&self, id: &str) -> Watch {
        self.watch_topic(Topic::Task(id.to_owned()))
    }

    fn watch_topic(&self, id: Topic) -> Watch {
        // A new watch reads the log first.
        let me = Arc::new(Member {
            notify: Notify::new(),
            heard: Heard { head: AtomicU64::new(0), ctl: AtomicU64::new(0), other: AtomicBool::new(true) },
        });
        let mut t = lock(&self.table);
        let w = t.entry(id.clone()).or_default();
        w.members.push(Arc::clone(&me));
        if w.members.len() == 1 {
            let _ = self.tx.send(Cmd::Subscribe(id.clone()));
        }
        drop(t);
        Watch { id, me, table: Arc::clone(&self.table), tx: self.tx.clone() }
    }
}

/// The environment variable that makes a node ignore every announcement
/// of a session or a task stream (`1`), or those and the bus's messages
/// (`all`), for tests of the safety nets.
pub const DEAF_ENV: &str = "GAPLESS_TEST_IGNORE_ANNOUNCEMENTS";

/// What a node ignores ([`DEAF_ENV`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Deaf {
    No,
    Announcements,
    All,
}

/// How long connecting (or learning the cluster's nodes) may take before
/// the notifier tries elsewhere.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);

/// Where to connect next time: the node just reached, then its cluster's
/// other nodes and the seed, each once.
fn learnt(
    reached: &redis::ConnectionInfo,
    peers: Vec<redis::ConnectionInfo>,
    seed: &redis::ConnectionInfo,
) -> Vec<redis::ConnectionInfo> {
    let mut learnt = vec![reached.clone()];
    for n in peers.into_iter().chain([seed.clone()]) {
        if learnt.iter().all(|l| l.addr().to_string() != n.addr().to_string()) {
            learnt.push(n);
        }
    }
    learnt
}

/// One message heard: the bus's goes to the bus's receivers, an
/// announcement wakes its watch (unless the node is deaf to it).
fn hear(
    msg: &redis::Msg,
    prefix: &str,
    bus_channel: &str,
    table: &Table,
    bus_tx: &broadcast::Sender<bytes::Bytes>,
    deaf: Deaf,
) {
    if msg.get_channel_name() == bus_channel {
        if deaf != Deaf::All {
            let _ = bus_tx.send(bytes::Bytes::from(msg.get_payload_bytes().to_vec()));
        }
    } else if let (Deaf::No, Some(id)) = (deaf, Topic::of_channel(prefix, msg.get_channel_name())) {
        if let Some(w) = lock(table).get(&id) {
            w.note(msg.get_payload_bytes());
        }
    }
}

async fn run(
    seed: redis::ConnectionInfo,
    prefix: String,
    table: Table,
    mut rx: mpsc::UnboundedReceiver<Cmd>,
    bus_tx: broadcast::Sender<bytes::Bytes>,
    deaf: Deaf,
) {
    let bus_channel = bus(&prefix);
    let mut backoff = Duration::from_millis(50);
    // Where to connect: the URL's node first, then the other nodes of its
    // cluster as last learnt (none for a plain Redis); `next` is the one to
    // try now.
    let mut nodes = vec![seed.clone()];
    let mut next = 0;
    loop {
        let info = nodes[next % nodes.len()].clone();
        let connected = match redis::Client::open(info.clone()) {
            Ok(client) => tokio::time::timeout(CONNECT_TIMEOUT, client.get_async_pubsub())
                .await
                .unwrap_or_else(|_| Err(std::io::Error::from(std::io::ErrorKind::TimedOut).into())),
            Err(e) => Err(e),
        };
        let pubsub = match connected {
            Ok(p) => p,
            Err(e) => {
                tracing::debug!(error = %e, node = ?info.addr(), "notifier: Redis unreachable, retrying");
                if rx.is_closed() {
                    return;
                }
                next = (next + 1) % nodes.len();
                if next == 0 {
                    // Every known node was tried: wait before the next round.
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(Duration::from_secs(1));
                }
                continue;
            }
        };
        // The cluster's nodes, for the next reconnection (the node just
        // reached first).
        let peers = crate::conn::cluster_peers(&info, CONNECT_TIMEOUT).await;
        if !peers.is_empty() {
            nodes = learnt(&info, peers, &seed);
            next = 0;
        }
        backoff = Duration::from_millis(50);
        let (mut sink, mut stream) = pubsub.split();
        // Subscribe to everything watched now, then wake every watcher:
        // whatever was announced while no connection was up is lost.
        let ids: Vec<Topic> = lock(&table).keys().cloned().collect();
        let mut ok = sink.subscribe(&bus_channel).await.is_ok();
        for id in &ids {
            ok &= sink.subscribe(id.channel(&prefix)).await.is_ok();
        }
        if !ok {
            next = (next + 1) % nodes.len();
            continue;
        }
        for w in lock(&table).values() {
            w.wake();
        }
        loop {
            tokio::select! {
                cmd = rx.recv() => {
                    let r = match cmd {
                        Some(Cmd::Subscribe(id)) => {
                            let r = sink.subscribe(id.channel(&prefix)).await;
                            // What was announced before the subscription
                            // took effect went unheard: the follower reads
                            // the log once more, now that it hears.
                            if let (Ok(()), Some(w)) = (&r, lock(&table).get(&id)) {
                                w.wake();
                            }
                            r
                        }
                        Some(Cmd::Unsubscribe(id)) => sink.unsubscribe(id.channel(&prefix)).await,
                        None => return,
                    };
                    if r.is_err() {
                        break;
                    }
                }
                msg = stream.next() => {
                    let Some(msg) = msg else { break };
                    hear(&msg, &prefix, &bus_channel, &table, &bus_tx, deaf);
                }
            }
        }
        tracing::debug!("notifier: connection lost, reconnecting");
    }
}
