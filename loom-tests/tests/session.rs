//! Loom models of the session layer's races, through the public API: paced
//! publish against a reader, the migration hand-off against eviction, and a
//! session's close against a subscription and a resume.
//!
//! Loom cannot run tokio. The engine waits on one tokio type, `Notify` (a
//! paced publisher waiting for its readers); under `--cfg gapless_loom` the
//! engine's `sync` shim replaces it by a model of the part the engine uses,
//! built from loom's atomics and mutex as tokio builds it
//! (`engine/src/sync/loom.rs`). Subscriptions wait through the ring's own
//! wake-up protocol, which is loom's already. The futures are driven by
//! `loom::future::block_on`, whose waker parks and unparks a loom thread, so
//! a wake-up that never comes is a deadlock that loom reports.
//!
//! Small on purpose, as the ring's: capacity 2–4, at most 5 publishes, one
//! session, two or three threads. CI runs them with `LOOM_MAX_PREEMPTIONS=2`
//! (`scripts/loom.sh`); each prints its run time.
#![cfg(gapless_loom)]

use bytes::Bytes;
use gapless::ring::{Next, RingConfig};
use gapless::session::{MigrateError, SessionId};
use gapless::{Hub, HubConfig, Refusal, ResumeRequest, Seq, Session, SessionPublishError, Subscription};
use loom::future::block_on;
use loom::thread;
use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};
use std::time::Instant;

fn hub(capacity: usize, chunk: usize) -> Hub {
    let ring = RingConfig { capacity, byte_budget: 1 << 20, chunk_events: chunk };
    Hub::new(HubConfig { ring, ..HubConfig::default() }).unwrap()
}

/// A session under a fixed id: loom replays a model many times and needs
/// each run to make the same operations (a random id would pick another
/// shard of the hub each time).
fn session(hub: &Hub) -> Arc<Session> {
    hub.create_with_id(SessionId::parse("0123456789abcdef0123456789abcdef").unwrap(), None).unwrap()
}

fn payload(seq: u64) -> Bytes {
    Bytes::from(vec![seq as u8; 1 + (seq as usize % 3)])
}

fn model(name: &str, f: impl Fn() + Sync + Send + 'static) {
    let start = Instant::now();
    let mut b = loom::model::Builder::new();
    if b.preemption_bound.is_none() {
        b.preemption_bound = Some(2);
    }
    b.check(f);
    println!("loom model {name}: {:.2?}", start.elapsed());
}

/// Marks seq `seq` delivered, as the transport does when its SSE chunk went
/// out, so that a cursor naming it passes row 6 of the decision table.
fn deliver(s: &Session, seq: u64) {
    let mut c = s.reader().cursor(Seq(seq));
    let Ok(Next::Event(e)) = c.try_next() else { panic!("seq {seq} is retained") };
    assert!(s.reader().mark_delivered(&e));
}

struct Noop;

impl Wake for Noop {
    fn wake(self: Arc<Self>) {}
}

