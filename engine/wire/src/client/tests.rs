use super::*;
use crate::ErrorKind;

const NS: Namespace = Namespace(0x00ab_34ff_9c01_de77);

fn ev(stream: u64, seq: u64) -> EventId {
    EventId::new(NS, StreamId(stream), Seq(seq))
}

fn guard() -> ClientGuard {
    let mut g = ClientGuard::new();
    assert_eq!(g.set_session_id("s-7f3a"), Ok(SessionChange::Started));
    g
}

#[test]
fn cursors_advance_only_when_processed() {
    let mut g = guard();
    // Bytes of seq 1 arrived, but the application has not processed it.
    assert_eq!(g.stream_cursor(StreamId(1)), None);
    assert_eq!(g.resume_headers(StreamId(1)), Err(GuardError::NothingToResume { stream: StreamId(1) }));
    assert_eq!(g.upgrade_request().unwrap().body_json(), r#"{"cursor":null}"#);
    g.processed(&ev(1, 1)).unwrap();
    g.processed(&ev(1, 3)).unwrap();
    assert_eq!(g.stream_cursor(StreamId(1)), Some(ev(1, 3)));
    assert_eq!(g.namespace(), Some(NS));
    let h = g.resume_headers(StreamId(1)).unwrap();
    assert_eq!(
        h.pairs(),
        [("Mcp-Session-Id", "s-7f3a".to_owned()), ("Last-Event-ID", "00ab34ff9c01de77_1-3".to_owned())]
    );
    assert_eq!(h.session_id(), "s-7f3a");
}

#[test]
fn contiguous_prefix_with_out_of_order_processing_across_streams() {
    let mut g = guard();
    // Stream 1 holds seqs 1, 3, 6; stream 2 holds 2, 4, 5.
    g.processed(&ev(1, 1)).unwrap();
    g.processed(&ev(1, 3)).unwrap();
    g.processed(&ev(1, 6)).unwrap();
    assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(1), 2));
    assert_eq!(g.migration_cursor(), Some(ev(1, 1)));
    g.processed(&ev(2, 2)).unwrap();
    assert_eq!(g.processed_prefix(), Seq(3), "2 fills the hole, 3 was waiting");
    assert_eq!(g.migration_cursor(), Some(ev(1, 3)));
    g.processed(&ev(2, 5)).unwrap();
    assert_eq!(g.processed_prefix(), Seq(3));
    g.processed(&ev(2, 4)).unwrap_err(); // stream 2 is already at 5
    assert!(!g.is_processed(Seq(4)));
    assert_eq!(g.processed_prefix(), Seq(3));
}

#[test]
fn contiguous_prefix_catches_up_through_a_long_run() {
    let mut g = guard();
    for s in (2..=1000).rev() {
        g.processed(&ev(s, s)).unwrap(); // one stream per event, any order
    }
    assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(0), 999));
    assert_eq!(g.migration_cursor(), None);
    g.processed(&ev(1, 1)).unwrap();
    assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(1000), 0));
    assert_eq!(g.migration_cursor(), Some(ev(1000, 1000)));
    let req = g.upgrade_request().unwrap();
    assert_eq!(req.body_json(), r#"{"cursor":"00ab34ff9c01de77_1000-1000"}"#);
    assert_eq!(req.cursor(), Some(ev(1000, 1000)), "the cursor is the processed prefix");
    assert_eq!(req.session_id(), "s-7f3a");
}

#[test]
fn pending_above_prefix_is_bounded() {
    let mut g = ClientGuard::with_max_pending(3);
    for s in 2..=4 {
        g.processed(&ev(1, s)).unwrap();
    }
    assert_eq!(g.processed(&ev(1, 5)), Err(ProcessError::TooManyPending { limit: 3, waiting_for: Seq(1) }));
    assert_eq!(g.stream_cursor(StreamId(1)), Some(ev(1, 4)), "refused event not recorded");
    g.processed(&ev(2, 1)).unwrap(); // filling the hole is always accepted
    assert_eq!(g.processed_prefix(), Seq(4));
    g.processed(&ev(1, 5)).unwrap();
}

