//! Resumes, the standalone stream and migrations in cluster mode
//! (`docs/SPEC.md` §8):
//! the store decides and replays the gap; the node's replica carries on
//! live from the store's head at the decision.

use super::apply::wrap;
use super::{BusMessage, Cluster};
use crate::backend::{Attached, Feed, Table, Ticketed};
use crate::vocab::error::ApiError;
use gapless::ring::SnapshotError;
use gapless::session::{Refusal, ResumeRequest, Target};
use gapless::{Event, EventId, Seq, SessionId, StreamId, Subscription};
use gapless_redis::{holder_node, Hold, ReplayError, ReplayPlan, StoreError, STANDALONE_HOLD};
use std::sync::Arc;
use std::time::Duration;
use tokio_util::sync::CancellationToken;

/// Events of a replay read from the store per call.
const REPLAY_PAGE: usize = 1000;

/// How often a connection that ended retries letting go of the standalone
/// stream while the store does not answer.
const DROP_RETRY: Duration = Duration::from_secs(1);

/// The store's replay of `plan`, then the replica's events of the same
/// target after the store's head at the decision. `Err(None)`: the window
/// moved meanwhile, decide again.
/// `seen` is the replica's head read before the decision: above the store's
/// head then, the replica holds events the store lost (a failover).
async fn feed<A: Attached>(
    c: &Cluster,
    state: &A,
    plan: &ReplayPlan,
    seen: Seq,
) -> Result<Feed, Option<ApiError>> {
    let id = state.session().id();
    let events = match c.store.replay(&id, plan, REPLAY_PAGE).await {
        Ok(events) => events,
        Err(ReplayError::Moved) => return Err(None),
        Err(ReplayError::Store(e)) => return Err(Some(ApiError::store_unavailable(&e))),
    };
    if seen > plan.head {
        // The replica holds events the store no longer has (a failover):
        // never serve live events from it; follow the store afresh.
        // (Its transport state goes with it; the caller decides again on a
        // new replica.)
        state.drop_replica();
        return Err(None);
    }
    if !caught_up(c, &id, plan.to).await {
        return Err(Some(
            ApiError::new(
                gapless::ErrorKind::StoreUnavailable,
                "this node could not read the session's log from the store in time",
            )
            .retry_after(1),
        ));
    }
    if let Some(check) = plan.head_check {
        // The replica goes on live after the decided head, now that it has
        // applied the log up to there. A failover between the decision and
        // now can have given the replica, which lagged, a rewritten log
        // whose events do not follow the cursor: the store's event at the
        // decided head is then another, and the request is decided again
        // (the store's nonces then refuse the cursor by name). A failover
        // after this check is the follower's to find (its stale checks).
        match c.store.check_at(&id, plan.head).await {
            Ok(Some(now)) if now == check => {}
            Ok(_) => return Err(None),
            Err(e) => return Err(Some(ApiError::store_unavailable(&e))),
        }
    }
    let live = match plan.stream {
        Some(stream) => state.session().subscribe_stream(stream, plan.to),
        None => Subscription::after(state.session().reader(), plan.to),
    };
    let live: Option<Subscription> = match live {
        Ok(sub) => Some(sub),
        // The stream was over before this node followed the session.
        Err(SnapshotError::UnknownStream { .. }) => None,
        // The replica's own window moved past the hand-off: decide again.
        Err(_) => return Err(None),
    };
    let backlog = events
        .into_iter()
        .map(|e| Event {
            seq: e.seq,
            stream: e.stream,
            index_in_stream: e.index_in_stream,
            payload: wrap(e.check, e.index_in_stream, &e.payload),
        })
        .collect();
    Ok(Feed::replay(backlog, live))
}

/// Waits (bounded) until this node's replica of `id` has applied the
/// store's log up to `seq`.
async fn caught_up(c: &Cluster, id: &SessionId, seq: Seq) -> bool {
    let Some(mut applied) = c.applied(id) else { return false };
    let caught_up = tokio::time::timeout(Duration::from_secs(5), applied.wait_for(|a| *a >= seq.0)).await;
    matches!(caught_up, Ok(Ok(_)))
}

/// An SSE resume in cluster mode: the decision table on the store's facts,
/// with the same refusals as in-process, plus `history_rewritten` and
/// `store_unavailable` (§8.4, §8.5).
pub(crate) async fn resume_stream<T: Table>(
    c: &Cluster,
    table: &T,
    req: ResumeRequest<'_>,
) -> Result<(Arc<T::State>, Feed, StreamId), ApiError> {
    let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
    for _ in 0..4 {
        // The replica first: its ring then holds every event after the head
        // the store decides at.
        let state = table.live(sid, req.owner).await?;
        // The replica's head tells the store what it may have lost.
        let seen = state.session().reader().head();
        let d = c.store.resume_seen(req, Target::Stream, seen).await?;
        match feed(c, &*state, &d.replay, seen).await {
            Ok(feed) => return Ok((state, feed, d.stream.expect("stream resume"))),
            Err(Some(e)) => return Err(e),
            Err(None) => continue,
        }
    }
    Err(ApiError::window_kept_moving())
}

