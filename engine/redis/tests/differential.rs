//! Differential: random session histories (publishes on several streams,
//! deliveries, stream ends, evictions by events and by bytes, stream record
//! reclaiming, deletions and re-creations) replayed on the in-process store
//! and on the Redis store give identical decisions for the same resume
//! requests: the same refusal with the same numbers, or the same replay.
//!
//! The two stores name events differently (each draws its own namespace;
//! the Redis store's ids carry a check), so each history keeps both names
//! of every event it published, and decisions are compared with ids
//! replaced by their (stream, seq).

use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::session::{Refusal, ResumeRequest, Target};
use gapless::{Event, EventId, Hub, HubConfig, Seq, Session, SessionId, StreamHandle, StreamId};
use gapless_redis::testing::{RedisCluster, RedisServer};
use gapless_redis::{RedisStore, StoreConfig, StoredSession};
use std::collections::HashMap;
use std::sync::Arc;

/// splitmix64.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
}

/// One event as both stores named it.
#[derive(Clone, Debug)]
struct Published {
    stream: StreamId,
    index: u64,
    hub_id: EventId,
    redis_id: EventId,
}

/// A decision with the store's names taken out.
#[derive(Debug, PartialEq, Eq)]
enum Outcome {
    Replay(Vec<(u64, u64, Vec<u8>)>),
    Refused(String, Vec<Option<u64>>),
}

fn ids(c: Option<EventId>) -> [Option<u64>; 2] {
    [c.map(|c| c.stream.0), c.map(|c| c.seq.0)]
}

fn refused(r: Refusal) -> Outcome {
    let kind = r.kind().as_str().to_owned();
    let nums: Vec<Option<u64>> = match r {
        Refusal::CursorAhead { cursor, head } => [ids(Some(cursor)).to_vec(), vec![Some(head.0)]].concat(),
        Refusal::CursorNotDelivered { cursor, undelivered } => {
            [ids(Some(cursor)).to_vec(), vec![undelivered.map(|u| u.0)]].concat()
        }
        Refusal::GapNotCovered { cursor, oldest, oldest_id, missing } => [
            ids(cursor).to_vec(),
            ids(oldest_id).to_vec(),
            vec![Some(oldest.0), Some(missing.count()), Some(missing.is_exact() as u64)],
        ]
        .concat(),
        Refusal::MalformedCursor { .. } | Refusal::NamespaceMismatch { .. } => vec![],
        other => panic!("unexpected refusal {other:?}"),
    };
    Outcome::Refused(kind, nums)
}

struct History {
    rng: Rng,
    hub: Arc<Hub>,
    store: RedisStore,
    id: SessionId,
    session: Arc<Session>,
    stored: StoredSession,
    handles: HashMap<StreamId, StreamHandle>,
    open: Vec<StreamId>,
    events: Vec<Published>,
    checked: usize,
    /// Stream resumes whose stream's record was reclaimed (so that the
    /// tombstone rows are compared too).
    reclaimed: usize,
}

impl History {
    async fn new(seed: u64, hub: Arc<Hub>, store: RedisStore) -> History {
        let id = SessionId::random();
        let session = hub.create_with_id(id, None).unwrap();
        let stored = store.create(id, None).await.unwrap();
        let mut h = History {
            rng: Rng(seed),
            hub,
            store,
            id,
            session,
            stored,
            handles: HashMap::new(),
            open: Vec::new(),
            events: Vec::new(),
            checked: 0,
            reclaimed: 0,
        };
        h.reset_streams();
        h
    }

    fn reset_streams(&mut self) {
        self.handles.clear();
        self.handles.insert(StreamId(1), self.session.standalone().clone());
        self.open = vec![StreamId(1)];
        self.events.clear();
    }

