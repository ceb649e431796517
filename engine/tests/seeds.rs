//! Scenario tests, one per seed story (`docs/SPEC.md` §1 tells both), through
//! the session hub and the decision table.

use bytes::Bytes;
use gapless::client::{classify_resume, ClientGuard, ResumeOutcome, ResumeResponse, WsCheck};
use gapless::{
    ErrorKind, Hub, HubConfig, Missing, Refusal, Resume, ResumeRequest, RingConfig, Seq, Session,
    StreamHandle,
};
use std::sync::Arc;

fn hub(capacity: usize) -> Hub {
    Hub::new(HubConfig { ring: RingConfig::new(capacity, 1 << 20), ..HubConfig::default() }).unwrap()
}

/// Publishes `n` events on `stream`, returning their seqs.
fn emit(s: &Session, stream: &StreamHandle, n: usize) -> Vec<Seq> {
    (0..n).map(|i| s.publish(stream, Bytes::from(format!("e{i}"))).unwrap()).collect()
}

/// The transport delivered every event of `stream` up to `seq`.
fn deliver_to(s: &Session, stream: &StreamHandle, seq: Seq) {
    let ev = s
        .reader()
        .snapshot_stream(stream.id(), Seq(0))
        .or_else(|_| s.reader().snapshot_stream(stream.id(), Seq(seq.0 - 1)))
        .unwrap()
        .iter()
        .filter(|e| e.seq <= seq)
        .last()
        .map(|e| e.to_event())
        .expect("delivered event retained");
    assert!(stream.mark_delivered(&ev));
}

type Decision = Result<Resume, Refusal>;

fn migrate(hub: &Hub, s: &Session, cursor: Option<Seq>) -> Decision {
    let c = cursor.map(|seq| {
        let stream = s.reader().stream_of(seq).unwrap_or(s.standalone().id());
        s.event_id(stream, seq).to_string()
    });
    let sid = s.id().to_string();
    hub.check_migration(ResumeRequest { session_id: Some(&sid), cursor: c.as_deref(), owner: None })
}

fn resume_stream(hub: &Hub, sid: Option<&str>, cursor: &str) -> Decision {
    hub.resume_stream(ResumeRequest { session_id: sid, cursor: Some(cursor), owner: None })
}

/// A migration request (with a ticket) on session `sid` after `cursor`.
fn migration<'a>(sid: &'a str, cursor: Option<&'a str>) -> ResumeRequest<'a> {
    ResumeRequest { session_id: Some(sid), cursor, owner: None }
}

fn refusal(d: Decision) -> Refusal {
    match d {
        Err(r) => r,
        Ok(r) => panic!("expected a refusal, got a resume of {:?}", r.snapshot),
    }
}

fn seqs_of(d: Decision) -> Vec<u64> {
    match d {
        Ok(r) => r.snapshot.iter().map(|e| e.seq.0).collect(),
        Err(r) => panic!("expected a resume, got {r:?}"),
    }
}

/// Seed 000, variant 1: events 11..13 are emitted while the client is
/// between its SSE break and its upgrade; the migration with the client's
/// true cursor (10) replays them first.
#[test]
fn seed_000_events_emitted_mid_reconnect_are_replayed_first() {
    let hub = hub(64);
    let s = hub.create(None).unwrap();
    let st = s.standalone().clone();
    emit(&s, &st, 10);
    deliver_to(&s, &st, Seq(10));
    emit(&s, &st, 3); // 11..=13, not delivered: the client is reconnecting
    let got = seqs_of(migrate(&hub, &s, Some(Seq(10))));
    assert_eq!(got, vec![11, 12, 13]);
    // And through a ticket: replay first, then live, no hole at the hand-off.
    let issued =
        hub.migrate(migration(&s.id().to_string(), Some(&s.event_id(st.id(), Seq(10)).to_string()))).unwrap();
    assert_eq!(issued.replay_from, Some(s.event_id(st.id(), Seq(11))));
    assert_eq!(issued.replay_count, 3);
    emit(&s, &st, 2); // 14, 15 after the ticket
    let m = hub.redeem(&issued.ticket.to_string(), None, None).unwrap();
    let mut sub = m.into_subscription();
    let mut seen = vec![];
    while let Ok(gapless::Next::Event(e)) = sub.try_recv() {
        seen.push(e.seq.0);
    }
    assert_eq!(seen, vec![11, 12, 13, 14, 15]);
}

