//! The resume decision table (`docs/SPEC.md` §4.2), rows 3 to 7, over any
//! store: [`decide`] reads what it needs through [`SessionFacts`], so the
//! in-process session (whose facts are its ring's, read lock-free) and a
//! store kept elsewhere (the Redis store fetches the same facts in one
//! script call) answer every resume with the same refusal and the same
//! numbers. Rows 1 and 2 (a session id, a live session visible to the
//! caller) are the store's own lookup.

use super::session::Session;
use crate::ring::gap::{self, Pending};
use crate::ring::{Missing, Snapshot, SnapshotError, StreamInfo};
use gapless_wire::event_id::{EventId, MalformedReason, ParseError};
use gapless_wire::{ErrorKind, Namespace, Seq, StreamId};
use std::fmt;

/// What a resume wants (the table's two forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// An SSE resume: the cursor's own stream (`Last-Event-ID`).
    Stream,
    /// A WebSocket migration: every event of the session after the cursor,
    /// the cursor being the client's contiguous processed prefix.
    Session,
}

/// A retained event as the table sees it: its stream, and its nonce where
/// the store keeps one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Entry {
    /// The stream it was published on.
    pub stream: StreamId,
    /// Its nonce (the wire id's check); `None` in a store without nonces.
    pub check: Option<u64>,
}

/// What the decision table reads of one live session incarnation. Every
/// answer must come from one consistent state of the session (the ring's
/// are lock-free reads whose races only ever make an answer "evicted";
/// the Redis store's come from one atomic script call).
pub trait SessionFacts {
    /// What a granted resume replays (the in-process store: a pinned
    /// [`Snapshot`]).
    type Replay;

    /// The incarnation's namespace.
    fn namespace(&self) -> Namespace;
    /// How many streams were opened (stream ids are `1..=` this).
    fn streams_opened(&self) -> u64;
    /// The newest seq (0 before the first event).
    fn head(&self) -> Seq;
    /// The oldest retained seq (`head + 1` when none is retained).
    fn oldest(&self) -> Seq;
    /// The retained event `seq`, if it is retained.
    fn entry(&self, seq: Seq) -> Option<Entry>;
    /// A stream's bookkeeping, if its record is kept.
    fn stream(&self, id: StreamId) -> Option<StreamInfo>;
    /// `(first, high)` of a reclaimed, fully delivered stream whose
    /// tombstone is kept.
    fn tombstone(&self, id: StreamId) -> Option<(Seq, Seq)>;
    /// The smallest seq at or below `c` of an event never delivered, if the
    /// store can prove one ([`gap::first_undelivered_at_or_below`]).
    fn first_undelivered_at_or_below(&self, c: Seq) -> Option<Seq>;
    /// Every event of `stream` after `after`, or why not
    /// ([`gap::stream_gap`]'s verdict).
    fn replay_stream(&self, stream: StreamId, after: Seq) -> Result<Self::Replay, SnapshotError>;
    /// Every event after `after`, or why not ([`gap::session_gap`]).
    fn replay_session(&self, after: Seq) -> Result<Self::Replay, SnapshotError>;
    /// Nothing after `after` (a resume at a reclaimed stream's last event).
    fn replay_empty(&self, after: Seq, stream: StreamId) -> Self::Replay;
    /// Whether the store keeps a nonce per event ([`Entry::check`]), so that
    /// its cursors carry checks and a failover's rewrite can be told.
    fn nonces(&self) -> bool;

    /// The highest seq the store is known to have lost in a failover (a
    /// node had seen a head above the store's), if any: a checked cursor
    /// up to it and beyond the head names a lost event. Stores without
    /// failovers have none.
    fn lost_up_to(&self) -> Option<Seq> {
        None
    }

    /// The wire id of retained event `seq` on `stream`, with its check.
    fn event_id(&self, stream: StreamId, seq: Seq) -> EventId {
        let id = EventId::new(self.namespace(), stream, seq);
        match self.entry(seq).and_then(|e| e.check) {
            Some(c) => id.with_check(c),
            None => id,
        }
    }
}