/// A paced publish racing a reader that consumes two events and then
/// detaches (drops its subscription), with a high-water mark of 1: the
/// second publish waits until the reader took the first, the third until it
/// took the second or detached.
///
/// Checks: no lost wake-up (a publisher asleep while the reader waits for
/// its event, or while nobody is attached any more, is a deadlock loom
/// reports); the reader gets every event, in order; and once no reader is
/// attached a paced publish does not wait at all (it is ready at its first
/// poll). This is the Dekker handshake of `session/pace.rs` between
/// `consumed` and `producers_waiting`, and the detach's unconditional
/// notify.
#[test]
fn paced_publish_vs_consume_and_detach() {
    model("paced_publish_vs_consume_and_detach", || {
        let hub = hub(4, 2);
        let s = session(&hub);
        let st = s.open_stream().unwrap();
        let mut sub = s.subscribe_stream(st.id(), Seq(0)).unwrap();
        let reader = thread::spawn(move || {
            let mut got = Vec::new();
            for _ in 0..2 {
                match block_on(sub.recv()) {
                    Some(Ok(e)) => {
                        assert_eq!(&e.payload[..], &payload(e.seq.0)[..]);
                        got.push(e.seq.0);
                    }
                    other => panic!("the stream is live and nothing is evicted: {other:?}"),
                }
            }
            drop(sub); // detach
            got
        });
        let pacer = s.pacer(&st);
        for i in 1..=3 {
            assert_eq!(block_on(s.publish_paced_with(&pacer, payload(i), 1)), Ok(Seq(i)));
        }
        assert_eq!(reader.join().unwrap(), [1, 2]);
        // Nobody attached: the paced publish goes through without waiting.
        let waker = Waker::from(Arc::new(Noop));
        let mut publish = pin!(s.publish_paced_with(&pacer, payload(4), 1));
        match publish.as_mut().poll(&mut Context::from_waker(&waker)) {
            Poll::Ready(r) => assert_eq!(r, Ok(Seq(4))),
            Poll::Pending => panic!("a paced publish waited with no reader attached"),
        }
    });
}

/// The migration hand-off (`docs/SPEC.md` §4.3) racing publishes that evict:
/// the client processed seq 1 of a session holding 1 and 2 (capacity 2, a
/// chunk per event); a publisher adds 3, 4 and 5 while the upgrade asks for
/// a ticket, the socket redeems it, attaches and reads.
///
/// Checks: the migration is granted or refused with `gap_not_covered`
/// (seq 2 was evicted before the check), never anything else; a granted
/// ticket is redeemed and replays its whole pinned gap even if the events
/// left the window meanwhile; the socket's first frame is seq 2 (the
/// cursor's next) and every frame is the next seq; if the live part falls
/// behind eviction, it ends with an explicit `Lagged` for the very seq it
/// wanted (then the end), never with a hole.
#[test]
fn migration_hand_off_racing_eviction() {
    model("migration_hand_off_racing_eviction", || {
        let hub = hub(2, 1);
        let s = session(&hub);
        let st = s.open_stream().unwrap();
        for i in 1..=2 {
            s.publish(&st, payload(i)).unwrap();
        }
        deliver(&s, 1);
        let cursor = s.event_id(st.id(), Seq(1)).to_string();
        let sid = s.id().to_string();
        let publisher = {
            let (s, st) = (Arc::clone(&s), st.clone());
            thread::spawn(move || {
                for i in 3..=5 {
                    assert_eq!(s.publish(&st, payload(i)), Ok(Seq(i)));
                }
            })
        };
        let issued = match hub.migrate(ResumeRequest::new(&sid).cursor(&cursor)) {
            Ok(issued) => issued,
            Err(MigrateError::Refused(Refusal::GapNotCovered { .. })) => {
                publisher.join().unwrap();
                return;
            }
            Err(e) => panic!("a migration is granted or refused as gap_not_covered, not {e:?}"),
        };
        let m =
            hub.redeem(&issued.ticket.to_string(), Some(&s.id()), None).expect("a live ticket is redeemed");
        assert_eq!(m.cursor, Seq(1));
        let mut sub = m.into_subscription();
        let mut next = 2; // cursor + 1
        let mut lagged = false;
        // One look: `false` once there is nothing to take (pending, or
        // after the lag).
        let mut look = |sub: &mut Subscription| match sub.try_recv() {
            // Ended after the lag (checked there): nothing more to take.
            _ if lagged => false,
            Ok(Next::Event(e)) => {
                assert_eq!(e.seq.0, next, "a hole, or a frame out of order");
                assert_eq!(&e.payload[..], &payload(e.seq.0)[..]);
                next += 1;
                true
            }
            Ok(Next::Pending) => false,
            Ok(Next::End) => panic!("the session is live"),
            Err(l) => {
                assert_eq!(l.wanted.0, next, "lag reported for a seq it was not reading");
                assert!(l.wanted < l.oldest, "told {l:?}, but that seq was not evicted");
                assert!(matches!(sub.try_recv(), Ok(Next::End)), "nothing after the error");
                lagged = true;
                false
            }
        };
        look(&mut sub);
        look(&mut sub);
        publisher.join().unwrap();
        while look(&mut sub) {}
        assert!(next - 2 >= issued.replay_count as u64, "the pinned gap is replayed in full");
        assert!(lagged || next == 6, "stopped at {next} without an error");
    });
}

