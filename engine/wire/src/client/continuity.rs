//! Continuity checks of incoming frames (`docs/SPEC.md` §4.3, §6): which to
//! process, which to drop, and where a hole or repeat is.

use super::ClientGuard;
use crate::Seq;

/// Continuity of a migrated session's WebSocket frames: the first frame is
/// cursor + 1, then seqs rise by exactly one (`docs/SPEC.md` §4.3).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct WsContinuity {
    /// The highest seq seen on the socket, or the migration cursor.
    last: u64,
}

/// The verdict on one WebSocket frame ([`WsContinuity::check`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum WsCheck {
    /// In order and new: process it.
    Deliver,
    /// In order, but already processed (for example over SSE after the
    /// upgrade request was sent): drop it.
    AlreadyProcessed,
    /// Seqs `expected..got` never arrived (a server fault). The frame itself
    /// may be processed (unless [`ClientGuard::is_processed`] says it was);
    /// the guard's prefix cannot pass the hole, so close the socket and
    /// migrate again from [`ClientGuard::upgrade_request`].
    Hole {
        /// The seq that should have come.
        expected: Seq,
        /// The seq that came.
        got: Seq,
    },
    /// A seq at or below one already seen, or at or below the cursor (a
    /// server fault): drop the frame.
    Repeat {
        /// The repeated seq.
        seq: Seq,
    },
}

impl WsContinuity {
    /// A checker for a socket opened with migration cursor `cursor`
    /// (`Seq(0)`: processed nothing).
    pub fn new(cursor: Seq) -> WsContinuity {
        WsContinuity { last: cursor.0 }
    }

    /// The next seq expected (`None` after seq `u64::MAX`).
    pub fn expected(&self) -> Option<Seq> {
        self.last.checked_add(1).map(Seq)
    }

    /// Checks the next frame's seq against the order and against what
    /// `guard` recorded as processed. After a hole the checker expects the
    /// seq after `got`, so one hole is reported once.
    pub fn check(&mut self, seq: Seq, guard: &ClientGuard) -> WsCheck {
        if seq.0 <= self.last {
            return WsCheck::Repeat { seq };
        }
        // `seq > last`, so `last + 1` cannot overflow.
        let expected = Seq(self.last + 1);
        self.last = seq.0;
        if seq != expected {
            WsCheck::Hole { expected, got: seq }
        } else if guard.is_processed(seq) {
            WsCheck::AlreadyProcessed
        } else {
            WsCheck::Deliver
        }
    }
}

/// Continuity of one SSE stream: its seqs strictly rise (they need not be
/// dense, other streams' events sit between them).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct SseContinuity {
    /// The highest seq seen on the stream, or the resume cursor.
    last: u64,
}

/// The verdict on one SSE event ([`SseContinuity::check`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum SseCheck {
    /// In order and new: process it.
    Deliver,
    /// In order, but already processed: drop it.
    AlreadyProcessed,
    /// The same seq as the previous event (or the cursor): drop it.
    Repeat {
        /// The repeated seq.
        seq: Seq,
    },
    /// A seq below the previous one (or the cursor): a server fault; drop it.
    Regress {
        /// The highest seq seen so far.
        last: Seq,
        /// The seq that came.
        got: Seq,
    },
}

impl SseContinuity {
    /// A checker for a stream resumed from seq `cursor` (`Seq(0)`: a fresh
    /// stream).
    pub fn new(cursor: Seq) -> SseContinuity {
        SseContinuity { last: cursor.0 }
    }

    /// Checks the next event's seq against the order and against what
    /// `guard` recorded as processed.
    pub fn check(&mut self, seq: Seq, guard: &ClientGuard) -> SseCheck {
        if seq.0 == self.last {
            return SseCheck::Repeat { seq };
        }
        if seq.0 < self.last {
            return SseCheck::Regress { last: Seq(self.last), got: seq };
        }
        self.last = seq.0;
        if guard.is_processed(seq) {
            SseCheck::AlreadyProcessed
        } else {
            SseCheck::Deliver
        }
    }
}