/// A granted decision: what to replay, after which cursor.
#[derive(Debug)]
pub struct Decision<R> {
    /// The parsed cursor (`None` for a migration from "processed nothing").
    pub cursor: Option<EventId>,
    /// The cursor's seq (0 for "processed nothing").
    pub after: Seq,
    /// The stream being resumed, or `None` for the whole session.
    pub stream: Option<StreamId>,
    /// The gap. Empty only when the cursor is at the target's high-water mark.
    pub replay: R,
}

/// Why a resume is refused. Each variant is one row of the table and one
/// [`ErrorKind`] ([`Refusal::kind`]), which carries the HTTP status and the
/// JSON `error` name:
///
/// | variant | HTTP | `error` |
/// |---|---|---|
/// | `ResumeRequiresSession` | 400 | `resume_requires_session` |
/// | `UnknownSession` | 404 | `unknown_session` |
/// | `MalformedCursor` | 400 | `malformed_cursor` |
/// | `NamespaceMismatch` | 409 | `namespace_mismatch` |
/// | `HistoryRewritten` | 409 | `history_rewritten` |
/// | `CursorAhead` | 409 | `cursor_ahead` |
/// | `CursorNotDelivered` | 409 | `cursor_not_delivered` |
/// | `GapNotCovered` | 409 | `gap_not_covered` |
/// | `StoreUnavailable` | 503 | `store_unavailable` |
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// A cursor without a session id: never create a session implicitly.
    ResumeRequiresSession,
    /// No such session (or expired, deleted, bound to another caller).
    UnknownSession,
    /// The cursor is not an event id.
    MalformedCursor {
        /// What is wrong with it.
        reason: MalformedReason,
    },
    /// The cursor is an event id of another session, an older incarnation,
    /// or a stream the event does not belong to.
    NamespaceMismatch {
        /// The cursor as given.
        cursor: String,
    },
    /// The cursor carries a check (its event's nonce in a store that keeps
    /// one) and the store's event at its seq has another nonce, or the
    /// store's head is below its seq: the store lost the event in a failover
    /// and may have reused the seq. Never from the in-process store.
    HistoryRewritten {
        /// The cursor.
        cursor: EventId,
        /// The store's newest seq.
        head: Seq,
    },
    /// The cursor names an event that was never emitted.
    CursorAhead {
        /// The cursor.
        cursor: EventId,
        /// The newest seq of the session.
        head: Seq,
    },
    /// The cursor claims an event that was never delivered (for a
    /// migration: some event at or below it was never delivered).
    CursorNotDelivered {
        /// The cursor.
        cursor: EventId,
        /// The smallest seq at or below the cursor found never delivered (for
        /// a stream whose record was reclaimed: a seq at or below which one
        /// of its events was never delivered).
        undelivered: Option<Seq>,
    },
    /// Some event of the gap was evicted.
    GapNotCovered {
        /// The cursor (`None` for a migration from "processed nothing").
        cursor: Option<EventId>,
        /// The oldest seq the session retains.
        oldest: Seq,
        /// Event id of `oldest`, when it is a retained event.
        oldest_id: Option<EventId>,
        /// Evicted events of the target after the cursor, and whether that
        /// count is exact, a lower bound or unknown (see [`Missing`]). For a
        /// stream whose record was reclaimed it is `AtLeast(1)` (its events
        /// after the cursor are gone, how many is unknown), or `Unknown`
        /// once even its tombstone was dropped (the newest 256 are kept per
        /// ring): then the engine cannot tell a cursor at the stream's end,
        /// which deserved an empty resume, from one before it.
        missing: Missing,
    },
    /// The session store could not be asked (e.g. Redis is unreachable):
    /// nothing was decided and nothing was created. Never from the
    /// in-process store.
    StoreUnavailable {
        /// What failed, for the log and the error body.
        reason: String,
    },
}

