//! The event values handed to readers.

use bytes::Bytes;
use gapless_wire::{Seq, StreamId};

/// A payload made from `v` whose allocation is exactly its length: the
/// ring's byte budget and the hub's memory budget count a payload by its
/// length, while a `Bytes` made from a `Vec` with spare capacity keeps the
/// whole capacity alive (`serde_json::to_vec` and `format!` leave some, up
/// to half of it) and allocates a 24-byte shared header besides. A `Vec`
/// with no spare capacity is taken as it is; a smaller one with spare
/// capacity is copied into an allocation of its length (its own buffer is
/// freed, for the next `Vec` of its size to reuse: shrinking it in place
/// would leave a small hole beside each retained payload); a larger one
/// (over 64 KiB) is shrunk in place, where the copy would cost more than
/// the hole.
pub fn exact_bytes(v: Vec<u8>) -> Bytes {
    if v.len() == v.capacity() {
        Bytes::from(v)
    } else if v.len() <= COPY_MAX {
        Bytes::copy_from_slice(&v)
    } else {
        Bytes::from(v.into_boxed_slice())
    }
}

/// Largest payload `exact_bytes` copies rather than shrinks.
const COPY_MAX: usize = 64 << 10;

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
