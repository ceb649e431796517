//! A task's event stream in Redis (`docs/SPEC.md` §5.6, §8.11), against a
//! real `redis-server` the test starts on a free loopback port: dense seqs
//! kept from the oldest, the bounds by count, bytes and age applied in the
//! append and in the read, retries that write nothing twice, readers held
//! to `acked`, a hole that drops what is before it, and the end.

use bytes::Bytes;
use gapless_redis::testing::RedisServer;
use gapless_redis::{
    RedisStore, StoreConfig, TaskEventBatch, TaskEventBounds, TaskEventsMeta, TaskEventsRead,
};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

const WIDE: TaskEventBounds = TaskEventBounds { max_events: 1000, max_bytes: 1 << 20, max_age_ms: 0 };

fn events(range: std::ops::Range<u64>) -> Vec<Bytes> {
    range.map(|i| Bytes::from(format!("e{i:03}"))).collect()
}

async fn append(
    store: &RedisStore,
    task: &str,
    first: u64,
    evs: &[Bytes],
    acked: u64,
    ended: bool,
    bounds: TaskEventBounds,
) -> TaskEventsMeta {
    let now = now_ms();
    let batch =
        TaskEventBatch { task, first, acked, ended, events: evs, expire_at_ms: now + 60_000, now_ms: now };
    store.task_events_append(batch, bounds).await.unwrap()
}

/// (oldest, acked, next, ended, seqs read) after `after`.
async fn read(
    store: &RedisStore,
    task: &str,
    after: Option<u64>,
    bounds: TaskEventBounds,
) -> (u64, u64, u64, bool, Vec<u64>) {
    match store.task_events_read(task, after, 100, bounds, now_ms()).await.unwrap() {
        TaskEventsRead::None => panic!("no stream"),
        TaskEventsRead::Some { meta, ended, events } => {
            for (seq, body) in &events {
                assert_eq!(body, &Bytes::from(format!("e{seq:03}")), "each seq's own event");
            }
            (meta.oldest, meta.acked, meta.next, ended, events.into_iter().map(|(s, _)| s).collect())
        }
    }
}

async fn store() -> (RedisServer, RedisStore) {
    let server = RedisServer::start(&[]);
    let store = RedisStore::connect(&server.url(), StoreConfig::default()).await.unwrap();
    (server, store)
}

#[tokio::test]
async fn readers_are_served_up_to_acked_and_retries_write_nothing_twice() {
    let (_server, store) = store().await;
    let t = "t-acked";
    assert_eq!(store.task_events_read(t, None, 10, WIDE, now_ms()).await.unwrap(), TaskEventsRead::None);
    let m = append(&store, t, 0, &events(0..5), 0, false, WIDE).await;
    assert_eq!(m, TaskEventsMeta { next: 5, oldest: 0, acked: 0 });
    assert_eq!(read(&store, t, None, WIDE).await, (0, 0, 5, false, vec![]), "nothing acked: nothing served");
    // The same batch again (a retry), then the next with the first's ack.
    append(&store, t, 0, &events(0..5), 0, false, WIDE).await;
    let m = append(&store, t, 3, &events(3..8), 5, false, WIDE).await;
    assert_eq!(m, TaskEventsMeta { next: 8, oldest: 0, acked: 5 }, "a retry overlapping what is written");
    assert_eq!(read(&store, t, None, WIDE).await.4, [0, 1, 2, 3, 4]);
    assert_eq!(read(&store, t, Some(2), WIDE).await.4, [3, 4]);
    assert_eq!(read(&store, t, Some(4), WIDE).await.4, Vec::<u64>::new(), "5.. not acked yet");
    // An ack-only write; an ack never goes back, nor past `next`.
    append(&store, t, 8, &[], 8, false, WIDE).await;
    let m = append(&store, t, 8, &[], 3, false, WIDE).await;
    assert_eq!(m.acked, 8);
    let m = append(&store, t, 8, &[], 99, true, WIDE).await;
    assert_eq!((m.acked, m.next), (8, 8));
    assert_eq!(read(&store, t, Some(4), WIDE).await, (0, 8, 8, true, vec![5, 6, 7]));
}

