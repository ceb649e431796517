//! Why the store could not do what was asked: one error type per
//! operation, each variant with what a caller needs to act.

use gapless::session::Refusal;
use gapless::{EventId, Seq, StreamId};
use std::fmt;

/// Why the store could not do what was asked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum StoreError {
    /// The Redis URL does not parse.
    BadUrl(String),
    /// Redis could not be reached or did not answer in time.
    Unavailable(String),
    /// Redis runs with a `maxmemory-policy` that may delete keys (anything
    /// but `noeviction`): session logs would vanish silently.
    EvictionPolicy(String),
    /// A key under our prefix holds another type (another program's data):
    /// nothing was written.
    Corrupt {
        /// The key.
        key: String,
    },
    /// Redis answered something the scripts never return.
    Protocol(String),
    /// No such session (or not visible to this caller).
    UnknownSession,
    /// The store's event at `seq` is not the one the caller holds (a
    /// failover rewrote the log): nothing was recorded.
    Rewritten {
        /// The seq.
        seq: Seq,
    },
    /// A request's answer is larger than the session's byte budget: nothing
    /// was written (a permanent refusal: retrying cannot help).
    AnswerTooLarge {
        /// The answer's length.
        len: usize,
    },
}

impl fmt::Display for StoreError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            StoreError::BadUrl(e) => write!(f, "malformed Redis URL: {e}"),
            StoreError::Unavailable(e) => write!(f, "Redis is unavailable: {e}"),
            StoreError::EvictionPolicy(p) => write!(
                f,
                "Redis runs with maxmemory-policy {p}, which deletes keys under memory pressure and would \
                 lose session logs silently; set it to noeviction"
            ),
            StoreError::Corrupt { key } => {
                write!(f, "key {key} holds data of another type (another program's data under our prefix?)")
            }
            StoreError::Protocol(e) => write!(f, "unexpected answer from Redis: {e}"),
            StoreError::UnknownSession => f.write_str("unknown session"),
            StoreError::Rewritten { seq } => {
                write!(
                    f,
                    "the store's event {seq} is not the one this node holds (a failover rewrote the log)"
                )
            }
            StoreError::AnswerTooLarge { len } => {
                write!(f, "the answer of {len} bytes exceeds the session's byte budget")
            }
        }
    }
}

impl std::error::Error for StoreError {}

impl From<redis::RedisError> for StoreError {
    fn from(e: redis::RedisError) -> Self {
        StoreError::Unavailable(e.to_string())
    }
}

/// Why an append was refused (nothing of the batch was written).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AppendError {
    /// The store failed (see [`StoreError`]).
    Store(StoreError),
    /// The stream has ended.
    StreamEnded(StreamId),
    /// No such stream (never opened, or its record was reclaimed).
    UnknownStream(StreamId),
    /// Event `index` of the batch is larger than the session's byte budget.
    PayloadTooLarge {
        /// Its place in the batch.
        index: usize,
        /// Its length.
        len: usize,
        /// The budget.
        budget: usize,
    },
}

impl fmt::Display for AppendError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AppendError::Store(e) => e.fmt(f),
            AppendError::StreamEnded(s) => write!(f, "stream {s} has ended"),
            AppendError::UnknownStream(s) => write!(f, "unknown stream {s}"),
            AppendError::PayloadTooLarge { len, budget, .. } => {
                write!(f, "payload of {len} bytes exceeds the byte budget of {budget}")
            }
        }
    }
}

impl std::error::Error for AppendError {}

impl From<StoreError> for AppendError {
    fn from(e: StoreError) -> Self {
        AppendError::Store(e)
    }
}

/// Why a granted replay could not be read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReplayError {
    /// The store failed.
    Store(StoreError),
    /// The window moved past part of the gap after the decision: decide
    /// again (the decision then refuses the gap).
    Moved,
}

impl From<StoreError> for ReplayError {
    fn from(e: StoreError) -> Self {
        ReplayError::Store(e)
    }
}

/// Why a migration ticket was not redeemed ([`RedisStore::redeem_ticket`](crate::RedisStore::redeem_ticket)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RedeemError {
    /// Unknown (never issued, already redeemed, its session gone), expired,
    /// or issued to another caller.
    Ticket(gapless::session::TicketError),
    /// The store lost the event of the ticket's cursor since the ticket was
    /// issued (a failover): a resume with the cursor is refused the same,
    /// [`Refusal::HistoryRewritten`] with these numbers.
    HistoryRewritten {
        /// The ticket's cursor.
        cursor: EventId,
        /// The store's newest seq.
        head: Seq,
    },
}

impl fmt::Display for RedeemError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RedeemError::Ticket(e) => e.fmt(f),
            RedeemError::HistoryRewritten { cursor, head } => {
                Refusal::HistoryRewritten { cursor: *cursor, head: *head }.fmt(f)
            }
        }
    }
}

impl std::error::Error for RedeemError {}

/// A store failure as the decision table's 503.
pub(crate) fn unavailable(e: StoreError) -> Refusal {
    Refusal::StoreUnavailable { reason: e.to_string() }
}

/// Why a guarded append wrote nothing.
#[derive(Debug)]
pub(crate) enum Guarded {
    /// As [`RedisStore::append`] refuses.
    Refused(AppendError),
    /// Not the next batch of its queue: the queue's last written batch.
    Order(u64),
}
