//! The bundled gapless MCP server's application: [`demo::DemoHost`], the
//! transport-exercising `emit_events` tool plus the fixtures the official
//! conformance suite expects (`docs/SPEC.md` §5.1); or, with
//! `--host rmcp-counter`, [`rmcp_counter`]: gapless-rmcp's counter example,
//! an rmcp handler with an `emit_events` of the same contract; or, with
//! `--host rmcp-conformance`, [`rmcp_conformance`]: the conformance
//! fixtures written as an rmcp handler. The binary
//! (`src/main.rs`, named `gapless-server`) serves it on
//! `gapless-server`'s router with a command line; the loopback tests in
//! `tests/` drive the same application.
#![deny(missing_docs)]

pub mod demo;

// The example's source, so that the binary serves exactly what
// `server/rmcp/examples/rmcp_counter.rs` serves.
#[path = "../../rmcp/examples/counter/mod.rs"]
mod counter;

/// gapless-rmcp's counter example (`server/rmcp/examples/counter/mod.rs`)
/// as a [`gapless_server::Host`]: one rmcp `Counter` per session.
pub fn rmcp_counter() -> std::io::Result<impl gapless_server::Host> {
    gapless_rmcp::RmcpHost::new(|| Ok(counter::Counter::new()))
}

// The conformance fixtures as rmcp tools, prompts and resources.
#[path = "../../rmcp/examples/conformance/mod.rs"]
mod conformance;

/// The conformance suite's fixtures written as an rmcp handler
/// (`server/rmcp/examples/conformance/mod.rs`), as a
/// [`gapless_server::Host`]: one rmcp `Conformance` per session.
pub fn rmcp_conformance() -> std::io::Result<impl gapless_server::Host> {
    gapless_rmcp::RmcpHost::new(|| Ok(conformance::Conformance::new()))
}