/// Seed 000, variant 2: the ring evicted the gap; the upgrade is refused
/// with the numbers, never granted.
#[test]
fn seed_000_evicted_gap_is_refused_with_numbers() {
    let hub = hub(8);
    let s = hub.create(None).unwrap();
    let st = s.standalone().clone();
    emit(&s, &st, 10);
    deliver_to(&s, &st, Seq(10));
    emit(&s, &st, 20); // 11..=30; ring holds 23..=30
    let r = refusal(migrate(&hub, &s, Some(Seq(10))));
    match &r {
        Refusal::GapNotCovered { cursor, oldest, oldest_id, missing } => {
            assert_eq!(cursor.unwrap().seq, Seq(10));
            assert_eq!(*oldest, Seq(23));
            assert_eq!(oldest_id.unwrap().seq, Seq(23));
            assert_eq!(*missing, Missing::Exact(12)); // 11..=22
        }
        other => panic!("expected GapNotCovered, got {other:?}"),
    }
    assert_eq!((r.http_status(), r.kind()), (409, ErrorKind::GapNotCovered));
    // No ticket either.
    let cur = s.event_id(st.id(), Seq(10)).to_string();
    assert!(matches!(
        hub.migrate(migration(&s.id().to_string(), Some(&cur))),
        Err(gapless::session::MigrateError::Refused(Refusal::GapNotCovered { .. }))
    ));
}

/// Seed 000, variant 3: the client echoes a server-emitted id it never
/// received; refused as not delivered.
#[test]
fn seed_000_echoed_server_id_is_not_delivered() {
    let hub = hub(64);
    let s = hub.create(None).unwrap();
    let st = s.standalone().clone();
    emit(&s, &st, 13);
    deliver_to(&s, &st, Seq(10));
    let r = refusal(migrate(&hub, &s, Some(Seq(13))));
    assert!(matches!(r, Refusal::CursorNotDelivered { undelivered: Some(Seq(11)), .. }), "{r:?}");
    assert_eq!((r.http_status(), r.kind().as_str()), (409, "cursor_not_delivered"));
}

/// Seed 000: a forged cursor below a seq delivered on *another* stream is
/// still not delivered (delivery is per stream, never one session number).
#[test]
fn seed_000_forged_cursor_below_other_streams_delivery() {
    let hub = hub(64);
    let s = hub.create(None).unwrap();
    let a = s.standalone().clone();
    let b = s.open_stream().unwrap();
    emit(&s, &a, 1); // 1 on A
    emit(&s, &b, 1); // 2 on B
    emit(&s, &a, 1); // 3 on A
    deliver_to(&s, &a, Seq(3)); // A fully delivered; B's seq 2 never was
    let r = refusal(migrate(&hub, &s, Some(Seq(3))));
    assert!(matches!(r, Refusal::CursorNotDelivered { undelivered: Some(Seq(2)), .. }), "{r:?}");
    // Cursor 1 is honest: only seq 1 at or below it, and it was delivered.
    assert_eq!(seqs_of(migrate(&hub, &s, Some(Seq(1)))), vec![2, 3]);
}

/// Seed 000: an evicted, undelivered event below the cursor is still found.
#[test]
fn seed_000_evicted_undelivered_event_below_cursor() {
    let hub = hub(4);
    let s = hub.create(None).unwrap();
    let a = s.standalone().clone();
    let b = s.open_stream().unwrap();
    emit(&s, &b, 1); // 1 on B, never delivered
    emit(&s, &a, 5); // 2..=6 on A; ring holds 3..=6
    deliver_to(&s, &a, Seq(6));
    let r = refusal(migrate(&hub, &s, Some(Seq(5))));
    assert!(matches!(r, Refusal::CursorNotDelivered { undelivered: Some(Seq(1)), .. }), "{r:?}");
}

