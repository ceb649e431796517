//! What keeps this node's sessions alive and their followers awake at no
//! cost per idle session (`docs/SPEC.md` §8.1, §8.8).
//!
//! - **Pins.** A session with a connection open on this node must not
//!   expire. The node pins it in the store once such a connection has been
//!   open for a sixteenth of the idle timeout (short requests' streams
//!   never pin; the store's TTL outlasts the wait, since opening a
//!   connection is a use), and lets go when its last connection here
//!   closes: one script each way, none while it stays open.
//! - **The safety net.** A follower is woken by the store's announcements
//!   (pub/sub), which can be lost without the subscription breaking (a link
//!   between Redis Cluster nodes, a failover). Each second the node looks
//!   at the logs of [`PROBES_PER_SECOND`] of its sessions that have a
//!   connection open, in turn (`probe.lua`: one read, no write), and wakes
//!   the follower of one whose log holds more than it has read. The cost is
//!   per node, whatever the number of sessions; the bound on a lost
//!   announcement's delay is the number of such sessions divided by it.

use super::apply::check_at;
use super::Cluster;
use crate::vocab::sync::lock;
use futures_util::StreamExt as _;
use gapless::SessionId;
use gapless_redis::Probe;
use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use tokio_util::sync::CancellationToken;

/// How many sessions' logs the safety net looks at per second on a node.
pub(crate) const PROBES_PER_SECOND: usize = 10;

/// How many pins or unpins a node has in flight at once.
const PINS_IN_FLIGHT: usize = 32;

/// This node's open connections by session, and which sessions it pinned.
#[derive(Default)]
pub(crate) struct Pins {
    map: Mutex<HashMap<SessionId, Pin>>,
    /// The safety net's turn: the sessions still to look at this round.
    turn: Mutex<VecDeque<SessionId>>,
}

struct Pin {
    /// Connections open on this node.
    open: usize,
    /// Since when at least one has been open.
    since: Instant,
    /// Whether the store has this node's pin.
    pinned: bool,
    /// The store said the session is gone: nothing to pin.
    gone: bool,
}

/// One open connection of this node on a session (see [`Cluster::connected`]).
pub(crate) struct Pinned {
    cluster: Arc<Cluster>,
    id: SessionId,
}

impl Drop for Pinned {
    fn drop(&mut self) {
        if let Some(p) = lock(&self.cluster.pins.map).get_mut(&self.id) {
            p.open = p.open.saturating_sub(1);
        }
    }
}

impl Cluster {
    /// Counts an open connection of this node on session `id` until the
    /// guard drops; the keeper pins the session while one stays open.
    pub(crate) fn connected(self: &Arc<Self>, id: SessionId) -> Pinned {
        let mut map = lock(&self.pins.map);
        let p = map.entry(id).or_insert_with(|| Pin {
            open: 0,
            since: Instant::now(),
            pinned: false,
            gone: false,
        });
        if p.open == 0 {
            p.since = Instant::now();
        }
        p.open += 1;
        Pinned { cluster: Arc::clone(self), id }
    }

    /// The keeper: pins and unpins, and the safety net, every
    /// `period` until `shutdown`; then lets go of every pin it holds.
    pub(super) fn keep(self: &Arc<Self>, shutdown: CancellationToken) {
        let me = Arc::clone(self);
        let idle = self.store.config().idle_timeout;
        let pin_after = idle / 16;
        tokio::spawn(async move {
            let mut tick =
                tokio::time::interval(Duration::from_secs(1).min(pin_after).max(Duration::from_millis(50)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            let mut probed = Instant::now();
            loop {
                tokio::select! {
                    _ = tick.tick() => {}
                    _ = shutdown.cancelled() => break,
                }
                me.apply_pins(pin_after).await;
                if probed.elapsed() >= Duration::from_secs(1) {
                    probed = Instant::now();
                    me.stop_closed_followers();
                    me.probe_some().await;
                    me.wake_waiters_of_dead_holders().await;
                }
            }
            // Shutting down: the connections are closing; let go of the
            // pins (a node killed instead is reaped: §8.6).
            for p in lock(&me.pins.map).values_mut() {
                p.open = 0;
            }
            me.apply_pins(Duration::ZERO).await;
        });
    }

    /// This node was taken for dead and reaped (its lease lapsed while it
    /// lived): the reaper let go of its pins, so every session with a
    /// connection open here is pinned again.
    pub(super) fn repin_all(&self) {
        for p in lock(&self.pins.map).values_mut() {
            p.pinned = false;
            p.gone = false;
        }
    }

    /// Pins the sessions whose connections have been open `pin_after`, and
    /// lets go of those with none left.
    async fn apply_pins(self: &Arc<Self>, pin_after: Duration) {
        let work: Vec<(SessionId, bool)> = {
            let mut map = lock(&self.pins.map);
            map.retain(|_, p| p.open > 0 || p.pinned);
            map.iter()
                .filter_map(|(id, p)| {
                    if p.open > 0 && !p.pinned && !p.gone && p.since.elapsed() >= pin_after {
                        Some((*id, true))
                    } else if p.open == 0 && p.pinned {
                        Some((*id, false))
                    } else {
                        None
                    }
                })
                .collect()
        };
        let results: Vec<_> = futures_util::stream::iter(work)
            .map(|(id, on)| async move { (id, on, self.store.pin(&id, &self.node, on).await) })
            .buffer_unordered(PINS_IN_FLIGHT)
            .collect()
            .await;
        let mut map = lock(&self.pins.map);
        for (id, on, r) in results {
            let Some(p) = map.get_mut(&id) else { continue };
            match r {
                Ok(found) => {
                    p.pinned = on && found;
                    p.gone = on && !found;
                }
                // Tried again at the next tick. A pin whose answer was lost
                // may have been written: it counts as written, so that the
                // session is let go of later (an unpin is harmless).
                Err(e) => {
                    p.pinned |= on;
                    tracing::debug!(error = %e, pin = on, "pin not changed: store unavailable");
                }
            }
        }
    }

    /// The safety net: looks at the logs of up to [`PROBES_PER_SECOND`]
    /// sessions with a connection open here, in turn, and wakes the
    /// follower of each whose log holds an entry past its place, or that
    /// left the store.
    async fn probe_some(self: &Arc<Self>) {
        let batch: Vec<SessionId> = {
            let mut turn = lock(&self.pins.turn);
            if turn.is_empty() {
                turn.extend(lock(&self.pins.map).iter().filter(|(_, p)| p.open > 0).map(|(id, _)| *id));
            }
            let n = turn.len().min(PROBES_PER_SECOND);
            turn.drain(..n).collect()
        };
        for id in batch {
            let Some(((place, check, ctl_read), session)) = self.place_of(&id) else { continue };
            match self.store.probe(&id).await {
                // Read already (the same event there: no failover rewrote
                // it), or an event the replica has from this node's own
                // appends, the same one; and no stream's end since the
                // follower's last read.
                Ok(Probe::Last(last, nonce, ctl))
                    if ctl <= ctl_read
                        && ((last == place && (nonce.is_none() || nonce == check))
                            || (last > place
                                && last.1 == 0
                                && nonce.is_some()
                                && check_at(&session, last.0) == nonce)) => {}
                // More in the log, a log behind the replica or rewritten
                // (a failover: the follower drops its replica), or gone.
                Ok(_) => self.notifier.wake(&id),
                Err(e) => {
                    tracing::debug!(error = %e, "safety net: store unavailable");
                    return;
                }
            }
        }
    }
}
