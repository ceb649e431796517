//! The memory budget of a hub: one limit across every session's ring.
//!
//! Each ring is bounded on its own (events and payload bytes); this bounds
//! their sum. Every session keeps a [`Ledger`]: its producer behind the
//! writer lock, what it last reported to the budget, and when it was last
//! active. A publish compares the ring's retained payload bytes with what
//! its session last reported; once they differ by a granule, it reports the
//! ring's exact footprint ([`Producer::footprint`]) to the budget's total.
//! So a publish writes nothing shared (the total changes once per granule,
//! not per event), and the total is off by at most a granule per session.
//!
//! When the total goes over the limit, the publisher that noticed reclaims:
//! it visits the sessions, holding most and idle longest first (footprint
//! times idle time), and evicts whole chunks of their oldest events
//! ([`Producer::evict_to`]) until the total is at most seven eighths of the
//! limit. It passes over a session whose writer lock is held at that moment
//! (it never waits for a writer, a `Lease` included). That eviction is like
//! any other: a resume that needs an evicted
//! event is refused with the numbers, never answered with a hole. A new
//! session is admitted only if, after a reclaim if need be, its own base
//! footprint fits (else `SessionError::MemoryExhausted`).
//!
//! Not counted: what a snapshot, a subscription's cursor or a ticket pins
//! after the ring let go of it (one chunk per live cursor; the gaps of at
//! most `max_tickets` tickets per session), and allocations outside the
//! rings (the transport's own state).

