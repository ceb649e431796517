//! The resume decision table (`docs/SPEC.md` §4.2), one test row per row of
//! the table, for both of its forms: an SSE resume of one stream
//! (`Hub::resume_stream`) and a WebSocket migration's check of the whole
//! session (`Hub::check_migration`). Every row runs on a fresh fixture, so
//! a row's outcome depends on nothing but its own request.

use bytes::Bytes;
use gapless::{ErrorKind, Hub, HubConfig, Missing, Refusal, Resume, ResumeRequest, RingConfig, Seq, Session};
use std::sync::Arc;

/// A hub whose rings keep 8 events, and one session of owner `alice`:
///
/// | seq | stream | delivered |
/// |---|---|---|
/// | 1, 2, 3 | `a` (a request's stream) | 1 and 2 |
/// | 4 | standalone | no |
///
/// plus a second session `other` (no owner) with one event, and a third,
/// `lossy`, whose stream `b` lost seqs 1..=4 to eviction after its first
/// event was delivered.
struct Fixture {
    hub: Hub,
    s: Arc<Session>,
    a: gapless::StreamId,
    other: Arc<Session>,
    lossy: Arc<Session>,
}

const ALICE: Option<&str> = Some("alice");

fn fixture() -> Fixture {
    let hub = Hub::new(HubConfig { ring: RingConfig::new(8, 1 << 20), ..HubConfig::default() }).unwrap();
    let s = hub.create(ALICE).unwrap();
    let a = s.open_stream().unwrap();
    for i in 1..=3 {
        s.publish(&a, Bytes::from(format!("a{i}"))).unwrap();
    }
    deliver(&s, a.id(), Seq(2));
    s.publish(s.standalone(), Bytes::from_static(b"s4")).unwrap();
    let other = hub.create(None).unwrap();
    let o = other.open_stream().unwrap();
    other.publish(&o, Bytes::from_static(b"o1")).unwrap();
    let lossy = hub.create(None).unwrap();
    let b = lossy.open_stream().unwrap();
    for i in 1..=4 {
        lossy.publish(&b, Bytes::from(format!("b{i}"))).unwrap();
    }
    deliver(&lossy, b.id(), Seq(1));
    for _ in 0..8 {
        lossy.publish(lossy.standalone(), Bytes::from_static(b"x")).unwrap(); // retained 5..=12
    }
    Fixture { hub, s, a: a.id(), other, lossy }
}

