//! The guard's rule, one test per row of the table in the module docs,
//! then its marks, losses and ends, then a model run over many streams.

use super::*;

const T: &str = "task-1";

/// Hands `seq` to the guard and, if it is new, processes it at once (the
/// one-at-a-time client); returns the verdict's seq and whether it was
/// processed.
fn take(g: &mut TaskStreamGuard, seq: u64) -> Result<(u64, bool), EventError> {
    match g.on_event(T, seq)? {
        Verdict::Process(t) => Ok((g.processed(t).unwrap(), true)),
        Verdict::Duplicate(s) => Ok((s, false)),
    }
}

fn ticket(g: &mut TaskStreamGuard, seq: u64) -> Ticket {
    match g.on_event(T, seq) {
        Ok(Verdict::Process(t)) => t,
        other => panic!("seq {seq}: {other:?}"),
    }
}

#[test]
fn row_1_an_event_of_another_task_is_refused() {
    let mut g = TaskStreamGuard::new(T);
    assert_eq!(
        g.on_event("task-2", 0),
        Err(EventError::WrongTask { expected: T.to_owned(), got: "task-2".to_owned() })
    );
    assert_eq!(take(&mut g, 0), Ok((0, true)), "nothing was recorded");
}

#[test]
fn row_2_an_event_after_the_end_is_refused() {
    let mut g = TaskStreamGuard::new(T);
    take(&mut g, 0).unwrap();
    g.on_end().unwrap();
    assert_eq!(g.on_event(T, 1), Err(EventError::AfterEnd { seq: 1 }));
    assert_eq!(g.on_event(T, 0), Err(EventError::AfterEnd { seq: 0 }));
    assert_eq!(g.new_stream(), Some(0), "a new stream may follow the task again");
    assert_eq!(take(&mut g, 1), Ok((1, true)));
}

#[test]
fn row_3_a_seq_not_above_the_streams_last_is_a_regress() {
    let mut g = TaskStreamGuard::new(T);
    for s in 0..3 {
        take(&mut g, s).unwrap();
    }
    // A repeat of a processed event on the same stream: still refused.
    assert_eq!(g.on_event(T, 2), Err(EventError::Regress { last: 2, got: 2 }));
    assert_eq!(g.on_event(T, 0), Err(EventError::Regress { last: 2, got: 0 }));
    // A repeat of one let through but not processed yet.
    let held = ticket(&mut g, 3);
    assert_eq!(g.on_event(T, 3), Err(EventError::Regress { last: 3, got: 3 }));
    assert_eq!(g.processed(held), Ok(3));
    assert_eq!(take(&mut g, 4), Ok((4, true)), "the stream goes on");
    // Duplicates after a reconnect rise; a step back among them is a regress too.
    g.new_stream();
    assert_eq!(take(&mut g, 3), Ok((3, false)));
    assert_eq!(g.on_event(T, 1), Err(EventError::Regress { last: 3, got: 1 }));
}

#[test]
fn row_4_a_processed_seq_after_a_reconnect_is_a_duplicate() {
    let mut g = TaskStreamGuard::new(T);
    for s in 0..5 {
        take(&mut g, s).unwrap();
    }
    assert_eq!(g.new_stream(), Some(4));
    // A server that replays from earlier than `after`: every repeat is skipped.
    for s in 2..=4 {
        assert_eq!(g.on_event(T, s), Ok(Verdict::Duplicate(s)));
    }
    assert_eq!(take(&mut g, 5), Ok((5, true)));
    assert_eq!(g.after(), Some(5));
}

#[test]
fn row_5_the_next_seq_is_processed_and_moves_the_cursor_only_when_marked() {
    let mut g = TaskStreamGuard::new(T);
    assert_eq!(g.new_stream(), None);
    let t = ticket(&mut g, 0);
    assert_eq!(t.seq(), 0);
    assert_eq!(g.after(), None, "let through is not processed");
    assert_eq!(g.processed(t), Ok(0));
    assert_eq!(g.after(), Some(0));
    // The application failed on seq 1: its ticket is dropped, the cursor stays.
    drop(ticket(&mut g, 1));
    assert_eq!(g.after(), Some(0));
    assert_eq!(g.new_stream(), Some(0), "the resume asks for seq 1 again");
    assert_eq!(take(&mut g, 1), Ok((1, true)));
}

