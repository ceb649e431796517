//! The two ratio targets that compare single-threaded hot paths, measured
//! interleaved: on a shared VM the machine's speed drifts by 10–30% over
//! the minute that criterion spends between one contender and the next, so
//! a ratio of two criterion medians mixes the code with the drift. Here the
//! contenders take turns in short slices (each a few milliseconds, the
//! order rotating every round), and each round yields one ratio of
//! neighbours measured a few milliseconds apart. Reported: the median of
//! those per-round ratios and their spread, each contender's median, the
//! load before and after, the CPU the rest of the machine used during the
//! run, and each ratio against its goal: "met" or "missed" only when the
//! load was at most 0.5 before and the rest of the machine used at most 0.5
//! cores, else "not judged".
//!
//! * `publish_0_readers`: gapless `Producer::publish`, `Session::publish`
//!   (the server's path: the session's writer lock around the producer),
//!   the speed-of-light floor and `tokio::sync::broadcast` (one idle
//!   receiver), as in the criterion `publish` group: same capacity, same
//!   shared payload.
//! * `publish_1_sleeping`: `Producer::publish` and `broadcast::send` while
//!   one subscriber sleeps: at the start of each slice a fresh subscriber
//!   (a `Subscription` at the head; a broadcast `Receiver`'s `recv()`) is
//!   polled once with a no-op waker and returns `Pending`, registering its
//!   waker; the slice's first publish wakes it, the rest find it woken and
//!   not yet back (it is never polled again). What every publish pays on a
//!   session whose client's stream is open but has nothing to read.
//! * `coverage_publishing`: the session-level coverage check while another
//!   thread publishes flat out on the same session, against one atomic load
//!   of a counter another thread increments flat out, as in the criterion
//!   `coverage` group. Each slice starts its own writer and stops it after.
//!
//! Usage: `cargo run --release -p gapless-benches --bin interleaved [-- ROUNDS]`
//! (default 201 rounds); writes `<target>/gapless-bench/interleaved.json`.
//!
//! `interleaved --instructions CONTENDER N` (`gapless`, `session`, `floor`,
//! `broadcast`, `gapless_sleeping`, `broadcast_sleeping`, or `resume_S_G`: a
//! per-stream resume of G events among S interleaved streams) only runs N
//! operations of one contender, for callgrind:
//! `(Ir(2N) - Ir(N)) / N` is its instruction count per operation, which
//! repeats exactly whatever else the machine does.

use gapless::ring::DEFAULT_BYTE_BUDGET;
use gapless::{ring, Event, Hub, HubConfig, RingConfig, Seq, Session, StreamId};
use gapless_benches::harness::{
    digest, load_1m, payload, pin_to, results_dir, Background, CachePadded, Foreign,
};
use gapless_benches::SpeedOfLight;
use std::future::Future;
use std::hint::black_box;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};
use std::time::Instant;

const CAPACITY: usize = 4096;
/// Publishes per slice (about 5–10 ms).
const PUBLISHES: u64 = 200_000;
/// Coverage checks per slice (about 10–50 ms).
const CHECKS: u64 = 10_000_000;
/// Writer iterations between looks at the stop flag.
const BATCH: usize = 1024;

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).expect("no NaN"));
    v[v.len() / 2]
}

/// Waits until a writer says it runs (pinned, first batch done), so that
/// a timed slice never starts before its writer.
fn wait_for(go: &AtomicBool) {
    while !go.load(Ordering::Acquire) {
        std::thread::yield_now();
    }
}

/// Nanoseconds per operation of `n` calls of `f`.
fn time(n: u64, mut f: impl FnMut()) -> f64 {
    let start = Instant::now();
    for _ in 0..n {
        f();
    }
    start.elapsed().as_nanos() as f64 / n as f64
}

/// A contender: its name and one timed slice (ns per operation).
type Slice<'a> = (&'static str, Box<dyn FnMut() -> f64 + 'a>);

struct Series {
    name: &'static str,
    ns: Vec<f64>,
}

