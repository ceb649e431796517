#!/usr/bin/env bash
# What idle sessions of gapless-gateway in cluster mode cost Redis, beside
# gapless-server's own (the load-independent figure of BENCHMARKS.md's
# gateway cluster section): a redis-server child and, per target, one node
# on it (the gateway in front of ts_upstream.mjs with its event store, or
# gapless-server alone), N sessions initialized and left idle, then Redis's
# INFO commandstats over WINDOW seconds. Run scripts/setup.sh first.
#   N=50 WINDOW=10 bash scripts/gateway_idle_cost.sh
set -euo pipefail
cd "$(dirname "$0")/.."
N=${N:-50}
WINDOW=${WINDOW:-10}
cargo build -q -p gapless-gateway -p gapless-server-bin
free_port() { python3 -c 'import socket;s=socket.socket();s.bind(("127.0.0.1",0));print(s.getsockname()[1])'; }
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
measure() { # name, node command...
  local name=$1; shift
  local rport; rport=$(free_port)
  redis-server --port "$rport" --save "" --appendonly no --maxmemory-policy noeviction >/dev/null 2>&1 &
  pids+=($!)
  sleep 0.5
  local gport; gport=$(free_port)
  RUST_LOG=error "$@" --bind "127.0.0.1:$gport" --redis-url "redis://127.0.0.1:$rport/0" >/dev/null 2>&1 &
  pids+=($!)
  for _ in $(seq 100); do (exec 3<>"/dev/tcp/127.0.0.1/$gport") 2>/dev/null && break; sleep 0.1; done
  for _ in $(seq "$N"); do
    curl -s -o /dev/null -X POST "http://127.0.0.1:$gport/mcp" -H 'content-type: application/json' \
      -H 'accept: application/json, text/event-stream' \
      -d '{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}'
  done
  sleep 3
  redis-cli -p "$rport" CONFIG RESETSTAT >/dev/null
  sleep "$WINDOW"
  redis-cli -p "$rport" INFO commandstats | grep '^cmdstat' | grep -v resetstat |
    awk -F'[:=,]' -v n="$N" -v w="$WINDOW" -v name="$name" '
      { sub("cmdstat_", "", $1); calls[$1] = $3; total += $3 }
      END {
        printf "%s: %.2f Redis commands per idle session per second (", name, total / w / n
        sep = ""; for (c in calls) { printf "%s%s %.2f", sep, c, calls[c] / w / n; sep = ", " }
        print ")"
      }'
}
up_port_file=$(mktemp)
(cd server/gateway/tests/upstreams && exec node ts_upstream.mjs --port 0 --event-store >"$up_port_file" 2>/dev/null) &
pids+=($!)
for _ in $(seq 100); do [ -s "$up_port_file" ] && break; sleep 0.1; done
uport=$(awk '{print $2}' "$up_port_file")
measure gapless-gateway target/debug/gapless-gateway --upstream "http://127.0.0.1:$uport/mcp"
measure gapless-server target/debug/gapless-server