/// A session's close (`Hub::remove`) racing a paced publisher that waits
/// for a lagging subscriber, and a resume on another stream whose
/// subscription then waits for live events.
///
/// Checks: the waiting publisher is woken by the close and then told
/// `Closed`, or publishes its event if the close's mark let it go before
/// the close took the writer (the lagging subscriber never reads while it
/// runs, so nothing else lets it go); the resume is either refused as
/// `unknown_session` (the close came first) or granted a subscription that
/// ends once the session closed; and the lagging subscription yields what
/// was published, then the end. A publisher or subscriber left asleep is a
/// deadlock loom reports.
#[test]
fn close_racing_subscription_and_resume() {
    model("close_racing_subscription_and_resume", || {
        let hub = Arc::new(hub(4, 2));
        let s = session(&hub);
        let (a, b) = (s.open_stream().unwrap(), s.open_stream().unwrap());
        assert_eq!(s.publish(&a, payload(1)), Ok(Seq(1)));
        assert_eq!(s.publish(&b, payload(2)), Ok(Seq(2)));
        deliver(&s, 2);
        // Attached to `a`'s gate and one event behind: with a high-water
        // mark of 1 every paced publish on `a` waits for it.
        let mut lagging = s.subscribe_stream(a.id(), Seq(0)).unwrap();
        let publisher = {
            let s = Arc::clone(&s);
            thread::spawn(move || block_on(s.publish_paced(&a, payload(3), 1)))
        };
        let resumer = {
            let (hub, sid) = (Arc::clone(&hub), s.id().to_string());
            let cursor = s.event_id(b.id(), Seq(2)).to_string();
            thread::spawn(move || match hub.resume_stream(ResumeRequest::new(&sid).cursor(&cursor)) {
                Ok(r) => {
                    let mut sub = r.into_subscription();
                    let next = block_on(sub.recv());
                    assert!(next.is_none(), "nothing after seq 2 on its stream, then the end: {next:?}");
                }
                Err(Refusal::UnknownSession) => {}
                Err(e) => panic!("a resume is granted or refused as unknown_session, not {e:?}"),
            })
        };
        assert!(hub.remove(&s.id()).is_some());
        let published = match publisher.join().unwrap() {
            Err(SessionPublishError::Closed) => vec![1],
            Ok(Seq(3)) => vec![1, 3],
            other => panic!("the paced publish ends with the close: {other:?}"),
        };
        resumer.join().unwrap();
        let mut got = Vec::new();
        loop {
            match lagging.try_recv() {
                Ok(Next::Event(e)) => got.push(e.seq.0),
                Ok(Next::End) => break,
                other => panic!("the lagging subscriber gets what was published, then the end: {other:?}"),
            }
        }
        assert_eq!(got, published);
    });
}

/// A 1 000-byte payload: two of them put `lease_hub`'s hub over its limit.
fn big() -> Bytes {
    Bytes::from(vec![1u8; 1000])
}

/// A hub (capacity 4, chunks of 2) and its one session, whose memory limit
/// is the session's base footprint and 1 500 bytes, so that a lease's two
/// `big` events put the hub over it.
fn lease_hub() -> (Hub, Arc<Session>) {
    let base = {
        let probe = hub(4, 2);
        session(&probe).footprint()
    };
    let ring = RingConfig { capacity: 4, byte_budget: 1 << 20, chunk_events: 2 };
    let hub = Hub::new(HubConfig { ring, max_sessions: 1, max_memory: base + 1500, ..HubConfig::default() })
        .unwrap();
    let s = session(&hub);
    (hub, s)
}