#[test]
fn prefix_reaches_u64_max_without_overflow() {
    let mut g = guard();
    g.processed(&ev(1, u64::MAX)).unwrap();
    assert_eq!(g.pending_above_prefix(), 1);
    g.prefix = Seq(u64::MAX - 2); // as if 1..=MAX-2 were processed
    g.prefix_stream = Some(StreamId(2));
    g.processed(&ev(2, u64::MAX - 1)).unwrap();
    assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(u64::MAX), 0));
    assert_eq!(g.processed(&ev(1, u64::MAX)), Err(ProcessError::Duplicate { seq: Seq(u64::MAX) }));
}

#[test]
fn processed_refusals_change_nothing() {
    let mut g = guard();
    g.processed(&ev(1, 2)).unwrap();
    assert_eq!(g.processed(&ev(1, 2)), Err(ProcessError::Duplicate { seq: Seq(2) }));
    assert_eq!(g.processed(&ev(1, 0)), Err(ProcessError::SeqZero));
    assert_eq!(
        g.processed(&ev(1, 1)),
        Err(ProcessError::StreamRegress { stream: StreamId(1), cursor: Seq(2), seq: Seq(1) })
    );
    let other = EventId::new(Namespace(7), StreamId(1), Seq(1));
    assert_eq!(
        g.processed(&other),
        Err(ProcessError::NamespaceMismatch { expected: NS, found: Namespace(7) })
    );
    assert_eq!((g.processed_prefix(), g.stream_cursor(StreamId(1))), (Seq(0), Some(ev(1, 2))));
    g.processed(&ev(2, 1)).unwrap();
    assert_eq!(g.processed(&ev(3, 1)), Err(ProcessError::Duplicate { seq: Seq(1) }));
}

#[test]
fn cursor_without_session_is_refused() {
    let mut g = ClientGuard::new();
    g.processed(&ev(1, 1)).unwrap();
    assert_eq!(g.resume_headers(StreamId(1)), Err(GuardError::MissingSession));
    assert_eq!(g.resume_headers_for(&ev(1, 1)), Err(GuardError::MissingSession));
    assert_eq!(g.upgrade_request(), Err(GuardError::MissingSession));
    // Learning a session afterwards does not adopt those cursors.
    assert_eq!(g.set_session_id("s-1"), Ok(SessionChange::Started));
    assert_eq!(g.resume_headers(StreamId(1)), Err(GuardError::NothingToResume { stream: StreamId(1) }));
}

#[test]
fn foreign_namespace_is_refused() {
    let mut g = guard();
    let foreign = EventId::new(Namespace(0xdead), StreamId(1), Seq(9));
    assert_eq!(g.resume_headers_for(&foreign), Err(GuardError::NamespaceUnknown));
    g.processed(&ev(1, 1)).unwrap();
    assert_eq!(
        g.resume_headers_for(&foreign),
        Err(GuardError::NamespaceMismatch { expected: NS, found: Namespace(0xdead) })
    );
    assert_eq!(g.resume_headers_for(&ev(1, 1)).unwrap().last_event_id(), &ev(1, 1));
    assert_eq!(g.set_namespace(Namespace(1)), Err(NamespaceMismatch { expected: NS, found: Namespace(1) }));
    assert_eq!(g.set_namespace(NS), Ok(()));
}

#[test]
fn explicit_namespace_binds_before_processing() {
    let mut g = guard();
    g.set_namespace(Namespace(5)).unwrap();
    assert_eq!(
        g.processed(&ev(1, 1)),
        Err(ProcessError::NamespaceMismatch { expected: Namespace(5), found: NS })
    );
    assert_eq!(
        g.resume_headers_for(&ev(1, 1)),
        Err(GuardError::NamespaceMismatch { expected: Namespace(5), found: NS })
    );
}

#[test]
fn new_session_id_clears_cursors() {
    let mut g = guard();
    g.processed(&ev(1, 1)).unwrap();
    g.processed(&ev(2, 3)).unwrap();
    assert_eq!(g.set_session_id("s-7f3a"), Ok(SessionChange::Unchanged));
    assert_eq!(g.stream_cursor(StreamId(1)), Some(ev(1, 1)));
    assert_eq!(g.set_session_id("s-8000"), Ok(SessionChange::Replaced));
    assert_eq!(g.session_id(), Some("s-8000"));
    assert_eq!((g.stream_cursor(StreamId(1)), g.namespace(), g.migration_cursor()), (None, None, None));
    assert_eq!((g.processed_prefix(), g.pending_above_prefix()), (Seq(0), 0));
    // The new incarnation may use another namespace.
    g.processed(&EventId::new(Namespace(9), StreamId(1), Seq(1))).unwrap();
    g.end_session();
    assert_eq!((g.session_id(), g.namespace()), (None, None));
}

