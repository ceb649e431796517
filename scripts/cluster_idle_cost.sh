#!/usr/bin/env bash
# What idle sessions cost Redis in cluster mode (BENCHMARKS.md, "idle in a
# cluster"; docs/SPEC.md §8.1): a redis-server child and one release
# gapless-server node on it; N sessions initialized and left idle, first
# without a stream, then each with its standalone GET stream open; Redis's
# INFO commandstats and its CPU (INFO cpu, user + sys) over WINDOW seconds
# each. The client is a small asyncio program holding the N connections.
#   N=10000 WINDOW=10 bash scripts/cluster_idle_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-10000}
WINDOW=${WINDOW:-10}
cargo build -q --release -p gapless-server-bin
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
ulimit -n 65536 2>/dev/null || ulimit -n "$(ulimit -Hn)"
rport=$(free_port)
redis-server --port "$rport" --save "" --appendonly no --maxmemory-policy noeviction >/dev/null 2>&1 &
pids+=($!)
sleep 0.5
port=$(free_port)
# An idle timeout of 64 s: a connection pins its session after 4 s.
RUST_LOG=error target/release/gapless-server --bind "127.0.0.1:$port" --redis-url "redis://127.0.0.1:$rport/0" \
  --idle-timeout-secs 64 --max-connections $((N + 1000)) --max-connections-per-ip $((N + 1000)) \
  --max-sessions $((N + 1000)) --max-sessions-per-client $((N + 1000)) \
  --initialize-burst $((N + 1000)) --initialize-per-sec 1000000 >/dev/null 2>&1 &
pids+=($!)
for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null && break; sleep 0.1; done

measure() { # label
  redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null
  local cpu0; cpu0=$(redis-cli -p "$rport" INFO cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}')
  sleep "$WINDOW"
  local cpu1; cpu1=$(redis-cli -p "$rport" INFO cpu | awk -F: '/^used_cpu_(user|sys):/ {s += $2} END {print s}')
  redis-cli -p "$rport" INFO commandstats | grep '^cmdstat' | grep -v -e resetstat -e 'cmdstat_info:' |
    awk -F'[:=,]' -v n="$N" -v w="$WINDOW" -v label="$1" -v c0="$cpu0" -v c1="$cpu1" '
      { sub("cmdstat_", "", $1); calls[$1] = $3; total += $3 }
      END {
        printf "%s, %d sessions: %.1f Redis commands/s, Redis CPU %.2f %% of a core (", label, n, total / w, (c1 - c0) / w * 100
        sep = ""; for (c in calls) { printf "%s%s %.1f/s", sep, c, calls[c] / w; sep = ", " }
        print ")"
      }'
}

client=scripts/idle_client.py
# The client says when each phase is done, and waits for a line to go on.
coproc CLIENT { python3 "$client" "$port" "$N"; }
pids+=("$CLIENT_PID")
read -r line <&"${CLIENT[0]}" && [ "$line" = initialized ]
sleep 3
measure "idle, no stream"
echo >&"${CLIENT[1]}"
read -r line <&"${CLIENT[0]}" && [ "$line" = "streams open" ]
sleep 8 # the pins, after 4 s
measure "idle, each with its GET stream open"
echo >&"${CLIENT[1]}"
