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

pub mod cli;

/// jemalloc for a binary built on this crate (the `jemalloc` feature).
#[cfg(all(unix, feature = "jemalloc"))]
#[doc(hidden)]
pub mod alloc {
    pub use tikv_jemallocator::Jemalloc;
}

/// Declares jemalloc the binary's global allocator with the options every
/// gapless binary runs with (a background thread returning freed pages):
/// one line in each binary's `main.rs`. Without the `jemalloc` feature it
/// declares nothing.
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
#[macro_export]
macro_rules! jemalloc {
    () => {
        #[global_allocator]
        static ALLOC: $crate::alloc::Jemalloc = $crate::alloc::Jemalloc;

        /// jemalloc's options, read at its first allocation
        /// (`_RJEM_MALLOC_CONF` in the environment still overrides them): a
        /// background thread returns freed pages (after jemalloc's 10 s
        /// decay) while the server is idle too, so its RSS settles to what
        /// the retained events hold.
        #[export_name = "_rjem_malloc_conf"]
        static MALLOC_CONF: JemallocConf = JemallocConf(c"background_thread:true".as_ptr());

        /// A C string pointer that can be a `static` (jemalloc's
        /// `malloc_conf` is a `const char *`).
        #[repr(transparent)]
        struct JemallocConf(*const std::ffi::c_char);

        // SAFETY: it points at a 'static, immutable C string; nothing writes
        // through it.
        unsafe impl Sync for JemallocConf {}
    };
}

/// Without jemalloc (another OS, or the feature off): the system allocator.
#[cfg(not(all(target_os = "linux", feature = "jemalloc")))]
#[macro_export]
macro_rules! jemalloc {
    () => {};
}
pub mod demo;
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
mod purge;

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