#[test]
fn row_6_a_hole_is_a_gap_and_records_nothing() {
    let mut g = TaskStreamGuard::new(T);
    take(&mut g, 0).unwrap();
    assert_eq!(g.on_event(T, 3), Err(EventError::Gap { expected: 1, got: 3 }));
    assert_eq!(g.on_event(T, 4), Err(EventError::Gap { expected: 1, got: 4 }), "refused until resumed");
    assert_eq!(g.after(), Some(0));
    assert_eq!(g.new_stream(), Some(0));
    assert_eq!(take(&mut g, 1), Ok((1, true)), "the resume fills the hole");
    // On a resumed stream the first event must be after + 1 (or a duplicate).
    g.new_stream();
    assert_eq!(g.on_event(T, 3), Err(EventError::Gap { expected: 2, got: 3 }));
}

#[test]
fn a_late_joiner_without_a_cursor_sees_the_missing_start() {
    // Without `after` the server starts at its earliest kept event, here 40.
    let mut g = TaskStreamGuard::new(T);
    let e = g.on_event(T, 40).unwrap_err();
    assert_eq!(e, EventError::Gap { expected: 0, got: 40 });
    let loss = e.loss().unwrap();
    assert_eq!((loss.first_missing, loss.last_missing, loss.count()), (0, 39, 40));
    assert_eq!(g.accept_loss(loss), Ok(39));
    assert_eq!(take(&mut g, 40), Ok((40, true)), "the same stream goes on");
    assert_eq!((g.after(), g.lost()), (Some(40), 40));
    assert_eq!(EventError::Regress { last: 1, got: 0 }.loss(), None);
    assert_eq!(EventError::Gap { expected: 5, got: 5 }.loss(), None, "not a gap");
}

#[test]
fn a_reorder_is_refused_as_a_gap_at_the_early_event() {
    let mut g = TaskStreamGuard::new(T);
    for s in 0..=5 {
        take(&mut g, s).unwrap();
    }
    // The server sends 7 before 6.
    assert_eq!(g.on_event(T, 7), Err(EventError::Gap { expected: 6, got: 7 }));
    assert_eq!(take(&mut g, 6), Ok((6, true)));
    // 7 was refused; a resume after 6 gets it.
    assert_eq!(g.new_stream(), Some(6));
    assert_eq!(take(&mut g, 7), Ok((7, true)));
}

#[test]
fn tickets_are_processed_in_seq_order() {
    let mut g = TaskStreamGuard::new(T);
    let (t0, t1, t2) = (ticket(&mut g, 0), ticket(&mut g, 1), ticket(&mut g, 2));
    assert_eq!(g.processed(t1), Err(ProcessedError::Skipped { expected: 0, got: 1 }));
    assert_eq!(g.after(), None);
    assert_eq!(g.processed(t0), Ok(0));
    // `t1` was consumed by the refused call: its event is lost to this
    // pipeline, so `t2` cannot pass it, and the end is refused.
    assert_eq!(g.processed(t2), Err(ProcessedError::Skipped { expected: 1, got: 2 }));
    assert_eq!(g.on_end(), Err(EndError::Unprocessed { first: 1, last: 2 }));
    // A ticket held across a reconnect, its event sent again and processed twice.
    g.new_stream();
    let (old, new) = (ticket(&mut g, 1), {
        g.new_stream();
        ticket(&mut g, 1)
    });
    assert_eq!(g.processed(new), Ok(1));
    assert_eq!(g.processed(old), Err(ProcessedError::Already { cursor: 1, seq: 1 }));
}

#[test]
fn the_end_needs_every_event_let_through_processed() {
    let mut g = TaskStreamGuard::new(T);
    assert_eq!(g.on_end(), Ok(()), "a task without events");
    let mut g = TaskStreamGuard::new(T);
    let held = ticket(&mut g, 0);
    assert_eq!(g.on_end(), Err(EndError::Unprocessed { first: 0, last: 0 }));
    assert_eq!(g.on_event(T, 1).map(|_| ()), Ok(()), "the refused end recorded nothing");
    let mut g = TaskStreamGuard::resume_from(T, 9);
    assert_eq!(take(&mut g, 10), Ok((10, true)));
    drop(ticket(&mut g, 11));
    assert_eq!(g.on_end(), Err(EndError::Unprocessed { first: 11, last: 11 }));
    assert_eq!(g.new_stream(), Some(10));
    assert_eq!(take(&mut g, 11), Ok((11, true)));
    assert_eq!(g.on_end(), Ok(()));
    drop(held);
}

