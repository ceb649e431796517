//! The operator's counters (`docs/SPEC.md` §9): the metric types, and
//! what is counted as it happens, once per request or connection
//! (sessions created, refusals by kind, resumes and migrations by outcome,
//! open streams and sockets, socket closes by code).
//!
//! Publishing writes only its own session's counters ([`Published`]);
//! nothing global is written per event. A session's counts join the totals
//! of the sessions that ended ([`Metrics::departed`]) when it ends. What is
//! read from the sessions at scrape time, and how it is served, is the
//! operator layer's (`operator/`).
//!
//! Labels are bounded: kinds are the contract's, outcomes a kind or `ok`,
//! close codes the server's own. No session id is ever a label.

use crate::vocab::error::ApiError;
use crate::vocab::secret::SessionTag;
use crate::vocab::sync::lock;
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use std::sync::atomic::{AtomicU64, Ordering};

/// A label naming a refusal kind (`ErrorKind::as_str`).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Kind {
    pub(crate) kind: &'static str,
}

/// A label naming an outcome: `ok` or a refusal kind.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Outcome {
    pub(crate) outcome: &'static str,
}

/// A label naming why a session was not created.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Reason {
    pub(crate) reason: &'static str,
}

/// A label naming a task's terminal status, or why one was not created.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct TaskLabel {
    status: &'static str,
}

/// A label naming how a gap was replayed: `resume` (an SSE resume) or
/// `socket` (a migration's WebSocket).
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Via {
    pub(crate) via: &'static str,
}

/// Set on the response of a legacy `GET /sse` that created a session.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LegacyCreated;

/// What a granted resume or migration replays before it goes live: set
/// on its response by the handler, observed by the counting layer (`operator/count.rs`).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Replayed(pub(crate) usize);

/// Bucket bounds of the replayed-events histogram.
const REPLAY_BUCKETS: [f64; 10] = [0.0, 1.0, 4.0, 16.0, 64.0, 256.0, 1024.0, 4096.0, 16384.0, 65536.0];

fn replay_histogram() -> Histogram {
    Histogram::new(REPLAY_BUCKETS)
}

/// A label naming a WebSocket close code.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Code {
    code: u16,
}

/// A label naming where an event went.
#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
pub(crate) struct Target {
    pub(crate) target: &'static str,
}

/// Where an event is published.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TargetKind {
    /// A request's own stream (a POST's SSE response).
    Request = 0,
    /// The session's standalone stream (the GET, or the legacy transport).
    Standalone = 1,
    /// A stream of a session that migrated to a WebSocket.
    Socket = 2,
}

pub(crate) const TARGETS: [&str; 3] = ["request", "standalone", "socket"];

/// One session's publish counts by target: written by its publishers
/// only (relaxed adds on the session's own memory), read at scrape time.
#[derive(Debug, Default)]
pub(crate) struct Published {
    events: [AtomicU64; 3],
    bytes: [AtomicU64; 3],
}

impl Published {
    /// Counts one event of `len` payload bytes.
    pub(crate) fn count(&self, target: TargetKind, len: usize) {
        self.events[target as usize].fetch_add(1, Ordering::Relaxed);
        self.bytes[target as usize].fetch_add(len as u64, Ordering::Relaxed);
    }

    pub(crate) fn add_to(&self, events: &mut [u64; 3], bytes: &mut [u64; 3]) {
        for i in 0..3 {
            events[i] += self.events[i].load(Ordering::Relaxed);
            bytes[i] += self.bytes[i].load(Ordering::Relaxed);
        }
    }
}

/// What the sessions that ended had counted.
#[derive(Debug, Default)]
pub(crate) struct Departed {
    pub(crate) published: Published,
    pub(crate) evicted: AtomicU64,
    pub(crate) evicted_bytes: AtomicU64,
}

