//! A `redis-server` child process on a free loopback port, for tests
//! (feature `testing`). Never a Redis that happens to be running: each
//! [`RedisServer`] is started by the test, on its own port and directory,
//! and killed when dropped.

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
        let port = free_port();
        let dir = std::env::temp_dir().join(format!("gapless-redis-{}-{port}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("a temporary directory");
        let mut args: Vec<String> =
            ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--maxmemory-policy", "noeviction"]
                .iter()
                .map(|s| s.to_string())
                .collect();
        args.extend(extra.iter().map(|s| s.to_string()));
        let mut s = RedisServer { child: None, port, dir, args };
        s.spawn();
        s
    }

    fn spawn(&mut self) {
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
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server on port {} did not start", self.port);
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// `redis://127.0.0.1:PORT/0`.
    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/0", self.port)
    }

    /// Kills the process (as a crash would), keeping the port.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Starts it again on the same port (empty: nothing is persisted).
    pub fn restart(&mut self) {
        self.kill();
        self.spawn();
    }
}

impl Drop for RedisServer {
    fn drop(&mut self) {
        self.kill();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
