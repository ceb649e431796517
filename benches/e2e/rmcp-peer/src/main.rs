//! `rmcp-peer`: the server a Rust user has before gapless, for the
//! end-to-end benchmark (`gapless-load`).
//!
//! It is rmcp 3.x's stock Streamable HTTP server — `StreamableHttpService`
//! (its tower service, mounted in axum) with the default
//! `LocalSessionManager` and `StreamableHttpServerConfig::default()` —
//! serving gapless-rmcp's counter example (`server/rmcp/examples/counter/mod.rs`,
//! included as source): the very handler that `gapless-server --host
//! rmcp-counter` serves on gapless-rmcp, so that the two columns differ by
//! the one line that mounts the handler. Its `emit_events` has the contract
//! of gapless-server's (`docs/SPEC.md` §5.1): `count` `notifications/message`
//! with `data: {seq: i, pad: "x" * payload_bytes}`, sent through the peer's
//! logging API.
//!
//! Differences rmcp imposes (not choices of this peer):
//! - rmcp routes every `notifications/message` to the session's standalone
//!   (GET) stream, whatever the target. The load tool asks for the
//!   standalone target and reads the GET stream for every server.
//! - Resumption: `LocalSessionManager` has no event store by default (rmcp
//!   ships no `EventStore` implementation). What it has instead is a per-stream
//!   in-memory cache of the last `SessionConfig::channel_capacity` (16) events;
//!   a `Last-Event-ID` resume replays from that cache only.
//! - No pacing: `notify_logging_message` waits on rmcp's internal bounded
//!   channels (capacity 16) — that is rmcp's backpressure.

use std::net::SocketAddr;
use std::sync::Arc;

use rmcp::transport::streamable_http_server::{
    session::local::LocalSessionManager, StreamableHttpServerConfig, StreamableHttpService,
};

// The handler gapless-server --host rmcp-counter serves, as source.
#[path = "../../../../server/rmcp/examples/counter/mod.rs"]
mod counter;

fn usage() -> ! {
    eprintln!("usage: rmcp-peer [--bind 127.0.0.1:8090] [--path /mcp]");
    std::process::exit(2);
}

#[tokio::main]
async fn main() -> std::io::Result<()> {
    let mut bind: SocketAddr = "127.0.0.1:8090".parse().expect("addr");
    let mut path = "/mcp".to_owned();
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--bind" => bind = args.next().and_then(|v| v.parse().ok()).unwrap_or_else(|| usage()),
            "--path" => path = args.next().unwrap_or_else(|| usage()),
            "-h" | "--help" => usage(),
            _ => usage(),
        }
    }
    // The defaults a Rust user gets: LocalSessionManager::default() (no event
    // store, 16-event caches) and StreamableHttpServerConfig::default().
    let service: StreamableHttpService<counter::Counter, LocalSessionManager> = StreamableHttpService::new(
        || Ok(counter::Counter::new()),
        Arc::new(LocalSessionManager::default()),
        StreamableHttpServerConfig::default(),
    );
    let router = axum::Router::new().nest_service(&path, service);
    let listener = tokio::net::TcpListener::bind(bind).await?;
    eprintln!("rmcp-peer listening on {} path {}", listener.local_addr()?, path);
    axum::serve(listener, router).await
}