/// Seed 000: the quiescent migration (nothing to replay) succeeds with an
/// empty gap, and so does "processed nothing" on a fresh session.
#[test]
fn seed_000_quiescent_migration() {
    let hub = hub(64);
    let s = hub.create(None).unwrap();
    assert_eq!(seqs_of(migrate(&hub, &s, None)), Vec::<u64>::new());
    let st = s.standalone().clone();
    emit(&s, &st, 5);
    deliver_to(&s, &st, Seq(5));
    assert_eq!(seqs_of(migrate(&hub, &s, Some(Seq(5)))), Vec::<u64>::new());
    let t =
        hub.migrate(migration(&s.id().to_string(), Some(&s.event_id(st.id(), Seq(5)).to_string()))).unwrap();
    assert_eq!((t.replay_from, t.replay_count), (None, 0));
}

/// Seed 000: the ring evicts the gap between the ticket and the socket
/// connecting; the pinned snapshot still delivers it, with no hole at the
/// hand-off to live events (or an explicit lag if live fell behind too).
#[test]
fn seed_000_eviction_between_ticket_and_connect() {
    let hub = hub(8);
    let s = hub.create(None).unwrap();
    let st = s.standalone().clone();
    emit(&s, &st, 4);
    deliver_to(&s, &st, Seq(2));
    let t =
        hub.migrate(migration(&s.id().to_string(), Some(&s.event_id(st.id(), Seq(2)).to_string()))).unwrap();
    assert_eq!(t.replay_count, 2);
    emit(&s, &st, 6); // 5..=10: ring holds 3..=10, gap 3..=4 still there
    emit(&s, &st, 2); // 11, 12: 3 and 4 are evicted now
    assert!(s.reader().oldest() > Seq(4));
    let mut sub = hub.redeem(&t.ticket.to_string(), None, None).unwrap().into_subscription();
    let mut seen = vec![];
    while let Ok(gapless::Next::Event(e)) = sub.try_recv() {
        seen.push(e.seq.0);
    }
    assert_eq!(seen, (3..=12).collect::<Vec<_>>());
}

/// Seed 003, variant 1: a cursor of a request stream, presented with the
/// session id, replays *that* stream's events after it, not the standalone
/// stream's, and never a silent empty result.
#[test]
fn seed_003_request_stream_cursor_replays_its_own_stream() {
    let hub = hub(64);
    let s = hub.create(None).unwrap();
    let get = s.standalone().clone();
    let post = s.open_stream().unwrap();
    emit(&s, &get, 2); // 1, 2 on the GET stream
    emit(&s, &post, 2); // 3, 4 on the POST stream
    emit(&s, &get, 1); // 5 on GET
    emit(&s, &post, 1); // 6: the tool result on POST
    deliver_to(&s, &post, Seq(3));
    let cur = s.event_id(post.id(), Seq(3)).to_string();
    let sid = s.id().to_string();
    assert_eq!(seqs_of(resume_stream(&hub, Some(&sid), &cur)), vec![4, 6]);
    // A GET-stream cursor replays the GET stream only.
    deliver_to(&s, &get, Seq(2));
    let cur = s.event_id(get.id(), Seq(2)).to_string();
    assert_eq!(seqs_of(resume_stream(&hub, Some(&sid), &cur)), vec![5]);
    // The same seq under the wrong stream's tag is foreign.
    let wrong = s.event_id(get.id(), Seq(3)).to_string();
    assert!(matches!(refusal(resume_stream(&hub, Some(&sid), &wrong)), Refusal::NamespaceMismatch { .. }));
}

/// Seed 003, variant 2: a cursor without a session id is refused and no
/// session is created.
#[test]
fn seed_003_cursor_without_session_is_refused() {
    let hub = hub(64);
    let s = hub.create(None).unwrap();
    let cur = s.event_id(s.standalone().id(), Seq(1)).to_string();
    let before = hub.len();
    let r = refusal(resume_stream(&hub, None, &cur));
    assert_eq!(r, Refusal::ResumeRequiresSession);
    assert_eq!((r.http_status(), r.kind().as_str()), (400, "resume_requires_session"));
    assert_eq!(hub.len(), before);
}

