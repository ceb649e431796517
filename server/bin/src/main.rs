//! `gapless-server`: the bundled MCP server (demo tools plus the
//! conformance fixtures) on Streamable HTTP.

use clap::Parser;
use gapless_cli::{init_logging, serve, ServerFlags};
use gapless_server::McpServer;
use gapless_server_bin::demo::DemoHost;

// jemalloc as the global allocator, with its options (the `jemalloc`
// feature, on by default; the reasons are in Cargo.toml).
gapless_cli::jemalloc!();

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