#[test]
fn events_gone_names_the_loss_from_the_next_seq() {
    // At the opening, with a cursor.
    let g = TaskStreamGuard::resume_from(T, 9);
    assert_eq!(g.after(), Some(9));
    assert_eq!(g.on_events_gone(12), Ok(Loss { first_missing: 10, last_missing: 11 }));
    // Without a cursor (a reader that fell behind from the start).
    let g = TaskStreamGuard::new(T);
    assert_eq!(g.on_events_gone(1), Ok(Loss { first_missing: 0, last_missing: 0 }));
    // While following: from the seq after the last let through.
    let mut g = TaskStreamGuard::new(T);
    take(&mut g, 0).unwrap();
    let held = ticket(&mut g, 1);
    let loss = g.on_events_gone(5).unwrap();
    assert_eq!(loss, Loss { first_missing: 2, last_missing: 4 });
    assert_eq!(
        g.accept_loss(loss),
        Err(LossError::NotNext { expected: 1, first: 2 }),
        "process the held ticket first"
    );
    assert_eq!(g.processed(held), Ok(1));
    assert_eq!(g.accept_loss(loss), Ok(4));
    assert_eq!((g.new_stream(), g.lost()), (Some(4), 3));
    assert_eq!(take(&mut g, 5), Ok((5, true)));
}

#[test]
fn events_gone_with_nothing_missing_is_a_server_fault() {
    let g = TaskStreamGuard::resume_from(T, 9);
    assert_eq!(g.on_events_gone(10), Err(GoneError::NothingMissing { next: 10, earliest: 10 }));
    assert_eq!(g.on_events_gone(3), Err(GoneError::NothingMissing { next: 10, earliest: 3 }));
    assert_eq!(
        TaskStreamGuard::new(T).on_events_gone(0),
        Err(GoneError::NothingMissing { next: 0, earliest: 0 })
    );
    let g = TaskStreamGuard::resume_from(T, u64::MAX);
    assert!(g.on_events_gone(u64::MAX).is_err(), "nothing comes after the last seq");
}

#[test]
fn a_loss_is_accepted_only_by_name_and_only_right_after_the_cursor() {
    let mut g = TaskStreamGuard::resume_from(T, 3);
    assert_eq!(
        g.accept_loss(Loss { first_missing: 5, last_missing: 9 }),
        Err(LossError::NotNext { expected: 4, first: 5 })
    );
    assert_eq!(
        g.accept_loss(Loss { first_missing: 4, last_missing: 2 }),
        Err(LossError::Inverted { first: 4, last: 2 })
    );
    assert_eq!((g.after(), g.lost()), (Some(3), 0), "refusals change nothing");
    let mut max = TaskStreamGuard::resume_from(T, u64::MAX);
    let loss = Loss { first_missing: u64::MAX, last_missing: u64::MAX };
    assert_eq!(max.accept_loss(loss), Err(LossError::NotNext { expected: u64::MAX, first: u64::MAX }));
    let mut all = TaskStreamGuard::new(T);
    assert_eq!(all.accept_loss(Loss { first_missing: 0, last_missing: u64::MAX }), Ok(u64::MAX));
    assert_eq!(all.lost(), u64::MAX, "saturates");
}

#[test]
fn the_top_seq_neither_overflows_nor_passes() {
    let mut g = TaskStreamGuard::resume_from(T, u64::MAX - 1);
    assert_eq!(take(&mut g, u64::MAX), Ok((u64::MAX, true)));
    assert_eq!(g.on_event(T, u64::MAX), Err(EventError::Regress { last: u64::MAX, got: u64::MAX }));
    g.new_stream();
    assert_eq!(g.on_event(T, u64::MAX), Ok(Verdict::Duplicate(u64::MAX)));
    assert_eq!(g.on_end(), Ok(()));
}

