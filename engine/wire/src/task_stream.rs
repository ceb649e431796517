//! The task-stream guard: a sans-IO helper that follows one task's event
//! stream (`tasks/stream` of the draft SEP-2694, `docs/SPEC.md` §5.6) across
//! dropped connections, and never lets an event be lost, repeated or
//! reordered silently.
//!
//! A task's events carry seqs dense from 0. The client opens
//! `tasks/stream {taskId, after?}` and gets `notifications/tasks/event
//! {seq, taskId, ...}` then one response: the empty result (the task ended,
//! every event was sent) or the error `-32010` with `data: {reason:
//! "events_gone", earliestSeq}` (an event after the cursor is no longer
//! kept). `after` is exclusive. After a reconnect the server may send events
//! again that the client processed already. The client parses the JSON;
//! [`TaskStreamGuard`] is handed the numbers and says what to do:
//!
//! * [`new_stream`](TaskStreamGuard::new_stream) before each `tasks/stream`:
//!   the `after` to send (`None`: send none), and the per-connection order
//!   starts afresh while the cursor stays.
//! * [`on_event`](TaskStreamGuard::on_event) for each event: a [`Verdict`]
//!   (process it, or skip a duplicate) or an [`EventError`] (a hole, a
//!   regress, another task's event).
//! * [`processed`](TaskStreamGuard::processed) once the application handled
//!   the event: only then does the cursor move (the draft: persist the
//!   latest seq only after fully processing it). It returns the seq to
//!   persist; [`resume_from`](TaskStreamGuard::resume_from) starts a guard
//!   from it after a restart.
//! * [`on_end`](TaskStreamGuard::on_end) for the empty result, and
//!   [`on_events_gone`](TaskStreamGuard::on_events_gone) for `events_gone`:
//!   the exact [`Loss`], which the caller reports (it is an error) or
//!   accepts by name with [`accept_loss`](TaskStreamGuard::accept_loss).
//!
//! ```
//! use gapless_wire::task_stream::{TaskStreamGuard, Verdict};
//!
//! let mut guard = TaskStreamGuard::new("task-123");
//! let mut handled = vec![];
//! let mut deliver = |guard: &mut TaskStreamGuard, seq: u64| match guard.on_event("task-123", seq).unwrap() {
//!     Verdict::Process(ticket) => {
//!         handled.push(ticket.seq()); // the application handles the event here
//!         guard.processed(ticket).unwrap(); // then the cursor moves: persist what it returns
//!     }
//!     Verdict::Duplicate(_) => {} // processed before the reconnect: skip it
//! };
//!
//! assert_eq!(guard.new_stream(), None); // tasks/stream {taskId}: no `after`
//! deliver(&mut guard, 0);
//! deliver(&mut guard, 1);
//! // The connection drops. Resume after the last processed seq.
//! assert_eq!(guard.new_stream(), Some(1)); // tasks/stream {taskId, after: 1}
//! deliver(&mut guard, 1); // a server may repeat it after a reconnect
//! deliver(&mut guard, 2);
//! guard.on_end().unwrap(); // the empty result: the task ended, all was sent
//! assert_eq!(handled, [0, 1, 2]);
//!
//! // Another client resumed too late: events 4..=9 are no longer kept.
//! let mut late = TaskStreamGuard::resume_from("task-123", 3);
//! assert_eq!(late.new_stream(), Some(3));
//! let loss = late.on_events_gone(10).unwrap(); // data.earliestSeq: 10
//! assert_eq!((loss.first_missing, loss.last_missing, loss.count()), (4, 9, 6));
//! // Either report it (`return Err(loss.into())`), or accept it by name:
//! assert_eq!(late.accept_loss(loss), Ok(9));
//! assert_eq!((late.new_stream(), late.lost()), (Some(9), 6)); // after: 9, from 10 on
//! ```
//!
//! ## The two marks
//!
//! ```text
//!   seq:    0   1   2   3   4   5   6   7
//!         +---+---+---+---+---+---+---+---+
//!         | P | P | P | P | T | T |   |   |
//!         +---+---+---+---+---+---+---+---+
//!                       ^       ^   ^
//!                  cursor    last   next
//!
//!   P: processed (or accepted as lost)     T: let through on this stream, not processed yet
//!   cursor: the latest P, what `after` sends and the client persists (all of 0..=cursor are P)
//!   last:   the highest seq let through on the open stream (reset by `new_stream`)
//!   next:   max(cursor, last) + 1, the only seq `on_event` lets through next
//! ```
//!
//! A client that handles one event at a time (check, process, mark
//! processed, read the next) has `last == cursor` between events. Tickets
//! may also be held while later events are checked (a pipeline); they are
//! then processed in seq order.
//!
//! ## The rule of `on_event`
//!
//! Checked in this order; an error records nothing.
//!
//! | # | the event | answer |
//! |---|---|---|
//! | 1 | `taskId` is not the guard's | [`EventError::WrongTask`] |
//! | 2 | the stream already ended ([`on_end`](TaskStreamGuard::on_end)) | [`EventError::AfterEnd`] |
//! | 3 | `seq ≤ last`: not above an event of the same stream | [`EventError::Regress`]: skip it, nothing is lost |
//! | 4 | `seq ≤ cursor` | [`Verdict::Duplicate`]: processed before, skip it |
//! | 5 | `seq == next` | [`Verdict::Process`] with its [`Ticket`] |
//! | 6 | `seq > next` | [`EventError::Gap`] `{expected: next, got: seq}`: do not process it |
//!
//! ## What can be told, and what cannot
//!
//! * **A hole** is seen at the first event after it (seqs are dense): row 6.
//!   With a cursor it is a server fault; drop the stream and resume with
//!   [`after`](TaskStreamGuard::after): the server sends the events again
//!   or answers `events_gone`. A stream opened without `after` starts at the
//!   server's earliest kept event, so a late joiner whose first event is
//!   `k > 0` gets `Gap {expected: 0, got: k}`: seqs `0..k` are gone, which
//!   [`EventError::loss`] names and [`accept_loss`](TaskStreamGuard::accept_loss)
//!   accepts.
//! * **A reorder** (5, 7, 6) is seen as a hole at 7: the guard does not
//!   buffer, and at that moment a swap and a loss look the same, so 7 is
//!   refused. 6 is then let through; resume after it to get 7 again.
//! * **A repeat within one stream** (a seq not above the previous one) is
//!   row 3, whether or not that event was processed yet: the server broke
//!   its order. **A repeat after a reconnect** (`seq ≤ cursor`, rising) is
//!   row 4, which the draft asks clients to tolerate.
//! * **Not seen:** events missing at the very end of a stream, before the
//!   empty result (no later seq shows the hole; the guard does not know how
//!   many events a task has, the empty result is the server's word), and a
//!   server that numbers events differently on each stream.
//!
//! `on_end` checks the client's side of the end: every event let through
//! on the stream was processed ([`EndError::Unprocessed`] if not), so a
//! dropped ticket cannot pass for a complete history.