/// Seed 003: cursors of another session, of an older incarnation, ahead of
/// head, and garbage.
#[test]
fn seed_003_foreign_ahead_and_garbage_cursors() {
    let hub = hub(64);
    let s1 = hub.create(None).unwrap();
    let s2 = hub.create(None).unwrap();
    let st1 = s1.standalone().clone();
    emit(&s1, &st1, 3);
    deliver_to(&s1, &st1, Seq(3));
    emit(&s2, &s2.standalone().clone(), 3);
    let sid1 = s1.id().to_string();
    // Another session's cursor.
    let other = s2.event_id(s2.standalone().id(), Seq(2)).to_string();
    let r = refusal(resume_stream(&hub, Some(&sid1), &other));
    assert_eq!((r.http_status(), r.kind().as_str()), (409, "namespace_mismatch"));
    // Older incarnation: same session id, created anew.
    let old_cursor = s1.event_id(st1.id(), Seq(2)).to_string();
    let s1b = hub.create_with_id(s1.id(), None).unwrap();
    emit(&s1b, &s1b.standalone().clone(), 3);
    assert!(matches!(
        refusal(resume_stream(&hub, Some(&sid1), &old_cursor)),
        Refusal::NamespaceMismatch { .. }
    ));
    // Ahead of head.
    let ahead = s1b.event_id(s1b.standalone().id(), Seq(99)).to_string();
    let r = refusal(resume_stream(&hub, Some(&sid1), &ahead));
    assert!(matches!(r, Refusal::CursorAhead { head: Seq(3), .. }), "{r:?}");
    // Emitted but never delivered.
    let undelivered = s1b.event_id(s1b.standalone().id(), Seq(2)).to_string();
    assert!(matches!(
        refusal(resume_stream(&hub, Some(&sid1), &undelivered)),
        Refusal::CursorNotDelivered { .. }
    ));
    // Garbage.
    for g in ["", "-", "abc", "x-01", "x-18446744073709551616", "x--1", &"a".repeat(10_000), "é-1"] {
        let r = refusal(resume_stream(&hub, Some(&sid1), g));
        assert!(matches!(r, Refusal::MalformedCursor { .. }), "{g:?} gave {r:?}");
        assert_eq!(r.http_status(), 400);
    }
    // Well-formed but not our tag layout: foreign.
    assert!(matches!(refusal(resume_stream(&hub, Some(&sid1), "abc-1")), Refusal::NamespaceMismatch { .. }));
    // Unknown session id.
    assert_eq!(refusal(resume_stream(&hub, Some("nope"), &undelivered)), Refusal::UnknownSession);
}

/// Seed 003: an evicted gap on the cursor's stream is refused (409), never
/// an empty 200; eviction of *other* streams' events does not matter.
#[test]
fn seed_003_evicted_stream_gap_is_refused() {
    let hub = hub(4);
    let s = hub.create(None).unwrap();
    let a = s.standalone().clone();
    let b = s.open_stream().unwrap();
    emit(&s, &a, 1); // 1 A
    deliver_to(&s, &a, Seq(1));
    emit(&s, &a, 1); // 2 A (undelivered to the client: it dropped)
    emit(&s, &b, 4); // 3..=6 B: ring holds 3..=6, A's 2 evicted
    let sid = s.id().to_string();
    let r = refusal(resume_stream(&hub, Some(&sid), &s.event_id(a.id(), Seq(1)).to_string()));
    match r {
        Refusal::GapNotCovered { oldest, missing, .. } => {
            assert_eq!((oldest, missing), (Seq(3), Missing::Exact(1)))
        }
        other => panic!("{other:?}"),
    }
    // B's cursor 3: everything of B after it is retained.
    deliver_to(&s, &b, Seq(3));
    assert_eq!(
        seqs_of(resume_stream(&hub, Some(&sid), &s.event_id(b.id(), Seq(3)).to_string())),
        vec![4, 5, 6]
    );
    // A stream whose evicted events were all *other* streams': covered.
    let c = s.open_stream().unwrap();
    emit(&s, &c, 1); // 7 C
    deliver_to(&s, &c, Seq(7));
    emit(&s, &b, 4); // 8..=11 B
    emit(&s, &c, 1); // 12 C; ring holds 9..=12
    assert_eq!(seqs_of(resume_stream(&hub, Some(&sid), &s.event_id(c.id(), Seq(7)).to_string())), vec![12]);
}