impl Refusal {
    /// The contract's kind of this refusal.
    pub fn kind(&self) -> ErrorKind {
        match self {
            Refusal::ResumeRequiresSession => ErrorKind::ResumeRequiresSession,
            Refusal::UnknownSession => ErrorKind::UnknownSession,
            Refusal::MalformedCursor { .. } => ErrorKind::MalformedCursor,
            Refusal::NamespaceMismatch { .. } => ErrorKind::NamespaceMismatch,
            Refusal::CursorAhead { .. } => ErrorKind::CursorAhead,
            Refusal::CursorNotDelivered { .. } => ErrorKind::CursorNotDelivered,
            Refusal::GapNotCovered { .. } => ErrorKind::GapNotCovered,
            Refusal::HistoryRewritten { .. } => ErrorKind::HistoryRewritten,
            Refusal::StoreUnavailable { .. } => ErrorKind::StoreUnavailable,
        }
    }

    /// The HTTP status for this refusal (the kind's).
    pub fn http_status(&self) -> u16 {
        self.kind().http_status()
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Refusal::ResumeRequiresSession => f.write_str("a resume cursor needs a session id"),
            Refusal::UnknownSession => f.write_str("unknown session"),
            Refusal::MalformedCursor { reason } => write!(f, "malformed cursor: {reason}"),
            Refusal::NamespaceMismatch { .. } => {
                f.write_str("cursor belongs to another session, incarnation or stream")
            }
            Refusal::HistoryRewritten { cursor, head } => write!(
                f,
                "the event of cursor {cursor} is no longer the store's (lost in a failover; newest seq is {head})"
            ),
            Refusal::StoreUnavailable { reason } => write!(f, "the session store is unavailable: {reason}"),
            Refusal::CursorAhead { cursor, head } => {
                write!(f, "cursor {cursor} is ahead of the newest event {head}")
            }
            Refusal::CursorNotDelivered { cursor, .. } => {
                write!(f, "cursor {cursor} names an event that was never delivered")
            }
            Refusal::GapNotCovered { cursor, oldest, missing, .. } => {
                let after = cursor.map_or_else(|| "the start".to_owned(), |c| c.to_string());
                write!(f, "{missing} event(s) after {after} were evicted; oldest retained seq is {oldest}")
            }
        }
    }
}

impl std::error::Error for Refusal {}

