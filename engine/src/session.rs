//! Sessions and the hub that owns them (SPEC §2, §4.1).
//!
//! A [`Hub`] creates, finds and deletes [`Session`]s. Each session owns one
//! ring, a random [`Namespace`] that names this incarnation in every event
//! id, and a mutex that serializes the session's several writers in front of
//! its single producer (SPEC §3.1). Readers, coverage checks and snapshots
//! go through the session's [`Reader`] and never take that mutex.
//!
//! The hub's map is sharded: a lookup locks one shard for a hash-map probe,
//! and a publisher holds its `Arc<Session>`, so publishers of different
//! sessions never wait on each other.

use crate::event_id::{EventId, Namespace};
use crate::ring::{ring, ConfigError, RingConfig};
use crate::stream::StreamHandle;
use crate::sync::{lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use crate::ticket::TicketBook;
use crate::{Producer, PublishError, Reader, Seq, StreamId};
use bytes::Bytes;
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// A session id: 128 bits from the OS CSPRNG, written as 32 lowercase hex
/// digits (URL-safe, fits `Mcp-Session-Id`).
#[derive(Clone, Copy, PartialEq, Eq, Hash)]
pub struct SessionId([u8; 16]);

impl SessionId {
    /// A fresh random id.
    pub fn random() -> Self {
        let mut b = [0u8; 16];
        getrandom::getrandom(&mut b).expect("the OS CSPRNG is available");
        SessionId(b)
    }

    /// Parses the 32-hex-digit form; anything else is `None` (an id we
    /// could never have issued).
    pub fn parse(s: &str) -> Option<Self> {
        parse_hex16(s).map(SessionId)
    }
}

/// 32 lowercase hex digits to 16 bytes (session ids, tickets).
pub(crate) fn parse_hex16(s: &str) -> Option<[u8; 16]> {
    let s = s.as_bytes();
    if s.len() != 32 {
        return None;
    }
    let mut b = [0u8; 16];
    for (i, pair) in s.chunks_exact(2).enumerate() {
        b[i] = hex_val(pair[0])? << 4 | hex_val(pair[1])?;
    }
    Some(b)
}

fn hex_val(c: u8) -> Option<u8> {
    match c {
        b'0'..=b'9' => Some(c - b'0'),
        b'a'..=b'f' => Some(c - b'a' + 10),
        _ => None,
    }
}

impl fmt::Display for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for SessionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Session ids are bearer secrets: never print them whole.
        write!(f, "SessionId({:02x}{:02x}…)", self.0[0], self.0[1])
    }
}

/// Hub limits; every field has the SPEC §5 default.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HubConfig {
    /// Each session's ring.
    pub ring: RingConfig,
    /// Most live sessions (default 10 000).
    pub max_sessions: usize,
    /// A session with no open connection and no request for this long is
    /// expired (default 10 min).
    pub idle_timeout: Duration,
    /// Lifetime of a migration ticket (default 30 s).
    pub ticket_ttl: Duration,
    /// Most outstanding tickets per session (default 4).
    pub max_tickets: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            ring: RingConfig::default(),
            max_sessions: 10_000,
            idle_timeout: Duration::from_secs(600),
            ticket_ttl: Duration::from_secs(30),
            max_tickets: 4,
        }
    }
}

/// Why a session could not be created or found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SessionError {
    /// The hub holds `max` sessions already.
    TooManySessions {
        /// The configured bound.
        max: usize,
    },
    /// No such session (never created, deleted, or bound to another caller).
    Unknown,
    /// The session existed but was idle longer than the timeout; it is gone.
    Expired {
        /// How long it had been idle.
        idle_for: Duration,
    },
    /// The hub's ring configuration is invalid.
    Config(ConfigError),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::TooManySessions { max } => write!(f, "session limit of {max} reached"),
            SessionError::Unknown => f.write_str("unknown session"),
            SessionError::Expired { idle_for } => write!(f, "session expired after {idle_for:?} idle"),
            SessionError::Config(e) => write!(f, "invalid ring configuration: {e}"),
        }
    }
}

impl std::error::Error for SessionError {}

const SHARDS: usize = 16;

type Shard = Mutex<HashMap<SessionId, Arc<Session>>>;

/// Creates, finds and deletes sessions.
pub struct Hub {
    shards: Box<[Shard]>,
    /// Live sessions; raised before insertion, so the bound is never exceeded.
    count: AtomicUsize,
    config: HubConfig,
    epoch: Instant,
    pub(crate) tickets: crate::ticket::TicketIndex,
}

impl fmt::Debug for Hub {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Hub").field("sessions", &self.len()).field("config", &self.config).finish()
    }
}

