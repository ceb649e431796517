//! A reference for the `docs/SPEC.md` §4.2 decision table, computed from the full
//! history the model recorded (every event ever published, its stream, the
//! per-stream delivered marks, which events are evicted).
//!
//! Where the engine cannot know something the spec asks for, and documents
//! that (engine/src/session/resume.rs and engine/src/ring/snapshot.rs), the reference widens its
//! expectation to exactly the documented alternative and nothing more:
//!
//! * **A1, membership of evicted events** (`belongs`): a cursor naming an
//!   evicted seq that belongs to another stream than its tag says may pass
//!   row 4 when the claimed stream's record (or, once reclaimed, its
//!   tombstone) spans the seq (`first <= seq <= high`). Rows 6–7 then run
//!   for the claimed stream.
//! * **A2, reclaimed stream records** (`docs/SPEC.md` §3.6 lets the engine drop the
//!   record of an ended stream whose events are all evicted): the engine
//!   keeps a tombstone (first and last seq) of the newest 256 reclaimed,
//!   fully delivered streams, which answers like the record would; the
//!   targets open at most 40 streams per ring, so every reclaimed stream has
//!   one and the contract's answer is expected exactly. Past that bound the
//!   engine refuses a resume on such a stream with `Missing::Unknown` (not
//!   modelled here). Migration: reclaimed streams that were not fully
//!   delivered are remembered (`Reader::reclaimed_undelivered`), so row 6
//!   sees them (but see A5).
//! * **A3, evicted undelivered event below a migration cursor**
//!   (`first_undelivered_at_or_below`): when every undelivered event at or
//!   below the cursor is evicted and the cursor is below the retained window
//!   (`cursor + 1 < oldest`), `GapNotCovered` may replace
//!   `CursorNotDelivered`.
//! * **A5, late deliveries on reclaimed records** (producer.rs
//!   `open_stream`): records of ended, evicted streams that were not fully
//!   delivered are kept (up to 256) so that late delivery reports land;
//!   beyond that they are reclaimed and their high-water seq is folded into
//!   `Reader::reclaimed_undelivered`, a conservative bound: a delivery
//!   reported afterwards is not seen, and row 6 may refuse a migration as
//!   `CursorNotDelivered` although everything was delivered. (The targets
//!   open fewer than 256 streams, so they check that undelivered records are
//!   kept instead; see `sync_records`.)
//! * **A4, `missing` of a stream gap** (`SnapshotError::Evicted` docs): exact
//!   when the cursor is the stream's delivered mark, otherwise a lower bound
//!   in `1 ..= true missing`; the engine says which (`gapless::Missing`).

use crate::model_ring::{MStream, ModelRing};
use crate::wire::{self, Bad};

/// SSE resume of one stream, or WebSocket migration of the session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Target {
    /// `Last-Event-ID` resume.
    Stream,
    /// Migration (the cursor is the session's contiguous processed prefix).
    Session,
}

/// How exact a `missing` count must be.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Exactly this.
    Exact(u64),
    /// A lower bound: `1 ..= n`.
    LowerBound(u64),
}

impl Missing {
    /// Whether the engine's `got` is acceptable: the same kind (exact or a
    /// bound), and the number exact or within `1 ..= n`.
    pub fn accepts(&self, got: gapless::Missing) -> bool {
        match (*self, got) {
            (Missing::Exact(n), gapless::Missing::Exact(g)) => g == n,
            (Missing::LowerBound(n), gapless::Missing::AtLeast(g)) => (1..=n).contains(&g),
            _ => false,
        }
    }
}

/// One acceptable outcome.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// `ResumeRequiresSession`.
    RequiresSession,
    /// `UnknownSession`.
    Unknown,
    /// `MalformedCursor`.
    Malformed,
    /// `NamespaceMismatch`.
    Mismatch,
    /// `CursorAhead { head }`.
    Ahead {
        /// Newest seq of the session.
        head: u64,
    },
    /// `CursorNotDelivered`; `undelivered` (when reported) must be one of
    /// `witnesses`: seqs at or below the cursor that were never delivered.
    NotDelivered {
        /// Acceptable `undelivered` values.
        witnesses: Vec<u64>,
    },
    /// `GapNotCovered`.
    Gap {
        /// Oldest retained seq.
        oldest: u64,
        /// The `missing` count.
        missing: Missing,
    },
    /// `Resume` replaying exactly `seqs`.
    Resume {
        /// The cursor's seq (0 for a migration from "processed nothing").
        after: u64,
        /// The resumed stream, `None` for a migration.
        stream: Option<u64>,
        /// Replayed seqs, in order.
        seqs: Vec<u64>,
    },
}

/// What the reference accepts: any one of `any_of` (the first is the
/// the contract's own answer; others come from allowances A1–A4).
#[derive(Clone, Debug)]
pub struct Expected {
    /// Acceptable outcomes.
    pub any_of: Vec<Outcome>,
}

impl Expected {
    fn one(o: Outcome) -> Self {
        Expected { any_of: vec![o] }
    }

    fn also(mut self, other: Expected) -> Self {
        for o in other.any_of {
            if !self.any_of.contains(&o) {
                self.any_of.push(o);
            }
        }
        self
    }
}

/// The session the request's id names, as the reference knows it.
#[derive(Clone, Copy, Debug)]
pub struct RefSession<'a> {
    /// Namespace of this incarnation.
    pub ns: u64,
    /// Its full history.
    pub ring: &'a ModelRing,
}

