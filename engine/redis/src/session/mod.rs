//! A session's operations on the store, one file per job: its life
//! (`lifecycle.rs`), writing its log (`log.rs`), reading it (`reads.rs`),
//! the decision table (`resume.rs`), migration tickets (`tickets.rs`),
//! holds (`leases.rs`), delivery marks (`marks.rs`), and what keeps an idle
//! session alive and watched at no per-session cost (`pins.rs`). Each is one Lua
//! script (or a direct read) on the session's keys, which share one hash
//! slot (`keys.rs`).

mod leases;
mod lifecycle;
mod log;
mod marks;
mod pins;
mod reads;
mod resume;
mod tickets;

pub use leases::{holder_node, Hold, STANDALONE_HOLD};
pub use pins::Probe;
pub use reads::REPLAY_CHUNKS;
