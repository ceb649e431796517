//! What an operator sees (`docs/SPEC.md` §9): the metrics
//! (`metrics.rs`), the status page (`status.rs`), who may read them
//! (`access.rs`), and the layer that counts every request of the MCP
//! router (`count.rs`). The counters themselves are `telemetry/`'s.

pub(crate) mod access;
pub(crate) mod count;
pub(crate) mod metrics;
pub(crate) mod status;
