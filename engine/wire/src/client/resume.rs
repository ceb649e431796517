//! What a resume produced ([`classify_resume`]): resumed, refused with its
//! reason, or a replay that contradicts its cursor (`docs/SPEC.md` §6).

use super::RequestId;
use crate::event_id::EventId;
use crate::{ErrorKind, Seq};
use std::fmt;

/// What the server answered to a resume, as input to [`classify_resume`].
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ResumeResponse<'a> {
    /// A success: the ids of the events received on the resumed stream
    /// before the caller judged the replay over (the stream ended, or a quiet
    /// period passed), in arrival order.
    Replayed(&'a [EventId]),
    /// A refusal: HTTP status and the body's `error` string (empty if none).
    Refused {
        /// HTTP status.
        status: u16,
        /// The `error` kind.
        error: &'a str,
    },
}

/// The verdict on one resume ([`classify_resume`]).
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum ResumeOutcome {
    /// Events after the cursor were replayed, in order.
    Resumed {
        /// How many.
        count: usize,
        /// The last one.
        last: EventId,
    },
    /// Nothing replayed and no request pending: the cursor was at the
    /// stream's high-water mark.
    CaughtUp,
    /// Nothing replayed while requests are pending on the stream: the
    /// transport cannot prove that nothing was lost (seed 003). Re-issue
    /// those requests idempotently or re-initialize.
    LossSuspect {
        /// The pending request ids.
        pending: Vec<RequestId>,
    },
    /// The server refused the resume.
    Refused {
        /// HTTP status.
        status: u16,
        /// The `error` kind.
        kind: RefusalKind,
    },
    /// The replay itself is wrong (a server fault): treat the stream as
    /// lossy and do not process past the fault.
    BadReplay(ReplayFault),
}

/// How a replay contradicts its cursor.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum ReplayFault {
    /// An event of another namespace or stream than the cursor's.
    Foreign {
        /// The offending id.
        id: EventId,
    },
    /// The first event is not after the cursor.
    NotAfterCursor {
        /// The cursor's seq.
        cursor: Seq,
        /// The first replayed seq.
        got: Seq,
    },
    /// Seqs do not strictly rise.
    NotRising {
        /// The previous seq.
        prev: Seq,
        /// The seq that followed it.
        got: Seq,
    },
}

/// Classifies a resume of the stream whose cursor was `cursor`; `pending` are
/// the requests still awaiting a response on that stream.
///
/// A replay is checked first: every event must have the cursor's namespace
/// and stream and seqs must rise from the cursor, else
/// [`ResumeOutcome::BadReplay`]. An empty replay is
/// [`ResumeOutcome::CaughtUp`] only when nothing is pending.
pub fn classify_resume(
    cursor: &EventId,
    response: ResumeResponse<'_>,
    pending: &[RequestId],
) -> ResumeOutcome {
    let replayed = match response {
        ResumeResponse::Refused { status, error } => {
            return ResumeOutcome::Refused { status, kind: RefusalKind::from_error(error) }
        }
        ResumeResponse::Replayed(ids) => ids,
    };
    let mut prev = cursor.seq;
    for (i, id) in replayed.iter().enumerate() {
        if id.ns != cursor.ns || id.stream != cursor.stream {
            return ResumeOutcome::BadReplay(ReplayFault::Foreign { id: *id });
        }
        if id.seq <= prev {
            return ResumeOutcome::BadReplay(if i == 0 {
                ReplayFault::NotAfterCursor { cursor: prev, got: id.seq }
            } else {
                ReplayFault::NotRising { prev, got: id.seq }
            });
        }
        prev = id.seq;
    }
    match replayed.last() {
        Some(last) => ResumeOutcome::Resumed { count: replayed.len(), last: *last },
        None if pending.is_empty() => ResumeOutcome::CaughtUp,
        None => ResumeOutcome::LossSuspect { pending: pending.to_vec() },
    }
}

/// The `error` kind of a refusal as a client reads it: one of the
/// contract's [`ErrorKind`]s, or a string this version does not know (a
/// newer server, another server), kept as sent.
#[derive(Clone, PartialEq, Eq, Hash, Debug)]
pub enum RefusalKind {
    /// A kind of the contract (`docs/SPEC.md` §4.2 and §5).
    Known(ErrorKind),
    /// Any other string, kept as sent.
    Other(String),
}

impl RefusalKind {
    /// Maps an `error` string; unknown strings become [`RefusalKind::Other`].
    pub fn from_error(error: &str) -> RefusalKind {
        ErrorKind::from_wire(error).map_or_else(|| RefusalKind::Other(error.to_owned()), RefusalKind::Known)
    }

    /// The wire string.
    pub fn as_str(&self) -> &str {
        match self {
            RefusalKind::Known(k) => k.as_str(),
            RefusalKind::Other(s) => s,
        }
    }

    /// The contract's kind, if it is one.
    pub fn known(&self) -> Option<ErrorKind> {
        match self {
            RefusalKind::Known(k) => Some(*k),
            RefusalKind::Other(_) => None,
        }
    }
}

impl From<ErrorKind> for RefusalKind {
    fn from(k: ErrorKind) -> Self {
        RefusalKind::Known(k)
    }
}

impl fmt::Display for RefusalKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}