use std::fmt;

/// Follows one task's event stream: the processed cursor, the order of the
/// open stream, and the `after` to resume with. See the [module
/// docs](self) for its rule and its marks.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct TaskStreamGuard {
    /// The task followed. Fixed at construction.
    task_id: String,
    /// The latest seq processed or accepted as lost: every seq in
    /// `0..=cursor` is. `None`: none yet. Only rises; written by
    /// `processed` and `accept_loss`.
    cursor: Option<u64>,
    /// The highest seq let through (processed or duplicate) on the open
    /// stream; `None` on a fresh stream. Written by `on_event`, cleared by
    /// `new_stream`.
    last: Option<u64>,
    /// The open stream ended with the empty result. Set by `on_end`,
    /// cleared by `new_stream`.
    ended: bool,
    /// How many seqs were accepted as lost, saturating.
    lost: u64,
}

/// What to do with an event that passed [`TaskStreamGuard::on_event`].
#[must_use = "an event is processed or skipped, never ignored"]
#[derive(PartialEq, Eq, Debug)]
pub enum Verdict {
    /// The next event: process it, then hand the ticket to
    /// [`TaskStreamGuard::processed`].
    Process(Ticket),
    /// Processed before (sent again after a reconnect): skip it.
    Duplicate(u64),
}