/// Runs `rounds` rounds of the contenders' slices, rotating their order.
fn rounds(rounds: usize, slices: &mut [Slice<'_>]) -> Vec<Series> {
    let mut out: Vec<Series> = slices.iter().map(|(n, _)| Series { name: n, ns: Vec::new() }).collect();
    let k = slices.len();
    // Warm-up round, not recorded.
    for (_, f) in slices.iter_mut() {
        f();
    }
    for r in 0..rounds {
        for i in 0..k {
            let j = (i + r) % k;
            let v = (slices[j].1)();
            out[j].ns.push(v);
        }
    }
    out
}

/// A ratio's goal.
#[derive(Clone, Copy, Debug)]
enum Goal {
    AtMost(f64),
    AtLeast(f64),
}

impl Goal {
    fn met(self, r: f64) -> bool {
        match self {
            Goal::AtMost(g) => r <= g,
            Goal::AtLeast(g) => r >= g,
        }
    }
}

impl std::fmt::Display for Goal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Goal::AtMost(g) => write!(f, "<= {g}"),
            Goal::AtLeast(g) => write!(f, ">= {g}"),
        }
    }
}

/// `{"a_over_b": median, "p10": .., "p90": ..}` of per-round ratios a/b.
fn ratio_json(a: &Series, b: &Series) -> (f64, String) {
    let mut r: Vec<f64> = a.ns.iter().zip(&b.ns).map(|(x, y)| x / y).collect();
    let m = median(&mut r);
    let q = |p: f64| r[((r.len() - 1) as f64 * p).round() as usize];
    (
        m,
        format!(
            "{{\"num\": \"{}\", \"den\": \"{}\", \"median\": {:.4}, \"p10\": {:.4}, \"p90\": {:.4}}}",
            a.name,
            b.name,
            m,
            q(0.1),
            q(0.9)
        ),
    )
}

fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("--instructions") {
        let n = args.get(3).and_then(|a| a.parse().ok()).expect("--instructions CONTENDER N");
        return instructions(&args[2], n);
    }
    let n_rounds: usize = std::env::args().nth(1).map_or(201, |a| a.parse().expect("ROUNDS is a number"));
    let load_before = load_1m();
    let foreign = Foreign::start(&[]);
    pin_to(0);
    let p = payload();

    // ---- publish, 0 readers
    let (mut producer, _reader) = ring(RingConfig::new(CAPACITY, DEFAULT_BYTE_BUDGET)).unwrap();
    let stream = producer.open_stream();
    let mut sol = SpeedOfLight::new(CAPACITY);
    let (tx, _idle) = tokio::sync::broadcast::channel::<Event>(CAPACITY);
    let mut seq = 0u64;
    let (p1, p2, p3, p5, p6) = (p.clone(), p.clone(), p.clone(), p.clone(), p.clone());
    // The server's path: the session's writer lock around its producer.
    let hub = Hub::new(HubConfig::default()).unwrap();
    let server_session = hub.create(None).unwrap();
    let server_stream = server_session.open_stream().unwrap();
    // The same, one lease per round (`Session::lease`): the lock taken once.
    let lease_session = hub.create(None).unwrap();
    let lease_stream = lease_session.open_stream().unwrap();
    let mut slices: Vec<Slice<'_>> = vec![
        (
            "gapless",
            Box::new(|| {
                time(PUBLISHES, || {
                    black_box(producer.publish(&stream, p1.clone()).unwrap());
                })
            }),
        ),
        (
            "session",
            Box::new(|| {
                time(PUBLISHES, || {
                    black_box(server_session.publish(&server_stream, p5.clone()).unwrap());
                })
            }),
        ),
        (
            "speed_of_light",
            Box::new(|| {
                time(PUBLISHES, || {
                    black_box(sol.publish(StreamId(1), p2.clone()));
                })
            }),
        ),
        (
            "tokio_broadcast",
            Box::new(|| {
                time(PUBLISHES, || {
                    seq += 1;
                    black_box(tx.send(broadcast_event(seq, &p3)).unwrap());
                })
            }),
        ),
        (
            "session_lease",
            Box::new(|| {
                let mut lease = lease_session.lease().unwrap();
                time(PUBLISHES, || {
                    black_box(lease.publish(&lease_stream, p6.clone()).unwrap());
                })
            }),
        ),
    ];
    let publish = rounds(n_rounds, &mut slices);
    drop(slices);
    drop(hub);

    // ---- publish, 1 sleeping subscriber
    let (mut producer, reader) = ring(RingConfig::new(CAPACITY, DEFAULT_BYTE_BUDGET)).unwrap();
    let stream = producer.open_stream();
    let (tx, _idle) = tokio::sync::broadcast::channel::<Event>(CAPACITY);
    let mut seq = 0u64;
    let (p1, p3) = (p.clone(), p.clone());
    let mut slices: Vec<Slice<'_>> = vec![
        (
            "gapless",
            Box::new(|| {
                let mut sleeper = gapless::Subscription::after(&reader, producer.head()).unwrap();
                sleep_gapless(&mut sleeper);
                time(PUBLISHES, || {
                    black_box(producer.publish(&stream, p1.clone()).unwrap());
                })
            }),
        ),
        (
            "tokio_broadcast",
            Box::new(|| {
                let mut rx = tx.subscribe();
                let mut recv = Box::pin(rx.recv());
                sleep_broadcast(recv.as_mut());
                time(PUBLISHES, || {
                    seq += 1;
                    black_box(tx.send(broadcast_event(seq, &p3)).unwrap());
                })
            }),
        ),
    ];
    let sleeping = rounds(n_rounds, &mut slices);
    drop(slices);

    // ---- coverage under concurrent publish
    let counter = Arc::new(CachePadded(AtomicU64::new(0)));
    let hub = Hub::new(HubConfig::default()).unwrap();
    let session = hub.create(None).unwrap();
    for _ in 0..2 * hub.config().ring.capacity {
        session.publish(session.standalone(), p.clone()).unwrap();
    }
    let cursor = Seq(1);
    let (c2, s2, p4) = (Arc::clone(&counter), Arc::clone(&session), p.clone());
    let mut slices: Vec<Slice<'_>> = vec![
        (
            "atomic_load",
            Box::new(move || {
                let mut bg = Background::new();
                let (c, go) = (Arc::clone(&c2), Arc::new(AtomicBool::new(false)));
                let started = Arc::clone(&go);
                bg.spawn(move |stop| {
                    pin_to(1);
                    while !Background::stopping(stop) {
                        for _ in 0..BATCH {
                            c.fetch_add(1, Ordering::Release);
                        }
                        started.store(true, Ordering::Release);
                    }
                });
                wait_for(&go);
                let c: &AtomicU64 = &c2;
                time(CHECKS, || {
                    black_box(black_box(c).load(Ordering::Acquire));
                })
            }),
        ),
        (
            "gapless",
            Box::new(move || {
                let mut bg = Background::new();
                let (s, p, go) = (Arc::clone(&s2), p4.clone(), Arc::new(AtomicBool::new(false)));
                let started = Arc::clone(&go);
                bg.spawn(move |stop| {
                    pin_to(1);
                    while !Background::stopping(stop) {
                        for _ in 0..BATCH {
                            s.publish(s.standalone(), p.clone()).unwrap();
                        }
                        started.store(true, Ordering::Release);
                    }
                });
                wait_for(&go);
                let s: &Session = &s2;
                time(CHECKS, || {
                    black_box(digest(black_box(s).reader().coverage(cursor)));
                })
            }),
        ),
    ];
    let coverage = rounds(n_rounds, &mut slices);
    drop(slices);

    let (foreign, load_after) = (foreign.cores(), load_1m());
    // A time ratio is a verdict only from a quiet machine: a 1-minute load
    // at most 0.5 before the run, and the rest of the machine using at most
    // 0.5 cores during it (the bench's own threads raise the load average
    // itself, so that cannot say).
    let judged = load_before <= 0.5 && foreign <= 0.5;
    let mut ratios_seen = Vec::new();
    let mut lines = Vec::new();
    let mut json = Vec::new();
    for (group, series, pairs) in [
        (
            "publish_0_readers",
            &publish,
            vec![
                (0usize, 2usize, Goal::AtMost(1.3)),
                (3, 0, Goal::AtLeast(2.0)),
                (3, 1, Goal::AtLeast(1.5)),
                (3, 4, Goal::AtLeast(2.0)),
            ],
        ),
        ("publish_1_sleeping", &sleeping, vec![(1, 0, Goal::AtLeast(2.0))]),
        ("coverage_publishing", &coverage, vec![(1, 0, Goal::AtMost(1.5))]),
    ] {
        let mut medians = Vec::new();
        for s in series.iter() {
            let m = median(&mut s.ns.clone());
            lines.push(format!("{group}/{}: median {m:.2} ns ({} rounds)", s.name, s.ns.len()));
            medians.push(format!("\"{}\": {m:.4}", s.name));
        }
        let mut ratios = Vec::new();
        for (a, b, goal) in pairs {
            let (m, j) = ratio_json(&series[a], &series[b]);
            ratios_seen.push((format!("{group}: {} / {}", series[a].name, series[b].name), m, goal));
            ratios.push(j);
        }
        json.push(format!(
            "  \"{group}\": {{\"median_ns\": {{{}}}, \"ratios\": [{}]}}",
            medians.join(", "),
            ratios.join(", ")
        ));
    }
    for l in &lines {
        println!("{l}");
    }
    println!(
        "load: {load_before:.2} before, {load_after:.2} after; the rest of the machine used {foreign:.2} cores during the run"
    );
    for (name, m, goal) in &ratios_seen {
        let verdict = if !judged {
            format!("not judged (load {load_before:.2}, rest of the machine {foreign:.2} cores)")
        } else if goal.met(*m) {
            "met".to_owned()
        } else {
            "missed".to_owned()
        };
        println!("{name} = {m:.3} (median of per-round ratios; goal {goal}): {verdict}");
    }
    let path = results_dir().join("interleaved.json");
    std::fs::create_dir_all(results_dir()).expect("results dir");
    std::fs::write(
        &path,
        format!(
            "{{\n  \"rounds\": {n_rounds},\n  \"load_before\": {load_before:.2},\n  \"load_after\": {load_after:.2},\n  \"foreign_cores\": {foreign:.3},\n  \"judged\": {judged},\n{}\n}}\n",
            json.join(",\n")
        ),
    )
    .expect("write interleaved results");
    println!("interleaved: wrote {}", path.display());
}