/// Rows 3 to 7 of the decision table, in order, on a live session
/// visible to the caller: the cursor's form, its namespace and stream (and
/// check), ahead, delivered, and coverage.
pub fn decide<F: SessionFacts>(
    facts: &F,
    cursor: Option<&str>,
    target: Target,
) -> Result<Decision<F::Replay>, Refusal> {
    // Row 3.
    let cursor = match (cursor, target) {
        (None, Target::Session) => None,
        (None, Target::Stream) => return Err(Refusal::MalformedCursor { reason: MalformedReason::Empty }),
        (Some(c), _) => match EventId::parse(c) {
            Ok(id) => Some(id),
            Err(ParseError::Malformed(reason)) => return Err(Refusal::MalformedCursor { reason }),
            Err(ParseError::ForeignTag) => return Err(Refusal::NamespaceMismatch { cursor: c.to_owned() }),
        },
    };
    if let Some(c) = &cursor {
        // Row 4: namespace (session + incarnation), then stream membership.
        let foreign = || Refusal::NamespaceMismatch { cursor: c.to_string() };
        if c.ns != facts.namespace() || c.seq.0 == 0 {
            return Err(foreign());
        }
        let head = facts.head();
        let entry = if c.seq <= head { facts.entry(c.seq) } else { None };
        // The event the client saw is still the store's: a store with
        // nonces minted the cursor with its event's check, so another nonce
        // at its seq means the store lost it and reused the seq; a seq
        // beyond the head that the store is known to have lost is one too
        // (beyond what it lost, the seq was never emitted: row 5). A
        // retained event with the cursor's nonce is the one the client saw,
        // whatever the rest of the cursor claims: the rows below judge that.
        if facts.nonces() {
            let lost = c.seq > head && facts.lost_up_to().is_some_and(|l| c.seq <= l);
            match c.check {
                Some(seen) if lost || entry.is_some_and(|e| e.check != Some(seen)) => {
                    return Err(Refusal::HistoryRewritten { cursor: *c, head })
                }
                None if entry.is_some() => return Err(foreign()),
                _ => {}
            }
        }
        if c.stream.0 > facts.streams_opened() {
            return Err(foreign());
        }
        if c.seq <= head {
            if !belongs(facts, entry, c) {
                return Err(foreign());
            }
        } else {
            // Row 5: never emitted.
            return Err(Refusal::CursorAhead { cursor: *c, head });
        }
    }
    let after = cursor.map_or(Seq(0), |c| c.seq);
    match target {
        Target::Stream => {
            let c = cursor.expect("stream resumes have a cursor");
            // Row 6: the cursor's event must have been delivered.
            if let Some(info) = facts.stream(c.stream) {
                if c.seq > info.delivered {
                    return Err(Refusal::CursorNotDelivered { cursor: c, undelivered: Some(c.seq) });
                }
            }
            // Row 7.
            let replay = match facts.replay_stream(c.stream, c.seq) {
                Ok(replay) => replay,
                // The record was reclaimed (the stream ended, was fully
                // delivered, and all its events left the window). At its
                // last event nothing is missing: an empty resume, which ends
                // at once. Before it, at least its last event is gone (the
                // cursor's position in the stream is unknown: evicted); with
                // no tombstone left, how many is unknown.
                Err(SnapshotError::UnknownStream { .. }) => match facts.tombstone(c.stream) {
                    Some((_, high)) if high == c.seq => facts.replay_empty(c.seq, c.stream),
                    tomb => {
                        let missing = if tomb.is_some() { Missing::AtLeast(1) } else { Missing::Unknown };
                        return Err(gap_not_covered(facts, cursor, facts.oldest(), missing));
                    }
                },
                Err(e) => return Err(gap_refusal(facts, Some(c), e)),
            };
            Ok(Decision { cursor, after, stream: Some(c.stream), replay })
        }
        Target::Session => {
            // Row 6, migration form.
            if let Some(u) = facts.first_undelivered_at_or_below(after) {
                let c = cursor.expect("seq 0 has nothing at or below it");
                return Err(Refusal::CursorNotDelivered { cursor: c, undelivered: Some(u) });
            }
            // Row 7.
            match facts.replay_session(after) {
                Ok(replay) => Ok(Decision { cursor, after, stream: None, replay }),
                Err(e) => Err(gap_refusal(facts, cursor, e)),
            }
        }
    }
}

/// Whether cursor `c` (seq <= head) names an event of its stream. Exact for
/// retained events; for evicted ones the stream's record (or, once it was
/// reclaimed, its tombstone) must span the seq. A reclaimed stream whose
/// tombstone is gone too cannot be checked and is accepted: row 7 then
/// refuses the gap.
fn belongs<F: SessionFacts>(facts: &F, entry: Option<Entry>, c: &EventId) -> bool {
    if let Some(e) = entry {
        return e.stream == c.stream;
    }
    match facts.stream(c.stream) {
        Some(info) => info.first.0 != 0 && info.first <= c.seq && c.seq <= info.high,
        None => match facts.tombstone(c.stream) {
            Some((first, high)) => first.0 != 0 && first <= c.seq && c.seq <= high,
            None => true,
        },
    }
}