    /// One random step; `streamy` histories open more streams (so that
    /// records are reclaimed and tombstones consulted).
    async fn step(&mut self, streamy: bool) {
        let roll = self.rng.below(100);
        let roll = match roll {
            85..=94 | 96..=99 if streamy => 0,
            45..=59 if streamy => 60,
            r => r,
        };
        match roll {
            0..=14 => {
                let h = self.session.open_stream().unwrap();
                let r = self.store.open_stream(&self.id).await.unwrap();
                assert_eq!(h.id(), r, "both stores number streams alike");
                self.handles.insert(h.id(), h);
                self.open.push(r);
            }
            15..=59 => {
                if self.open.is_empty() {
                    return;
                }
                let n = 1 + self.rng.below(4) as usize;
                let mut batch = Vec::new();
                for _ in 0..n {
                    let s = self.open[self.rng.below(self.open.len() as u64) as usize];
                    let len = self.rng.below(24) as usize;
                    batch.push((s, Bytes::from(vec![b'a' + (self.rng.below(26) as u8); len])));
                }
                let appended = self.store.append(&self.id, &batch).await.unwrap();
                for ((s, payload), a) in batch.into_iter().zip(appended) {
                    let h = &self.handles[&s];
                    let seq = self.session.publish(h, payload).unwrap();
                    assert_eq!(seq, a.seq, "both stores allocate the same seq");
                    self.events.push(Published {
                        stream: s,
                        index: h.published(),
                        hub_id: self.session.event_id(s, seq),
                        redis_id: EventId::new(self.stored.ns, s, seq).with_check(a.check),
                    });
                }
            }
            60..=69 => {
                if self.open.len() > 1 {
                    let i = self.rng.below(self.open.len() as u64) as usize;
                    let s = self.open.swap_remove(i);
                    let ns = self.session.namespace();
                    let last = self.events.iter().rev().find(|x| x.stream == s && x.hub_id.ns == ns).cloned();
                    if let (Some(e), true) = (last, self.rng.below(2) == 0) {
                        // Often a stream is read to its end before it ends.
                        let ev = Event {
                            seq: e.hub_id.seq,
                            stream: s,
                            index_in_stream: e.index,
                            payload: Bytes::new(),
                        };
                        assert!(self.session.reader().mark_delivered(&ev));
                        assert!(self.store.mark_delivered(&self.id, s, ev.seq, e.index, None).await.unwrap());
                    }
                    self.session.end_stream(&self.handles[&s]).unwrap();
                    self.store.end_stream(&self.id, s).await.unwrap();
                }
            }
            70..=94 => {
                // Deliver a prefix of some stream (possibly up to an evicted
                // event), often all of it.
                if self.events.is_empty() {
                    return;
                }
                let mut e = self.events[self.rng.below(self.events.len() as u64) as usize].clone();
                if self.rng.below(2) == 0 {
                    if let Some(last) =
                        self.events.iter().rev().find(|x| x.stream == e.stream && x.hub_id.ns == e.hub_id.ns)
                    {
                        e = last.clone();
                    }
                }
                if e.hub_id.ns != self.session.namespace() {
                    return; // of an older incarnation
                }
                let ev = Event {
                    seq: e.hub_id.seq,
                    stream: e.stream,
                    index_in_stream: e.index,
                    payload: Bytes::new(),
                };
                let kept = self.session.reader().mark_delivered(&ev);
                let stored =
                    self.store.mark_delivered(&self.id, e.stream, ev.seq, e.index, None).await.unwrap();
                assert_eq!(kept, stored, "both stores keep the same stream records");
            }
            _ => {
                // Delete and recreate under the same id: a new incarnation.
                self.hub.remove(&self.id);
                assert!(self.store.delete(&self.id, None).await.unwrap());
                self.session = self.hub.create_with_id(self.id, None).unwrap();
                self.stored = self.store.create(self.id, None).await.unwrap();
                // Old cursors stay in play: both must call them foreign.
                let old = std::mem::take(&mut self.events);
                self.reset_streams();
                self.events = old;
            }
        }
    }

    /// A cursor pair (in-process form, Redis form) for a random request.
    fn cursor(&mut self) -> Option<(String, String)> {
        let head = self.session.reader().head().0;
        let ns_hub = self.session.namespace();
        let ns_redis = self.stored.ns;
        match self.rng.below(10) {
            0 => None,
            1 => {
                // Never emitted.
                let s = StreamId(1 + self.rng.below(self.open.len() as u64 + 1));
                let seq = Seq(head + 1 + self.rng.below(3));
                Some((EventId::new(ns_hub, s, seq).to_string(), EventId::new(ns_redis, s, seq).to_string()))
            }
            2 => Some(("garbage".into(), "garbage".into())),
            3 if !self.events.is_empty() => {
                // A real seq on the wrong stream.
                let e = self.events[self.rng.below(self.events.len() as u64) as usize].clone();
                let s = StreamId(e.stream.0 % (self.open.len() as u64 + 1) + 1);
                let hub = EventId { stream: s, ..e.hub_id };
                let redis = EventId { stream: s, ..e.redis_id };
                Some((hub.to_string(), redis.to_string()))
            }
            4 | 5 if !self.events.is_empty() => {
                // Any event of the history, so that cursors of reclaimed
                // streams occur.
                let e = &self.events[self.rng.below(self.events.len() as u64) as usize];
                Some((e.hub_id.to_string(), e.redis_id.to_string()))
            }
            _ if !self.events.is_empty() => {
                // Mostly recent events, so that both covered and evicted
                // cursors occur.
                let n = self.events.len() as u64;
                let span = 1 + self.rng.below(40);
                let back = self.rng.below(n.min(span));
                let e = &self.events[(n - 1 - back) as usize];
                Some((e.hub_id.to_string(), e.redis_id.to_string()))
            }
            _ => None,
        }
    }

