//! What the store answers with: sessions, where a follower starts, log
//! entries, appended and stored events.

use bytes::Bytes;
use gapless::{Namespace, Seq, SessionId, StreamId};

/// A session as the store knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredSession {
    /// Its id.
    pub id: SessionId,
    /// The namespace of this incarnation.
    pub ns: Namespace,
    /// The negotiated protocol version (empty until known).
    pub version: String,
    /// A WebSocket redeemed a ticket of it (`docs/SPEC.md` §4.3).
    pub migrated: bool,
}

/// Where a new follower of a session (a node's local replica) starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attach {
    /// The namespace of this incarnation.
    pub ns: Namespace,
    /// The newest seq: the replica's ring starts after it.
    pub head: Seq,
    /// Streams opened so far.
    pub opened: StreamId,
    /// The streams that have not ended, ascending (every other id up to
    /// `opened` has).
    pub live: Vec<StreamId>,
    /// The log position to tail after.
    pub position: Position,
    /// The negotiated protocol version.
    pub version: String,
    /// A WebSocket redeemed a ticket of it.
    pub migrated: bool,
    /// The nonce of the event at `position`'s seq, if retained.
    pub check: Option<u64>,
}

/// A position in a session's log: `(seq, k)` of entry id `<seq>-<k>`
/// (events have `k == 0`, control entries `k >= 1`).
pub type Position = (u64, u64);

/// One entry a follower reads ([`RedisStore::tail`](crate::RedisStore::tail)).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum TailEntry {
    /// An event.
    Event(StoredEvent),
    /// A stream ended (after its events before this position).
    Ended(StreamId),
    /// An event the reading node wrote itself, without its payload
    /// ([`RedisStore::tail_skipping`](crate::RedisStore::tail_skipping)):
    /// the node has it from its append's answer.
    Own(OwnEvent),
}

/// An event of the reading node's own, as a skipping tail gives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OwnEvent {
    /// Its seq.
    pub seq: Seq,
    /// Its stream.
    pub stream: StreamId,
    /// Its position in the stream, from 1.
    pub index_in_stream: u64,
    /// Its nonce.
    pub check: u64,
}

/// What a follower read: the window's bounds then, and the entries.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Tail {
    /// The oldest retained seq when read.
    pub oldest: Seq,
    /// The newest seq when read.
    pub head: Seq,
    /// The incarnation read (a follower of another one must stop).
    pub ns: Namespace,
    /// The nonce of the event at the asked position's seq, if retained: a
    /// follower that applied another there follows a rewritten log.
    pub check_at: Option<u64>,
    /// How many control entries (streams' ends) the log ever had: a
    /// follower that hears of more than it read must read the log.
    pub ctl: u64,
    /// A WebSocket redeemed a ticket of the session.
    pub migrated: bool,
    /// Entries after the asked position, in log order, with their positions.
    pub entries: Vec<(Position, TailEntry)>,
}

/// One appended event: its seq, its index in its stream and its nonce (the
/// wire id's check).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Appended {
    /// The seq the store allocated.
    pub seq: Seq,
    /// Its position in its stream, from 1.
    pub index: u64,
    /// The event's nonce.
    pub check: u64,
}

/// One event read back from the store.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StoredEvent {
    /// Its seq.
    pub seq: Seq,
    /// Its stream.
    pub stream: StreamId,
    /// Its position in the stream, from 1.
    pub index_in_stream: u64,
    /// Its nonce.
    pub check: u64,
    /// Its payload.
    pub payload: Bytes,
}

/// Where a request running on a node is answered (`docs/SPEC.md` §8.5):
/// the stream its response goes on and, on a stream other requests share,
/// the token that tells its answer from theirs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestAt {
    /// The request's own stream: its answer ends it.
    Own(StreamId),
    /// A stream the request shares with others (the legacy HTTP+SSE
    /// transport's): its answer is written once, marked by the token in
    /// the store, and the stream goes on. Make one with
    /// [`RequestAt::shared`].
    Shared(StreamId, u64),
}

impl RequestAt {
    /// The stream the answer goes on.
    pub fn stream(&self) -> StreamId {
        match *self {
            RequestAt::Own(s) | RequestAt::Shared(s, _) => s,
        }
    }

    /// The field of the node's open requests that names it:
    /// `<session id>|<stream>`, and `|<token>` (16 hex) when shared.
    pub(crate) fn field(&self, id: &SessionId) -> String {
        match *self {
            RequestAt::Own(s) => format!("{id}|{}", s.0),
            RequestAt::Shared(s, t) => format!("{id}|{}|{t:016x}", s.0),
        }
    }

    /// The session and place a field of [`RequestAt::field`]'s form names.
    pub(crate) fn parse_field(field: &str) -> Option<(SessionId, RequestAt)> {
        let mut parts = field.split('|');
        let sid = SessionId::parse(parts.next()?)?;
        let stream = StreamId(parts.next()?.parse().ok()?);
        let at = match parts.next() {
            None => RequestAt::Own(stream),
            Some(t) if t.len() == 16 => RequestAt::Shared(stream, u64::from_str_radix(t, 16).ok()?),
            Some(_) => return None,
        };
        parts.next().is_none().then_some((sid, at))
    }
}

impl From<StreamId> for RequestAt {
    fn from(s: StreamId) -> Self {
        RequestAt::Own(s)
    }
}

/// What `orphan.lua` did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Orphaned {
    /// It wrote the answer (and ended the stream, if the request's own).
    Wrote,
    /// The stream had ended, its record is gone, or (on a shared stream)
    /// the request was answered already: nothing written.
    Done,
    /// The answer exceeds the session's byte budget: nothing written.
    TooLarge,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_field_names_its_place() {
        let id = SessionId::parse("0123456789abcdef0123456789abcdef").unwrap();
        let own = RequestAt::Own(StreamId(7));
        let shared = RequestAt::Shared(StreamId(7), 0xab);
        // The form of a field written before shared streams stays the own one.
        assert_eq!(own.field(&id), format!("{id}|7"));
        assert_eq!(shared.field(&id), format!("{id}|7|00000000000000ab"));
        for at in [own, shared] {
            assert_eq!(RequestAt::parse_field(&at.field(&id)), Some((id, at)));
        }
        for bad in [
            "",
            "x|7",
            &format!("{id}"),
            &format!("{id}|x"),
            &format!("{id}|7|ab"),
            &format!("{id}|7|00000000000000ab|1"),
        ] {
            assert_eq!(RequestAt::parse_field(bad), None, "{bad}");
        }
    }
}
