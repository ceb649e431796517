//! `redis-server` child processes on free loopback ports, for tests
//! (feature `testing`). Never a Redis that happens to be running: each
//! [`RedisServer`] (and each node of a [`RedisCluster`]) is started by the
//! test, on its own port and directory, and killed when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A running `redis-server`, killed on drop.
#[derive(Debug)]
pub struct RedisServer {
    child: Option<Child>,
    /// Its port on 127.0.0.1.
    pub port: u16,
    dir: PathBuf,
    args: Vec<String>,
}

/// Runs one command (`args[0]` and its arguments) on the Redis at
/// `127.0.0.1:port`, database 0, over a connection of its own.
///
/// # Panics
/// When Redis cannot be reached or answers with an error.
pub async fn command(port: u16, args: &[&str]) -> redis::Value {
    let client = redis::Client::open(format!("redis://127.0.0.1:{port}/0")).expect("a loopback URL");
    let mut c = client.get_multiplexed_async_connection().await.expect("Redis answers");
    let mut cmd = redis::cmd(args[0]);
    for a in &args[1..] {
        cmd.arg(*a);
    }
    cmd.query_async(&mut c).await.expect("the command succeeds")
}

/// Every test server's arguments: loopback only, no persistence, and the
/// eviction policy the store requires.
const BASE: [&str; 8] =
    ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"];

/// A port nobody listens on now.
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free loopback port")
}

impl RedisServer {
    /// Starts `redis-server` with no persistence and `noeviction`, plus
    /// `extra` arguments (e.g. `["--maxmemory-policy", "allkeys-lru"]`).
    ///
    /// # Panics
    /// When `redis-server` is not installed (`scripts/setup.sh` installs
    /// it) or does not answer within 10 s.
    pub fn start(extra: &[&str]) -> RedisServer {
        let args: Vec<String> = BASE.iter().chain(extra).map(|s| s.to_string()).collect();
        // A free port may be taken by another test between `free_port` and
        // the bind (then this child exits): try another.
        (0..5)
            .find_map(|_| Self::try_start(&args))
            .unwrap_or_else(|| panic!("redis-server could not bind a free port in 5 tries"))
    }

