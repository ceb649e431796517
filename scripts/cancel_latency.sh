#!/usr/bin/env bash
# Cross-node cancel → the work stops (issue 44, item 4; BENCHMARKS.md): a
# redis-server and two release gapless-server nodes of this script's own on
# free loopback ports. K times: a task (the demo's `slow_compute`, 30 s) is
# created on node A, `tasks/cancel` is sent to node B, and node A's
# `gapless_tasks_running` gauge (`/metrics`) is read every 0.5 ms until the
# work is gone. Prints p50, p99 and max of cancel sent → work stopped, and of
# cancel answered → work stopped (wall-clock: read the load beside them).
#   K=200 bash scripts/cancel_latency.sh   (at most 250: a cancelled task counts
#                                          against its client's bound, 256, until it expires)
set -euo pipefail
cd "$(dirname "$0")/.."
K=${K:-200}
[ "$K" -le 250 ] || { echo "K=$K: at most 250 (the per-client bound on tasks)" >&2; exit 2; }
cargo build -q --release -p gapless-server-bin
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
rport=$(free_port)
redis-server --bind 127.0.0.1 --port "$rport" --save '' --appendonly no --maxmemory-policy noeviction >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do redis-cli -p "$rport" ping >/dev/null 2>&1 && break; sleep 0.05; done
ports=()
for _ in a b; do
  p=$(free_port)
  RUST_LOG=error target/release/gapless-server --bind "127.0.0.1:$p" --redis-url "redis://127.0.0.1:$rport/0" >/dev/null 2>&1 &
  pids+=($!)
  ports+=("$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$p") 2>/dev/null && break; sleep 0.05; done
done
python3 - "${ports[0]}" "${ports[1]}" "$K" <<'EOF'
import http.client, json, statistics, sys, time
a, b, k = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {"extensions": {"io.modelcontextprotocol/tasks": {}}}}

def call(conn, method, params, name):
    params = dict(params, _meta=META)
    body = json.dumps({"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
    conn.request("POST", "/mcp", body, {"content-type": "application/json",
                 "accept": "application/json, text/event-stream", "mcp-protocol-version": "2026-07-28",
                 "mcp-method": method, "mcp-name": name})
    r = conn.getresponse()
    return json.loads(r.read())

def running(conn):
    conn.request("GET", "/metrics")
    text = conn.getresponse().read().decode()
    return next(int(float(l.split()[-1])) for l in text.splitlines() if l.startswith("gapless_tasks_running "))

ca, cb, ma = (http.client.HTTPConnection("127.0.0.1", p) for p in (a, b, a))
sent, answered = [], []
for _ in range(k):
    created = call(ca, "tools/call", {"name": "slow_compute", "arguments": {"seconds": 30}}, "slow_compute")
    task = created.get("result", {}).get("taskId")
    assert task, f"no task: {created}"
    while running(ma) != 1:
        time.sleep(0.001)
    t0 = time.perf_counter()
    ack = call(cb, "tasks/cancel", {"taskId": task}, task)
    t1 = time.perf_counter()
    assert ack["result"]["resultType"] == "complete", ack
    while running(ma) != 0:
        time.sleep(0.0005)
    t2 = time.perf_counter()
    sent.append((t2 - t0) * 1000)
    answered.append((t2 - t1) * 1000)

def q(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))]

load = open("/proc/loadavg").read().split()[0]
for name, xs in (("cancel sent -> work stopped", sent), ("cancel answered -> work stopped", answered)):
    print(f"{name}: p50 {statistics.median(xs):.2f} ms, p99 {q(xs, 0.99):.2f} ms, max {max(xs):.2f} ms ({k} cancels, load {load})")
EOF
