//! The in-process backend's operations: the engine's hub decides resumes
//! and issues tickets (`docs/SPEC.md` §4.2, §4.3), and the session's own
//! ring feeds every reader.

use super::{Attached, Feed, Table, Ticketed};
use crate::vocab::error::ApiError;
use gapless::session::MigrateError;
use gapless::{ResumeRequest, StreamId};
use std::sync::Arc;

/// `DELETE`: the session of `sid`, if `owner` sees it, goes.
pub(super) fn delete<T: Table>(table: &T, sid: &str, owner: Option<&str>) -> Result<(), ApiError> {
    let state = table.local(sid, owner).ok_or_else(ApiError::unknown_session)?;
    table.remove(&state.session().id());
    Ok(())
}

/// The hub decides (rows 1 to 8), then the session's state is found.
pub(super) async fn resume_stream<T: Table>(
    table: &T,
    req: ResumeRequest<'_>,
) -> Result<(Arc<T::State>, Feed, StreamId), ApiError> {
    let resume = table.hub().resume_stream(req)?;
    let state = table.live(req.session_id.unwrap_or_default(), req.owner).await?;
    let stream = resume.stream.expect("stream resume");
    Ok((state, Feed::live(resume.into_subscription()), stream))
}

/// The standalone stream from its first undelivered event (kept in the
/// ring while no connection was open), a priming event first with `prime`
/// when there is no such backlog.
pub(super) async fn standalone<A: Attached>(state: &Arc<A>, prime: bool) -> Result<Feed, ApiError> {
    let standalone = state.session().standalone().clone();
    let info = standalone.info();
    if prime && info.high <= info.delivered {
        let _ = state.prime(&standalone).await;
    }
    let sub =
        state.session().subscribe_stream(standalone.id(), info.delivered).map_err(ApiError::unread_gap)?;
    Ok(Feed::live(sub))
}

/// The hub checks the migration and issues the ticket; the session's SSE
/// streams end (from now on events wait in the ring for the socket).
pub(super) fn upgrade<T: Table>(table: &T, req: ResumeRequest<'_>) -> Result<Ticketed, ApiError> {
    let issued = table.hub().migrate(req).map_err(|e| match e {
        MigrateError::Refused(r) => ApiError::from(r),
        MigrateError::Ticket(t) => ApiError::from(t),
    })?;
    if let Some(state) = table.local(&issued.session.id().to_string(), req.owner) {
        state.end_all_sse_streams();
    }
    Ok(Ticketed {
        ticket: issued.ticket.to_string(),
        replay_from: issued.replay_from.map(|e| e.to_string()),
        replay_count: issued.replay_count as u64,
    })
}

/// The hub redeems the ticket; the socket replays the gap it pinned.
pub(super) fn redeem<T: Table>(
    table: &T,
    ticket: &str,
    owner: Option<&str>,
) -> Result<(Arc<T::State>, Feed), ApiError> {
    let migration = table.hub().redeem(ticket, None, owner).map_err(ApiError::from)?;
    let state =
        table.local(&migration.session.id().to_string(), owner).ok_or_else(ApiError::unknown_session)?;
    Ok((state, Feed::live(migration.into_subscription())))
}