/// A lease (`Session::lease`) filling a chunk while another writer
/// publishes and the hub is over its memory limit: at the chunk's end the
/// lease charges the budget, gives its lock up, reclaims with no lock held
/// and takes the lock again.
///
/// Checks: seqs are dense and each writer's come in its order; the other
/// writer's event lands only at the lease's chunk end, never inside the
/// lease's chunk; no deadlock between the lease, the writer and the reclaim.
#[test]
fn lease_yields_at_its_chunk_end_to_a_writer_and_a_reclaim() {
    model("lease_yields_at_its_chunk_end_to_a_writer_and_a_reclaim", || {
        let (_hub, s) = lease_hub();
        let (a, b) = (s.open_stream().unwrap(), s.open_stream().unwrap());
        let other = {
            let s = Arc::clone(&s);
            thread::spawn(move || s.publish(&b, payload(9)).unwrap().0)
        };
        let mine = {
            let mut lease = s.lease().unwrap();
            let first = lease.publish(&a, big()).unwrap().0;
            let second = lease.publish(&a, big()).unwrap().0;
            let third = lease.publish(&a, payload(3)).unwrap().0;
            [first, second, third]
        };
        let theirs = other.join().unwrap();
        let mut all = vec![mine[0], mine[1], mine[2], theirs];
        all.sort_unstable();
        assert_eq!(all, vec![1, 2, 3, 4], "dense seqs, none twice");
        assert!(mine[0] < mine[1] && mine[1] < mine[2]);
        // The lease's first chunk (seqs 1 and 2) is all its own: the other
        // writer came first, or at the chunk's end.
        assert!(theirs == 1 || theirs >= 3, "the other writer got in inside the lease's chunk: {theirs}");
        if theirs != 1 {
            assert_eq!(&mine[..2], &[1, 2]);
        }
    });
}

/// A lease over the hub's memory limit, with a reader taking snapshots: at
/// the end of the lease's second chunk, the reclaim it runs with its lock
/// let go evicts the lease's own first chunk (a reclaim passes over a ring
/// whose writer lock is held, so it could not while the lease held it).
///
/// Checks: the lease's ring lost its first chunk by the time that publish
/// returns (the mutant `reclaim_under_lease`, which reclaims before giving
/// the lock up, passes over the ring and is caught); a reader's snapshot is
/// either every event from seq 1 on, in order, or an explicit eviction that
/// names the oldest seq kept, never a hole.
#[test]
fn lease_reclaims_its_own_ring_at_its_chunk_end() {
    model("lease_reclaims_its_own_ring_at_its_chunk_end", || {
        let (_hub, s) = lease_hub();
        let a = s.open_stream().unwrap();
        let reader = {
            let r = s.reader().clone();
            thread::spawn(move || match r.snapshot(Seq(0)) {
                Ok(snap) => {
                    let seqs: Vec<u64> = snap.iter().map(|e| e.seq.0).collect();
                    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "from seq 1, no hole");
                }
                Err(gapless::SnapshotError::Evicted { wanted, oldest, .. }) => {
                    assert_eq!(wanted, Seq(1));
                    assert_eq!(oldest, Seq(3), "the first chunk is what the reclaim evicts");
                }
                Err(e) => panic!("a snapshot or an explicit eviction, not {e:?}"),
            })
        };
        {
            let mut lease = s.lease().unwrap();
            for seq in 1..=4 {
                assert_eq!(lease.publish(&a, big()), Ok(Seq(seq)));
            }
            assert_eq!(
                s.reader().oldest(),
                Seq(3),
                "the reclaim at the second chunk's end evicted the lease's first chunk"
            );
        }
        reader.join().unwrap();
    });
}