/// The transport delivered `stream`'s events up to `seq`.
fn deliver(s: &Session, stream: gapless::StreamId, seq: Seq) {
    let snap = s.reader().snapshot_stream(stream, Seq(0)).unwrap();
    let e = snap.iter().find(|e| e.seq == seq).expect("retained").to_event();
    assert!(s.reader().mark_delivered(&e));
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Form {
    /// `Last-Event-ID` on `GET`: the cursor's own stream.
    Stream,
    /// The upgrade's body cursor: the whole session.
    Migration,
}

/// What a row's request is, built from the fixture.
struct Req {
    session_id: Option<String>,
    cursor: Option<String>,
    owner: Option<&'static str>,
}

#[derive(Debug)]
enum Expect {
    Refused(ErrorKind),
    /// `gap_not_covered` with these numbers.
    Gap {
        oldest: Seq,
        missing: Missing,
    },
    /// Granted, replaying exactly these seqs.
    Resumed(&'static [u64]),
}

struct Row {
    /// The table's row number and what it is about.
    name: &'static str,
    form: Form,
    req: fn(&Fixture) -> Req,
    expect: Expect,
}

fn sid(s: &Session) -> Option<String> {
    Some(s.id().to_string())
}

fn id(s: &Session, stream: gapless::StreamId, seq: u64) -> Option<String> {
    Some(s.event_id(stream, Seq(seq)).to_string())
}

fn rows() -> Vec<Row> {
    use Expect::*;
    use Form::*;
    vec![
        Row {
            name: "1 cursor present, session id absent",
            form: Stream,
            req: |f| Req { session_id: None, cursor: id(&f.s, f.a, 2), owner: ALICE },
            expect: Refused(ErrorKind::ResumeRequiresSession),
        },
        Row {
            name: "1 cursor present, session id absent (migration)",
            form: Migration,
            req: |f| Req { session_id: None, cursor: id(&f.s, f.a, 2), owner: ALICE },
            expect: Refused(ErrorKind::ResumeRequiresSession),
        },
        Row {
            name: "2 session id unknown",
            form: Stream,
            req: |f| Req { session_id: Some("0".repeat(32)), cursor: id(&f.s, f.a, 2), owner: ALICE },
            expect: Refused(ErrorKind::UnknownSession),
        },
        Row {
            name: "2 session id not even one we could issue",
            form: Migration,
            req: |f| Req { session_id: Some("not-an-id".into()), cursor: id(&f.s, f.a, 2), owner: ALICE },
            expect: Refused(ErrorKind::UnknownSession),
        },
        Row {
            name: "2 session bound to another caller",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.a, 2), owner: Some("mallory") },
            expect: Refused(ErrorKind::UnknownSession),
        },
        Row {
            name: "2 session deleted",
            form: Migration,
            req: |f| {
                f.hub.remove(&f.s.id());
                Req { session_id: sid(&f.s), cursor: id(&f.s, f.a, 2), owner: ALICE }
            },
            expect: Refused(ErrorKind::UnknownSession),
        },
        Row {
            name: "3 cursor unparsable",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: Some("garbage".into()), owner: ALICE },
            expect: Refused(ErrorKind::MalformedCursor),
        },
        Row {
            name: "3 cursor empty",
            form: Migration,
            req: |f| Req { session_id: sid(&f.s), cursor: Some(String::new()), owner: ALICE },
            expect: Refused(ErrorKind::MalformedCursor),
        },
        Row {
            name: "3 cursor over 128 bytes",
            form: Stream,
            req: |f| Req {
                session_id: sid(&f.s),
                cursor: Some(format!("t-{}", "1".repeat(127))),
                owner: ALICE,
            },
            expect: Refused(ErrorKind::MalformedCursor),
        },
        Row {
            name: "3 no cursor on a stream resume",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: None, owner: ALICE },
            expect: Refused(ErrorKind::MalformedCursor),
        },
        Row {
            name: "4 cursor of another session",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.other, f.a, 1), owner: ALICE },
            expect: Refused(ErrorKind::NamespaceMismatch),
        },
        Row {
            name: "4 cursor of another session (migration)",
            form: Migration,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.other, f.a, 1), owner: ALICE },
            expect: Refused(ErrorKind::NamespaceMismatch),
        },
        Row {
            name: "4 cursor of an older incarnation",
            form: Stream,
            req: |f| {
                let old = id(&f.s, f.a, 2);
                f.hub.create_with_id(f.s.id(), ALICE).unwrap();
                Req { session_id: sid(&f.s), cursor: old, owner: ALICE }
            },
            expect: Refused(ErrorKind::NamespaceMismatch),
        },
        Row {
            name: "4 cursor naming a stream its event does not belong to",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.s.standalone().id(), 2), owner: ALICE },
            expect: Refused(ErrorKind::NamespaceMismatch),
        },
        Row {
            // Seq 2 was b's, and is evicted: the standalone stream's span
            // (its first event is seq 5) says it was not the standalone's.
            name: "4 cursor naming a stream an evicted event does not belong to",
            form: Stream,
            req: |f| Req {
                session_id: sid(&f.lossy),
                cursor: id(&f.lossy, f.lossy.standalone().id(), 2),
                owner: None,
            },
            expect: Refused(ErrorKind::NamespaceMismatch),
        },
        Row {
            name: "4 cursor of a tag gapless never minted",
            form: Migration,
            req: |f| Req { session_id: sid(&f.s), cursor: Some("abc-2".into()), owner: ALICE },
            expect: Refused(ErrorKind::NamespaceMismatch),
        },
        Row {
            name: "5 seq beyond the head",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.a, 99), owner: ALICE },
            expect: Refused(ErrorKind::CursorAhead),
        },
        Row {
            name: "5 seq beyond the head (migration)",
            form: Migration,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.a, 5), owner: ALICE },
            expect: Refused(ErrorKind::CursorAhead),
        },
        Row {
            name: "6 the cursor's event was never delivered",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.a, 3), owner: ALICE },
            expect: Refused(ErrorKind::CursorNotDelivered),
        },
        Row {
            name: "6 an event at or below the migration cursor was never delivered",
            form: Migration,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.s.standalone().id(), 4), owner: ALICE },
            expect: Refused(ErrorKind::CursorNotDelivered),
        },
        Row {
            name: "7 an event of the stream's gap was evicted",
            form: Stream,
            req: |f| Req {
                session_id: sid(&f.lossy),
                cursor: id(&f.lossy, gapless::StreamId(2), 1),
                owner: None,
            },
            // b's 2, 3, 4 are gone; the cursor is b's delivered mark: exact.
            expect: Gap { oldest: Seq(5), missing: Missing::Exact(3) },
        },
        Row {
            name: "7 an event of the session's gap was evicted",
            form: Migration,
            req: |f| Req {
                session_id: sid(&f.lossy),
                cursor: id(&f.lossy, gapless::StreamId(2), 1),
                owner: None,
            },
            expect: Gap { oldest: Seq(5), missing: Missing::Exact(3) },
        },
        Row {
            name: "8 covered: the rest of the stream",
            form: Stream,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.a, 2), owner: ALICE },
            expect: Resumed(&[3]),
        },
        Row {
            name: "8 covered: everything after a processed prefix",
            form: Migration,
            req: |f| Req { session_id: sid(&f.s), cursor: id(&f.s, f.a, 2), owner: ALICE },
            expect: Resumed(&[3, 4]),
        },
        Row {
            name: "8 covered: a migration that processed nothing",
            form: Migration,
            req: |f| Req { session_id: sid(&f.s), cursor: None, owner: ALICE },
            expect: Resumed(&[1, 2, 3, 4]),
        },
    ]
}

