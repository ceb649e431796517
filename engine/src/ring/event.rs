//! The event values handed to readers.

use bytes::Bytes;
use gapless_wire::{Seq, StreamId};

/// A payload made from `v` whose allocation is what its length says: the
/// ring's byte budget and the hub's memory budget count a payload by its
/// length, while a `Bytes` made from a `Vec` keeps the `Vec`'s whole
/// capacity alive (`serde_json::to_vec` and `format!` often leave half of
/// it unused). A `Vec` whose capacity is well above its length is shrunk
/// first (which may copy it); others are taken as they are.
pub fn exact_bytes(mut v: Vec<u8>) -> Bytes {
    if v.capacity() > v.len() + v.len() / 8 + 64 {
        v.shrink_to_fit();
    }
    Bytes::from(v)
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

impl Event {
    /// The event as a borrowed [`EventRef`] (no reference count).
    pub fn view(&self) -> EventRef<'_> {
        EventRef {
            seq: self.seq,
            stream: self.stream,
            index_in_stream: self.index_in_stream,
            payload: &self.payload,
        }
    }
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