/// The right to mark one event processed: it comes only from
/// [`TaskStreamGuard::on_event`], and [`TaskStreamGuard::processed`]
/// consumes it. Dropping it means the event was not processed: the cursor
/// stays before it, and a resume gets it again.
#[must_use = "hand the ticket to `processed` once the event is handled"]
#[derive(PartialEq, Eq, Debug)]
pub struct Ticket {
    seq: u64,
}

impl Ticket {
    /// The event's seq.
    pub fn seq(&self) -> u64 {
        self.seq
    }
}

/// Seqs `first_missing..=last_missing` of the task will never be delivered.
///
/// It is an error, so a caller that needs the whole history can return it
/// with `?`; [`TaskStreamGuard::accept_loss`] is the one way to go on.
#[must_use = "a loss is reported or accepted, never dropped"]
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub struct Loss {
    /// The first seq missing: the one the guard needed next.
    pub first_missing: u64,
    /// The last seq missing: the one before the server's earliest.
    pub last_missing: u64,
}

impl Loss {
    /// How many seqs are missing (saturating; 0 for an inverted range).
    pub fn count(&self) -> u64 {
        match self.last_missing.checked_sub(self.first_missing) {
            Some(d) => d.saturating_add(1),
            None => 0,
        }
    }
}

impl fmt::Display for Loss {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (a, b, n) = (self.first_missing, self.last_missing, self.count());
        write!(f, "task events {a}..={b} are lost ({n} events)")
    }
}

impl std::error::Error for Loss {}

impl TaskStreamGuard {
    /// A guard for `task_id` that processed nothing: its first stream is
    /// opened without `after`.
    pub fn new(task_id: impl Into<String>) -> TaskStreamGuard {
        TaskStreamGuard { task_id: task_id.into(), cursor: None, last: None, ended: false, lost: 0 }
    }

    /// A guard for `task_id` whose every seq in `0..=cursor` was processed
    /// before (a cursor persisted across a client restart): its first
    /// stream is opened with `after: cursor`.
    pub fn resume_from(task_id: impl Into<String>, cursor: u64) -> TaskStreamGuard {
        TaskStreamGuard { cursor: Some(cursor), ..TaskStreamGuard::new(task_id) }
    }

    /// The task followed.
    pub fn task_id(&self) -> &str {
        &self.task_id
    }

    /// The `after` of the next `tasks/stream`: the latest processed seq, or
    /// `None` (send no `after`) if none. Also the value to persist.
    pub fn after(&self) -> Option<u64> {
        self.cursor
    }

    /// How many seqs were accepted as lost ([`accept_loss`](Self::accept_loss));
    /// 0: the history processed so far is whole.
    pub fn lost(&self) -> u64 {
        self.lost
    }

    /// Starts a stream (the first, or after a drop): the order of the
    /// previous one is forgotten, the cursor stays. Returns the `after` to
    /// send.
    ///
    /// Call it with no [`Ticket`] outstanding: the new stream sends that
    /// event again and the guard lets it through again.
    pub fn new_stream(&mut self) -> Option<u64> {
        self.last = None;
        self.ended = false;
        self.cursor
    }

    /// The only seq [`on_event`](Self::on_event) lets through next:
    /// `max(cursor, last) + 1`, or 0 if neither is set; saturating at
    /// `u64::MAX`.
    fn next(&self) -> u64 {
        self.cursor.max(self.last).map_or(0, |m| m.saturating_add(1))
    }

    /// Checks an event's `taskId` and `seq` (the rule in the module docs).
    /// On error nothing is recorded.
    pub fn on_event(&mut self, task_id: &str, seq: u64) -> Result<Verdict, EventError> {
        if task_id != self.task_id {
            return Err(EventError::WrongTask { expected: self.task_id.clone(), got: task_id.to_owned() });
        }
        if self.ended {
            return Err(EventError::AfterEnd { seq });
        }
        if let Some(last) = self.last.filter(|&last| seq <= last) {
            return Err(EventError::Regress { last, got: seq });
        }
        if self.cursor.is_some_and(|c| seq <= c) {
            self.last = Some(seq);
            return Ok(Verdict::Duplicate(seq));
        }
        // `seq` is above both marks, so `next()` did not saturate.
        let expected = self.next();
        if seq != expected {
            return Err(EventError::Gap { expected, got: seq });
        }
        self.last = Some(seq);
        Ok(Verdict::Process(Ticket { seq }))
    }

