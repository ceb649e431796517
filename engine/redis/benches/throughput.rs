//! The Redis store's speed beside the raw limit of the same `redis-server`
//! (`BENCHMARKS.md`, "The Redis store"). Not a criterion bench: each figure
//! is a long single measurement repeated `ROUNDS` times, and the median is
//! printed, as a Markdown table and as JSON
//! (`target/gapless-bench/redis.json`).
//!
//! `cargo bench -p gapless-redis --bench throughput` (`-- --quick` for a
//! smoke run). It starts its own `redis-server` on a free port.

use bytes::Bytes;
use gapless::ring::RingConfig;
use gapless::session::{Decision, ResumeRequest, Target};
use gapless::{EventId, Seq, SessionId, StreamId};
use gapless_benches::harness::Foreign;
use gapless_redis::testing::RedisServer;
use gapless_redis::{Appender, Notifier, RedisStore, StoreConfig, TailEntry};
use std::collections::VecDeque;
use std::time::{Duration, Instant};

const PAYLOAD: usize = 100;
/// Outstanding pushes per publisher: the publisher does not wait for each
/// event, as a tool emitting a burst does not.
const WINDOW: usize = 4096;

struct Run {
    events: usize,
    rounds: usize,
    samples: usize,
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

fn payload() -> Bytes {
    Bytes::from(vec![b'x'; PAYLOAD])
}

/// A store with a 10 s command timeout: 100 sessions keep about 200
/// batches of 1024 events queued on the one connection, and a batch's
/// answer can wait longer than the default 2 s behind them (the store then
/// reports `Unavailable`, as it should; a throughput bench needs the
/// answer).
async fn store(redis: &RedisServer, ring: RingConfig) -> RedisStore {
    let config = StoreConfig { ring, timeout: Duration::from_secs(10), ..StoreConfig::default() };
    RedisStore::connect(&redis.url(), config).await.expect("connects")
}

/// Raw pipelined XADD, entries shaped as the store writes them (explicit
/// ids, the same five fields), 1000 commands per pipeline, one connection.
async fn raw_xadd(redis: &RedisServer, events: usize) -> f64 {
    let client = redis::Client::open(redis.url()).unwrap();
    let mut c = client.get_multiplexed_async_connection().await.unwrap();
    let key = format!("raw:{}", SessionId::random());
    let p = payload();
    let t = Instant::now();
    let mut seq = 0u64;
    while (seq as usize) < events {
        let mut pipe = redis::pipe();
        for _ in 0..1000.min(events - seq as usize) {
            seq += 1;
            pipe.cmd("XADD")
                .arg(&key)
                .arg(format!("{seq}-0"))
                .arg("s")
                .arg(1)
                .arg("i")
                .arg(seq)
                .arg("v")
                .arg(seq - 1)
                .arg("n")
                .arg("0123456789abcdef")
                .arg("p")
                .arg(&p[..])
                .ignore();
        }
        let () = pipe.query_async(&mut c).await.unwrap();
    }
    let rate = events as f64 / t.elapsed().as_secs_f64();
    let _: () = redis::cmd("DEL").arg(&key).query_async(&mut c).await.unwrap();
    rate
}

/// `redis-benchmark` on the same server, pipelined 1000 deep: `XADD` with
/// an automatic id and either one field of the same payload size
/// (`shaped == false`) or the store's five fields.
fn redis_benchmark(redis: &RedisServer, events: usize, shaped: bool) -> Option<f64> {
    let port = redis.url().rsplit(':').next()?.trim_end_matches("/0").to_owned();
    let p = "x".repeat(PAYLOAD);
    let fields: Vec<&str> = if shaped {
        vec!["s", "1", "i", "1", "v", "0", "n", "0123456789abcdef", "p", &p]
    } else {
        vec!["p", &p]
    };
    let out = std::process::Command::new("redis-benchmark")
        .args(["-h", "127.0.0.1", "-p", &port, "-n", &events.to_string(), "-P", "1000", "-c", "1", "--csv"])
        .args(["XADD", if shaped { "rb5" } else { "rb1" }, "*"])
        .args(fields)
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    // "test","rps",...: the second line's second field.
    let line = text.lines().nth(1)?;
    line.split(',').nth(1)?.trim_matches('"').parse().ok()
}

/// Events/s through `sessions` appenders, `events` in all, each publisher
/// keeping up to `WINDOW` pushes outstanding.
async fn appenders(s: &RedisStore, sessions: usize, events: usize) -> f64 {
    let mut ids = Vec::new();
    for _ in 0..sessions {
        let id = SessionId::random();
        s.create(id, None).await.unwrap();
        ids.push(id);
    }
    let t = Instant::now();
    let mut tasks = Vec::new();
    for id in ids.iter().copied() {
        let q = Appender::new(s.clone(), id);
        let n = events / sessions;
        tasks.push(tokio::spawn(async move {
            let p = payload();
            let mut out: VecDeque<_> = VecDeque::with_capacity(WINDOW);
            for _ in 0..n {
                if out.len() == WINDOW {
                    let done: Result<_, gapless_redis::AppendError> = out.pop_front().unwrap().await;
                    done.unwrap();
                }
                out.push_back(q.push(StreamId(1), p.clone()));
            }
            for f in out {
                f.await.unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let rate = (events / sessions * sessions) as f64 / t.elapsed().as_secs_f64();
    for id in &ids {
        s.delete(id, None).await.unwrap();
    }
    rate
}

/// Publish on one node's connection, delivery read on another node's
/// (its notifier woken by the announcement, then a tail read): latency of
/// `samples` events published 1 ms apart, in µs (p50, p99).
async fn cross_node_latency(redis: &RedisServer, samples: usize) -> (f64, f64) {
    let a = store(redis, RingConfig::default()).await;
    let b = store(redis, RingConfig::default()).await;
    let notifier = Notifier::start(&redis.url(), gapless_redis::DEFAULT_PREFIX).unwrap();
    let id = SessionId::random();
    a.create(id, None).await.unwrap();
    let watch = notifier.watch(id);
    tokio::time::sleep(Duration::from_millis(300)).await; // the subscription lands
    let epoch = Instant::now();
    let reader = tokio::spawn(async move {
        let mut at = (0, 0);
        let mut lat = Vec::with_capacity(samples);
        while lat.len() < samples {
            watch.changed().await;
            let t = b.tail(&id, at, 1000, Seq(0)).await.unwrap().unwrap();
            let now = epoch.elapsed().as_nanos() as u64;
            for (pos, e) in t.entries {
                at = pos;
                if let TailEntry::Event(e) = e {
                    let sent = u64::from_le_bytes(e.payload[..8].try_into().unwrap());
                    lat.push((now - sent) as f64 / 1000.0);
                }
            }
        }
        lat
    });
    let q = Appender::new(a.clone(), id);
    let mut tick = tokio::time::interval(Duration::from_millis(1));
    for _ in 0..samples {
        tick.tick().await;
        let mut p = (epoch.elapsed().as_nanos() as u64).to_le_bytes().to_vec();
        p.resize(PAYLOAD, b'x');
        q.push(StreamId(1), Bytes::from(p)).await.unwrap();
    }
    let mut lat = reader.await.unwrap();
    lat.sort_by(f64::total_cmp);
    (lat[lat.len() / 2], lat[lat.len() * 99 / 100])
}

/// A resume of a `gap`-event gap on a node (its own connection) that did
/// not publish: the decision, then the replay read in pages of 1000 (as
/// the server reads it), in ms.
async fn resume_gap(redis: &RedisServer, gap: usize, rounds: usize) -> f64 {
    let ring = RingConfig::new(gap + 16, 64 << 20);
    let a = store(redis, ring).await;
    let id = SessionId::random();
    let sess = a.create(id, None).await.unwrap();
    let q = Appender::new(a.clone(), id);
    let pending: Vec<_> = (0..=gap).map(|_| q.push(StreamId(1), Bytes::from(vec![b'x'; 200]))).collect();
    let mut first = None;
    for p in pending {
        let got = p.await.unwrap();
        first.get_or_insert(got);
    }
    let first = first.unwrap();
    a.mark_delivered(&id, StreamId(1), first.seq, 1, None).await.unwrap();
    let cursor = EventId::new(sess.ns, StreamId(1), first.seq).with_check(first.check).to_string();
    let b = store(redis, ring).await;
    let sid = id.to_string();
    let mut ms = Vec::new();
    for _ in 0..rounds {
        let t = Instant::now();
        let d: Decision<_> =
            b.resume(ResumeRequest::new(&sid).cursor(&cursor), Target::Stream).await.unwrap();
        let events = b.replay(&id, &d.replay, 1000).await.unwrap();
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
        assert_eq!(events.len(), gap, "the whole gap");
    }
    median(ms)
}

fn load() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .unwrap_or_default()
        .split(' ')
        .take(3)
        .collect::<Vec<_>>()
        .join(" ")
}

fn main() {
    let quick = std::env::args().any(|a| a == "--quick");
    // `--profile`: only the one-session figure, long, for `perf record`.
    if std::env::args().any(|a| a == "--profile") {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
        let redis = RedisServer::start(&[]);
        rt.block_on(async {
            let s = store(&redis, RingConfig::default()).await;
            println!("one session, trimmed: {:.0} events/s", appenders(&s, 1, 2_000_000).await);
        });
        return;
    }
    let run = if quick {
        Run { events: 20_000, rounds: 1, samples: 200 }
    } else {
        Run { events: 400_000, rounds: 5, samples: 3000 }
    };
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let redis = RedisServer::start(&[]);
    let load_before = load();
    let foreign = Foreign::start(&[redis.pid().expect("redis-server runs")]);
    rt.block_on(async {
        let big = RingConfig::new(run.events + 16, 1 << 30);
        let s_big = store(&redis, big).await;
        let s_default = store(&redis, RingConfig::default()).await;
        let mut raw = Vec::new();
        let mut bench = Vec::new();
        let mut bench5 = Vec::new();
        let mut one = Vec::new();
        let mut one_trim = Vec::new();
        let mut many = Vec::new();
        for _ in 0..run.rounds {
            raw.push(raw_xadd(&redis, run.events).await);
            if let Some(r) = redis_benchmark(&redis, run.events, false) {
                bench.push(r);
            }
            if let Some(r) = redis_benchmark(&redis, run.events, true) {
                bench5.push(r);
            }
            one.push(appenders(&s_big, 1, run.events).await);
            one_trim.push(appenders(&s_default, 1, run.events).await);
            many.push(appenders(&s_big, 100, run.events).await);
        }
        let (p50, p99) = cross_node_latency(&redis, run.samples).await;
        let resume = resume_gap(&redis, 10_000, run.rounds.max(3)).await;
        let (raw, one, one_trim, many) = (median(raw), median(one), median(one_trim), median(many));
        let bench = (!bench.is_empty()).then(|| median(bench));
        let bench5 = (!bench5.is_empty()).then(|| median(bench5));
        let load_after = load();
        let foreign = foreign.cores();
        println!("| figure | median |");
        println!("|---|---|");
        println!("| raw pipelined XADD, the store's entry shape (events/s) | {raw:.0} |");
        if let Some(b) = bench {
            println!("| `redis-benchmark -P 1000 XADD rb1 * p <100 B>` (events/s) | {b:.0} |");
        }
        if let Some(b) = bench5 {
            println!("| `redis-benchmark -P 1000 XADD rb5 * s .. i .. v .. n .. p <100 B>` (events/s) | {b:.0} |");
        }
        println!("| one session, no trimming (events/s) | {one:.0} ({:.0} % of raw) |", 100.0 * one / raw);
        println!(
            "| one session, trimmed to the default window of 4096 (events/s) | {one_trim:.0} ({:.0} % of raw) |",
            100.0 * one_trim / raw
        );
        println!("| 100 sessions, aggregate (events/s) | {many:.0} ({:.0} % of raw) |", 100.0 * many / raw);
        println!("| publish → read on another node, p50 / p99 (µs) | {p50:.0} / {p99:.0} |");
        println!("| resume of a 10 000-event gap on another node (ms) | {resume:.1} |");
        println!("load before: {load_before}; after: {load_after}; {} rounds, {} events each", run.rounds, run.events);
        println!("the rest of the machine used {foreign:.2} cores on average during the run (a verdict needs < 0.5)");
        let json = format!(
            "{{\"raw_xadd\":{raw:.0},\"redis_benchmark\":{},\"redis_benchmark_shaped\":{},\"one_session\":{one:.0},\"one_session_trimmed\":{one_trim:.0},\
             \"sessions_100\":{many:.0},\"latency_p50_us\":{p50:.0},\"latency_p99_us\":{p99:.0},\"resume_10k_ms\":{resume:.2},\
             \"load_before\":\"{load_before}\",\"load_after\":\"{load_after}\",\"foreign_cores\":{foreign:.3},\"rounds\":{},\"events\":{}}}",
            bench.map_or("null".to_owned(), |b| format!("{b:.0}")),
            bench5.map_or("null".to_owned(), |b| format!("{b:.0}")),
            run.rounds,
            run.events
        );
        let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/gapless-bench");
        let _ = std::fs::create_dir_all(&dir);
        let _ = std::fs::write(dir.join("redis.json"), json);
    });
}
