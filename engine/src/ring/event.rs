//! The event values handed to readers.

use bytes::Bytes;
use gapless_wire::{Seq, StreamId};

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

/// A borrowed view of an event inside a pinned chunk, as a
/// [`Snapshot`](super::Snapshot) or a [`Batch`](super::Batch) hands it out:
/// reading it costs no reference-count traffic.
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
