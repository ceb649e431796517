//! `subscribe`: async fan-out from one publisher to 1 and 16 subscriber
//! tasks on a 2-worker tokio runtime, gapless (`Session::publish`, whole
//! session subscriptions) against `tokio::sync::broadcast` (`send`,
//! `Receiver::recv`; same capacity, 4 096, and no idle receiver: the peer's
//! own best configuration).
//!
//! * `gapless`: `Subscription::recv_batch`: each wake-up takes every
//!   available event of the current chunk, borrowed from the chunk the
//!   subscription already pins; the subscriber holds each event (`EventRef`,
//!   seq, stream, payload) while it handles it, with no reference count
//!   touched per event.
//! * `gapless_owned`: `Subscription::recv`, one owned `Event` per delivery
//!   (one payload reference-count increment and decrement per subscriber),
//!   the same API shape as broadcast's.
//! * `tokio_broadcast`: `Receiver::recv` returns an owned clone per
//!   subscriber; broadcast has no borrowing receive.
//!
//! The harness does the same per event for every contender: timestamp (in
//! latency runs), hand the event to `black_box`, count it.
//!
//! * `subscribe` (criterion): throughput. The publisher runs flat out, at
//!   most 1 024 events ahead of the slowest subscriber (so neither contender
//!   ever lags); one element is one event delivered to every subscriber.
//! * `subscribe_latency` (not criterion: it needs percentiles): publish →
//!   subscriber woken and holding the event. The publisher publishes one
//!   event, waits until every subscriber has it, sleeps ~50 µs so that the
//!   workers go idle, and repeats. The contenders take turns every 100
//!   events (all set up at once, order rotating), so that the machine's
//!   drift during the run falls on all of them alike. Each (event, subscriber) pair is one
//!   sample; p50/p90/p99/max go to `target/gapless-bench/subscribe_latency.json`.

use bytes::Bytes;
use criterion::{BenchmarkId, Criterion, Throughput};
use gapless::{Event, Hub, HubConfig, Seq, Session, StreamId};
use gapless_benches::harness::{payload, quantile, results_dir, CachePadded};
use std::hint::black_box;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::thread::Thread;
use std::time::{Duration, Instant};
use tokio::runtime::Runtime;
use tokio::sync::broadcast::{self, error::RecvError};
use tokio::task::JoinHandle;

const CAPACITY: usize = 4096;
const WINDOW: u64 = 1024;
const SUBSCRIBERS: [usize; 2] = [1, 16];
const WORKERS: usize = 2;
const LATENCY_WARMUP: usize = 200;
const LATENCY_EVENTS: usize = 2_000;
/// Events per turn of one contender in the interleaved latency run.
const LATENCY_SLICE: usize = 100;

/// Progress the subscribers report to the publisher.
struct Tally {
    /// Events each subscriber has taken.
    taken: Vec<CachePadded<AtomicU64>>,
    /// Events taken by all subscribers together.
    all: AtomicU64,
    /// Unparked each time `all` reaches a multiple of the subscriber count
    /// (latency runs only).
    publisher: Option<Thread>,
    base: Instant,
}

impl Tally {
    fn new(subscribers: usize, publisher: Option<Thread>) -> Arc<Self> {
        Arc::new(Tally {
            taken: (0..subscribers).map(|_| CachePadded(AtomicU64::new(0))).collect(),
            all: AtomicU64::new(0),
            publisher,
            base: Instant::now(),
        })
    }

    fn now(&self) -> u64 {
        self.base.elapsed().as_nanos() as u64
    }

    fn took(&self, i: usize, n: u64) {
        self.taken[i].store(n, Ordering::Release);
        if let Some(t) = &self.publisher {
            if (self.all.fetch_add(1, Ordering::AcqRel) + 1).is_multiple_of(self.taken.len() as u64) {
                t.unpark();
            }
        }
    }

    /// Waits (yielding) until every subscriber has taken `n` events.
    fn wait_all(&self, n: u64) -> u64 {
        loop {
            let slowest = self.taken.iter().map(|t| t.load(Ordering::Acquire)).min().unwrap_or(n);
            if slowest >= n {
                return slowest;
            }
            std::thread::yield_now();
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Kind {
    Gapless,
    GaplessOwned,
    Broadcast,
}

const KINDS: [Kind; 3] = [Kind::Gapless, Kind::GaplessOwned, Kind::Broadcast];

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Gapless => "gapless",
            Kind::GaplessOwned => "gapless_owned",
            Kind::Broadcast => "tokio_broadcast",
        }
    }
}

/// One contender's publishing side.
enum Publisher {
    Gapless { hub: Hub, session: Arc<Session> },
    Broadcast { tx: Option<broadcast::Sender<Event>>, seq: u64 },
}

