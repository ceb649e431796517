//! Serving with connection hygiene: what `axum::serve` does not bound.
//!
//! [`McpServer::serve`](crate::McpServer::serve) runs an accept loop over
//! hyper's HTTP/1.1 and HTTP/2 (prior knowledge, h2c) connections with:
//!
//! * a **header read timeout** ([`ServeConfig::header_read_timeout`], default
//!   10 s): a new connection that sends nothing by then is closed, and a
//!   client that has not sent a whole request head within it once hyper
//!   reads one is disconnected. Hyper starts that clock whenever it waits
//!   for a request head, so it is also the **idle keep-alive timeout**;
//! * the protocol told from a connection's first bytes, looked at without
//!   reading them (HTTP/2 by its preface, else HTTP/1.1), and each
//!   connection's state in an allocation of its protocol's size: an idle
//!   HTTP/1.1 stream costs hyper one 8 KiB read buffer, not the 16 KiB that
//!   hyper-util's `auto` builder left it with;
//! * a **cap on open connections**, in all and per peer IP address
//!   ([`ServeConfig::max_connections`], [`ServeConfig::max_connections_per_ip`]):
//!   a connection over either is answered `503 too_many_connections` with
//!   the JSON error body and closed at once, before any request is read, so
//!   the process never sits in an `accept` loop at its open-file limit;
//! * a **connection buffer of 64 KiB** (`CONNECTION_BUFFER_BYTES`) instead
//!   of hyper's 400 KB: what a connection queues for a client that does
//!   not read stops there (one SSE write of up to 64 KiB more may wait
//!   beside it), and a request head must fit in it (hyper answers a longer
//!   one 431 with an empty body; heads over 16 KiB get the JSON 431 before
//!   that, unless `ServerConfig::max_header_bytes` is raised past 64 KiB);
//! * `accept` errors (`EMFILE` and friends) logged and retried after a pause,
//!   never a busy loop;
//! * a **graceful shutdown that finishes**: when `signal` resolves, the
//!   listener closes, every SSE stream ends and every socket is closed with
//!   1001 ([`McpServer::shutdown`](crate::McpServer::shutdown)), in-flight
//!   requests get [`ServeConfig::shutdown_grace`] (default 10 s), and then
//!   whatever is left is dropped and `serve` returns.
//!
//! The peer's address is in each request's extensions as
//! `axum::extract::ConnectInfo<SocketAddr>`.
//!
//! The request body has its own deadline, [`ServerConfig::body_read_timeout`](crate::ServerConfig::body_read_timeout),
//! enforced where the handlers read it (408 `request_timeout`).
//!
//! Hyper answers some malformed request heads itself, before any of our
//! code runs, with an empty body: a header with a bare CR, a NUL or an
//! obs-fold, two `Content-Length`s (400), more than 100 headers (431). Its
//! API offers no hook to give those the JSON error body.

use crate::McpServer;

/// Most bytes hyper buffers per HTTP/1.1 connection, each way: the write
/// queue of a client that stalls and the longest request head.
pub(crate) const CONNECTION_BUFFER_BYTES: usize = 64 << 10;
use axum::extract::ConnectInfo;
use axum::Router;
use gapless::ErrorKind;
use hyper::server::conn::{http1, http2};
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::service::TowerToHyperService;
use std::collections::HashMap;
use std::future::Future;
use std::net::{IpAddr, SocketAddr};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpListener, TcpStream};
use tokio_util::sync::CancellationToken;

/// Connection limits and the shutdown grace of [`McpServer::serve`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeConfig {
    /// A connection that has not sent a whole request head within this long
    /// (a new one, or a kept-alive one between requests) is closed
    /// (default 10 s).
    pub header_read_timeout: Duration,
    /// Most open connections (default 4096). The bundled binary lowers it
    /// to fit the process's open-file limit.
    pub max_connections: usize,
    /// Most open connections from one peer IP address (default 256).
    pub max_connections_per_ip: usize,
    /// How long in-flight requests may run on after shutdown begins
    /// (default 10 s).
    pub shutdown_grace: Duration,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            header_read_timeout: Duration::from_secs(10),
            max_connections: 4096,
            max_connections_per_ip: 256,
            shutdown_grace: Duration::from_secs(10),
        }
    }
}