/// The standalone stream in cluster mode: one connection in the whole
/// cluster at a time (a lease in the store, renewed while the connection
/// is open; losing it cancels `ended`), from its first undelivered event
/// (the store's delivered mark). The caller claimed the stream's lane on
/// this node (generation `gen`).
pub(crate) async fn standalone<A: Attached>(
    c: &Arc<Cluster>,
    state: &Arc<A>,
    prime: bool,
    gen: u64,
    ended: &CancellationToken,
) -> Result<Feed, ApiError> {
    let session = state.session();
    let id = session.id();
    let standalone = session.standalone().clone();
    let holder = format!("{}:{gen}", c.node);
    // This node's lane was claimed for this connection: another holder of
    // this node is a connection that ended or is being replaced.
    match c.store.take_hold(&id, STANDALONE_HOLD, &holder, c.judge.may_judge(), |_| true).await {
        Ok(Hold::Taken { replaced }) => {
            if let Some(gone) = replaced.filter(|g| holder_node(g) != c.node) {
                // Its node was taken for dead; should it be alive after
                // all, its connection ends.
                let field = STANDALONE_HOLD.to_owned();
                c.broadcast(&BusMessage::HoldTaken { sid: id.to_string(), field, holder: gone }).await;
            }
        }
        Ok(Hold::Busy { .. }) => return Err(ApiError::stream_busy()),
        Err(StoreError::UnknownSession) => return Err(ApiError::unknown_session()),
        Err(e) => return Err(ApiError::store_unavailable(&e)),
    }
    // Let go of it when the connection ends.
    let stop = release_standalone(c, id, holder, ended.clone());
    let guard = stop.drop_guard();
    for _ in 0..4 {
        let seen = session.reader().head();
        let plan = match c.store.backlog(&id, session.owner(), standalone.id()).await {
            Ok(Some(Ok(plan))) => plan,
            Ok(Some(Err(e))) => return Err(ApiError::unread_gap(e)),
            Ok(None) => return Err(ApiError::unknown_session()),
            Err(e) => return Err(ApiError::store_unavailable(&e)),
        };
        let nothing_undelivered = match c.store.marks(&id, standalone.id()).await {
            Ok((high, delivered)) => high <= delivered,
            Err(e) => return Err(ApiError::store_unavailable(&e)),
        };
        if prime && nothing_undelivered {
            // Nothing undelivered: a priming event first (SEP-1699).
            if let Err(e) = state.prime(&standalone).await {
                return Err(ApiError::send(&e));
            }
            continue;
        }
        match feed(c, &**state, &plan, seen).await {
            Ok(feed) => return Ok(feed.guarded(guard)),
            Err(Some(e)) => return Err(e),
            Err(None) => continue,
        }
    }
    Err(ApiError::window_kept_moving())
}

/// Lets go of the standalone stream of `holder` once the returned token is
/// cancelled (the connection ended) or `ended` is (another connection
/// took it), retrying while the store does not answer. Nothing is renewed
/// meanwhile: the hold is valid while this node's lease is.
fn release_standalone(
    c: &Arc<Cluster>,
    id: SessionId,
    holder: String,
    ended: CancellationToken,
) -> CancellationToken {
    let stop = CancellationToken::new();
    let (c, token) = (Arc::clone(c), stop.clone());
    tokio::spawn(async move {
        tokio::select! {
            _ = token.cancelled() => {}
            _ = ended.cancelled() => {}
        }
        for _ in 0..60 {
            match c.store.drop_hold(&id, STANDALONE_HOLD, &holder).await {
                Ok(()) => return,
                Err(e) => tracing::debug!(error = %e, "standalone stream not let go of yet"),
            }
            tokio::time::sleep(DROP_RETRY).await;
        }
        // This node's next GET of the session takes it over; another
        // node's sees it busy until this node's lease ends.
        tracing::warn!("the standalone stream's hold could not be let go of for a minute");
    });
    stop
}

