//! The wait-free coverage check (SPEC §3.4).

use crate::event::Seq;
use crate::reader::Reader;

/// Whether a cursor's gap (every event after it) is still retained.
///
/// A negative answer is final: `oldest` only grows, so an evicted gap never
/// comes back, and an `Ahead` cursor named a seq that had not been published
/// when it was checked. A positive answer can go stale the moment it is
/// returned; confirm it by taking a [`Snapshot`](crate::Snapshot), which pins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Coverage {
    /// Every event after the cursor is retained.
    Covered,
    /// `missing` events after the cursor were evicted; `oldest` is the oldest
    /// seq still retained.
    Evicted {
        /// The oldest retained seq when checked.
        oldest: Seq,
        /// How many events between the cursor and `oldest` are gone.
        missing: u64,
    },
    /// The cursor is past the newest event.
    Ahead {
        /// The newest published seq when checked.
        head: Seq,
    },
}

impl Reader {
    /// Checks whether every event after `cursor` is retained. Wait-free: two
    /// atomic loads and arithmetic, whatever the producer is doing.
    ///
    /// `Seq(0)` ("processed nothing") is covered while seq 1 is retained;
    /// `u64::MAX` (or any seq past the head) is `Ahead`.
    #[inline]
    pub fn coverage(&self, cursor: Seq) -> Coverage {
        let head = self.shared.head();
        if cursor.0 > head {
            return Coverage::Ahead { head: Seq(head) };
        }
        // Loaded after `head`: `oldest` may have moved past `head + 1` in
        // between, which only makes the answer "evicted", and that is true.
        let oldest = self.shared.oldest();
        if cursor.0 + 1 >= oldest {
            Coverage::Covered
        } else {
            Coverage::Evicted { oldest: Seq(oldest), missing: oldest - 1 - cursor.0 }
        }
    }
}