/// Open connections, in all and per peer address.
#[derive(Debug, Default)]
struct Open {
    total: usize,
    per_ip: HashMap<IpAddr, usize>,
}

/// Counts one open connection until dropped.
struct Admitted {
    open: Arc<Mutex<Open>>,
    ip: IpAddr,
}

impl Drop for Admitted {
    fn drop(&mut self) {
        let mut o = crate::vocab::sync::lock(&self.open);
        o.total -= 1;
        if let Some(n) = o.per_ip.get_mut(&self.ip) {
            *n -= 1;
            if *n == 0 {
                o.per_ip.remove(&self.ip);
            }
        }
    }
}

/// Admits a connection from `ip` if both caps allow it.
fn admit(open: &Arc<Mutex<Open>>, ip: IpAddr, cfg: &ServeConfig) -> Option<Admitted> {
    let mut o = crate::vocab::sync::lock(open);
    let from_ip = o.per_ip.get(&ip).copied().unwrap_or(0);
    if o.total >= cfg.max_connections || from_ip >= cfg.max_connections_per_ip {
        return None;
    }
    o.total += 1;
    *o.per_ip.entry(ip).or_insert(0) += 1;
    Some(Admitted { open: Arc::clone(open), ip })
}

/// Answers a connection over the caps with a complete 503 and closes it.
async fn refuse(mut stream: TcpStream) {
    let kind = ErrorKind::TooManyConnections;
    let body = format!(
        "{{\"error\":\"{}\",\"message\":\"the server holds its maximum of open connections; retry later\"}}",
        kind.as_str()
    );
    let head = format!(
        "HTTP/1.1 {} Service Unavailable\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\
         retry-after: 1\r\nconnection: close\r\n\r\n",
        kind.http_status(),
        body.len()
    );
    let write = async {
        stream.write_all(head.as_bytes()).await?;
        stream.write_all(body.as_bytes()).await?;
        stream.shutdown().await
    };
    // A peer that does not read gets nothing more than a second of our time.
    let _ = tokio::time::timeout(Duration::from_secs(1), write).await;
}

/// The protocol a connection speaks.
enum Protocol {
    Http1,
    /// HTTP/2 with prior knowledge (h2c).
    Http2,
}

/// The first bytes of an HTTP/2 connection with prior knowledge (RFC 9113
/// §3.4).
const H2_PREFACE: &[u8; 24] = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";

