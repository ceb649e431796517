//! The resume decision table (`docs/SPEC.md` §4.2).
//!
//! [`Hub::resume_stream`] (an SSE resume) and [`Hub::check_migration`] (a
//! WebSocket migration) take a [`ResumeRequest`] and answer `Ok(Resume)` or
//! exactly one [`Refusal`], checking the table's rows in order. Each
//! refusal names its [`ErrorKind`], which carries the HTTP status and the
//! JSON name, so a transport maps every variant in one place.

use super::hub::Hub;
use super::session::Session;
use crate::ring::{Missing, Snapshot, SnapshotError};
use gapless_wire::event_id::{EventId, MalformedReason, ParseError};
use gapless_wire::{ErrorKind, Seq, StreamId};
use std::collections::HashMap;
use std::fmt;
use std::sync::Arc;

/// What a resume wants (the table's two forms).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    /// An SSE resume: the cursor's own stream (`Last-Event-ID`).
    Stream,
    /// A WebSocket migration: every event of the session after the cursor,
    /// the cursor being the client's contiguous processed prefix.
    Session,
}

/// A resume request as it arrives: the session id, the cursor and the
/// caller's identity, each as the transport read them.
///
/// ```
/// use gapless::ResumeRequest;
/// let req = ResumeRequest::new("0123456789abcdef0123456789abcdef").cursor("00ab34ff9c01de77_2-7");
/// assert_eq!(req.cursor, Some("00ab34ff9c01de77_2-7"));
/// assert_eq!(req.owner, None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeRequest<'a> {
    /// `Mcp-Session-Id` (or the upgrade path's id), if any.
    pub session_id: Option<&'a str>,
    /// The cursor (an event id). For a migration, `None` means "processed
    /// nothing" (cursor seq 0); for a stream resume a missing cursor is
    /// malformed (a GET without `Last-Event-ID` is not a resume).
    pub cursor: Option<&'a str>,
    /// The caller identity the session must be bound to (`None` for none).
    pub owner: Option<&'a str>,
}

impl<'a> ResumeRequest<'a> {
    /// A request on session `session_id`, without a cursor or an owner.
    pub fn new(session_id: &'a str) -> Self {
        ResumeRequest { session_id: Some(session_id), cursor: None, owner: None }
    }

    /// With cursor `cursor` (an event id as the client sent it).
    pub fn cursor(mut self, cursor: &'a str) -> Self {
        self.cursor = Some(cursor);
        self
    }

    /// Made by caller `owner` (`None`: an anonymous caller).
    pub fn owner(mut self, owner: Option<&'a str>) -> Self {
        self.owner = owner;
        self
    }
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
        /// Evicted events of the target after the cursor, and whether that
        /// count is exact, a lower bound or unknown (see [`Missing`]). For a
        /// stream whose record was reclaimed it is `AtLeast(1)` (its events
        /// after the cursor are gone, how many is unknown), or `Unknown`
        /// once even its tombstone was dropped (the newest 256 are kept per
        /// ring): then the engine cannot tell a cursor at the stream's end,
        /// which deserved an empty resume, from one before it.
        missing: Missing,
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

impl Hub {
    /// An SSE resume (`Last-Event-ID`): the cursor's own stream after the
    /// cursor, per the decision table in its order. `Ok` pins the gap;
    /// [`Resume::into_subscription`] (feature `tokio`) replays it and
    /// continues live.
    pub fn resume_stream(&self, req: ResumeRequest<'_>) -> Result<Resume, Refusal> {
        self.decide(req, Target::Stream)
    }

    /// A WebSocket migration's check: every event of the session after the
    /// client's contiguous processed prefix (`cursor: None` = processed
    /// nothing), per the decision table in its order. [`Hub::migrate`] runs
    /// it and issues the ticket.
    pub fn check_migration(&self, req: ResumeRequest<'_>) -> Result<Resume, Refusal> {
        self.decide(req, Target::Session)
    }

    fn decide(&self, req: ResumeRequest<'_>, target: Target) -> Result<Resume, Refusal> {
        // Row 1: a resume without a session id never creates one.
        let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
        // Row 2.
        // Unknown, expired, deleted and foreign look the same.
        let session = self.get_str(sid, req.owner).map_err(|_| Refusal::UnknownSession)?;
        self.touch(&session);
        // Row 3.
        let cursor = match (req.cursor, target) {
            (None, Target::Session) => None,
            (None, Target::Stream) => {
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
        match target {
            Target::Stream => {
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
                    Err(SnapshotError::UnknownStream { .. }) => match reader.tombstone(c.stream) {
                        Some((_, high)) if high == c.seq => reader.empty_snapshot(c.seq, Some(c.stream)),
                        tomb => {
                            let missing = if tomb.is_some() { Missing::AtLeast(1) } else { Missing::Unknown };
                            return Err(gap_not_covered(&session, cursor, reader.oldest(), missing));
                        }
                    },
                    Err(e) => return Err(gap_refusal(&session, Some(c), e)),
                };
                Ok(Resume { session: Arc::clone(&session), cursor, after, stream: Some(c.stream), snapshot })
            }
            Target::Session => {
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
        None => match reader.tombstone(c.stream) {
            Some((first, high)) => first.0 != 0 && first <= c.seq && c.seq <= high,
            None => true,
        },
    }
}

/// `GapNotCovered`, naming `oldest` by its event id when it is retained.
fn gap_not_covered(session: &Session, cursor: Option<EventId>, oldest: Seq, missing: Missing) -> Refusal {
    let oldest_id = session.reader().stream_of(oldest).map(|s| session.event_id(s, oldest));
    Refusal::GapNotCovered { cursor, oldest, oldest_id, missing }
}

fn gap_refusal(session: &Session, cursor: Option<EventId>, e: SnapshotError) -> Refusal {
    match e {
        SnapshotError::Evicted { oldest, missing, .. } => gap_not_covered(session, cursor, oldest, missing),
        // A reclaimed stream (stream resumes handle their tombstones first):
        // it ended and every event of it was evicted; how many after the
        // cursor is unknown.
        SnapshotError::UnknownStream { .. } => {
            gap_not_covered(session, cursor, session.reader().oldest(), Missing::Unknown)
        }
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
/// were reclaimed count through `Reader::reclaimed_undelivered`: a seq at
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
