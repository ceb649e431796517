//! The hub: creates, finds, expires and deletes sessions (`docs/SPEC.md`
//! §2, §4.1).
//!
//! The hub's map is sharded: a lookup locks one shard for a hash-map probe,
//! and a publisher holds its `Arc<Session>`, so publishers of different
//! sessions never wait on each other.

use super::budget::MemoryBudget;
use super::lock;
use super::secret::{random_namespace, SessionId};
use super::session::Session;
use super::ticket::TicketIndex;
use crate::ring::{ring, ConfigError, RingConfig};
use crate::sync::{AtomicU64, AtomicUsize, HashMap, Mutex, Ordering};
use gapless_wire::{Namespace, Seq};
use std::fmt;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Hub limits; every field has the `docs/SPEC.md` §5 default.
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
    /// Most bytes all sessions' rings together may keep alive (default:
    /// `usize::MAX`, no limit beyond each ring's own). Over it, the oldest
    /// events of the sessions that hold most and were idle longest are
    /// evicted, explicitly; a new session is refused
    /// ([`SessionError::MemoryExhausted`]) only when that cannot make room
    /// (a reclaim passes over the rings whose writers are busy at that
    /// moment, so under concurrent publishing it may find less to evict).
    /// See the `budget` module docs for what is counted.
    pub max_memory: usize,
}

impl Default for HubConfig {
    fn default() -> Self {
        HubConfig {
            ring: RingConfig::default(),
            max_sessions: 10_000,
            idle_timeout: Duration::from_secs(600),
            ticket_ttl: Duration::from_secs(30),
            max_tickets: 4,
            max_memory: usize::MAX,
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
    /// The hub's memory budget is spent and evicting could not make room
    /// for another session.
    MemoryExhausted {
        /// The budget in bytes.
        limit: usize,
    },
    /// The hub's ring configuration is invalid.
    Config(ConfigError),
}

impl fmt::Display for SessionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SessionError::TooManySessions { max } => write!(f, "session limit of {max} reached"),
            SessionError::Unknown => f.write_str("unknown session"),
            SessionError::MemoryExhausted { limit } => {
                write!(f, "the memory budget of {limit} bytes is spent; no room for another session")
            }
            SessionError::Expired { idle_for } => write!(f, "session expired after {idle_for:?} idle"),
            SessionError::Config(e) => write!(f, "invalid ring configuration: {e}"),
        }
    }
}

impl std::error::Error for SessionError {}

const SHARDS: usize = 16;

/// How often a full hub may sweep on a creation.
const FULL_SWEEP_EVERY_MS: u64 = 1000;

type Shard = Mutex<HashMap<SessionId, Arc<Session>>>;