    /// Records that the application processed the ticket's event, and
    /// returns the new cursor (the seq to persist). Tickets are processed
    /// in seq order; on error nothing is recorded.
    pub fn processed(&mut self, ticket: Ticket) -> Result<u64, ProcessedError> {
        let seq = ticket.seq;
        let expected = match self.cursor {
            Some(cursor) if seq <= cursor => return Err(ProcessedError::Already { cursor, seq }),
            Some(cursor) => cursor + 1, // `seq > cursor`: no overflow
            None => 0,
        };
        if seq != expected {
            return Err(ProcessedError::Skipped { expected, got: seq });
        }
        self.cursor = Some(seq);
        Ok(seq)
    }

    /// The stream ended with the empty result: the task ended and the
    /// server sent every event. Fails, recording nothing, if an event let
    /// through on this stream was not processed (resume with
    /// [`after`](Self::after) to get it again).
    pub fn on_end(&mut self) -> Result<(), EndError> {
        if let Some(last) = self.last.filter(|&l| self.cursor.is_none_or(|c| l > c)) {
            let first = self.cursor.map_or(0, |c| c + 1);
            return Err(EndError::Unprocessed { first, last });
        }
        self.ended = true;
        Ok(())
    }

    /// The stream failed with `events_gone` and `data.earliestSeq`
    /// `earliest`: the [`Loss`] of every seq from the one needed next to
    /// `earliest - 1`. Nothing changes until the loss is accepted.
    ///
    /// An `earliest` at or below the seq needed next means nothing is
    /// missing: [`GoneError::NothingMissing`], a server fault.
    pub fn on_events_gone(&self, earliest: u64) -> Result<Loss, GoneError> {
        let next = self.next();
        if earliest <= next {
            return Err(GoneError::NothingMissing { next, earliest });
        }
        Ok(Loss { first_missing: next, last_missing: earliest - 1 })
    }

    /// Accepts `loss` explicitly: the cursor moves to its last seq, as if
    /// those events were processed, and [`lost`](Self::lost) counts them.
    /// Returns the new cursor (the `after` of the next stream).
    ///
    /// The loss must start right after the cursor (process the tickets held
    /// first) and not be inverted; on error nothing changes. Accepting a
    /// [`EventError::Gap`]'s loss lets its event through on the same stream.
    pub fn accept_loss(&mut self, loss: Loss) -> Result<u64, LossError> {
        let expected = self.cursor.map_or(0, |c| c.saturating_add(1));
        if self.cursor == Some(u64::MAX) || loss.first_missing != expected {
            return Err(LossError::NotNext { expected, first: loss.first_missing });
        }
        if loss.last_missing < loss.first_missing {
            return Err(LossError::Inverted { first: loss.first_missing, last: loss.last_missing });
        }
        self.cursor = Some(loss.last_missing);
        self.lost = self.lost.saturating_add(loss.count());
        Ok(loss.last_missing)
    }
}

/// Why [`TaskStreamGuard::on_event`] let an event through neither as new
/// nor as a duplicate.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum EventError {
    /// The event belongs to another task: a server fault; drop it.
    WrongTask {
        /// The guard's task.
        expected: String,
        /// The event's `taskId`.
        got: String,
    },
    /// An event after the stream's empty result: a server fault; drop it.
    AfterEnd {
        /// Its seq.
        seq: u64,
    },
    /// The seq is not above one already let through on this stream (a
    /// repeat or a step back): the server broke its order. Skip it: it was
    /// let through before, nothing is lost.
    Regress {
        /// The highest seq let through on the stream.
        last: u64,
        /// The seq that came.
        got: u64,
    },
    /// Seqs `expected..got` did not come before `got`: do not process it.
    /// Resume with [`TaskStreamGuard::after`] (the server sends them again
    /// or answers `events_gone`), or accept [`EventError::loss`].
    Gap {
        /// The seq needed.
        expected: u64,
        /// The seq that came.
        got: u64,
    },
}

