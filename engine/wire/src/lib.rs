//! # gapless-wire: what a client and a server of gapless share
//!
//! Std only, so that a client links it without the server's dependencies:
//!
//! * [`Seq`] and [`StreamId`], the numbers every event carries;
//! * [`event_id`], the `<namespace>_<stream>-<seq>` codec of SSE event ids
//!   (`docs/SPEC.md` §4.1);
//! * [`ErrorKind`], every refusal kind of the contract with its HTTP status
//!   and JSON name, spelled once;
//! * [`rpc_code`], every JSON-RPC error code gapless sends or surfaces,
//!   in one table, with MCP 2026-07-28's policy for them;
//! * [`client`], the sans-IO client guard (`docs/SPEC.md` §6);
//! * [`task_stream`], the sans-IO guard of one task's event stream
//!   (`tasks/stream`, `docs/SPEC.md` §5.6): the processed cursor, the
//!   `after` to resume with, holes, repeats and `events_gone` losses.
//!
//! The engine (`gapless`) re-exports all of it: `gapless::client`,
//! `gapless::task_stream`, `gapless::event_id` and `gapless::ErrorKind`
//! are these items.
//!
//! ```
//! use gapless_wire::{event_id::EventId, ErrorKind, Seq};
//!
//! let id: EventId = "00ab34ff9c01de77_3-42".parse().unwrap();
//! assert_eq!(id.seq, Seq(42));
//! assert_eq!(ErrorKind::GapNotCovered.http_status(), 409);
//! assert_eq!(ErrorKind::from_wire("gap_not_covered"), Some(ErrorKind::GapNotCovered));
//! ```
#![deny(missing_docs)]

pub mod client;
mod error;
pub mod event_id;
mod ids;
pub mod rpc_code;
pub mod task_stream;

pub use error::ErrorKind;
pub use event_id::{encode_seq, EventId, Namespace, ENCODED_MAX, SEQ_MAX_LEN};
pub use ids::{Seq, StreamId};
