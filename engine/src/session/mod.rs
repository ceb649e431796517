//! Sessions and the rules on their rings: the [`Hub`] that owns sessions
//! (ids, incarnations, limits, owner binding, idle expiry), each
//! [`Session`]'s writer lock in front of its ring, the resume decision
//! table ([`Hub::resume_stream`], [`Hub::check_migration`]), migration
//! tickets ([`Hub::migrate`], [`Hub::redeem`]) and pacing state.
//!
//! This layer sits on [`crate::ring`](mod@crate::ring) and knows nothing of
//! the async layer above it (`subscription`) or of HTTP. Its mutexes and
//! atomics come from the `sync` shim, as the ring's do, so that the loom
//! models of `loom-tests/tests/session.rs` check this layer's own races
//! (pacing, the migration hand-off, close); its `Arc`s are `std`'s.
//!
//! Its files import each other in one direction only: `secret`, `ticket`,
//! `pace` and `budget` (state) under `session` (one session) under `table`
//! (the decision table over any store's [`SessionFacts`]) and `hub`, under
//! `resume` (the table on the hub, `impl Hub`) under `migrate` (tickets
//! issued and redeemed, `impl Hub`).

mod budget;
mod hub;
mod lease;
mod migrate;
#[cfg(feature = "tokio")]
mod pace;
mod resume;
mod secret;
// `session::session` is the type the layer is named after; the file holds
// one session's state, the hub is beside it.
#[allow(clippy::module_inception)]
mod session;
mod table;
mod ticket;

pub(crate) use budget::{Charged, Reclaimer};
pub use hub::{ConnectionGuard, Hub, HubConfig, SessionError};
pub use lease::Lease;
pub use migrate::{IssuedTicket, MigrateError, Migration};
#[cfg(feature = "tokio")]
pub(crate) use pace::PaceGate;
#[cfg(feature = "tokio")]
pub use pace::Pacer;
pub use resume::{Refusal, Resume, ResumeRequest};
pub use secret::SessionId;
pub use session::{Session, SessionPublishError};
pub use table::{decide, Decision, Entry, SessionFacts, Target};
pub use ticket::{Ticket, TicketError};

/// Locks a mutex of the shim, ignoring poisoning: every critical section of
/// this layer leaves its data consistent before anything in it can panic.
pub(crate) use crate::sync::lock;