use super::lock;
use crate::ring::Producer;
use crate::sync::{try_lock, AtomicBool, AtomicU64, AtomicUsize, Mutex, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

/// The writer state of one session: its producer and what it reported.
#[derive(Debug)]
pub(crate) struct Writer {
    pub(crate) producer: Producer,
    /// The footprint last added to the budget's total.
    accounted: usize,
    /// The ring's retained payload bytes when it was reported.
    accounted_bytes: usize,
}

/// One session's entry in the budget.
#[derive(Debug)]
pub(crate) struct Ledger {
    /// The single producer, behind the per-session writer lock
    /// (`docs/SPEC.md` §3.1); `None` once the session closed. Taken to
    /// publish, open or end a stream, and by a reclaim to evict.
    pub(crate) writer: Mutex<Option<Writer>>,
    /// Millis since the hub's epoch of the last request or connection end.
    pub(crate) last_active: AtomicU64,
}

/// A ring outside the hub's sessions whose memory the hub's budget counts
/// and reclaims like a session's (a task's event stream, `crate::task`):
/// its producer behind a ledger's writer lock. Dropped, its footprint
/// leaves the total.
#[derive(Debug)]
pub(crate) struct Charged {
    ledger: Arc<Ledger>,
    budget: Arc<MemoryBudget>,
}

impl Charged {
    /// Runs `f` on the producer under the writer lock (`None` once closed),
    /// then reports to the budget. The caller reclaims, if need be, once it
    /// holds no lock of its own ([`Reclaimer`]).
    pub(crate) fn with_producer<R>(&self, f: impl FnOnce(&mut Producer) -> R) -> Option<R> {
        let mut guard = lock(&self.ledger.writer);
        let w = guard.as_mut()?;
        let r = f(&mut w.producer);
        self.budget.account(w);
        drop(guard);
        self.ledger.last_active.store(self.budget.now_ms(), Ordering::Relaxed);
        Some(r)
    }

    /// What reclaims for it, to be called with no lock held.
    pub(crate) fn reclaimer(&self) -> Reclaimer {
        Reclaimer(Arc::clone(&self.budget))
    }

    /// The producer's footprint now.
    pub(crate) fn footprint(&self) -> usize {
        lock(&self.ledger.writer).as_ref().map_or(0, |w| w.producer.footprint())
    }
}

/// Reclaims in a budget a [`Charged`] ring reports to, when it is over its
/// limit (after a change to the ring, with no lock held: a reclaim takes
/// every ring's writer lock in turn).
#[derive(Debug, Clone)]
pub(crate) struct Reclaimer(Arc<MemoryBudget>);

impl Reclaimer {
    /// Reclaims if the total is over the limit.
    pub(crate) fn reclaim_if_over(&self) {
        self.0.reclaim_if_over();
    }
}

impl Drop for Charged {
    fn drop(&mut self) {
        if let Some(w) = lock(&self.ledger.writer).take() {
            self.budget.close(&w);
        }
    }
}

/// A hub's memory budget.
#[derive(Debug)]
pub(crate) struct MemoryBudget {
    /// The limit in bytes (`usize::MAX`: none; the total is still kept).
    limit: usize,
    /// Sum of every live session's reported footprint.
    used: AtomicUsize,
    /// How far a ring's retained bytes drift before it reports again.
    granule: usize,
    /// Every session's ledger (dead ones pruned as it grows and on reclaim).
    ledgers: Mutex<Vec<Weak<Ledger>>>,
    /// Set while a reclaim runs: one at a time, the others go on.
    reclaiming: AtomicBool,
    epoch: Instant,
}

impl MemoryBudget {
    /// A budget of `limit` bytes over at most `max_sessions` sessions.
    pub(crate) fn new(limit: usize, max_sessions: usize, epoch: Instant) -> Self {
        // The total may be off by a granule per session: an eighth of the
        // limit over all sessions, within 1 KiB ..= 64 KiB.
        let granule = (limit / 8 / max_sessions.max(1)).clamp(1 << 10, 64 << 10);
        MemoryBudget {
            limit,
            used: AtomicUsize::new(0),
            granule,
            ledgers: Mutex::new(Vec::new()),
            reclaiming: AtomicBool::new(false),
            epoch,
        }
    }

    /// The limit (`usize::MAX`: none).
    pub(crate) fn limit(&self) -> usize {
        self.limit
    }

    /// The total reported by the live sessions.
    pub(crate) fn used(&self) -> usize {
        self.used.load(Ordering::Relaxed)
    }

    pub(crate) fn now_ms(&self) -> u64 {
        self.epoch.elapsed().as_millis() as u64
    }

    /// Charges `producer`'s ring to this budget ([`Charged`]), if its base
    /// footprint fits, after a reclaim if need be; else `None` (the
    /// producer is dropped).
    pub(crate) fn charge(self: &Arc<Self>, producer: Producer) -> Option<Charged> {
        let base = producer.footprint();
        if !self.fits(base) {
            self.reclaim();
            if !self.fits(base) {
                return None;
            }
        }
        let ledger = self.open(producer, self.now_ms());
        Some(Charged { ledger, budget: Arc::clone(self) })
    }

    /// A ledger for a new session's producer, its footprint added to the
    /// total.
    pub(crate) fn open(&self, producer: Producer, now_ms: u64) -> Arc<Ledger> {
        let accounted = producer.footprint();
        let accounted_bytes = producer.retained_bytes();
        self.used.fetch_add(accounted, Ordering::Relaxed);
        let ledger = Arc::new(Ledger {
            writer: Mutex::new(Some(Writer { producer, accounted, accounted_bytes })),
            last_active: AtomicU64::new(now_ms),
        });
        let mut ledgers = lock(&self.ledgers);
        if ledgers.len() >= 64 && ledgers.len().is_power_of_two() {
            ledgers.retain(|l| l.strong_count() > 0);
        }
        ledgers.push(Arc::downgrade(&ledger));
        ledger
    }

    /// Reports `w`'s footprint if its retained bytes moved by a granule
    /// since the last report (after a publish, under the writer lock).
    #[inline]
    pub(crate) fn account(&self, w: &mut Writer) {
        let bytes = w.producer.retained_bytes();
        if bytes.abs_diff(w.accounted_bytes) >= self.granule {
            self.report(w);
        }
    }

    /// Replaces `w`'s reported footprint by its exact one now.
    #[cold]
    fn report(&self, w: &mut Writer) {
        let fp = w.producer.footprint();
        self.adjust(w.accounted, fp);
        w.accounted = fp;
        w.accounted_bytes = w.producer.retained_bytes();
    }

    /// The session of `w` closed: its footprint leaves the total.
    pub(crate) fn close(&self, w: &Writer) {
        self.adjust(w.accounted, 0);
    }

    fn adjust(&self, from: usize, to: usize) {
        if to >= from {
            self.used.fetch_add(to - from, Ordering::Relaxed);
        } else {
            self.used.fetch_sub(from - to, Ordering::Relaxed);
        }
    }

    /// Reclaims if the total is over the limit (with no writer lock held).
    #[inline]
    pub(crate) fn reclaim_if_over(&self) {
        if self.over() {
            self.reclaim();
        }
    }

    /// Whether the total is over the limit.
    #[inline]
    pub(crate) fn over(&self) -> bool {
        self.used.load(Ordering::Relaxed) > self.limit
    }

    /// Whether `extra` more bytes fit under the limit.
    pub(crate) fn fits(&self, extra: usize) -> bool {
        self.used.load(Ordering::Relaxed).saturating_add(extra) <= self.limit
    }

    /// Evicts from the sessions that hold most and were idle longest until
    /// the total is at most seven eighths of the limit (or nothing more can
    /// be evicted). Returns at once if another reclaim runs. A session whose
    /// writer lock is held at that moment (a publish in flight, a `Lease`)
    /// is passed over rather than waited for: a reclaim never waits for a
    /// writer, so a lease, or a publisher that holds one, cannot deadlock
    /// with it; a lease reclaims itself at its next chunk end, with its lock
    /// let go.
    pub(crate) fn reclaim(&self) {
        if self.limit == usize::MAX || self.reclaiming.swap(true, Ordering::Acquire) {
            return;
        }
        let now = self.now_ms();
        let live: Vec<Arc<Ledger>> = {
            let mut ledgers = lock(&self.ledgers);
            ledgers.retain(|l| l.strong_count() > 0);
            ledgers.iter().filter_map(Weak::upgrade).collect()
        };
        // Score each by footprint times idle time (+1 ms, so that a busy
        // ring that holds a lot still ranks above an idle empty one).
        let mut scored: Vec<(u128, Arc<Ledger>)> = live
            .into_iter()
            .filter_map(|l| {
                let fp = try_lock(&l.writer)?.as_ref()?.producer.footprint();
                let idle = now.saturating_sub(l.last_active.load(Ordering::Relaxed)) + 1;
                Some((fp as u128 * u128::from(idle), l))
            })
            .collect();
        scored.sort_unstable_by_key(|(score, _)| std::cmp::Reverse(*score));
        let target = self.limit / 8 * 7;
        for (_, l) in scored {
            let used = self.used();
            if used <= target {
                break;
            }
            let Some(mut guard) = try_lock(&l.writer) else { continue };
            let Some(w) = guard.as_mut() else { continue };
            let fp = w.producer.footprint();
            w.producer.evict_to(fp.saturating_sub(used - target));
            self.report(w);
        }
        self.reclaiming.store(false, Ordering::Release);
    }
}