/// A waker that does nothing (`Waker::noop` is newer than the MSRV).
fn noop_waker() -> Waker {
    struct Noop;
    impl std::task::Wake for Noop {
        fn wake(self: Arc<Self>) {}
    }
    Waker::from(Arc::new(Noop))
}

/// The event a broadcast contender sends as its `seq`-th (what gapless
/// stores per event: seq, stream, position, payload).
#[inline(always)]
fn broadcast_event(seq: u64, payload: &bytes::Bytes) -> Event {
    Event { seq: Seq(seq), stream: StreamId(1), index_in_stream: seq, payload: payload.clone() }
}

/// Polls a subscription at the head once with a no-op waker: it registers
/// the waker and sleeps (`Pending`).
fn sleep_gapless(sub: &mut gapless::Subscription) {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(sub.poll_recv(&mut cx).is_pending(), "nothing to read at the head");
}

/// Polls a broadcast `recv()` once with a no-op waker: it registers the
/// waker and sleeps (`Pending`).
fn sleep_broadcast<F: Future>(recv: std::pin::Pin<&mut F>) {
    let waker = noop_waker();
    let mut cx = Context::from_waker(&waker);
    assert!(matches!(recv.poll(&mut cx), Poll::Pending), "nothing to receive yet");
}

/// `interleaved --instructions CONTENDER N`: runs N operations of one
/// contender and exits, for `valgrind --tool=callgrind`: the difference of
/// two runs' instruction totals (N and 2N) is N operations exactly, whatever
/// the machine's load.
fn instructions(contender: &str, n: u64) {
    let p = payload();
    match contender {
        "gapless" => {
            let (mut producer, _reader) = ring(RingConfig::new(CAPACITY, DEFAULT_BYTE_BUDGET)).unwrap();
            let stream = producer.open_stream();
            for _ in 0..n {
                black_box(producer.publish(&stream, p.clone()).unwrap());
            }
        }
        "session" => {
            let hub = Hub::new(HubConfig::default()).unwrap();
            let s = hub.create(None).unwrap();
            let stream = s.open_stream().unwrap();
            for _ in 0..n {
                black_box(s.publish(&stream, p.clone()).unwrap());
            }
        }
        "lease" => {
            let hub = Hub::new(HubConfig::default()).unwrap();
            let s = hub.create(None).unwrap();
            let stream = s.open_stream().unwrap();
            let mut lease = s.lease().unwrap();
            for _ in 0..n {
                black_box(lease.publish(&stream, p.clone()).unwrap());
            }
        }
        "floor" => {
            let mut sol = SpeedOfLight::new(CAPACITY);
            for _ in 0..n {
                black_box(sol.publish(StreamId(1), p.clone()));
            }
        }
        "broadcast" => {
            let (tx, _idle) = tokio::sync::broadcast::channel::<Event>(CAPACITY);
            for i in 0..n {
                black_box(tx.send(broadcast_event(i + 1, &p)).unwrap());
            }
        }
        "gapless_sleeping" => {
            let (mut producer, reader) = ring(RingConfig::new(CAPACITY, DEFAULT_BYTE_BUDGET)).unwrap();
            let stream = producer.open_stream();
            let mut sleeper = gapless::Subscription::after(&reader, producer.head()).unwrap();
            sleep_gapless(&mut sleeper);
            for _ in 0..n {
                black_box(producer.publish(&stream, p.clone()).unwrap());
            }
        }
        "broadcast_sleeping" => {
            let (tx, mut rx) = tokio::sync::broadcast::channel::<Event>(CAPACITY);
            let mut recv = Box::pin(rx.recv());
            sleep_broadcast(recv.as_mut());
            for i in 0..n {
                black_box(tx.send(broadcast_event(i + 1, &p)).unwrap());
            }
        }
        other => match resume_shape(other) {
            Some((streams, gap)) => resume_instructions(streams, gap, n),
            None => panic!("unknown contender {other}"),
        },
    }
}