/// The client guard: an empty replay while a request is pending is loss
/// suspect, not "caught up"; a first WebSocket frame that is not cursor+1 is
/// reported.
#[test]
fn seed_003_client_guard_flags_suspicious_empty_replay() {
    let hub = hub(64);
    let s = hub.create(None).unwrap();
    let st = s.standalone().clone();
    emit(&s, &st, 2);
    let mut g = ClientGuard::new();
    g.set_session_id(&s.id().to_string()).unwrap();
    let id1 = s.event_id(st.id(), Seq(1));
    g.processed(&id1).unwrap();
    let h = g.resume_headers(st.id()).unwrap();
    assert_eq!(h.last_event_id(), &id1);
    let pending = [gapless::client::RequestId::from(7)];
    assert!(matches!(
        classify_resume(&id1, ResumeResponse::Replayed(&[]), &pending),
        ResumeOutcome::LossSuspect { .. }
    ));
    assert!(matches!(classify_resume(&id1, ResumeResponse::Replayed(&[]), &[]), ResumeOutcome::CaughtUp));
    let up = g.upgrade_request().unwrap();
    let mut ws = up.ws_continuity();
    assert!(matches!(ws.check(Seq(3), &g), WsCheck::Hole { expected: Seq(2), got: Seq(3) }));
}

/// Session bookkeeping: the bound and the idle timeout each give a typed
/// error, and owners are enforced.
#[test]
fn sessions_bound_idle_and_owner() {
    let hub = Arc::new(
        Hub::new(HubConfig {
            max_sessions: 2,
            idle_timeout: std::time::Duration::ZERO,
            ..HubConfig::default()
        })
        .unwrap(),
    );
    let a = hub.create(Some("alice")).unwrap();
    let guard = hub.connect(&a); // open connection: never idle
    let _b = hub.create(None).unwrap();
    // Full: the idle one (b) is swept to make room, alice's is kept.
    let c = hub.create(None).unwrap();
    assert!(hub.get(&a.id(), Some("alice")).is_ok());
    assert!(matches!(hub.get(&a.id(), Some("mallory")), Err(gapless::SessionError::Unknown)));
    assert!(matches!(hub.get(&a.id(), None), Err(gapless::SessionError::Unknown)));
    let _g2 = hub.connect(&c);
    assert!(matches!(hub.create(None), Err(gapless::SessionError::TooManySessions { max: 2 })));
    // A refusal leaves the count intact: still full, still refused.
    assert_eq!(hub.len(), 2);
    assert!(matches!(hub.create(None), Err(gapless::SessionError::TooManySessions { max: 2 })));
    // A new incarnation under an existing id replaces it: allowed when
    // full, and the count stays.
    let c2 = hub.create_with_id(c.id(), None).unwrap();
    assert!(c.is_closed() && !c2.is_closed());
    assert_eq!(hub.len(), 2);
    let _g3 = hub.connect(&c2);
    assert!(matches!(hub.create(None), Err(gapless::SessionError::TooManySessions { max: 2 })));
    drop(guard);
    assert!(matches!(hub.get(&a.id(), Some("alice")), Err(gapless::SessionError::Expired { .. })));
    assert!(a.is_closed());
}