    /// One try of [`RedisServer::start`] on a fresh free port.
    fn try_start(args: &[String]) -> Option<RedisServer> {
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("gapless-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut s = RedisServer { child: None, port, dir, args: args.to_vec() };
        s.spawn().then_some(s)
    }

    /// Starts the child on `self.port`; `false` if it exited (the port was
    /// taken). Only this child's answer counts: another process listening
    /// on the port is told apart by its process id.
    fn spawn(&mut self) -> bool {
        let child = Command::new("redis-server")
            .arg("--port")
            .arg(self.port.to_string())
            .arg("--dir")
            .arg(&self.dir)
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server is installed (scripts/setup.sh installs it)");
        let mine = format!("process_id:{}", child.id());
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(c) = self.child.as_mut() {
                if matches!(c.try_wait(), Ok(Some(_))) {
                    self.child = None;
                    return false;
                }
            }
            if std::net::TcpStream::connect(("127.0.0.1", self.port)).is_ok()
                && cli(self.port, &["INFO", "server"]).lines().any(|l| l.trim() == mine)
            {
                return true;
            }
            assert!(Instant::now() < deadline, "redis-server on port {} did not start", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// The `redis-server` process's id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// A store on this server whose sessions expire after `idle` without
    /// use (the other settings the defaults).
    ///
    /// # Panics
    /// When the store cannot connect.
    pub async fn store_with_idle_timeout(&self, idle: Duration) -> crate::RedisStore {
        let cfg = crate::StoreConfig { idle_timeout: idle, ..crate::StoreConfig::default() };
        crate::RedisStore::connect(&self.url(), cfg).await.expect("the store connects")
    }

    /// A plain connection to this server, for a test's own commands.
    ///
    /// # Panics
    /// When it cannot connect.
    pub async fn admin(&self) -> redis::aio::MultiplexedConnection {
        let client = redis::Client::open(self.url()).expect("a valid URL");
        client.get_multiplexed_async_connection().await.expect("a connection")
    }

    /// Kills the process (as a crash would), keeping the port.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Whether the process runs (it was not killed).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    /// Starts it again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) {
        self.kill();
        assert!(self.spawn(), "port {} was taken while redis-server was down", self.port);
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A Redis Cluster of `redis-server` nodes on free loopback ports (no
/// persistence, `noeviction`), its slots spread by `redis-cli --cluster
/// create`; every node is killed on drop.
#[derive(Debug)]
pub struct RedisCluster {
    /// The nodes: the masters first, then their replicas (if any).
    pub nodes: Vec<RedisServer>,
}

impl RedisCluster {
    /// Starts `masters` nodes in cluster mode, creates the cluster and waits
    /// until every node reports `cluster_state:ok`.
    ///
    /// # Panics
    /// When `redis-server` or `redis-cli` is missing (`scripts/setup.sh`
    /// installs both), or the cluster is not up within 20 s.
    pub fn start(masters: usize) -> RedisCluster {
        Self::build(masters, 0, "2000")
    }

    /// `masters` masters with `replicas` replicas each, a node timeout of
    /// 1 s (a master that stops answering is failed over by its replica
    /// within a few seconds), and replicas that may be promoted however
    /// long their link was down (`cluster-replica-validity-factor 0`).
    /// Waits until every replica's link to its master is up.
    ///
    /// # Panics
    /// As [`RedisCluster::start`].
    pub fn start_with_replicas(masters: usize, replicas: usize) -> RedisCluster {
        let c = Self::build(masters, replicas, "1000");
        let deadline = Instant::now() + Duration::from_secs(20);
        for n in &c.nodes {
            loop {
                let info = cli(n.port, &["INFO", "replication"]);
                if info.contains("role:master") || info.contains("master_link_status:up") {
                    break;
                }
                assert!(Instant::now() < deadline, "the replica on port {} did not sync", n.port);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        c
    }

    fn build(masters: usize, replicas: usize, node_timeout: &str) -> RedisCluster {
        let nodes: Vec<RedisServer> = (0..masters * (1 + replicas))
            .map(|_| {
                // The cluster bus port is set explicitly: the default, port
                // + 10000, may be taken or beyond 65535. Each try takes
                // fresh ports for both.
                (0..5)
                    .find_map(|_| {
                        let bus = free_port().to_string();
                        let cluster = [
                            "--cluster-enabled",
                            "yes",
                            "--cluster-port",
                            &bus,
                            "--cluster-config-file",
                            "nodes.conf",
                            "--cluster-node-timeout",
                            node_timeout,
                            "--cluster-replica-validity-factor",
                            "0",
                        ];
                        let args: Vec<String> = BASE.iter().chain(&cluster).map(|s| s.to_string()).collect();
                        RedisServer::try_start(&args)
                    })
                    .expect("a cluster node could bind free ports in 5 tries")
            })
            .collect();
        let addrs: Vec<String> = nodes.iter().map(|n| format!("127.0.0.1:{}", n.port)).collect();
        let out = Command::new("redis-cli")
            .args(["--cluster", "create"])
            .args(&addrs)
            .args(["--cluster-replicas", &replicas.to_string(), "--cluster-yes"])
            .stdin(Stdio::null())
            .output()
            .expect("redis-cli is installed (scripts/setup.sh installs redis-tools)");
        assert!(
            out.status.success(),
            "redis-cli --cluster create failed: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let deadline = Instant::now() + Duration::from_secs(20);
        for n in &nodes {
            while !cli(n.port, &["CLUSTER", "INFO"]).contains("cluster_state:ok") {
                assert!(Instant::now() < deadline, "the cluster node on port {} is not ok", n.port);
                std::thread::sleep(Duration::from_millis(50));
            }
        }
        RedisCluster { nodes }
    }

    /// `redis://127.0.0.1:PORT/0` of node `i`: the store finds the others.
    pub fn url(&self, i: usize) -> String {
        self.nodes[i].url()
    }

    /// The hash slot of `key` (`CLUSTER KEYSLOT`).
    pub fn slot(&self, key: &str) -> u16 {
        let s = cli(self.live_port(), &["CLUSTER", "KEYSLOT", key]);
        s.trim().parse().unwrap_or_else(|_| panic!("CLUSTER KEYSLOT answered {s:?}"))
    }

    /// The port of the master serving `key`'s slot (from `CLUSTER NODES`).
    pub fn master_of(&self, key: &str) -> u16 {
        let slot = self.slot(key);
        masters(self.live_port())
            .into_iter()
            .find(|(_, ranges)| ranges.iter().any(|r| r.contains(&slot)))
            .map(|(port, _)| port)
            .unwrap_or_else(|| panic!("no master serves slot {slot}"))
    }

    /// The ports of the replicas of the master on `master_port`, as a
    /// running node sees them (`CLUSTER NODES`).
    pub fn replicas_of(&self, master_port: u16) -> Vec<u16> {
        let nodes = cli(self.live_port(), &["CLUSTER", "NODES"]);
        let port_of =
            |f: &[&str]| -> Option<u16> { f.get(1)?.split('@').next()?.rsplit_once(':')?.1.parse().ok() };
        let lines: Vec<Vec<&str>> = nodes.lines().map(|l| l.split_whitespace().collect()).collect();
        let Some(id) = lines.iter().find(|f| port_of(f) == Some(master_port)).map(|f| f[0]) else {
            return vec![];
        };
        lines.iter().filter(|f| f.get(3) == Some(&id)).filter_map(|f| port_of(f)).collect()
    }

    /// The node on `port`.
    pub fn node(&mut self, port: u16) -> &mut RedisServer {
        self.nodes.iter_mut().find(|n| n.port == port).expect("a node of this cluster")
    }

    /// A node that is running (one may have been killed).
    fn live_port(&self) -> u16 {
        self.nodes.iter().find(|n| n.is_running()).map_or(self.nodes[0].port, |n| n.port)
    }
}

/// `redis-cli -p PORT ARGS...`'s output (empty when it fails).
fn cli(port: u16, args: &[&str]) -> String {
    Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .stdin(Stdio::null())
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
        .unwrap_or_default()
}

/// Each master's port and slot ranges, as node `port` sees them.
fn masters(port: u16) -> Vec<(u16, Vec<std::ops::RangeInclusive<u16>>)> {
    cli(port, &["CLUSTER", "NODES"])
        .lines()
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            if !f.get(2)?.split(',').any(|x| x == "master") {
                return None;
            }
            let p = f.get(1)?.split('@').next()?.rsplit_once(':')?.1.parse().ok()?;
            let ranges = f[8.min(f.len())..]
                .iter()
                .filter_map(|r| match r.split_once('-') {
                    Some((a, b)) => Some(a.parse().ok()?..=b.parse().ok()?),
                    None => r.parse().ok().map(|a| a..=a),
                })
                .collect();
            Some((p, ranges))
        })
        .collect()
}
