//! The resume decision table (SPEC §4.2).
//!
//! [`Hub::decide`] takes a resume request and returns exactly one
//! [`Decision`], checking the table's rows in order. The HTTP mapping sits
//! next to the type, in [`Refusal::http_status`] and [`Refusal::error_kind`],
//! so a transport maps each variant in one place.

use crate::event_id::{EventId, MalformedReason, ParseError};
use crate::session::{Hub, Session, SessionError};
use crate::{Seq, Snapshot, SnapshotError, StreamId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// What a resume wants.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ResumeTarget {
    /// An SSE resume: the cursor's own stream (`Last-Event-ID`).
    Stream,
    /// A WebSocket migration: every event of the session after the cursor,
    /// the cursor being the client's contiguous processed prefix.
    Session,
}

/// A resume request as it arrives.
#[derive(Clone, Copy, Debug)]
pub struct ResumeRequest<'a> {
    /// `Mcp-Session-Id` (or the upgrade path's id), if any.
    pub session_id: Option<&'a str>,
    /// The cursor (an event id). For a migration, `None` means "processed
    /// nothing" (cursor seq 0); for a stream resume a missing cursor is
    /// malformed (a GET without `Last-Event-ID` is not a resume).
    pub cursor: Option<&'a str>,
    /// Stream or whole session.
    pub target: ResumeTarget,
    /// The caller identity the session must be bound to (`None` for none).
    pub owner: Option<&'a str>,
}

/// Why a resume is refused. Each variant maps to one HTTP status and one
/// JSON `error` kind:
///
/// | variant | HTTP | `error` |
/// |---|---|---|
/// | `ResumeRequiresSession` | 400 | `resume_requires_session` |
/// | `UnknownSession` | 404 | `unknown_session` |
/// | `MalformedCursor` | 400 | `malformed_cursor` |
/// | `NamespaceMismatch` | 409 | `namespace_mismatch` |
/// | `CursorAhead` | 409 | `cursor_ahead` |
/// | `CursorNotDelivered` | 409 | `cursor_not_delivered` |
/// | `GapNotCovered` | 409 | `gap_not_covered` |
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
        /// Evicted events of the target after the cursor (see
        /// [`SnapshotError::Evicted`] for when it is a lower bound). For a
        /// stream whose record was reclaimed it is 1 (its events after the
        /// cursor are gone, how many is unknown), or 0 once even its
        /// tombstone was dropped (the newest 256 are kept per ring): then
        /// the engine cannot tell a cursor at the stream's end, which
        /// deserved an empty resume, from one before it.
        missing: u64,
    },
}

impl Refusal {
    /// The HTTP status for this refusal.
    pub fn http_status(&self) -> u16 {
        match self {
            Refusal::ResumeRequiresSession | Refusal::MalformedCursor { .. } => 400,
            Refusal::UnknownSession => 404,
            _ => 409,
        }
    }

    /// The JSON `error` kind for this refusal.
    pub fn error_kind(&self) -> &'static str {
        match self {
            Refusal::ResumeRequiresSession => "resume_requires_session",
            Refusal::UnknownSession => "unknown_session",
            Refusal::MalformedCursor { .. } => "malformed_cursor",
            Refusal::NamespaceMismatch { .. } => "namespace_mismatch",
            Refusal::CursorAhead { .. } => "cursor_ahead",
            Refusal::CursorNotDelivered { .. } => "cursor_not_delivered",
            Refusal::GapNotCovered { .. } => "gap_not_covered",
        }
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

/// A granted resume: the pinned gap, to be followed by live events of the
/// same target.
#[derive(Debug)]
pub struct Resume {
    /// The session.
    pub session: Arc<Session>,
    /// The parsed cursor (`None` for a migration from "processed nothing").
    pub cursor: Option<EventId>,
    /// The cursor's seq (0 for "processed nothing").
    pub after: Seq,
    /// The stream being resumed, or `None` for the whole session.
    pub stream: Option<StreamId>,
    /// The gap, pinned. Empty only when the cursor is at the target's
    /// high-water mark.
    pub snapshot: Snapshot,
}

/// The outcome of a resume request: exactly one row of the table.
#[derive(Debug)]
pub enum Decision {
    /// Deliver the snapshot, then live.
    Resume(Resume),
    /// Refused, with what the caller needs to explain it.
    Refused(Refusal),
}

impl Hub {
    /// Decides a resume request per SPEC §4.2, checking in the table's order.
    pub fn decide(&self, req: ResumeRequest<'_>) -> Decision {
        match self.decide_inner(req) {
            Ok(r) => Decision::Resume(r),
            Err(r) => Decision::Refused(r),
        }
    }