/// Tickets: single use, expiring, bound to their session, bounded in number.
#[test]
fn tickets_are_single_use_bound_and_bounded() {
    let hub = Hub::new(HubConfig { max_tickets: 2, ..HubConfig::default() }).unwrap();
    let s = hub.create(None).unwrap();
    let other = hub.create(None).unwrap();
    let sid = s.id().to_string();
    let t1 = hub.migrate(migration(&sid, None)).unwrap();
    let _t2 = hub.migrate(migration(&sid, None)).unwrap();
    assert!(matches!(
        hub.migrate(migration(&sid, None)),
        Err(gapless::session::MigrateError::Ticket(gapless::session::TicketError::TooMany { max: 2 }))
    ));
    let t = t1.ticket.to_string();
    assert_eq!(hub.redeem(&t, Some(&other.id()), None).unwrap_err(), gapless::session::TicketError::Foreign);
    assert!(hub.redeem(&t, Some(&s.id()), None).is_ok());
    assert_eq!(hub.redeem(&t, None, None).unwrap_err(), gapless::session::TicketError::Redeemed);
    assert_eq!(
        hub.redeem("00000000000000000000000000000000", None, None).unwrap_err(),
        gapless::session::TicketError::Unknown
    );
    assert_eq!(hub.redeem("garbage", None, None).unwrap_err(), gapless::session::TicketError::Unknown);
    // Bound to the caller it was issued to: another caller's redeem is
    // refused (and does not use the ticket up), the issuer's succeeds.
    let bound = hub.create(Some("alice")).unwrap();
    let sid = bound.id().to_string();
    let t = hub.migrate(ResumeRequest::new(&sid).owner(Some("alice"))).unwrap().ticket.to_string();
    assert_eq!(hub.redeem(&t, None, Some("bob")).unwrap_err(), gapless::session::TicketError::Foreign);
    assert_eq!(hub.redeem(&t, None, None).unwrap_err(), gapless::session::TicketError::Foreign);
    assert!(hub.redeem(&t, Some(&bound.id()), Some("alice")).is_ok());
    let short =
        Hub::new(HubConfig { ticket_ttl: std::time::Duration::ZERO, ..HubConfig::default() }).unwrap();
    let s = short.create(None).unwrap();
    let t = short.migrate(migration(&s.id().to_string(), None)).unwrap();
    assert_eq!(
        short.redeem(&t.ticket.to_string(), None, None).unwrap_err(),
        gapless::session::TicketError::Expired
    );
}

/// Seed 003's per-stream view, live: a stream cursor that falls behind only
/// *other* streams' evicted events skips them; it lags (explicitly) only
/// when one of its own events was evicted.
#[test]
fn seed_003_stream_cursor_lags_only_on_its_own_events() {
    let (mut p, r) = gapless::ring(RingConfig::new(4, 1 << 20)).unwrap();
    let mine = p.open_stream();
    let other = p.open_stream();
    p.publish(&mine, Bytes::from_static(b"m1")).unwrap(); // 1
    let mut c = r.stream_cursor(mine.id(), Seq(1)).unwrap();
    assert!(matches!(c.try_next().unwrap(), gapless::Next::Event(e) if e.seq == Seq(1)));
    for _ in 0..10 {
        p.publish(&other, Bytes::new()).unwrap(); // 2..=11: evicts 1..=7
    }
    p.publish(&mine, Bytes::from_static(b"m2")).unwrap(); // 12
    match c.try_next().unwrap() {
        gapless::Next::Event(e) => assert_eq!((e.seq, &e.payload[..]), (Seq(12), &b"m2"[..])),
        other => panic!("expected seq 12, got {other:?}"),
    }
    // Now one of ours is evicted unread: an explicit lag, never a skip.
    p.publish(&mine, Bytes::from_static(b"m3")).unwrap(); // 13
    for _ in 0..10 {
        p.publish(&other, Bytes::new()).unwrap();
    }
    let lag = c.try_next().unwrap_err();
    assert_eq!(lag.wanted, Seq(13));
}