/// `GapNotCovered`, naming `oldest` by its event id when it is retained.
fn gap_not_covered<F: SessionFacts>(
    facts: &F,
    cursor: Option<EventId>,
    oldest: Seq,
    missing: Missing,
) -> Refusal {
    let oldest_id = facts.entry(oldest).map(|e| facts.event_id(e.stream, oldest));
    Refusal::GapNotCovered { cursor, oldest, oldest_id, missing }
}

fn gap_refusal<F: SessionFacts>(facts: &F, cursor: Option<EventId>, e: SnapshotError) -> Refusal {
    match e {
        SnapshotError::Evicted { oldest, missing, .. } => gap_not_covered(facts, cursor, oldest, missing),
        // A reclaimed stream (stream resumes handle their tombstones first):
        // it ended and every event of it was evicted; how many after the
        // cursor is unknown.
        SnapshotError::UnknownStream { .. } => {
            gap_not_covered(facts, cursor, facts.oldest(), Missing::Unknown)
        }
        SnapshotError::Ahead { head } => match cursor {
            Some(cursor) => Refusal::CursorAhead { cursor, head },
            None => unreachable!("seq 0 is never ahead"),
        },
    }
}

/// The in-process store's facts: its ring's, read lock-free.
impl SessionFacts for Session {
    type Replay = Snapshot;

    fn namespace(&self) -> Namespace {
        Session::namespace(self)
    }

    fn streams_opened(&self) -> u64 {
        self.reader().streams_opened()
    }

    fn head(&self) -> Seq {
        self.reader().head()
    }

    fn oldest(&self) -> Seq {
        self.reader().oldest()
    }

    fn entry(&self, seq: Seq) -> Option<Entry> {
        self.reader().stream_of(seq).map(|stream| Entry { stream, check: None })
    }

    fn stream(&self, id: StreamId) -> Option<StreamInfo> {
        self.reader().stream(id)
    }

    fn tombstone(&self, id: StreamId) -> Option<(Seq, Seq)> {
        self.reader().tombstone(id)
    }

    fn first_undelivered_at_or_below(&self, c: Seq) -> Option<Seq> {
        if c.0 == 0 {
            return None;
        }
        let reader = self.reader();
        let pending: Vec<Pending> = reader
            .streams()
            .into_iter()
            .filter(|i| i.high > i.delivered)
            .map(|i| Pending { id: i.id, delivered: i.delivered.0, high: i.high.0 })
            .collect();
        // The verdict needs the window from exactly the `oldest` it is
        // given: a window that starts later (or none) hides retained
        // undelivered events, and then a migration past them would be
        // granted. The pin fails only if the producer evicted a chunk after
        // the `oldest` load; then look again (each retry means the producer
        // made progress).
        let (oldest, snap) = loop {
            let oldest = reader.oldest().0;
            if pending.is_empty() {
                break (oldest, None);
            }
            match reader.snapshot(Seq(oldest.saturating_sub(1))) {
                Ok(snap) => break (oldest, Some(snap)),
                Err(SnapshotError::Evicted { .. }) => continue,
                Err(e) => unreachable!("a session snapshot from the window's start: {e:?}"),
            }
        };
        let window =
            snap.iter().flat_map(|s| s.iter().map(|e| (e.seq.0, e.stream, s.prev_in_stream(e.seq.0))));
        gap::first_undelivered_at_or_below(c, &pending, oldest, reader.reclaimed_undelivered(), window)
    }

    fn replay_stream(&self, stream: StreamId, after: Seq) -> Result<Snapshot, SnapshotError> {
        self.reader().snapshot_stream(stream, after)
    }

    fn replay_session(&self, after: Seq) -> Result<Snapshot, SnapshotError> {
        self.reader().snapshot(after)
    }

    fn replay_empty(&self, after: Seq, stream: StreamId) -> Snapshot {
        self.reader().empty_snapshot(after, Some(stream))
    }

