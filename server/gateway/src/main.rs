//! `gapless-gateway`: an MCP server behind gapless's endpoint.

use clap::{CommandFactory, FromArgMatches, Parser};
use gapless_cli::{init_logging, serve, ServerFlags};
use gapless_gateway::upstream::{stdio::StdioCommand, Upstream};
use gapless_gateway::{bearer_identity, metadata_router, GatewayHost, StdioHost};
use gapless_server::McpServer;

/// Any MCP server behind gapless's endpoint: every resume gap-free or
/// refused explicitly, and the upstream's faults made explicit.
#[derive(Parser, Debug)]
#[command(version, about)]
#[command(group(clap::ArgGroup::new("upstreams").required(true).args(["upstream", "upstream_cmd"])))]
struct Args {
    /// The upstream MCP server's Streamable HTTP endpoint
    /// (`http://HOST:PORT/PATH`).
    #[arg(long)]
    upstream: Option<String>,
    /// A PEM file of certificates an `https://` upstream is also verified
    /// against (beside the system's roots): a private CA, or the upstream's
    /// own self-signed certificate.
    #[arg(long, requires = "upstream")]
    upstream_ca: Option<std::path::PathBuf>,
    /// A stdio MCP server as the upstream: this shell command is started
    /// once per gateway session (a stdio server serves one client); its
    /// stderr goes to the gateway's log, and its exit ends the session.
    #[arg(long)]
    upstream_cmd: Option<String>,
    #[command(flatten)]
    server: ServerFlags,
}

/// The bytes of `--upstream-ca`, if given.
fn upstream_ca(path: Option<&std::path::Path>) -> Result<Option<Vec<u8>>, String> {
    path.map(|p| std::fs::read(p).map_err(|e| format!("--upstream-ca {}: {e}", p.display()))).transpose()
}

// jemalloc as the global allocator (the `jemalloc` feature, on by default).
gapless_cli::jemalloc!();

#[tokio::main]
async fn main() -> std::io::Result<()> {
    // The gateway listens beside the server it fronts: 8090 by default,
    // not gapless-server's 8080.
    let cmd = Args::command().mut_arg("bind", |a| a.default_value("127.0.0.1:8090"));
    let a = Args::from_arg_matches(&cmd.get_matches()).unwrap_or_else(|e| e.exit());
    init_logging(a.server.log_format);
    let mut routes = None;
    let builder = match (&a.upstream, &a.upstream_cmd) {
        (Some(url), _) => {
            match upstream_ca(a.upstream_ca.as_deref()).and_then(|ca| Upstream::with_ca(url, ca.as_deref())) {
                Ok(u) => {
                    tracing::info!(upstream = %u.url(), "gateway to a Streamable HTTP server");
                    routes = Some(metadata_router(u.clone(), &a.server.path));
                    McpServer::builder(GatewayHost::new(u).path(&a.server.path))
                }
                Err(e) => {
                    eprintln!("gapless-gateway: --upstream: {e}");
                    std::process::exit(2);
                }
            }
        }
        (None, Some(cmd)) => match StdioCommand::new(cmd) {
            Ok(c) => {
                tracing::info!(command = %c.command(), "gateway to a stdio server, a process per session");
                McpServer::builder(StdioHost::new(c))
            }
            Err(e) => {
                eprintln!("gapless-gateway: --upstream-cmd: {e}");
                std::process::exit(2);
            }
        },
        (None, None) => unreachable!("clap requires one"),
    };
    // A session is bound to the bearer credentials that opened it.
    let builder = builder.identity(bearer_identity);
    serve("gapless-gateway", a.server, builder, routes).await
}