impl EventError {
    /// For a [`EventError::Gap`], the seqs that did not come, for
    /// [`TaskStreamGuard::accept_loss`].
    pub fn loss(&self) -> Option<Loss> {
        match *self {
            EventError::Gap { expected, got } if got > expected => {
                Some(Loss { first_missing: expected, last_missing: got - 1 })
            }
            _ => None,
        }
    }
}

impl fmt::Display for EventError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EventError::WrongTask { expected, got } => {
                write!(f, "an event of task {got:?} on the stream of task {expected:?}")
            }
            EventError::AfterEnd { seq } => write!(f, "task event {seq} after the stream's end"),
            EventError::Regress { last, got } => {
                write!(f, "task event {got} after {last} on one stream: seqs must rise")
            }
            EventError::Gap { expected, got } => write!(f, "task event {got} came where {expected} was due"),
        }
    }
}

impl std::error::Error for EventError {}

/// Why [`TaskStreamGuard::processed`] recorded nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ProcessedError {
    /// The cursor is already at or past the ticket's seq (a ticket held
    /// across a reconnect whose event was processed twice, or a loss
    /// accepted over it).
    Already {
        /// The cursor.
        cursor: u64,
        /// The ticket's seq.
        seq: u64,
    },
    /// An earlier ticket was not processed: tickets go in seq order.
    Skipped {
        /// The seq to process first.
        expected: u64,
        /// The ticket's seq.
        got: u64,
    },
}

impl fmt::Display for ProcessedError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProcessedError::Already { cursor, seq } => {
                write!(f, "task event {seq} is not after the processed cursor {cursor}")
            }
            ProcessedError::Skipped { expected, got } => {
                write!(f, "task event {got} marked processed before {expected}")
            }
        }
    }
}

impl std::error::Error for ProcessedError {}

/// Why [`TaskStreamGuard::on_end`] did not accept the end.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum EndError {
    /// Seqs `first..=last` were let through on the stream but not marked
    /// processed.
    Unprocessed {
        /// The first not processed.
        first: u64,
        /// The last let through.
        last: u64,
    },
}

impl fmt::Display for EndError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EndError::Unprocessed { first, last } => {
                write!(f, "the stream ended with task events {first}..={last} not processed")
            }
        }
    }
}

impl std::error::Error for EndError {}

/// Why an `events_gone` is not a loss ([`TaskStreamGuard::on_events_gone`]).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum GoneError {
    /// The server's earliest kept seq is at or below the one the guard
    /// needs next: nothing after the cursor is missing, the refusal is a
    /// server fault.
    NothingMissing {
        /// The seq needed next.
        next: u64,
        /// `data.earliestSeq`.
        earliest: u64,
    },
}

impl fmt::Display for GoneError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            GoneError::NothingMissing { next, earliest } => write!(
                f,
                "events_gone with earliestSeq {earliest}, but {next} is the next needed: nothing is missing"
            ),
        }
    }
}

impl std::error::Error for GoneError {}

/// Why [`TaskStreamGuard::accept_loss`] accepted nothing.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum LossError {
    /// The loss does not start right after the cursor (or the cursor is
    /// at `u64::MAX`).
    NotNext {
        /// The seq after the cursor.
        expected: u64,
        /// The loss's first seq.
        first: u64,
    },
    /// The loss ends before it starts.
    Inverted {
        /// Its first seq.
        first: u64,
        /// Its last seq.
        last: u64,
    },
}

impl fmt::Display for LossError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            LossError::NotNext { expected, first } => {
                write!(
                    f,
                    "a loss from task event {first} does not start at {expected}, right after the cursor"
                )
            }
            LossError::Inverted { first, last } => write!(f, "a loss from {first} to {last} is inverted"),
        }
    }
}

impl std::error::Error for LossError {}

#[cfg(test)]
mod tests;