    /// Compares one random request on both stores; returns the outcome's
    /// kind ("granted" or the refusal's).
    async fn check(&mut self, seed: u64) -> String {
        let target = if self.rng.below(2) == 0 { Target::Stream } else { Target::Session };
        let cursor = self.cursor();
        let (hc, rc) = match &cursor {
            Some((h, r)) => (Some(h.as_str()), Some(r.as_str())),
            None => (None, None),
        };
        let sid = self.id.to_string();
        let req = ResumeRequest { session_id: Some(&sid), cursor: hc, owner: None };
        let hub = match target {
            Target::Stream => self.hub.resume_stream(req),
            Target::Session => self.hub.check_migration(req),
        };
        if let (Target::Stream, Some(Ok(c))) = (target, cursor.as_ref().map(|c| EventId::parse(&c.0))) {
            let r = self.session.reader();
            if c.ns == self.session.namespace()
                && c.stream.0 <= r.streams_opened()
                && r.stream(c.stream).is_none()
            {
                self.reclaimed += 1;
            }
        }
        let hub = match hub {
            Ok(r) => Outcome::Replay(
                r.snapshot.iter().map(|e| (e.seq.0, e.stream.0, e.payload.to_vec())).collect(),
            ),
            Err(e) => refused(e),
        };
        let req = ResumeRequest { session_id: Some(&sid), cursor: rc, owner: None };
        let redis = match self.store.resume(req, target).await {
            Ok(d) => {
                let events = self.store.replay(&self.id, &d.replay, 7).await.unwrap();
                Outcome::Replay(
                    events.into_iter().map(|e| (e.seq.0, e.stream.0, e.payload.to_vec())).collect(),
                )
            }
            Err(e) => refused(e),
        };
        assert_eq!(hub, redis, "seed {seed}: {target:?} resume at {cursor:?}");
        self.checked += 1;
        match hub {
            Outcome::Replay(_) => "granted".into(),
            Outcome::Refused(kind, _) => kind,
        }
    }
}

/// A ring small enough that histories of a few dozen steps evict by events
/// and by bytes, and open enough streams that records are reclaimed.
fn ring() -> RingConfig {
    RingConfig::new(12, 80)
}

/// What a run of random histories saw.
struct Run {
    /// Decisions compared.
    checked: usize,
    /// How many of each outcome ("granted" or the refusal's kind).
    kinds: HashMap<String, usize>,
    /// Stream resumes at a reclaimed stream.
    reclaimed: usize,
    /// The sessions the histories ran in.
    sessions: Vec<SessionId>,
}

/// The session's lengths list against its meta: its elements'
/// `<first>-<last>:<runs>` chain from the oldest retained event to the head,
/// each with as many lengths as events, and they sum to the window's bytes.
/// An element out of step would be mended by the next append's rebuild, so
/// that decisions stay alike: this check sees it.
async fn check_lengths(c: &mut redis::aio::MultiplexedConnection, id: &SessionId, seed: u64) {
    let (oldest, head, bytes): (Option<u64>, Option<u64>, Option<u64>) = redis::cmd("HMGET")
        .arg(format!("gapless:{{{id}}}:m"))
        .arg("oldest")
        .arg("head")
        .arg("bytes")
        .query_async(c)
        .await
        .unwrap();
    let (oldest, head, bytes) = (oldest.unwrap_or(1), head.unwrap_or(0), bytes.unwrap_or(0));
    let list: Vec<String> =
        redis::cmd("LRANGE").arg(format!("gapless:{{{id}}}:b")).arg(0).arg(-1).query_async(c).await.unwrap();
    let (mut next, mut sum) = (oldest, 0);
    for el in &list {
        let (range, runs) = el.split_once(':').unwrap_or_else(|| panic!("seed {seed}: element {el:?}"));
        let (first, last) = range.split_once('-').unwrap();
        let (first, last): (u64, u64) = (first.parse().unwrap(), last.parse().unwrap());
        assert_eq!(first, next, "seed {seed}: list {list:?} at oldest {oldest}, head {head}");
        let mut count = 0;
        for run in runs.split(' ') {
            let (len, n) = run.split_once('*').unwrap_or((run, "1"));
            let (len, n): (u64, u64) = (len.parse().unwrap(), n.parse().unwrap());
            count += n;
            sum += len * n;
        }
        assert_eq!(count, last - first + 1, "seed {seed}: element {el:?}");
        next = last + 1;
    }
    if head >= oldest {
        assert_eq!(next, head + 1, "seed {seed}: list {list:?} at oldest {oldest}, head {head}");
        assert_eq!(sum, bytes, "seed {seed}: list {list:?} against bytes {bytes}");
    }
}

