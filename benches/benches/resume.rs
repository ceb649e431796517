//! `resume`: per-stream replay after a cursor in a session whose ring
//! (the default 4 096 events) holds 8 streams interleaved round-robin, 512
//! events each. The resumed stream missed its last 16 or 256 events; each
//! element is one of them.
//!
//! * `gapless`: `Reader::snapshot_stream` (pins the range, proves none of
//!   the stream's events was evicted) and a walk of the stream's events.
//! * `gapless_decide`: the whole resume decision (`Hub::resume_stream`: parse the
//!   `Last-Event-ID`, find the session, check namespace, delivery and
//!   coverage, pin) and the same walk.
//! * `mutex_deque`: the `Mutex<VecDeque<Arc<Event>>>` store clones the
//!   stream's events after the cursor out under its lock (given the
//!   cursor's seq: no id parsing, no scan for the cursor), then the walk.
//! * `sort_scan`: the TypeScript SDK's example store: sort every stored id,
//!   scan to the cursor's id, send the stream's later events.

use criterion::{BenchmarkId, Criterion, Throughput};
use gapless::{Event, Hub, HubConfig, ResumeRequest, Seq, StreamId};
use gapless_benches::harness::payload;
use gapless_benches::{DequeStore, SortScanStore};
use std::hint::black_box;
use std::time::Duration;

const STREAMS: u64 = 8;
const GAPS: [u64; 2] = [16, 256];

fn resume(c: &mut Criterion) {
    let p = payload();
    let hub = Hub::new(HubConfig::default()).unwrap();
    let capacity = hub.config().ring.capacity as u64;
    let session = hub.create(None).unwrap();
    let mut handles = vec![session.standalone().clone()];
    while (handles.len() as u64) < STREAMS {
        handles.push(session.open_stream().unwrap());
    }
    let deque = DequeStore::new(capacity as usize);
    let sorted = SortScanStore::new();
    let mut ids = Vec::new();
    for i in 0..capacity {
        let h = &handles[(i % STREAMS) as usize];
        session.publish(h, p.clone()).unwrap();
        deque.publish(h.id(), p.clone());
        ids.push(sorted.store(h.id(), p.clone()));
    }
    let reader = session.reader();
    assert_eq!((reader.oldest(), reader.head()), (Seq(1), Seq(capacity)));
    let target = &handles[3];
    let per_stream = capacity / STREAMS;
    let session_id = session.id().to_string();

    let mut g = c.benchmark_group("resume");
    for gap in GAPS {
        // The stream's event number `per_stream - gap` (1-based) is the cursor.
        let index = per_stream - gap;
        let cursor = Seq((index - 1) * STREAMS + target.id().0);
        target.mark_delivered(&Event {
            seq: cursor,
            stream: target.id(),
            index_in_stream: index,
            payload: p.clone(),
        });
        let last_event_id = session.event_id(target.id(), cursor).to_string();
        let walk = |acc: u64, seq: Seq, stream: StreamId, len: usize| acc ^ seq.0 ^ stream.0 ^ len as u64;
        g.throughput(Throughput::Elements(gap));

        let snap = reader.snapshot_stream(target.id(), cursor).unwrap();
        assert_eq!(snap.len() as u64, gap);
        g.bench_function(BenchmarkId::new("gapless", gap), |b| {
            b.iter(|| {
                let snap = reader.snapshot_stream(target.id(), black_box(cursor)).unwrap();
                snap.iter().fold(0, |acc, e| walk(acc, e.seq, e.stream, e.payload.len()))
            })
        });

        let req = ResumeRequest::new(&session_id).cursor(&last_event_id);
        match hub.resume_stream(req) {
            Ok(r) => assert_eq!(r.snapshot.len() as u64, gap),
            Err(r) => panic!("resume refused: {r}"),
        }
        g.bench_function(BenchmarkId::new("gapless_decide", gap), |b| {
            b.iter(|| match hub.resume_stream(black_box(req)) {
                Ok(r) => r.snapshot.iter().fold(0, |acc, e| walk(acc, e.seq, e.stream, e.payload.len())),
                Err(r) => panic!("resume refused: {r}"),
            })
        });

        assert_eq!(deque.gap_stream(target.id(), cursor).unwrap().len() as u64, gap);
        g.bench_function(BenchmarkId::new("mutex_deque", gap), |b| {
            b.iter(|| {
                let v = deque.gap_stream(target.id(), black_box(cursor)).unwrap();
                v.iter().fold(0, |acc, e| walk(acc, e.seq, e.stream, e.payload.len()))
            })
        });

        let last_id = &ids[cursor.0 as usize - 1];
        let mut n = 0;
        sorted.replay_after(last_id, |_, _| n += 1);
        assert_eq!(n, gap, "the peers replay the same events");
        g.bench_function(BenchmarkId::new("sort_scan", gap), |b| {
            b.iter(|| {
                let mut acc = 0;
                sorted.replay_after(black_box(last_id), |id, payload| {
                    acc = walk(acc, Seq(id.len() as u64), target.id(), payload.len())
                });
                acc
            })
        });
    }
    g.finish();
}

fn config() -> Criterion {
    Criterion::default()
        .warm_up_time(Duration::from_secs(1))
        .measurement_time(Duration::from_secs(2))
        .sample_size(30)
}

fn main() {
    let mut c = config().configure_from_args();
    resume(&mut c);
    c.final_summary();
}