impl Publisher {
    fn new(kind: Kind) -> Self {
        match kind {
            Kind::Gapless | Kind::GaplessOwned => {
                let mut config = HubConfig::default();
                config.ring.capacity = CAPACITY;
                let hub = Hub::new(config).unwrap();
                let session = hub.create(None).unwrap();
                Publisher::Gapless { hub, session }
            }
            Kind::Broadcast => Publisher::Broadcast { tx: Some(broadcast::channel(CAPACITY).0), seq: 0 },
        }
    }

    /// A subscriber task; it returns when the publisher closes, with the
    /// time it took each event (if `stamp`).
    fn subscribe(
        &self,
        kind: Kind,
        rt: &Runtime,
        tally: &Arc<Tally>,
        i: usize,
        stamp: bool,
    ) -> JoinHandle<Vec<u64>> {
        let tally = Arc::clone(tally);
        match self {
            Publisher::Gapless { session, .. } if kind == Kind::Gapless => {
                let mut sub =
                    gapless::Subscription::after(session.reader(), session.reader().head()).unwrap();
                rt.spawn(async move {
                    let (mut stamps, mut n) = (Vec::new(), 0);
                    while let Some(r) = sub.recv_batch().await {
                        let batch = r.expect("never lags: the publisher keeps within a window");
                        for e in batch {
                            if stamp {
                                stamps.push(tally.now());
                            }
                            black_box(e);
                            n += 1;
                            tally.took(i, n);
                        }
                    }
                    stamps
                })
            }
            Publisher::Gapless { session, .. } => {
                let mut sub =
                    gapless::Subscription::after(session.reader(), session.reader().head()).unwrap();
                rt.spawn(async move {
                    let (mut stamps, mut n) = (Vec::new(), 0);
                    while let Some(r) = sub.recv().await {
                        let e = r.expect("never lags: the publisher keeps within a window");
                        if stamp {
                            stamps.push(tally.now());
                        }
                        drop(black_box(e));
                        n += 1;
                        tally.took(i, n);
                    }
                    stamps
                })
            }
            Publisher::Broadcast { tx, .. } => {
                let mut rx = tx.as_ref().expect("open").subscribe();
                rt.spawn(async move {
                    let (mut stamps, mut n) = (Vec::new(), 0);
                    loop {
                        match rx.recv().await {
                            Ok(e) => {
                                if stamp {
                                    stamps.push(tally.now());
                                }
                                drop(black_box(e));
                                n += 1;
                                tally.took(i, n);
                            }
                            Err(RecvError::Closed) => break,
                            Err(RecvError::Lagged(k)) => panic!("lagged by {k}"),
                        }
                    }
                    stamps
                })
            }
        }
    }

    #[inline]
    fn publish(&mut self, p: &Bytes) {
        match self {
            Publisher::Gapless { session, .. } => {
                session.publish(session.standalone(), p.clone()).unwrap();
            }
            Publisher::Broadcast { tx, seq } => {
                *seq += 1;
                let e =
                    Event { seq: Seq(*seq), stream: StreamId(1), index_in_stream: *seq, payload: p.clone() };
                tx.as_ref().expect("open").send(e).unwrap();
            }
        }
    }

    /// Ends every subscription.
    fn close(&mut self) {
        match self {
            Publisher::Gapless { hub, session } => {
                hub.remove(&session.id());
            }
            Publisher::Broadcast { tx, .. } => drop(tx.take()),
        }
    }
}

fn runtime() -> Runtime {
    tokio::runtime::Builder::new_multi_thread().worker_threads(WORKERS).build().unwrap()
}

fn throughput(c: &mut Criterion) {
    let p = payload();
    let mut g = c.benchmark_group("subscribe");
    g.throughput(Throughput::Elements(1));
    for n in SUBSCRIBERS {
        for kind in KINDS {
            let rt = runtime();
            let tally = Tally::new(n, None);
            let mut publisher = Publisher::new(kind);
            let tasks: Vec<_> = (0..n).map(|i| publisher.subscribe(kind, &rt, &tally, i, false)).collect();
            let mut published = 0u64;
            let mut slowest = 0u64;
            g.bench_function(BenchmarkId::new(kind.name(), n), |b| {
                b.iter_custom(|iters| {
                    let start = Instant::now();
                    for _ in 0..iters {
                        if published >= slowest + WINDOW {
                            slowest = tally.wait_all(published + 1 - WINDOW);
                        }
                        publisher.publish(&p);
                        published += 1;
                    }
                    slowest = tally.wait_all(published);
                    start.elapsed()
                })
            });
            publisher.close();
            for t in tasks {
                rt.block_on(t).unwrap();
            }
        }
    }
    g.finish();
}

/// Latency percentiles of one contender with `n` subscribers, in ns.
struct Latency {
    kind: Kind,
    subscribers: usize,
    sorted: Vec<u64>,
}