/// `POST P/session/{id}/upgrade` in cluster mode: the migration check on the
/// store's facts, then a ticket in the store (any node's socket redeems it).
/// Returns the ticket, the id of the first event to replay and how many.
pub(crate) async fn upgrade<T: Table>(
    c: &Cluster,
    table: &T,
    req: ResumeRequest<'_>,
) -> Result<Ticketed, ApiError> {
    let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
    let state = table.find(sid, req.owner).await?.ok_or_else(ApiError::unknown_session)?;
    let session = state.session();
    let d = c.store.resume_seen(req, Target::Session, session.reader().head()).await?;
    let id = session.id();
    let ticket = SessionId::random().to_string(); // 128 random bits, a ticket's shape
    let hub = table.hub().config();
    // The decision granted the cursor, so it parses; the ticket keeps its
    // check for the redeem's comparison (after a failover).
    let cursor = req.cursor.and_then(|c| EventId::parse(c).ok());
    debug_assert_eq!(cursor.map_or(Seq(0), |c| c.seq), d.after);
    c.store
        .issue_ticket(&id, req.owner, &ticket, cursor.as_ref(), hub.ticket_ttl, hub.max_tickets)
        .await
        .map_err(|e| ApiError::store_unavailable(&e))?
        .map_err(ApiError::from)?;
    let first = ReplayPlan { to: d.replay.from.min(d.replay.to), ..d.replay };
    let replay_from = match c.store.replay(&id, &first, 1).await {
        Ok(events) => events
            .first()
            .map(|e| EventId::new(session.namespace(), e.stream, e.seq).with_check(e.check).to_string()),
        Err(_) => None,
    };
    // Issuing a ticket ends the session's SSE streams, on every node.
    state.end_all_sse_streams();
    c.broadcast(&BusMessage::Migrating { sid: id.to_string() }).await;
    Ok(Ticketed { ticket, replay_from, replay_count: d.replay.to.0 - d.replay.after.0 })
}

/// `GET P/ws?ticket=T` in cluster mode: the ticket redeemed in the store
/// (once, by its caller; a cursor whose event a failover rewrote since is
/// refused `history_rewritten`), the gap after its cursor checked again (the
/// store pins nothing: a gap trimmed since the ticket was issued is refused
/// with the numbers), then the store's replay and the replica's live events of
/// the whole session. The session is migrated on every node.
pub(crate) async fn redeem<T: Table>(
    c: &Cluster,
    table: &T,
    ticket: &str,
    owner: Option<&str>,
) -> Result<(Arc<T::State>, Feed), ApiError> {
    let (id, cursor) = c
        .store
        .redeem_ticket(ticket, owner)
        .await
        .map_err(|e| ApiError::store_unavailable(&e))?
        .map_err(ApiError::from)?;
    for _ in 0..4 {
        let state = table.find(&id.to_string(), owner).await?.ok_or_else(ApiError::unknown_session)?;
        let seen = state.session().reader().head();
        let plan = match c.store.session_backlog(&id, owner, cursor).await {
            Ok(Some(Ok(plan))) => plan,
            Ok(Some(Err(SnapshotError::Evicted { oldest, missing, .. }))) => {
                return Err(ApiError::new(
                    gapless::ErrorKind::GapNotCovered,
                    format!(
                        "{missing} event(s) after the ticket's cursor were evicted before the socket opened"
                    ),
                )
                .with("cursor", serde_json::Value::Null)
                .with("oldest", serde_json::json!(oldest.get()))
                .with("missing", serde_json::json!(missing.count())))
            }
            Ok(_) => return Err(ApiError::unknown_session()),
            Err(e) => return Err(ApiError::store_unavailable(&e)),
        };
        match feed(c, &*state, &plan, seen).await {
            Ok(feed) => {
                state.session().set_migrated();
                state.end_all_sse_streams();
                c.broadcast(&BusMessage::Migrated { sid: id.to_string() }).await;
                return Ok((state, feed));
            }
            Err(Some(e)) => return Err(e),
            Err(None) => continue,
        }
    }
    Err(ApiError::window_kept_moving())
}

impl From<gapless_redis::RedeemError> for ApiError {
    fn from(e: gapless_redis::RedeemError) -> Self {
        match e {
            gapless_redis::RedeemError::Ticket(t) => t.into(),
            gapless_redis::RedeemError::HistoryRewritten { cursor, head } => {
                Refusal::HistoryRewritten { cursor, head }.into()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::vocab::error::ApiError;
    use gapless::session::TicketError;
    use gapless::{EventId, Namespace, Seq, StreamId};
    use gapless_redis::RedeemError;
    use serde_json::json;

    #[test]
    fn a_redeem_of_a_rewritten_cursor_is_refused_as_its_resume_is() {
        let cursor = EventId::new(Namespace(0x00ab_34ff_9c01_de77), StreamId(1), Seq(5));
        let e = ApiError::from(RedeemError::HistoryRewritten { cursor, head: Seq(3) });
        let b = e.body();
        assert_eq!((e.status().as_u16(), &b["error"]), (409, &json!("history_rewritten")));
        assert_eq!((&b["cursor"], &b["head"]), (&json!("00ab34ff9c01de77_1-5"), &json!(3)));
        let e = ApiError::from(RedeemError::Ticket(TicketError::Expired));
        assert_eq!((e.status().as_u16(), &e.body()["error"]), (403, &json!("ticket_invalid")));
    }
}
