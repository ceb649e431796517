//! Redis Cluster failovers with every gapless node alive (`docs/SPEC.md`
//! §8.6): a failover of the master holding a node's lease, or of the one
//! holding a running task's keys, never makes the live node look dead: its
//! task is never `failed` (`-31002`) and its event stream completes on
//! another node. `GAPLESS_FAILOVER_ROUNDS` rounds (default 1; each a fresh
//! Redis Cluster of 3 masters with a replica each, alternating which
//! master is killed); `scripts/failover_soak.sh` runs many.

mod common;
#[path = "common/node.rs"]
mod node;
#[path = "common/tasks.rs"]
mod tasks;

use gapless_redis::testing::RedisCluster;
use node::Node;
use serde_json::{json, Value};
use std::time::{Duration, Instant};
use tasks::{ended, follow, task_call};

/// How many events the task emits, 5 ms apart: it runs across the failover.
const EVENTS: u64 = 2000;

/// The value of `key` on the master serving it.
fn get(cluster: &RedisCluster, key: &str) -> Option<String> {
    let port = cluster.master_of(key);
    let out = std::process::Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string(), "GET", key])
        .output()
        .expect("redis-cli");
    let v = String::from_utf8_lossy(&out.stdout).trim().to_owned();
    (!v.is_empty()).then_some(v)
}

async fn round(n: usize) {
    let cluster = RedisCluster::start_with_replicas(3, 1);
    let seeds = (0..3).map(|i| cluster.url(i)).collect::<Vec<_>>().join(",");
    let (a, b) = (Node::start(&seeds, &[]), Node::start(&seeds, &[]));
    let created = task_call(
        &a.url,
        "tools/call",
        json!({"name": "task_events", "arguments": {"count": EVENTS, "interval_ms": 5}}),
    )
    .await;
    let id = created["result"]["taskId"].as_str().unwrap_or_else(|| panic!("a task: {created}")).to_owned();
    let record = get(&cluster, &format!("gapless:task:{{{id}}}")).expect("the task's record");
    let record: Value = serde_json::from_str(&record).unwrap();
    let node = record["node"].as_str().expect("the task's node").to_owned();
    let follower = tokio::spawn(follow(b.url.clone(), id.clone()));
    tokio::time::sleep(Duration::from_millis(1000)).await;
    // Even rounds: the master holding a's lease; odd: the task's.
    let key = match n % 2 {
        0 => format!("gapless:node:{node}:alive"),
        _ => format!("gapless:task:{{{id}}}"),
    };
    let mut cluster = cluster;
    let master = cluster.master_of(&key);
    eprintln!("round {n}: killing the master of {key} (port {master})");
    cluster.node(master).kill();
    let killed = Instant::now();
    // Until the task ends: never `failed` on any node.
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        let r = task_call(&b.url, "tasks/get", json!({"taskId": id})).await;
        let status = r["result"]["status"].as_str().unwrap_or_default().to_owned();
        assert_ne!(status, "failed", "round {n}: a live node's task was failed: {r}");
        if status == "completed" || status == "cancelled" {
            break status;
        }
        assert!(Instant::now() < deadline, "round {n}: the task did not end: {r}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert_eq!(status, "completed");
    let (seen, end) =
        tokio::time::timeout(Duration::from_secs(30), follower).await.expect("the stream ended").unwrap();
    assert_eq!(ended(Some(end)), "ended", "round {n}");
    assert_eq!(seen, (0..EVENTS).collect::<Vec<_>>(), "round {n}: every event, once, in order");
    eprintln!("round {n}: completed, every event, {:?} after the kill", killed.elapsed());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_master_failover_takes_no_live_node_for_dead() {
    let rounds: usize =
        std::env::var("GAPLESS_FAILOVER_ROUNDS").ok().and_then(|r| r.parse().ok()).unwrap_or(1);
    for n in 0..rounds {
        round(n).await;
    }
}