impl Hub {
    /// A hub with the given limits; fails if the ring configuration does.
    pub fn new(config: HubConfig) -> Result<Self, ConfigError> {
        // Validate once, so session creation can only fail on the bound.
        drop(ring(config.ring)?);
        Ok(Hub {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::new())).collect(),
            count: AtomicUsize::new(0),
            config,
            epoch: Instant::now(),
            tickets: crate::ticket::TicketIndex::default(),
        })
    }

    /// The limits.
    pub fn config(&self) -> &HubConfig {
        &self.config
    }

    /// Live sessions.
    pub fn len(&self) -> usize {
        self.count.load(Ordering::Acquire)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn shard(&self, id: &SessionId) -> &Shard {
        &self.shards[id.0[0] as usize % SHARDS]
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Creates a session with a fresh random id, bound to `owner` if given
    /// (a caller identity: later lookups with another identity see nothing).
    pub fn create(&self, owner: Option<&str>) -> Result<Arc<Session>, SessionError> {
        self.create_with_id(SessionId::random(), owner)
    }

    /// Creates a session under a chosen id (replacing any session with that
    /// id). The new session gets a new namespace, so cursors of the old
    /// incarnation are foreign to it.
    pub fn create_with_id(&self, id: SessionId, owner: Option<&str>) -> Result<Arc<Session>, SessionError> {
        let max = self.config.max_sessions;
        let (producer, reader) = ring(self.config.ring).map_err(SessionError::Config)?;
        // Room for one more, if need be after sweeping expired sessions once.
        // Replacing an existing id needs none (checked under the shard lock).
        let reserved = self.reserve_slot() || (self.sweep_idle() > 0 && self.reserve_slot());
        let session = Arc::new(Session::new(id, owner, producer, reader, self.now_ms()));
        let old = {
            let mut shard = lock(self.shard(&id));
            if !reserved && !shard.contains_key(&id) {
                return Err(SessionError::TooManySessions { max });
            }
            shard.insert(id, Arc::clone(&session))
        };
        if let Some(old) = old {
            if reserved {
                self.count.fetch_sub(1, Ordering::AcqRel);
            }
            old.close();
        }
        Ok(session)
    }

    /// Counts one more session if the bound allows it.
    fn reserve_slot(&self) -> bool {
        let max = self.config.max_sessions;
        self.count.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| (n < max).then_some(n + 1)).is_ok()
    }

    /// Finds a live session for a caller. `owner` must match the identity
    /// the session was created under (both `None` for unbound sessions); a
    /// mismatch looks exactly like an unknown session.
    pub fn get(&self, id: &SessionId, owner: Option<&str>) -> Result<Arc<Session>, SessionError> {
        let s = lock(self.shard(id)).get(id).cloned().ok_or(SessionError::Unknown)?;
        if s.owner.as_deref() != owner {
            return Err(SessionError::Unknown);
        }
        if let Some(idle_for) = self.expired(&s) {
            self.remove(id);
            return Err(SessionError::Expired { idle_for });
        }
        Ok(s)
    }

    /// The session under `id` whoever owns it (internal: to tell a foreign
    /// ticket from an unknown one).
    pub(crate) fn get_any(&self, id: &SessionId) -> Option<Arc<Session>> {
        lock(self.shard(id)).get(id).cloned()
    }

    /// [`Hub::get`] from the id's string form.
    pub fn get_str(&self, id: &str, owner: Option<&str>) -> Result<Arc<Session>, SessionError> {
        self.get(&SessionId::parse(id).ok_or(SessionError::Unknown)?, owner)
    }

    /// Deletes a session: its streams end, its readers see the ring close,
    /// its tickets die. Returns it if it existed.
    pub fn remove(&self, id: &SessionId) -> Option<Arc<Session>> {
        let s = lock(self.shard(id)).remove(id)?;
        self.count.fetch_sub(1, Ordering::AcqRel);
        s.close();
        Some(s)
    }

    fn expired(&self, s: &Session) -> Option<Duration> {
        if s.connections.load(Ordering::Acquire) > 0 {
            return None;
        }
        let idle = self.now_ms().saturating_sub(s.last_active.load(Ordering::Acquire));
        let idle = Duration::from_millis(idle);
        (idle >= self.config.idle_timeout).then_some(idle)
    }

    /// Removes every expired session; returns how many. Call it
    /// periodically (the server runs it on a timer); lookups also expire
    /// lazily.
    pub fn sweep_idle(&self) -> usize {
        let mut n = 0;
        for shard in self.shards.iter() {
            let dead: Vec<Arc<Session>> = {
                let mut map = lock(shard);
                let ids: Vec<SessionId> =
                    map.iter().filter(|(_, s)| self.expired(s).is_some()).map(|(id, _)| *id).collect();
                ids.iter().filter_map(|id| map.remove(id)).collect()
            };
            for s in dead {
                self.count.fetch_sub(1, Ordering::AcqRel);
                s.close();
                n += 1;
            }
        }
        n
    }

    /// Marks activity on a session (a request arrived), resetting its idle clock.
    pub fn touch(&self, s: &Session) {
        s.last_active.store(self.now_ms(), Ordering::Release);
    }

    /// Counts an open connection on `s` until the guard drops; a session
    /// with an open connection never expires.
    pub fn connect(self: &Arc<Self>, s: &Arc<Session>) -> ConnectionGuard {
        s.connections.fetch_add(1, Ordering::AcqRel);
        self.touch(s);
        ConnectionGuard { hub: Arc::clone(self), session: Arc::clone(s) }
    }
}

