//! The store's connection to a plain Redis or to a Redis Cluster, as one
//! type.
//!
//! [`Conn::open`] asks the first seed URL that answers for `INFO cluster`:
//! with `cluster_enabled:1` the store uses the redis crate's cluster client
//! (seeded with every seed; it reads the slot map and connects to every
//! master, following `MOVED`/`ASK` redirections and refreshing the map), and
//! otherwise one multiplexed connection re-established in the background, as
//! before. Both get the same bounds: the store's timeout to connect and per
//! answer, two retries, at most 500 ms between them.
//!
//! What holds every command to one slot: each script call names a
//! session's seven keys, which share one hash tag (`keys.rs`), and every
//! other command names one key. A script therefore runs on the master of
//! its session's slot; `SCRIPT LOAD` goes to every node, and a master that
//! has not got a script (a promoted replica, a node added later, a
//! `SCRIPT FLUSH`) answers `NOSCRIPT`, on which the redis crate loads it
//! there and calls it again.

use redis::aio::{ConnectionLike, ConnectionManager, ConnectionManagerConfig};
use redis::cluster::ClusterClientBuilder;
use redis::cluster_async::ClusterConnection;
use redis::cluster_routing::{MultipleNodeRoutingInfo, RoutingInfo};
use redis::{Cmd, ConnectionInfo, IntoConnectionInfo, Pipeline, RedisFuture, Value};
use std::time::Duration;

use crate::StoreError;

/// A connection to a plain Redis or to a cluster. Cloning is cheap (both
/// are handles to one multiplexed connection per node).
#[derive(Clone)]
pub(crate) enum Conn {
    /// A plain Redis.
    Single(ConnectionManager),
    /// A Redis Cluster.
    Cluster(ClusterConnection),
}

/// How many times a call is retried before it fails, and the longest
/// pause between two tries (both clients).
const RETRIES: u32 = 2;
const MAX_RETRY_WAIT: Duration = Duration::from_millis(500);

/// The URL's connection settings, or [`StoreError::BadUrl`].
pub(crate) fn connection_info(url: &str) -> Result<ConnectionInfo, StoreError> {
    url.into_connection_info().map_err(|e| StoreError::BadUrl(e.to_string()))
}

/// The same settings on database 0 (the only one a cluster node has; a
/// cluster node refuses `SELECT` of any other).
pub(crate) fn on_db0(info: &ConnectionInfo) -> ConnectionInfo {
    info.clone().set_redis_settings(info.redis_settings().clone().set_db(0))
}

/// Whether an `INFO cluster` answer says the node runs in cluster mode.
pub(crate) fn cluster_enabled(info: &str) -> bool {
    info.lines().any(|l| l.trim() == "cluster_enabled:1")
}

/// Asks the node `info` names whether it runs in cluster mode, within
/// `timeout`.
pub(crate) async fn is_cluster(info: &ConnectionInfo, timeout: Duration) -> Result<bool, StoreError> {
    let client = redis::Client::open(on_db0(info)).map_err(|e| StoreError::BadUrl(e.to_string()))?;
    let probe = async {
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("INFO").arg("cluster").query_async::<String>(&mut c).await
    };
    let answer = match tokio::time::timeout(timeout, probe).await {
        Err(_) => return Err(StoreError::Unavailable(format!("no answer within {timeout:?}"))),
        // Refused credentials are the URL's: waiting does not mend them.
        Ok(Err(e)) if e.kind() == redis::ErrorKind::AuthenticationFailed => {
            return Err(StoreError::BadUrl(format!("its credentials are refused: {e}")))
        }
        Ok(answer) => answer?,
    };
    Ok(cluster_enabled(&answer))
}

/// `url` with its password (and user) left out, to log: `redis://:secret@h:1/0`
/// is `redis://***@h:1/0`.
pub fn redacted(url: &str) -> String {
    match (url.find("://"), url.rfind('@')) {
        (Some(s), Some(at)) if at > s + 3 => format!("{}***{}", &url[..s + 3], &url[at..]),
        _ => url.to_owned(),
    }
}

