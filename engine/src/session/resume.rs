//! The resume decision table (`docs/SPEC.md` §4.2) on the in-process store.
//!
//! [`Hub::resume_stream`] (an SSE resume) and [`Hub::check_migration`] (a
//! WebSocket migration) take a [`ResumeRequest`] and answer `Ok(Resume)` or
//! exactly one [`Refusal`], checking the table's rows in order: rows 1 and 2
//! here (the hub's lookup), rows 3 to 7 in `table` (the same for every
//! store). Each refusal names its `ErrorKind`, which carries the HTTP status
//! and the JSON name, so a transport maps every variant in one place.

use super::hub::Hub;
use super::session::Session;
pub use super::table::Refusal;
use super::table::{decide, Target};
use crate::ring::Snapshot;
use gapless_wire::{EventId, Seq, StreamId};
use std::sync::Arc;

/// A resume request as it arrives: the session id, the cursor and the
/// caller's identity, each as the transport read them.
///
/// ```
/// use gapless::ResumeRequest;
/// let req = ResumeRequest::new("0123456789abcdef0123456789abcdef").cursor("00ab34ff9c01de77_2-7");
/// assert_eq!(req.cursor, Some("00ab34ff9c01de77_2-7"));
/// assert_eq!(req.owner, None);
/// ```
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ResumeRequest<'a> {
    /// `Mcp-Session-Id` (or the upgrade path's id), if any.
    pub session_id: Option<&'a str>,
    /// The cursor (an event id). For a migration, `None` means "processed
    /// nothing" (cursor seq 0); for a stream resume a missing cursor is
    /// malformed (a GET without `Last-Event-ID` is not a resume).
    pub cursor: Option<&'a str>,
    /// The caller identity the session must be bound to (`None` for none).
    pub owner: Option<&'a str>,
}

impl<'a> ResumeRequest<'a> {
    /// A request on session `session_id`, without a cursor or an owner.
    pub fn new(session_id: &'a str) -> Self {
        ResumeRequest { session_id: Some(session_id), cursor: None, owner: None }
    }

    /// With cursor `cursor` (an event id as the client sent it).
    pub fn cursor(mut self, cursor: &'a str) -> Self {
        self.cursor = Some(cursor);
        self
    }

    /// Made by caller `owner` (`None`: an anonymous caller).
    pub fn owner(mut self, owner: Option<&'a str>) -> Self {
        self.owner = owner;
        self
    }
}

/// A granted resume: the pinned gap, to be followed by live events of the
/// same target.
#[derive(Debug)]
pub struct Resume {
    /// The session.
    pub session: Arc<Session>,
    /// The parsed cursor (`None` for a migration from "processed nothing").
    pub cursor: Option<EventId>,
    /// The cursor's seq (0 for "processed nothing").
    pub after: Seq,
    /// The stream being resumed, or `None` for the whole session.
    pub stream: Option<StreamId>,
    /// The gap, pinned. Empty only when the cursor is at the target's
    /// high-water mark.
    pub snapshot: Snapshot,
}

impl Hub {
    /// An SSE resume (`Last-Event-ID`): the cursor's own stream after the
    /// cursor, per the decision table in its order. `Ok` pins the gap;
    /// [`Resume::into_subscription`] (feature `tokio`) replays it and
    /// continues live.
    pub fn resume_stream(&self, req: ResumeRequest<'_>) -> Result<Resume, Refusal> {
        self.decide(req, Target::Stream)
    }

    /// A WebSocket migration's check: every event of the session after the
    /// client's contiguous processed prefix (`cursor: None` = processed
    /// nothing), per the decision table in its order. [`Hub::migrate`] runs
    /// it and issues the ticket.
    pub fn check_migration(&self, req: ResumeRequest<'_>) -> Result<Resume, Refusal> {
        self.decide(req, Target::Session)
    }

    fn decide(&self, req: ResumeRequest<'_>, target: Target) -> Result<Resume, Refusal> {
        // Row 1: a resume without a session id never creates one.
        let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
        // Row 2.
        // Unknown, expired, deleted and foreign look the same.
        let session = self.get_str(sid, req.owner).map_err(|_| Refusal::UnknownSession)?;
        self.touch(&session);
        let d = decide(&*session, req.cursor, target)?;
        Ok(Resume { session, cursor: d.cursor, after: d.after, stream: d.stream, snapshot: d.replay })
    }
}

#[cfg(test)]
mod tests {
    use super::ResumeRequest;

    #[test]
    fn a_request_carries_what_the_transport_read() {
        let req = ResumeRequest::new("s").cursor("c").owner(Some("alice"));
        assert_eq!(req, ResumeRequest { session_id: Some("s"), cursor: Some("c"), owner: Some("alice") });
        assert_eq!(ResumeRequest::new("s").owner(None).cursor, None);
    }
}
