//! The arithmetic of the coverage rules (`docs/SPEC.md` §4.2, row 7), as
//! pure functions of a few numbers, so that every store answers a gap with
//! the same verdict and the same counts: the ring's snapshots use them, and
//! so does a store kept elsewhere (the Redis store computes the same inputs
//! in one script call).

use gapless_wire::{Seq, StreamId};
use std::collections::HashMap;
use std::fmt;

/// How many events of a refused gap are gone, and how well that is known.
///
/// On the wire (`"missing"` in a `gap_not_covered` body) it is the number
/// [`Missing::count`]: `n` for `Exact(n)` and `AtLeast(n)`, 0 for `Unknown`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Missing {
    /// Exactly this many (a whole-session gap; a stream gap whose cursor is
    /// the stream's delivered mark, unless a delivery is being recorded at
    /// that moment).
    Exact(u64),
    /// At least this many, at least 1: a stream gap whose cursor is below or
    /// above the stream's delivered mark (its position in the stream is then
    /// unknown), or a stream whose record was reclaimed with its tombstone
    /// kept.
    AtLeast(u64),
    /// How many cannot be told: a reclaimed stream whose tombstone was
    /// dropped too (the newest 256 per ring are kept). Even 0 is possible
    /// then: a cursor at the stream's last event, which deserved an empty
    /// resume, looks the same.
    Unknown,
}

impl Missing {
    /// The number a refusal reports: the exact count, the lower bound, or 0
    /// when unknown.
    pub fn count(self) -> u64 {
        match self {
            Missing::Exact(n) | Missing::AtLeast(n) => n,
            Missing::Unknown => 0,
        }
    }

    /// Whether [`Missing::count`] is exact.
    pub fn is_exact(self) -> bool {
        matches!(self, Missing::Exact(_))
    }
}

impl fmt::Display for Missing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Missing::Exact(n) => write!(f, "{n}"),
            Missing::AtLeast(n) => write!(f, "at least {n}"),
            Missing::Unknown => f.write_str("an unknown number of"),
        }
    }
}

/// What a stream gap's verdict needs to know of the stream itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StreamMarks {
    /// Seq of the stream's last event (0 while it has none).
    pub high: u64,
    /// How many events were published on it.
    pub published: u64,
    /// Seq of its last event reported delivered.
    pub delivered: u64,
    /// Stream position (1-based) of the event at `delivered`.
    pub delivered_index: u64,
}

/// The stream's first retained event at or after the gap's first retained
/// seq: its seq, its position in the stream (1-based) and the seq of the
/// stream's event before it (0 for none).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FirstRetained {
    /// Its seq.
    pub seq: u64,
    /// Its position in the stream, from 1.
    pub index: u64,
    /// Seq of the stream's previous event, 0 if it is the first.
    pub prev: u64,
}

/// Whether every event of a stream after `after` is retained, given the
/// oldest retained seq of the session and the stream's first retained event
/// at or after `max(after + 1, oldest)`. `Err` carries how many of the
/// stream's events after `after` are gone (see [`Missing`]).
///
/// Seqs below `oldest` that belong to other streams do not matter: the
/// newest event of this stream before the window is the first retained
/// one's predecessor (or, none retained, the stream's high-water mark), and
/// if that is at or below `after` nothing of the stream was lost.
pub fn stream_gap(
    after: u64,
    oldest: u64,
    marks: StreamMarks,
    first: Option<FirstRetained>,
) -> Result<(), Missing> {
    let from = (after + 1).max(oldest);
    if from == after + 1 {
        return Ok(());
    }
    let before_from = first.map_or(marks.high, |f| f.prev);
    if before_from <= after {
        return Ok(());
    }
    // Events of the stream after `after` are gone. At or below the delivered
    // mark, whose position is known, `before_first - delivered_index` of
    // them follow `after`: exact at the mark, a lower bound below it. Above
    // the mark the cursor's position is unknown: at least 1.
    if after > marks.delivered {
        return Err(Missing::AtLeast(1));
    }
    let before_first = first.map_or(marks.published, |f| f.index - 1);
    let n = before_first.saturating_sub(marks.delivered_index).max(1);
    Err(if after == marks.delivered { Missing::Exact(n) } else { Missing::AtLeast(n) })
}

/// Whether every event of the session after `after` is retained; `Err`
/// carries the exact count of those gone.
pub fn session_gap(after: u64, oldest: u64) -> Result<(), Missing> {
    if after + 1 >= oldest {
        Ok(())
    } else {
        Err(Missing::Exact(oldest - 1 - after))
    }
}

/// A stream with undelivered events, for [`first_undelivered_at_or_below`]:
/// its id, delivered mark and high-water mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Pending {
    /// The stream.
    pub id: StreamId,
    /// Seq of its last delivered event.
    pub delivered: u64,
    /// Seq of its last event (> `delivered`).
    pub high: u64,
}

