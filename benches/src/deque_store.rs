//! The store the MCP SDKs ship: one mutex around a bounded deque of
//! reference-counted events.
//!
//! Publishing allocates an `Arc<Event>` and pushes it under the lock,
//! dropping the oldest when full; reading locks and clones `Arc`s out. The
//! peer is given an advantage the SDKs do not have: seqs are dense, so the
//! start of a gap is found by arithmetic instead of a linear scan for the
//! cursor's event id.

use bytes::Bytes;
use gapless::{Coverage, Event, Seq, StreamId};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

/// A bounded event store behind one mutex.
#[derive(Debug)]
pub struct DequeStore {
    inner: Mutex<Inner>,
    capacity: usize,
}

#[derive(Debug)]
struct Inner {
    /// Retained events, oldest first: seqs `head + 1 - len ..= head`.
    events: VecDeque<Arc<Event>>,
    /// Seq of the newest event (0 before the first).
    head: u64,
    /// Events published per stream, indexed by stream id.
    per_stream: Vec<u64>,
}

impl Inner {
    fn oldest(&self) -> u64 {
        self.head + 1 - self.events.len() as u64
    }

    /// Index in `events` of the first event after `after`, or the error.
    fn start(&self, after: Seq) -> Result<usize, Evicted> {
        let oldest = self.oldest();
        if after.0 + 1 < oldest {
            return Err(Evicted { oldest: Seq(oldest) });
        }
        Ok(((after.0 + 1 - oldest) as usize).min(self.events.len()))
    }
}

/// Some event after the cursor is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Evicted {
    /// The oldest retained seq.
    pub oldest: Seq,
}

impl DequeStore {
    /// An empty store that keeps the newest `capacity` events. The deque
    /// grows on demand, as the SDKs' do.
    pub fn new(capacity: usize) -> Self {
        assert!(capacity > 0);
        DequeStore {
            inner: Mutex::new(Inner { events: VecDeque::new(), head: 0, per_stream: Vec::new() }),
            capacity,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Appends an event, evicting the oldest when full; returns its seq.
    pub fn publish(&self, stream: StreamId, payload: Bytes) -> Seq {
        let mut g = self.lock();
        g.head += 1;
        let seq = Seq(g.head);
        let s = stream.0 as usize;
        if g.per_stream.len() <= s {
            g.per_stream.resize(s + 1, 0);
        }
        g.per_stream[s] += 1;
        let index_in_stream = g.per_stream[s];
        let evicted = if g.events.len() == self.capacity { g.events.pop_front() } else { None };
        g.events.push_back(Arc::new(Event { seq, stream, index_in_stream, payload }));
        drop(g);
        drop(evicted); // freed outside the lock
        seq
    }

    /// Seq of the newest event.
    pub fn head(&self) -> Seq {
        Seq(self.lock().head)
    }

    /// The same answer as `gapless::Reader::coverage`, under the lock.
    pub fn coverage(&self, cursor: Seq) -> Coverage {
        let g = self.lock();
        if cursor.0 > g.head {
            return Coverage::Ahead { head: Seq(g.head) };
        }
        let oldest = g.oldest();
        if cursor.0 + 1 >= oldest {
            Coverage::Covered
        } else {
            Coverage::Evicted { oldest: Seq(oldest), missing: oldest - 1 - cursor.0 }
        }
    }

    /// Clones every event after `after` out of the store.
    pub fn gap(&self, after: Seq) -> Result<Vec<Arc<Event>>, Evicted> {
        let g = self.lock();
        let start = g.start(after)?;
        Ok(g.events.range(start..).cloned().collect())
    }

    /// Clones the events of `stream` after `after` out of the store.
    pub fn gap_stream(&self, stream: StreamId, after: Seq) -> Result<Vec<Arc<Event>>, Evicted> {
        let g = self.lock();
        let start = g.start(after)?;
        Ok(g.events.range(start..).filter(|e| e.stream == stream).cloned().collect())
    }

    /// Appends to `out` at most `max` events after `after` (a tailing
    /// reader's poll).
    pub fn read_after(&self, after: Seq, max: usize, out: &mut Vec<Arc<Event>>) -> Result<(), Evicted> {
        let g = self.lock();
        let start = g.start(after)?;
        out.extend(g.events.range(start..).take(max).cloned());
        Ok(())
    }
}