#[tokio::test]
async fn the_bounds_keep_the_newest_dense() {
    let (_server, store) = store().await;
    // By count: 10 events, 4 kept.
    let by_count = TaskEventBounds { max_events: 4, ..WIDE };
    let m = append(&store, "c", 0, &events(0..10), 0, false, by_count).await;
    assert_eq!((m.oldest, m.next), (6, 10));
    append(&store, "c", 10, &[], 10, false, by_count).await;
    assert_eq!(read(&store, "c", None, by_count).await.4, [6, 7, 8, 9]);
    assert_eq!(read(&store, "c", Some(5), by_count).await.4, [6, 7, 8, 9], "after = oldest - 1");
    // By bytes: each event is 4 bytes; 10 bytes keep 2.
    let by_bytes = TaskEventBounds { max_bytes: 10, ..WIDE };
    let m = append(&store, "b", 0, &events(0..7), 7, false, by_bytes).await;
    assert_eq!((m.oldest, m.next), (5, 7));
    assert_eq!(read(&store, "b", None, by_bytes).await.4, [5, 6]);
    // By age: events older than the bound go at the next read.
    let by_age = TaskEventBounds { max_age_ms: 1500, ..WIDE };
    append(&store, "a", 0, &events(0..3), 3, false, by_age).await;
    assert_eq!(read(&store, "a", None, by_age).await.4, [0, 1, 2]);
    tokio::time::sleep(Duration::from_millis(1800)).await;
    append(&store, "a", 3, &events(3..4), 4, false, WIDE).await; // written without the age bound
    let (oldest, _, _, _, seqs) = read(&store, "a", None, by_age).await;
    assert_eq!((oldest, seqs), (3, vec![3]), "the old three are not served");
}

#[tokio::test]
async fn a_batch_past_next_drops_what_is_before_it() {
    let (_server, store) = store().await;
    append(&store, "h", 0, &events(0..3), 3, false, WIDE).await;
    // The writer could not keep 3..6 (or a failover lost them): kept is
    // dense from 6, and a cursor before it is told so by `oldest`.
    let m = append(&store, "h", 6, &events(6..8), 3, false, WIDE).await;
    assert_eq!(m, TaskEventsMeta { next: 8, oldest: 6, acked: 3 });
    append(&store, "h", 8, &[], 8, false, WIDE).await;
    let (oldest, acked, _, _, seqs) = read(&store, "h", Some(1), WIDE).await;
    assert_eq!((oldest, acked, seqs), (6, 8, vec![]), "after 1: 2 is gone, nothing is served past it");
    assert_eq!(read(&store, "h", Some(5), WIDE).await.4, [6, 7]);
}

/// A stream that ended (its writer's end, or a reader's seal once the
/// task's node was gone: everything up to `next` served) takes no more
/// events: a writer that comes back appends nothing.
#[tokio::test]
async fn an_ended_stream_takes_no_more_events() {
    let (_server, store) = store().await;
    append(&store, "e", 0, &events(0..4), 2, false, WIDE).await;
    // The seal: acked up to next, ended.
    let m = append(&store, "e", 0, &[], 1 << 52, true, WIDE).await;
    assert_eq!(m, TaskEventsMeta { next: 4, oldest: 0, acked: 4 });
    let m = append(&store, "e", 4, &events(4..6), 6, false, WIDE).await;
    assert_eq!(m, TaskEventsMeta { next: 4, oldest: 0, acked: 4 }, "nothing appended after the end");
    assert_eq!(read(&store, "e", Some(1), WIDE).await, (0, 4, 4, true, vec![2, 3]));
}

/// Seqs past 10^14 (Lua writes such numbers %.14g, 1e+14, if not told
/// otherwise): ids, trims and reads still work.
#[tokio::test]
async fn large_seqs_make_valid_ids() {
    let (_server, store) = store().await;
    let first = 100_000_000_000_000u64 - 2;
    let small = TaskEventBounds { max_events: 3, ..WIDE };
    let evs: Vec<Bytes> = (first..first + 5).map(|i| Bytes::from(format!("e{i:03}"))).collect();
    let m = append(&store, "big", first, &evs, first + 5, false, small).await;
    assert_eq!(m, TaskEventsMeta { next: first + 5, oldest: first + 2, acked: first + 5 });
    let (_, _, _, _, seqs) = read(&store, "big", Some(first + 2), small).await;
    assert_eq!(seqs, [first + 3, first + 4]);
}