/// The counters and gauges counted as things happen.
#[derive(Debug)]
pub(crate) struct Metrics {
    pub(crate) sessions_created: Counter,
    pub(crate) sessions_deleted: Counter,
    pub(crate) sessions_expired: Counter,
    pub(crate) sessions_refused: Family<Reason, Counter>,
    /// Requests of MCP 2026-07-28 that passed the revision's checks.
    pub(crate) sessionless_requests: Counter,
    /// Tasks created on this node (tasks extension).
    pub(crate) tasks_created: Counter,
    /// Tasks this node refused to create, by why (`full`, `unavailable`).
    pub(crate) tasks_refused: Family<TaskLabel, Counter>,
    /// Terminal statuses this node recorded, by status.
    pub(crate) tasks_ended: Family<TaskLabel, Counter>,
    pub(crate) refusals: Family<Kind, Counter>,
    pub(crate) resumes: Family<Outcome, Counter>,
    pub(crate) migrations: Family<Outcome, Counter>,
    pub(crate) redeems: Family<Outcome, Counter>,
    pub(crate) sse_open: Gauge,
    pub(crate) sockets_open: Gauge,
    pub(crate) socket_closes: Family<Code, Counter>,
    /// Paced publishes that waited for a lagging reader, and how long.
    pub(crate) paced_waits: Histogram,
    /// Events each granted resume or migration replayed, by how.
    pub(crate) replayed: Family<Via, Histogram, fn() -> Histogram>,
    pub(crate) departed: Departed,
    /// The newest refusals, for the status page (at most [`RECENT`]).
    pub(crate) recent: std::sync::Mutex<std::collections::VecDeque<serde_json::Value>>,
    /// Every refusal counted.
    pub(crate) refused: AtomicU64,
    /// (when, events published, refusals) every [`SAMPLE_EVERY`] or
    /// more, while the page or the metrics are read (at most [`SAMPLES`]).
    pub(crate) samples: std::sync::Mutex<std::collections::VecDeque<(std::time::Instant, u64, u64)>>,
}

/// The close codes the server sends (`http/socket.rs`, `docs/SPEC.md` §5),
/// and 1005 for a peer that closed or left first.
const CLOSE_CODES: [u16; 6] = [1000, 1001, 1005, 1008, 4400, 4409];

/// Refusals the status page lists.
const RECENT: usize = 50;
/// The shortest time between two samples of the rates.
const SAMPLE_EVERY: std::time::Duration = std::time::Duration::from_secs(2);
/// Samples kept: 10 minutes at the shortest spacing.
const SAMPLES: usize = 300;

impl Metrics {
    pub(crate) fn new() -> Self {
        let m = Metrics {
            sessions_created: Counter::default(),
            sessions_deleted: Counter::default(),
            sessions_expired: Counter::default(),
            sessions_refused: Family::default(),
            sessionless_requests: Counter::default(),
            tasks_created: Counter::default(),
            tasks_refused: Family::default(),
            tasks_ended: Family::default(),
            refusals: Family::default(),
            resumes: Family::default(),
            migrations: Family::default(),
            redeems: Family::default(),
            sse_open: Gauge::default(),
            sockets_open: Gauge::default(),
            socket_closes: Family::default(),
            paced_waits: Histogram::new(prometheus_client::metrics::histogram::exponential_buckets(
                0.001, 4.0, 8,
            )),
            replayed: Family::new_with_constructor(replay_histogram),
            departed: Departed::default(),
            recent: Default::default(),
            refused: AtomicU64::new(0),
            samples: Default::default(),
        };
        // Every label value there can be, at 0, so that a scrape lists each
        // series before its first event (a dashboard shows 0, not "no data").
        for k in gapless::ErrorKind::ALL {
            drop(m.refusals.get_or_create(&Kind { kind: k.as_str() }));
        }
        for outcome in std::iter::once("ok").chain(gapless::ErrorKind::ALL.iter().map(|k| k.as_str())) {
            drop(m.resumes.get_or_create(&Outcome { outcome }));
            drop(m.migrations.get_or_create(&Outcome { outcome }));
            drop(m.redeems.get_or_create(&Outcome { outcome }));
        }
        for k in NO_ROOM {
            drop(m.sessions_refused.get_or_create(&Reason { reason: k.as_str() }));
        }
        for code in CLOSE_CODES {
            drop(m.socket_closes.get_or_create(&Code { code }));
        }
        for via in ["resume", "socket"] {
            drop(m.replayed.get_or_create(&Via { via }));
        }
        for status in ["completed", "failed", "cancelled"] {
            drop(m.tasks_ended.get_or_create(&TaskLabel { status }));
        }
        for status in ["full", "unavailable"] {
            drop(m.tasks_refused.get_or_create(&TaskLabel { status }));
        }
        m
    }