/// Latency percentiles of every contender with `n` subscribers, measured
/// interleaved: all contenders are set up at once (their idle runtimes
/// park), and they take turns in slices of `LATENCY_SLICE` events, the
/// order rotating, so that the machine's drift over the run is shared.
fn latency(n: usize) -> Vec<Latency> {
    struct Run {
        kind: Kind,
        rt: Runtime,
        tally: Arc<Tally>,
        publisher: Publisher,
        tasks: Vec<JoinHandle<Vec<u64>>>,
        sent: Vec<u64>,
    }
    let p = payload();
    let total = LATENCY_WARMUP + LATENCY_EVENTS;
    let mut runs: Vec<Run> = KINDS
        .iter()
        .map(|&kind| {
            let rt = runtime();
            let tally = Tally::new(n, Some(std::thread::current()));
            let publisher = Publisher::new(kind);
            let tasks = (0..n).map(|i| publisher.subscribe(kind, &rt, &tally, i, true)).collect();
            Run { kind, rt, tally, publisher, tasks, sent: Vec::with_capacity(total) }
        })
        .collect();
    for round in 0..total.div_ceil(LATENCY_SLICE) {
        for i in 0..runs.len() {
            let run = &mut runs[(i + round) % KINDS.len()];
            for _ in 0..LATENCY_SLICE {
                if run.sent.len() == total {
                    break;
                }
                std::thread::sleep(Duration::from_micros(50));
                run.sent.push(run.tally.now());
                run.publisher.publish(&p);
                let k = run.sent.len() as u64;
                while run.tally.all.load(Ordering::Acquire) < k * n as u64 {
                    std::thread::park_timeout(Duration::from_millis(2));
                }
            }
        }
    }
    runs.into_iter()
        .map(|mut run| {
            run.publisher.close();
            let mut sorted = Vec::with_capacity(n * LATENCY_EVENTS);
            for t in run.tasks {
                let stamps = run.rt.block_on(t).unwrap();
                assert_eq!(stamps.len(), total);
                sorted.extend((LATENCY_WARMUP..total).map(|k| stamps[k] - run.sent[k]));
            }
            sorted.sort_unstable();
            Latency { kind: run.kind, subscribers: n, sorted }
        })
        .collect()
}

fn latencies() {
    let mut rows = Vec::new();
    for n in SUBSCRIBERS {
        for l in latency(n) {
            let q = |x| quantile(&l.sorted, x);
            let mean = l.sorted.iter().sum::<u64>() / l.sorted.len() as u64;
            println!(
                "subscribe_latency/{}/{}: p50 {} ns, p90 {} ns, p99 {} ns, max {} ns, mean {} ns ({} samples)",
                l.kind.name(),
                l.subscribers,
                q(0.5),
                q(0.9),
                q(0.99),
                q(1.0),
                mean,
                l.sorted.len()
            );
            rows.push(format!(
                "  {{\"contender\": \"{}\", \"subscribers\": {}, \"samples\": {}, \"p50_ns\": {}, \"p90_ns\": {}, \
                 \"p99_ns\": {}, \"max_ns\": {}, \"mean_ns\": {}}}",
                l.kind.name(),
                l.subscribers,
                l.sorted.len(),
                q(0.5),
                q(0.9),
                q(0.99),
                q(1.0),
                mean
            ));
        }
    }
    let path = results_dir().join("subscribe_latency.json");
    std::fs::write(&path, format!("[\n{}\n]\n", rows.join(",\n"))).expect("write latency results");
    println!("subscribe_latency: wrote {}", path.display());
}

/// Whether the command line leaves the latency run in: not when listing,
/// testing or profiling, nor when a name filter excludes it.
fn latency_selected() -> bool {
    const VALUED: [&str; 14] = [
        "--save-baseline",
        "-s",
        "--baseline",
        "-b",
        "--baseline-lenient",
        "--load-baseline",
        "--profile-time",
        "--sample-size",
        "--warm-up-time",
        "--measurement-time",
        "--nresamples",
        "--noise-threshold",
        "--color",
        "--output-format",
    ];
    let args: Vec<String> = std::env::args().skip(1).collect();
    if args.iter().any(|a| a == "--list" || a == "--test" || a == "--profile-time") {
        return false;
    }
    let mut filter = None;
    for (i, a) in args.iter().enumerate() {
        let valued = i > 0 && VALUED.contains(&args[i - 1].as_str());
        if !a.starts_with('-') && !valued {
            filter = Some(a.as_str());
        }
    }
    filter.is_none_or(|f| "subscribe_latency".contains(f))
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(3))
        .sample_size(20)
}

fn main() {
    let mut c = config().configure_from_args();
    throughput(&mut c);
    c.final_summary();
    if latency_selected() {
        latencies();
    }
}