/// A server that sends the events `0..n` of a task: each stream replays
/// from its `after` (or from the earliest kept), may start up to `dup`
/// seqs early (duplicates), and may break the order; the connection drops
/// at a random point. The client, one event at a time through the guard,
/// resumes after every drop and every refusal. Whatever the server does,
/// what the client processed is `0..k` in order, each once, and with an
/// honest server it is all of `0..n`.
#[test]
fn model_any_drops_and_repeats_give_every_seq_once_in_order() {
    let mut rng = 0x9e37_79b9_7f4a_7c15_u64;
    let mut rand = move |below: u64| {
        rng ^= rng << 13;
        rng ^= rng >> 7;
        rng ^= rng << 17;
        rng % below.max(1)
    };
    for round in 0..400 {
        let n = rand(60);
        let faulty = round % 4 == 3; // every fourth server skips, repeats or swaps
        let mut g = TaskStreamGuard::new(T);
        let mut processed = vec![];
        let mut streams = 0;
        let ended = loop {
            streams += 1;
            assert!(streams < 10_000, "round {round}: no progress");
            let after = g.new_stream();
            let start = after.map_or(0, |a| (a + 1).saturating_sub(rand(3)));
            let mut sent: Vec<u64> = (start..n).collect();
            if faulty && sent.len() > 2 {
                let i = rand(sent.len() as u64 - 1) as usize;
                match rand(3) {
                    0 => drop(sent.remove(i)),
                    1 => sent.insert(i + 1, sent[i]),
                    _ => sent.swap(i, i + 1),
                }
            }
            let cut = rand(sent.len() as u64 + 2) as usize; // past the end: no cut
            let mut refused = false;
            for &seq in sent.iter().take(cut) {
                match take(&mut g, seq) {
                    Ok((s, true)) => processed.push(s),
                    Ok((_, false)) => {}
                    Err(EventError::Regress { .. }) => {} // skip it
                    Err(EventError::Gap { .. }) => {
                        refused = true; // drop the stream, resume
                        break;
                    }
                    Err(e) => panic!("round {round}: {e}"),
                }
            }
            if !refused && cut > sent.len() {
                break g.on_end();
            }
        };
        assert_eq!(ended, Ok(()), "round {round}");
        assert_eq!(processed, (0..n).collect::<Vec<_>>(), "round {round} (faulty: {faulty})");
        assert_eq!(g.lost(), 0);
    }
}

#[test]
fn errors_display() {
    let cases: [(&dyn std::error::Error, &str); 10] = [
        (
            &EventError::WrongTask { expected: "a".into(), got: "b".into() },
            "an event of task \"b\" on the stream of task \"a\"",
        ),
        (&EventError::AfterEnd { seq: 3 }, "task event 3 after the stream's end"),
        (&EventError::Regress { last: 4, got: 2 }, "task event 2 after 4 on one stream: seqs must rise"),
        (&EventError::Gap { expected: 1, got: 3 }, "task event 3 came where 1 was due"),
        (&ProcessedError::Already { cursor: 5, seq: 5 }, "task event 5 is not after the processed cursor 5"),
        (&ProcessedError::Skipped { expected: 1, got: 2 }, "task event 2 marked processed before 1"),
        (
            &EndError::Unprocessed { first: 1, last: 2 },
            "the stream ended with task events 1..=2 not processed",
        ),
        (
            &GoneError::NothingMissing { next: 4, earliest: 4 },
            "events_gone with earliestSeq 4, but 4 is the next needed: nothing is missing",
        ),
        (
            &LossError::NotNext { expected: 4, first: 5 },
            "a loss from task event 5 does not start at 4, right after the cursor",
        ),
        (&Loss { first_missing: 4, last_missing: 9 }, "task events 4..=9 are lost (6 events)"),
    ];
    for (e, text) in cases {
        assert_eq!(e.to_string(), text);
    }
    assert_eq!(LossError::Inverted { first: 4, last: 2 }.to_string(), "a loss from 4 to 2 is inverted");
    assert_eq!(Loss { first_missing: 4, last_missing: 2 }.count(), 0);
}
