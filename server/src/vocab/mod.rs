//! The vocabulary every layer shares, and nothing else: JSON-RPC shapes,
//! the configuration, the error types, the caller's identity, the sealed
//! `requestState`, log levels, announced changes, header names, the lock
//! helper, the session tag of logs, a token bucket, a byte budget and the
//! clock. It
//! imports no other module of the crate.

pub(crate) mod bucket;
pub(crate) mod byte_budget;
pub(crate) mod change;
pub mod config;
pub mod error;
pub(crate) mod headers;
pub(crate) mod identity;
pub mod jsonrpc;
pub(crate) mod log_level;
pub(crate) mod request_state;
pub(crate) mod secret;
pub(crate) mod sync;
pub(crate) mod time;
