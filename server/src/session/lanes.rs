//! Which connection of a session carries which lane now (`docs/SPEC.md`
//! §5): a newer connection on the same lane takes over, and the older one
//! is ended.

use crate::vocab::sync::lock;
use gapless::StreamId;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use tokio_util::sync::CancellationToken;

/// What one connection of a session carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) enum Lane {
    /// An SSE response following one stream.
    Stream(StreamId),
    /// The migrated session's WebSocket (every stream).
    Socket,
}

/// A connection's claim on a lane: its generation and the token that ends
/// it.
pub(crate) type Claim = (u64, CancellationToken);

/// The lanes of one session and the connection that holds each.
#[derive(Debug, Default)]
pub(crate) struct Lanes {
    /// Each lane's current connection: its generation and the token that
    /// ends it.
    held: Mutex<HashMap<Lane, Claim>>,
    /// The next generation.
    next: AtomicU64,
}

impl Lanes {
    /// Registers a new connection for `lane`, ending the one that carried
    /// it before; its token is a child of `parent` (the session's). With
    /// `exclusive`, refuses (returns `None`) if a live connection carries
    /// it.
    pub(crate) fn claim(&self, parent: &CancellationToken, lane: Lane, exclusive: bool) -> Option<Claim> {
        let mut map = lock(&self.held);
        if let Some((_, old)) = map.get(&lane) {
            if exclusive && !old.is_cancelled() {
                return None;
            }
            old.cancel();
        }
        let gen = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        let token = parent.child_token();
        map.insert(lane, (gen, token.clone()));
        Some((gen, token))
    }

    /// Forgets connection `gen` of `lane` if it is still the current one.
    pub(crate) fn release(&self, lane: Lane, gen: u64) {
        let mut map = lock(&self.held);
        if map.get(&lane).is_some_and(|(g, _)| *g == gen) {
            map.remove(&lane);
        }
    }

    /// Ends every SSE connection (a migration to a WebSocket); the socket's
    /// own claim stays.
    pub(crate) fn end_all_sse(&self) {
        lock(&self.held).retain(|lane, (_, t)| {
            if *lane == Lane::Socket {
                return true;
            }
            t.cancel();
            false
        });
    }

    /// Ends connection `gen` of `lane`, if it is still the current one.
    pub(crate) fn end_gen(&self, lane: Lane, gen: u64) {
        let mut map = lock(&self.held);
        if map.get(&lane).is_some_and(|(g, _)| *g == gen) {
            if let Some((_, t)) = map.remove(&lane) {
                t.cancel();
            }
        }
    }

    /// Ends the connection that carries `lane` now, if any.
    pub(crate) fn end(&self, lane: Lane) {
        if let Some((_, t)) = lock(&self.held).remove(&lane) {
            t.cancel();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_newer_connection_takes_over_unless_exclusive() {
        let (lanes, parent) = (Lanes::default(), CancellationToken::new());
        let lane = Lane::Stream(StreamId(2));
        let (g1, t1) = lanes.claim(&parent, lane, false).unwrap();
        let (g2, t2) = lanes.claim(&parent, lane, false).unwrap();
        assert!(t1.is_cancelled() && !t2.is_cancelled() && g2 > g1);
        // An exclusive claim waits for the holder to go.
        assert!(lanes.claim(&parent, lane, true).is_none());
        lanes.release(lane, g1); // not the current one: nothing happens
        assert!(lanes.claim(&parent, lane, true).is_none());
        lanes.release(lane, g2);
        let (_, t3) = lanes.claim(&parent, lane, true).unwrap();
        // A migration ends every SSE connection, not the socket.
        let (_, socket) = lanes.claim(&parent, Lane::Socket, false).unwrap();
        lanes.end_all_sse();
        assert!(t3.is_cancelled() && !socket.is_cancelled());
        parent.cancel();
        assert!(socket.is_cancelled(), "a claim ends with its session");
    }
}