/// Keeps a session from expiring while a connection is open.
#[derive(Debug)]
pub struct ConnectionGuard {
    hub: Arc<Hub>,
    session: Arc<Session>,
}

impl Drop for ConnectionGuard {
    fn drop(&mut self) {
        self.hub.touch(&self.session);
        self.session.connections.fetch_sub(1, Ordering::AcqRel);
    }
}

/// One MCP session: a ring, its namespace, its writers' mutex.
pub struct Session {
    id: SessionId,
    ns: Namespace,
    owner: Option<String>,
    /// The single producer, behind the per-session writer lock (SPEC §3.1).
    /// Taken only to publish, open or end a stream.
    writer: Mutex<Option<Producer>>,
    reader: Reader,
    standalone: StreamHandle,
    /// Millis since the hub's epoch of the last request or connection end.
    last_active: AtomicU64,
    /// Open connections (SSE streams, sockets).
    connections: AtomicUsize,
    /// Set once when the session migrates to a WebSocket.
    migrated: AtomicBool,
    /// Set once when the session is closed (deleted or expired).
    closed: AtomicBool,
    pub(crate) tickets: TicketBook,
    #[cfg(feature = "tokio")]
    pub(crate) pace: crate::facade::PaceTable,
}

impl fmt::Debug for Session {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Session").field("id", &self.id).field("ns", &self.ns).finish_non_exhaustive()
    }
}

/// Publishing on a session failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionPublishError {
    /// The ring refused the event.
    Publish(PublishError),
    /// The session was deleted or expired.
    Closed,
}

impl fmt::Display for SessionPublishError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionPublishError::Publish(e) => e.fmt(f),
            SessionPublishError::Closed => f.write_str("session is closed"),
        }
    }
}

impl std::error::Error for SessionPublishError {}

impl From<PublishError> for SessionPublishError {
    fn from(e: PublishError) -> Self {
        SessionPublishError::Publish(e)
    }
}

impl Session {
    fn new(id: SessionId, owner: Option<&str>, mut producer: Producer, reader: Reader, now: u64) -> Self {
        let standalone = producer.open_stream();
        Session {
            id,
            ns: Namespace::random(),
            owner: owner.map(str::to_owned),
            writer: Mutex::new(Some(producer)),
            reader,
            standalone,
            last_active: AtomicU64::new(now),
            connections: AtomicUsize::new(0),
            migrated: AtomicBool::new(false),
            closed: AtomicBool::new(false),
            tickets: TicketBook::default(),
            #[cfg(feature = "tokio")]
            pace: Default::default(),
        }
    }

    /// The session id.
    pub fn id(&self) -> SessionId {
        self.id
    }

    /// The namespace of this incarnation (part of every event id).
    pub fn namespace(&self) -> Namespace {
        self.ns
    }

    /// A reader of the session's ring (lock-free).
    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The standalone (GET) stream.
    pub fn standalone(&self) -> &StreamHandle {
        &self.standalone
    }

    /// The wire event id of `seq` on `stream`.
    pub fn event_id(&self, stream: StreamId, seq: Seq) -> EventId {
        EventId { ns: self.ns, stream, seq }
    }

    /// Whether the session was deleted (or expired).
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Whether the session migrated to a WebSocket.
    pub fn is_migrated(&self) -> bool {
        self.migrated.load(Ordering::Acquire)
    }

    /// Marks the session migrated (its SSE streams are over).
    pub fn set_migrated(&self) {
        self.migrated.store(true, Ordering::Release);
    }

    fn with_writer<R>(&self, f: impl FnOnce(&mut Producer) -> R) -> Result<R, SessionPublishError> {
        let mut w = lock(&self.writer);
        w.as_mut().map(f).ok_or(SessionPublishError::Closed)
    }

    /// Opens a stream (e.g. for one POST request).
    pub fn open_stream(&self) -> Result<StreamHandle, SessionPublishError> {
        self.with_writer(|p| p.open_stream())
    }

    /// Publishes on `stream`; serialized with the session's other writers.
    pub fn publish(&self, stream: &StreamHandle, payload: Bytes) -> Result<Seq, SessionPublishError> {
        self.with_writer(|p| p.publish(stream, payload))?.map_err(Into::into)
    }

    /// Ends `stream` (its followers finish after its last event).
    pub fn end_stream(&self, stream: &StreamHandle) -> Result<(), SessionPublishError> {
        self.with_writer(|p| p.end_stream(stream))?;
        #[cfg(feature = "tokio")]
        self.pace.forget(stream.id());
        Ok(())
    }

    /// Closes the session: drops the producer (followers of the whole ring
    /// see `End`, stream followers too once their stream is ended) and ends
    /// every stream.
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::Release);
        let producer = lock(&self.writer).take();
        if let Some(mut p) = producer {
            for info in self.reader.streams() {
                if !info.ended {
                    if let Some(h) = p.handle(info.id) {
                        p.end_stream(&h);
                    }
                }
            }
            drop(p);
        }
        self.tickets.clear();
        #[cfg(feature = "tokio")]
        self.pace.wake_all();
    }
}