/// Seed 000, variant 3, after the evidence left the ring: a finished
/// stream that was never delivered, whose events were all evicted and whose
/// record was reclaimed, still makes a migration cursor above it "not
/// delivered" rather than granting a resume past events the client never got.
#[test]
fn seed_000_reclaimed_undelivered_stream_still_refuses() {
    let hub = hub(4);
    let s = hub.create(None).unwrap();
    let a = s.standalone().clone();
    let lost = s.open_stream().unwrap();
    emit(&s, &lost, 1); // seq 1 on a request stream, never delivered
    s.end_stream(&lost).unwrap();
    // Open and finish many streams so the producer sweeps its directory
    // (reclaiming `lost`, whose only event is evicted).
    for _ in 0..40 {
        let t = s.open_stream().unwrap();
        let seq = emit(&s, &t, 1)[0];
        deliver_to(&s, &t, seq);
        s.end_stream(&t).unwrap();
    }
    emit(&s, &a, 1);
    deliver_to(&s, &a, s.reader().head());
    // The record is kept for a late delivery (bounded), and refuses.
    let head = s.reader().head();
    let r = refusal(migrate(&hub, &s, Some(head)));
    assert!(matches!(r, Refusal::CursorNotDelivered { undelivered: Some(Seq(1)), .. }), "{r:?}");
    // Past the bound on kept records, it is reclaimed and still refuses.
    for _ in 0..600 {
        let t = s.open_stream().unwrap();
        emit(&s, &t, 1); // never delivered
        s.end_stream(&t).unwrap();
    }
    assert!(s.reader().stream(lost.id()).is_none(), "record reclaimed");
    emit(&s, &a, 1);
    let head = s.reader().head();
    deliver_to(&s, &a, head);
    let r = refusal(migrate(&hub, &s, Some(head)));
    assert!(matches!(r, Refusal::CursorNotDelivered { undelivered: Some(Seq(1)), .. }), "{r:?}");
}

/// Seed 003 on a finished request stream whose record was reclaimed (it
/// ended, every event was delivered, then evicted): a resume at its last
/// event is an empty resume that ends at once (nothing is missing); at an
/// earlier event it is refused with the loss counted; a seq outside the
/// stream's span is not its event; past the bound on remembered streams
/// the engine cannot tell and refuses (`Missing::Unknown`, 0 on the wire).
#[cfg(feature = "tokio")]
#[tokio::test]
async fn seed_003_resume_of_a_reclaimed_finished_stream() {
    let hub = hub(4);
    let s = hub.create(None).unwrap();
    let sid = s.id().to_string();
    let done = s.open_stream().unwrap();
    let seqs = emit(&s, &done, 3); // 1, 2, 3
    deliver_to(&s, &done, seqs[2]);
    s.end_stream(&done).unwrap();
    let churn = |n: usize| {
        for _ in 0..n {
            let t = s.open_stream().unwrap();
            let seq = emit(&s, &t, 1)[0];
            deliver_to(&s, &t, seq);
            s.end_stream(&t).unwrap();
        }
    };
    churn(40);
    assert!(s.reader().stream(done.id()).is_none(), "record reclaimed");
    let id = |seq: Seq| s.event_id(done.id(), seq).to_string();

    // At the last event: 200, nothing to replay, and the stream is over.
    let r = match resume_stream(&hub, Some(&sid), &id(seqs[2])) {
        Ok(r) => r,
        Err(r) => panic!("expected an empty resume, got {r:?}"),
    };
    assert!(r.snapshot.is_empty());
    assert_eq!(r.stream, Some(done.id()));
    let mut sub = r.into_subscription();
    assert!(sub.recv().await.is_none(), "the finished stream ends at once");

    // Before it: its later events are gone, and that is said.
    let r = refusal(resume_stream(&hub, Some(&sid), &id(seqs[0])));
    let oldest = s.reader().oldest();
    assert!(
        matches!(r, Refusal::GapNotCovered { missing: Missing::AtLeast(1), oldest: o, .. } if o == oldest),
        "{r:?}"
    );
    // A seq that is not the stream's (published later, on another stream).
    let other = s.reader().oldest();
    let r = refusal(resume_stream(&hub, Some(&sid), &id(Seq(other.0 - 1))));
    assert!(matches!(r, Refusal::NamespaceMismatch { .. }), "{r:?}");

    // Hundreds of streams later its tombstone is gone: refused, uncounted.
    churn(600);
    let r = refusal(resume_stream(&hub, Some(&sid), &id(seqs[2])));
    let oldest = s.reader().oldest();
    assert!(
        matches!(r, Refusal::GapNotCovered { missing: Missing::Unknown, oldest: o, .. } if o == oldest),
        "{r:?}"
    );
}