/// Which protocol a new connection speaks, from its first bytes, looked at
/// with `MSG_PEEK` so that hyper then reads the request head into its own
/// buffer whole. (hyper-util's `auto` builder reads them itself and hands
/// them back through a wrapper: hyper's first read then returns those 24
/// bytes alone, and its read buffer grows from 8 to 16 KiB to take the rest,
/// for the connection's life: about 12 KiB more RSS per open stream, with
/// the larger task, measured.) `None`: the peer closed, failed, or sent
/// nothing that tells within `wait` (the header read timeout, which also
/// bounds a request head).
async fn sniff(stream: &TcpStream, wait: Duration) -> Option<Protocol> {
    let look = async {
        let mut buf = [0u8; H2_PREFACE.len()];
        loop {
            let n = stream.peek(&mut buf).await.ok()?;
            if n == 0 {
                return None;
            }
            if buf[..n] != H2_PREFACE[..n] {
                return Some(Protocol::Http1);
            }
            if n == H2_PREFACE.len() {
                return Some(Protocol::Http2);
            }
            // A prefix of the preface so far: a peek returns at once while
            // those bytes wait, so look again a little later.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(wait, look).await.ok().flatten()
}

/// Serves `conn` to its end; once `stop` is cancelled, lets it finish what
/// it serves (`shut`: its graceful shutdown) and close.
async fn drive<F: Future>(mut conn: Pin<Box<F>>, shut: impl FnOnce(Pin<&mut F>), stop: &CancellationToken) {
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.cancelled() => {}
    }
    shut(conn.as_mut());
    let _ = conn.await;
}

impl McpServer {
    /// Serves `app` (an application router that contains this server's
    /// [`router`](McpServer::router)) on `listener` until `signal`
    /// resolves, then shuts down within the grace period. See the module
    /// docs of `serve` for the limits it applies.
    pub async fn serve(
        &self,
        listener: TcpListener,
        app: Router,
        config: ServeConfig,
        signal: impl Future<Output = ()> + Send,
    ) -> std::io::Result<()> {
        let open = Arc::new(Mutex::new(Open::default()));
        let mut h1 = http1::Builder::new();
        h1.timer(TokioTimer::new())
            .header_read_timeout(config.header_read_timeout)
            .keep_alive(true)
            .max_buf_size(CONNECTION_BUFFER_BYTES);
        let mut h2 = http2::Builder::new(TokioExecutor::new());
        h2.timer(TokioTimer::new());
        let builders = Arc::new((h1, h2));
        // Cancelled when `signal` resolves: each connection finishes what it
        // is serving and closes.
        let stop = CancellationToken::new();
        // Connection tasks, so that what outlives the grace period can be
        // aborted (finished ones are reaped as connections come in).
        let mut tasks = tokio::task::JoinSet::new();
        tokio::pin!(signal);
        loop {
            while tasks.try_join_next().is_some() {}
            let (stream, peer) = tokio::select! {
                _ = &mut signal => break,
                accepted = listener.accept() => match accepted {
                    Ok(a) => a,
                    Err(e) => {
                        // EMFILE, ENFILE, ECONNABORTED...: the listener is
                        // fine; pause instead of spinning on the error.
                        tracing::warn!(error = %e, "accept failed; retrying in 100 ms");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let Some(admitted) = admit(&open, peer.ip(), &config) else {
                tracing::info!(%peer, "connection refused: too many open connections");
                self.refused_connection();
                tokio::spawn(refuse(stream));
                continue;
            };
            let _ = stream.set_nodelay(true);
            let svc = tower::ServiceExt::map_request(app.clone(), move |mut req: axum::http::Request<_>| {
                req.extensions_mut().insert(ConnectInfo::<SocketAddr>(peer));
                req
            });
            let svc = TowerToHyperService::new(svc);
            let (builders, stop, wait) = (Arc::clone(&builders), stop.clone(), config.header_read_timeout);
            tasks.spawn(async move {
                // Each protocol's connection in a box of its own size, so
                // that an HTTP/1.1 connection's task does not take HTTP/2's
                // room as well.
                let protocol = tokio::select! {
                    p = sniff(&stream, wait) => p,
                    _ = stop.cancelled() => None,
                };
                match protocol {
                    Some(Protocol::Http1) => {
                        let conn = builders.0.serve_connection(TokioIo::new(stream), svc).with_upgrades();
                        drive(Box::pin(conn), |c| c.graceful_shutdown(), &stop).await;
                    }
                    Some(Protocol::Http2) => {
                        let conn = builders.1.serve_connection(TokioIo::new(stream), svc);
                        drive(Box::pin(conn), |c| c.graceful_shutdown(), &stop).await;
                    }
                    None => {}
                }
                drop(admitted);
            });
        }
        drop(listener);
        tracing::info!("shutting down: streams end, sockets close, in-flight requests get the grace period");
        self.shutdown();
        stop.cancel();
        let open_now = tasks.len();
        tokio::select! {
            _ = async { while tasks.join_next().await.is_some() {} } => {}
            _ = tokio::time::sleep(config.shutdown_grace) => {
                tracing::warn!(connections = open_now, "grace period over; closing what is left");
            }
        }
        tasks.shutdown().await;
        Ok(())
    }
}
