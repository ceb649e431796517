//! `gapless-server`: the bundled MCP server (demo tools plus the
//! conformance fixtures) on Streamable HTTP.

use clap::Parser;
use gapless_server::McpServer;
use gapless_server_bin::cli::{init_logging, serve, ServerFlags};
use gapless_server_bin::demo::DemoHost;

/// jemalloc, not the system allocator (the `jemalloc` feature, on by
/// default; the reasons are in Cargo.toml).
#[cfg(all(unix, feature = "jemalloc"))]
#[global_allocator]
static ALLOC: tikv_jemallocator::Jemalloc = tikv_jemallocator::Jemalloc;

/// jemalloc's options, read at its first allocation (`_RJEM_MALLOC_CONF`
/// in the environment still overrides them): a background thread returns
/// freed pages (after jemalloc's 10 s decay) while the server is idle too,
/// so its RSS settles to what the retained events hold. Linux only:
/// jemalloc has no background thread on macOS and refuses the option.
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
#[export_name = "_rjem_malloc_conf"]
static MALLOC_CONF: JemallocConf = JemallocConf(c"background_thread:true".as_ptr());

/// A C string pointer that can be a `static` (jemalloc's `malloc_conf` is a
/// `const char *`).
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
#[repr(transparent)]
struct JemallocConf(*const std::ffi::c_char);

// SAFETY: it points at a 'static, immutable C string; nothing writes
// through it.
#[cfg(all(target_os = "linux", feature = "jemalloc"))]
unsafe impl Sync for JemallocConf {}

/// An MCP server whose streams never lose an event silently.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The application: the demo tools and conformance fixtures, or
    /// gapless-rmcp's counter example, or the conformance fixtures written
    /// as an rmcp `ServerHandler`.
    #[arg(long, value_enum, default_value_t = HostKind::Demo)]
    host: HostKind,
    #[command(flatten)]
    server: ServerFlags,
}

/// Which application the server runs.
#[derive(clap::ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
enum HostKind {
    /// `DemoHost`: `emit_events` and the conformance fixtures.
    Demo,
    /// gapless-rmcp's counter: `increment`, `decrement`, `get_value`, `emit_events`.
    RmcpCounter,
    /// The conformance fixtures written as an rmcp handler (gapless-rmcp).
    RmcpConformance,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let a = Args::parse();
    init_logging(a.server.log_format);
    let builder = match a.host {
        HostKind::Demo => McpServer::builder(DemoHost),
        HostKind::RmcpCounter => match gapless_server_bin::rmcp_counter() {
            Ok(host) => McpServer::builder(host),
            Err(e) => {
                eprintln!("gapless-server: --host rmcp-counter: {e}");
                std::process::exit(2);
            }
        },
        HostKind::RmcpConformance => match gapless_server_bin::rmcp_conformance() {
            Ok(host) => McpServer::builder(host),
            Err(e) => {
                eprintln!("gapless-server: --host rmcp-conformance: {e}");
                std::process::exit(2);
            }
        },
    };
    serve("gapless-server", a.server, builder, None).await
}