#[test]
fn bad_session_ids_are_refused() {
    let mut g = ClientGuard::new();
    assert_eq!(g.set_session_id(""), Err(SessionIdError::Empty));
    assert_eq!(g.set_session_id("a b"), Err(SessionIdError::BadByte { at: 1 }));
    assert_eq!(g.set_session_id("ab\r\nX-Evil: 1"), Err(SessionIdError::BadByte { at: 2 }));
    assert_eq!(g.set_session_id("é"), Err(SessionIdError::BadByte { at: 0 }));
    assert_eq!(g.session_id(), None);
}

#[test]
fn forget_stream_keeps_the_prefix() {
    let mut g = guard();
    g.processed(&ev(1, 1)).unwrap();
    assert_eq!(g.forget_stream(StreamId(1)), Some(ev(1, 1)));
    assert_eq!(g.stream_cursor(StreamId(1)), None);
    assert_eq!(g.migration_cursor(), Some(ev(1, 1)));
}

#[test]
fn empty_replay_while_request_pending_is_loss_suspect() {
    let pending = [RequestId::from(7), RequestId::from("call-2")];
    assert_eq!(
        classify_resume(&ev(1, 2), ResumeResponse::Replayed(&[]), &pending),
        ResumeOutcome::LossSuspect { pending: pending.to_vec() }
    );
    assert_eq!(classify_resume(&ev(1, 2), ResumeResponse::Replayed(&[]), &[]), ResumeOutcome::CaughtUp);
}

#[test]
fn replay_after_cursor_is_resumed() {
    let replay = [ev(1, 3), ev(1, 7), ev(1, 8)];
    assert_eq!(
        classify_resume(&ev(1, 2), ResumeResponse::Replayed(&replay), &[RequestId::from(1)]),
        ResumeOutcome::Resumed { count: 3, last: ev(1, 8) }
    );
}

#[test]
fn bad_replays_are_reported() {
    let c = ev(1, 5);
    let cases = [
        (vec![ev(2, 6)], ReplayFault::Foreign { id: ev(2, 6) }),
        (
            vec![ev(1, 6), EventId::new(Namespace(1), StreamId(1), Seq(7))],
            ReplayFault::Foreign { id: EventId::new(Namespace(1), StreamId(1), Seq(7)) },
        ),
        (vec![ev(1, 5)], ReplayFault::NotAfterCursor { cursor: Seq(5), got: Seq(5) }),
        (vec![ev(1, 2)], ReplayFault::NotAfterCursor { cursor: Seq(5), got: Seq(2) }),
        (vec![ev(1, 6), ev(1, 9), ev(1, 9)], ReplayFault::NotRising { prev: Seq(9), got: Seq(9) }),
    ];
    for (replay, fault) in cases {
        assert_eq!(
            classify_resume(&c, ResumeResponse::Replayed(&replay), &[]),
            ResumeOutcome::BadReplay(fault)
        );
    }
}

#[test]
fn refusals_map_to_kinds() {
    let refused = |status, error| classify_resume(&ev(1, 1), ResumeResponse::Refused { status, error }, &[]);
    assert_eq!(
        refused(409, "gap_not_covered"),
        ResumeOutcome::Refused { status: 409, kind: RefusalKind::Known(ErrorKind::GapNotCovered) }
    );
    assert_eq!(
        refused(404, "unknown_session"),
        ResumeOutcome::Refused { status: 404, kind: RefusalKind::Known(ErrorKind::UnknownSession) }
    );
    assert_eq!(
        refused(500, "boom"),
        ResumeOutcome::Refused { status: 500, kind: RefusalKind::Other("boom".to_owned()) }
    );
    for &k in ErrorKind::ALL {
        let kind = RefusalKind::from_error(k.as_str());
        assert_eq!(kind, RefusalKind::Known(k));
        assert_eq!(kind.known(), Some(k));
        assert_eq!(kind.as_str(), k.as_str());
        assert_eq!(kind.to_string(), k.as_str());
    }
    assert_eq!(RefusalKind::from_error("boom").known(), None);
    assert_eq!(RefusalKind::from_error("").as_str(), "");
}