    /// Counts a terminal status this node recorded.
    pub(crate) fn task_ended(&self, status: &'static str) {
        self.tasks_ended.get_or_create(&TaskLabel { status }).inc();
    }

    /// Counts a task this node did not create (`full` or `unavailable`).
    pub(crate) fn task_refused(&self, why: &'static str) {
        self.tasks_refused.get_or_create(&TaskLabel { status: why }).inc();
    }

    /// Counts and keeps a refusal (`session`: the tag of the session the
    /// request named).
    pub(crate) fn refusal(&self, e: &ApiError, session: Option<SessionTag>) {
        self.refusals.get_or_create(&Kind { kind: e.kind.as_str() }).inc();
        self.refused.fetch_add(1, Ordering::Relaxed);
        let at =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis());
        let entry = serde_json::json!({
            "at_ms": at as u64,
            "kind": e.kind.as_str(),
            "status": e.kind.http_status(),
            "numbers": serde_json::Value::Object(e.extra.clone()),
            "reason": e.message,
            "session": session.map(|t| t.to_string()),
        });
        let mut recent = lock(&self.recent);
        if recent.len() == RECENT {
            recent.pop_front();
        }
        recent.push_back(entry);
    }

    /// Records a sample of the totals if the last one is old enough, and
    /// returns the rates between consecutive samples: (seconds before now,
    /// events/s, refusals/s), oldest first.
    pub(crate) fn rates(&self, events: u64) -> Vec<(f64, f64, f64)> {
        let now = std::time::Instant::now();
        let refused = self.refused.load(Ordering::Relaxed);
        let mut samples = lock(&self.samples);
        if samples.back().is_none_or(|&(t, _, _)| now.duration_since(t) >= SAMPLE_EVERY) {
            if samples.len() == SAMPLES {
                samples.pop_front();
            }
            samples.push_back((now, events, refused));
        }
        let v: Vec<_> = samples.iter().copied().collect();
        v.windows(2)
            .map(|w| {
                let ((t0, e0, r0), (t1, e1, r1)) = (w[0], w[1]);
                let dt = t1.duration_since(t0).as_secs_f64().max(1e-3);
                (
                    now.duration_since(t1).as_secs_f64(),
                    e1.saturating_sub(e0) as f64 / dt,
                    r1.saturating_sub(r0) as f64 / dt,
                )
            })
            .collect()
    }

    /// Adds what an ending session counted to the totals (`evicted`: its
    /// ring's evicted events and payload bytes).
    pub(crate) fn departed(&self, published: &Published, (evicted, evicted_bytes): (u64, u64)) {
        for i in 0..3 {
            let d = &self.departed.published;
            d.events[i].fetch_add(published.events[i].load(Ordering::Relaxed), Ordering::Relaxed);
            d.bytes[i].fetch_add(published.bytes[i].load(Ordering::Relaxed), Ordering::Relaxed);
        }
        self.departed.evicted.fetch_add(evicted, Ordering::Relaxed);
        self.departed.evicted_bytes.fetch_add(evicted_bytes, Ordering::Relaxed);
    }

    /// Counts a socket closed with `code` (`None`: the peer left first).
    pub(crate) fn socket_closed(&self, code: Option<u16>) {
        self.socket_closes.get_or_create(&Code { code: code.unwrap_or(1005) }).inc();
    }
}

/// Kinds an `initialize` is refused with for lack of room.
pub(crate) const NO_ROOM: [gapless::ErrorKind; 5] = [
    gapless::ErrorKind::TooManySessions,
    gapless::ErrorKind::MemoryExhausted,
    gapless::ErrorKind::RateLimited,
    gapless::ErrorKind::ClientSessionLimit,
    gapless::ErrorKind::StoreUnavailable,
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_counts_add_up_by_target() {
        let p = Published::default();
        p.count(TargetKind::Request, 10);
        p.count(TargetKind::Request, 5);
        p.count(TargetKind::Socket, 7);
        let (mut e, mut b) = ([0; 3], [0; 3]);
        p.add_to(&mut e, &mut b);
        assert_eq!((e, b), ([2, 0, 1], [15, 0, 7]));
    }
}