/// Runs `histories` random histories on the in-process store and `store`,
/// comparing every decision (a difference fails the test there); with
/// `lists`, a connection to the store's Redis, each session's lengths list
/// is checked after every step too.
async fn run(store: RedisStore, histories: u64, mut lists: Option<redis::aio::MultiplexedConnection>) -> Run {
    let hub = Arc::new(Hub::new(HubConfig { ring: ring(), ..HubConfig::default() }).unwrap());
    let mut out = Run { checked: 0, kinds: HashMap::new(), reclaimed: 0, sessions: Vec::new() };
    for seed in 0..histories {
        let mut h = History::new(seed, Arc::clone(&hub), store.clone()).await;
        let streamy = seed % 3 == 0;
        let steps = if streamy { 100 + h.rng.below(100) } else { 20 + h.rng.below(60) };
        for _ in 0..steps {
            h.step(streamy).await;
            if let Some(c) = lists.as_mut() {
                check_lengths(c, &h.id, seed).await;
            }
            for _ in 0..3 {
                *out.kinds.entry(h.check(seed).await).or_default() += 1;
            }
        }
        out.checked += h.checked;
        out.reclaimed += h.reclaimed;
        out.sessions.push(h.id);
        h.hub.remove(&h.id);
        h.store.delete(&h.id, None).await.unwrap();
    }
    out
}

fn store_config() -> StoreConfig {
    StoreConfig { ring: ring(), ..StoreConfig::default() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_and_redis_decide_alike() {
    let redis = RedisServer::start(&[]);
    let store = RedisStore::connect(&redis.url(), store_config()).await.unwrap();
    let histories: u64 =
        std::env::var("GAPLESS_DIFF_HISTORIES").ok().and_then(|v| v.parse().ok()).unwrap_or(300);
    let lists = redis::Client::open(redis.url()).unwrap().get_multiplexed_async_connection().await.unwrap();
    let Run { checked, kinds, reclaimed, .. } = run(store, histories, Some(lists)).await;
    eprintln!("stream resumes at a reclaimed stream: {reclaimed}");
    assert!(reclaimed > 0, "no resume reached a reclaimed stream's tombstone");
    eprintln!("{checked} decisions compared over {histories} histories; outcomes seen: {kinds:?}");
    for k in [
        "granted",
        "gap_not_covered",
        "cursor_not_delivered",
        "cursor_ahead",
        "namespace_mismatch",
        "malformed_cursor",
    ] {
        assert!(kinds.get(k).copied().unwrap_or(0) > 0, "no {k} among the decisions: {kinds:?}");
    }
}

/// The same on a Redis Cluster of three masters (a shorter run: the
/// scripts are the same; this holds the cluster's routing to them), with
/// sessions on more than one master.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn in_process_and_redis_cluster_decide_alike() {
    let cluster = RedisCluster::start(3);
    let store = RedisStore::connect(&cluster.url(2), store_config()).await.unwrap();
    let Run { checked, kinds, sessions, .. } = run(store, 30, None).await;
    eprintln!("cluster: {checked} decisions compared over 30 histories; outcomes seen: {kinds:?}");
    let masters: std::collections::HashSet<u16> =
        sessions.iter().map(|id| cluster.master_of(&format!("gapless:{{{id}}}:m"))).collect();
    assert!(masters.len() >= 2, "the sessions lived on {} master(s) only", masters.len());
    for k in ["granted", "gap_not_covered"] {
        assert!(kinds.get(k).copied().unwrap_or(0) > 0, "no {k} among the decisions: {kinds:?}");
    }
}