#[test]
fn first_ws_frame_must_be_cursor_plus_one() {
    let g = guard();
    let mut ws = WsContinuity::new(Seq(10));
    assert_eq!(ws.expected(), Some(Seq(11)));
    assert_eq!(ws.check(Seq(14), &g), WsCheck::Hole { expected: Seq(11), got: Seq(14) });
    assert_eq!(ws.check(Seq(15), &g), WsCheck::Deliver, "one hole is reported once");
    let mut ws = WsContinuity::new(Seq(10));
    assert_eq!(ws.check(Seq(10), &g), WsCheck::Repeat { seq: Seq(10) });
    assert_eq!(ws.check(Seq(11), &g), WsCheck::Deliver);
}

#[test]
fn ws_seqs_rise_by_one_and_processed_frames_are_dropped() {
    let mut g = guard();
    g.processed(&ev(1, 1)).unwrap();
    g.processed(&ev(1, 2)).unwrap();
    let req = g.upgrade_request().unwrap();
    // After sending the upgrade, the application still processed SSE events 3 and 5.
    g.processed(&ev(2, 3)).unwrap();
    g.processed(&ev(1, 5)).unwrap();
    let mut ws = req.ws_continuity();
    let got: Vec<WsCheck> = [3, 4, 5, 6, 6, 5, 8].iter().map(|&s| ws.check(Seq(s), &g)).collect();
    assert_eq!(
        got,
        [
            WsCheck::AlreadyProcessed,
            WsCheck::Deliver,
            WsCheck::AlreadyProcessed,
            WsCheck::Deliver,
            WsCheck::Repeat { seq: Seq(6) },
            WsCheck::Repeat { seq: Seq(5) },
            WsCheck::Hole { expected: Seq(7), got: Seq(8) },
        ]
    );
    let mut fresh = WsContinuity::new(Seq::ZERO);
    assert_eq!(fresh.check(Seq(1), &ClientGuard::new()), WsCheck::Deliver);
    let mut end = WsContinuity::new(Seq(u64::MAX));
    assert_eq!(
        (end.expected(), end.check(Seq(u64::MAX), &g)),
        (None, WsCheck::Repeat { seq: Seq(u64::MAX) })
    );
}

#[test]
fn sse_seqs_strictly_rise() {
    let mut g = guard();
    g.processed(&ev(1, 4)).unwrap();
    g.processed(&ev(2, 6)).unwrap(); // processed earlier over a WebSocket, say
    let mut sse = g.sse_continuity(StreamId(1));
    assert_eq!(sse.check(Seq(4), &g), SseCheck::Repeat { seq: Seq(4) });
    assert_eq!(sse.check(Seq(3), &g), SseCheck::Regress { last: Seq(4), got: Seq(3) });
    assert_eq!(sse.check(Seq(5), &g), SseCheck::Deliver);
    assert_eq!(sse.check(Seq(6), &g), SseCheck::AlreadyProcessed);
    assert_eq!(sse.check(Seq(9), &g), SseCheck::Deliver, "SSE seqs need not be dense");
    assert_eq!(sse.check(Seq(7), &g), SseCheck::Regress { last: Seq(9), got: Seq(7) });
    assert_eq!(g.sse_continuity(StreamId(3)), SseContinuity::new(Seq::ZERO));
}

#[test]
fn errors_display() {
    assert_eq!(GuardError::MissingSession.to_string(), "a cursor without a session id cannot be resumed");
    assert_eq!(
        ProcessError::NamespaceMismatch { expected: NS, found: Namespace(1) }.to_string(),
        "namespace 0000000000000001 is not the session's 00ab34ff9c01de77"
    );
    assert_eq!(SessionIdError::Empty.to_string(), "empty session id");
    assert_eq!(SessionIdError::BadByte { at: 2 }.to_string(), "session id byte 2 is not visible ASCII");
    assert_eq!(RequestId::from("a").to_string(), "\"a\"");
    assert_eq!(RequestId::from(3).to_string(), "3");
}