impl Conn {
    /// Connects to the Redis (or the cluster) that `seeds` name, each
    /// probed in turn within twice `timeout` until one answers: the URL of
    /// that seed, and the connection. A Redis Cluster client starts from
    /// every seed (it learns the rest); several seeds naming a plain Redis
    /// are [`StoreError::BadUrl`] (a plain Redis has one address).
    pub(crate) async fn open(seeds: &[&str], timeout: Duration) -> Result<(String, Conn), StoreError> {
        let infos = seeds.iter().map(|u| connection_info(u)).collect::<Result<Vec<_>, _>>()?;
        let mut failures = vec![];
        for (url, info) in seeds.iter().zip(&infos) {
            match is_cluster(info, timeout * 2).await {
                Ok(true) => return Ok((url.to_string(), Conn::cluster(seeds, &infos, timeout).await?)),
                Ok(false) if seeds.len() > 1 => {
                    return Err(StoreError::BadUrl(format!(
                        "{} is a plain Redis, not a node of a Redis Cluster: give a plain Redis one URL",
                        redacted(url)
                    )))
                }
                Ok(false) => return Ok((url.to_string(), Conn::single(url, info.clone(), timeout).await?)),
                Err(StoreError::Unavailable(e)) => failures.push(format!("{}: {e}", redacted(url))),
                Err(StoreError::BadUrl(e)) => {
                    return Err(StoreError::BadUrl(format!("{}: {e}", redacted(url))))
                }
                Err(e) => return Err(e),
            }
        }
        Err(StoreError::Unavailable(failures.join("; ")))
    }

    /// The cluster client, seeded with every seed.
    async fn cluster(
        seeds: &[&str],
        infos: &[ConnectionInfo],
        timeout: Duration,
    ) -> Result<Conn, StoreError> {
        for (url, info) in seeds.iter().zip(infos) {
            if info.redis_settings().db() != 0 {
                return Err(StoreError::BadUrl(format!(
                    "{} names database {}, but a Redis Cluster has only database 0",
                    redacted(url),
                    info.redis_settings().db()
                )));
            }
        }
        let unavailable = || {
            StoreError::Unavailable(format!(
                "no answer from {} within {:?}",
                seeds.iter().map(|u| redacted(u)).collect::<Vec<_>>().join(", "),
                timeout * 2
            ))
        };
        let client = ClusterClientBuilder::new(infos.to_vec())
            .connection_timeout(timeout)
            .response_timeout(timeout)
            .retries(RETRIES)
            .max_retry_wait(MAX_RETRY_WAIT.as_millis() as u64)
            .build()
            .map_err(|e| StoreError::BadUrl(e.to_string()))?;
        let conn = tokio::time::timeout(timeout * 2, client.get_async_connection())
            .await
            .map_err(|_| unavailable())??;
        Ok(Conn::Cluster(conn))
    }

    /// One multiplexed connection to the plain Redis at `url`.
    async fn single(url: &str, info: ConnectionInfo, timeout: Duration) -> Result<Conn, StoreError> {
        let unavailable =
            || StoreError::Unavailable(format!("no answer from {} within {:?}", redacted(url), timeout * 2));
        let client = redis::Client::open(info).map_err(|e| StoreError::BadUrl(e.to_string()))?;
        let mc = ConnectionManagerConfig::new()
            .set_connection_timeout(Some(timeout))
            .set_response_timeout(Some(timeout))
            .set_number_of_retries(RETRIES as usize)
            .set_max_delay(MAX_RETRY_WAIT);
        let conn = tokio::time::timeout(timeout * 2, ConnectionManager::new_with_config(client, mc))
            .await
            .map_err(|_| unavailable())??;
        Ok(Conn::Single(conn))
    }

    /// `cmd`'s answer from every master (one for a plain Redis), each
    /// with the node's address, for what must hold on all of them.
    pub(crate) async fn on_every_master(&mut self, cmd: Cmd) -> Result<Vec<(String, Value)>, StoreError> {
        match self {
            Conn::Single(c) => {
                let v: Value = cmd.query_async(c).await?;
                Ok(vec![("the server".to_owned(), v)])
            }
            Conn::Cluster(c) => {
                let routing = RoutingInfo::MultiNode((MultipleNodeRoutingInfo::AllMasters, None));
                match c.route_command(cmd, routing).await? {
                    Value::Map(answers) => {
                        answers.into_iter().map(|(node, v)| Ok((crate::reply::text(&node)?, v))).collect()
                    }
                    other => {
                        Err(StoreError::Protocol(format!("expected one answer per master, got {other:?}")))
                    }
                }
            }
        }
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command<'a>(&'a mut self, cmd: &'a Cmd) -> RedisFuture<'a, Value> {
        match self {
            Conn::Single(c) => c.req_packed_command(cmd),
            Conn::Cluster(c) => c.req_packed_command(cmd),
        }
    }

    fn req_packed_commands<'a>(
        &'a mut self,
        pipeline: &'a Pipeline,
        offset: usize,
        count: usize,
    ) -> RedisFuture<'a, Vec<Value>> {
        match self {
            Conn::Single(c) => c.req_packed_commands(pipeline, offset, count),
            Conn::Cluster(c) => c.req_packed_commands(pipeline, offset, count),
        }
    }

    fn get_db(&self) -> i64 {
        match self {
            Conn::Single(c) => c.get_db(),
            Conn::Cluster(c) => c.get_db(),
        }
    }
}

