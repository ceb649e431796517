//! A real load balancer in front of cluster nodes: Debian's `haproxy`
//! (installed by `scripts/setup.sh`) with the configuration of
//! `docs/haproxy.cfg` (TCP, round robin, no stickiness), this test's ports
//! in place of the file's, on a free loopback port; killed on drop.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// The tested configuration, as `docs/cluster.md` shows it.
const CONFIG: &str = include_str!("../../../../docs/haproxy.cfg");

pub struct Haproxy {
    child: Child,
    dir: PathBuf,
    /// Where clients connect.
    pub addr: SocketAddr,
}

impl Haproxy {
    /// HAProxy balancing over `nodes` (their listening addresses).
    pub fn start(nodes: &[SocketAddr]) -> Haproxy {
        assert!(!nodes.is_empty());
        let port = gapless_redis::testing::free_port();
        let addr: SocketAddr = ([127, 0, 0, 1], port).into();
        let dir = std::env::temp_dir().join(format!("gapless-haproxy-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let config = configure(addr, nodes, &dir.join("stats.sock"));
        let path = dir.join("haproxy.cfg");
        std::fs::write(&path, config).expect("the configuration");
        let child = Command::new(binary())
            .arg("-db") // in the foreground, no daemon
            .arg("-f")
            .arg(&path)
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("haproxy (scripts/setup.sh installs it)");
        let mut h = Haproxy { child, dir, addr };
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(addr).is_err() {
            if let Ok(Some(status)) = h.child.try_wait() {
                panic!("haproxy exited at start-up: {status}");
            }
            assert!(Instant::now() < deadline, "haproxy did not listen on {addr}");
            std::thread::sleep(Duration::from_millis(20));
        }
        h.wait_up(nodes.len());
        h
    }

    /// The endpoint's URL through the balancer.
    pub fn url(&self) -> String {
        format!("http://{}/mcp", self.addr)
    }

    /// Connections each backend server took so far, by name (`node1`, ...),
    /// from the stats socket (`show stat`, field `stot`), with its check status.
    pub fn sessions(&self) -> Vec<(String, u64, String)> {
        let csv = self.stats("show stat\n");
        let mut out = vec![];
        let mut lines = csv.lines();
        let header: Vec<&str> = lines.next().unwrap_or("").trim_start_matches("# ").split(',').collect();
        let col = |name: &str| header.iter().position(|h| *h == name).expect("a column of show stat");
        let (px, sv, stot, status) = (col("pxname"), col("svname"), col("stot"), col("status"));
        for line in lines {
            let f: Vec<&str> = line.split(',').collect();
            if f.len() > stot && f[px] == "nodes" && f[sv].starts_with("node") {
                out.push((f[sv].to_owned(), f[stot].parse().unwrap_or(0), f[status].to_owned()));
            }
        }
        out
    }

    fn stats(&self, command: &str) -> String {
        use std::io::{Read, Write};
        let mut s =
            std::os::unix::net::UnixStream::connect(self.dir.join("stats.sock")).expect("the stats socket");
        s.write_all(command.as_bytes()).unwrap();
        let mut out = String::new();
        s.read_to_string(&mut out).unwrap();
        out
    }

    /// Until every server passed its first health check (`UP`), so that
    /// the round robin goes over all of them from the first connection.
    fn wait_up(&self, n: usize) {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let s = self.sessions();
            if s.len() == n && s.iter().all(|(_, _, status)| status == "UP") {
                return;
            }
            assert!(Instant::now() < deadline, "haproxy's servers did not come up: {s:?}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// `haproxy` on the `PATH`, else Debian's `/usr/sbin/haproxy` (not on a
/// user's `PATH` there).
fn binary() -> PathBuf {
    let on_path = std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join("haproxy"))
        .find(|p| p.is_file());
    on_path.unwrap_or_else(|| PathBuf::from("/usr/sbin/haproxy"))
}

/// `docs/haproxy.cfg` with `front` as the frontend's address, one server
/// line per node in place of the file's, and a stats socket for the test.
fn configure(front: SocketAddr, nodes: &[SocketAddr], stats: &std::path::Path) -> String {
    let mut out = String::new();
    let mut servers_written = false;
    for line in CONFIG.lines() {
        let t = line.trim_start();
        if t.starts_with("server node") {
            if !servers_written {
                for (i, n) in nodes.iter().enumerate() {
                    out.push_str(&format!("    server node{} {n}\n", i + 1));
                }
                servers_written = true;
            }
            continue;
        }
        if t.starts_with("bind 127.0.0.1:8080") {
            out.push_str(&format!("    bind {front}\n"));
            continue;
        }
        out.push_str(line);
        out.push('\n');
        if t == "global" {
            out.push_str(&format!("    stats socket {} mode 600 level user\n", stats.display()));
        }
    }
    assert!(servers_written && out.contains(&format!("bind {front}")), "docs/haproxy.cfg changed shape");
    out
}