/// For a migration to cursor `c`: the smallest seq `<= c` of an event that
/// was never delivered, if the store can prove one (`docs/SPEC.md` §4.2,
/// row 6, migration form).
///
/// `pending` are the streams with undelivered events; `window` yields the
/// retained events in seq order as `(seq, stream, prev_in_stream)`, from
/// `oldest`; `reclaimed` is the smallest high-water seq of reclaimed stream
/// records that had undelivered events. Retained events are checked one by
/// one against their stream's delivered mark; an evicted undelivered event
/// is found through the predecessor link of its stream's first retained
/// event (or the stream's high-water mark). When that evidence lies above
/// `c` but the evicted event itself might be below it, nothing is proven,
/// and the gap check that follows refuses the migration.
pub fn first_undelivered_at_or_below(
    c: Seq,
    pending: &[Pending],
    oldest: u64,
    reclaimed: Option<Seq>,
    window: impl IntoIterator<Item = (u64, StreamId, u64)>,
) -> Option<Seq> {
    if c.0 == 0 {
        return None;
    }
    let reclaimed = reclaimed.filter(|h| *h <= c);
    if pending.is_empty() {
        return reclaimed;
    }
    let marks: HashMap<StreamId, (u64, u64)> =
        pending.iter().map(|p| (p.id, (p.delivered, p.high))).collect();
    let mut found: Option<u64> = None;
    let mut first_retained: HashMap<StreamId, u64> = HashMap::new();
    for (seq, stream, prev) in window {
        if let Some(&(delivered, _)) = marks.get(&stream) {
            if seq > delivered {
                if seq <= c.0 && found.is_none() {
                    found = Some(seq);
                }
                first_retained.entry(stream).or_insert(prev);
            }
        }
    }
    for p in pending {
        // The newest event of this stream before the retained window.
        let before = first_retained.get(&p.id).copied().unwrap_or(p.high);
        if before > p.delivered && before < oldest && before <= c.0 {
            found = Some(found.map_or(before, |f| f.min(before)));
        }
    }
    match (found.map(Seq), reclaimed) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MARKS: StreamMarks = StreamMarks { high: 20, published: 5, delivered: 8, delivered_index: 2 };

    #[test]
    fn stream_gaps() {
        // Nothing evicted after the cursor.
        assert_eq!(stream_gap(8, 9, MARKS, None), Ok(()));
        // Evicted seqs were of other streams: the first retained event's
        // predecessor is the cursor itself.
        assert_eq!(stream_gap(8, 12, MARKS, Some(FirstRetained { seq: 14, index: 3, prev: 8 })), Ok(()));
        // One of ours (index 3) is gone, cursor at the delivered mark: exact.
        assert_eq!(
            stream_gap(8, 12, MARKS, Some(FirstRetained { seq: 14, index: 4, prev: 11 })),
            Err(Missing::Exact(1))
        );
        // Below the mark: a lower bound.
        assert_eq!(
            stream_gap(5, 12, MARKS, Some(FirstRetained { seq: 14, index: 4, prev: 11 })),
            Err(Missing::AtLeast(1))
        );
        // Above the mark: position unknown.
        assert_eq!(
            stream_gap(10, 12, MARKS, Some(FirstRetained { seq: 14, index: 4, prev: 11 })),
            Err(Missing::AtLeast(1))
        );
        // None retained: counted from `published`.
        assert_eq!(stream_gap(8, 21, MARKS, None), Err(Missing::Exact(3)));
        assert_eq!(session_gap(3, 4), Ok(()));
        assert_eq!(session_gap(3, 9), Err(Missing::Exact(5)));
    }

    /// What a `gap_not_covered` body's `missing` says (`docs/SPEC.md`
    /// §4.2): the count, or 0 when unknown; and how it reads in a message.
    #[test]
    fn missing_counts() {
        assert_eq!((Missing::Exact(5).count(), Missing::Exact(5).is_exact()), (5, true));
        assert_eq!((Missing::AtLeast(3).count(), Missing::AtLeast(3).is_exact()), (3, false));
        assert_eq!((Missing::Unknown.count(), Missing::Unknown.is_exact()), (0, false));
        assert_eq!(Missing::Exact(5).to_string(), "5");
        assert_eq!(Missing::AtLeast(3).to_string(), "at least 3");
        assert_eq!(Missing::Unknown.to_string(), "an unknown number of");
    }

    #[test]
    fn undelivered_below_a_cursor() {
        let s1 = StreamId(1);
        let p = [Pending { id: s1, delivered: 2, high: 9 }];
        let window = [(5, s1, 2), (7, StreamId(2), 0), (9, s1, 5)];
        assert_eq!(first_undelivered_at_or_below(Seq(0), &p, 5, None, window), None);
        assert_eq!(first_undelivered_at_or_below(Seq(4), &p, 5, None, window), None);
        assert_eq!(first_undelivered_at_or_below(Seq(6), &p, 5, None, window), Some(Seq(5)));
        // An evicted undelivered event (prev 3 > delivered 2) below the window.
        let window = [(5, s1, 3), (9, s1, 5)];
        assert_eq!(first_undelivered_at_or_below(Seq(4), &p, 5, None, window), Some(Seq(3)));
        assert_eq!(first_undelivered_at_or_below(Seq(4), &[], 5, Some(Seq(4)), window), Some(Seq(4)));
        assert_eq!(first_undelivered_at_or_below(Seq(3), &[], 5, Some(Seq(4)), window), None);
    }
}