/// `resume_S_G`: a per-stream resume among S interleaved streams, G events
/// behind (the criterion `resume` group's shape, any S and G).
fn resume_shape(name: &str) -> Option<(u64, u64)> {
    let rest = name.strip_prefix("resume_")?;
    let (s, g) = rest.split_once('_')?;
    Some((s.parse().ok()?, g.parse().ok()?))
}

/// N per-stream resumes of one stream among `streams` interleaved ones in a
/// full ring of 4 096, each `gap` events of that stream behind: pin them
/// (`snapshot_stream`) and read each, as the criterion `resume` bench does.
fn resume_instructions(streams: u64, gap: u64, n: u64) {
    let p = payload();
    let hub = Hub::new(HubConfig::default()).unwrap();
    let capacity = hub.config().ring.capacity as u64;
    let session = hub.create(None).unwrap();
    let mut handles = vec![session.standalone().clone()];
    while (handles.len() as u64) < streams {
        handles.push(session.open_stream().unwrap());
    }
    for i in 0..capacity {
        session.publish(&handles[(i % streams) as usize], p.clone()).unwrap();
    }
    let target = &handles[(streams / 2) as usize];
    // The target's events are the seqs congruent to its position; the
    // cursor is its event `gap` before its last.
    let pos = (streams / 2) + 1;
    let last = capacity - streams + pos;
    let cursor = Seq(last - gap * streams);
    let reader = session.reader();
    assert_eq!(reader.snapshot_stream(target.id(), cursor).unwrap().len() as u64, gap);
    for _ in 0..n {
        let snap = reader.snapshot_stream(target.id(), black_box(cursor)).unwrap();
        black_box(snap.iter().fold(0u64, |acc, e| acc ^ e.seq.0 ^ e.stream.0 ^ e.payload.len() as u64));
    }
}
