//! Sessions of the 2025 revisions on this node: each one's transport state
//! ([`SessionState`]: version, log level, pending and in-flight requests,
//! lanes), the table of them ([`Sessions`]: find, create, resume, migrate,
//! delete, sweep), which connection carries which lane (`lanes.rs`), and
//! the per-client limits on creating them (`fairness.rs`). Where a session
//! lives is the backend's (`backend/`).

pub(crate) mod fairness;
pub(crate) mod lanes;
pub(crate) mod state;
pub(crate) mod table;

pub(crate) use lanes::{Claim, Lane};
pub(crate) use state::SessionState;
pub(crate) use table::Sessions;
