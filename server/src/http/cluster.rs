//! Resumes and the standalone stream in cluster mode (`docs/SPEC.md` §8):
//! the store decides and replays the gap; the node's replica carries on
//! live from the store's head at the decision.

use super::endpoint::{live_conn, unread_gap, Attached};
use super::sse::Feed;
use crate::state::{AppState, Conn, Lane};
use crate::vocab::error::ApiError;
use gapless::ring::SnapshotError;
use gapless::session::{Refusal, ResumeRequest, Target};
use gapless::{Event, StreamId, Subscription};
use gapless_redis::{ReplayError, ReplayPlan};
use std::sync::Arc;
use std::time::Duration;

/// Events of a replay read from the store per call.
const REPLAY_PAGE: usize = 1000;

/// How long the standalone stream's cluster-wide claim lives unless its
/// connection renews it (a third of it); a node that dies holding it
/// frees it after this long.
pub(crate) const STANDALONE_LEASE: Duration = Duration::from_secs(10);

/// The store's replay of `plan`, then the replica's events of the same
/// target after the store's head at the decision. `Err(None)`: the window
/// moved meanwhile, decide again.
/// `seen` is the replica's head read before the decision: above the store's
/// head then, the replica holds events the store lost (a failover).
async fn feed(conn: &Arc<Conn>, plan: &ReplayPlan, seen: gapless::Seq) -> Result<Feed, Option<ApiError>> {
    let c = conn.cluster.as_ref().expect("cluster mode");
    let id = conn.session.id();
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
        conn.hub.remove(&id);
        conn.close();
        return Err(None);
    }
    if !conn.caught_up(plan.to).await {
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
        Some(stream) => conn.session.subscribe_stream(stream, plan.to),
        None => Subscription::after(conn.session.reader(), plan.to),
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
            payload: crate::cluster::wrap(e.check, e.index_in_stream, &e.payload),
        })
        .collect();
    Ok(Feed::replay(backlog, live))
}

/// An SSE resume in cluster mode: the decision table on the store's facts,
/// with the same refusals as in-process, plus `history_rewritten` and
/// `store_unavailable` (§8.4, §8.5).
pub(super) async fn resume_lane(
    state: &Arc<AppState>,
    req: ResumeRequest<'_>,
) -> Result<(Arc<Conn>, Feed, StreamId, Attached), ApiError> {
    let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
    for _ in 0..4 {
        // The replica first: its ring then holds every event after the head
        // the store decides at.
        let conn = live_conn(state, sid, req.owner).await?;
        let c = Arc::clone(conn.cluster.as_ref().expect("cluster mode"));
        // The replica's head tells the store what it may have lost.
        let seen = conn.session.reader().head();
        let d = c.store.resume_seen(req, Target::Stream, seen).await?;
        match feed(&conn, &d.replay, seen).await {
            Ok(feed) => {
                let stream = d.stream.expect("stream resume");
                let attach = conn.attach(Lane::Stream(stream), false).expect("non-exclusive attach");
                return Ok((conn, feed, stream, attach));
            }
            Err(Some(e)) => return Err(e),
            Err(None) => continue,
        }
    }
    Err(ApiError::window_kept_moving())
}

/// The standalone stream in cluster mode: one connection in the whole
/// cluster at a time (a lease in the store, renewed while the connection
/// is open), from its first undelivered event (the store's delivered mark).
pub(super) async fn open_standalone(
    conn: &Arc<Conn>,
    prime: bool,
) -> Result<(Feed, StreamId, Attached), ApiError> {
    let c = Arc::clone(conn.cluster.as_ref().expect("cluster mode"));
    let id = conn.session.id();
    let standalone = conn.session.standalone().clone();
    let lane = Lane::Stream(standalone.id());
    let attach = conn.attach(lane, true).ok_or_else(ApiError::stream_busy)?;
    let holder = format!("{}:{}", c.node, attach.0);
    let fail = |e: ApiError| {
        conn.detach(lane, attach.0);
        e
    };
    match c.store.take_lease(&id, "standalone", &holder, STANDALONE_LEASE).await {
        Ok(true) => {}
        Ok(false) => return Err(fail(ApiError::stream_busy())),
        Err(e) => return Err(fail(ApiError::store_unavailable(&e))),
    }
    // Renew the claim while the connection is open; drop it after.
    let stop = tokio_util::sync::CancellationToken::new();
    {
        let (c, stop, ended, holder) = (Arc::clone(&c), stop.clone(), attach.1.clone(), holder.clone());
        tokio::spawn(async move {
            let mut t = tokio::time::interval(STANDALONE_LEASE / 3);
            t.tick().await;
            loop {
                tokio::select! {
                    _ = t.tick() => {
                        if let Ok(false) = c.store.take_lease(&id, "standalone", &holder, STANDALONE_LEASE).await {
                            ended.cancel(); // another connection holds it now
                            break;
                        }
                    }
                    _ = stop.cancelled() => break,
                    _ = ended.cancelled() => break,
                }
            }
            let _ = c.store.drop_lease(&id, "standalone", &holder).await;
        });
    }
    let guard = stop.drop_guard();
    for _ in 0..4 {
        let seen = conn.session.reader().head();
        let plan = match c.store.backlog(&id, conn.session.owner(), standalone.id()).await {
            Ok(Some(Ok(plan))) => plan,
            Ok(Some(Err(e))) => return Err(fail(unread_gap(e))),
            Ok(None) => return Err(fail(ApiError::unknown_session())),
            Err(e) => return Err(fail(ApiError::store_unavailable(&e))),
        };
        let nothing_undelivered = match c.store.marks(&id, standalone.id()).await {
            Ok((high, delivered)) => high <= delivered,
            Err(e) => return Err(fail(ApiError::store_unavailable(&e))),
        };
        let plan = if prime && nothing_undelivered {
            // Nothing undelivered: a priming event first (SEP-1699).
            if let Err(e) = conn.publish_now(&standalone, None).await {
                return Err(fail(ApiError::send(&e)));
            }
            continue;
        } else {
            plan
        };
        match feed(conn, &plan, seen).await {
            Ok(feed) => return Ok((feed.guarded(guard), standalone.id(), attach)),
            Err(Some(e)) => return Err(fail(e)),
            Err(None) => continue,
        }
    }
    Err(fail(ApiError::window_kept_moving()))
}

