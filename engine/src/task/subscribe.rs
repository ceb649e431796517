//! Following a task's event stream (feature `tokio`): the replay of a
//! snapshot, then live events, each once, in seq order, until the stream
//! ends; a reader that falls behind the bounds is told which seq is the
//! oldest kept, never skipped forward.

use super::{OpenError, TaskEvents};
use crate::subscription::Subscription;
use bytes::Bytes;
use std::time::Instant;

/// An event of a task's stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TaskEvent {
    /// Its seq (from 0).
    pub seq: u64,
    /// What was emitted.
    pub payload: Bytes,
}

/// A stream opened at a cursor ([`TaskEvents::subscribe`]).
#[derive(Debug)]
pub struct TaskSubscription {
    /// `None`: an ended stream that keeps nothing (it ends at once).
    inner: Option<Subscription>,
}

impl TaskEvents {
    /// Opens the stream after `after` (at the oldest event served, for
    /// `None`): its replay, then live events, to the end. Refused like
    /// [`TaskEvents::snapshot`].
    pub fn subscribe(&self, after: Option<u64>, now: Instant) -> Result<TaskSubscription, OpenError> {
        let snapshot = self.snapshot(after, now)?.into_inner();
        Ok(TaskSubscription { inner: snapshot.map(|s| Subscription::new(self.reader(), s)) })
    }
}

impl TaskSubscription {
    /// The next event, waiting for it: `None` once the stream ended and
    /// every event was yielded; `Some(Err(Gone))` once if the next event
    /// was dropped by the bounds before it was read (then `None`).
    pub async fn recv(&mut self) -> Option<Result<TaskEvent, OpenError>> {
        Some(match self.inner.as_mut()?.recv().await? {
            Ok(e) => Ok(TaskEvent { seq: e.seq.0 - 1, payload: e.payload }),
            Err(lagged) => Err(OpenError::Gone { earliest: lagged.oldest.0 - 1 }),
        })
    }

    /// Events of the replay not yielded yet.
    pub fn replay_pending(&self) -> usize {
        self.inner.as_ref().map_or(0, Subscription::replay_pending)
    }
}
