//! A `gapless-server` process in cluster mode, as the cluster tests start
//! it (a module of the cluster tests only: the gateway's tests share
//! `common` without this binary).
#![allow(dead_code, unreachable_pub)]

use gapless_redis::testing::free_port;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// A `gapless-server` process in cluster mode, killed on drop.
pub struct Node {
    pub child: Child,
    pub url: String,
}

impl Node {
    pub fn start(redis: &str, extra: &[&str]) -> Node {
        Node::start_with_env(redis, extra, &[])
    }

    /// [`Node::start`] with more environment variables.
    pub fn start_with_env(redis: &str, extra: &[&str], env: &[(&str, &str)]) -> Node {
        let port = free_port();
        let child = Command::new(env!("CARGO_BIN_EXE_gapless-server"))
            .args(["--bind", &format!("127.0.0.1:{port}"), "--redis-url", redis])
            .args(extra)
            .env("RUST_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("the gapless-server binary");
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            assert!(Instant::now() < deadline, "node on port {port} did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Node { child, url: format!("http://127.0.0.1:{port}/mcp") }
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
