//! Ids and the event values handed to readers.

use bytes::Bytes;
use std::fmt;

/// A session-global event sequence number: dense, starting at 1, one per
/// published event, never reused within a ring. `Seq(0)` is the cursor
/// "processed nothing".
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Seq(pub u64);

impl Seq {
    /// The cursor before the first event.
    pub const ZERO: Seq = Seq(0);

    /// The numeric value.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Seq({})", self.0)
    }
}

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// Names a delivery lane inside one ring (the standalone GET stream, or the
/// response stream of one request). Assigned densely from 1 by the ring's
/// producer; never reused within a ring.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamId(pub u64);

impl StreamId {
    /// The numeric value.
    #[inline]
    pub const fn get(self) -> u64 {
        self.0
    }
}

impl fmt::Debug for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "StreamId({})", self.0)
    }
}

impl fmt::Display for StreamId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.0, f)
    }
}

/// One published event, owned: `(seq, stream, payload)`. Cloning the payload
/// is a reference-count bump, never a copy of the bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// The event's session-global sequence number.
    pub seq: Seq,
    /// The stream the event was published on.
    pub stream: StreamId,
    /// The 1-based position of the event within its stream.
    pub index_in_stream: u64,
    /// The payload (empty for priming events).
    pub payload: Bytes,
}

/// A borrowed view of an event inside a [`Snapshot`](crate::Snapshot):
/// iterating a snapshot costs no reference-count traffic.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EventRef<'a> {
    /// The event's session-global sequence number.
    pub seq: Seq,
    /// The stream the event was published on.
    pub stream: StreamId,
    /// The 1-based position of the event within its stream.
    pub index_in_stream: u64,
    /// The payload, borrowed from the pinned chunk.
    pub payload: &'a Bytes,
}

impl EventRef<'_> {
    /// Clones the event out (one reference-count bump for the payload).
    pub fn to_event(&self) -> Event {
        Event {
            seq: self.seq,
            stream: self.stream,
            index_in_stream: self.index_in_stream,
            payload: self.payload.clone(),
        }
    }
}
