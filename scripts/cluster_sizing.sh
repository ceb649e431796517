#!/usr/bin/env bash
# The memory half of "Sizing a cluster" (docs/cluster.md; BENCHMARKS.md): a Redis
# Cluster of 3 masters (no replicas) that this script starts on free loopback
# ports, one release gapless-server node on it, N sessions initialized and
# left idle, then each with its standalone GET stream open. It reports
#   - Redis memory per session (INFO memory used_memory, summed over the
#     masters, before and after), and per open stream (a pinned session);
#   - the node's RSS per session and per open stream (/proc/<pid>/status);
#   - how the sessions spread over the masters (their meta keys on each, by
#     SCAN), against an even third.
# The per-event costs (Redis commands, Redis CPU and node CPU per delivered
# event) are scripts/cluster_cost.sh's; the idle ones scripts/cluster_idle_cost.sh's.
#   N=3000 bash scripts/cluster_sizing.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-3000}
cargo build -q --release -p gapless-server-bin
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
work=$(mktemp -d)
pids=()
cleanup() {
  for pid in "${pids[@]}"; do kill "$pid" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
ports=()
for i in 1 2 3; do
  p=$(free_port)
  mkdir -p "$work/r$i"
  redis-server --bind 127.0.0.1 --port "$p" --cluster-enabled yes --cluster-port "$(free_port)" \
    --cluster-config-file nodes.conf --dir "$work/r$i" --save '' --appendonly no \
    --maxmemory-policy noeviction >"$work/r$i.log" 2>&1 &
  pids+=($!)
  ports+=("$p")
done
for p in "${ports[@]}"; do
  for _ in $(seq 100); do redis-cli -p "$p" ping >/dev/null 2>&1 && break; sleep 0.05; done
done
redis-cli --cluster create "${ports[@]/#/127.0.0.1:}" --cluster-yes >"$work/create.log" 2>&1
for p in "${ports[@]}"; do
  for _ in $(seq 200); do redis-cli -p "$p" cluster info | grep -q cluster_state:ok && break; sleep 0.05; done
done
seeds=$(printf 'redis://127.0.0.1:%s/0,' "${ports[@]}")
port=$(free_port)
RUST_LOG=error target/release/gapless-server --bind "127.0.0.1:$port" --redis-url "${seeds%,}" \
  --idle-timeout-secs 64 --max-connections $((N + 1000)) --max-connections-per-ip $((N + 1000)) \
  --max-sessions $((N + 1000)) --max-sessions-per-client $((N + 1000)) \
  --initialize-burst $((N + 1000)) --initialize-per-sec 1000000 >"$work/node.log" 2>&1 &
node_pid=$!
pids+=("$node_pid")
for _ in $(seq 200); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done
redis_mem() { for p in "${ports[@]}"; do redis-cli -p "$p" info memory | tr -d '\r' | awk -F: '/^used_memory:/ { print $2 }'; done | awk '{ s += $1 } END { print s }'; }
rss() { awk '/^VmRSS:/ { print $2 * 1024 }' "/proc/$node_pid/status"; }
sleep 2
m0=$(redis_mem)
r0=$(rss)
coproc CLIENT { python3 scripts/idle_client.py "$port" "$N"; }
pids+=("$CLIENT_PID")
read -r line <&"${CLIENT[0]}" && [ "$line" = initialized ]
sleep 3
m1=$(redis_mem)
r1=$(rss)
spread=$(for p in "${ports[@]}"; do redis-cli -p "$p" --scan --pattern 'gapless:{*}:m' | wc -l; done | paste -sd' ')
echo >&"${CLIENT[1]}"
read -r line <&"${CLIENT[0]}" && [ "$line" = "streams open" ]
sleep 8 # the pins, after 4 s
m2=$(redis_mem)
r2=$(rss)
echo >&"${CLIENT[1]}"
python3 - "$N" "$m0" "$m1" "$m2" "$r0" "$r1" "$r2" "$spread" "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF'
import math, sys
n = int(sys.argv[1])
m0, m1, m2, r0, r1, r2 = map(int, sys.argv[2:8])
spread = [int(x) for x in sys.argv[8].split()]
print(f"{n} sessions on one node, a Redis Cluster of 3 masters (load {sys.argv[9]})")
print(f"Redis memory per idle session: {(m1 - m0) / n / 1024:.2f} KiB; per open stream (pinned): {(m2 - m1) / n:.0f} B more")
print(f"node RSS per idle session: {(r1 - r0) / n / 1024:.2f} KiB; per open stream: {(r2 - r1) / n / 1024:.2f} KiB more")
even = n / 3
sd = math.sqrt(n * (1 / 3) * (2 / 3))
print(f"sessions per master: {spread} (an even third: {even:.0f}; a random spread's standard deviation: {sd:.0f};"
      f" largest off by {max(abs(s - even) for s in spread) / even * 100:.1f} %)")
assert sum(spread) == n, f"{sum(spread)} sessions found on the masters, {n} made"
EOF