    fn nonces(&self) -> bool {
        false
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NS: Namespace = Namespace(0x00ab_34ff_9c01_de77);

    /// A store that keeps a nonce per event, as the Redis store does (§8.4):
    /// seqs 1..=6 published, 3..=6 retained, alternately on streams 1 and
    /// 2, each with nonce `0x100 + seq`; every event delivered. A failover
    /// lost seqs up to `lost_up_to`.
    struct Nonced {
        lost_up_to: Option<Seq>,
    }

    const HEAD: u64 = 6;
    const OLDEST: u64 = 3;

    fn stream_of(seq: u64) -> StreamId {
        StreamId(2 - seq % 2)
    }

    impl SessionFacts for Nonced {
        type Replay = Vec<u64>;
        fn namespace(&self) -> Namespace {
            NS
        }
        fn streams_opened(&self) -> u64 {
            2
        }
        fn head(&self) -> Seq {
            Seq(HEAD)
        }
        fn oldest(&self) -> Seq {
            Seq(OLDEST)
        }
        fn entry(&self, seq: Seq) -> Option<Entry> {
            (OLDEST..=HEAD)
                .contains(&seq.0)
                .then(|| Entry { stream: stream_of(seq.0), check: Some(0x100 + seq.0) })
        }
        fn stream(&self, id: StreamId) -> Option<StreamInfo> {
            let high = Seq(HEAD - (HEAD + id.0) % 2);
            Some(StreamInfo { id, first: Seq(id.0), high, published: 3, delivered: high, ended: false })
        }
        fn tombstone(&self, _: StreamId) -> Option<(Seq, Seq)> {
            None
        }
        fn first_undelivered_at_or_below(&self, _: Seq) -> Option<Seq> {
            None
        }
        fn replay_stream(&self, stream: StreamId, after: Seq) -> Result<Vec<u64>, SnapshotError> {
            let seqs = (after.0 + 1..=HEAD).filter(|&s| stream_of(s) == stream);
            self.replay_session(after).map(|_| seqs.collect())
        }
        fn replay_session(&self, after: Seq) -> Result<Vec<u64>, SnapshotError> {
            match gap::session_gap(after.0, OLDEST) {
                Ok(()) => Ok((after.0 + 1..=HEAD).collect()),
                Err(missing) => {
                    Err(SnapshotError::Evicted { wanted: Seq(after.0 + 1), oldest: Seq(OLDEST), missing })
                }
            }
        }
        fn replay_empty(&self, _: Seq, _: StreamId) -> Vec<u64> {
            Vec::new()
        }
        fn nonces(&self) -> bool {
            true
        }
        fn lost_up_to(&self) -> Option<Seq> {
            self.lost_up_to
        }
    }

    /// The cursor of event `seq` as the store minted it, or with another
    /// check (`Some(n)`), or none (`None`).
    fn cursor(seq: u64, check: Option<u64>) -> String {
        let id = EventId::new(NS, stream_of(seq), Seq(seq));
        match check {
            Some(n) => id.with_check(n).to_string(),
            None => id.to_string(),
        }
    }

    fn minted(seq: u64) -> String {
        cursor(seq, Some(0x100 + seq))
    }

    /// §4.2's nonce row, on a store that keeps nonces (§8.4): a check is
    /// compared while its event is retained, a seq beyond the head is lost
    /// up to what the store is known to have lost and never emitted beyond,
    /// and an unchecked cursor of a retained event is foreign.
    #[test]
    fn the_nonce_row_on_a_store_with_nonces() {
        let kind = |facts: &Nonced, c: &str, target| {
            decide(facts, Some(c), target).map(|d| d.replay).map_err(|r| r.kind())
        };
        let whole = Nonced { lost_up_to: None };
        let failed_over = Nonced { lost_up_to: Some(Seq(HEAD + 2)) };
        for facts in [&whole, &failed_over] {
            // The event the client saw is still the store's: resumed, at
            // the head (nothing after it) and below it.
            assert_eq!(kind(facts, &minted(HEAD), Target::Stream), Ok(vec![]));
            assert_eq!(kind(facts, &minted(HEAD - 1), Target::Stream), Ok(vec![]));
            assert_eq!(kind(facts, &minted(OLDEST), Target::Session), Ok(vec![4, 5, 6]));
            // Another nonce at its seq: the store lost it and reused the seq.
            let r = decide(facts, Some(&cursor(4, Some(0x999))), Target::Stream).unwrap_err();
            assert_eq!(
                r,
                Refusal::HistoryRewritten {
                    cursor: EventId::parse(&cursor(4, Some(0x999))).unwrap(),
                    head: Seq(HEAD)
                }
            );
            // The store minted every retained event's id with a check.
            assert_eq!(kind(facts, &cursor(4, None), Target::Stream), Err(ErrorKind::NamespaceMismatch));
            // An evicted event's check cannot be compared, and its unchecked
            // id is not foreign: the gap decides.
            assert_eq!(kind(facts, &cursor(1, Some(0x999)), Target::Session), Err(ErrorKind::GapNotCovered));
            assert_eq!(kind(facts, &cursor(1, None), Target::Session), Err(ErrorKind::GapNotCovered));
        }
        // Beyond the head: lost (up to what the store is known to have
        // lost), else never emitted.
        assert_eq!(kind(&whole, &minted(HEAD + 1), Target::Stream), Err(ErrorKind::CursorAhead));
        assert_eq!(kind(&failed_over, &minted(HEAD + 1), Target::Stream), Err(ErrorKind::HistoryRewritten));
        assert_eq!(kind(&failed_over, &minted(HEAD + 2), Target::Session), Err(ErrorKind::HistoryRewritten));
        assert_eq!(kind(&failed_over, &minted(HEAD + 3), Target::Stream), Err(ErrorKind::CursorAhead));
        assert_eq!(kind(&failed_over, &cursor(HEAD + 1, None), Target::Stream), Err(ErrorKind::CursorAhead));
    }

    /// The refusal's message (the JSON body's `message`) names what the
    /// client must act on: the cursor and the numbers.
    #[test]
    fn refusals_say_what_is_missing() {
        let c = EventId::new(Namespace(0x00ab_34ff_9c01_de77), StreamId(2), Seq(5));
        let messages = [
            (Refusal::ResumeRequiresSession, "a resume cursor needs a session id"),
            (Refusal::UnknownSession, "unknown session"),
            (Refusal::MalformedCursor { reason: MalformedReason::Empty }, "malformed cursor: empty"),
            (
                Refusal::NamespaceMismatch { cursor: "x-1".into() },
                "cursor belongs to another session, incarnation or stream",
            ),
            (
                Refusal::HistoryRewritten { cursor: c, head: Seq(3) },
                "the event of cursor 00ab34ff9c01de77_2-5 is no longer the store's (lost in a failover; newest seq is 3)",
            ),
            (
                Refusal::StoreUnavailable { reason: "timed out".into() },
                "the session store is unavailable: timed out",
            ),
            (
                Refusal::CursorAhead { cursor: c, head: Seq(4) },
                "cursor 00ab34ff9c01de77_2-5 is ahead of the newest event 4",
            ),
            (
                Refusal::CursorNotDelivered { cursor: c, undelivered: Some(Seq(5)) },
                "cursor 00ab34ff9c01de77_2-5 names an event that was never delivered",
            ),
            (
                Refusal::GapNotCovered { cursor: Some(c), oldest: Seq(9), oldest_id: None, missing: Missing::AtLeast(1) },
                "at least 1 event(s) after 00ab34ff9c01de77_2-5 were evicted; oldest retained seq is 9",
            ),
            (
                Refusal::GapNotCovered { cursor: None, oldest: Seq(4), oldest_id: None, missing: Missing::Exact(3) },
                "3 event(s) after the start were evicted; oldest retained seq is 4",
            ),
        ];
        for (r, text) in messages {
            assert_eq!(r.to_string(), text);
        }
    }
}