/// `POST P/session/{id}/upgrade` in cluster mode: the migration check on the
/// store's facts, then a ticket in the store (any node's socket redeems it).
/// Returns the ticket, the id of the first event to replay and how many.
pub(super) async fn upgrade(
    state: &Arc<AppState>,
    req: ResumeRequest<'_>,
) -> Result<(String, Option<String>, u64), ApiError> {
    let sid = req.session_id.ok_or(Refusal::ResumeRequiresSession)?;
    let conn = state.find_conn(sid, req.owner).await?.ok_or_else(ApiError::unknown_session)?;
    let c = Arc::clone(conn.cluster.as_ref().expect("cluster mode"));
    let d = c.store.resume_seen(req, Target::Session, conn.session.reader().head()).await?;
    let id = conn.session.id();
    let ticket = gapless::SessionId::random().to_string(); // 128 random bits, a ticket's shape
    let hub = state.hub.config();
    // The decision granted the cursor, so it parses; the ticket keeps its
    // check for the redeem's comparison (after a failover).
    let cursor = req.cursor.and_then(|c| gapless::EventId::parse(c).ok());
    debug_assert_eq!(cursor.map_or(gapless::Seq(0), |c| c.seq), d.after);
    c.store
        .issue_ticket(&id, req.owner, &ticket, cursor.as_ref(), hub.ticket_ttl, hub.max_tickets)
        .await
        .map_err(|e| ApiError::store_unavailable(&e))?
        .map_err(ApiError::from)?;
    let first = ReplayPlan { to: d.replay.from.min(d.replay.to), ..d.replay };
    let replay_from = match c.store.replay(&id, &first, 1).await {
        Ok(events) => events.first().map(|e| {
            gapless::EventId::new(conn.session.namespace(), e.stream, e.seq).with_check(e.check).to_string()
        }),
        Err(_) => None,
    };
    // Issuing a ticket ends the session's SSE streams, on every node.
    conn.end_all_sse_streams();
    c.broadcast(&crate::cluster::BusMessage::Migrating { sid: id.to_string() }).await;
    Ok((ticket, replay_from, d.replay.to.0 - d.replay.after.0))
}

/// `GET P/ws?ticket=T` in cluster mode: the ticket redeemed in the store
/// (once, by its caller; a cursor whose event a failover rewrote since is
/// refused `history_rewritten`), the gap after its cursor checked again (the
/// store pins nothing: a gap trimmed since the ticket was issued is refused
/// with the numbers), then the store's replay and the replica's live events of
/// the whole session. The session is migrated on every node.
pub(super) async fn redeem(
    state: &Arc<AppState>,
    ticket: &str,
    owner: Option<&str>,
) -> Result<(Arc<Conn>, Feed), ApiError> {
    let c = Arc::clone(state.cluster.as_ref().expect("cluster mode"));
    let (id, cursor) = c
        .store
        .redeem_ticket(ticket, owner)
        .await
        .map_err(|e| ApiError::store_unavailable(&e))?
        .map_err(ApiError::from)?;
    for _ in 0..4 {
        let conn = state.find_conn(&id.to_string(), owner).await?.ok_or_else(ApiError::unknown_session)?;
        let seen = conn.session.reader().head();
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
        match feed(&conn, &plan, seen).await {
            Ok(feed) => {
                conn.session.set_migrated();
                conn.end_all_sse_streams();
                c.broadcast(&crate::cluster::BusMessage::Migrated { sid: id.to_string() }).await;
                return Ok((conn, feed));
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
