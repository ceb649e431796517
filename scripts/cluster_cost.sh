#!/usr/bin/env bash
# What one delivered event costs a cluster's Redis (issue 32, BENCHMARKS.md):
# a redis-server of this script's own on a free loopback port (no disk,
# noeviction), one gapless-server node on it, and benches/e2e's
# `gapless-load drive` as the client (one process, one thread), which
# initializes the sessions and calls the demo's `emit_events` (64-byte
# `payload_bytes`) on each, reading and checking every event of the SSE
# response.
#
#   scripts/cluster_cost.sh one [N]        one stream: a sequential publisher
#   scripts/cluster_cost.sh many [N] [S]   S sessions (default 50) at once, N events each
#   scripts/cluster_cost.sh raw            redis-benchmark -P 1000 -c 1 XADD with the
#                                          store's entry shape, on the same kind of Redis
#
# For one and many it prints events/s (load-dependent: read `uptime` beside
# it), and what does not depend on the load: Redis commands per delivered
# event (`INFO commandstats`, scripts' own calls included, the commonest by
# name) and Redis CPU per event (`INFO cpu`, user + system), over the calls
# after a warm-up (`CONFIG RESETSTAT` between); and the node's own CPU per
# event (`/proc/<pid>/stat`, user + system) and the client's, apart. N
# defaults to 20 000 (one) and 2 000 (many).
#
# SERVER=path picks the binary (default target/release/gapless-server, built
# here), LOAD=path the client (default benches/e2e's, built here). Needs
# redis-server, redis-cli, redis-benchmark (scripts/setup.sh installs them),
# curl and python3.
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?usage: scripts/cluster_cost.sh one|many|raw [N] [S]}
case $mode in
  one) n=${2:-20000}; sessions=1 ;;
  many) n=${2:-2000}; sessions=${3:-50} ;;
  raw) ;;
  *) echo "unknown mode $mode (one, many or raw)" >&2; exit 2 ;;
esac
free_port() { python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
work=$(mktemp -d)
pids=()
cleanup() {
  for ((i = ${#pids[@]} - 1; i >= 0; i--)); do kill "${pids[$i]}" 2>/dev/null || true; wait "${pids[$i]}" 2>/dev/null || true; done
  rm -rf "$work"
}
trap cleanup EXIT
rport=$(free_port)
redis-server --bind 127.0.0.1 --port "$rport" --dir "$work" --save '' --appendonly no \
  --maxmemory-policy noeviction >"$work/redis.log" 2>&1 &
pids+=($!)
rcli() { redis-cli -p "$rport" "$@"; }
for _ in $(seq 100); do rcli ping >/dev/null 2>&1 && break; sleep 0.05; done

if [ "$mode" = raw ]; then
  # The store's entry: s (stream), i (index), v (previous seq), n (nonce), p (payload: 64 bytes).
  payload=$(printf 'x%.0s' $(seq 64))
  redis-benchmark -p "$rport" -P 1000 -c 1 -n 1000000 -q \
    XADD gapless:bench '*' s 2 i 1 v 0 n 0123456789abcdef p "$payload" | tr '\r' '\n' | grep -E 'requests per second' | tail -1
  exit 0
fi

if [ -z "${SERVER:-}" ]; then
  cargo build -q --release -p gapless-server-bin
  SERVER=${CARGO_TARGET_DIR:-target}/release/gapless-server
fi
port=$(free_port)
RUST_LOG=error "$SERVER" --bind "127.0.0.1:$port" --redis-url "redis://127.0.0.1:$rport/0" >"$work/node.log" 2>&1 &
pids+=($!)
node_pid=$!
url=http://127.0.0.1:$port/mcp
for _ in $(seq 300); do curl -s -o /dev/null "http://127.0.0.1:$port/" && break; sleep 0.1; done
# The client: benches/e2e's gapless-load in its `drive` mode, one process
# for all sessions, whose own CPU it reports (50 curls were a load of their
# own on a 2-core machine). It
# initializes the sessions and makes a warm-up call each, says `ready`, and
# on our line makes the measured calls at once, checking every event.
if [ -z "${LOAD:-}" ]; then
  cargo build -q --release --manifest-path benches/e2e/Cargo.toml --target-dir benches/e2e/target -p gapless-load
  LOAD=benches/e2e/target/release/gapless-load
fi
coproc DRIVE { "$LOAD" drive --addr "127.0.0.1:$port" --sessions "$sessions" --count "$n" --payload 64 2>"$work/drive.log"; }
read -r line <&"${DRIVE[0]}" || true
[ "$line" = ready ] || { echo "the load client did not start; its log and the node's:" >&2; cat "$work/drive.log" "$work/node.log" >&2; exit 1; }
cpu() { rcli info cpu | tr -d '\r' | awk -F: '/^used_cpu_(user|sys):/ { t += $2 } END { printf "%.6f", t }'; }
# The node's CPU seconds so far (utime + stime).
node_cpu() { awk -v hz="$(getconf CLK_TCK)" '{ printf "%.6f", ($14 + $15) / hz }' "/proc/$node_pid/stat"; }
rcli config resetstat >/dev/null
c0=$(cpu)
n0=$(node_cpu)
echo go >&"${DRIVE[1]}"
read -r line <&"${DRIVE[0]}" || true
c1=$(cpu)
n1=$(node_cpu)
read -r word wall client events <<<"$line"
[ "$word" = done ] || { echo "the load client failed; its log and the node's:" >&2; cat "$work/drive.log" >&2; tail -20 "$work/node.log" >&2; exit 1; }
rcli info commandstats | tr -d '\r' >"$work/stats"
python3 - "$work/stats" "$n" "$sessions" "$wall" "$client" "$c0" "$c1" "$n0" "$n1" "$(cut -d' ' -f1 /proc/loadavg)" <<'EOF'
import re, sys
stats, n, sessions, wall, client, c0, c1, n0, n1, load = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), *map(float, sys.argv[4:10]), sys.argv[10]
calls, usec = {}, {}
for line in open(stats):
    m = re.match(r'cmdstat_([^:]+):calls=(\d+),usec=(\d+)', line)
    if m:
        calls[m.group(1)] = int(m.group(2))
        usec[m.group(1)] = int(m.group(3))
events = n * sessions
total = sum(calls.values())
print(f"{sessions} session(s) x {n} events: {events / wall:,.0f} events/s over {wall:.2f} s (load {load})")
print(f"Redis commands per delivered event: {total / events:.2f} ({total} in all)")
print("  commonest: " + ", ".join(f"{k} {v / events:.3f}" for k, v in sorted(calls.items(), key=lambda kv: -kv[1])[:8]))
print(f"Redis CPU per delivered event: {(c1 - c0) / events * 1e6:.2f} us (user + system)")
print(f"node CPU per delivered event: {(n1 - n0) / events * 1e6:.2f} us (user + system; 10 ms ticks)")
print(f"client CPU per delivered event: {client / events * 1e6:.2f} us (gapless-load drive, one thread)")
# A script's usec include its inner commands' (which are counted again
# under their own names).
print("  most time (commandstats usec per event): " + ", ".join(f"{k} {v / events:.2f}" for k, v in sorted(usec.items(), key=lambda kv: -kv[1])[:6]))
EOF
