//! A node's holds of a session (`SessionHandle::hold`): what one node of a
//! cluster does for a session at a time (`docs/SPEC.md` §10.6): read its
//! upstream's standalone stream (`host.rs`), or run its upstream process
//! (`bridge.rs`). In process a hold is never lost, and costs nothing.

use gapless_server::{SessionHandle, ValueError};
use std::time::Duration;
use tokio::time::Instant;

/// How long a hold of a session (`SessionHandle::hold`: the node that reads
/// its upstream's standalone stream, or runs its upstream process) lasts
/// unrenewed: a dead node's holds are free within it, and taken within one
/// [`HOLD_RETRY`] more by a node that serves the session.
pub(crate) const HOLD_TTL: Duration = Duration::from_secs(5);
/// How often a holder renews its hold.
const HOLD_RENEW: Duration = Duration::from_millis(1500);
/// How often a node that serves a session and does not hold it tries to.
pub(crate) const HOLD_RETRY: Duration = Duration::from_secs(2);

/// Why a hold ended ([`renew`]).
#[derive(Debug, PartialEq)]
pub(crate) enum Unheld {
    /// Another node holds it, or the session is gone.
    Lost,
    /// It could not be renewed before it ran out (the store is away):
    /// another node may take it now.
    Lapsed,
}

/// Renews this node's hold `name` of `session`, taken at `taken`; returns
/// once it is lost or lapsed. Never in process, where a hold is never lost.
pub(crate) async fn renew(session: &SessionHandle, name: &str, taken: Instant) -> Unheld {
    if !session.in_cluster() {
        return std::future::pending().await;
    }
    let mut renewed = taken;
    loop {
        tokio::time::sleep(HOLD_RENEW).await;
        // An attempt that outlives the hold counts as failed.
        let left = HOLD_TTL.saturating_sub(renewed.elapsed());
        let attempt = Instant::now();
        match tokio::time::timeout(left, session.hold(name, HOLD_TTL)).await {
            Ok(Ok(true)) => renewed = attempt,
            Ok(Ok(false)) | Ok(Err(ValueError::Closed)) => return Unheld::Lost,
            Ok(Err(_)) | Err(_) if renewed.elapsed() + HOLD_RENEW >= HOLD_TTL => {
                tracing::warn!(session = %session.id(), "a hold of the session could not be renewed in time");
                return Unheld::Lapsed;
            }
            Ok(Err(_)) | Err(_) => {}
        }
    }
}