/// The addresses (`host`, `port`) of the nodes a `CLUSTER NODES` answer
/// lists as reachable: masters and replicas alike (classic pub/sub reaches
/// every node), not those flagged failing, without an address or still in
/// the handshake.
pub(crate) fn cluster_node_addresses(nodes: &str) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    for line in nodes.lines() {
        let f: Vec<&str> = line.split_whitespace().collect();
        let (Some(addr), Some(flags), Some(link)) = (f.get(1), f.get(2), f.get(7)) else { continue };
        if *link != "connected"
            || flags.split(',').any(|x| matches!(x, "fail" | "fail?" | "noaddr" | "handshake"))
        {
            continue;
        }
        let addr = addr.split(['@', ',']).next().unwrap_or("");
        let Some((host, port)) = addr.rsplit_once(':') else { continue };
        let host = host.trim_start_matches('[').trim_end_matches(']');
        if let (false, Ok(port)) = (host.is_empty(), port.parse()) {
            out.push((host.to_owned(), port));
        }
    }
    out
}

/// The other reachable nodes of the cluster the node `info` names belongs
/// to, each as `info` with its address; empty for a plain Redis (or when it
/// cannot tell within `timeout`).
pub(crate) async fn cluster_peers(info: &ConnectionInfo, timeout: Duration) -> Vec<ConnectionInfo> {
    if !is_cluster(info, timeout).await.unwrap_or(false) {
        return Vec::new();
    }
    let Ok(client) = redis::Client::open(on_db0(info)) else { return Vec::new() };
    let ask = async {
        let mut c = client.get_multiplexed_async_connection().await?;
        redis::cmd("CLUSTER").arg("NODES").query_async::<String>(&mut c).await
    };
    let Ok(Ok(nodes)) = tokio::time::timeout(timeout, ask).await else { return Vec::new() };
    cluster_node_addresses(&nodes)
        .into_iter()
        .map(|(host, port)| on_db0(info).set_addr(redis::ConnectionAddr::Tcp(host, port)))
        .filter(|peer| peer.addr().to_string() != info.addr().to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_logged_url_has_no_password() {
        assert_eq!(super::redacted("redis://:s3cret@127.0.0.1:6379/0"), "redis://***@127.0.0.1:6379/0");
        assert_eq!(super::redacted("redis://u:p@h:1/0"), "redis://***@h:1/0");
        assert_eq!(super::redacted("redis://127.0.0.1:6379/0"), "redis://127.0.0.1:6379/0");
        assert_eq!(super::redacted("not a url"), "not a url");
    }

    #[test]
    fn reads_cluster_enabled() {
        assert!(super::cluster_enabled("# Cluster\r\ncluster_enabled:1\r\n"));
        assert!(!super::cluster_enabled("# Cluster\r\ncluster_enabled:0\r\n"));
        assert!(!super::cluster_enabled(""));
    }

    #[test]
    fn reads_cluster_node_addresses() {
        let nodes = "07c3 127.0.0.1:30004@31004 slave e7d1 0 1426238317239 4 connected
67ed 127.0.0.1:30002@31002,host.example master - 0 1426238316232 2 connected 5461-10922
292f 127.0.0.1:30003@31003 master,fail - 0 1426238318243 3 disconnected 10923-16383
6ec2 :0@0 myself,master,noaddr - 0 0 0 connected
9a1b [::1]:30005@31005 myself,master - 0 0 5 connected 0-5460
garbage
";
        assert_eq!(
            super::cluster_node_addresses(nodes),
            [("127.0.0.1".to_owned(), 30004), ("127.0.0.1".to_owned(), 30002), ("::1".to_owned(), 30005)]
        );
    }
}