fn decide(f: &Fixture, form: Form, r: &Req) -> Result<Resume, Refusal> {
    let req =
        ResumeRequest { session_id: r.session_id.as_deref(), cursor: r.cursor.as_deref(), owner: r.owner };
    match form {
        Form::Stream => f.hub.resume_stream(req),
        Form::Migration => f.hub.check_migration(req),
    }
}

#[test]
fn every_row_of_the_decision_table() {
    let rows = rows();
    for row in &rows {
        let f = fixture();
        let req = (row.req)(&f);
        let got = decide(&f, row.form, &req);
        match (&row.expect, &got) {
            (Expect::Refused(kind), Err(r)) => {
                assert_eq!(r.kind(), *kind, "row {:?}: {r}", row.name);
                assert_eq!(r.http_status(), kind.http_status(), "row {:?}", row.name);
            }
            (Expect::Gap { oldest, missing }, Err(Refusal::GapNotCovered { oldest: o, missing: m, .. })) => {
                assert_eq!((o, m), (oldest, missing), "row {:?}", row.name);
            }
            (Expect::Resumed(seqs), Ok(r)) => {
                let got: Vec<u64> = r.snapshot.iter().map(|e| e.seq.0).collect();
                assert_eq!(got, *seqs, "row {:?}", row.name);
            }
            (want, got) => panic!("row {:?}: expected {want:?}, got {got:?}", row.name),
        }
    }
    // Every kind of the table has a row, in both forms where it applies.
    for kind in [
        ErrorKind::ResumeRequiresSession,
        ErrorKind::UnknownSession,
        ErrorKind::MalformedCursor,
        ErrorKind::NamespaceMismatch,
        ErrorKind::CursorAhead,
        ErrorKind::CursorNotDelivered,
    ] {
        for form in [Form::Stream, Form::Migration] {
            assert!(
                rows.iter().any(|r| r.form == form && matches!(r.expect, Expect::Refused(k) if k == kind)),
                "no {form:?} row for {kind}"
            );
        }
    }
}