/// Creates, finds and deletes sessions.
pub struct Hub {
    shards: Box<[Shard]>,
    /// Live sessions; raised before insertion, so the bound is never exceeded.
    count: AtomicUsize,
    config: HubConfig,
    epoch: Instant,
    /// The memory budget across every session's ring.
    budget: Arc<MemoryBudget>,
    /// When (millis since `epoch`) a full hub last swept for expired
    /// sessions on a creation: at most once a second, so that a client
    /// hammering a full hub does not make each refusal scan every session.
    last_full_sweep_ms: AtomicU64,
    pub(crate) tickets: TicketIndex,
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
        let epoch = Instant::now();
        Ok(Hub {
            shards: (0..SHARDS).map(|_| Mutex::new(HashMap::default())).collect(),
            count: AtomicUsize::new(0),
            budget: Arc::new(MemoryBudget::new(config.max_memory, config.max_sessions, epoch)),
            config,
            epoch,
            last_full_sweep_ms: AtomicU64::new(0),
            tickets: TicketIndex::default(),
        })
    }

    /// The limits.
    pub fn config(&self) -> &HubConfig {
        &self.config
    }

    /// Bytes the sessions' rings (and the task event streams charged to it,
    /// `crate::task::TaskEvents::in_hub`) keep alive, as last reported to
    /// the memory budget (within a granule per ring of the exact sum).
    pub fn memory_used(&self) -> usize {
        self.budget.used()
    }

    /// Charges `producer`'s ring to this hub's memory budget, counted and
    /// reclaimed like a session's (a task's event stream); `None` when
    /// there is no room for its base footprint, even after a reclaim.
    pub(crate) fn charge(&self, producer: crate::ring::Producer) -> Option<super::Charged> {
        self.budget.charge(producer)
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
        &self.shards[id.0.first_byte() as usize % SHARDS]
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
    ///
    /// When the hub is full it first sweeps expired sessions to make room,
    /// but at most once a second: a refusal in between costs no scan of
    /// the sessions (the periodic `sweep_idle` frees them meanwhile).
    pub fn create_with_id(&self, id: SessionId, owner: Option<&str>) -> Result<Arc<Session>, SessionError> {
        self.create_as(id, random_namespace(), owner, 1)
    }

    /// Creates a local replica of a session whose log is kept elsewhere (a
    /// cluster's store): namespace `ns` is the store's, and the ring's first
    /// seq is `first` (what the store will append next), so that local seqs
    /// are the store's. Replaces any session under `id`, like
    /// [`Hub::create_with_id`]; the same bounds apply.
    pub fn create_replica(
        &self,
        id: SessionId,
        ns: Namespace,
        owner: Option<&str>,
        first: Seq,
    ) -> Result<Arc<Session>, SessionError> {
        self.create_as(id, ns, owner, first.0.max(1))
    }

    fn create_as(
        &self,
        id: SessionId,
        ns: Namespace,
        owner: Option<&str>,
        first: u64,
    ) -> Result<Arc<Session>, SessionError> {
        let max = self.config.max_sessions;
        // Room for one more, if need be after sweeping expired sessions.
        // Replacing an existing id needs none. A refusal is decided here,
        // before anything is allocated (and again under the shard lock).
        let reserved = self.reserve_slot() || (self.sweep_if_due() > 0 && self.reserve_slot());
        if !reserved && !lock(self.shard(&id)).contains_key(&id) {
            return Err(SessionError::TooManySessions { max });
        }
        let unreserve = || {
            if reserved {
                self.count.fetch_sub(1, Ordering::AcqRel);
            }
        };
        let (mut producer, reader) = ring(self.config.ring).map_err(|e| {
            unreserve();
            SessionError::Config(e)
        })?;
        producer.start_at(first);
        // Opened before the footprint is taken, so that the room asked for
        // counts its record (the session holds it from the start).
        let standalone = producer.open_stream();
        // Room in the memory budget for the new ring's base footprint, if
        // need be after evicting from the others.
        let base = producer.footprint();
        if !self.budget.fits(base) {
            self.budget.reclaim();
            if !self.budget.fits(base) {
                unreserve();
                return Err(SessionError::MemoryExhausted { limit: self.budget.limit() });
            }
        }
        let session = Arc::new(Session::new(
            id,
            ns,
            owner,
            (producer, standalone),
            reader,
            &self.budget,
            self.now_ms(),
        ));
        let old = {
            let mut shard = lock(self.shard(&id));
            if !reserved && !shard.contains_key(&id) {
                // The id went meanwhile: no replacement, and no room.
                drop(shard);
                self.end(&session);
                return Err(SessionError::TooManySessions { max });
            }
            shard.insert(id, Arc::clone(&session))
        };
        if let Some(old) = old {
            unreserve();
            self.end(&old);
        }
        Ok(session)
    }

    /// Sweeps expired sessions unless a full hub already did within the
    /// last second (the periodic sweeper still runs on its own timer).
    fn sweep_if_due(&self) -> usize {
        let now = self.now_ms();
        let last = self.last_full_sweep_ms.load(Ordering::Relaxed);
        if now.saturating_sub(last) < FULL_SWEEP_EVERY_MS && last != 0 {
            return 0;
        }
        if self
            .last_full_sweep_ms
            .compare_exchange(last, now.max(1), Ordering::Relaxed, Ordering::Relaxed)
            .is_err()
        {
            return 0; // another creation sweeps now
        }
        self.sweep_idle()
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
        self.end(&s);
        Some(s)
    }

    /// Deletes `session` if it is still the one under its id (a replaced
    /// session was ended when it was replaced); returns whether it did.
    pub fn remove_exact(&self, session: &Arc<Session>) -> bool {
        let id = session.id();
        let s = {
            let mut shard = lock(self.shard(&id));
            match shard.get(&id) {
                Some(current) if Arc::ptr_eq(current, session) => shard.remove(&id),
                _ => None,
            }
        };
        match s {
            Some(s) => {
                self.count.fetch_sub(1, Ordering::AcqRel);
                self.end(&s);
                true
            }
            None => false,
        }
    }

    /// Ends a session that left the map: its streams end, its readers see
    /// the ring close, and its tickets go from the hub's index too (which
    /// would otherwise keep one entry per ticket of every deleted session).
    fn end(&self, s: &Session) {
        s.close();
        self.tickets.forget(&s.tickets, self.now_ms());
    }

    fn expired(&self, s: &Session) -> Option<Duration> {
        if s.connections.load(Ordering::Acquire) > 0 {
            return None;
        }
        let idle = self.now_ms().saturating_sub(s.ledger.last_active.load(Ordering::Acquire));
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
                self.end(&s);
                n += 1;
            }
        }
        n
    }

    /// Lets go of the gaps that expired, unredeemed migration tickets of
    /// live sessions still pin (a redeem of one still says the ticket
    /// expired); returns how many it found. Call it periodically (the
    /// server runs it with [`Hub::sweep_idle`]); issuing a ticket and
    /// ending a session also find them.
    pub fn sweep_tickets(&self) -> u64 {
        let now = self.now_ms();
        let mut n = 0;
        for shard in self.shards.iter() {
            let live: Vec<Arc<Session>> = lock(shard).values().cloned().collect();
            for s in live {
                n += s.tickets.expire(now);
            }
        }
        self.tickets.count_expired(n);
        n
    }

    /// Migration tickets that expired unredeemed so far (found by
    /// [`Hub::sweep_tickets`], by an issue or by their session's end).
    pub fn tickets_expired(&self) -> u64 {
        self.tickets.expired()
    }

    /// Marks activity on a session (a request arrived), resetting its idle clock.
    // Hidden: transport bookkeeping (gapless-server calls it per request).
    #[doc(hidden)]
    pub fn touch(&self, s: &Session) {
        s.ledger.last_active.store(self.now_ms(), Ordering::Release);
    }

    /// Counts an open connection on `s` until the guard drops; a session
    /// with an open connection never expires.
    // Hidden: transport bookkeeping (gapless-server holds one guard per open
    // SSE response or socket).
    #[doc(hidden)]
    pub fn connect(self: &Arc<Self>, s: &Arc<Session>) -> ConnectionGuard {
        s.connections.fetch_add(1, Ordering::AcqRel);
        self.touch(s);
        ConnectionGuard { hub: Arc::clone(self), session: Arc::clone(s) }
    }
}

/// Keeps a session from expiring while a connection is open (see
/// `Hub::connect`).
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
