//! `gapless-gateway`: an MCP server behind gapless's endpoint.

use clap::{CommandFactory, FromArgMatches, Parser};
use gapless_gateway::{upstream::Upstream, GatewayHost};
use gapless_server::McpServer;
use gapless_server_bin::cli::{init_logging, serve, ServerFlags};

/// Any MCP server behind gapless's endpoint: every resume gap-free or
/// refused explicitly, and the upstream's faults made explicit.
#[derive(Parser, Debug)]
#[command(version, about)]
struct Args {
    /// The upstream MCP server's Streamable HTTP endpoint
    /// (`http://HOST:PORT/PATH`).
    #[arg(long)]
    upstream: String,
    #[command(flatten)]
    server: ServerFlags,
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    // The gateway listens beside the server it fronts: 8090 by default,
    // not gapless-server's 8080.
    let cmd = Args::command().mut_arg("bind", |a| a.default_value("127.0.0.1:8090"));
    let a = Args::from_arg_matches(&cmd.get_matches()).unwrap_or_else(|e| e.exit());
    init_logging(a.server.log_format);
    let upstream = match Upstream::new(&a.upstream) {
        Ok(u) => u,
        Err(e) => {
            eprintln!("gapless-gateway: --upstream: {e}");
            std::process::exit(2);
        }
    };
    tracing::info!(upstream = %upstream.url(), "gateway");
    serve("gapless-gateway", a.server, McpServer::builder(GatewayHost::new(upstream))).await
}