    fn decide_inner(&self, req: ResumeRequest<'_>) -> Result<Resume, Refusal> {
        // Row 1: a resume without a session id never creates one.
        let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
        // Row 2.
        let session = self.get_str(sid, req.owner).map_err(|e| match e {
            SessionError::Unknown | SessionError::Expired { .. } => Refusal::UnknownSession,
            _ => Refusal::UnknownSession,
        })?;
        self.touch(&session);
        // Row 3.
        let cursor = match (req.cursor, req.target) {
            (None, ResumeTarget::Session) => None,
            (None, ResumeTarget::Stream) => {
                return Err(Refusal::MalformedCursor { reason: MalformedReason::Empty })
            }
            (Some(c), _) => match EventId::parse(c) {
                Ok(id) => Some(id),
                Err(ParseError::Malformed(reason)) => return Err(Refusal::MalformedCursor { reason }),
                Err(ParseError::ForeignTag) => {
                    return Err(Refusal::NamespaceMismatch { cursor: c.to_owned() })
                }
            },
        };
        let reader = session.reader();
        if let Some(c) = &cursor {
            // Row 4: namespace (session + incarnation), then stream membership.
            let foreign = || Refusal::NamespaceMismatch { cursor: c.to_string() };
            if c.ns != session.namespace() || c.seq.0 == 0 || c.stream.0 > reader.streams_opened() {
                return Err(foreign());
            }
            let head = reader.head();
            if c.seq <= head {
                if !belongs(&session, c) {
                    return Err(foreign());
                }
            } else {
                // Row 5: never emitted.
                return Err(Refusal::CursorAhead { cursor: *c, head });
            }
        }
        let after = cursor.map_or(Seq(0), |c| c.seq);
        match req.target {
            ResumeTarget::Stream => {
                let c = cursor.expect("stream resumes have a cursor");
                // Row 6: the cursor's event must have been delivered.
                if let Some(info) = reader.stream(c.stream) {
                    if c.seq > info.delivered {
                        return Err(Refusal::CursorNotDelivered { cursor: c, undelivered: Some(c.seq) });
                    }
                }
                // Row 7.
                let snapshot = match reader.snapshot_stream(c.stream, c.seq) {
                    Ok(snapshot) => snapshot,
                    // The record was reclaimed (the stream ended, was fully
                    // delivered, and all its events left the ring). At its
                    // last event nothing is missing: an empty resume, which
                    // ends at once. Before it, at least its last event is
                    // gone (the cursor's position in the stream is unknown:
                    // evicted); with no tombstone left, how many is unknown.
                    Err(SnapshotError::UnknownStream { .. }) => match reader.shared.tombstone(c.stream) {
                        Some((_, high)) if high == c.seq.0 => {
                            Snapshot::empty(crate::sync::Arc::clone(&reader.shared), c.seq.0, Some(c.stream))
                        }
                        tomb => {
                            let missing = u64::from(tomb.is_some());
                            return Err(gap_not_covered(&session, cursor, reader.oldest(), missing));
                        }
                    },
                    Err(e) => return Err(gap_refusal(&session, Some(c), e)),
                };
                Ok(Resume { session: Arc::clone(&session), cursor, after, stream: Some(c.stream), snapshot })
            }
            ResumeTarget::Session => {
                // Row 6, migration form.
                if let Some(u) = first_undelivered_at_or_below(&session, after) {
                    let c = cursor.expect("seq 0 has nothing at or below it");
                    return Err(Refusal::CursorNotDelivered { cursor: c, undelivered: Some(u) });
                }
                // Row 7.
                match reader.snapshot(after) {
                    Ok(snapshot) => {
                        Ok(Resume { session: Arc::clone(&session), cursor, after, stream: None, snapshot })
                    }
                    Err(e) => Err(gap_refusal(&session, cursor, e)),
                }
            }
        }
    }
}

/// Whether cursor `c` (seq <= head) names an event of its stream. Exact for
/// retained events; for evicted ones the stream's record (or, once it was
/// reclaimed, its tombstone) must span the seq. A reclaimed stream whose
/// tombstone is gone too cannot be checked and is accepted: row 7 then
/// refuses the gap.
fn belongs(session: &Session, c: &EventId) -> bool {
    let reader = session.reader();
    if let Some(s) = reader.stream_of(c.seq) {
        return s == c.stream;
    }
    match reader.stream(c.stream) {
        Some(info) => info.first.0 != 0 && info.first <= c.seq && c.seq <= info.high,
        None => match reader.shared.tombstone(c.stream) {
            Some((first, high)) => first != 0 && first <= c.seq.0 && c.seq.0 <= high,
            None => true,
        },
    }
}

/// `GapNotCovered`, naming `oldest` by its event id when it is retained.
fn gap_not_covered(session: &Session, cursor: Option<EventId>, oldest: Seq, missing: u64) -> Refusal {
    let oldest_id = session.reader().stream_of(oldest).map(|s| session.event_id(s, oldest));
    Refusal::GapNotCovered { cursor, oldest, oldest_id, missing }
}

fn gap_refusal(session: &Session, cursor: Option<EventId>, e: SnapshotError) -> Refusal {
    match e {
        SnapshotError::Evicted { oldest, missing, .. } => gap_not_covered(session, cursor, oldest, missing),
        // A reclaimed stream (stream resumes handle their tombstones first):
        // it ended and every event of it was evicted; how many after the
        // cursor is unknown.
        SnapshotError::UnknownStream { .. } => gap_not_covered(session, cursor, session.reader().oldest(), 0),
        SnapshotError::Ahead { head } => match cursor {
            Some(cursor) => Refusal::CursorAhead { cursor, head },
            None => unreachable!("seq 0 is never ahead"),
        },
    }
}

/// For a migration to cursor `c`: the smallest seq `<= c` of an event that
/// was never delivered, if the engine can prove one. Retained events are
/// checked one by one against their stream's delivered mark; an evicted
/// undelivered event is found through the predecessor link of its stream's
/// first retained event (or the stream's high-water mark). When that
/// evidence lies above `c` but the evicted event itself might be below it,
/// nothing is proven, and the gap check that follows refuses the migration
/// (the cursor is then below the retained window). Streams whose records
/// were reclaimed count through [`crate::Reader::reclaimed_undelivered`]: a seq at
/// or below which one of them had an undelivered event (reported as the
/// `undelivered` seq, an upper bound of the actual one).
pub(crate) fn first_undelivered_at_or_below(session: &Session, c: Seq) -> Option<Seq> {
    if c.0 == 0 {
        return None;
    }
    let reader = session.reader();
    // A reclaimed stream (ended, all its events evicted) that was not fully
    // delivered had an undelivered event at or below its high-water seq.
    let reclaimed = reader.reclaimed_undelivered().filter(|h| *h <= c);
    let pending: HashMap<StreamId, (u64, u64)> = reader
        .streams()
        .into_iter()
        .filter(|i| i.high > i.delivered)
        .map(|i| (i.id, (i.delivered.0, i.high.0)))
        .collect();
    if pending.is_empty() {
        return reclaimed;
    }
    let oldest = reader.oldest().0;
    let mut found: Option<u64> = None;
    let mut first_retained: HashMap<StreamId, u64> = HashMap::new();
    if let Ok(snap) = reader.snapshot(Seq(oldest.saturating_sub(1))) {
        for e in snap.iter() {
            if let Some(&(delivered, _)) = pending.get(&e.stream) {
                if e.seq.0 > delivered {
                    if e.seq <= c && found.is_none() {
                        found = Some(e.seq.0);
                    }
                    first_retained.entry(e.stream).or_insert_with(|| snap.prev_in_stream(e.seq.0));
                }
            }
        }
    }
    for (stream, (delivered, high)) in &pending {
        // The newest event of this stream before the retained window.
        let before = first_retained.get(stream).copied().unwrap_or(*high);
        if before > *delivered && before < oldest && before <= c.0 {
            found = Some(found.map_or(before, |f| f.min(before)));
        }
    }
    match (found.map(Seq), reclaimed) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}
