//! The bundled gapless MCP server's application: [`demo::DemoHost`], the
//! transport-exercising `emit_events` tool plus the fixtures the official
//! conformance suite expects (`docs/SPEC.md` §5.1). The binary
//! (`src/main.rs`, named `gapless-server`) serves it on
//! `gapless-server`'s router with a command line; the loopback tests in
//! `tests/` drive the same application.
#![deny(missing_docs)]

pub mod demo;