/// The reference decision.
///
/// `session_id` is the request's id; `found` is the live incarnation it
/// names for the request's owner (the caller looked it up: exact string
/// match, same owner, not deleted).
pub fn decide(
    session_id: Option<&str>,
    found: Option<RefSession<'_>>,
    cursor: Option<&str>,
    target: Target,
) -> Expected {
    // Row 1.
    if session_id.is_none() {
        return Expected::one(Outcome::RequiresSession);
    }
    // Row 2.
    let Some(s) = found else { return Expected::one(Outcome::Unknown) };
    let ring = s.ring;
    let (head, oldest) = (ring.head(), ring.oldest());
    // Row 3.
    let id = match (cursor, target) {
        (None, Target::Stream) => return Expected::one(Outcome::Malformed),
        (None, Target::Session) => None,
        (Some(c), _) => match wire::parse(c) {
            Ok(id) => Some(id),
            Err(Bad::Malformed) => return Expected::one(Outcome::Malformed),
            Err(Bad::ForeignTag) => return Expected::one(Outcome::Mismatch),
        },
    };
    let Some(id) = id else {
        // A migration from "processed nothing": row 7 only.
        return gap_or_resume_session(ring, 0);
    };
    // Row 4: another incarnation, or a stream that never existed, or an
    // event of no stream (seq 0: seqs start at 1).
    if id.ns != s.ns || id.seq == 0 || id.stream > ring.streams.len() as u64 {
        return Expected::one(Outcome::Mismatch);
    }
    // Row 5 (a stream that exists, so "ahead" is the only thing wrong).
    if id.seq > head {
        return Expected::one(Outcome::Ahead { head });
    }
    // Row 4: the event's real stream.
    let rest = || match target {
        Target::Stream => stream_rows_6_7(ring, id.stream, id.seq),
        Target::Session => session_rows_6_7(ring, id.seq),
    };
    if ring.event(id.seq).stream != id.stream {
        let claimed = ring.stream(id.stream);
        let evicted = id.seq < oldest;
        // A1: the engine cannot see the stream of an evicted event; it
        // checks the span of the claimed stream (record or tombstone).
        let blind = evicted && claimed.first() != 0 && claimed.first() <= id.seq && id.seq <= claimed.high();
        return if blind {
            Expected::one(Outcome::Mismatch).also(rest())
        } else {
            Expected::one(Outcome::Mismatch)
        };
    }
    rest()
}

/// Rows 6 and 7 of an SSE resume of `stream` after seq `c` (the cursor
/// passed row 4, possibly only through A1).
fn stream_rows_6_7(ring: &ModelRing, stream: u64, c: u64) -> Expected {
    let st = ring.stream(stream);
    let oldest = ring.oldest();
    // The stream's events after the cursor that are gone.
    let lost = ring.stream_seqs_in(stream, c + 1, oldest.saturating_sub(1)).len() as u64;
    if !st.is_delivered(c) {
        // Row 6: the claimed event was never delivered (on this stream).
        let witnesses = (1..=c).filter(|&u| u > st.delivered).collect();
        Expected::one(Outcome::NotDelivered { witnesses })
    } else if lost > 0 {
        // Row 7. A4: exact only at the delivered mark.
        let missing = if c == st.delivered { Missing::Exact(lost) } else { Missing::LowerBound(lost) };
        Expected::one(Outcome::Gap { oldest, missing })
    } else {
        let seqs = ring.stream_seqs_in(stream, c + 1, u64::MAX);
        Expected::one(Outcome::Resume { after: c, stream: Some(stream), seqs })
    }
}

/// Rows 6 and 7 of a migration to cursor `c >= 1`.
fn session_rows_6_7(ring: &ModelRing, c: u64) -> Expected {
    let spec = session_rows_6_7_with(ring, c, |st| st.delivered);
    // A5: a delivery reported (through a handle) after the record went is
    // not seen.
    let late = ring.streams.iter().any(|st| st.reclaimed && st.delivered != st.delivered_at_reclaim);
    if late {
        let frozen = |st: &MStream| if st.reclaimed { st.delivered_at_reclaim } else { st.delivered };
        return spec.also(session_rows_6_7_with(ring, c, frozen));
    }
    spec
}

/// Rows 6 and 7 of a migration, with `mark` giving each stream's delivered mark.
fn session_rows_6_7_with(ring: &ModelRing, c: u64, mark: impl Fn(&MStream) -> u64) -> Expected {
    let oldest = ring.oldest();
    let row7 = gap_or_resume_session(ring, c);
    // Row 6: every event at or below the cursor must have been delivered.
    let undelivered: Vec<u64> = (1..=c).filter(|&s| s > mark(ring.stream(ring.event(s).stream))).collect();
    if undelivered.is_empty() {
        return row7;
    }
    let not_delivered = Expected::one(Outcome::NotDelivered { witnesses: undelivered.clone() });
    // A3: all of them evicted and the cursor below the retained window.
    if undelivered.iter().all(|&s| s < oldest) && c + 1 < oldest {
        return not_delivered.also(row7);
    }
    not_delivered
}

/// Row 7 of a migration (and the "otherwise" row).
fn gap_or_resume_session(ring: &ModelRing, after: u64) -> Expected {
    let (head, oldest) = (ring.head(), ring.oldest());
    if after + 1 < oldest {
        return Expected::one(Outcome::Gap { oldest, missing: Missing::Exact(oldest - after - 1) });
    }
    Expected::one(Outcome::Resume { after, stream: None, seqs: (after + 1..=head).collect() })
}
